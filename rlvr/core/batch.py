"""``RolloutBatch``: completions as padded tensors, split into minibatches and micro-batches.

Layout: prompts are left-padded to ``P`` columns and completions right-padded to ``T`` columns, so every
completion starts at column ``P`` of ``input_ids [N, P+T]``. Per-token tensors (``completion_mask``,
``old_logp``, ``ref_logp``, ``advantages``, ``behaviour_logp``) are ``[N, T]``. Rows some loss terms score
beside the batch's ride along as :class:`SideRows`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Iterator, Sequence

from rlvr.core.types import Completion
from rlvr.core.vision import BatchVision
from rlvr.lazy import torch

__all__ = ["RolloutBatch", "SideRows", "build_batch"]

_ROW_EXTRAS = frozenset({"hidden"})  # extras with one vector per row (never trimmed along tokens)
_PER_ROW = ("input_ids", "attention_mask", "position_ids", "completion_mask", "group_index", "rewards",
            "lengths", "truncated", "behaviour_logp", "old_logp", "ref_logp", "advantages", "loss_coef")


@dataclass
class SideRows:
    """Rows a loss term scores with the policy beside the batch's, with gradient, inside each micro-batch's own
    forward call (DDP and FSDP prepare one backward per call); built once per step by the builder of the trait
    that asks for them (:data:`rlvr.algorithms.extra_producers.SIDE_ROWS`).

    ``trait``: the loss-term trait that asked for them; ``term``: the loss term they belong to (its index in
    ``algorithm.loss_terms``; None: every term with the trait). ``aligned``: row i is the batch's row i (its
    completion after another prompt), so the rows are selected, trimmed and moved with the batch's; otherwise
    they are the step's own rows, scored once per minibatch, in its first micro-batch (``rows`` is None in the
    others). A term reads their log-probs as ``extras[f"{name}_logp"]`` and each of ``fixed`` as
    ``extras[f"{name}_{key}"]``.
    """

    name: str
    trait: str
    rows: "RolloutBatch | None"
    aligned: bool = True
    term: int | None = None
    fixed: dict[str, torch.Tensor] = field(default_factory=dict)

    def to(self, device) -> "SideRows":
        return replace(self, rows=None if self.rows is None else self.rows.to(device),
                       fixed={k: v.to(device) for k, v in self.fixed.items()})


@dataclass
class RolloutBatch:
    input_ids: torch.Tensor  # [N, P+T] long
    attention_mask: torch.Tensor  # [N, P+T] long
    position_ids: torch.Tensor  # [N, P+T] long, counting only real tokens
    completion_mask: torch.Tensor  # [N, T] float, 1 on completion tokens
    group_index: torch.Tensor  # [N] long, which prompt (group) each completion answers
    rewards: torch.Tensor  # [N] float64
    lengths: torch.Tensor  # [N] long, completion lengths
    truncated: torch.Tensor  # [N] bool, finish_reason == "length"
    prompt_len: int  # P
    behaviour_logp: torch.Tensor | None = None  # [N, T] from the rollout engine
    old_logp: torch.Tensor | None = None  # [N, T]
    ref_logp: torch.Tensor | None = None  # [N, T]
    advantages: torch.Tensor | None = None  # [N, T]
    loss_coef: torch.Tensor | None = None  # [N, T] aggregation coefficients, set per minibatch
    extras: dict[str, torch.Tensor] = field(default_factory=dict)  # per-row extra tensors ([N, T] or [N, H])
    vision: BatchVision | None = None  # the rows' images (vision-language prompts)
    side: tuple[SideRows, ...] = ()  # rows loss terms score beside these (SideRows)

    @property
    def size(self) -> int:
        return int(self.input_ids.shape[0])

    @property
    def completion_ids(self) -> torch.Tensor:
        return self.input_ids[:, self.prompt_len:]

    def select(self, idx: torch.Tensor) -> "RolloutBatch":
        """Rows ``idx`` of every per-row tensor (a minibatch or micro-batch)."""
        upd = {f.name: getattr(self, f.name)[idx] for f in fields(self)
               if f.name in _PER_ROW and getattr(self, f.name) is not None}
        side = tuple(replace(sd, rows=sd.rows.select(idx)) if sd.aligned and sd.rows is not None else sd
                     for sd in self.side)
        vision = self.vision.select(idx) if self.vision is not None else None
        return replace(self, extras={k: v[idx] for k, v in self.extras.items()}, side=side, vision=vision, **upd)

    def trim(self) -> "RolloutBatch":
        """Drop prompt columns that are padding in every row and completion columns past the longest."""
        lead = int((self.attention_mask[:, : self.prompt_len].sum(0) == 0).sum())
        t = int(self.lengths.max()) if self.size else 0
        upd = {}
        for f in fields(self):
            v = getattr(self, f.name)
            if v is None or f.name not in _PER_ROW or v.dim() < 2:
                continue
            if v.shape[1] == self.input_ids.shape[1]:
                upd[f.name] = v[:, lead: self.prompt_len + t]
            else:
                upd[f.name] = v[:, :t]
        tok_cols = self.completion_mask.shape[1]
        extras = {k: v[:, :t] if v.dim() == 2 and v.shape[1] == tok_cols and k not in _ROW_EXTRAS else v
                  for k, v in self.extras.items()}
        side = tuple(replace(sd, rows=sd.rows.trim()) if sd.aligned and sd.rows is not None else sd
                     for sd in self.side)
        return replace(self, prompt_len=self.prompt_len - lead, extras=extras, side=side, **upd)

    def minibatches(self, n: int, generator: torch.Generator | None = None,
                    whole_groups: bool = False) -> list["RolloutBatch"]:
        """Split into ``min(n, size)`` minibatches of near-equal size (shuffled when a generator is given).

        Sizes differ by at most one when dynamic sampling or ragged groups leave a batch that ``n`` does
        not divide. With ``whole_groups`` the split is over groups (near-equal numbers of groups, at most
        one minibatch per group), for objectives coupling the completions of a group.
        """
        if whole_groups:
            groups = torch.unique(self.group_index)
            order = groups[torch.randperm(len(groups), generator=generator)] if generator is not None else groups
            parts = torch.tensor_split(order, min(n, len(groups)))
            return [self.select(torch.nonzero(torch.isin(self.group_index, part)).flatten()) for part in parts]
        order = torch.randperm(self.size, generator=generator) if generator is not None else torch.arange(self.size)
        return [self.select(chunk) for chunk in torch.tensor_split(order, min(n, self.size))]

    def micro_batches(self, size: int, whole_groups: bool = False,
                      max_tokens: int | None = None) -> Iterator["RolloutBatch"]:
        """The micro-batches of :meth:`micro_batch_rows`, each trimmed."""
        for rows in self.micro_batch_rows(size, whole_groups, max_tokens):
            yield self.select(rows).trim()

    def micro_batch_rows(self, size: int, whole_groups: bool = False,
                         max_tokens: int | None = None) -> list[torch.Tensor]:
        """Rows of consecutive micro-batches of at most ``size`` rows and, with ``max_tokens``, at most that
        many padded tokens (rows x (longest prompt + longest completion) of the micro-batch, as it is
        trimmed); with ``whole_groups`` each holds whole groups. A micro-batch holds at least one row (one
        group) even if that alone is over a limit."""
        if max_tokens is None and not whole_groups:  # the common case, without per-unit bookkeeping
            return [torch.arange(s, min(s + size, self.size)) for s in range(0, self.size, size)]
        if whole_groups:
            units = [torch.nonzero(self.group_index == g).flatten().cpu() for g in torch.unique(self.group_index)]
        else:
            units = [torch.tensor([i]) for i in range(self.size)]
        prompt = self.attention_mask[:, : self.prompt_len].sum(1).cpu()
        lengths = self.lengths.cpu()
        out: list[torch.Tensor] = []
        chunk: list[torch.Tensor] = []
        rows = p_max = t_max = 0
        for u in units:
            n, p, t = len(u), int(prompt[u].max()), int(lengths[u].max())
            over_rows = rows + n > size
            over_tokens = max_tokens is not None and (rows + n) * (max(p_max, p) + max(t_max, t)) > max_tokens
            if chunk and (over_rows or over_tokens):
                out.append(torch.cat(chunk))
                chunk, rows, p_max, t_max = [], 0, 0, 0
            chunk.append(u)
            rows, p_max, t_max = rows + n, max(p_max, p), max(t_max, t)
        if chunk:
            out.append(torch.cat(chunk))
        return out

    def to(self, device: torch.device | str) -> "RolloutBatch":
        upd = {f.name: getattr(self, f.name).to(device) for f in fields(self)
               if isinstance(getattr(self, f.name), torch.Tensor)}
        vision = self.vision.to(device) if self.vision is not None else None
        return replace(self, extras={k: v.to(device) for k, v in self.extras.items()},
                       side=tuple(sd.to(device) for sd in self.side), vision=vision, **upd)


def build_batch(completions: Sequence[Completion], rewards: Sequence[float], pad_id: int) -> RolloutBatch:
    """Pad completions into a :class:`RolloutBatch`; ``completion.group`` becomes ``group_index``."""
    if not completions:
        raise ValueError("cannot build a batch from zero completions")
    n = len(completions)
    p = max(len(c.prompt_ids) for c in completions)
    t = max(1, max(len(c.completion_ids) for c in completions))
    has_blogp = all(c.logprobs is not None for c in completions)
    # padded rows as Python lists, one tensor per field: per-row tensors and slice copies cost more than the
    # data on small batches
    ids, attn, cmask, blogp = [], [], [], []
    for c in completions:
        lp, lc = len(c.prompt_ids), len(c.completion_ids)
        ids.append([pad_id] * (p - lp) + list(c.prompt_ids) + list(c.completion_ids) + [pad_id] * (t - lc))
        attn.append([0] * (p - lp) + [1] * (lp + lc) + [0] * (t - lc))
        cmask.append(c.mask() + [0.0] * (t - lc))  # inserted tokens stay out of the loss
        if has_blogp:
            if len(c.logprobs) != lc:
                raise ValueError(f"completion of {c.example_id!r}: {len(c.logprobs)} behaviour log-probs for {lc} "
                                 "tokens")
            blogp.append(list(c.logprobs) + [0.0] * (t - lc))
    ids = torch.tensor(ids, dtype=torch.long)
    attn = torch.tensor(attn, dtype=torch.long)
    cmask = torch.tensor(cmask, dtype=torch.float32)
    blogp = torch.tensor(blogp, dtype=torch.float32) if has_blogp else None
    pos = (attn.cumsum(1) - 1).clamp(min=0)
    return RolloutBatch(
        input_ids=ids,
        attention_mask=attn,
        position_ids=pos,
        completion_mask=cmask,
        group_index=torch.tensor([c.group for c in completions], dtype=torch.long),
        rewards=torch.tensor(list(rewards), dtype=torch.float64),
        lengths=torch.tensor([len(c.completion_ids) for c in completions], dtype=torch.long),
        truncated=torch.tensor([c.finish_reason == "length" for c in completions], dtype=torch.bool),
        prompt_len=p,
        behaviour_logp=blogp,
        vision=BatchVision.from_rows([getattr(c, "vision", None) for c in completions]),
    )

