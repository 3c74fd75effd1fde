"""Load a policy (local Hugging Face directory or the built-in tiny model) and its tokenizer."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from transformers import (AutoModelForCausalLM, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase,
                          PreTrainedTokenizerFast)

from rlvr.models.checks import ModelDirError, check_model_dir
from rlvr.models.config import ModelConfig
from rlvr.models.tiny import build_tiny_model, char_tokenizer

__all__ = ["ModelConfig", "load_model", "load_tokenizer", "DTYPES"]

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def load_tokenizer(path: str | Path) -> PreTrainedTokenizerBase:
    """The directory's tokenizer, as saved.

    A generic ``tokenizers``-backed tokenizer (rlvr's tiny one) is loaded as exactly that class: given a
    ``config.json`` of a Qwen2 model beside it, ``AutoTokenizer`` would substitute Qwen2's tokenizer class,
    whose pre-tokenizer drops spaces, so a checkpoint would tokenize differently from the run that wrote it.
    """
    cfg_file = Path(path) / "tokenizer_config.json"
    saved_class = json.loads(cfg_file.read_text()).get("tokenizer_class") if cfg_file.is_file() else None
    if saved_class in ("TokenizersBackend", "PreTrainedTokenizerFast"):
        tok = PreTrainedTokenizerFast.from_pretrained(str(path), local_files_only=True)
    else:
        tok = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    if tok.pad_token_id is None:
        if tok.eos_token_id is None:
            raise ValueError(f"tokenizer at {path} has neither a pad nor an eos token")
        tok.pad_token = tok.eos_token
    tok.padding_side = "left"
    return tok


def load_model(cfg: ModelConfig, seed: int = 0) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """The policy and tokenizer; a ``path`` must be an existing local directory (nothing is downloaded)."""
    if cfg.path is None:
        tok = char_tokenizer()
        model = build_tiny_model(cfg.tiny, tok, seed=seed)
        return model.to(DTYPES[cfg.dtype]), tok
    path = Path(cfg.path).expanduser()
    if not path.is_dir():
        raise FileNotFoundError(f"model.path {cfg.path!r} is not a local directory (rlvr never downloads weights)")
    check_model_dir(path)
    try:
        tok = load_tokenizer(path)
    except ValueError as e:
        if "neither a pad nor an eos" in str(e):
            raise ModelDirError(str(e)) from None
        raise ModelDirError(f"{path}: cannot read the tokenizer ({type(e).__name__}: {e})") from None
    except (OSError, TypeError, KeyError, json.JSONDecodeError) as e:
        raise ModelDirError(f"{path}: cannot read the tokenizer ({type(e).__name__}: {e})") from None
    try:
        model = AutoModelForCausalLM.from_pretrained(str(path), dtype=DTYPES[cfg.dtype], local_files_only=True)
    except (OSError, ValueError, KeyError) as e:
        raise ModelDirError(f"{path}: cannot load the model ({type(e).__name__}: {str(e).splitlines()[0]})") from None
    if model.generation_config.pad_token_id is None:
        model.generation_config.pad_token_id = tok.pad_token_id
    return model, tok
