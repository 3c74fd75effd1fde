"""Methods on images: PEPO, CEPO and PROPA train real steps of the tiny VLM on a JSONL with image paths, their extra
passes see the images, and every extra producer that builds new rows keeps each row's images."""

import json

import numpy as np
import pytest
import torch
from PIL import Image

from rlvr.core.types import Completion, Example
from rlvr.passes.teacher import teacher_completions

from tests.methods.helpers import run_recipe_steps
from tests.methods.seed_support import BINARY

VLM = ["model.tiny.arch=qwen2_vl", "model.tiny.max_positions=96", "model.tiny.vision.depth=1",
       "model.tiny.vision.embed_dim=32"]


def _image_jsonl(tmp_path, n=8):
    rng = np.random.default_rng(0)
    (tmp_path / "img").mkdir()
    rows = []
    for i in range(n):
        Image.fromarray((rng.random((32, 32 + 16 * (i % 2), 3)) * 255).astype("uint8")).save(tmp_path / "img" / f"{i}.png")
        rows.append({"prompt": f"<image>n{i}?", "answer": str(i % 3), "images": f"img/{i}.png"})
    path = tmp_path / "img.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return [f"task.train_path={path}"]


@pytest.mark.parametrize("recipe", ["pepo", "cepo", "propa"])
def test_image_methods_train_the_vision_tower(recipe, tmp_path):
    extra = ["rollout.strategy.prm=true"] if recipe == "propa" else []  # PROPA's PRM reads the images too
    out = run_recipe_steps(recipe, tmp_path, steps=2, overrides=VLM + BINARY + _image_jsonl(tmp_path) + extra)
    before, after = out["before"], out["after"]
    assert any(not torch.equal(before[k], after[k]) for k in before if "visual" in k)
    for m in out["metrics"]:
        assert all(np.isfinite(v) for v in m.values() if isinstance(v, float))
    if recipe == "propa":
        from rlvr.rollout.wrappers import wrapper_chain

        (strategy,) = [w for w in wrapper_chain(out["c"].engine) if w.name == "strategy"]
        assert any("visual" in k for k in strategy.prm.net.state_dict())  # the PRM is a copy of the VLM's trunk
        assert any(m.get("engine/propa/prm/rows", 0) > 0 for m in out["metrics"])
    if recipe == "pepo":  # the perception weights are not uniform once images reach the extra (step 1: p = 1/2)
        assert out["metrics"][1]["advantage_transform/pepo/weight_max"] > 1.0 + 1e-6


def test_teacher_rows_keep_their_prompts_images():
    vision = object()
    comps = [Completion("a", [5, 6], [7], None, "stop", "x", group=0, vision=vision),
             Completion("a", [5, 6], [8], None, "stop", "y", group=0, vision=vision)]
    exs = [Example("a", "<image>?", "1")] * 2

    class Tok:
        def encode(self, text, add_special_tokens=False):
            return [ord(ch) for ch in text]

    for negative in (False, True):
        hinted = teacher_completions(comps, exs, torch.tensor([1.0, 0.0]), Tok(), " {answer}", negative)
        assert all(h.vision is vision and h.prompt_ids[:2] == [5, 6] for h in hinted)
