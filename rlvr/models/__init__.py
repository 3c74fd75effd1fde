"""Model loading, the built-in tiny model, and completion log-prob computation.

The names below load on first use (PEP 562), so ``rlvr.models.config`` imports without torch.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__all__ = ["ModelConfig", "TinyModelConfig", "build_tiny_model", "char_tokenizer", "completion_logprobs",
           "load_model", "load_tokenizer"]

_HOME = {"ModelConfig": "config", "TinyModelConfig": "config", "build_tiny_model": "tiny",
         "char_tokenizer": "tiny", "completion_logprobs": "logprobs", "load_model": "loading",
         "load_tokenizer": "loading"}

if TYPE_CHECKING:
    from rlvr.models.config import ModelConfig, TinyModelConfig
    from rlvr.models.loading import load_model, load_tokenizer
    from rlvr.models.logprobs import completion_logprobs
    from rlvr.models.tiny import build_tiny_model, char_tokenizer


def __getattr__(name: str) -> Any:
    if name not in _HOME:
        raise AttributeError(f"module 'rlvr.models' has no attribute {name!r}")
    return getattr(importlib.import_module(f"rlvr.models.{_HOME[name]}"), name)
