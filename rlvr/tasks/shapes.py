"""``shapes``: a procedural visual counting task, the vision-language CPU demo.

Each problem is a small image (``image_size`` pixels square, black) holding 1 to ``max_shapes`` filled
squares or discs of colours drawn from ``colors``, each in its own cell of a ``grid x grid`` layout (no
overlaps, so the count is unambiguous), and a question in one of two forms:

- ``count``: ``"<image>shapes?"``, answer the number of shapes;
- ``count_color``: ``"<image>red?"``, answer the number of shapes of that colour (possibly 0).

The verifier is the exact integer. Layouts are drawn from ``data_seed``: the held-out ones are distinct, and
the train split draws from the same distribution without them (a train layout may repeat), so the held-out
split never shares an image with the train split and both have the same distribution of shape counts (a
split of distinct layouts could not: a 4 x 4 grid holds only 96 one-shape layouts).

``teacher_error`` models a sloppy annotator for the supervised warm-up, as the arithmetic task does: in the
``sft`` split each answer is off by one (up or down, never below 0) with that probability. A model that
imitates it learns to count and the annotator's noise; RL against the exact verifier (rewards and
evaluation always use the true count) can then do better than its teacher.

``faithfulness`` (off by default) prepares the task for FGRPO (the ``fgrpo_vlm`` recipe): the scores gain the
rule-based ``consistency`` and ``grounding`` components (:mod:`rlvr.verifiers.faithfulness`, weight 0, so
rewards are unchanged), and the SFT targets carry a short reasoning for them to read: the shapes of each
colour present, in ``colors`` order, then the asked count, e.g. ``"<think>2 red,1 blue;3 shapes</think>3"``
(``"...;0 green</think>0"`` for ``green?``). A noisy annotator states its answer in the reasoning too, so its
targets stay consistent and its off-by-one count is an ungrounded claim.

``perception`` (off by default) gives the targets PRISM's response format (the ``prism`` recipe): a caption of
what the image holds, the reasoning, the answer, e.g. ``"<caption>2 red,1 blue</caption><think>3 shapes</think>
<answer>3</answer>"`` (without the line break). The train split's examples then carry the clean target too
(``Example.target``: the demonstrations PRISM's discriminator compares the policy's responses with); the
noisy annotator of the ``sft`` split sees the image right (its caption is true) but answers off by one.
"""

from __future__ import annotations

import random
from typing import Literal

from pydantic import Field, model_validator

from rlvr.core.types import Example
from rlvr.registry import Params
from rlvr.tasks.base import TASKS, Task, WeightedVerifier
from rlvr.verifiers.faithfulness import faithfulness_checks
from rlvr.verifiers.numeric import NumericVerifier

__all__ = ["ShapesParams", "shapes_task", "draw_layout", "reasoning_target", "perception_target", "PALETTE"]

PALETTE = {"red": (230, 40, 40), "green": (40, 200, 60), "blue": (50, 90, 240), "yellow": (235, 220, 40),
           "white": (245, 245, 245), "purple": (160, 60, 200)}


class ShapesParams(Params):
    image_size: int = Field(32, ge=8, description="image side in pixels")
    grid: int = Field(4, ge=1, description="cells per side; each shape fills one cell")
    max_shapes: int = Field(4, ge=1, description="most shapes in one image (at least 1)")
    colors: list[Literal["red", "green", "blue", "yellow", "white", "purple"]] = Field(
        ["red", "green", "blue"], min_length=1, description="colours shapes are drawn in")
    questions: list[Literal["count", "count_color"]] = Field(["count", "count_color"], min_length=1,
                                                             description="question forms to draw from")
    num_eval: int = Field(200, gt=0, description="held-out problems")
    num_train: int = Field(4000, gt=0, description="train problems")
    data_seed: int = Field(0, description="seed of the layouts and the split (independent of the run seed)")
    teacher_error: float = Field(0.0, ge=0.0, le=1.0, description="chance the SFT annotator is off by one")
    faithfulness: bool = Field(False, description="add FGRPO's rule-based consistency and grounding components "
                                                  "(weight 0) and give the SFT targets a short <think> reasoning")
    perception: bool = Field(False, description="targets in PRISM's format, <caption>shapes seen</caption><think>"
                                                "...</think><answer>n</answer>; train examples keep the clean one")

    @model_validator(mode="after")
    def _check(self) -> "ShapesParams":
        if self.perception and self.faithfulness:
            raise ValueError("perception and faithfulness give the targets different formats; choose one")
        if self.max_shapes > self.grid * self.grid:
            raise ValueError(f"max_shapes={self.max_shapes} does not fit a {self.grid}x{self.grid} grid")
        if self.image_size < 2 * self.grid:
            raise ValueError(f"image_size={self.image_size} is too small for a {self.grid}x{self.grid} grid")
        return self


def draw_layout(layout: tuple[tuple[int, str, str], ...], image_size: int, grid: int):
    """The image of ``layout``: ``(cell, colour, "square" | "disc")`` per shape, cells numbered row-major."""
    from PIL import Image, ImageDraw

    img = Image.new("RGB", (image_size, image_size), (0, 0, 0))
    draw = ImageDraw.Draw(img)
    cell = image_size / grid
    pad = max(1.0, cell * 0.15)
    for idx, color, kind in layout:
        r, c = divmod(idx, grid)
        box = (c * cell + pad, r * cell + pad, (c + 1) * cell - pad - 1, (r + 1) * cell - pad - 1)
        (draw.rectangle if kind == "square" else draw.ellipse)(box, fill=PALETTE[color])
    return img


def _layouts(p: ShapesParams, rng: random.Random, n: int, exclude: frozenset = frozenset(),
             unique: bool = True) -> list[tuple[tuple[int, str, str], ...]]:
    """``n`` layouts, each of k shapes with k uniform in 1..max_shapes (drawn first, so rejected duplicates never
    skew the counts), none in ``exclude``, all distinct when ``unique``."""
    seen, out = set(exclude), []
    cells = list(range(p.grid * p.grid))
    while len(out) < n:
        k = rng.randint(1, p.max_shapes)
        for _ in range(2000):
            layout = tuple(sorted((i, rng.choice(p.colors), rng.choice(("square", "disc")))
                                  for i in rng.sample(cells, k)))
            if layout not in seen:
                break
        else:
            raise ValueError(f"too few distinct layouts of {k} shapes for {n} problems "
                             f"({len(out)} drawn); enlarge the grid or palette, or hold out fewer")
        if unique:
            seen.add(layout)
        out.append(layout)
    return out


def _question(p: ShapesParams, layout, rng: random.Random) -> tuple[str, int]:
    form = rng.choice(p.questions)
    if form == "count":
        return "shapes?", len(layout)
    color = rng.choice(p.colors)
    return f"{color}?", sum(1 for _, c, _ in layout if c == color)


def _seen(p: ShapesParams, layout, question: str) -> tuple[list[str], str]:
    """The shapes per colour present, in ``colors`` order ("2 red"), and what the question asks about."""
    counts = [f"{sum(1 for _, c, _ in layout if c == col)} {col}" for col in dict.fromkeys(p.colors)
              if any(c == col for _, c, _ in layout)]
    return counts, "shapes" if question == "shapes?" else question[:-1]


def reasoning_target(p: ShapesParams, layout, question: str, answer: int) -> str:
    """The ``faithfulness`` SFT target: per-colour counts, then the asked count, then the answer."""
    counts, asked = _seen(p, layout, question)
    return f"<think>{','.join(counts)};{answer} {asked}</think>{answer}"


def perception_target(p: ShapesParams, layout, question: str, answer: int) -> str:
    """The ``perception`` target: a caption of the shapes per colour, the asked count, the answer."""
    counts, asked = _seen(p, layout, question)
    return f"<caption>{','.join(counts)}</caption><think>{answer} {asked}</think><answer>{answer}</answer>"


@TASKS.register("shapes", ShapesParams)
def shapes_task(p: ShapesParams) -> Task:
    """Count coloured shapes in an image (the vision-language CPU demo task)."""
    rng = random.Random(p.data_seed)
    held_out = _layouts(p, rng, p.num_eval)
    layouts = held_out + _layouts(p, rng, p.num_train, exclude=frozenset(held_out), unique=False)
    teacher = random.Random(f"teacher-{p.data_seed}")

    def ex(i: int, layout, split: str) -> tuple[Example, Example]:
        q, n = _question(p, layout, rng)
        image = draw_layout(layout, p.image_size, p.grid)
        target = n
        if p.teacher_error > 0 and teacher.random() < p.teacher_error:
            target = n + 1 if n == 0 or teacher.random() < 0.5 else n - 1
        clean = perception_target(p, layout, q, n) if p.perception else None
        e = Example(id=f"{split}{i}", prompt=f"<image>{q}", answer=str(n), task="shapes", target=clean,
                    images=(image,), meta={"layout": [list(s) for s in layout]})
        sft = (reasoning_target(p, layout, q, target) if p.faithfulness else
               perception_target(p, layout, q, target) if p.perception else str(target))
        return e, Example(e.id, e.prompt, e.answer, e.task, sft, e.meta, e.images)

    evals = [ex(i, lay, "eval")[0] for i, lay in enumerate(layouts[: p.num_eval])]
    pairs = [ex(i, lay, "train") for i, lay in enumerate(layouts[p.num_eval:])]
    checks = [WeightedVerifier(v, 0.0) for v in faithfulness_checks()] if p.faithfulness else []
    return Task("shapes", {"train": [a for a, _ in pairs], "eval": evals, "sft": [b for _, b in pairs]},
                [WeightedVerifier(NumericVerifier()), *checks])
