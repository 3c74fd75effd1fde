"""A shared start: the finished SFT warm-up kept once per machine and reused by every run that would train it.

Comparing methods fairly needs every method and seed to start RL from the same weights, and a warm-up of a
few minutes repeated for each of dozens of runs costs more than the comparison. With ``sft.cache`` set, a
run looks up its warm-up under a key of everything that decides it and, when it is there, copies it into its
own ``RUN_DIR/warmup`` (the warm-up checkpoint of :mod:`rlvr.sft.checkpoint`, which the run then loads as a
finished warm-up); otherwise it trains the warm-up and stores it there for the next run. ``sft.seed`` fixes
the start's seed apart from the run's, so runs of different seeds share one start.

The key (:func:`start_key`) hashes: the model section (and, for ``model.path``, every file's name, size and
modification time), the task and data sections, the ``sft`` section (less ``cache``, ``checkpoint_every`` and
the interleaved phases, which act during RL), the seed of the start, the micro-batching and precision settings
that change the warm-up's floating-point sums, the torch thread count in force (a long CPU run's numbers
depend on it, docs/cpu-threads.md), the world size and device type, the rollout section when the warm-up
generates (SSB) or trains under rollout contexts, and the versions of torch, transformers and rlvr. What it
cannot see is named in docs/shared-start.md: a model object or task object passed through the Python API
(refused), and a plugin's code. Each stored start's ``key.json`` says what its key holds; a run's ``summary.json`` names
its start (``sft_start``: key, path, and whether it was reused).

A stored start is written to a temporary directory and renamed into place, so a crash never leaves half of
one; a damaged one (its checksums no longer match) is trained again and replaced.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Any

from rlvr.config.run import RunConfig
from rlvr.core.integrity import damage
from rlvr.distributed.world import World

__all__ = ["SharedStart", "cache_root", "start_key", "start_seed", "start_identity", "fetch_start", "store_start"]

_RL_ONLY = ("cache", "checkpoint_every", "interleave_every", "interleave_steps", "interleave_lr", "interleave_source")


def start_seed(cfg: RunConfig) -> int:
    """The seed of the start: ``sft.seed``, else the run's."""
    return cfg.seed if cfg.sft.seed is None else cfg.sft.seed


def cache_root(cfg: RunConfig) -> Path | None:
    """Where shared starts live (None: ``sft.cache`` is off)."""
    c = cfg.sft.cache
    if c is False:
        return None
    if c is True:
        return Path(os.environ.get("RLVR_CACHE") or Path.home() / ".cache" / "rlvr").expanduser() / "starts"
    return Path(c).expanduser()


def _files_of(path: str) -> list[list[Any]]:
    """Each file of a local model directory as [relative name, size, mtime in ns]: a changed model, a new key."""
    root = Path(path).expanduser()
    if root.is_file():
        st = root.stat()
        return [[root.name, st.st_size, st.st_mtime_ns]]
    out = []
    for f in sorted(root.rglob("*")) if root.is_dir() else []:
        if f.is_file():
            st = f.stat()
            out.append([str(f.relative_to(root)), st.st_size, st.st_mtime_ns])
    return out


def start_identity(cfg: RunConfig, world_size: int = 1, device: str = "cpu") -> dict[str, Any]:
    """Everything that decides the warm-up's result, as plain JSON (what :func:`start_key` hashes)."""
    import torch
    import transformers

    from rlvr import __version__

    d = cfg.model_dump(mode="json")
    sft = {k: v for k, v in d["sft"].items() if k not in _RL_ONLY}
    sft["seed"] = start_seed(cfg)
    t = d["train"]
    ident: dict[str, Any] = {
        "model": d["model"], "task": d["task"], "data": d["data"], "sft": sft,
        "train": {k: t[k] for k in ("micro_batch_size", "micro_batch_tokens", "autocast", "activation_checkpointing",
                                    "shared_prefix", "distributed")},
        "threads": torch.get_num_threads(), "world_size": world_size, "device": str(device).split(":")[0],
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__, "rlvr": __version__},
    }
    if cfg.model.path:
        ident["model_files"] = _files_of(cfg.model.path)
    if cfg.sft.method == "ssb" or cfg.sft.under_contexts:  # the warm-up generates, or trains under contexts
        ident["rollout"] = d["rollout"]
    return ident


def start_key(identity: dict[str, Any]) -> str:
    """A short stable name for an identity (sha256 of its canonical JSON, 20 hex digits)."""
    blob = json.dumps(identity, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(blob).hexdigest()[:20]


def _intact(folder: Path) -> bool:
    try:
        st = json.loads((folder / "state.json").read_text())
    except (OSError, ValueError):
        return False
    return st.get("step", -1) >= st.get("steps", 0) and not damage(folder)


def fetch_start(root: Path, key: str, warmup: Path) -> Path | None:
    """Copy the stored start ``root/key`` into the run's ``warmup`` folder; returns where it came from, or None
    (nothing stored under that key, a damaged copy, or the run already has a warm-up of its own)."""
    src = root / key
    if warmup.exists() or not _intact(src):
        return None
    tmp = warmup.with_name(f".tmp_start_{warmup.name}")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(src, tmp, ignore=shutil.ignore_patterns("key.json"))
    os.replace(tmp, warmup)
    return src


def store_start(root: Path, key: str, warmup: Path, identity: dict[str, Any]) -> Path:
    """Keep the run's finished ``warmup`` as the start ``root/key`` (atomically; an intact one is left as is)."""
    dst = root / key
    if _intact(dst):
        return dst
    root.mkdir(parents=True, exist_ok=True)
    tmp = root / f".tmp_{key}_{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(warmup, tmp)
    (tmp / "key.json").write_text(json.dumps(identity, indent=1, sort_keys=True))
    old = root / f".old_{key}_{os.getpid()}"
    if dst.exists():  # a damaged copy: moved aside, then replaced
        os.replace(dst, old)
    try:
        os.replace(tmp, dst)
    except OSError:  # another process stored the same start first
        shutil.rmtree(tmp, ignore_errors=True)
    shutil.rmtree(old, ignore_errors=True)
    return dst


class SharedStart:
    """The shared start of one run (``sft.cache``): :meth:`fetch` before the warm-up, :meth:`store` after it.
    Rank 0 copies; every rank waits for it."""

    def __init__(self, cfg: RunConfig, warmup: Path, world: World | None = None, device: Any = "cpu"):
        self.world = world or World()
        self.warmup = Path(warmup)
        self.root = cache_root(cfg)
        self.identity = start_identity(cfg, self.world.size, str(device))
        self.key = start_key(self.identity)
        self.fetched: Path | None = None

    def record(self) -> dict[str, Any]:
        """What the run's summary says of its start: the key, where it is kept, and whether it was reused."""
        return {"key": self.key, "path": str(self.root / self.key), "reused": self.fetched is not None}

    def fetch(self) -> Path | None:
        """The stored start copied into the run's warm-up folder (None: none stored; the run trains it)."""
        if self.world.main:
            self.fetched = fetch_start(self.root, self.key, self.warmup)
        self.fetched = self.world.broadcast(str(self.fetched) if self.fetched is not None else None)
        self.fetched = Path(self.fetched) if self.fetched is not None else None
        return self.fetched

    def store(self) -> Path:
        """Keep the run's finished warm-up as the start (no-op when it came from there)."""
        dst = self.root / self.key
        if self.world.main and self.fetched is None:
            dst = store_start(self.root, self.key, self.warmup, self.identity)
        self.world.barrier()
        return dst
