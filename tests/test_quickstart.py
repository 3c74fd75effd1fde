"""docs/quickstart.md runs as written: its files are written, its commands run (on a tiny local model, with the step
counts and lengths made small), and each does what the page says."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "quickstart.md"
SMALL = ["--set", "rollout.max_new_tokens=8", "--set", "rollout.prompts_per_step=2", "--set",
         "rollout.group_size=2", "--set", "eval.num_examples=2", "--set", "eval.samples=1",
         "--set", "eval.report_greedy=false", "--set", "train.checkpoint_every=1"]


def blocks(text: str) -> tuple[dict[str, str], list[str]]:
    """The page's files (a fenced block after ``<!-- file: NAME -->``) and commands (after ``<!-- run -->``)."""
    files, commands = {}, []
    for tag, body in re.findall(r"<!-- (file: [^ ]+|run) -->\n```[a-z]*\n(.*?)```", text, re.S):
        if tag == "run":
            commands += [line for line in body.splitlines() if line.strip()]
        else:
            files[tag.removeprefix("file: ")] = body
    return files, commands


def _tiny_model(where: Path) -> None:
    from rlvr.models.loading import ModelConfig, load_model
    from rlvr.models.tiny import TinyModelConfig
    from rlvr.models.vision import save_tokenizer

    model, tok = load_model(ModelConfig(tiny=TinyModelConfig(hidden_size=32, intermediate_size=64, num_layers=1,
                                                             max_positions=128)))
    model.save_pretrained(where, safe_serialization=True)
    save_tokenizer(tok, where)


def test_the_quickstart_runs_as_written(tmp_path):
    files, commands = blocks(PAGE.read_text())
    assert set(files) == {"data/train.jsonl", "rewards.py", "run.yaml"} and len(commands) == 4
    for name, body in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(body)
    _tiny_model(tmp_path / "my-model")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TOKENIZERS_PARALLELISM": "false"}
    for line in commands:
        args = shlex.split(line)
        assert args[0] == "rlvr"
        args = [a.replace("train.steps=210", "train.steps=3") for a in args[1:]]
        if args[0] == "train" and "--resume" not in args:
            args += SMALL + ["--set", "train.steps=2"]
        proc = subprocess.run([sys.executable, "-m", "rlvr", *args], cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=300)
        assert proc.returncode == 0, (line, proc.stdout[-2000:], proc.stderr[-3000:])
        if args[0] == "plan":
            assert "fits" in proc.stderr and "weights" in proc.stdout
    run = tmp_path / "runs" / "first"
    assert [json.loads(x)["step"] for x in (run / "metrics.jsonl").read_text().splitlines()] == [1, 2, 3]
    rows = [json.loads(x) for x in (run / "completions.jsonl").read_text().splitlines()]
    assert rows and {"prompt", "completion", "reward", "advantage"} <= set(rows[0])
    metrics = json.loads((run / "metrics.jsonl").read_text().splitlines()[0])
    assert {"reward/correct", "reward/brief"} <= set(metrics)  # each reward logged by name
    saved = (run / "config.yaml").read_text()
    assert str(tmp_path / "data" / "train.jsonl") in saved and str(tmp_path / "rewards.py") in saved
    assert (run / "summary.json").is_file()
