"""Step-level best-of-N search guided by a process reward model (``rlvr eval --search prm``).

PROPA's test-time search (Jiang et al. 2025, arXiv:2511.10279; code ``test/bestN_test_*.py``): for each
sample, one step at a time,

    candidates c_1..c_K ~ pi(. | x, steps so far)          K = ``candidates``, at the sampling temperature,
                                                         each ended by ``delimiter`` (at most ``step_tokens``)
    the step kept = argmax_k PRM(x, steps so far + c_k)  (the first maximum)
    until a kept step holds ``terminal`` (case-insensitive) or EOS, ``max_steps`` steps, or the completion
    would pass ``max_new_tokens``

The reference samples its K candidates at temperature 1 with n = 4 and stops at "the final answer is" or 10
steps; those are the defaults. The wrapper returns ordinary completions (the kept steps, with their behaviour
log-probs), so evaluation scores and aggregates them as it does any engine's.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable, Sequence

from rlvr.core.types import Completion, GenerationRequest, SamplingParams

__all__ = ["PRMSearchWrapper"]


class PRMSearchWrapper:
    """An engine whose completions are grown one step at a time, the step the scorer likes best kept."""

    name = "prm_search"
    supports_images = True  # every request keeps its example

    def __init__(self, inner: Any, tokenizer, score: Callable[[Sequence[Completion]], list[float]],
                 candidates: int = 4, max_steps: int = 10, step_tokens: int = 256, delimiter: str = "\n",
                 terminal: str = "the final answer is"):
        if candidates < 1 or max_steps < 1 or step_tokens < 1:
            raise ValueError("prm search: candidates, max_steps and step_tokens must be at least 1")
        self.inner, self.tokenizer, self.score = inner, tokenizer, score
        self.candidates, self.max_steps, self.step_tokens = candidates, max_steps, step_tokens
        self.delimiter, self.terminal = delimiter, terminal.lower()
        self.batch_size = getattr(inner, "batch_size", 256)

    def sync_weights(self) -> None:
        self.inner.sync_weights()

    def _done(self, step: list[int], reason: str) -> bool:
        text = self.tokenizer.decode(step, skip_special_tokens=True).lower()
        eos = bool(step) and step[-1] == self.tokenizer.eos_token_id
        return eos or (bool(self.terminal) and self.terminal in text) or (reason == "stop" and self.delimiter not in text)

    def generate(self, requests: Sequence[GenerationRequest], sampling: SamplingParams) -> list[Completion]:
        # one search per sample: (request index, path ids, path log-probs, finished, prompt ids, vision)
        live = [[gi, [], [], False, None, None] for gi, r in enumerate(requests) for _ in range(r.n)]
        budget = [sampling.max_new_tokens if requests[s[0]].max_new_tokens is None else requests[s[0]].max_new_tokens
                  for s in live]
        for it in range(self.max_steps):
            todo = [k for k, s in enumerate(live) if not s[3] and len(s[1]) < budget[k]]
            if not todo:
                break
            asks = [replace(requests[live[k][0]], n=self.candidates, prefix_ids=tuple(live[k][1]),
                            prefix_logprobs=tuple(live[k][2]), prefix_source="prefix",
                            max_new_tokens=min(self.step_tokens, budget[k] - len(live[k][1])),
                            stop=(self.delimiter,)) for k in todo]
            seed = None if sampling.seed is None else sampling.seed + 7919 * it
            comps = self.inner.generate(asks, replace(sampling, seed=seed))
            by: dict[int, list[Completion]] = {}
            for c in comps:
                by.setdefault(c.group, []).append(c)
            cands = [c for j in range(len(todo)) for c in by.get(j, [])]
            scores = self.score(cands) if cands else []
            at = 0
            for j, k in enumerate(todo):
                mine = by.get(j, [])
                if not mine:
                    live[k][3] = True
                    continue
                best = max(range(len(mine)), key=lambda i: (scores[at + i], -i))
                at += len(mine)
                c, s = mine[best], live[k]
                start = len(s[1])
                step = list(c.completion_ids[start:])
                s[1] = list(c.completion_ids)
                s[2] = list(c.logprobs) if c.logprobs is not None else [0.0] * len(s[1])
                s[4], s[5] = list(c.prompt_ids), c.vision
                s[3] = self._done(step, c.finish_reason) or not step
        out = []
        for k, (gi, ids, lps, done, prompt, vision) in enumerate(live):
            finished = "stop" if done else "length"
            if prompt is None:  # nothing generated (a zero budget): an empty completion of the prompt
                prompt = list(self.inner.generate([replace(requests[gi], n=1, max_new_tokens=0)], sampling)[0].prompt_ids)
            out.append(Completion(requests[gi].example.id, prompt, ids, lps, finished,
                                  self.tokenizer.decode(ids, skip_special_tokens=True), group=gi, vision=vision))
        return out
