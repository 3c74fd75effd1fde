"""Reward functions as users write them, and a broken verifier told apart from bad model output.

- a function that raises on every completion stops the run before any work, with its traceback;
- one that raises on most completions of a step stops the run there; a few errors are reported and
  counted while training goes on;
- ``module:function`` resolves beside the config file and in the working directory;
- TRL-style functions get one call per generation call, with the example fields as keyword lists.
"""

import json
import textwrap

import pytest
import torch

from rlvr.config.run import load_config
from rlvr.core.types import Example, Score
from rlvr.tasks.base import Task, WeightedVerifier
from rlvr.tasks.scoring import Scorer, ScoringError, check_verifier
from rlvr.run.train import train
from rlvr.verifiers import from_callable, load_callable

TINY = ["model.tiny.hidden_size=32", "model.tiny.intermediate_size=64", "model.tiny.num_layers=1",
        "rollout.prompts_per_step=2", "rollout.group_size=4", "rollout.max_new_tokens=4", "train.steps=2",
        "train.checkpoint_every=0", "sft.steps=0", "eval.num_examples=2"]


def _data(tmp_path, n=8):
    path = tmp_path / "d.jsonl"
    path.write_text("".join(json.dumps({"prompt": f"say {w}:", "answer": w, "level": i % 3}) + "\n"
                            for i, w in enumerate(["ab", "cd", "ef", "gh", "ij", "kl", "mn", "op"][:n])))
    return path


def _examples(n=4):
    return [Example(f"e{i}", f"q{i}", str(i), "t", None, {"level": i, "tag": f"x{i}"}) for i in range(n)]


# --- the scorer's error policy -------------------------------------------------------------------------


class Flaky:
    """A per-completion verifier that raises on completions starting with 'boom'."""

    name = "flaky"

    def __call__(self, example, text):
        if text.startswith("boom"):
            raise KeyError("no such field")
        return Score(float(text == example.answer), {"correct": float(text == example.answer)})


def _flaky_task():
    return Task("t", {"train": _examples()}, [WeightedVerifier(Flaky())])


def test_errors_over_the_threshold_stop_with_the_first_traceback():
    warned = []
    scorer = Scorer(_flaky_task(), max_error_frac=0.5, warn=warned.append)
    ex = _examples()
    with pytest.raises(ScoringError, match=r"3 of 4 completions.*max_error_frac=0.5(.|\n)*KeyError"):
        scorer.score_many(ex, ["boom", "boom", "boom", "1"])
    assert len(warned) == 1 and "Traceback" in warned[0] and "no such field" in warned[0]


def test_errors_under_the_threshold_are_counted_warned_once_and_scored_zero():
    warned = []
    scorer = Scorer(_flaky_task(), max_error_frac=0.5, warn=warned.append)
    ex = _examples()
    for _ in range(3):
        scores, stats = scorer.score_many(ex, ["boom", "1", "2", "x"])
        assert stats["score/errors"] == 1
        assert [s.reward for s in scores] == [0.0, 1.0, 1.0, 0.0]
        assert not any("traceback" in k for s in scores for k in s.info)  # kept out of records
    assert len(warned) == 1 and "1 of 4" in warned[0]
    assert "KeyError" in scorer.first_error


def test_exactly_at_the_threshold_goes_on_and_one_never_stops():
    scorer = Scorer(_flaky_task(), max_error_frac=0.5, warn=lambda m: None)
    assert scorer.score_many(_examples(), ["boom", "boom", "1", "2"])[1]["score/errors"] == 2
    never = Scorer(_flaky_task(), max_error_frac=1.0, warn=lambda m: None)
    assert never.score_many(_examples(), ["boom"] * 4)[1]["score/errors"] == 4


def test_model_output_the_verifier_rejects_is_not_an_error():
    scorer = Scorer(_flaky_task(), max_error_frac=0.0, warn=lambda m: None)
    scores, stats = scorer.score_many(_examples(), ["wrong"] * 4)
    assert stats["score/errors"] == 0 and all(s.reward == 0.0 for s in scores)


def test_check_verifier_fails_only_when_every_gold_answer_raises():
    def broken(prompts, completions, **kw):
        return [undefined_name for _ in completions]  # noqa: F821

    task = Task("t", {"train": _examples()}, [WeightedVerifier(from_callable(broken))])
    with pytest.raises(ScoringError, match=r"(?s)gold answer.*NameError.*undefined_name"):
        check_verifier(task, task.examples("train"))
    zero = Task("t", {"train": _examples()}, [WeightedVerifier(from_callable(lambda p, c, **k: [0.0] * len(c)))])
    check_verifier(zero, zero.examples("train"))  # a reward of 0 for the bare answer is allowed


def test_broken_reward_function_stops_the_run_before_any_work(tmp_path):
    (tmp_path / "broken_reward.py").write_text(textwrap.dedent("""
        def score(prompts, completions, answer, **kw):
            return [float(c == a) for c, a in zip(completions, answr)]
    """))
    cfg_file = tmp_path / "config.yaml"
    cfg_file.write_text(f"task: {{name: jsonl, train_path: {_data(tmp_path)}, verifier: 'broken_reward:score'}}\n")
    cfg = load_config(cfg_file, TINY + [f"out={tmp_path / 'run'}", "sft.steps=3"])
    with pytest.raises(ScoringError, match=r"(?s)broken_reward.py.*NameError: name 'answr' is not defined"):
        train(cfg)
    run = tmp_path / "run"
    assert not (run / "eval").exists() and not (run / "metrics.jsonl").exists()  # no SFT, no eval, no step


def test_reward_failing_on_model_output_stops_at_the_first_step(tmp_path):
    def picky(prompts, completions, answer, **kw):
        if any(c not in answer for c in completions):  # fine on gold answers, raises on the model's output
            raise ValueError("cannot parse the completion")
        return [1.0] * len(completions)

    from rlvr.api import task as make_task

    t = make_task([{"prompt": f"say {w}:", "answer": w} for w in ["ab", "cd", "ef", "gh"]], reward=picky,
                  eval_fraction=0.25)
    cfg = load_config(overrides=TINY + [f"out={tmp_path / 'run'}", "rollout.max_new_tokens=6"])
    with pytest.raises(ScoringError, match="cannot parse the completion"):
        train(cfg, task=t)


# --- module:function resolution ------------------------------------------------------------------------


def _write_module(folder, name, value):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.py").write_text(f"def reward(prompts, completions, **kw):\n    return [{value}] * len(completions)\n")


def test_module_beside_the_config_file_resolves_from_any_working_directory(tmp_path, monkeypatch):
    exp = tmp_path / "exp"
    _write_module(exp, "my_reward", 0.25)
    (exp / "config.yaml").write_text(f"task: {{name: jsonl, train_path: {_data(tmp_path)}, "
                                     "verifier: 'my_reward:reward'}\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    cfg = load_config(exp / "config.yaml", TINY + [f"out={tmp_path / 'run'}"])
    assert cfg.task.params.verifier == f"{(exp / 'my_reward.py').resolve()}:reward"
    summary = train(cfg)
    assert summary["final_metrics"]["reward"] == pytest.approx(0.25)
    again = load_config(tmp_path / "run" / "config.yaml")  # the resolved config still finds it
    assert again.task.params.verifier == cfg.task.params.verifier


def test_module_in_the_working_directory_and_file_paths(tmp_path, monkeypatch):
    _write_module(tmp_path / "a", "same_name", 0.5)
    _write_module(tmp_path / "b", "same_name", 0.75)
    monkeypatch.chdir(tmp_path / "a")
    ex = _examples(2)
    assert [s.reward for s in from_callable("same_name:reward").score_batch(ex, ["x", "y"])] == [0.5, 0.5]
    other = from_callable(f"{tmp_path / 'b' / 'same_name.py'}:reward")  # two files of one name don't clash
    assert [s.reward for s in other.score_batch(ex, ["x", "y"])] == [0.75, 0.75]
    assert load_callable("../b/same_name.py:reward")([], ["x"]) == [0.75]


@pytest.mark.parametrize("spec,match", [
    ("no_such_module_xyz:reward", "no module named 'no_such_module_xyz'"),
    ("json:no_such_function", "no attribute 'no_such_function'"),
    ("json:__doc__", "not a function"),
    ("nofile.py:reward", "no file nofile.py"),
    ("missing-colon", "expected 'package.module:function'"),
])
def test_bad_specs_say_what_is_wrong(spec, match, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match=match):
        load_callable(spec)


def test_a_module_that_fails_at_import_is_reported(tmp_path, monkeypatch):
    (tmp_path / "bad_import.py").write_text("import numpy\nraise RuntimeError('setup failed')\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match="RuntimeError: setup failed"):
        load_callable("bad_import:reward")


# --- TRL-style calls -----------------------------------------------------------------------------------


def test_batch_function_is_called_once_per_batch_with_field_lists():
    calls = []

    def fn(prompts, completions, answer, level, tag, answers, examples, **kw):
        calls.append(dict(prompts=prompts, completions=completions, answer=answer, level=level, tag=tag, kw=kw))
        return [float(c == a) for c, a in zip(completions, answer)]

    task = Task("t", {"train": _examples()}, [WeightedVerifier(from_callable(fn))])
    scores, stats = Scorer(task).score_many(_examples(), ["0", "x", "2", "3"])
    assert len(calls) == 1 and task.batched
    c = calls[0]
    assert c["prompts"] == ["q0", "q1", "q2", "q3"] and c["completions"] == ["0", "x", "2", "3"]
    assert c["answer"] == ["0", "1", "2", "3"] and c["level"] == [0, 1, 2, 3] and c["tag"] == ["x0", "x1", "x2", "x3"]
    assert [s.reward for s in scores] == [1.0, 0.0, 1.0, 1.0] and stats["score/errors"] == 0


def test_function_without_kwargs_gets_only_what_it_names_and_missing_fields_are_none():
    seen = {}

    def fn(prompts, completions, tag):
        seen["tag"] = tag
        return [1.0] * len(completions)

    ex = _examples(2) + [Example("bare", "q", "a", "t")]
    assert [s.reward for s in from_callable(fn).score_batch(ex, ["a", "b", "c"])] == [1.0, 1.0, 1.0]
    assert seen["tag"] == ["x0", "x1", None]


def test_none_is_not_applicable_and_a_wrong_count_is_an_error():
    ex = _examples(3)
    scores = from_callable(lambda p, c, **k: [1.0, None, 0.5]).score_batch(ex, ["a", "b", "c"])
    assert [s.reward for s in scores] == [1.0, 0.0, 0.5] and "not applicable" in scores[1].info["reason"]
    scorer = Scorer(Task("t", {"train": ex}, [WeightedVerifier(from_callable(lambda p, c, **k: [1.0]))]),
                    max_error_frac=1.0, warn=lambda m: None)
    scores, stats = scorer.score_many(ex, ["a", "b", "c"])
    assert stats["score/errors"] == 3 and "returned 1 rewards for 3 completions" in scorer.first_error


def test_training_calls_the_function_once_per_generation_call(tmp_path):
    sizes = []

    def fn(prompts, completions, answer, **kw):
        sizes.append(len(completions))
        return [sum(ch in c for ch in a) / len(a) for c, a in zip(completions, answer)]

    from rlvr.api import task as make_task

    t = make_task([{"prompt": f"say {w}:", "answer": w} for w in ["ab", "cd", "ef", "gh"]], reward=fn,
                  eval_fraction=0.25)
    train(load_config(overrides=TINY + [f"out={tmp_path / 'run'}", "eval.report_greedy=false"]), task=t)
    # the gold-answer check (3 train rows), then each step's 2 prompts x 4 completions in one call
    assert sizes[0] == 3 and sizes.count(8) == 2


def test_mixture_parts_score_their_own_batches():
    calls = []

    def fn(prompts, completions, **kw):
        calls.append(list(completions))
        return [1.0] * len(completions)

    from rlvr.tasks.mixture import MixtureTask

    ex_a = [Example(f"a{i}", "q", "1", "a") for i in range(2)]
    ex_b = [Example(f"b{i}", "q", "1", "b") for i in range(2)]
    parts = {"a": Task("a", {"train": ex_a}, [WeightedVerifier(from_callable(fn))]),
             "b": Task("b", {"train": ex_b}, [WeightedVerifier(from_callable(fn))])}
    mix = MixtureTask.__new__(MixtureTask)
    Task.__init__(mix, "mixture", {"train": ex_a + ex_b}, parts["a"].verifiers)
    mix.parts, mix.domain_weights = parts, {"a": 1.0, "b": 1.0}
    scores = mix.score_batch([ex_a[0], ex_b[0], ex_a[1], ex_b[1]], ["p", "q", "r", "s"])
    assert mix.batched and sorted(calls) == [["p", "r"], ["q", "s"]] and all(s.reward == 1.0 for s in scores)
    assert torch.tensor([s.reward for s in scores]).sum() == 4
