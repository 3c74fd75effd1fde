"""A real-size rehearsal on the CPU (benchmarks/rehearsal.py): a Qwen2.5-0.5B-shaped model (494M parameters, its
vocabulary of 151,936) trains an RL step with bfloat16 autocast and activation checkpointing, checkpoints,
resumes for one step more, and its peak memory is within 15% of ``rlvr plan``'s. Minutes each: marked slow
(the vLLM one runs with the vllm tests)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _rehearse(tmp_path, engine: str) -> dict:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from rehearsal import rehearse

    args = argparse.Namespace(engine=engine, steps=1, prompts=2, group=4, new_tokens=16, prompt_words=32, micro=8,
                              threads=2, set=[])
    return rehearse(args, tmp_path)


def _check(r: dict) -> None:
    assert r["params"] == 494_032_768 and r["vocab"] == 151_936
    assert r["checkpoints_after_first"] == ["step_000001"]
    assert r["checkpoints_after_resume"] == ["step_000001", "step_000002"]  # resumed at step 1, wrote step 2
    assert r["steps_logged"] == [1, 2]
    assert 0.85 <= r["plan_over_peak"] <= 1.15, r


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["hf", "native"])
def test_a_qwen25_05b_shaped_model_trains_checkpoints_resumes_as_planned(tmp_path, engine):
    _check(_rehearse(tmp_path, engine))


@pytest.mark.slow
@pytest.mark.vllm
def test_the_rehearsal_with_vllms_cpu_build(tmp_path):
    pytest.importorskip("vllm")
    _check(_rehearse(tmp_path, "vllm"))
