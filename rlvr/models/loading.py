"""Load a policy (local Hugging Face directory or the built-in tiny model) and its tokenizer."""

from __future__ import annotations

import json
from typing import Any
from pathlib import Path

import torch
from transformers import (AutoImageProcessor, AutoModelForCausalLM, AutoModelForImageTextToText, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase,
                          PreTrainedTokenizerFast)

from rlvr.models.checks import ModelDirError, check_finite, check_model_dir, check_weight_files
from rlvr.models.config import ModelConfig
from rlvr.models.tiny import build_tiny_model, char_tokenizer, tiny_image_processor, vlm_tokenizer
from rlvr.models.vision import SUPPORTED_VLMS, VisionProcessor, bind_vision

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


def resolve_dtype(name: str, device: Any = "cpu") -> str:
    """``model.dtype`` for a model that will run on ``device``: ``auto`` is bfloat16 on a GPU that supports it
    (as verl and TRL load for training on GPUs) and float32 elsewhere; any other name is itself."""
    if name != "auto":
        return name
    device = torch.device(device)
    if device.type == "cuda" and torch.cuda.is_available() and torch.cuda.is_bf16_supported():
        return "bfloat16"
    return "float32"


def load_model(cfg: ModelConfig, seed: int = 0, device: Any = "cpu") -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """The policy and tokenizer, in ``cfg.dtype`` for ``device`` (:func:`resolve_dtype`; the model stays on the
    CPU); a ``path`` must be an existing local directory (nothing is downloaded)."""
    dtype = DTYPES[resolve_dtype(cfg.dtype, device)]
    if cfg.path is None:
        vlm = cfg.tiny.arch == "qwen2_vl"
        tok = vlm_tokenizer() if vlm else char_tokenizer()
        if cfg.tiny.tokens:  # whole tags as single (decodable, non-special) tokens
            tok.add_tokens(list(dict.fromkeys(cfg.tiny.tokens)))
        model = build_tiny_model(cfg.tiny, tok, seed=seed)
        if vlm:
            bind_vision(model, tok, VisionProcessor.for_model(model.config, tiny_image_processor(cfg.tiny), tok))
        return model.to(dtype), tok
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
    config = json.loads((path / "config.json").read_text(encoding="utf-8"))
    vlm = "vision_config" in config
    if vlm and config.get("model_type") not in SUPPORTED_VLMS:
        raise ModelDirError(f"{path / 'config.json'}: a vision-language model of family {config.get('model_type')!r}; "
                            f"rlvr reads the families {', '.join(SUPPORTED_VLMS)}")
    check_weight_files(path)
    try:
        auto = AutoModelForImageTextToText if vlm else AutoModelForCausalLM
        model = auto.from_pretrained(str(path), dtype=dtype, local_files_only=True)
    except _LOAD_ERRORS as e:
        raise ModelDirError(f"{path}: cannot load the model ({type(e).__name__}: {_first_line(e)})") from None
    check_finite(model, path)
    if vlm:
        bind_vision(model, tok, _vision_processor(path, model, tok))
    if model.generation_config.pad_token_id is None:
        model.generation_config.pad_token_id = tok.pad_token_id
    return model, tok


def _load_errors() -> tuple[type[BaseException], ...]:
    """What ``from_pretrained`` raises for weights it cannot read: a missing or unreadable file, a damaged
    safetensors file (``SafetensorError``), a damaged ``pytorch_model.bin`` (a zip or pickle error), weights
    whose shapes do not match the config."""
    import pickle
    import zipfile

    from safetensors import SafetensorError

    return OSError, ValueError, KeyError, RuntimeError, EOFError, pickle.UnpicklingError, zipfile.BadZipFile, \
        SafetensorError


_LOAD_ERRORS = _load_errors()


def _first_line(e: BaseException) -> str:
    lines = [ln for ln in str(e).splitlines() if ln.strip()]
    return lines[0] if lines else "no message"


def _vision_processor(path: Path, model, tok) -> VisionProcessor:
    """The VLM directory's image processor (``preprocessor_config.json``) with its tokenizer (given the
    processor's ``chat_template.json`` when the tokenizer has no chat template of its own)."""
    if not (path / "preprocessor_config.json").is_file():
        raise ModelDirError(f"{path / 'preprocessor_config.json'}: missing; a vision-language model directory "
                            "needs its image processor's config")
    legacy = path / "chat_template.json"  # a processor's chat template, which the tokenizer does not read
    try:
        if getattr(tok, "chat_template", None) is None and legacy.is_file():
            tok.chat_template = json.loads(legacy.read_text(encoding="utf-8")).get("chat_template")
        image_processor = AutoImageProcessor.from_pretrained(str(path), local_files_only=True)
        return VisionProcessor.for_model(model.config, image_processor, tok)
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ModelDirError(f"{path}: cannot load the image processor ({type(e).__name__}: "
                            f"{str(e).splitlines()[0]})") from None
