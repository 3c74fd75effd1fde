"""The vla_scenes task: gold boxes and trajectories recomputed from the rendered pixels, the SFT targets
through the vla verifier, disjoint deterministic splits, the vla_r1 recipe, one end-to-end step on the tiny
VLM."""

import json

import numpy as np
import pytest

from rlvr.config.run import load_config
from rlvr.tasks.vla_scenes import PALETTE, VLAScenesParams, vla_scenes_task
from rlvr.verifiers import build_verifier

SMALL = dict(num_train=40, num_eval=10)


@pytest.fixture(scope="module")
def task():
    return vla_scenes_task(VLAScenesParams(**SMALL))


def _pixels(ex):
    return np.asarray(ex.images[0].convert("RGB"), dtype=np.int64)


def _color_bbox(px, rgb):
    """(x0, y0, x1, y1) in normalised image units (pixel edges) of the pixels of exactly ``rgb``, and the
    pixel count."""
    ys, xs = np.nonzero((px == np.array(rgb)).all(axis=-1))
    s = px.shape[0]
    return (xs.min() / s, ys.min() / s, (xs.max() + 1) / s, (ys.max() + 1) / s), len(xs)


def _gripper_centre(px):
    """The centre of the white pixels (the gripper's plus sign), normalised."""
    ys, xs = np.nonzero((px == 255).all(axis=-1))
    assert len(xs) == 5, "the gripper is a 5-pixel plus sign"
    s = px.shape[0]
    return (xs.mean() + 0.5) / s, (ys.mean() + 0.5) / s


def _color_of(prompt):
    return next(c for c in PALETTE if f" {c}" in prompt)


def test_gold_boxes_match_the_objects_pixels(task):
    exs = [e for e in task.examples("train") + task.examples("eval") if e.meta["kind"] == "affordance"]
    assert len(exs) >= 10
    for e in exs:
        px, s = _pixels(e), e.images[0].size[0]
        (x0, y0, x1, y1), n = _color_bbox(px, PALETTE[_color_of(e.prompt)])
        assert n == round((x1 - x0) * s) * round((y1 - y0) * s), "a block is a solid rectangle"
        box, tol = e.meta["box"], 1.0 / s  # within a pixel (the gold is rounded to 2 decimals)
        assert abs(box["x"] - (x0 + x1) / 2) <= tol and abs(box["y"] - (y0 + y1) / 2) <= tol
        assert abs(box["width"] - (x1 - x0)) <= tol and abs(box["height"] - (y1 - y0)) <= tol
        assert "trajectory" not in e.meta


def test_gold_trajectories_run_from_the_gripper_into_the_object(task):
    exs = [e for e in task.examples("train") + task.examples("eval") if e.meta["kind"] == "trajectory"]
    assert len(exs) >= 10
    for e in exs:
        px, s = _pixels(e), e.images[0].size[0]
        traj = e.meta["trajectory"]
        assert "box" not in e.meta and len(traj) == 3  # the verifier would read a box first
        gx, gy = _gripper_centre(px)
        assert abs(traj[0][0] - gx) <= 1 / s and abs(traj[0][1] - gy) <= 1 / s
        x0, y0, x1, y1 = _color_bbox(px, PALETTE[_color_of(e.prompt)])[0]
        assert x0 <= traj[-1][0] <= x1 and y0 <= traj[-1][1] <= y1
        assert abs(traj[-1][0] - (x0 + x1) / 2) <= 1 / s and abs(traj[-1][1] - (y0 + y1) / 2) <= 1 / s
        mid = ((traj[0][0] + traj[-1][0]) / 2, (traj[0][1] + traj[-1][1]) / 2)  # evenly spaced on the segment
        assert abs(traj[1][0] - mid[0]) <= 0.011 and abs(traj[1][1] - mid[1]) <= 0.011


def test_scenes_keep_blocks_apart_and_of_distinct_colours(task):
    for e in task.examples("train"):
        colors = [b[0] for b in e.meta["objects"]]
        assert len(set(colors)) == len(colors) and 1 <= len(colors) <= 3
        px = _pixels(e)
        for c in colors:  # every block's colour forms one solid rectangle: no overlap, no shared colour
            (x0, y0, x1, y1), n = _color_bbox(px, PALETTE[c])
            assert n == round((x1 - x0) * px.shape[0]) * round((y1 - y0) * px.shape[0])


def test_sft_targets_score_full_marks_and_wrong_answers_less(task):
    vla = build_verifier("vla", {})
    for e in task.examples("sft")[:20] + task.examples("eval"):
        assert e.sft_target.startswith("<think>") and e.sft_target == e.answer
        assert task.score(e, e.sft_target).reward >= 0.99 and vla.score(e, e.sft_target).reward >= 0.99
    box_ex = next(e for e in task.examples("train") if e.meta["kind"] == "affordance")
    b = dict(box_ex.meta["box"])
    wrong = dict(b, x=min(1.0, b["x"] + 0.3))
    assert task.score(box_ex, f"<think>r</think><output>{json.dumps(wrong)}</output>").reward < 0.9
    assert task.score(box_ex, f"<output>{json.dumps(b)}</output>").reward == pytest.approx(0.9)  # no think
    traj_ex = next(e for e in task.examples("train") if e.meta["kind"] == "trajectory")
    t = traj_ex.meta["trajectory"]
    s = task.score(traj_ex, traj_ex.sft_target)
    assert s.reward >= 0.99 and s.info.get("vla.mode") == "trajectory"
    assert task.score(traj_ex, f"<think>r</think><output>{json.dumps(t[::-1])}</output>").reward < 0.95
    assert task.score(traj_ex, f"<think>r</think><output>{json.dumps(b)}</output>").reward == pytest.approx(0.1)


def test_splits_are_disjoint_and_deterministic_by_seed():
    a, b = vla_scenes_task(VLAScenesParams(**SMALL)), vla_scenes_task(VLAScenesParams(**SMALL))
    c = vla_scenes_task(VLAScenesParams(**SMALL, data_seed=1))

    def scenes(t, split):
        return {json.dumps([e.meta["gripper"], e.meta["objects"]]) for e in t.examples(split)}

    assert len(scenes(a, "train")) == 40 and len(scenes(a, "eval")) == 10
    assert not scenes(a, "train") & scenes(a, "eval")
    for split in ("train", "eval", "sft"):
        assert [(e.prompt, e.meta, e.sft_target) for e in a.examples(split)] == \
               [(e.prompt, e.meta, e.sft_target) for e in b.examples(split)]
        assert [e.images[0].tobytes() for e in a.examples(split)] == [e.images[0].tobytes() for e in b.examples(split)]
    assert scenes(a, "eval") != scenes(c, "eval")
    assert [e.prompt.split(">")[1] for e in a.examples("sft")] == [e.prompt.split(">")[1] for e in a.examples("train")]


def test_noisy_annotator_verbose_prompts_and_params():
    t = vla_scenes_task(VLAScenesParams(**SMALL, teacher_error=1.0, prompt_style="verbose", image_size=48,
                                        questions=["trajectory"], waypoints=5))
    sft, train = t.examples("sft"), t.examples("train")
    assert all(len(e.meta["trajectory"]) == 5 for e in train) and train[0].images[0].size == (48, 48)
    assert train[0].prompt.startswith("<image>Plan the trajectory of the gripper")
    assert sum(e.sft_target != e.answer for e in sft) >= 35  # jittered, but still in the parsed format
    rewards = [t.score(e, e.sft_target).reward for e in sft]
    assert all(0.1 < r < 1.0 for r, e in zip(rewards, sft) if e.sft_target != e.answer)
    assert all(t.score(e, e.answer).reward == pytest.approx(1.0, abs=1e-6) for e in train)  # exact gold
    with pytest.raises(ValueError, match="distinct colours"):
        VLAScenesParams(max_objects=4)


def test_the_recipe_validates_with_the_papers_settings():
    cfg = load_config(recipe="vla_r1")
    assert "arXiv:2510.01623" in cfg.recipe.citation and cfg.task.name == "vla_scenes"
    assert cfg.rollout.group_size == 5 and cfg.model.tiny.arch == "qwen2_vl"
    assert cfg.algorithm.kl.coef == 0.01 and cfg.algorithm.kl.estimator == "k3"
    longest = max(len(e.sft_target) for e in vla_scenes_task(cfg.task.params).examples("sft")[:500])
    assert longest <= cfg.rollout.max_new_tokens  # one token per character for the tiny model


TINY = ["model.tiny.hidden_size=32", "model.tiny.intermediate_size=64", "model.tiny.num_layers=1",
        "model.tiny.arch=qwen2_vl", "model.tiny.vision.depth=1", "model.tiny.vision.embed_dim=32"]


def test_the_recipe_trains_the_tiny_vlm_one_step(tmp_path):
    from rlvr.run.train import train

    over = TINY + [f"out={tmp_path / 'run'}", "task.name=vla_scenes", "task.num_train=16", "task.num_eval=4",
                   "rollout.prompts_per_step=2", "rollout.max_new_tokens=8", "algorithm.minibatches=2",
                   "sft.steps=1", "sft.batch_size=4", "train.steps=1", "train.checkpoint_every=0",
                   "train.eval_every=0", "eval.num_examples=2", "eval.samples=1", "eval.report_greedy=false",
                   "model.tiny.max_positions=64"]
    summary = train(load_config(recipe="vla_r1", overrides=over))
    assert 0.0 <= summary["eval_after"]["accuracy"] <= 1.0
