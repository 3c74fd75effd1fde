"""Model loading, the built-in tiny model, and completion log-prob computation."""

from rlvr.models.loading import ModelConfig, load_model, load_tokenizer
from rlvr.models.logprobs import completion_logprobs
from rlvr.models.tiny import TinyModelConfig, build_tiny_model, char_tokenizer

__all__ = ["ModelConfig", "TinyModelConfig", "build_tiny_model", "char_tokenizer", "completion_logprobs",
           "load_model", "load_tokenizer"]
