"""`rlvr compare`: two recipes x two seeds on the tiny demo task, interrupted mid-run and continued; the
budget and plan checks; the results and the self-contained HTML report."""

import json
import re
import shutil

import pytest
from typer.testing import CliRunner

import rlvr.train.loop as loop
from rlvr.cli import app
from rlvr.compare import CompareError, make_variants, run_compare
from rlvr.compare.runner import check_budgets, variant_config
from rlvr.config.run import load_config

TINY = ["model.tiny.hidden_size=32", "model.tiny.intermediate_size=64", "model.tiny.num_layers=1",
        "task.max_value=20", "task.num_eval=16", "rollout.prompts_per_step=4", "rollout.group_size=4",
        "rollout.max_new_tokens=4", "train.micro_batch_size=16", "sft.steps=0", "train.steps=1",
        "train.checkpoint_every=1", "algorithm.minibatches=1", "eval.num_examples=8", "eval.samples=2",
        "eval.report_greedy=false"]
VARIANTS = make_variants(["grpo", "dr_grpo"], None)


class Stop(KeyboardInterrupt):
    pass


@pytest.fixture(scope="module")
def comparison(tmp_path_factory):
    """Run the comparison, interrupting it once its first run has finished, then rerun it to completion,
    then once more; returns the output directory, each call's events and results, and the first run's
    summary time stamp after the first call."""
    out = tmp_path_factory.mktemp("cmp") / "cmp"
    calls, results = [], []

    def stop_after_first(kind, name, seed, run_dir):
        calls[-1].append((kind, name, seed))
        if kind == "done":
            raise Stop

    calls.append([])
    with pytest.raises(Stop):
        run_compare(VARIANTS, [0, 1], out, overrides=TINY, on_event=stop_after_first)
    first_summary = (out / "runs/grpo/seed0/summary.json").stat().st_mtime_ns
    for _ in range(2):
        calls.append([])
        results.append(run_compare(VARIANTS, [0, 1], out, overrides=TINY,
                                   on_event=lambda *e: calls[-1].append(e[:3])))
    return out, calls, results, first_summary


def test_interrupted_comparison_continues_and_skips_finished_runs(comparison):
    out, calls, results, first_summary = comparison
    assert calls[0] == [("start", "grpo", 0), ("done", "grpo", 0)]
    assert calls[1] == [("skip", "grpo", 0), ("start", "dr_grpo", 0), ("done", "dr_grpo", 0),
                        ("start", "grpo", 1), ("done", "grpo", 1), ("start", "dr_grpo", 1), ("done", "dr_grpo", 1)]
    assert calls[2] == [("skip", v, s) for s in (0, 1) for v in ("grpo", "dr_grpo")]
    assert (out / "runs/grpo/seed0/summary.json").stat().st_mtime_ns == first_summary  # not recomputed
    assert results[0] == results[1]


def test_run_interrupted_mid_training_resumes_from_its_checkpoint(tmp_path):
    real = loop.rl_step
    sets = [s for s in TINY if not s.startswith("train.steps")] + ["train.steps=2"]

    def interrupting(cfg, c, step):
        if cfg.out.endswith("dr_grpo/seed0") and step == 1:
            raise KeyboardInterrupt("simulated Ctrl-C")
        return real(cfg, c, step)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(loop, "rl_step", interrupting)
        with pytest.raises(KeyboardInterrupt):
            run_compare(VARIANTS, [0], tmp_path, overrides=sets)
    events = []
    run_compare(VARIANTS, [0], tmp_path, overrides=sets, on_event=lambda *e: events.append(e[:3]))
    assert events == [("skip", "grpo", 0), ("resume", "dr_grpo", 0), ("done", "dr_grpo", 0)]
    steps = [json.loads(ln)["step"] for ln in (tmp_path / "runs/dr_grpo/seed0/metrics.jsonl").read_text().splitlines()]
    assert steps == [1, 2]
    assert json.loads((tmp_path / "runs/dr_grpo/seed0/summary.json").read_text())["steps"] == 2


def test_results_hold_finals_significance_and_cost(comparison):
    out, _, results, _ = comparison
    r = results[-1]
    assert r["variants"] == ["grpo", "dr_grpo"] and r["baseline"] == "grpo"
    assert r["budget"] == {"grpo": 16, "dr_grpo": 16}
    for name in ("grpo", "dr_grpo"):
        f = r["final"][name]
        assert f["seeds"] == [0, 1] and set(f["mean"]) >= {"accuracy", "pass@1", "pass@2", "maj@2", "mean_reward"}
        runs = [json.loads((out / f"runs/{name}/seed{s}/eval/step_000001.json").read_text()) for s in (0, 1)]
        assert f["per_seed"]["accuracy"] == [x["accuracy"] for x in runs]
        assert f["mean"]["accuracy"] == pytest.approx(sum(x["accuracy"] for x in runs) / 2)
        lo, hi = f["ci95"]["accuracy"]
        assert lo <= f["mean"]["accuracy"] + 1e-12 and f["mean"]["accuracy"] <= hi + 1e-12
        c = r["cost"][name]
        assert c["runs"] == 2 and c["completions_per_run"] == 16 and c["tokens_per_run"] > 0 and c["seconds_per_run"] > 0
    s = r["significance"]["dr_grpo"]
    assert s["prompts"] == 8 and s["paired_seeds"] == 2 and s["seed_min_p"] == 0.5 and 0 <= s["prompt_p"] <= 1
    assert s["diff"] == pytest.approx(r["final"]["dr_grpo"]["mean"]["accuracy"] - r["final"]["grpo"]["mean"]["accuracy"])
    assert json.loads((out / "results.json").read_text())["variants"] == ["grpo", "dr_grpo"]


def test_report_is_self_contained_with_plots_and_tables(comparison):
    out = comparison[0]
    html = (out / "report.html").read_text()
    assert "<script" not in html and "<link" not in html and not re.search(r'(src|href)="https?:', html)
    for ident in ("chart-heldout", "chart-reward", "chart-length", "chart-final", "final-table",
                  "significance-table", "cost-table", "runs-table"):
        assert f'id="{ident}"' in html
    table = re.search(r'<table id="final-table">.*?</table>', html).group(0)
    assert table.count('<tr class="row">') == 2


def test_plan_and_budget_checks(comparison, tmp_path):
    out = comparison[0]
    with pytest.raises(CompareError, match="different comparison.*overrides"):
        run_compare(VARIANTS, [0, 1], out, overrides=TINY + ["optim.lr=0.5"])
    with pytest.raises(CompareError, match="at least two"):
        make_variants(["grpo"], None)
    with pytest.raises(CompareError, match="repeated: grpo"):
        make_variants(["grpo", "grpo"], None)
    a = load_config(overrides=TINY)
    b = load_config(overrides=TINY + ["rollout.group_size=8"])
    with pytest.raises(CompareError, match="rollout budgets differ"):
        check_budgets({"a": a, "b": b})
    assert "budgets differ" in check_budgets({"a": a, "b": b}, allow_mismatch=True)[0]
    assert check_budgets({"a": a, "b": load_config(overrides=TINY, recipe="dr_grpo")}) == []


def test_yaml_variants_and_cli(comparison, tmp_path):
    v = tmp_path / "fast_lr.yaml"
    v.write_text("optim: {lr: 0.01}\n")
    variants = make_variants(["grpo"], [v])
    cfg = variant_config(variants[1], 3, tmp_path / "o", overrides=TINY)
    assert cfg.optim.lr == 0.01 and cfg.seed == 3 and cfg.out.endswith("runs/fast_lr/seed3")
    out = comparison[0]
    sets = sum((["--set", o] for o in TINY), [])
    r = CliRunner().invoke(app, ["compare", "--recipe", "grpo", "--recipe", "dr_grpo", "--seeds", "0,1",
                                 "--out", str(out)] + sets)
    assert r.exit_code == 0, r.output
    assert r.output.count("skip") == 4 and "dr_grpo" in r.output and "report.html" in r.output
    bad = CliRunner().invoke(app, ["compare", "--recipe", "grpo", "--out", str(tmp_path / "x")])
    assert bad.exit_code == 2 and "at least two" in bad.output
    r = CliRunner().invoke(app, ["report", str(out)])
    assert r.exit_code == 0, r.output


def _chromium():
    import shutil

    return next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome",
                                               "google-chrome-stable")) if p), None)


def test_report_renders_in_headless_chromium(comparison, tmp_path):
    """The report opened by a real browser with no network: the DOM it renders has the charts (inline SVG
    with drawn lines) and the tables with one row per method."""
    import subprocess
    from html.parser import HTMLParser

    browser = _chromium()
    if browser is None:
        pytest.skip("no chromium / google-chrome on PATH")
    out = comparison[0]
    cmd = [browser, "--headless", "--disable-gpu", "--no-sandbox", "--no-first-run", "--disable-extensions",
           f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=2000"]
    dom = subprocess.run(cmd + ["--dump-dom", (out / "report.html").resolve().as_uri()],
                         capture_output=True, text=True, timeout=120).stdout

    class Collect(HTMLParser):
        def __init__(self):
            super().__init__()
            self.svgs, self.lines, self.tables, self.table, self.rows = [], 0, {}, None, 0

        def handle_starttag(self, tag, attrs):
            a = dict(attrs)
            if tag == "svg" and "chart" in (a.get("class") or ""):
                self.svgs.append(a.get("id"))
            if tag == "path" and a.get("class") == "line" and a.get("d", "").startswith("M"):
                self.lines += 1
            if tag == "table":
                self.table = a.get("id")
                self.tables[self.table] = 0
            if tag == "tr" and a.get("class") == "row" and self.table:
                self.tables[self.table] += 1

    p = Collect()
    p.feed(dom)
    assert {"chart-heldout", "chart-reward", "chart-length", "chart-time", "chart-final"} <= set(p.svgs), dom[:500]
    assert p.lines >= 8  # 4 line charts x 2 methods
    assert p.tables["final-table"] == 2 and p.tables["significance-table"] == 1
    assert p.tables["cost-table"] == 2 and p.tables["runs-table"] == 4
    shot = tmp_path / "report.png"
    subprocess.run(cmd + [f"--screenshot={shot}", "--window-size=1280,2000", (out / "report.html").resolve().as_uri()],
                   capture_output=True, timeout=120)
    assert shot.is_file() and shot.stat().st_size > 20000  # a rendered page, not a blank one


def _synthetic_run(seed, correct_by_prompt, steps=10):
    from rlvr.compare.aggregate import RunData
    from rlvr.eval.evaluate import summarise

    pp = [{"id": pid, "group": pid, "correct": c, "reward": c, "length": [3] * len(c), "answers": ["1"] * len(c)}
          for pid, c in correct_by_prompt.items()]
    final = {**summarise(pp), "per_prompt": pp}
    return RunData(seed, None, steps, [{"step": steps, "reward": 0.0}], {steps: final}, {"steps": steps})


def test_significance_and_finals_against_hand_computation():
    from rlvr.compare.aggregate import final_metrics, significance
    from rlvr.compare.report import _verdict
    from rlvr.eval.significance import sign_flip_test

    a = [_synthetic_run(0, {"p": [1, 0], "q": [0, 0], "r": [1, 1]}),
         _synthetic_run(1, {"p": [0, 0], "q": [0, 0], "r": [1, 0]})]
    b = [_synthetic_run(0, {"p": [1, 1], "q": [1, 0], "r": [1, 1]}),
         _synthetic_run(1, {"p": [1, 0], "q": [0, 0], "r": [1, 1]})]
    s = significance(a, b)
    # seed-averaged per-prompt accuracies: a = p .25, q 0, r .75; b = p .75, q .25, r 1
    assert s["prompt_diff"] == pytest.approx((0.5 + 0.25 + 0.25) / 3) == pytest.approx(s["diff"])
    assert s["prompt_p"] == pytest.approx(0.25)  # all three differences positive: 2 of 8 sign patterns
    assert s["prompt_p"] == sign_flip_test([0.5, 0.25, 0.25])
    # per seed: seed 0 a = 1/2, b = 5/6; seed 1 a = 1/6, b = 1/2 -> both +1/3: p = 2/4
    assert s["paired_seeds"] == 2 and s["seed_p"] == pytest.approx(0.5) and s["seed_min_p"] == 0.5
    f = final_metrics(b)
    assert f["mean"]["accuracy"] == pytest.approx((5 / 6 + 1 / 2) / 2)
    assert f["per_seed"]["accuracy"] == pytest.approx([5 / 6, 1 / 2])
    assert f["seed_sd"]["accuracy"] == pytest.approx(((5 / 6 - 1 / 2) ** 2 / 2) ** 0.5)
    assert f["mean"]["pass@2"] == pytest.approx((1 + 2 / 3) / 2)
    assert "significant" not in _verdict(s).replace("not significant", "")


def test_a_shared_start_is_charged_once_not_to_every_run():
    """The run that built the shared start counts its warm-up; a run that reused it counts only its RL (its
    summary's sft_seconds is the stored start's own record, so adding it would charge the start to every run)."""
    from rlvr.compare.aggregate import costs

    start = {"key": "k", "path": "/starts/k"}
    built, reused = (_synthetic_run(s, {"p": [1, 0]}) for s in (0, 1))
    built.summary.update(rl_seconds=100.0, sft_seconds=900.0, sft_start={**start, "reused": False})
    reused.summary.update(rl_seconds=120.0, sft_seconds=900.0, sft_start={**start, "reused": True})
    c = costs([built, reused])
    assert c["seconds_per_run"] == pytest.approx((1000.0 + 120.0) / 2)
    assert c["rl_seconds_per_run"] == pytest.approx(110.0) and c["seconds_total"] == pytest.approx(1120.0)
    plain = _synthetic_run(2, {"p": [1, 0]})  # its own warm-up, no cache
    plain.summary.update(rl_seconds=50.0, sft_seconds=30.0, sft_start=None)
    assert costs([plain])["seconds_per_run"] == pytest.approx(80.0)


def test_a_comparison_continues_from_any_directory(tmp_path, monkeypatch):
    """A shared config with a data file beside it and a variant file in another folder, run from a third
    directory: every run's config.yaml names the data file absolute (the shared file's paths beside it, not
    beside the variant's); rerun from a fourth directory, the comparison skips its finished runs instead of
    refusing them, and a run evaluates from there too."""
    proj, var, here, there = (tmp_path / n for n in ("proj", "variants", "here", "there"))
    for d in (proj / "data", var, here, there):
        d.mkdir(parents=True)
    rows = [{"prompt": f"{a}+{b}=", "answer": str(a + b)} for a in range(6) for b in range(6)]
    (proj / "data" / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    shared = proj / "shared.yaml"
    shared.write_text("task: {name: jsonl, train_path: data/train.jsonl, eval_fraction: 0.25}\n")
    (var / "fast.yaml").write_text("optim: {lr: 0.01}\n")
    tiny = [o for o in TINY if not o.startswith("task.")]
    args = ["compare", "--recipe", "grpo", "--variant", str(var / "fast.yaml"), "--seeds", "0", "-c", str(shared),
            "--out", str(tmp_path / "cmp")] + sum((["--set", o] for o in tiny), [])
    monkeypatch.chdir(here)
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0, r.output
    for name in ("grpo", "fast"):
        cfg = load_config(tmp_path / "cmp" / "runs" / name / "seed0" / "config.yaml")
        assert cfg.task.params.train_path == str(proj / "data" / "train.jsonl"), name
    monkeypatch.chdir(there)
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0, r.output
    assert r.output.count("skip") == 2, r.output
    r = CliRunner().invoke(app, ["eval", "--model", str(tmp_path / "cmp" / "runs" / "fast" / "seed0"),
                                 "--samples", "1", "--output", str(there / "e.json")])
    assert r.exit_code == 0, r.output
    assert json.loads((there / "e.json").read_text())["task"] == "jsonl"


def test_a_finished_run_is_told_by_its_summary_not_its_checkpoints(comparison, tmp_path):
    """A comparison whose finished runs lost their checkpoints (deleted to save space, or never copied) skips
    them all and reports the same finals; a run without a summary is started again, not taken as done."""
    import shutil

    out = tmp_path / "cmp"
    shutil.copytree(comparison[0], out)
    for ckpts in out.glob("runs/*/seed*/checkpoints"):
        shutil.rmtree(ckpts)
    events = []
    results = run_compare(VARIANTS, [0, 1], out, overrides=TINY, on_event=lambda *e: events.append(e[:3]))
    assert events == [("skip", v, s) for s in (0, 1) for v in ("grpo", "dr_grpo")]
    assert results["final"] == comparison[2][-1]["final"]
    (out / "runs/dr_grpo/seed1/summary.json").unlink()
    events.clear()
    run_compare(VARIANTS, [0, 1], out, overrides=TINY, on_event=lambda *e: events.append(e[:3]))
    assert events[-2:] == [("start", "dr_grpo", 1), ("done", "dr_grpo", 1)]
    assert events[:3] == [("skip", "grpo", 0), ("skip", "dr_grpo", 0), ("skip", "grpo", 1)]


def test_a_comparison_kept_beside_its_config_moves_with_it(tmp_path):
    """compare.json names the shared config relative to OUT, so a project holding both (a repository checked
    out elsewhere) continues its comparison from the new place after the old one is gone; a plan written
    with absolute paths (as older versions wrote it) still continues."""
    import shutil

    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "shared.yaml").write_text("optim: {lr: 0.01}\n")
    run_compare(VARIANTS, [0], proj / "board", base=proj / "shared.yaml", overrides=TINY)
    assert json.loads((proj / "board" / "compare.json").read_text())["base"] == "../shared.yaml"
    moved = tmp_path / "elsewhere" / "proj"
    shutil.copytree(proj, moved)
    shutil.rmtree(proj)
    events = []
    run_compare(VARIANTS, [0], moved / "board", base=moved / "shared.yaml", overrides=TINY,
                on_event=lambda *e: events.append(e[:3]))
    assert events == [("skip", "grpo", 0), ("skip", "dr_grpo", 0)]
    r = CliRunner().invoke(app, ["report", str(moved / "board")])
    assert r.exit_code == 0, r.output
    plan = json.loads((moved / "board" / "compare.json").read_text())
    (moved / "board" / "compare.json").write_text(json.dumps({**plan, "base": str(moved / "shared.yaml")}))
    events.clear()
    run_compare(VARIANTS, [0], moved / "board", base=moved / "shared.yaml", overrides=TINY,
                on_event=lambda *e: events.append(e[:3]))
    assert events == [("skip", "grpo", 0), ("skip", "dr_grpo", 0)]
    (tmp_path / "other.yaml").write_text("optim: {lr: 0.01}\n")  # the same settings, another file
    with pytest.raises(CompareError, match="different comparison"):
        run_compare(VARIANTS, [0], moved / "board", base=tmp_path / "other.yaml", overrides=TINY)


def test_a_comparison_may_gain_or_drop_methods_and_seeds_but_not_redefine_one(comparison, tmp_path):
    out = tmp_path / "cmp"
    shutil.copytree(comparison[0], out)
    events = []
    r = run_compare(list(reversed(VARIANTS)), [1], out, overrides=TINY, on_event=lambda *e: events.append(e[:3]))
    assert events == [("skip", "dr_grpo", 1), ("skip", "grpo", 1)]  # the kept runs, nothing trained
    plan = json.loads((out / "compare.json").read_text())
    assert [v["name"] for v in plan["variants"]] == ["dr_grpo", "grpo"] and plan["seeds"] == [1]
    assert r["variants"] == ["dr_grpo", "grpo"] and r["seeds"] == [1] and r["baseline"] == "dr_grpo"
    assert r["cost"]["grpo"]["runs"] == 1 and r["cost"]["dr_grpo"]["runs"] == 1  # seed 0's runs left out
    # the same name for another definition (a YAML file instead of the recipe) would mix two methods in a row
    (tmp_path / "grpo.yaml").write_text("optim: {lr: 0.01}\n")
    redefined = make_variants(["dr_grpo"], [tmp_path / "grpo.yaml"])
    with pytest.raises(CompareError, match="variant 'grpo' was"):
        run_compare(redefined, [1], out, overrides=TINY)
    with pytest.raises(CompareError, match="shared config"):
        run_compare(VARIANTS, [1], out, base=tmp_path / "grpo.yaml", overrides=TINY)
    assert json.loads((out / "compare.json").read_text()) == plan  # a refused plan is not written
