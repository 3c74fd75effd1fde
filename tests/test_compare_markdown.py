"""`rlvr compare --markdown PAGE --claims FILE`: the comparison as a Markdown page with its curves, and a verdict
per method on the direction its paper claims (reproduced only when the paired test over prompts says so)."""

import math
import random

import pytest
import yaml
from typer.testing import CliRunner

from rlvr.cli import app
from rlvr.compare.aggregate import RunData
from rlvr.compare.markdown import claim_verdict, length_significance, write_markdown
from rlvr.eval.evaluate import summarise
from rlvr.eval.significance import sign_flip_test


def _run(seed, correct, lengths=None, steps=10):
    pp = [{"id": pid, "group": pid, "correct": c, "reward": c,
           "length": (lengths or {}).get(pid, [3] * len(c)), "answers": ["1"] * len(c)} for pid, c in correct.items()]
    final = {**summarise(pp), "per_prompt": pp}
    metrics = [{"step": s, "reward": 0.1 * s, "completion_length": 3.0, "truncated_frac": 0.0, "completions": 8}
               for s in range(1, steps + 1)]
    return RunData(seed, None, steps, metrics, {0: {**final, "accuracy": 0.0}, steps: final},
                   {"steps": steps, "rl_seconds": 2.0, "sft_seconds": 1.0})


@pytest.mark.parametrize("claim,diff,p,want", [
    ("higher", 0.10, 0.01, "reproduced"), ("lower", 0.10, 0.01, "reversed"), ("lower", -0.2, 0.001, "reproduced"),
    ("higher", -0.2, 0.001, "reversed"), ("higher", 0.30, 0.06, "not reproduced"), ("higher", 0.0, 0.0, "not reproduced"),
    ("lower", -0.1, 0.049, "reproduced")])
def test_claim_verdicts(claim, diff, p, want):
    assert claim_verdict({"metric": "accuracy", "direction": claim}, {"prompt_diff": diff, "prompt_p": p}) == want


def test_no_claim_no_test_and_bad_direction():
    assert claim_verdict(None, {"prompt_diff": 1.0, "prompt_p": 0.0}) == "–"
    assert claim_verdict({"metric": "accuracy", "direction": "higher"}, {}) == "not measured"
    assert claim_verdict({"metric": "accuracy", "direction": "higher"}, {"prompt_p": math.nan}) == "not measured"
    with pytest.raises(ValueError, match="higher or lower"):
        claim_verdict({"metric": "accuracy", "direction": "up"}, {"prompt_diff": 1.0, "prompt_p": 0.0})


def test_length_test_is_paired_over_prompts_and_seed_averaged():
    ids = [f"q{i}" for i in range(8)]
    base = [_run(s, {i: [1, 0] for i in ids}, {i: [10 + s, 12] for i in ids}) for s in (0, 1)]
    short = [_run(s, {i: [1, 0] for i in ids}, {i: [4, 6 + k % 3] for k, i in enumerate(ids)}) for s in (0, 1)]
    t = length_significance(base, short)
    # base per prompt: seeds (10+12)/2=11 and (11+12)/2=11.5 -> 11.25; short: 5 + (k%3)/2
    want = [5 + (k % 3) / 2 - 11.25 for k in range(8)]
    assert t["prompt_diff"] == pytest.approx(sum(want) / 8)
    assert t["prompt_p"] == pytest.approx(sign_flip_test(want)) and t["prompt_p"] < 0.05
    assert claim_verdict({"metric": "mean_length", "direction": "lower"}, t) == "reproduced"
    assert claim_verdict({"metric": "mean_length", "direction": "higher"}, t) == "reversed"
    assert length_significance(base, []) == {}


def test_the_page_holds_every_method_its_numbers_and_verdicts(tmp_path):
    rng = random.Random(0)
    ids = [f"q{i}" for i in range(40)]
    runs = {
        "grpo": [_run(s, {i: [float(rng.random() < 0.3) for _ in range(4)] for i in ids}) for s in (0, 1, 2)],
        "better": [_run(s, {i: [float(rng.random() < 0.9) for _ in range(4)] for i in ids}) for s in (0, 1, 2)],
        "same": [_run(s, {i: [float(rng.random() < 0.3) for _ in range(4)] for i in ids}) for s in (0, 1, 2)],
        "unfinished": [],
    }
    claims = {"better": {"metric": "accuracy", "direction": "higher", "claim": "beats GRPO"},
              "same": {"metric": "accuracy", "direction": "higher", "claim": "also beats GRPO"},
              "unfinished": {"metric": "accuracy", "direction": "higher", "claim": "?"}}
    page = tmp_path / "docs" / "board.md"
    rows = write_markdown(page, runs, "What ran.", claims, "rlvr compare --out X --markdown docs/board.md", "Board")
    text = page.read_text()
    assert text.startswith("# Board") and "rlvr compare --out X --markdown docs/board.md" in text
    assert (tmp_path / "docs" / "board.png").stat().st_size > 1000 and "![learning curves](board.png)" in text
    assert rows["better"]["verdict"] == "reproduced" and rows["same"]["verdict"] == "not reproduced"
    assert rows["unfinished"]["verdict"] == "not measured" and rows["grpo"]["verdict"] == "–"
    table = [line for line in text.splitlines() if line.startswith("| `")]
    assert [line.split("|")[1].strip() for line in table[:4]] == ["`grpo`", "`better`", "`same`", "`unfinished`"]
    better = rows["better"]
    assert better["accuracy"] == pytest.approx(sum(r.final["accuracy"] for r in runs["better"]) / 3)
    lo, hi = better["accuracy_ci95"]
    assert lo <= better["accuracy"] <= hi and f"{better['accuracy']:.3f} [{lo:.3f}, {hi:.3f}]" in text
    assert better["pass"][0] == "pass@4" and better["cost"]["runs"] == 3
    assert "## Claims" in text and "beats GRPO" in text


def test_cli_writes_the_page_and_refuses_a_bad_claims_file(tmp_path):
    from tests.test_compare import TINY

    claims = tmp_path / "claims.yaml"
    claims.write_text(yaml.safe_dump({"dr_grpo": {"metric": "mean_length", "direction": "lower", "claim": "shorter"}}))
    sets = sum((["--set", o] for o in TINY), [])
    page = tmp_path / "page.md"
    r = CliRunner().invoke(app, ["compare", "--recipe", "grpo", "--recipe", "dr_grpo", "--seeds", "0",
                                 "--out", str(tmp_path / "c"), "--markdown", str(page), "--claims", str(claims),
                                 "--title", "Tiny board"] + sets)
    assert r.exit_code == 0, r.output
    text = page.read_text()
    assert text.startswith("# Tiny board") and "`dr_grpo`" in text and "shorter" in text
    assert "Task `arithmetic`" in text and page.with_suffix(".png").is_file()
    bad = tmp_path / "bad.yaml"
    bad.write_text("dr_grpo: {metric: accuracy, direction: sideways}\n")
    r = CliRunner().invoke(app, ["compare", "--recipe", "grpo", "--recipe", "dr_grpo", "--out", str(tmp_path / "d"),
                                 "--claims", str(bad)] + sets)
    assert r.exit_code == 2 and "higher|lower" in r.output


def test_a_claim_whose_mechanism_never_acted_is_inactive_whatever_the_difference(tmp_path):
    """``active: METRIC`` names the training metric that shows the mechanism acting: 0 at every step of every
    finished run makes the verdict inactive (the row measures the rest of the recipe); a metric no finished run
    logged is not measured (a misspelt name must not pass for an idle mechanism); one nonzero step is enough."""
    rng = random.Random(1)
    ids = [f"q{i}" for i in range(40)]

    def runs_of(p, reused):
        rs = [_run(s, {i: [float(rng.random() < p) for _ in range(4)] for i in ids}) for s in (0, 1)]
        for r in rs:
            for k, m in enumerate(r.metrics):
                if reused is not None:
                    m["engine/spec/reused_tokens"] = reused(k)
        return rs

    unfinished = _run(2, {i: [1.0] * 4 for i in ids})
    unfinished.summary = {}
    for m in unfinished.metrics:
        m["engine/spec/reused_tokens"] = 50.0  # an unfinished run's steps do not count
    runs = {"grpo": runs_of(0.3, None), "idle": runs_of(0.9, lambda k: 0) + [unfinished],
            "once": runs_of(0.9, lambda k: 7.0 if k == 3 else 0.0), "unlogged": runs_of(0.9, None)}
    claim = {"metric": "accuracy", "direction": "higher", "claim": "faster at parity",
             "active": "engine/spec/reused_tokens"}
    rows = write_markdown(tmp_path / "b.md", runs, "What ran.", {n: claim for n in ("idle", "once", "unlogged")})
    assert rows["idle"]["significance"]["prompt_p"] < 0.05  # a real difference, and still not the mechanism's
    assert rows["idle"]["verdict"] == "inactive" and rows["idle"]["activity"] == 0.0
    # one step of ten in each of the two runs: 2 x 7 tokens over 20 steps
    assert rows["once"]["verdict"] == "reproduced" and rows["once"]["activity"] == pytest.approx(2 * 7.0 / 20)
    assert rows["unlogged"]["verdict"] == "not measured" and rows["unlogged"]["activity"] is None
    text = (tmp_path / "b.md").read_text()
    assert "| `engine/spec/reused_tokens` 0 | inactive |" in text
    assert "`engine/spec/reused_tokens` not logged | not measured |" in text
    assert claim_verdict(claim, {"prompt_diff": 0.2, "prompt_p": 0.001}, activity=0.0) == "inactive"
    assert claim_verdict(claim, {"prompt_diff": 0.2, "prompt_p": 0.001}, activity=None) == "not measured"
    assert claim_verdict(claim, {"prompt_diff": -0.2, "prompt_p": 0.001}, activity=1e-9) == "reversed"


def test_claims_file_rejects_a_mechanism_metric_that_is_not_a_name(tmp_path):
    from rlvr.compare.markdown import read_claims

    f = tmp_path / "claims.yaml"
    f.write_text(yaml.safe_dump({"spec": {"metric": "accuracy", "direction": "higher", "active": ["x"]}}))
    with pytest.raises(ValueError, match="active: TRAINING_METRIC"):
        read_claims(f)
    f.write_text(yaml.safe_dump({"spec": {"metric": "accuracy", "direction": "higher", "active": "engine/x"}}))
    assert read_claims(f)["spec"]["active"] == "engine/x"


def test_a_method_missing_a_seed_is_compared_on_the_seeds_it_has():
    """An unfinished board: the baseline has seeds 0 and 1, a method seed 0 alone. Its difference is against the
    baseline's seed 0, prompt by prompt, not against the baseline's two-seed average (whose seed 1 here is far
    better); a method with no seed in common is compared with every finished run."""
    from rlvr.compare.aggregate import significance

    ids = [f"q{i}" for i in range(20)]
    base = [_run(0, {i: [0.0, 0.0, 0.0, 1.0] for i in ids}), _run(1, {i: [1.0, 1.0, 1.0, 1.0] for i in ids})]
    other = [_run(0, {i: [0.0, 0.0, 1.0, 1.0] for i in ids})]
    s = significance(base, other)
    assert s["seeds"] == [0] and s["prompt_diff"] == pytest.approx(0.25) and s["diff"] == pytest.approx(0.25)
    assert s["paired_seeds"] == 1
    lengths = {i: [10, 10, 10, 10] for i in ids}
    base_len = [_run(0, {i: [0.0] * 4 for i in ids}, lengths), _run(1, {i: [0.0] * 4 for i in ids},
                                                                     {i: [30] * 4 for i in ids})]
    assert length_significance(base_len, [_run(0, {i: [0.0] * 4 for i in ids}, {i: [7] * 4 for i in ids})]) \
        ["prompt_diff"] == pytest.approx(-3.0)  # against seed 0's 10, not the two seeds' 20
    apart = significance(base[:1], [_run(2, {i: [1.0] * 4 for i in ids})])
    assert apart["seeds"] == [] and apart["prompt_diff"] == pytest.approx(0.75) and apart["paired_seeds"] == 0


def test_the_time_column_is_rl_time_and_not_charged_with_the_shared_start(tmp_path):
    """A shared start is built by whichever run comes first on a machine; counting its warm-up in that run's
    method would make the method look slow for a cost no method has. The column is RL seconds per run."""
    ids = [f"q{i}" for i in range(10)]
    runs = {"grpo": [_run(s, {i: [1.0, 0.0] for i in ids}) for s in (0, 1)],
            "other": [_run(s, {i: [1.0, 1.0] for i in ids}) for s in (0, 1)]}
    # seed 1 of `other` built the shared start (1,000 s of warm-up) and ran RL for 30 s; seed 0 reused it
    runs["other"][0].summary.update(rl_seconds=10.0, sft_seconds=1000.0, sft_start={"reused": True})
    runs["other"][1].summary.update(rl_seconds=30.0, sft_seconds=1000.0, sft_start={"reused": False})
    page = tmp_path / "board.md"
    rows = write_markdown(page, runs, "What ran.", {}, None, "Board")
    head, _, *table = [line for line in page.read_text().splitlines() if line.startswith("|")]
    cols = [c.strip() for c in head.strip("|").split("|")]
    at = cols.index("RL s/run")
    cells = {row.split("|")[1].strip(): [c.strip() for c in row.strip("|").split("|")][at] for row in table}
    assert cells == {"`grpo`": "2", "`other`": "20"}
    # the full cost, warm-up included, stays in the record
    assert rows["other"]["cost"]["seconds_per_run"] == pytest.approx((10.0 + 1030.0) / 2)
