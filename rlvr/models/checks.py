"""A local model directory checked before transformers reads it, so each problem is one line naming a file.

transformers reports a corrupted ``config.json``, missing weights or an unreadable tokenizer with a deep
traceback (or, for a config without ``model_type``, a message about the Hub); these checks say which file
is wrong and what was expected instead.

The weights are checked twice. Before loading, :func:`check_weight_files` reads each safetensors header (a
few bytes; no tensor data) and compares the sizes it declares with the file's (a ``pytorch_model.bin`` must
be a whole zip archive), and checks that a sharded index names only shards that exist: a truncated copy or
a corrupt header is named there, not by safetensors' deserializer deep inside ``from_pretrained``. After
loading, :func:`check_finite` finds NaN or infinite weights (a damaged file, or a model saved after it
diverged), which would otherwise surface as NaN log-probs at the first step.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

__all__ = ["ModelDirError", "check_model_dir", "check_weight_files", "check_finite", "WEIGHT_FILES"]

SAFETENSORS = "model.safetensors"
TORCH_BIN = "pytorch_model.bin"
_FIX = "re-save or re-copy it"

WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                "pytorch_model.bin.index.json")


class ModelDirError(ValueError):
    """A model directory that cannot be loaded; the message names the file."""


def _read_json(file: Path, fix: str = "") -> Any:
    """``file`` parsed, or :class:`ModelDirError` saying why not (``fix``: what to do, appended)."""
    try:
        return json.loads(file.read_text(encoding="utf-8"))
    except UnicodeDecodeError as e:
        raise ModelDirError(f"{file}: not UTF-8 text ({e.reason} at byte {e.start}){fix}") from None
    except json.JSONDecodeError as e:
        raise ModelDirError(f"{file}: invalid JSON ({e.msg} at line {e.lineno}, column {e.colno}){fix}") from None


def check_model_dir(path: str | Path) -> None:
    """Raise :class:`ModelDirError` unless ``path`` holds a readable ``config.json`` with a ``model_type``
    and weights in a format transformers loads."""
    path = Path(path)
    cfg = path / "config.json"
    if not cfg.is_file():
        raise ModelDirError(f"{cfg}: missing; a model directory needs the config.json that save_pretrained writes")
    data = _read_json(cfg)
    if not isinstance(data, dict) or "model_type" not in data:
        raise ModelDirError(f"{cfg}: no 'model_type' field, so the architecture is unknown")
    if not any((path / f).is_file() for f in WEIGHT_FILES) and not any(path.glob("model-*.safetensors")):
        raise ModelDirError(f"{path}: no weights (expected {' or '.join(WEIGHT_FILES[::2])}, or sharded "
                            "files with their index)")


def check_weight_files(path: str | Path) -> None:
    """Raise :class:`ModelDirError` when the weights ``from_pretrained`` would read (safetensors first, then
    ``pytorch_model.bin``, each whole or sharded with an index) are truncated or corrupt, or when an index
    names a shard that is missing. Reads headers only."""
    path = Path(path)
    for name, problem_of in ((SAFETENSORS, safetensors_problem), (TORCH_BIN, torch_file_problem)):
        if (path / name).is_file():
            files = [path / name]
        elif (path / f"{name}.index.json").is_file():
            files = _index_shards(path, path / f"{name}.index.json")
        else:
            continue
        for file in files:
            problem = problem_of(file)
            if problem:
                raise ModelDirError(f"model.path {path}: {file.name} is truncated or corrupt ({problem}); {_FIX}")
        return


def _index_shards(path: Path, index: Path) -> list[Path]:
    """The shard files a sharded checkpoint's index names, each of which must exist."""
    data = _read_json(index, f"; {_FIX}")
    weight_map = data.get("weight_map") if isinstance(data, dict) else None
    if not isinstance(weight_map, dict) or not weight_map:
        raise ModelDirError(f"{index}: no 'weight_map' naming the shard file of each tensor; {_FIX}")
    names = sorted({str(v) for v in weight_map.values()})
    missing = [n for n in names if not (path / n).is_file()]
    if missing:
        raise ModelDirError(f"model.path {path}: {index.name} names {len(names)} shard files, of which "
                            f"{len(missing)} {'is' if len(missing) == 1 else 'are'} missing: {', '.join(missing)}; "
                            "re-copy the whole directory")
    return [path / n for n in names]


def torch_file_problem(file: str | Path) -> str | None:
    """What is wrong with a ``torch.save`` file's layout (``None``: nothing seen): it is a zip archive whose
    directory sits at the end, so a cut-off copy is not a readable zip (a pre-1.6 file is a bare pickle)."""
    import zipfile

    file = Path(file)
    size = file.stat().st_size
    if size == 0:
        return "an empty file"
    if zipfile.is_zipfile(file):
        return None
    with file.open("rb") as f:
        if f.read(1) == b"\x80":  # the legacy format: a pickle stream, which torch.load checks itself
            return None
    return f"{size:,} bytes that are not a complete zip archive, as torch.save writes"


def safetensors_problem(file: str | Path) -> str | None:
    """What is wrong with a safetensors file's layout (``None``: nothing). The format is an 8-byte
    little-endian header length, that many bytes of JSON (each tensor's ``data_offsets`` into the data that
    follows), then the data; a cut-off copy holds fewer bytes than the header describes."""
    file = Path(file)
    size = file.stat().st_size
    if size < 8:
        return f"{size} bytes, fewer than the 8-byte header length every safetensors file starts with"
    with file.open("rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        if 8 + n > size:
            return f"the file has {size:,} bytes, fewer than the {8 + n:,} its header alone would take"
        raw = f.read(n)
    try:
        header = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        return f"its header is not valid JSON: {e}"
    if not isinstance(header, dict):
        return "its header is not a JSON object"
    ends = [e["data_offsets"][1] for k, e in header.items()
            if k != "__metadata__" and isinstance(e, dict) and isinstance(e.get("data_offsets"), list)
            and len(e["data_offsets"]) == 2 and isinstance(e["data_offsets"][1], int)]
    want = 8 + n + max(ends, default=0)
    if want > size:
        return f"the file has {size:,} of the {want:,} bytes its header describes"
    try:  # anything else safetensors itself refuses (overlapping offsets, unknown dtypes, ...)
        from safetensors import SafetensorError, safe_open

        with safe_open(str(file), framework="pt"):
            pass
    except SafetensorError as e:
        return f"safetensors: {e}"
    return None


def check_finite(model: Any, path: str | Path) -> None:
    """Raise :class:`ModelDirError` naming the first tensor of ``model`` (loaded from ``path``) that holds
    NaN or infinite values, and how many. Buffers may hold -inf or inf (some models keep attention masks
    so) but never NaN. One pass over each tensor, in chunks, so memory stays bounded on large weights."""
    path = Path(path)
    saved = set(model.state_dict())
    bad: list[tuple[str, int, int, int]] = []  # name, NaN count, inf count, size
    tensors = [(n, t, True) for n, t in model.named_parameters()] + [(n, t, False) for n, t in model.named_buffers()]
    for name, t, param in tensors:
        if not t.is_floating_point() or t.device.type == "meta":
            continue
        nan, inf = _count_nonfinite(t.detach())
        if nan or (inf and param):
            bad.append((name, nan, inf if param else 0, t.numel()))
    if not bad:
        return
    name, nan, inf, size = bad[0]
    counts = " and ".join(f"{c:,} {w}" for c, w in ((nan, "NaN"), (inf, "infinite")) if c)
    more = f" (and {len(bad) - 1} more tensor{'s' if len(bad) > 2 else ''} with such values)" if len(bad) > 1 else ""
    where = _weights_file(path, name) if name in saved else " (computed by the model's code from config.json)"
    raise ModelDirError(f"model.path {path}: tensor {name!r}{where} has {counts} value{'s' if nan + inf > 1 else ''} "
                        f"of {size:,}{more}; the weights are damaged or were saved after training diverged: "
                        "re-copy them, or use a checkpoint saved before that")


def _count_nonfinite(t: Any, chunk: int = 1 << 24) -> tuple[int, int]:
    """NaN and infinite values in ``t``; a tensor that is all finite (the common case) costs one
    ``isfinite().all()`` per chunk."""
    import torch

    flat = t.reshape(-1)
    nan = inf = 0
    for i in range(0, flat.numel(), chunk):
        part = flat[i: i + chunk]
        if bool(torch.isfinite(part).all()):
            continue
        n = int(torch.isnan(part).sum())
        nan, inf = nan + n, inf + int(torch.isinf(part).sum())
    return nan, inf


def _weights_file(path: Path, name: str) -> str:
    """`` in FILE`` for the weights file that holds tensor ``name`` where that is known, else ``""``."""
    for single in (SAFETENSORS, TORCH_BIN):
        if (path / single).is_file():
            return f" in {single}"
        try:
            shard = json.loads((path / f"{single}.index.json").read_text(encoding="utf-8"))["weight_map"].get(name)
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            continue
        return f" in {shard}" if shard else ""
    return ""
