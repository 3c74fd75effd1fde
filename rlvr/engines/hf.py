"""The ``hf`` rollout engine: batched sampling with ``transformers``' ``generate``.

Temperature and top-p sampling, greedy when temperature is 0, stop on EOS, per-token behaviour
log-probs of the sampling distribution (``log_softmax(logits / temperature)``, before top-p truncation,
which is what the trainer recomputes), finish reasons, and seeded sampling that leaves the global RNG
untouched. The engine shares the trainer's module, so weight sync is a no-op.

Requests may continue a prefix (its tokens follow the prompt and open the completion, with the request's
own behaviour log-probs for them and a segment saying where they came from), set their own
``max_new_tokens`` and stop token ids (each distinct setting generates in its own chunks) and stop strings
(the completion is cut after the token that completes one; generation itself runs to its limit).

Behaviour log-probs are taken while generating, by a logits processor that keeps one ``[B, V]``
log-softmax (the current step's) and gathers the sampled token's entry when the next step sees it. Asking
``generate`` for ``output_logits`` instead keeps every step's float32 logits until the end, B x T x V x 4
bytes: 160 GB for 256 rows x 1024 tokens at a 152k vocabulary. The processor applies temperature and
top-p itself with transformers' own warpers, in transformers' order, so sampling is unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

from rlvr.core.types import Completion, GenerationRequest, SamplingParams, Segment
from rlvr.core.vision import BatchVision, VisionInputs
from rlvr.lazy import F, no_grad, torch, transformers
from rlvr.models.vision import SUPPRESSED_LOGIT, suppressed_tokens, vision_forward_kwargs
from rlvr.engines.base import ENGINES, local_cache_memory, memory_rule, seeded_sampling
from rlvr.models.prompts import encode_example

__all__ = ["HFEngine", "BehaviourLogprobs"]


class BehaviourLogprobs:
    """Records ``log_softmax(logits / temperature)`` of each sampled token, holding one step at a time;
    then applies temperature and top-p for sampling (``generate`` itself is given neither)."""

    def __init__(self, temperature: float, top_p: float, prompt_width: int, suppress: Sequence[int] = ()):
        self.temperature, self.width = temperature, prompt_width
        self.suppress = list(suppress)
        self.warpers = []
        if temperature != 1.0:
            self.warpers.append(transformers.TemperatureLogitsWarper(temperature))
        if top_p < 1.0:
            self.warpers.append(transformers.TopPLogitsWarper(top_p))
        self.taken: list[torch.Tensor] = []
        self._last: torch.Tensor | None = None

    def _take(self, tokens: torch.Tensor) -> None:
        self.taken.append(self._last.gather(1, tokens[:, None].to(self._last.device)).squeeze(1).cpu())

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        if input_ids.shape[1] > self.width:  # the previous step's token is now known
            self._take(input_ids[:, -1])
        if self.suppress:  # as rlvr.models.logprobs.output_head: tokens never sampled (a VLM's placeholders)
            scores = scores.clone()
            scores[:, self.suppress] = SUPPRESSED_LOGIT
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
    supports_images = True  # prompts with images generate through a VLM's generate

    def __init__(self, model, tokenizer, batch_size: int = 256, chat_template: bool = False):
        self.model, self.tokenizer = model, tokenizer
        self.batch_size, self.chat_template = batch_size, chat_template
        self.eos_id = tokenizer.eos_token_id
        self.pad_id = tokenizer.pad_token_id
        self.suppress = suppressed_tokens(model)

    def sync_weights(self) -> None:
        return None

    def generate(self, requests: Sequence[GenerationRequest], sampling: SamplingParams,
                 on_progress: Callable[[int, int], None] | None = None) -> list[Completion]:
        """Completions of ``requests``; ``on_progress(rows_done, rows_total)`` after each internal batch."""
        rows = []
        for gi, req in enumerate(requests):
            ids, vision = encode_example(self.tokenizer, req.example, self.chat_template)
            rows.extend(_Row(gi, req, list(ids), vision) for _ in range(req.n))
        device = next(self.model.parameters()).device
        was_training = self.model.training
        self.model.eval()
        out: list[Completion | None] = [None] * len(rows)
        # requests with their own length or stop tokens generate in their own chunks; with none (the common
        # case) there is one key and the chunks, and so the sampled tokens, are exactly those of plain requests
        keys: dict[tuple, list[int]] = {}
        for i, row in enumerate(rows):
            keys.setdefault(row.key(sampling), []).append(i)
        finished = 0
        try:
            with seeded_sampling(device, sampling.seed):
                for (max_new, stop_ids), idx in keys.items():
                    for start in range(0, len(idx), self.batch_size):
                        chunk = idx[start: start + self.batch_size]
                        done = self._generate_chunk([rows[i] for i in chunk], sampling, max_new, stop_ids, device)
                        for i, comp in zip(chunk, done):
                            out[i] = comp
                        finished += len(chunk)
                        if on_progress is not None:
                            on_progress(finished, len(rows))
        finally:
            self.model.train(was_training)
        return out  # type: ignore[return-value]

    @no_grad
    def _generate_chunk(self, rows: list["_Row"], sampling: SamplingParams, max_new: int, stop_ids: tuple[int, ...],
                        device) -> list[Completion]:
        inputs = [r.ids + list(r.req.prefix_ids) for r in rows]
        width = max(len(ids) for ids in inputs)
        input_ids = torch.full((len(rows), width), self.pad_id, dtype=torch.long)
        attn = torch.zeros_like(input_ids)
        for i, ids in enumerate(inputs):
            input_ids[i, width - len(ids):] = torch.tensor(ids)
            attn[i, width - len(ids):] = 1
        if max_new == 0:
            new, lp = torch.zeros(len(rows), 0, dtype=torch.long), torch.zeros(len(rows), 0)
        else:
            record = BehaviourLogprobs(1.0 if sampling.greedy else sampling.temperature,
                                       1.0 if sampling.greedy else sampling.top_p, width, self.suppress)
            eos = self.eos_id if not stop_ids else [self.eos_id, *stop_ids]
            vision = BatchVision.from_rows([r.vision for r in rows])
            starts = torch.tensor([width - len(r.req.prefix_ids) for r in rows])  # a continued prefix is completion
            images = vision_forward_kwargs(self.model, input_ids, vision.to(device) if vision is not None else None,
                                           completion_start=starts)
            new = self.model.generate(input_ids=input_ids.to(device), attention_mask=attn.to(device),
                                      **{k: v.to(device) for k, v in images.items()},
                                      do_sample=not sampling.greedy, max_new_tokens=max_new,
                                      eos_token_id=eos, pad_token_id=self.pad_id, top_k=None,
                                      temperature=None, top_p=None,
                                      logits_processor=transformers.LogitsProcessorList([record]),
                                      synced_gpus=False,  # each rank generates alone (FSDP runs on full weights)
                                      )[:, width:].cpu()
            lp = record.result(new)
        return [self._completion(r, new[i].tolist(), lp[i].tolist(), stop_ids) for i, r in enumerate(rows)]

    def _completion(self, row: "_Row", toks: list[int], lps: list[float], stop_ids: tuple[int, ...]) -> Completion:
        ends = {self.eos_id, *stop_ids}
        cut = next((j for j, t in enumerate(toks) if t in ends), None)
        if cut is not None:
            toks, reason = toks[: cut + 1], "stop"
        else:
            reason = "length"
        toks, reason = _cut_at_stop_string(self.tokenizer, toks, row.req.stop, reason)
        lps = lps[: len(toks)]
        req, prefix = row.req, list(row.req.prefix_ids)
        text = self.tokenizer.decode(prefix + toks, skip_special_tokens=True)
        segments = None
        if prefix:
            segments = [Segment(0, len(prefix), req.prefix_source), Segment(len(prefix), len(prefix) + len(toks))]
        if prefix and req.prefix_logprobs is None:
            logprobs = None  # the prefix's behaviour log-probs are unknown
        else:
            logprobs = list(req.prefix_logprobs or ()) + lps
        return Completion(req.example.id, list(row.ids), prefix + toks, logprobs, reason, text, group=row.group,
                          segments=segments, vision=row.vision)


@dataclass(frozen=True)
class _Row:
    group: int
    req: GenerationRequest
    ids: list[int]  # the rendered prompt
    vision: VisionInputs | None = None  # its images

    def key(self, sampling: SamplingParams) -> tuple[int, tuple[int, ...]]:
        max_new = sampling.max_new_tokens if self.req.max_new_tokens is None else self.req.max_new_tokens
        return max_new, tuple(self.req.stop_token_ids)


def _cut_at_stop_string(tokenizer, toks: list[int], stops: Sequence[str], reason: str) -> tuple[list[int], str]:
    """``toks`` up to the first token whose text completes one of ``stops`` (that token kept)."""
    if not stops:
        return toks, reason
    full = tokenizer.decode(toks, skip_special_tokens=True)
    if not any(s in full for s in stops):
        return toks, reason
    for j in range(1, len(toks) + 1):  # the shortest prefix whose text holds a stop string
        if any(s in tokenizer.decode(toks[:j], skip_special_tokens=True) for s in stops):
            return toks[:j], "stop"
    return toks, reason


memory_rule("hf")(local_cache_memory)


@ENGINES.register("hf")
def _build_hf(model, tokenizer, batch_size: int = 256, chat_template: bool = False, **_) -> HFEngine:
    """transformers generate (CPU-friendly default)."""
    return HFEngine(model, tokenizer, batch_size=batch_size, chat_template=chat_template)
