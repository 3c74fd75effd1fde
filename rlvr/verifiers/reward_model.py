"""A reward model as a verifier: a local sequence-classification model directory scores completions.

``task.verifier: {name: reward_model, path: /models/my-rm}`` (or an entry of ``task.rewards``) loads the
directory once with ``AutoModelForSequenceClassification`` (any family transformers knows: Llama, Qwen2,
Mistral, Gemma, ...) and scores each step's completions in batches of ``batch_size``: the text is the prompt
and the completion rendered with the tokenizer's chat template when it has one (a user turn and an assistant
turn, as reward models are trained), else the prompt followed by the completion; cut to ``max_length`` tokens
from the left (the completion's end is what a reward model reads last). The reward is the logit of ``label``
(``transform: sigmoid`` maps it to (0, 1)); ``correct`` is ``reward >= threshold`` (the raw logit's 0 by
default). It runs on ``device`` (``auto``: the first GPU when there is one), apart from the policy; the scores
are computed without gradients, in the model's own dtype.

The verifier contract holds: a batch that fails (a tokenizer error, out of memory) scores its completions 0
with the reason, it never raises; each call is under the scoring deadline like any reward function.
"""

from __future__ import annotations

import math
import threading
from typing import Any, Literal, Sequence

from pydantic import Field

from rlvr.core.paths import LocalPathStr
from rlvr.core.types import Example, Score
from rlvr.registry import Params
from rlvr.verifiers.base import VERIFIERS

__all__ = ["RewardModelParams", "RewardModelVerifier"]

_LOADED: dict[tuple[str, str], tuple[Any, Any]] = {}  # (path, device) -> (model, tokenizer), loaded once
_LOCK = threading.Lock()


class RewardModelParams(Params):
    path: LocalPathStr = Field(..., description="local sequence-classification model directory (with its tokenizer)")
    batch_size: int = Field(16, gt=0, description="completions per forward")
    device: Literal["auto", "cpu", "cuda"] = Field("auto", description="where the reward model runs (auto: a GPU "
                                                                       "when there is one)")
    max_length: int = Field(2048, gt=0, description="tokens per scored text at most (cut from the left)")
    label: int = Field(0, ge=0, description="which output logit is the reward (models with several labels)")
    transform: Literal["raw", "sigmoid"] = Field("raw", description="the reward: the logit, or its sigmoid")
    threshold: float = Field(0.0, description="correct when the raw logit is at least this")


def _device(name: str) -> str:
    import torch

    return ("cuda" if torch.cuda.is_available() else "cpu") if name == "auto" else name


def _load(path: str, device: str) -> tuple[Any, Any]:
    with _LOCK:
        if (path, device) not in _LOADED:
            from transformers import AutoModelForSequenceClassification, AutoTokenizer

            tok = AutoTokenizer.from_pretrained(path)
            if tok.pad_token is None:
                tok.pad_token = tok.eos_token
            model = AutoModelForSequenceClassification.from_pretrained(path).to(device).eval()
            if model.config.pad_token_id is None:  # how the model finds each row's last real token
                model.config.pad_token_id = tok.pad_token_id
            tok.truncation_side = "left"
            _LOADED[(path, device)] = (model, tok)
        return _LOADED[(path, device)]


class RewardModelVerifier:
    """Scores a batch of completions with the reward model (``batched``: one call per step, like a reward
    function)."""

    name = "reward_model"
    batched = True

    def __init__(self, p: RewardModelParams):
        self.p = p

    def _text(self, tok: Any, ex: Example, completion: str) -> str:
        prompt = ex.prompt
        if getattr(tok, "chat_template", None):
            msgs = list(prompt) if isinstance(prompt, list) else [{"role": "user", "content": str(prompt)}]
            return tok.apply_chat_template(msgs + [{"role": "assistant", "content": completion}], tokenize=False)
        if isinstance(prompt, list):
            prompt = "\n".join(str(m.get("content", "")) for m in prompt)
        return f"{prompt}{completion}"

    def logits(self, examples: Sequence[Example], texts: Sequence[str]) -> list[float]:
        """The raw reward logits, in order."""
        import torch

        model, tok = _load(self.p.path, _device(self.p.device))
        out: list[float] = []
        for i in range(0, len(texts), self.p.batch_size):
            batch = [self._text(tok, e, t) for e, t in zip(examples[i:i + self.p.batch_size],
                                                           texts[i:i + self.p.batch_size])]
            enc = tok(batch, return_tensors="pt", padding=True, truncation=True, max_length=self.p.max_length,
                      add_special_tokens=not getattr(tok, "chat_template", None))
            with torch.no_grad():
                logits = model(**{k: v.to(model.device) for k, v in enc.items()}).logits
            out += logits[:, self.p.label].float().cpu().tolist()
        return out

    def score_batch(self, examples: Sequence[Example], texts: Sequence[str]) -> list[Score]:
        try:
            raw = self.logits(examples, texts)
        except Exception as e:  # the contract: never raise; the scorer counts these as verifier errors
            reason = f"verifier error: reward_model: {type(e).__name__}: {e}"
            return [Score(0.0, {"correct": 0.0}, {"reason": reason}) for _ in texts]
        out = []
        for r in raw:
            reward = 1.0 / (1.0 + math.exp(-r)) if self.p.transform == "sigmoid" else r
            out.append(Score(reward, {"correct": float(r >= self.p.threshold), "rm_logit": r}))
        return out

    def __call__(self, example: Example, text: str) -> Score:
        return self.score_batch([example], [text])[0]


@VERIFIERS.register("reward_model", RewardModelParams)
def _reward_model(p: RewardModelParams) -> RewardModelVerifier:
    """A local sequence-classification model directory as the reward (rlvr/verifiers/reward_model.py)."""
    return RewardModelVerifier(p)
