"""Tasks, the JSONL loader and the numeric verifier."""

import json
from fractions import Fraction

import pytest

from rlvr.config.run import load_config
from rlvr.core.types import Example
from rlvr.tasks import TASKS, DataError
from rlvr.tasks.dataset import JsonlParams
from rlvr.verifiers import NumericVerifier, parse_number, validate_verifier
from rlvr.run.train import build_task


def write(path, rows):
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


@pytest.mark.parametrize("s,want", [("42", 42), ("-3", -3), ("0.5", Fraction(1, 2)), ("1/2", Fraction(1, 2)),
                                    ("1,234", 1234), ("12.50", Fraction(25, 2)), ("  7. ", 7), (".5", Fraction(1, 2))])
def test_parse_number(s, want):
    assert parse_number(s) == want


@pytest.mark.parametrize("s", ["", "abc", "1/0", "1,23", "3e5x", "1" * 100])
def test_parse_number_rejects(s):
    assert parse_number(s) is None


@pytest.mark.parametrize("answer,text,reward", [
    ("0.5", "1/2", 1.0), ("1/2", "0.50", 1.0), ("85", "85", 1.0), ("85", "The answer is 85", 1.0),
    ("85", "84", 0.0), ("0.1", "0.1000000001", 0.0), ("85", "", 0.0), ("85", "eighty-five", 0.0),
    ("1000", "1,000", 1.0), ("-4", "-4", 1.0), ("4", "-4", 0.0),
])
def test_numeric_verifier_is_exact(answer, text, reward):
    assert NumericVerifier()(Example("x", "q", answer), text).reward == reward


def test_numeric_verifier_self_check():
    validate_verifier(NumericVerifier(), Example("x", "q", "3/4"), wrong="0.7")


def test_arithmetic_splits_are_disjoint_and_stable():
    cfg = load_config(overrides=["task.max_value=30", "task.num_eval=50"])
    t1, t2 = build_task(cfg), build_task(cfg)
    train_ids = {e.id for e in t1.examples("train")}
    eval_ids = {e.id for e in t1.examples("eval")}
    assert not train_ids & eval_ids and len(eval_ids) == 50 and len(train_ids) == 31 * 31 - 50
    assert [e.id for e in t2.examples("eval")] == [e.id for e in t1.examples("eval")]
    ex = t1.examples("eval")[0]
    a, b = ex.prompt[:-1].split("+")
    assert int(ex.answer) == int(a) + int(b)
    assert t1.score(ex, ex.answer).reward == 1.0


def test_jsonl_task_loads_and_scores(tmp_path):
    train = write(tmp_path / "train.jsonl", [{"prompt": "1+1=", "answer": 2}, {"prompt": "half?", "answer": "1/2", "id": "h"}])
    ev = write(tmp_path / "eval.jsonl", [{"prompt": "2+2=", "answer": "4"}])
    task = TASKS.get("jsonl").fn(JsonlParams(train_path=str(train), eval_path=str(ev)))
    assert [e.id for e in task.examples("train")] == ["train-1", "h"]
    assert task.score(task.examples("train")[1], "0.5").reward == 1.0
    assert task.score(task.examples("eval")[0], "5").reward == 0.0


def test_jsonl_holds_out_eval_fraction(tmp_path):
    rows = [{"prompt": f"{i}?", "answer": i} for i in range(20)]
    task = TASKS.get("jsonl").fn(JsonlParams(train_path=str(write(tmp_path / "t.jsonl", rows)), eval_fraction=0.25))
    assert len(task.examples("eval")) == 5 and len(task.examples("train")) == 15


@pytest.mark.parametrize("line,needle", [
    ('{"prompt": "a", "answer": 1', "invalid JSON"),
    ('[1, 2]', "expected a JSON object"),
    ('{"prompt": "a"}', "missing field 'answer'"),
    ('{"prompt": "", "answer": 1}', "must be a non-empty string"),
    ('{"prompt": "a", "answer": {"x": 1}}', "must be a string or number"),
])
def test_malformed_jsonl_names_file_and_line(tmp_path, line, needle):
    f = write(tmp_path / "d.jsonl", [{"prompt": "ok", "answer": 1}, "", line])
    with pytest.raises(DataError) as e:
        TASKS.get("jsonl").fn(JsonlParams(train_path=str(f)))
    assert f"{f}:3" in str(e.value) and needle in str(e.value)


def test_jsonl_missing_file(tmp_path):
    with pytest.raises(DataError, match="no such file"):
        TASKS.get("jsonl").fn(JsonlParams(train_path=str(tmp_path / "nope.jsonl")))


def test_jsonl_custom_reward_function(tmp_path):
    f = write(tmp_path / "d.jsonl", [{"prompt": "say hi", "answer": "hi"}])
    task = TASKS.get("jsonl").fn(JsonlParams(train_path=str(f), eval_fraction=0.0,
                                             verifier="tests.reward_fns:contains_answer"))
    ex = task.examples("train")[0]
    assert task.score(ex, "oh hi there").reward == 1.0
    assert task.score(ex, "bye").reward == 0.0


def test_task_score_never_raises():
    class Boom:
        name = "boom"

        def __call__(self, example, text):
            raise RuntimeError("bad")

    from rlvr.tasks.base import Task, WeightedVerifier
    t = Task("t", {"train": [Example("a", "q", "1")]}, [WeightedVerifier(Boom())])
    s = t.score(t.examples("train")[0], "1")
    assert s.reward == 0.0 and "RuntimeError" in s.info["boom.error"]


def _rows():
    return [{"question": f"{i}+{i}=", "gold": str(2 * i), "uid": f"q{i}", "level": i % 3} for i in range(10)]


def test_parquet_with_field_mapping(tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")
    import pyarrow as pa

    path = tmp_path / "d.parquet"
    pq.write_table(pa.Table.from_pylist(_rows()), path)
    task = TASKS.get("dataset").fn(JsonlParams(train_path=str(path), prompt_field="question", answer_field="gold",
                                               id_field="uid", eval_fraction=0.2))
    exs = task.examples("train") + task.examples("eval")
    assert sorted(e.id for e in exs) == sorted(f"q{i}" for i in range(10))
    ex = next(e for e in exs if e.id == "q3")
    assert ex.prompt == "3+3=" and ex.answer == "6" and ex.meta["level"] == 0
    assert task.score(ex, "6").reward == 1.0


def test_saved_hf_dataset_and_dict_splits(tmp_path):
    datasets = pytest.importorskip("datasets")
    ds = datasets.Dataset.from_list(_rows())
    ds.save_to_disk(str(tmp_path / "one"))
    task = TASKS.get("dataset").fn(JsonlParams(train_path=str(tmp_path / "one"), prompt_field="question",
                                               answer_field="gold", eval_fraction=0.0))
    assert len(task.examples("train")) == 10 and task.examples("train")[0].id == "one-0"
    datasets.DatasetDict({"train": ds, "test": ds.select(range(3))}).save_to_disk(str(tmp_path / "dict"))
    with pytest.raises(DataError, match="set task.hf_split"):
        TASKS.get("dataset").fn(JsonlParams(train_path=str(tmp_path / "dict"), prompt_field="question",
                                            answer_field="gold"))
    task = TASKS.get("dataset").fn(JsonlParams(train_path=str(tmp_path / "dict"), hf_split="test",
                                               prompt_field="question", answer_field="gold", eval_fraction=0.0))
    assert len(task.examples("train")) == 3


def test_verifier_name_and_params_are_checked_at_config_load():
    from rlvr.config.run import ConfigError

    with pytest.raises(ConfigError, match="unknown verifier 'nope'"):
        load_config(overrides=["task.name=dataset", "task.train_path=x.jsonl", "task.verifier=nope"])
    with pytest.raises(ConfigError, match="verifier_params of 'numeric': bogus: unknown field"):
        load_config(overrides=["task.name=dataset", "task.train_path=x.jsonl", "task.verifier=numeric",
                               "task.verifier_params={bogus: 1}"])


def test_non_utf8_jsonl_names_the_line(tmp_path):
    f = tmp_path / "b.jsonl"
    f.write_bytes(b'{"prompt": "a", "answer": 1}\n\xff\xfe\x00garbage\n')
    with pytest.raises(DataError, match=r"b.jsonl:2: not UTF-8"):
        TASKS.get("jsonl").fn(JsonlParams(train_path=str(f)))
