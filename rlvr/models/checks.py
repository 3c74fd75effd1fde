"""A local model directory checked before transformers reads it, so each problem is one line naming a file.

transformers reports a corrupted ``config.json``, missing weights or an unreadable tokenizer with a deep
traceback (or, for a config without ``model_type``, a message about the Hub); these checks say which file
is wrong and what was expected instead.
"""

from __future__ import annotations

import json
from pathlib import Path

__all__ = ["ModelDirError", "check_model_dir", "WEIGHT_FILES"]

WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                "pytorch_model.bin.index.json")


class ModelDirError(ValueError):
    """A model directory that cannot be loaded; the message names the file."""


def check_model_dir(path: str | Path) -> None:
    """Raise :class:`ModelDirError` unless ``path`` holds a readable ``config.json`` with a ``model_type``
    and weights in a format transformers loads."""
    path = Path(path)
    cfg = path / "config.json"
    if not cfg.is_file():
        raise ModelDirError(f"{cfg}: missing; a model directory needs the config.json that save_pretrained writes")
    try:
        data = json.loads(cfg.read_text(encoding="utf-8"))
    except UnicodeDecodeError as e:
        raise ModelDirError(f"{cfg}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    except json.JSONDecodeError as e:
        raise ModelDirError(f"{cfg}: invalid JSON ({e.msg} at line {e.lineno}, column {e.colno})") from None
    if not isinstance(data, dict) or "model_type" not in data:
        raise ModelDirError(f"{cfg}: no 'model_type' field, so the architecture is unknown")
    if not any((path / f).is_file() for f in WEIGHT_FILES) and not any(path.glob("model-*.safetensors")):
        raise ModelDirError(f"{path}: no weights (expected {' or '.join(WEIGHT_FILES[::2])}, or sharded "
                            "files with their index)")
