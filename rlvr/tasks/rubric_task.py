"""``rubric``: prompts graded by checkable rubric criteria, with human or POW3R (policy-aware) weights.

Data is JSON lines, one prompt per line::

    {"id": "q1", "prompt": "...", "rubric": [{"id": "answer", "kind": "numeric", "value": "42", "weight": 2,
     "category": "correctness", "required": true}, ...], "answer": "a reference response (optional)"}

``prompt`` is a string or a list of chat messages; ``rubric`` follows :mod:`rlvr.verifiers.rubric` and is
parsed at load, so a bad criterion fails there with its file and line (a regex shaped for catastrophic
backtracking, such as ``(a+)+``, included: docs/verifiers.md, Rubric: bounded regex criteria); ``answer`` (optional) is the
supervised target; every other field goes to ``Example.meta``. Without ``eval_path`` a seeded
``eval_fraction`` of the train file is held out.

Rewards. Evaluation (``Task.score``) is always the human-weighted rubric ``sum_c h_c s_c / sum_c h_c``, which is
also POW3R's evaluation reward. With ``weighting: pow3r`` (Tyagi et al. 2026, arXiv:2605.20164; RECONSTRUCTED)
training rewards come from ``score_group``: each prompt's group of completions re-weights its criteria by their
contrast across the group (:class:`PolicyAwareRubric`), using the criterion scores ``score`` already computed. A
completion that timed out or errored keeps its 0 and its reason (it fails every criterion). The optional contrast
EMA lives in the task and is checkpointed. ``required_gate`` zeroes both rewards unless every required criterion
holds.

Criteria of kind ``judge`` (a statement a model decides, as POW3R's criteria are) need ``judge:`` (params of the
``judge`` verifier, preset ``criterion``: a yes/no verdict per criterion); the task then scores a step's
completions in one batch, every judged criterion asked at once. A data file with judged criteria and no judge
fails at load.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal, Sequence

from pydantic import Field

from rlvr.core.paths import LocalPathStr
from rlvr.core.types import Example, Score
from rlvr.registry import Params
from rlvr.tasks.base import TASKS, Task, WeightedVerifier
from rlvr.tasks.dataset import DataError, _jsonl_rows, require_fields, split_holdout
from rlvr.verifiers.judge import CriterionJudge
from rlvr.verifiers.rubric import PolicyAwareRubric, RubricVerifier, parse_rubric

__all__ = ["RubricTaskParams", "RubricTask", "rubric_task", "read_rubric_examples"]


class RubricTaskParams(Params):
    train_path: LocalPathStr = Field(..., description="JSONL file of prompts with their rubrics")
    eval_path: LocalPathStr | None = Field(None, description="held-out JSONL file in the same format")
    eval_fraction: float = Field(0.1, ge=0.0, lt=1.0, description="held out from train_path when eval_path is unset")
    data_seed: int = Field(0, description="seed of the eval hold-out")
    prompt_field: str = Field("prompt", description="field holding the prompt")
    rubric_field: str = Field("rubric", description="field holding the list of criteria")
    answer_field: str = Field("answer", description="field holding a reference response (optional)")
    id_field: str = Field("id", description="field holding a stable example id (optional)")
    weighting: Literal["human", "pow3r"] = Field(
        "human", description="training reward: the human-weighted rubric, or POW3R's per-group adapted weights")
    eps: float = Field(0.05, ge=0.0, description="POW3R: weight floor, w_c ~ h_c (eps + contrast_c)^gamma")
    gamma: float = Field(1.0, ge=0.0, description="POW3R: exponent of the contrast")
    contrast: Literal["std", "mad"] = Field("std", description="POW3R: contrast statistic of a criterion's scores "
                                                                "over the group (population std or mean abs dev)")
    ema_decay: float = Field(0.0, ge=0.0, lt=1.0, description="POW3R: EMA of each criterion's contrast per prompt "
                                                              "(0: this group only)")
    required_gate: bool = Field(False, description="score 0 unless every required criterion holds")
    judge: CriterionJudge = Field(None, description="the judge of kind: judge criteria (params of the judge "
                                                    "verifier, preset criterion by default)")
    name: str = Field("rubric", description="task name used in metrics")


def _example(where: str, row: Any, default_id: str, p: RubricTaskParams) -> Example:
    require_fields(where, row, (p.prompt_field, p.rubric_field))
    prompt, rubric = row[p.prompt_field], row[p.rubric_field]
    if not (isinstance(prompt, (str, list)) and prompt):
        raise DataError(f"{where}: {p.prompt_field!r} must be a non-empty string or list of messages")
    if not isinstance(rubric, list) or not all(isinstance(c, dict) for c in rubric):
        raise DataError(f"{where}: {p.rubric_field!r} must be a list of criterion objects")
    try:
        parse_rubric(rubric)
    except (TypeError, ValueError, re.error) as e:  # unknown criterion keys, bad values, bad regexes
        raise DataError(f"{where}: invalid rubric: {e}") from None
    answer = row.get(p.answer_field, "")
    if not isinstance(answer, str):
        raise DataError(f"{where}: {p.answer_field!r} must be a string")
    meta = {k: v for k, v in row.items() if k not in (p.prompt_field, p.rubric_field, p.answer_field)}
    return Example(str(row.get(p.id_field, default_id)), prompt, answer, p.name, None, {**meta, "rubric": rubric})


def read_rubric_examples(path: str | Path, p: RubricTaskParams) -> list[Example]:
    """Examples of one rubric JSONL file, every rubric validated."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise DataError(f"{path}: no such file")
    out = [_example(where, row, f"{path.stem}-{line}", p) for where, line, row in _jsonl_rows(path)]
    if not out:
        raise DataError(f"{path}: no examples")
    return out


class RubricTask(Task):
    """Human-weighted rubric scores; POW3R training rewards per group when ``pow3r`` is given."""

    def __init__(self, name: str, splits: dict[str, Sequence[Example]], required_gate: bool = False,
                 pow3r: PolicyAwareRubric | None = None, judge: Any = None):
        self.rubric = RubricVerifier(required_gate, judge)
        super().__init__(name, splits, [WeightedVerifier(self.rubric)])
        self.pow3r = pow3r

    @property
    def batched(self) -> bool:
        """With a judge, a step's judged criteria are asked in one call (:meth:`score_batch`)."""
        return self.rubric.batched

    @staticmethod
    def _wrap(s: Score) -> Score:
        return Score(s.reward, {**s.components, "rubric": s.reward}, {f"rubric.{k}": v for k, v in s.info.items()})

    def score(self, example: Example, text: str) -> Score:
        return self._wrap(self.rubric(example, text))  # never raises; criterion scores ride along for score_group

    def score_batch(self, examples: Sequence[Example], texts: Sequence[str]) -> list[Score]:
        return [self._wrap(s) for s in self.rubric.score_batch(examples, texts)]

    def score_group(self, example: Example, texts: Sequence[str], scores: Sequence[Score]) -> list[Score]:
        if self.pow3r is None:
            return list(scores)
        crits = parse_rubric(example.meta["rubric"])
        keys = [f"crit/{c.id}" for c in crits]
        rows = [[s.components.get(k, 0.0) for k in keys] for s in scores]
        out = []
        for s, new in zip(scores, self.pow3r.rewards_from_rows(example, crits, rows)):
            if not all(k in s.components for k in keys):  # timed out or errored: keep the 0 and its reason
                out.append(s)
                continue
            gated = self.rubric.required_gate and not new.components["strict"]
            out.append(Score(0.0 if gated else new.reward, {**new.components, "rubric": s.reward}, new.info))
        return out

    def state_dict(self) -> dict:
        return {"pow3r": self.pow3r.state_dict()} if self.pow3r is not None else {}

    def load_state_dict(self, state: dict) -> None:
        if self.pow3r is not None and "pow3r" in state:
            self.pow3r.load_state_dict(state["pow3r"])


def _check(cfg, p: RubricTaskParams) -> list[str]:
    if p.weighting == "pow3r" and cfg.rollout.group_size < 2:
        return ["weighting 'pow3r' needs rollout.group_size >= 2 (criterion contrast is measured within a group)"]
    return []


@TASKS.register("rubric", RubricTaskParams, check=_check)
def rubric_task(p: RubricTaskParams) -> RubricTask:
    """Prompts graded by rubric criteria (JSONL); training weights human or POW3R (policy-aware)."""
    train = read_rubric_examples(p.train_path, p)
    if p.eval_path:
        evals = read_rubric_examples(p.eval_path, p)
    else:
        train, evals = split_holdout(train, p.eval_fraction, p.data_seed)
    pow3r = PolicyAwareRubric(p.eps, p.gamma, p.contrast, p.ema_decay) if p.weighting == "pow3r" else None
    if p.judge is None:
        judged = next((e for e in [*train, *evals] if any(c.get("kind") == "judge" for c in e.meta["rubric"])), None)
        if judged is not None:
            raise DataError(f"example {judged.id!r} has a criterion of kind judge, decided by a model: set "
                            "task.judge (params of the judge verifier, e.g. {base_url: ..., model: ...})")
    from rlvr.verifiers.judge import build_judge

    return RubricTask(p.name, {"train": train, "eval": evals}, p.required_gate, pow3r,
                      build_judge(p.judge, "criterion"))
