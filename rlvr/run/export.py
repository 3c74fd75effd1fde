"""``rlvr export``: a run's (or checkpoint's) model as a plain Hugging Face model directory.

For a LoRA run the checkpoint holds the adapter only; ``--merged`` loads the run's frozen base
(``lora_base/``), injects the adapter and writes the merged weights (``W + (alpha / r) B A``) with the
tokenizer, so any tool that reads a model directory can use the result. A full fine-tuning checkpoint is
copied as it is.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from rlvr.models.loading import ModelConfig, load_model, load_tokenizer
from rlvr.models.lora import is_adapter_dir, load_adapter, merged_copy
from rlvr.run.checkpoint import latest_checkpoint, list_checkpoints

__all__ = ["export_model"]


def _model_dir(path: Path) -> Path:
    if is_adapter_dir(path) or (path / "config.json").is_file():
        return path
    if is_adapter_dir(path / "model") or (path / "model" / "config.json").is_file():
        return path / "model"
    if list_checkpoints(path):
        return latest_checkpoint(path) / "model"
    raise FileNotFoundError(f"{path}: not a run directory with checkpoints, a checkpoint or a model directory")


def export_model(path: str | Path, out: str | Path) -> Path:
    """Write the model of ``path`` (run dir, checkpoint or its ``model/``) to ``out``, adapters merged."""
    src, out = _model_dir(Path(path)), Path(out)
    if out.exists() and any(out.iterdir()):
        raise FileExistsError(f"{out} exists and is not empty")
    if not is_adapter_dir(src):
        shutil.copytree(src, out, dirs_exist_ok=True)
        return out
    base = src.parents[2] / "lora_base"  # RUN/checkpoints/step_N/model -> RUN/lora_base
    if not (base / "config.json").is_file():
        raise FileNotFoundError(f"{src} is a LoRA adapter, but its run has no base model at {base}")
    model, _ = load_model(ModelConfig(path=str(base)))
    merged = merged_copy(load_adapter(model, src))
    merged.save_pretrained(out, safe_serialization=True)
    load_tokenizer(src).save_pretrained(out)
    if (src / "preprocessor_config.json").is_file():  # a vision-language model's image processor
        shutil.copy2(src / "preprocessor_config.json", out / "preprocessor_config.json")
    return out
