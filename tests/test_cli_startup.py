"""Commands that need no model start fast: they never import torch, transformers, numpy, scipy, sympy or
matplotlib.

Each check runs the command's entry code in a fresh interpreter (this test process has torch loaded
already, by conftest) and then inspects that interpreter's ``sys.modules``. The import check is the
real guard, since it does not depend on how loaded the machine is; the wall-clock check only catches
gross regressions (see ``test_start_up_is_fast``).
"""

import json
import subprocess
import sys
import time

import pytest
import typer.main
import yaml

from rlvr.cli import app

HEAVY = ("torch", "transformers", "matplotlib", "numpy", "scipy", "sympy")

# Runs `rlvr ARGS...` for each ARGS in a JSON list, one after another in this one interpreter, and
# writes each run's exit code, output and the heavy modules loaded so far (modules only accumulate, so
# a run that pulls one in shows it, as do the runs after it).
PROBE = """
import contextlib, io, json, sys
from rlvr.cli import main
report, runs = sys.argv[1], json.loads(sys.argv[2])
results = []
for args in runs:
    sys.argv, out, code = ["rlvr", *args], io.StringIO(), 0
    try:
        with contextlib.redirect_stdout(out):
            main()
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    results.append({"code": code, "out": out.getvalue(), "loaded": [m for m in %r if m in sys.modules]})
with open(report, "w") as f:
    json.dump(results, f)
""" % (HEAVY,)

TWEETY = """bird(tweety).
bird(robin).
penguin(opus).
r1: bird(X) => flies(X).
r2: penguin(X) -> bird(X).
r3: penguin(X) => ~flies(X).
r3 > r1.
"""


def run_probe(cwd, runs):
    report = cwd / "probe.json"
    proc = subprocess.run([sys.executable, "-c", PROBE, str(report), json.dumps(runs)], cwd=cwd,
                          capture_output=True, text=True, timeout=300)
    assert report.is_file(), proc.stderr
    return json.loads(report.read_text())


def help_commands():
    root = typer.main.get_command(app)
    out = [[]]
    for name, cmd in sorted(root.commands.items()):
        out.append([name])
        out.extend([name, sub] for sub in sorted(getattr(cmd, "commands", {})))
    return out


@pytest.fixture(scope="module")
def help_pages(tmp_path_factory):
    words = help_commands()
    results = run_probe(tmp_path_factory.mktemp("help"), [[*w, "--help"] for w in words])
    return {" ".join(w): r for w, r in zip(words, results)}


@pytest.mark.parametrize("words", [" ".join(w) for w in help_commands()], ids=lambda w: w or "rlvr")
def test_help_loads_no_model_library(help_pages, words):
    page = help_pages[words]
    assert page["code"] == 0 and "Usage:" in page["out"], page["out"]
    assert page["loaded"] == []


def test_the_help_list_reaches_commands_and_defab_subcommands(help_pages):
    assert {"", "train", "eval", "verify", "recipes", "config", "defab derive", "defab generate"} <= set(help_pages)


def test_recipes_config_and_defab_load_no_model_library(tmp_path):
    (tmp_path / "tweety.dl").write_text(TWEETY)
    (tmp_path / "v.jsonl").write_text(json.dumps({"task": "math", "answer": "1/2", "completion": "\\boxed{0.5}"}) + "\n")
    (tmp_path / "run.yaml").write_text("algorithm: {objective: {name: gspo}}\nmodel: {lora: {rank: 8}}\n")
    configs = [["config", "--recipe", "dapo"], ["config", "-c", "run.yaml", "--set", "rollout.engine=vllm"],
               ["config", "--set", "data.sampler.name=paced"], ["config", "--reference"]]
    runs = [["recipes"], ["defab", "derive", "tweety.dl"], ["verify", "v.jsonl"], *configs]
    runs += [["defab", "generate", "--level", str(level), "-n", "2", "--out", f"g{level}.jsonl"] for level in (1, 2, 3)]
    recipes, derive, verify, dapo, from_file, paced, reference, *generate = run_probe(tmp_path, runs)
    for run in (dapo, from_file, paced, reference):
        assert run["code"] == 0, run["out"]
    assert yaml.safe_load(dapo["out"])["algorithm"]["dynamic_sampling"]["enabled"] is True
    resolved = yaml.safe_load(from_file["out"])
    assert resolved["rollout"]["engine"] == "vllm" and resolved["model"]["lora"]["rank"] == 8
    assert resolved["algorithm"]["objective"]["name"] == "gspo"
    assert yaml.safe_load(paced["out"])["data"]["sampler"]["name"] == "paced"
    assert "| `rollout.engine` |" in reference["out"]
    assert verify["code"] == 0, verify["out"]
    assert json.loads((tmp_path / "v.scores.jsonl").read_text())["reward"] == 1.0
    assert recipes["code"] == 0 and "grpo" in recipes["out"]
    assert derive["code"] == 0 and derive["out"].splitlines()[0] == "+Δ (definitely provable): 4"
    assert "  ~flies(opus)" in derive["out"]
    for level, gen in zip((1, 2, 3), generate):
        assert gen["code"] == 0, gen["out"]
        rows = [json.loads(line) for line in (tmp_path / f"g{level}.jsonl").read_text().splitlines()]
        assert len(rows) == 2 and all(r["level"] == level for r in rows)
    assert [r["loaded"] for r in (recipes, derive, verify, dapo, from_file, paced, reference, *generate)] == \
        [[]] * len(runs)


def best_of(n, cmd, cwd):
    times = []
    for _ in range(n):
        start = time.perf_counter()
        subprocess.run(cmd, cwd=cwd, check=True, capture_output=True, timeout=120)
        times.append(time.perf_counter() - start)
    return min(times)


@pytest.mark.parametrize("args", [["--help"], ["defab", "derive", "tweety.dl"], ["config", "--recipe", "grpo"]],
                         ids=["help", "derive", "config"])
def test_start_up_is_fast(tmp_path, args):
    # About 0.25 s (help, derive) and 0.4 s (config) on an idle 2-core machine, against 4.6-8 s when
    # every command imported torch (config: every component module too). The
    # bound leaves room for a loaded CI machine (best of 3 absorbs one-off stalls) while still failing
    # if a model library creeps back into these commands' imports.
    (tmp_path / "tweety.dl").write_text(TWEETY)
    assert best_of(3, [sys.executable, "-m", "rlvr", *args], tmp_path) < 1.5
