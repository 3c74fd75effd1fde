"""The teacher model's log-probs of the student's samples (``teacher_model_logp``), for on-policy distillation
(:mod:`rlvr.algorithms.transforms.distill`).

The teacher is the ``teacher`` directory of the run's ``distill`` advantage transform, loaded once (frozen, in
evaluation mode, on the trainer's device, in the policy's dtype) and kept for the run. It must share the
student's tokenizer: a vocabulary of another size is refused with both sizes named. One no-grad forward per
step over the batch's prompts and completions, micro-batched as the policy's passes are.
"""

from __future__ import annotations

import threading
from typing import Any

import torch

from rlvr.algorithms.extra_producers import ExtraContext, produces
from rlvr.models import logprobs
from rlvr.models.logprobs import pass_args

__all__ = ["teacher_model"]

_TEACHERS: dict[tuple[str, str, str], Any] = {}
_LOCK = threading.Lock()


def teacher_model(path: str, device: torch.device, dtype: torch.dtype, vocab: int, attention: str | None = None) -> Any:
    """The frozen teacher at ``path`` on ``device`` (loaded once per path, device, dtype and attention kernel:
    the student's, so equal weights give equal log-probs)."""
    key = (path, str(device), str(dtype), str(attention))
    with _LOCK:
        if key not in _TEACHERS:
            from transformers import AutoModelForCausalLM

            kw = {"attn_implementation": attention} if attention else {}
            model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype, **kw)
            model = model.to(device).eval().requires_grad_(False)
            size = model.get_input_embeddings().weight.shape[0]
            if size != vocab:
                raise ValueError(f"distill teacher {path}: its vocabulary has {size} entries, the student's {vocab}; "
                                 "on-policy distillation needs the student's tokenizer")
            _TEACHERS[key] = model
        return _TEACHERS[key]


def _teacher_path(algorithm: Any) -> str:
    for comp in getattr(algorithm, "advantage_transforms", ()):
        if comp.name == "distill":
            return comp.params.teacher
    raise ValueError("teacher_model_logp is produced for the distill advantage transform, which is not configured")


@produces("teacher_model_logp")
def _teacher_model_logp(ctx: ExtraContext, keys: frozenset[str]) -> dict[str, torch.Tensor]:
    """The teacher's log-prob of each sampled token: one teacher forward."""
    param = next(ctx.model.parameters())
    teacher = teacher_model(_teacher_path(ctx.algorithm), param.device, param.dtype,
                            ctx.model.get_input_embeddings().weight.shape[0],
                            getattr(ctx.model.config, "_attn_implementation", None))
    return {"teacher_model_logp": logprobs.batch_logprobs(teacher, ctx.batch, **pass_args(ctx.settings)).cpu()}
