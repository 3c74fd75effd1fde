"""Start-up time of rlvr commands that need no model, against ``import torch`` alone, in one run.

    python benchmarks/cli_startup.py [--repeat 7]

Each command runs in a fresh interpreter ``--repeat`` times; printed: the best and median wall time and the
ratio of the median to the median of ``python -c "import torch"`` measured in the same run (the floor of
every command before model libraries loaded lazily: each then also imported transformers and every
component). Commands: ``rlvr --help``, ``rlvr recipes``, ``rlvr defab derive`` on a 7-line theory,
``rlvr config --recipe grpo`` (validates every named component: its modules load, torch does not),
``rlvr verify`` on one math pair, and ``python -c "import rlvr.config.run"``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

THEORY = "bird(tweety).\npenguin(opus).\nr1: bird(X) => flies(X).\nr2: penguin(X) -> bird(X).\n" \
         "r3: penguin(X) => ~flies(X).\nr3 > r1.\n"


def timed(cmd: list[str], cwd: Path, repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        start = time.perf_counter()
        proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
        out.append(time.perf_counter() - start)
        if proc.returncode != 0:
            raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stderr[-2000:]}")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()
    py = sys.executable
    with tempfile.TemporaryDirectory() as d:
        cwd = Path(d)
        (cwd / "t.dl").write_text(THEORY)
        (cwd / "v.jsonl").write_text(json.dumps({"task": "math", "answer": "1/2", "completion": "\\boxed{0.5}"}) + "\n")
        cases = [("import torch (baseline)", [py, "-c", "import torch"]),
                 ("rlvr --help", [py, "-m", "rlvr", "--help"]),
                 ("rlvr recipes", [py, "-m", "rlvr", "recipes"]),
                 ("rlvr defab derive", [py, "-m", "rlvr", "defab", "derive", "t.dl"]),
                 ("rlvr config --recipe grpo", [py, "-m", "rlvr", "config", "--recipe", "grpo"]),
                 ("rlvr verify (1 math pair)", [py, "-m", "rlvr", "verify", "v.jsonl"]),
                 ("import rlvr.config.run", [py, "-c", "import rlvr.config.run"])]
        base = None
        print(f"{'command':28s} {'best s':>7s} {'median s':>9s} {'/ import torch':>15s}")
        for name, cmd in cases:
            t = timed(cmd, cwd, args.repeat)
            med = statistics.median(t)
            base = base or med
            print(f"{name:28s} {min(t):7.3f} {med:9.3f} {med / base:14.2f}x")


if __name__ == "__main__":
    main()
