"""GSM8K-style and MATH-style loaders: gold extraction, targets, errors with file and line."""

import json

import pytest

from rlvr.tasks import TASKS, DataError
from rlvr.tasks.math_data import MathDataParams, gsm8k_gold, math_gold


def _jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def test_gold_extraction():
    assert gsm8k_gold("He has 3 + 4 = <<3+4=7>>7 apples.\n#### 1,234") == "1234"
    assert gsm8k_gold("no marker") is None
    assert math_gold({"solution": "So $x = \\boxed{\\frac{1}{2}}$ and \\boxed{\\{1, 2\\}}"}) == "\\{1, 2\\}"
    assert math_gold({"solution": "\\boxed{3}", "answer": "4"}) == "4"
    assert math_gold({"solution": "no box"}) is None


def test_gsm8k_task_scores_with_the_math_verifier(tmp_path):
    path = _jsonl(tmp_path / "g.jsonl", [{"question": "What is 3+4?", "answer": "3+4=7\n#### 7"},
                                          {"question": "Twice 6?", "answer": "#### 12"}])
    task = TASKS.get("gsm8k").fn(MathDataParams(train_path=path, eval_fraction=0.0, instruction="Answer after ####."))
    ex = task.examples("train")[0]
    assert ex.answer == "7" and ex.prompt.endswith("Answer after ####.") and ex.sft_target.endswith("#### 7")
    assert task.score(ex, "3 plus 4 is 7.\n#### 7").reward == 1.0
    assert task.score(ex, "#### 8").reward == 0.0


def test_math_task_scores_equivalent_forms(tmp_path):
    path = _jsonl(tmp_path / "m.jsonl", [{"problem": "Half of one?", "solution": "It is \\boxed{\\frac{1}{2}}."}])
    task = TASKS.get("math").fn(MathDataParams(train_path=path, eval_fraction=0.0))
    ex = task.examples("train")[0]
    assert task.score(ex, "The answer is \\boxed{0.5}").reward == 1.0
    assert task.score(ex, "\\boxed{\\frac{1}{3}}").reward == 0.0


def test_missing_gold_names_the_line(tmp_path):
    path = _jsonl(tmp_path / "g.jsonl", [{"question": "a", "answer": "#### 1"}, {"question": "b", "answer": "7"}])
    with pytest.raises(DataError, match=r"g.jsonl:2: no gold answer found"):
        TASKS.get("gsm8k").fn(MathDataParams(train_path=path))
