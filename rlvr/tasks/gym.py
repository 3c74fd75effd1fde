"""``reasoning_gym``: procedural tasks from the ``reasoning-gym`` package (optional extra ``rlvr[gym]``).

Train and eval examples come from ``reasoning_gym.create_dataset(name, size=, seed=, **config)`` with
different seeds. Scoring uses the dataset's own ``score_answer`` after stripping ``<answer>`` tags and a
final ``\\boxed{}``. Its default scorer gives partial credit that rewards the wrong things (a gold string
found inside a longer answer scores ``len(gold)/len(answer)``; countdown gives 0.05 for any parseable wrong
expression), so ``strict`` (the default) turns it into right (1) or wrong (0).
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import Field

from rlvr.core.types import Example, Score
from rlvr.registry import Params
from rlvr.tasks.base import TASKS, Task, WeightedVerifier
from rlvr.tasks.dataset import DataError
from rlvr.verifiers.base import BaseVerifier

__all__ = ["ReasoningGymParams", "ReasoningGymVerifier", "reasoning_gym_task", "strip_answer"]

_TAG = re.compile(r"<answer>(.*?)</answer>", re.S)
_BOX = re.compile(r"\\boxed\{(.*)\}\s*$", re.S)


class ReasoningGymParams(Params):
    dataset: str = Field(..., description="reasoning-gym dataset name, e.g. 'basic_arithmetic'")
    size: int = Field(1000, gt=0, description="train examples")
    eval_size: int = Field(100, gt=0, description="held-out examples (generated with seed + 1)")
    seed: int = Field(0, description="generation seed")
    config: dict[str, Any] = Field(default_factory=dict, description="the dataset's own config keys")
    strict: bool = Field(True, description="1 only for a full-credit answer, else 0 (no partial credit)")


def strip_answer(text: str) -> str:
    """The last ``<answer>`` block's content, unwrapped from a trailing ``\\boxed{}``; else the text."""
    tags = _TAG.findall(text)
    out = (tags[-1] if tags else text).strip()
    box = _BOX.search(out)
    return box.group(1).strip() if box else out


class ReasoningGymVerifier(BaseVerifier):
    def __init__(self, datasets: dict[str, Any], strict: bool = True):
        self.datasets, self.strict = datasets, strict
        self.name = "reasoning_gym"

    def score(self, example: Example, text: str) -> Score:
        ds = self.datasets[example.meta["split"]]
        raw = float(ds.score_answer(strip_answer(text), example.meta["entry"]))
        reward = float(raw >= 1.0) if self.strict else raw
        info = {} if reward else {"reason": f"reasoning-gym score {raw:g}"}
        return Score(reward, {"correct": float(raw >= 1.0), "gym_score": raw}, info)


@TASKS.register("reasoning_gym", ReasoningGymParams)
def reasoning_gym_task(p: ReasoningGymParams) -> Task:
    """Procedural tasks from reasoning-gym (optional extra), scored strictly."""
    try:
        import reasoning_gym
    except ImportError:
        raise DataError("task reasoning_gym needs the optional extra: pip install 'rlvr[gym]'") from None
    sets = {"train": reasoning_gym.create_dataset(p.dataset, size=p.size, seed=p.seed, **p.config),
            "eval": reasoning_gym.create_dataset(p.dataset, size=p.eval_size, seed=p.seed + 1, **p.config)}
    splits = {}
    for split, ds in sets.items():
        splits[split] = [Example(f"{p.dataset}-{split}-{i}", entry["question"], str(entry.get("answer")),
                                 "reasoning_gym", None, {"entry": entry, "split": split})
                         for i, entry in enumerate(ds)]
    return Task(f"reasoning_gym/{p.dataset}", splits, [WeightedVerifier(ReasoningGymVerifier(sets, p.strict))])
