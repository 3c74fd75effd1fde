"""FGRPO's rule-based constraint checks (rlvr/verifiers/faithfulness.py): exact consistency and grounding
scores on hand-built completions against known scenes, hostile text, the tasks' faithfulness switch, the
fgrpo transform's dual ascent on these components (a hand-worked oracle) and the fgrpo_vlm recipe."""

import json
import math

import pytest
import torch

import rlvr.verifiers.faithfulness as F
from rlvr.algorithms.registry import REWARD_TRANSFORMS, TransformInputs, call
from rlvr.config.run import load_config
from rlvr.core.types import Example
from rlvr.tasks.shapes import ShapesParams, shapes_task
from rlvr.tasks.vla_scenes import VLAScenesParams, vla_scenes_task
from rlvr.verifiers import build_verifier
from rlvr.verifiers.faithfulness import (ConsistencyParams, ConsistencyVerifier, GroundingParams, GroundingVerifier,
                                         register_scene_reader, split_reasoning)

LAYOUT = [[0, "red", "disc"], [5, "red", "square"], [9, "blue", "disc"]]  # 2 red (1 disc, 1 square), 1 blue disc
SHAPES = Example("s", "<image>shapes?", "3", task="shapes", meta={"layout": LAYOUT})
BOX = {"x": 0.5, "y": 0.25, "width": 0.2, "height": 0.1}
# gripper centre (10.5, 10.5); blue centre (23, 4.5): right of and above it; red centre (3.5, 18): left, below
SCENE = Example("v", "<image>box red?", f"<think>red</think><output>{json.dumps(BOX)}</output>", task="vla_scenes",
                meta={"gripper": [10, 10], "objects": [["blue", 20, 2, 25, 6], ["red", 1, 15, 5, 20]]})
CONS, GROUND = ConsistencyVerifier(), GroundingVerifier()


@pytest.mark.parametrize("text, want", [
    ("<think>2 red,1 blue;3 shapes</think>3", 1.0),
    ("<think>2 red,1 blue;4 shapes</think>3", 0.0),
    ("<think>2+1=3, so 3</think> 3.0", 1.0),                   # numbers compared numerically
    ("<think>total 3 then I recount 2 red</think>3", 1.0),    # a conclusion marker beats a later number
    ("<think>2 red 1 blue, total: 3</think>3", 1.0),
    ("<think>2 red and 1 blue</think>3", 0.0),                 # no marker: the last number
    ("2 red and 1 blue: 3 shapes, so the answer is 3", 1.0),   # no think block: '... the answer is X'
    ("2 red + 2 blue = 4, and the answer is 3", 0.0),
    ("<think>it is 6/2</think><answer>3</answer>", 1.0),
    ("<think>2 red 1 blue = 3</think>there are 4", 0.0),
    ("3", 1.0),                                                # no reasoning: no_reasoning (1.0)
    ("<think></think>3", 1.0),                                 # an empty think block is no reasoning
    ("<think>I see shapes</think>3", 1.0),                     # no stated number: no_value (1.0)
    ("<think>I count 3", 0.0),                                 # unclosed: no final answer: no_answer (0.0)
    ("<think>3 shapes</think>", 0.0),
    ("<think>3 shapes</think>many", 0.0),
])
def test_consistency_on_numbers(text, want):
    s = CONS(SHAPES, text)
    assert s.reward == want and s.components == {"consistency": want}, s.info


def test_consistency_on_json_and_text_answers_and_its_parameters():
    good = f"<think>the box is {json.dumps({**BOX, 'x': 0.50})}</think><output>{json.dumps(BOX)}</output>"
    bad = f"<think>box {json.dumps({**BOX, 'x': 0.4})}</think><output>{json.dumps(BOX)}</output>"
    keys = f"<think>box {json.dumps({'x': 0.5})}</think><output>{json.dumps(BOX)}</output>"
    assert [CONS(SCENE, t).reward for t in (good, bad, keys, SCENE.answer)] == [1.0, 0.0, 0.0, 1.0]
    assert CONS(SCENE, '<think>[[0.1, 0.2], [1, 1]]</think><output>[[0.10, 0.2], [1.0, 1.0]]</output>').reward == 1.0
    city = Example("t", "capital?", "Paris")
    assert CONS(city, "<think>it is in France, so Paris.</think>paris").reward == 1.0
    assert CONS(city, "<think>the answer is Lyon</think>Paris").reward == 0.0
    assert CONS(city, "<think>France</think>Paris").reward == 1.0  # text answers need a conclusion marker
    strict = ConsistencyVerifier(ConsistencyParams(no_reasoning=0.0, no_value=0.5, no_answer=0.25))
    assert [strict(SHAPES, t).reward for t in ("3", "<think>hm</think>3", "<think>3 shapes")] == [0.0, 0.5, 0.25]
    strict.validate()
    assert split_reasoning("<THINK>a</THINK><answer>b</answer>") == ("a", "b")
    assert split_reasoning("x</think>y") == ("x", "y") and split_reasoning("y") == (None, "y")


@pytest.mark.parametrize("text, want", [
    ("<think>2 red,1 blue;3 shapes</think>3", 1.0),
    ("<think>2 red,2 blue;4 shapes</think>4", 1 / 3),          # '2 red' true, '2 blue' and '4 shapes' false
    ("<think>a blue disc, 1 red square, one red disc, no green</think>3", 1.0),
    ("<think>2 red discs, a blue square</think>3", 0.0),
    ("<think>red: 2, blue=1, 2 squares</think>3", 2 / 3),
    ("<think>2 orange, 1 magenta circle, no black</think>3", 1 / 3),  # colours outside the palette are checked
    ("<think>" + "2 red " * 50 + "5 blue</think>3", 0.5),          # repeats count once
    ("<think>I see shapes</think>3", 1.0),                     # no checkable claim: no_claims (1.0)
    ("3", 1.0),                                                # no reasoning: no_claims
    ("<think>99999999999999999999999999 red</think>3", 0.0),
])
def test_grounding_against_a_shapes_layout(text, want):
    s = GROUND(SHAPES, text)
    assert s.reward == pytest.approx(want) and s.components == {"grounding": s.reward}, s.info


@pytest.mark.parametrize("text, want", [
    (SCENE.answer, 1.0),                                                       # 'red' names a block that exists
    ("<think>red left of the gripper, red is below, blue right of red, blue above the gripper</think>", 1.0),
    ("<think>red block is to the right of the gripper, blue below</think>", 0.0),
    ("<think>2 blocks, no green, a red block</think>", 1.0),
    ("<think>3 blocks, a purple block, blue left of the red block</think>", 0.0),
    ("<think>green</think>", 0.0),
])
def test_grounding_against_a_tabletop_scene(text, want):
    assert GROUND(SCENE, text).reward == pytest.approx(want)


def test_scene_readers_are_a_table_users_extend():
    pegs = Example("p", "q", "1", meta={"pegs": 2})
    assert GROUND(pegs, "<think>2 pegs</think>2").info["reason"].startswith("no scene reader")
    register_scene_reader("pegs", lambda text, meta: [(t, int(t.split()[0]) == meta["pegs"])
                                                      for t in ("2 pegs", "3 pegs") if t in text])
    try:
        assert GROUND(pegs, "<think>2 pegs, 3 pegs</think>2").reward == 0.5
        forced = GroundingVerifier(GroundingParams(reader="pegs"))(SHAPES, "<think>2 pegs</think>")
        assert forced.reward == 0.0 and forced.info["reason"].startswith("verifier error")  # the reader's KeyError
    finally:
        del F.SCENE_READERS["pegs"]
    with pytest.raises(ValueError, match="unknown scene reader"):
        GroundingVerifier(GroundingParams(reader="pegs"))
    assert build_verifier("grounding", {"no_claims": 0.0})(SHAPES, "3").reward == 0.0
    assert build_verifier("consistency").name == "consistency"
    CONS.validate(), GROUND.validate()


HOSTILE = ["", " ", "<think>", "</think>", "<think><think></think></think>", "</think><think>", "<think>" * 500,
           "<think>" + "9" * 5000 + "</think>" + "9" * 5000, "<think>1e999999 red</think>1e999999",
           "<think>" + "[" * 5000 + "</think>" + "{" * 5000, '<think>{"x": NaN}</think><output>{"x": Infinity}',
           "<think>" + "red left of " * 2000 + "</think>", "<think>no no no a an the 0 red 00 blue -3 green</think>-3",
           "answer is answer is answer:", "<answer><output></answer>", "\x00\ufffd<think>\u2603 7 ℝed</think>7",
           "<think>" + "2 red, " * 3000 + "</think>2", "<think>1/0 = 1/0</think>1/0"]


@pytest.mark.parametrize("ex", [SHAPES, SCENE, Example("x", "q", "banana", meta={"layout": "oops"})])
def test_hostile_text_never_raises_and_stays_in_range(ex):
    for text in HOSTILE:
        for v in (CONS, GROUND):
            s = v(ex, text)
            assert 0.0 <= s.reward <= 1.0 and math.isfinite(s.reward), (text[:40], s)
            if ex.meta.get("layout") != "oops":
                assert "verifier error" not in str(s.info.get("reason")), (text[:40], s.info)


def test_shapes_switch_adds_weight_zero_components_and_reasoning_targets():
    small = dict(num_train=60, num_eval=10)
    plain, faithful = shapes_task(ShapesParams(**small)), shapes_task(ShapesParams(**small, faithfulness=True))
    assert len(plain.verifiers) == 1 and [e.sft_target for e in plain.examples("sft")] == \
        [e.answer for e in plain.examples("sft")]                            # the default is unchanged
    assert [(wv.verifier.name, wv.weight) for wv in faithful.verifiers] == \
        [("numeric", 1.0), ("consistency", 0.0), ("grounding", 0.0)]
    for e in faithful.examples("sft"):
        assert e.sft_target.startswith("<think>") and e.sft_target.endswith(f"</think>{e.answer}")
        s = faithful.score(e, e.sft_target)
        assert (s.reward, s.components["correct"], s.components["consistency"], s.components["grounding"]) == \
            (1.0, 1.0, 1.0, 1.0), (e.sft_target, s.info)
    e = faithful.examples("train")[0]
    wrong = faithful.score(e, f"<think>9 red;9 shapes</think>{e.answer}")   # right answer, bad reasoning
    assert wrong.reward == 1.0 and wrong.components["consistency"] == 0.0 and wrong.components["grounding"] == 0.0
    noisy = shapes_task(ShapesParams(**small, faithfulness=True, teacher_error=1.0))
    scores = [noisy.score(e, e.sft_target) for e in noisy.examples("sft")]
    assert all(s.reward == 0.0 and s.components["consistency"] == 1.0 and s.components["grounding"] < 1.0
               for s in scores)                                              # consistent, one claim ungrounded


def test_vla_scenes_switch():
    t = vla_scenes_task(VLAScenesParams(num_train=20, num_eval=4, faithfulness=True))
    assert [wv.weight for wv in t.verifiers] == [1.0, 0.0, 0.0]
    for e in t.examples("train"):
        s = t.score(e, e.answer)
        assert s.reward == pytest.approx(1.0) and s.components["consistency"] == s.components["grounding"] == 1.0
    assert len(vla_scenes_task(VLAScenesParams(num_train=20, num_eval=4)).verifiers) == 1


def test_fgrpo_moves_lambda_by_dual_ascent_on_these_components():
    """Hand-worked oracle (eta 0.5, tau 0.9, lambda_0 0): batch means 0.8, 0.85, 0.95 -> lambda 0.05, 0.075, 0.05,
    with the batch's consistency scored by the checker from real completions."""
    from rlvr.train.rewards import score_components as _score_components

    task = shapes_task(ShapesParams(num_train=20, num_eval=4, faithfulness=True))
    exs = task.examples("sft")
    entry = REWARD_TRANSFORMS.get("fgrpo")
    p = entry.params(constraints={"consistency": 0.9, "grounding": 0.9}, eta=0.5)
    state, lams, rewards = entry.state(p), [], []
    for n_bad in (4, 3, 1):  # of 20
        texts = [e.sft_target if i >= n_bad else e.sft_target.replace("</think>", "</think>1") + "0"
                 for i, e in enumerate(exs)]
        scores = task.score_batch(exs, texts)
        comps = _score_components(scores)
        r = torch.tensor([s.reward for s in scores], dtype=torch.float64)
        inp = TransformInputs(r, torch.arange(20) // 4, torch.ones(20, 3), None, comps)
        out, m = call(entry, inp, p, state)
        lams.append(m["lambda/consistency"])
        assert m["rate/consistency"] == pytest.approx(1 - n_bad / 20) and m["rate/grounding"] == 1.0
        rewards.append(out)
    assert lams == pytest.approx([0.05, 0.075, 0.05])
    assert state.state_dict()["lambdas"]["grounding"] == 0.0  # met (rate 1 > 0.9): stays at 0, never below
    # a step's reward adds the multipliers from before its update: none at the first step, 0.05 c at the second
    assert rewards[0].tolist() == [0.0] * 4 + [1.0] * 16
    assert rewards[1][5] - rewards[1][0] == pytest.approx(1.0 + 0.05)  # correct and consistent vs neither


def test_the_recipe_validates_and_trains_two_steps_on_its_visual_task(tmp_path):
    from tests.methods.helpers import run_recipe_steps

    cfg = load_config(recipe="fgrpo_vlm")
    assert "arXiv:2604.08476" in cfg.recipe.citation and cfg.task.name == "shapes" and cfg.task.params.faithfulness
    assert cfg.model.tiny.arch == "qwen2_vl"
    fg = cfg.algorithm.reward_transforms[0]
    assert fg.name == "fgrpo" and dict(fg.params.constraints) == {"consistency": 0.9, "grounding": 0.9}
    longest = max(len(e.sft_target) for e in shapes_task(cfg.task.params).examples("sft"))
    assert longest < cfg.rollout.max_new_tokens  # one token per character, and the end token
    over = ["task={name: shapes, faithfulness: true, num_train: 16, num_eval: 4}", "model.tiny.vision.depth=1",
            "model.tiny.vision.embed_dim=32", "rollout.max_new_tokens=12"]
    out = run_recipe_steps("fgrpo_vlm", tmp_path, steps=2, overrides=over)
    lam = [0.0, 0.0]  # the random model writes no reasoning: both rates are 1 and the multipliers stay at 0
    for m in out["metrics"]:  # (test_recipes.py trains the text variant with a binary reward: gradients there)
        assert m["score/errors"] == 0 and all(math.isfinite(v) for v in m.values() if isinstance(v, float))
        for i, k in enumerate(("consistency", "grounding")):
            rate = m[f"reward_transform/fgrpo/rate/{k}"]
            assert 0.0 <= rate <= 1.0
            lam[i] = max(0.0, lam[i] + 0.5 * (0.9 - rate))
            assert m[f"reward_transform/fgrpo/lambda/{k}"] == pytest.approx(lam[i])
