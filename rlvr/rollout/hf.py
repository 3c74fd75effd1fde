"""The ``hf`` rollout engine: batched sampling with ``transformers``' ``generate``.

Temperature and top-p sampling, greedy when temperature is 0, stop on EOS, per-token behaviour
log-probs of the sampling distribution (``log_softmax(logits / temperature)``, before top-p truncation,
which is what the trainer recomputes), finish reasons, and seeded sampling that leaves the global RNG
untouched. The engine shares the trainer's module, so weight sync is a no-op.
"""

from __future__ import annotations

from typing import Sequence

import torch
import torch.nn.functional as F

from rlvr.core.types import Completion, GenerationRequest, SamplingParams
from rlvr.rollout.base import ENGINES, encode_prompt

__all__ = ["HFEngine"]


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
        kwargs = dict(do_sample=not sampling.greedy, max_new_tokens=sampling.max_new_tokens,
                      eos_token_id=self.eos_id, pad_token_id=self.pad_id, return_dict_in_generate=True,
                      output_logits=True, top_k=None)
        if not sampling.greedy:
            kwargs.update(temperature=sampling.temperature, top_p=sampling.top_p)
        else:
            kwargs.update(temperature=None, top_p=None)
        gen = self.model.generate(input_ids=input_ids.to(device), attention_mask=attn.to(device), **kwargs)
        new = gen.sequences[:, width:].cpu()
        temp = sampling.temperature if not sampling.greedy else 1.0
        # behaviour log-prob of each sampled token, one generated position at a time ([B, V] each)
        lp = torch.stack([F.log_softmax(logits.float() / temp, dim=-1)
                          .gather(1, new[:, t: t + 1].to(logits.device)).squeeze(1)
                          for t, logits in enumerate(gen.logits)], dim=1).cpu()
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
