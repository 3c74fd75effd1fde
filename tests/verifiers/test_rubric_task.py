"""The ``rubric`` task: human-weighted evaluation, POW3R training rewards through the group hook, checkpointed
EMA state, and real training steps on the tiny model."""

import json
import shutil

import pytest
import torch
from safetensors.torch import load_file

import rlvr.tasks.scoring as scoring_mod
from rlvr.config.run import load_config
from rlvr.tasks import TASKS, DataError
from rlvr.tasks.rubric_task import RubricTaskParams, rubric_task
from rlvr.tasks.scoring import TIMEOUT, Scorer
from rlvr.run.train import resume, train
from rlvr.verifiers.rubric import PolicyAwareRubric, RubricVerifier

# criteria a random character-level model satisfies some of the time, so groups carry contrast
RUBRIC = [{"id": "lower", "kind": "regex", "value": "[a-z]", "weight": 2, "category": "content"},
          {"id": "digit", "kind": "regex", "value": "[0-9]", "category": "content", "required": True},
          {"id": "upper", "kind": "regex", "value": "[A-Z]", "category": "style"},
          {"id": "calm", "kind": "not_contains", "value": "!", "category": "style"}]


def write_data(path, n=8):
    rows = [{"id": f"p{i}", "prompt": f"write {i}:", "rubric": RUBRIC, "answer": f"a{i}B", "source": "test"}
            for i in range(n)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def make(tmp_path, **kw):
    return rubric_task(RubricTaskParams(train_path=str(write_data(tmp_path / "r.jsonl")), **kw))


def test_registered_loads_rubrics_and_holds_out_eval(tmp_path):
    assert TASKS.get("rubric").fn is rubric_task
    task = make(tmp_path, eval_fraction=0.25)
    assert len(task.examples("train")) == 6 and len(task.examples("eval")) == 2
    ex = task.examples("train")[0]
    assert ex.meta["rubric"] == RUBRIC and ex.meta["source"] == "test" and ex.answer.startswith("a")


@pytest.mark.parametrize("row,match", [
    ({"prompt": "q"}, "missing field 'rubric'"),
    ({"prompt": "q", "rubric": [{"id": "a", "kind": "telepathy", "value": 1}]}, "invalid rubric"),
    ({"prompt": "q", "rubric": [{"id": "a", "kind": "regex", "value": "("}]}, "invalid rubric"),
    ({"prompt": "q", "rubric": [{"kind": "contains", "value": "x", "colour": "red"}]}, "invalid rubric"),
    ({"prompt": "q", "rubric": "be nice"}, "list of criterion objects"),
    ({"prompt": "", "rubric": RUBRIC}, "non-empty"),
])
def test_bad_rows_fail_at_load_naming_the_line(tmp_path, row, match):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps({"prompt": "ok", "rubric": RUBRIC}) + "\n" + json.dumps(row) + "\n")
    with pytest.raises(DataError, match=rf"bad.jsonl:2: .*{match}"):
        rubric_task(RubricTaskParams(train_path=str(path)))


def test_pow3r_needs_groups_of_two():
    with pytest.raises(ValueError, match="group_size >= 2"):
        load_config(overrides=["task.name=rubric", "task.train_path=x.jsonl", "task.weighting=pow3r",
                               "rollout.group_size=1"])


GROUPS = {"p0": ["ab1", "AB", "a1!", "b"], "p1": ["x", "Y1", "y", "zZ9"]}


def _flat(task, order):
    by_id = {e.id: e for e in task.examples("train")}
    return [by_id[i] for i, _ in order], [t for _, t in order]


def _interleaved():
    return [(i, GROUPS[i][k]) for k in range(4) for i in ("p0", "p1")]


def test_eval_score_is_the_human_weighted_rubric(tmp_path):
    task = make(tmp_path, weighting="pow3r")
    ex = task.examples("train")[0]
    for text in ["ab1", "AB", "a1!", "b", ""]:
        s, want = task.score(ex, text), RubricVerifier()(ex, text)
        assert s.reward == want.reward and s.components["rubric"] == want.reward
        assert s.components["correct"] == want.components["correct"]
    human = make(tmp_path, weighting="human")
    exs, texts = _flat(human, _interleaved())
    scores, _ = Scorer(human).score_many(exs, texts)
    assert [s.reward for s in scores] == [human.score(e, t).reward for e, t in zip(exs, texts)]


@pytest.mark.parametrize("params", [dict(), dict(ema_decay=0.5, contrast="mad", eps=0.0, gamma=2.0)])
def test_pow3r_training_rewards_equal_policy_aware_rubric(tmp_path, params):
    task = make(tmp_path, weighting="pow3r", **params)
    direct = PolicyAwareRubric(**params)
    by_id = {e.id: e for e in task.examples("train")}
    for _ in range(2):  # twice: with an EMA the second step depends on the first
        exs, texts = _flat(task, _interleaved())
        scores, stats = Scorer(task, workers=2).score_many(exs, texts)
        want = {i: direct.group_rewards(by_id[i], GROUPS[i]) for i in ("p0", "p1")}
        got = {i: [s for e, s in zip(exs, scores) if e.id == i] for i in ("p0", "p1")}
        for i in want:
            assert [s.reward for s in got[i]] == pytest.approx([s.reward for s in want[i]], abs=1e-12)
            assert [s.components["eval_reward"] for s in got[i]] == [s.components["eval_reward"] for s in want[i]]
            assert got[i][0].info["weights"] == pytest.approx(want[i][0].info["weights"])
        assert stats["score/errors"] == 0
    # not vacuous: the adapted rewards differ from the human-weighted ones
    assert [s.reward for s in scores] != [task.score(e, t).reward for e, t in zip(exs, texts)]
    assert task.state_dict() == {"pow3r": direct.state_dict()}


def test_timed_out_completions_keep_zero_and_reason(tmp_path):
    task = make(tmp_path, weighting="pow3r")
    ex = task.examples("train")[0]
    texts = ["ab1", "AB", "a1!", "b"]
    scores = [task.score(ex, t) for t in texts]
    out = task.score_group(ex, texts, scores[:2] + [TIMEOUT] + scores[3:])
    assert out[2] is TIMEOUT
    direct = PolicyAwareRubric().group_rewards(ex, texts[:2] + ["!"] + texts[3:])  # "!" fails every criterion
    assert [s.reward for s in out] == pytest.approx([s.reward for s in direct])


def test_required_gate_zeroes_both_rewards(tmp_path):
    task = make(tmp_path, weighting="pow3r", required_gate=True)
    ex = task.examples("train")[0]
    texts = ["ab1", "ab", "AB1", "x"]  # "ab" and "x" miss the required digit
    out = task.score_group(ex, texts, [task.score(ex, t) for t in texts])
    assert [s.reward for s in out][1::2] == [0.0, 0.0] and all(s.reward > 0 for s in out[0::2])
    assert task.score(ex, "ab").reward == 0.0


def test_ema_state_survives_a_json_round_trip(tmp_path):
    a = make(tmp_path, weighting="pow3r", ema_decay=0.5)
    exs, texts = _flat(a, _interleaved())
    Scorer(a).score_many(exs, texts)
    state = json.loads(json.dumps(a.state_dict()))
    assert set(state["pow3r"]["contrast_ema"]) == {f"{i}/{c['id']}" for i in GROUPS for c in RUBRIC}
    b = make(tmp_path, weighting="pow3r", ema_decay=0.5)
    b.load_state_dict(state)
    fresh = make(tmp_path, weighting="pow3r", ema_decay=0.5)
    texts2 = [t[::-1] + "Q" for t in texts]
    ra, rb, rf = (Scorer(t).score_many(exs, texts2)[0] for t in (a, b, fresh))
    assert [s.reward for s in ra] == [s.reward for s in rb]
    assert [s.reward for s in ra] != [s.reward for s in rf]  # the state matters
    assert make(tmp_path).state_dict() == {}  # human weighting keeps no state


def _overrides(tmp_path, out, *extra):
    # two train prompts, both sampled every step: the second step's weights depend on the first step's EMA
    data = write_data(tmp_path / "rubric.jsonl", n=3)
    return [f"out={tmp_path / out}", "task.name=rubric", f"task.train_path={data}", "task.eval_fraction=0.34",
            "task.weighting=pow3r", "task.ema_decay=0.5", "model.tiny.hidden_size=32",
            "model.tiny.intermediate_size=64", "model.tiny.num_layers=1", "rollout.prompts_per_step=2",
            "rollout.group_size=4", "rollout.max_new_tokens=6", "sft.steps=0", "train.steps=2",
            "optim.lr=1e-2", *extra]


def _weights(run, step):
    return load_file(str(run / "checkpoints" / f"step_{step:06d}" / "model" / "model.safetensors"))


def _state(run, step):
    return json.loads((run / "checkpoints" / f"step_{step:06d}" / "state.json").read_text())


def test_pow3r_rewards_drive_real_training_steps(tmp_path, monkeypatch):
    """Two real steps on the tiny model: every training reward is POW3R computed directly on its group."""
    seen = []
    real = scoring_mod.Scorer.score_many

    def record(self, examples, texts, groups=True):
        scores, stats = real(self, examples, texts, groups)
        if groups:  # training's calls (evaluation scores each completion alone: groups=False)
            seen.append((list(examples), list(texts), scores))
        return scores, stats

    monkeypatch.setattr(scoring_mod.Scorer, "score_many", record)
    train(load_config(overrides=_overrides(tmp_path, "run", "train.checkpoint_every=1")))
    run = tmp_path / "run"
    assert len(seen) == 2  # one scoring call per step
    direct = PolicyAwareRubric(ema_decay=0.5)
    for examples, texts, scores in seen:  # replay every group, in order, through POW3R computed directly
        for gid in dict.fromkeys(e.id for e in examples):
            idx = [i for i, e in enumerate(examples) if e.id == gid]
            assert len(idx) == 4
            want = direct.group_rewards(examples[idx[0]], [texts[i] for i in idx])
            assert [scores[i].reward for i in idx] == pytest.approx([s.reward for s in want], abs=1e-12)
    assert _state(run, 2)["task"] == {"pow3r": direct.state_dict()}
    assert _state(run, 2)["task"]["pow3r"]["contrast_ema"] != _state(run, 1)["task"]["pow3r"]["contrast_ema"]
    metrics = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [1, 2] and all(0.0 <= m["reward"] <= 1.0 for m in metrics)
    assert not all(torch.equal(v, _weights(run, 2)[k]) for k, v in _weights(run, 1).items())


@pytest.mark.slow
def test_pow3r_run_resumes_exactly(tmp_path):
    train(load_config(overrides=_overrides(tmp_path, "run", "train.checkpoint_every=1", "train.keep_checkpoints=3")))
    run, part = tmp_path / "run", tmp_path / "part"
    shutil.copytree(run, part)
    shutil.rmtree(part / "checkpoints" / "step_000002")
    resume(part / "checkpoints" / "step_000001")
    assert all(torch.equal(v, _weights(part, 2)[k]) for k, v in _weights(run, 2).items())
    assert _state(part, 2)["task"] == _state(run, 2)["task"]  # the EMA restored at step 1 continued exactly
