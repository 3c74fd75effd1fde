"""The built-in demo (`rlvr train` with no config file, no recipe and no --set: rlvr/recipes/demo.yaml) meets its
target, RL raising held-out avg@4 by at least 20 points, with the thread count it fixes (slow: minutes)."""

import time

import pytest

from rlvr.config.run import load_config
from rlvr.run.train import train


@pytest.mark.slow
def test_the_demo_learns(tmp_path):
    t0 = time.perf_counter()
    summary = train(load_config(overrides=[f"out={tmp_path / 'demo'}"], recipe="demo"))
    elapsed = time.perf_counter() - t0
    before, after = summary["eval_before"]["accuracy"], summary["eval_after"]["accuracy"]
    assert after - before >= 0.20, (before, after)
    assert summary["threads"] == 2 and elapsed < 600, elapsed
