"""The ``native`` rollout engine: rlvr's own decode loop for Llama / Qwen2 / Mistral models.

It answers the same contract as ``hf`` and samples from the same distribution, token for token:

- temperature and top-p are applied with transformers' own ``TemperatureLogitsWarper`` and
  ``TopPLogitsWarper``, in the order ``hf`` applies them, and the token is drawn as ``generate`` draws it
  (``torch.multinomial(softmax(scores), 1)`` over all rows of the batch, finished rows included), so with
  the same seed and batch size both engines draw the same tokens up to float rounding of the logits;
- temperature 0 is greedy (``argmax`` of the logits);
- the behaviour log-prob of a sampled token is ``log_softmax(logits / temperature)`` before top-p
  truncation, what the trainer recomputes (``rlvr.models.logprobs.completion_logprobs``); greedy records
  temperature 1, as ``hf`` does;
- a row stops at its first EOS (finish reason ``"stop"``, EOS kept), else at ``max_new_tokens``
  (``"length"``); the loop ends when every row has stopped.

What makes it faster (``benchmarks/decode_speed.py`` measures it against ``hf``): each group's prompt is
prefilled once and its KV cache copied to the group's ``n`` rows; the cache is allocated once per batch;
and each step runs a lean forward (``rlvr/engines/native_model.py``) and the sampler, nothing else.

A model the decoder does not cover (another architecture, adapters, quantised layers) is served by the
``hf`` engine instead, with a warning that says why; ``strict=True`` raises instead.

``compile=True`` (``rollout.native.compile``) runs the decode step through ``torch.compile`` in a form with the
same shapes at every step (the whole static cache attended, future slots masked; ``native_model.py``). It pays
on short, overhead-bound decodes (up to 1.16x on the 4 x 8 x 16-token benchmark) and not on long caches
(0.93x on 16 x 8 x 64), where the extra attention costs more than the fused ops save; the first batch of each
shape waits for the compiler, and the sampled tokens follow the same distribution but not bit for bit the
``hf`` engine's draws.
"""

from __future__ import annotations

import logging
import os
import shutil
from typing import Sequence

from rlvr.core.types import Completion, GenerationRequest, SamplingParams
from rlvr.lazy import F, torch, transformers
from rlvr.engines.base import ENGINES, local_cache_memory, memory_rule, seeded_sampling
from rlvr.models.prompts import encode_prompt
from rlvr.engines.hf import HFEngine

__all__ = ["NativeEngine", "build_native_engine"]

log = logging.getLogger(__name__)


class _Sampler:
    """Turns one step's ``[R, V]`` float32 logits into tokens and their behaviour log-probs."""

    def __init__(self, sampling: SamplingParams):
        self.greedy = sampling.greedy
        self.temperature = 1.0 if self.greedy else sampling.temperature
        self.warpers = []
        if not self.greedy and sampling.temperature != 1.0:
            self.warpers.append(transformers.TemperatureLogitsWarper(sampling.temperature))
        if not self.greedy and sampling.top_p < 1.0:
            self.warpers.append(transformers.TopPLogitsWarper(sampling.top_p))

    def __call__(self, logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        logp = F.log_softmax(logits / self.temperature if self.temperature != 1.0 else logits, dim=-1)
        if self.greedy:
            tokens = logits.argmax(-1)
        else:
            scores = logits
            for warp in self.warpers:  # they ignore input_ids
                scores = warp(None, scores)
            # torch.multinomial's own path for one draw (argmax of p / q, q ~ Exp(1)): the same random draws and
            # tokens, without its per-call validity check (a reduction and a host sync per step; the chunk's
            # log-probs are checked once instead)
            probs = F.softmax(scores, dim=-1)
            tokens = probs.div_(torch.empty_like(probs).exponential_()).argmax(-1)
        return tokens, logp.gather(1, tokens[:, None]).squeeze(1)


class NativeEngine:
    """Batched sampling with a shared-prefix prefill and a static KV cache (see the module docstring)."""

    def __init__(self, model, tokenizer, batch_size: int = 256, chat_template: bool = False, compile: bool = False):
        from rlvr.engines.native_model import Decoder, unsupported_reason  # (defines torch modules)

        reason = unsupported_reason(model)
        if reason is not None:
            raise ValueError(f"the native engine cannot decode this model: {reason}")
        if compile:
            check_compiler(next(model.parameters()).device, "rollout.native.compile")
        self.model, self.tokenizer = model, tokenizer
        self.batch_size, self.chat_template = batch_size, chat_template
        self.eos_id, self.pad_id = tokenizer.eos_token_id, tokenizer.pad_token_id
        self.decoder = Decoder(model, compile=compile)
        self._hf = HFEngine(model, tokenizer, batch_size=batch_size, chat_template=chat_template)

    def sync_weights(self) -> None:
        return None  # the decoder reads the trainer's module's weights at every call

    def generate(self, requests: Sequence[GenerationRequest], sampling: SamplingParams) -> list[Completion]:
        if any(r.prefix_ids or r.max_new_tokens is not None or r.stop or r.stop_token_ids for r in requests):
            # prefixes, per-request lengths and stops are not in the native decode loop yet; the hf engine
            # samples the same distribution with the same tokens, so such calls go through it
            return self._hf.generate(requests, sampling)
        rows = []
        for gi, req in enumerate(requests):
            ids = encode_prompt(self.tokenizer, req.example.prompt, self.chat_template)
            rows.extend((gi, req.example.id, ids) for _ in range(req.n))
        device = next(self.model.parameters()).device
        out: list[Completion] = []
        with seeded_sampling(device, sampling.seed):
            for start in range(0, len(rows), self.batch_size):
                out.extend(self._generate_chunk(rows[start: start + self.batch_size], sampling, device))
        return out

    def _prompts(self, rows, device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The distinct prompts of a chunk (one per group present), left-padded, and each row's prompt."""
        first: dict[int, int] = {}
        for gi, _, _ in rows:
            first.setdefault(gi, len(first))
        prompts = [None] * len(first)
        for gi, _, ids in rows:
            prompts[first[gi]] = ids
        width = max(map(len, prompts))
        ids = torch.full((len(prompts), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros_like(ids)
        for i, p in enumerate(prompts):
            ids[i, width - len(p):] = torch.tensor(p)
            mask[i, width - len(p):] = 1
        row_group = torch.tensor([first[gi] for gi, _, _ in rows])
        return ids.to(device), mask.to(device), row_group.to(device)

    def _generate_chunk(self, rows, sampling: SamplingParams, device) -> list[Completion]:
        # a compiled step runs faster under no_grad than under inference_mode (measured on CPU)
        with (torch.no_grad() if self.decoder.compiled is not None else torch.inference_mode()):
            return self._decode_chunk(rows, sampling, device)

    def _decode_chunk(self, rows, sampling: SamplingParams, device) -> list[Completion]:
        steps = sampling.max_new_tokens
        sample = _Sampler(sampling)
        ids, mask, row_group = self._prompts(rows, device)
        n = len(rows)
        new = torch.full((n, steps), self.pad_id, dtype=torch.long, device=device)
        lps = torch.zeros(n, steps, dtype=torch.float32, device=device)
        done = torch.zeros(n, dtype=torch.bool, device=device)
        taken = 0
        if steps > 0:
            logits = self.decoder.start(ids, mask, row_group, steps)
        for t in range(steps):
            tokens, lp = sample(logits)
            tokens = tokens.masked_fill(done, self.pad_id)  # what ``generate`` feeds a finished row
            new[:, t], lps[:, t] = tokens, lp
            taken = t + 1
            done |= tokens == self.eos_id
            if t + 1 == steps or bool(done.all()):
                break
            logits = self.decoder.step(tokens, t)
        self.decoder.release()  # the cache is not kept between calls: the trainer needs the memory
        if taken and not bool(torch.isfinite(lps[:, :taken]).all()):
            raise FloatingPointError("the native engine sampled from logits with NaN or inf (the model's weights "
                                     "or activations are not finite)")
        return self._completions(rows, new[:, :taken].cpu(), lps[:, :taken].cpu())

    def _completions(self, rows, new: torch.Tensor, lp: torch.Tensor) -> list[Completion]:
        completions = []
        for i, (gi, ex_id, ids) in enumerate(rows):
            toks = new[i].tolist()
            if self.eos_id in toks:
                toks, reason = toks[: toks.index(self.eos_id) + 1], "stop"
            else:
                reason = "length"
            text = self.tokenizer.decode(toks, skip_special_tokens=True)
            completions.append(Completion(ex_id, list(ids), toks, lp[i, : len(toks)].tolist(), reason, text,
                                          group=gi))
        return completions


def check_compiler(device, key: str) -> None:
    """``torch.compile`` builds C++ kernels for CPU tensors: refuse ``key`` up front, saying what to do, where no
    C++ compiler is found (``$CXX``, else ``g++``, ``c++`` or ``clang++``)."""
    if getattr(device, "type", str(device)) != "cpu":
        return
    names = [os.environ["CXX"]] if os.environ.get("CXX") else ["g++", "c++", "clang++"]
    if not any(shutil.which(n) for n in names):
        raise RuntimeError(f"{key} needs a C++ compiler for torch.compile's CPU kernels, and none of "
                           f"{', '.join(names)} is on PATH: install one (apt install g++) or set {key}=false")


def build_native_engine(model, tokenizer, batch_size: int = 256, chat_template: bool = False,
                        strict: bool = False, compile: bool = False):
    """A :class:`NativeEngine`, or the ``hf`` engine (with a warning saying why) for a model it cannot
    decode; ``strict=True`` raises instead of falling back."""
    from rlvr.engines.native_model import unsupported_reason

    reason = unsupported_reason(model)
    if reason is None:
        return NativeEngine(model, tokenizer, batch_size=batch_size, chat_template=chat_template, compile=compile)
    if strict:
        raise ValueError(f"rollout.engine=native cannot decode this model: {reason}")
    log.warning("rollout.engine=native: %s; generating with the hf engine instead", reason)
    return HFEngine(model, tokenizer, batch_size=batch_size, chat_template=chat_template)


memory_rule("native")(local_cache_memory)


@ENGINES.register("native")
def _build_native(model, tokenizer, batch_size: int = 256, chat_template: bool = False, rollout=None, **_):
    """rlvr's decoder for Llama / Qwen2 / Mistral: shared prompt prefill, static KV cache (falls back to hf)."""
    compile = bool(rollout is not None and rollout.native.compile)
    return build_native_engine(model, tokenizer, batch_size=batch_size, chat_template=chat_template, compile=compile)
