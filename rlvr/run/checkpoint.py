"""Checkpoints with safetensors: model, optimizer, scheduler, RNG states, sampler state and step.

Layout of ``RUN_DIR/checkpoints/step_000050/``::

    model/                  a Hugging Face model directory (config, model.safetensors, tokenizer)
    optimizer.safetensors   every tensor of the optimizer state, flattened to "state.<param>.<key>"
    optimizer_dcp/          instead, with FSDP: the sharded optimizer state (torch.distributed.checkpoint)
    rng.safetensors         torch CPU (and CUDA) generator states
    critic*.safetensors     with algorithm.critic: the value model and its optimizer (rlvr.learners.critic)
    discriminator*          with algorithm.discriminator: PRISM's discriminator and its optimizer (rlvr.learners.discriminator)
    state.json              step, optimizer param groups, scheduler, python RNG, sampler/stats state, extras
    checksums.json          every other file's size and CRC-32, written last

Nothing is unpickled on load (except DCP's own metadata file in an FSDP run's ``optimizer_dcp/``).

**Trust.** A checkpoint is written to a temporary folder, each file fsync'ed, its checksums recorded, and the
folder renamed into place (the rename fsync'ed too), so a crash or a kill mid-write never leaves a half
checkpoint that resume would pick up. On resume every file is checked against ``checksums.json``
(:func:`intact_checkpoint`): a damaged newest checkpoint (a truncated file, a flipped byte, a missing file) is
named with the file and skipped for the previous intact one, with a warning. A full disk while writing is one
:class:`CheckpointError` saying so; the half-written folder is removed and the checkpoints already saved stay.
"""

from __future__ import annotations

import errno
import json
import random
import shutil
import sys
from pathlib import Path
from typing import Any, Callable

import torch
from safetensors.torch import load_file, save_file

from rlvr.core.integrity import damage, fsync_path as _fsync, seal
from rlvr.core.optim_state import flatten_optimizer as _flatten_optimizer
from rlvr.core.optim_state import unflatten_optimizer as _unflatten_optimizer
from rlvr.models.lora import has_lora, save_adapter
from rlvr.models.vision import save_tokenizer

__all__ = ["save_checkpoint", "load_checkpoint", "latest_checkpoint", "list_checkpoints", "checkpoint_tmp",
           "intact_checkpoint", "damage", "seal", "CheckpointError"]

class CheckpointError(OSError):
    """A checkpoint could not be written (a full disk) or every checkpoint of a run is damaged."""


def intact_checkpoint(path: str | Path, say=None) -> Path:
    """The checkpoint to resume from: ``path`` itself if it is a checkpoint (refused, naming the damage and the
    previous intact one, if it is damaged), else the newest intact checkpoint of the run directory ``path``,
    with a warning (``say``) for each newer damaged one."""
    path = Path(path)
    say = say or (lambda msg: print(msg, file=sys.stderr, flush=True))
    if (path / "state.json").is_file():
        bad = damage(path)
        if bad:
            older = [c for c in list_checkpoints(path.parent.parent) if c.name < path.name and not damage(c)]
            hint = f"; the previous intact checkpoint is {older[-1]}" if older else ""
            raise CheckpointError(f"checkpoint {path} is damaged: {'; '.join(bad)}{hint}")
        return path
    found = list_checkpoints(path)
    if not found:
        raise FileNotFoundError(f"no checkpoint found in {path} (expected {path}/checkpoints/step_*/state.json)")
    for ckpt in reversed(found):
        bad = damage(ckpt)
        if not bad:
            return ckpt
        say(f"warning: checkpoint {ckpt} is damaged ({'; '.join(bad)}); trying the one before it")
    raise CheckpointError(f"every checkpoint of {path} is damaged ({', '.join(c.name for c in found)})")


def _disk_full(e: BaseException) -> bool:
    return (isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT)) or "No space left" in str(e)


def list_checkpoints(run_dir: str | Path) -> list[Path]:
    root = Path(run_dir) / "checkpoints"
    if not root.is_dir():
        return []
    return sorted((p for p in root.glob("step_*") if p.is_dir() and (p / "state.json").is_file()),
                  key=lambda p: int(p.name.split("_")[1]))


def latest_checkpoint(path: str | Path) -> Path:
    """``path`` itself if it is a checkpoint, else the newest checkpoint of the run directory ``path``."""
    path = Path(path)
    if (path / "state.json").is_file():
        return path
    found = list_checkpoints(path)
    if not found:
        raise FileNotFoundError(f"no checkpoint found in {path} (expected {path}/checkpoints/step_*/state.json)")
    return found[-1]


def checkpoint_tmp(run_dir: str | Path, step: int) -> Path:
    """Where step ``step``'s checkpoint is written before it is renamed into place."""
    return Path(run_dir) / "checkpoints" / f".tmp_step_{step:06d}"


def save_checkpoint(run_dir: str | Path, step: int, model, tokenizer, optimizer, scheduler,
                    state: dict[str, Any], keep: int = 2, fresh: bool = True,
                    model_state: dict[str, torch.Tensor] | None = None,
                    write_extra: Callable[[Path], None] | None = None) -> Path:
    """Write the checkpoint of ``step``. ``optimizer=None``: its state is already in the temporary folder
    (FSDP's sharded ``optimizer_dcp/``, written by every rank), which ``fresh=False`` keeps;
    ``model_state``: the weights to write instead of ``model.state_dict()`` (FSDP's gathered ones);
    ``write_extra(folder)`` writes more files into it (the critic's) before it is renamed into place."""
    root = Path(run_dir) / "checkpoints"
    tmp = checkpoint_tmp(run_dir, step)
    try:
        return _save(run_dir, root, tmp, step, model, tokenizer, optimizer, scheduler, state, keep, fresh,
                     model_state, write_extra)
    except Exception as e:
        shutil.rmtree(tmp, ignore_errors=True)  # never a half checkpoint; the saved ones are untouched
        if _disk_full(e):
            kept = list_checkpoints(run_dir)
            raise CheckpointError(f"no space left on the device writing the checkpoint of step {step} "
                                  f"in {root}: it was not written"
                                  + (f"; {kept[-1]} is intact" if kept else "") + ". Free space, then continue "
                                  f"with: rlvr train --resume {run_dir}") from None
        raise


def _save(run_dir, root: Path, tmp: Path, step: int, model, tokenizer, optimizer, scheduler, state, keep: int,
          fresh: bool, model_state, write_extra) -> Path:
    final = root / f"step_{step:06d}"
    if fresh:
        shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True, exist_ok=True)
    if has_lora(model):  # the adapter only: the frozen base is in the run directory's lora_base/
        save_adapter(model, tmp / "model", model_state)
    else:
        model.save_pretrained(tmp / "model", safe_serialization=True, state_dict=model_state)
    save_tokenizer(tokenizer, tmp / "model")
    if optimizer is None:
        opt_meta: dict[str, Any] = {"format": "dcp"}
    else:
        opt_tensors, opt_meta = _flatten_optimizer(optimizer)
        save_file(opt_tensors, str(tmp / "optimizer.safetensors"))
    rng = {"torch_cpu": torch.get_rng_state()}
    if torch.cuda.is_available():
        for i, s in enumerate(torch.cuda.get_rng_state_all()):
            rng[f"torch_cuda_{i}"] = s
    save_file(rng, str(tmp / "rng.safetensors"))
    if write_extra is not None:
        write_extra(tmp)
    py_state = random.getstate()
    full = {"step": step, "optimizer": opt_meta, "scheduler": scheduler.state_dict(),
            "python_rng": [py_state[0], list(py_state[1]), py_state[2]], **state}
    (tmp / "state.json").write_text(json.dumps(full, indent=1))
    seal(tmp)
    shutil.rmtree(final, ignore_errors=True)
    tmp.rename(final)
    _fsync(root)
    for old in list_checkpoints(run_dir)[:-keep]:
        shutil.rmtree(old, ignore_errors=True)
    return final


def load_checkpoint(ckpt: str | Path, optimizer, scheduler,
                    load_sharded: Callable[[Path], None] | None = None) -> dict[str, Any]:
    """Restore optimizer, scheduler and RNG states in place and return the rest of the state.

    The model itself loads from ``ckpt/model`` like any local Hugging Face directory. ``load_sharded``
    restores an optimizer state written sharded (``optimizer_dcp/``, FSDP); without it such a checkpoint,
    or a plain one with it, is refused with the reason.
    """
    ckpt = Path(ckpt)
    state = json.loads((ckpt / "state.json").read_text())
    sharded = state["optimizer"].get("format") == "dcp"
    if sharded != (load_sharded is not None):
        raise ValueError(f"{ckpt} was written by a {'sharded (fsdp)' if sharded else 'replicated'} run; resume it "
                         f"with train.distributed.strategy={'fsdp under torchrun' if sharded else 'ddp or one process'}")
    if sharded:
        load_sharded(ckpt / "optimizer_dcp")
    else:
        optimizer.load_state_dict(_unflatten_optimizer(load_file(str(ckpt / "optimizer.safetensors")),
                                                       state["optimizer"]))
    scheduler.load_state_dict(state["scheduler"])
    rng = load_file(str(ckpt / "rng.safetensors"))
    torch.set_rng_state(rng["torch_cpu"])
    cuda = [rng[k] for k in sorted(rng) if k.startswith("torch_cuda_")]
    if cuda and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(cuda)
    v, inner, g = state["python_rng"]
    random.setstate((v, tuple(inner), g))
    return state
