"""The built-in demo meets its target: RL raises held-out accuracy by at least 20 points (slow: minutes)."""

import time

import pytest

from rlvr.config.run import load_config
from rlvr.run.train import train


@pytest.mark.slow
def test_default_demo_learns(tmp_path):
    t0 = time.perf_counter()
    summary = train(load_config(overrides=[f"out={tmp_path / 'demo'}"]))
    elapsed = time.perf_counter() - t0
    before, after = summary["eval_before"]["accuracy"], summary["eval_after"]["accuracy"]
    assert after - before >= 0.20, (before, after)
    assert elapsed < 600, elapsed
