"""``vla_scenes``: procedural tabletop scenes for VLA-R1's affordance and trajectory rewards (the ``vla`` verifier).

Each problem is a small image (``image_size`` pixels square) of a brown table top holding a white gripper
marker (a plus sign, 3 pixels across) and 1 to ``max_objects`` filled rectangular blocks, each of its own
colour from ``colors`` (so a colour names one block), none touching another or the gripper (a gap of at
least one pixel). A question asks about one block, drawn at random, in one of two kinds (``questions``):

- ``affordance``: ``"<image>box red?"`` (``prompt_style: verbose``: ``"<image>Locate the affordance region
  of the red block ..."``); gold ``meta["box"]``, the block's graspable region in VLA-R1's normalised
  centre format ``{"x", "y", "width", "height"}``. A block is grasped anywhere, so the region is its whole
  pixel extent: pixels ``x0..x1`` (inclusive) give ``x = (x0 + x1 + 1) / 2 / image_size`` and
  ``width = (x1 - x0 + 1) / image_size``, and likewise in y;
- ``trajectory``: ``"<image>path red?"``; gold ``meta["trajectory"]``, ``waypoints`` points evenly spaced
  on the straight segment from the gripper's centre (pixel ``(gx, gy)``: ``((gx + 0.5) / size, (gy + 0.5) /
  size)``) to the centre of the block's box, both ends included. Obstacles are not avoided: other blocks
  are only distractors.

Every coordinate is rounded to 2 decimals (one pixel is at least 1/64 at the default sizes, so the
rounding stays well inside a pixel). The gold ``answer`` and the SFT ``target`` are in the exact format the
``vla`` verifier parses: ``"<think>red</think><output>{"x":0.41,...}</output>"`` (compact JSON), so the
target scores 1.0 (0.9 task + 0.1 format). A trajectory example keeps the block's box as
``meta["target_box"]``, never ``meta["box"]`` (the verifier reads ``box`` first).

Layouts (gripper position and blocks) are drawn from ``data_seed`` and each appears once, so the held-out
split never shares an image with the train split. ``teacher_error`` models a sloppy annotator for the
supervised warm-up: in the ``sft`` split each target is, with that probability, jittered (every
coordinate moved by up to ``teacher_jitter``, uniformly, then clipped to [0, 1]); rewards and evaluation
always use the exact gold.

``faithfulness`` (off by default) adds FGRPO's rule-based ``consistency`` and ``grounding`` score components
(:mod:`rlvr.verifiers.faithfulness`, weight 0: rewards are unchanged) for the ``fgrpo`` transform to read;
the targets' reasoning (the block's colour) is a claim the grounding check verifies.
"""

from __future__ import annotations

import json
import random
from typing import Literal

from pydantic import Field, model_validator

from rlvr.core.types import Example
from rlvr.registry import Params
from rlvr.tasks.base import TASKS, Task, WeightedVerifier, draw_distinct
from rlvr.verifiers.faithfulness import faithfulness_checks
from rlvr.verifiers.vla import VLAVerifier

__all__ = ["VLAScenesParams", "vla_scenes_task", "draw_scene", "Scene", "PALETTE", "TABLE", "GRIPPER",
           "box_of", "trajectory_of", "render_output"]

PALETTE = {"red": (230, 40, 40), "green": (40, 200, 60), "blue": (50, 90, 240), "yellow": (235, 220, 40),
           "purple": (160, 60, 200), "orange": (250, 140, 20), "cyan": (40, 210, 220)}
TABLE = (110, 80, 55)
GRIPPER = (255, 255, 255)
_Color = Literal["red", "green", "blue", "yellow", "purple", "orange", "cyan"]

# a scene: ((gx, gy), ((colour, x0, y0, x1, y1), ...)) in pixels, corners inclusive, blocks sorted by colour
Scene = tuple[tuple[int, int], tuple[tuple[str, int, int, int, int], ...]]


class VLAScenesParams(Params):
    image_size: int = Field(32, ge=16, le=512, description="image side in pixels")
    max_objects: int = Field(3, ge=1, description="most blocks in one scene (at least 1; each of its own colour)")
    object_size: tuple[float, float] = Field((0.15, 0.3), description="block side range, as a fraction of the "
                                             "image side (each side drawn independently)")
    colors: list[_Color] = Field(["red", "green", "blue"], min_length=1, description="colours blocks are drawn in")
    questions: list[Literal["affordance", "trajectory"]] = Field(
        ["affordance", "trajectory"], min_length=1, description="question kinds to draw from: the block's "
                                                                "box, or the gripper's path to it")
    prompt_style: Literal["short", "verbose"] = Field(
        "short", description="short: '<image>box red?' (the character-level demo model); verbose: VLA-R1-like "
                             "instructions")
    waypoints: int = Field(3, ge=2, le=16, description="points of a gold trajectory, both ends included")
    num_eval: int = Field(200, gt=0, description="held-out problems")
    num_train: int = Field(4000, gt=0, description="train problems")
    data_seed: int = Field(0, description="seed of the layouts and the split (independent of the run seed)")
    teacher_error: float = Field(0.0, ge=0.0, le=1.0, description="chance the SFT annotator's target is jittered")
    teacher_jitter: float = Field(0.1, ge=0.0, le=1.0, description="largest shift of each coordinate of a "
                                                                   "jittered SFT target (normalised units)")
    faithfulness: bool = Field(False, description="add FGRPO's rule-based consistency and grounding score "
                                                  "components (weight 0)")

    @model_validator(mode="after")
    def _check(self) -> "VLAScenesParams":
        lo, hi = self.object_size
        if not 0.0 < lo <= hi <= 0.5:
            raise ValueError(f"object_size={self.object_size} must satisfy 0 < low <= high <= 0.5")
        if self.max_objects > len(set(self.colors)):
            raise ValueError(f"max_objects={self.max_objects} needs as many distinct colours, got {self.colors}")
        if self.max_objects * (hi * self.image_size + 1) ** 2 > 0.5 * self.image_size ** 2:
            raise ValueError(f"{self.max_objects} blocks of up to {hi} of the side do not fit a scene; lower "
                             "max_objects or object_size")
        return self


def _side_range(p: VLAScenesParams) -> tuple[int, int]:
    lo = max(2, round(p.object_size[0] * p.image_size))
    return lo, max(lo, round(p.object_size[1] * p.image_size))


def _apart(a: tuple[int, int, int, int], b: tuple[int, int, int, int]) -> bool:
    """Whether two inclusive pixel rectangles leave at least one pixel between them."""
    return a[2] + 1 < b[0] or b[2] + 1 < a[0] or a[3] + 1 < b[1] or b[3] + 1 < a[1]


def _scene(p: VLAScenesParams, rng: random.Random) -> Scene | None:
    s = p.image_size
    gx, gy = rng.randint(1, s - 2), rng.randint(1, s - 2)
    taken = [(gx - 1, gy - 1, gx + 1, gy + 1)]
    lo, hi = _side_range(p)
    blocks = []
    for color in rng.sample(sorted(set(p.colors)), rng.randint(1, p.max_objects)):
        for _ in range(50):
            w, h = rng.randint(lo, hi), rng.randint(lo, hi)
            x0, y0 = rng.randint(0, s - w), rng.randint(0, s - h)
            rect = (x0, y0, x0 + w - 1, y0 + h - 1)
            if all(_apart(rect, t) for t in taken):
                taken.append(rect)
                blocks.append((color, *rect))
                break
        else:
            return None
    return (gx, gy), tuple(sorted(blocks))


def _scenes(p: VLAScenesParams, rng: random.Random, n: int) -> list[Scene]:
    return draw_distinct(lambda _: _scene(p, rng), n, key=lambda s: s, what="scenes",
                         hint="enlarge image_size or the palette")


def draw_scene(scene: Scene, image_size: int):
    """The image of ``scene``: the table, each block a filled rectangle, the gripper a white plus sign."""
    from PIL import Image, ImageDraw

    img = Image.new("RGB", (image_size, image_size), TABLE)
    draw = ImageDraw.Draw(img)
    for color, x0, y0, x1, y1 in scene[1]:
        draw.rectangle((x0, y0, x1, y1), fill=PALETTE[color])
    gx, gy = scene[0]
    draw.line((gx - 1, gy, gx + 1, gy), fill=GRIPPER)
    draw.line((gx, gy - 1, gx, gy + 1), fill=GRIPPER)
    return img


def _r(v: float) -> float:
    return round(min(1.0, max(0.0, v)), 2)


def box_of(rect: tuple[int, int, int, int], image_size: int) -> dict[str, float]:
    """An inclusive pixel rectangle as a normalised centre-format box, rounded to 2 decimals."""
    x0, y0, x1, y1 = rect
    return {"x": _r((x0 + x1 + 1) / 2 / image_size), "y": _r((y0 + y1 + 1) / 2 / image_size),
            "width": _r((x1 - x0 + 1) / image_size), "height": _r((y1 - y0 + 1) / image_size)}


def trajectory_of(gripper: tuple[int, int], rect: tuple[int, int, int, int], image_size: int,
                  k: int) -> list[list[float]]:
    """``k`` evenly spaced points from the gripper's centre to the rectangle's centre, rounded."""
    sx, sy = (gripper[0] + 0.5) / image_size, (gripper[1] + 0.5) / image_size
    ex, ey = (rect[0] + rect[2] + 1) / 2 / image_size, (rect[1] + rect[3] + 1) / 2 / image_size
    return [[_r(sx + (ex - sx) * i / (k - 1)), _r(sy + (ey - sy) * i / (k - 1))] for i in range(k)]


def render_output(color: str, gold: dict | list) -> str:
    """The completion the verifier parses: a minimal think block, then the compact JSON in <output>."""
    return f"<think>{color}</think><output>{json.dumps(gold, separators=(',', ':'))}</output>"


_PROMPTS = {
    ("affordance", "short"): "box {c}?",
    ("trajectory", "short"): "path {c}?",
    ("affordance", "verbose"): ("Locate the affordance region of the {c} block for grasping. Answer "
                                "<think>...</think><output>{{\"x\",\"y\",\"width\",\"height\"}}</output>, "
                                "normalised centre format."),
    ("trajectory", "verbose"): ("Plan the trajectory of the gripper (the white cross) to the {c} block. Answer "
                                "<think>...</think><output>[[x,y],...]</output>, normalised coordinates."),
}


def _jitter(gold: dict | list, amount: float, rng: random.Random) -> dict | list:
    if isinstance(gold, dict):
        return {k: _r(v + rng.uniform(-amount, amount)) for k, v in gold.items()}
    return [[_r(v + rng.uniform(-amount, amount)) for v in pt] for pt in gold]


@TASKS.register("vla_scenes", VLAScenesParams)
def vla_scenes_task(p: VLAScenesParams) -> Task:
    """Tabletop scenes: a block's affordance box or the gripper's trajectory to it (VLA-R1 rewards)."""
    rng = random.Random(p.data_seed)
    scenes = _scenes(p, rng, p.num_eval + p.num_train)
    teacher = random.Random(f"teacher-{p.data_seed}")

    def ex(i: int, scene: Scene, split: str) -> tuple[Example, Example]:
        kind = rng.choice(p.questions)
        color, *rect = rng.choice(scene[1])
        rect = tuple(rect)
        meta = {"kind": kind, "color": color, "gripper": list(scene[0]),
                "objects": [list(b) for b in scene[1]]}
        if kind == "affordance":
            gold = meta["box"] = box_of(rect, p.image_size)
        else:
            gold = meta["trajectory"] = trajectory_of(scene[0], rect, p.image_size, p.waypoints)
            meta["target_box"] = box_of(rect, p.image_size)
        answer = render_output(color, gold)
        target = answer
        if p.teacher_error > 0 and teacher.random() < p.teacher_error:
            target = render_output(color, _jitter(gold, p.teacher_jitter, teacher))
        e = Example(id=f"{split}{i}", prompt="<image>" + _PROMPTS[kind, p.prompt_style].format(c=color),
                    answer=answer, task="vla_scenes", images=(draw_scene(scene, p.image_size),), meta=meta)
        return e, Example(e.id, e.prompt, e.answer, e.task, target, e.meta, e.images)

    evals = [ex(i, s, "eval")[0] for i, s in enumerate(scenes[: p.num_eval])]
    pairs = [ex(i, s, "train") for i, s in enumerate(scenes[p.num_eval:])]
    checks = [WeightedVerifier(v, 0.0) for v in faithfulness_checks()] if p.faithfulness else []
    return Task("vla_scenes", {"train": [a for a, _ in pairs], "eval": evals, "sft": [b for _, b in pairs]},
                [WeightedVerifier(VLAVerifier()), *checks])
