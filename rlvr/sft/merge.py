"""SFT weight interpolation (L20-Edu-135M): ``θ = (1 − α)·θ_A + α·θ_B``.

L20-Edu (arXiv:2606.22189; docs/data.md, `rlvr merge`) interpolates the base model (A) and its SFT model (B) with
an ``α`` chosen on a validation harness (e.g. 0.5); the test oracle: ``α = 0`` returns θ_A exactly and ``α = 1``
returns θ_B exactly (both are copies here, not arithmetic). In between, each floating-point tensor is interpolated
in float32 and cast back to A's dtype; integer and boolean tensors (buffers) must be equal in both. The two
directories must hold the same architecture (``model_type`` and ``architectures`` in config.json) and the same
tensor names and shapes; any difference is a :class:`MergeError` that names it. The result is written with
transformers' ``save_pretrained`` (safetensors), with A's config and A's tokenizer when A has one.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["MergeError", "interpolate_state", "merge_models"]


class MergeError(ValueError):
    """Two model directories that cannot be interpolated; the message says why."""


def _config(path: Path) -> dict[str, Any]:
    cfg = path / "config.json"
    if not cfg.is_file():
        raise MergeError(f"{path}: not a Hugging Face model directory (no config.json)")
    try:
        return json.loads(cfg.read_text())
    except json.JSONDecodeError as e:
        raise MergeError(f"{cfg}: invalid JSON ({e.msg})") from None


def check_configs(a: Path, b: Path) -> None:
    ca, cb = _config(a), _config(b)
    for key in ("model_type", "architectures"):
        if ca.get(key) != cb.get(key):
            raise MergeError(f"different architectures: {key} is {ca.get(key)!r} in {a} but {cb.get(key)!r} in {b}")


def interpolate_state(sa: dict, sb: dict, alpha: float, names: tuple[str, str] = ("A", "B")) -> dict:
    """``(1 − alpha)·sa + alpha·sb`` tensor by tensor (see the module docstring); raises :class:`MergeError`."""
    import torch

    if not 0.0 <= alpha <= 1.0:
        raise MergeError(f"alpha must be in [0, 1] (0: {names[0]}, 1: {names[1]}), got {alpha}")
    only_a, only_b = sorted(set(sa) - set(sb)), sorted(set(sb) - set(sa))
    if only_a or only_b:
        raise MergeError(f"the models' tensors differ: only in {names[0]}: {only_a[:5]}, only in {names[1]}: {only_b[:5]}")
    out = {}
    for k, ta in sa.items():
        tb = sb[k]
        if ta.shape != tb.shape:
            raise MergeError(f"shape mismatch for {k}: {list(ta.shape)} in {names[0]}, {list(tb.shape)} in {names[1]}")
        if not ta.is_floating_point() or not tb.is_floating_point():
            if not torch.equal(ta, tb):
                raise MergeError(f"non-floating tensor {k} differs between the models and cannot be interpolated")
            out[k] = ta.clone()
        elif alpha == 0.0:
            out[k] = ta.clone()
        elif alpha == 1.0:
            out[k] = tb.to(ta.dtype).clone()
        else:
            out[k] = ((1.0 - alpha) * ta.float() + alpha * tb.float()).to(ta.dtype)
    return out


def merge_models(a: str | Path, b: str | Path, alpha: float, out: str | Path) -> dict[str, Any]:
    """Write the interpolation of model directories ``a`` (α = 0) and ``b`` (α = 1) to ``out``."""
    import torch
    from transformers import AutoModelForCausalLM

    a, b, out = Path(a), Path(b), Path(out)
    for p in (a, b):
        if not p.is_dir():
            raise MergeError(f"{p}: no such model directory")
    if not 0.0 <= alpha <= 1.0:
        raise MergeError(f"alpha must be in [0, 1] (0: {a}, 1: {b}), got {alpha}")
    check_configs(a, b)
    ma = AutoModelForCausalLM.from_pretrained(a, torch_dtype="auto")
    mb = AutoModelForCausalLM.from_pretrained(b, torch_dtype="auto")
    with torch.no_grad():
        merged = interpolate_state(ma.state_dict(), mb.state_dict(), alpha, (str(a), str(b)))
        del mb
        ma.load_state_dict(merged)
    out.mkdir(parents=True, exist_ok=True)
    ma.save_pretrained(out, safe_serialization=True)
    tokenizer = _save_tokenizer(a, out)
    info = {"a": str(a), "b": str(b), "alpha": alpha, "out": str(out), "tensors": len(merged),
            "parameters": sum(t.numel() for t in merged.values()), "tokenizer": tokenizer}
    (out / "merge.json").write_text(json.dumps(info, indent=1) + "\n")
    return info


def _save_tokenizer(a: Path, out: Path) -> str | None:
    if not any((a / f).is_file() for f in ("tokenizer.json", "tokenizer_config.json", "tokenizer.model")):
        return None
    from transformers import AutoTokenizer

    AutoTokenizer.from_pretrained(a).save_pretrained(out)
    return str(a)
