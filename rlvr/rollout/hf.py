"""The ``hf`` rollout engine: batched sampling with ``transformers``' ``generate``.

Temperature and top-p sampling, greedy when temperature is 0, stop on EOS, per-token behaviour
log-probs of the sampling distribution (``log_softmax(logits / temperature)``, before top-p truncation,
which is what the trainer recomputes), finish reasons, and seeded sampling that leaves the global RNG
untouched. The engine shares the trainer's module, so weight sync is a no-op.

Behaviour log-probs are taken while generating, by a logits processor that keeps one ``[B, V]``
log-softmax (the current step's) and gathers the sampled token's entry when the next step sees it. Asking
``generate`` for ``output_logits`` instead keeps every step's float32 logits until the end, B x T x V x 4
bytes: 160 GB for 256 rows x 1024 tokens at a 152k vocabulary. The processor applies temperature and
top-p itself with transformers' own warpers, in transformers' order, so sampling is unchanged.
"""

from __future__ import annotations

from typing import Sequence

import torch
import torch.nn.functional as F
from transformers import LogitsProcessor, LogitsProcessorList, TemperatureLogitsWarper, TopPLogitsWarper

from rlvr.core.types import Completion, GenerationRequest, SamplingParams
from rlvr.rollout.base import ENGINES, encode_prompt

__all__ = ["HFEngine", "BehaviourLogprobs"]


class BehaviourLogprobs(LogitsProcessor):
    """Records ``log_softmax(logits / temperature)`` of each sampled token, holding one step at a time;
    then applies temperature and top-p for sampling (``generate`` itself is given neither)."""

    def __init__(self, temperature: float, top_p: float, prompt_width: int):
        self.temperature, self.width = temperature, prompt_width
        self.warpers = []
        if temperature != 1.0:
            self.warpers.append(TemperatureLogitsWarper(temperature))
        if top_p < 1.0:
            self.warpers.append(TopPLogitsWarper(top_p))
        self.taken: list[torch.Tensor] = []
        self._last: torch.Tensor | None = None

    def _take(self, tokens: torch.Tensor) -> None:
        self.taken.append(self._last.gather(1, tokens[:, None].to(self._last.device)).squeeze(1).cpu())

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        if input_ids.shape[1] > self.width:  # the previous step's token is now known
            self._take(input_ids[:, -1])
        self._last = F.log_softmax(scores.float() / self.temperature, dim=-1)
        for warp in self.warpers:
            scores = warp(input_ids, scores)
        return scores

    def result(self, new_tokens: torch.Tensor) -> torch.Tensor:
        """``[B, T]`` log-probs of the generated tokens (the last step's gathered here)."""
        if self._last is not None and len(self.taken) < new_tokens.shape[1]:
            self._take(new_tokens[:, len(self.taken)])
            self._last = None
        return torch.stack(self.taken, dim=1) if self.taken else torch.zeros(new_tokens.shape[0], 0)


class HFEngine:
    def __init__(self, model, tokenizer, batch_size: int = 256, chat_template: bool = False):
        self.model, self.tokenizer = model, tokenizer
        self.batch_size, self.chat_template = batch_size, chat_template
        self.eos_id = tokenizer.eos_token_id
        self.pad_id = tokenizer.pad_token_id

    def sync_weights(self) -> None:
        return None

    def generate(self, requests: Sequence[GenerationRequest], sampling: SamplingParams) -> list[Completion]:
        rows = []
        for gi, req in enumerate(requests):
            ids = encode_prompt(self.tokenizer, req.example.prompt, self.chat_template)
            rows.extend((gi, req.example.id, ids) for _ in range(req.n))
        device = next(self.model.parameters()).device
        was_training = self.model.training
        self.model.eval()
        out: list[Completion] = []
        try:
            with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
                if sampling.seed is not None:
                    torch.manual_seed(sampling.seed)
                for start in range(0, len(rows), self.batch_size):
                    out.extend(self._generate_chunk(rows[start: start + self.batch_size], sampling, device))
        finally:
            self.model.train(was_training)
        return out

    @torch.no_grad()
    def _generate_chunk(self, rows, sampling: SamplingParams, device) -> list[Completion]:
        width = max(len(ids) for _, _, ids in rows)
        input_ids = torch.full((len(rows), width), self.pad_id, dtype=torch.long)
        attn = torch.zeros_like(input_ids)
        for i, (_, _, ids) in enumerate(rows):
            input_ids[i, width - len(ids):] = torch.tensor(ids)
            attn[i, width - len(ids):] = 1
        record = BehaviourLogprobs(1.0 if sampling.greedy else sampling.temperature,
                                   1.0 if sampling.greedy else sampling.top_p, width)
        new = self.model.generate(input_ids=input_ids.to(device), attention_mask=attn.to(device),
                                  do_sample=not sampling.greedy, max_new_tokens=sampling.max_new_tokens,
                                  eos_token_id=self.eos_id, pad_token_id=self.pad_id, top_k=None,
                                  temperature=None, top_p=None, logits_processor=LogitsProcessorList([record])
                                  )[:, width:].cpu()
        lp = record.result(new)
        completions = []
        for i, (gi, ex_id, ids) in enumerate(rows):
            toks = new[i].tolist()
            if self.eos_id in toks:
                toks, reason = toks[: toks.index(self.eos_id) + 1], "stop"
            else:
                reason = "length"
            lps = lp[i, : len(toks)].tolist()
            text = self.tokenizer.decode(toks, skip_special_tokens=True)
            completions.append(Completion(ex_id, list(ids), toks, lps, reason, text, group=gi))
        return completions


@ENGINES.register("hf")
def _build_hf(model, tokenizer, batch_size: int = 256, chat_template: bool = False, **_) -> HFEngine:
    """transformers generate (CPU-friendly default)."""
    return HFEngine(model, tokenizer, batch_size=batch_size, chat_template=chat_template)
