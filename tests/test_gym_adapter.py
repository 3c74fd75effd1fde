"""The reasoning-gym adapter, against a stand-in module with reasoning-gym's API and its lenient scorer."""

import sys
import types

import pytest

from rlvr.tasks import TASKS, DataError
from rlvr.tasks.gym import ReasoningGymParams, strip_answer


class FakeDataset(list):
    def score_answer(self, answer, entry):
        gold = entry["answer"]
        if answer == gold:
            return 1.0
        return len(gold) / len(answer) if answer and gold in answer else 0.0  # reasoning-gym's partial credit


@pytest.fixture
def fake_gym(monkeypatch):
    mod = types.ModuleType("reasoning_gym")
    mod.create_dataset = lambda name, size, seed, **cfg: FakeDataset(
        {"question": f"{seed}:{i}+1=?", "answer": str(i + 1), "metadata": {}} for i in range(size))
    monkeypatch.setitem(sys.modules, "reasoning_gym", mod)


def test_strict_mode_removes_partial_credit(fake_gym):
    task = TASKS.get("reasoning_gym").fn(ReasoningGymParams(dataset="x", size=5, eval_size=3))
    ex = task.examples("train")[3]
    assert ex.answer == "4" and len(task.examples("eval")) == 3
    assert task.score(ex, "<answer>4</answer>").reward == 1.0
    assert task.score(ex, "\\boxed{4}").reward == 1.0
    assert task.score(ex, " 4 is it").reward == 0.0  # the lenient scorer would give 0.5
    lenient = TASKS.get("reasoning_gym").fn(ReasoningGymParams(dataset="x", size=5, strict=False))
    assert lenient.score(ex, "4 is it").reward == pytest.approx(1 / 7)


def test_missing_package_says_which_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "reasoning_gym", None)
    with pytest.raises(DataError, match=r"rlvr\[gym\]"):
        TASKS.get("reasoning_gym").fn(ReasoningGymParams(dataset="x"))


@pytest.mark.parametrize("text,want", [("<answer> 12 </answer>", "12"), ("so \\boxed{x+1}", "x+1"), ("\\boxed{1} then 2", "\\boxed{1} then 2"),
                                       ("<answer>\\boxed{7}</answer>", "7"), ("plain", "plain")])
def test_strip_answer(text, want):
    assert strip_answer(text) == want


def test_real_package_if_installed():
    rg = pytest.importorskip("reasoning_gym")
    task = TASKS.get("reasoning_gym").fn(ReasoningGymParams(dataset="basic_arithmetic", size=5, eval_size=2))
    ex = task.examples("train")[0]
    assert task.score(ex, f"<answer>{ex.answer}</answer>").reward == 1.0
