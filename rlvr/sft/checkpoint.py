"""The warm-up's checkpoint: a supervised warm-up resumes where it stopped, its schedule and data order included.

Layout of ``RUN_DIR/warmup/`` (one checkpoint, replaced atomically at each save)::

    model.safetensors       the policy's weights (gathered onto rank 0 under FSDP)
    optimizer.safetensors   AdamW's state (instead ``optimizer_dcp/`` under FSDP: every rank's shard)
    rng.safetensors         torch's CPU generator state
    state.json              step, steps, each step's loss, the sampler's order, position and Python RNG, the
                            scheduler, the phase's seconds so far

A save is due every ``sft.checkpoint_every`` steps, when ``train.checkpoint_minutes`` have passed since the
last one, and when the run is stopped (Ctrl-C, SIGTERM); under ``torchrun`` the ranks agree on it (rank 0's
clock decides). A finished warm-up writes its final weights with ``step == steps`` and no optimizer, so a run
that stops between the warm-up and its first RL checkpoint resumes after the warm-up, not before it.

Resuming is exact: the weights, AdamW's moments, the scheduler's position, the data order and both RNGs are
those of the uninterrupted phase at that step, so the resumed phase takes the same steps bit for bit
(``tests/test_warmup_resume.py``). Nothing is unpickled on load (except DCP's own metadata under FSDP).
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any, Callable

import torch
from safetensors.torch import load_file, save_file

from rlvr.core.clock import SaveClock
from rlvr.core.integrity import damage, seal
from rlvr.core.optim_state import flatten_optimizer, unflatten_optimizer
from rlvr.distributed.world import World

__all__ = ["WarmupCheckpoint", "Keeper"]

WEIGHTS = "model.safetensors"


def _encode_rng(state: tuple) -> list:
    return [state[0], list(state[1]), state[2]]


def _decode_rng(state: list) -> tuple:
    return state[0], tuple(state[1]), state[2]


class WarmupCheckpoint:
    """The warm-up checkpoint of one run directory (``folder``, e.g. ``RUN_DIR/warmup``); ``every``: save every
    K steps (0: not by steps); ``minutes``: save when this long has passed since the last save (None: not by
    time). Every rank of a distributed run holds one; rank 0 writes the files."""

    def __init__(self, folder: str | Path, world: World | None = None, every: int = 0,
                 minutes: float | None = None):
        self.folder = Path(folder)
        self.world = world or World()
        self.every = every
        self.clock = SaveClock(minutes, self.world)
        self._state: dict[str, Any] | None = None
        if (self.folder / "state.json").is_file():
            bad = damage(self.folder)
            if bad:  # nothing older to fall back to: the warm-up starts again, said aloud
                print(f"warning: the warm-up checkpoint {self.folder} is damaged ({'; '.join(bad)}); the warm-up "
                      "starts again from its first step", file=sys.stderr, flush=True)
            else:
                self._state = json.loads((self.folder / "state.json").read_text())

    # ---- what a resumed run reads
    @property
    def state(self) -> dict[str, Any] | None:
        """The saved ``state.json`` (None: no warm-up checkpoint)."""
        return self._state

    @property
    def done(self) -> bool:
        """The saved warm-up finished (its weights are the warm-up's result)."""
        return self._state is not None and self._state["step"] >= self._state["steps"]

    def load_weights(self, model: torch.nn.Module) -> None:
        """The saved weights into ``model`` (a whole model, before any sharding)."""
        from safetensors.torch import load_model

        load_model(model, str(self.folder / WEIGHTS), strict=True, device=str(next(model.parameters()).device))

    def check_steps(self, steps: int) -> None:
        """A checkpoint written for another ``sft.steps`` would resume a different schedule: refused."""
        if self._state is not None and self._state["steps"] != steps:
            raise ValueError(f"{self.folder} holds a warm-up of sft.steps={self._state['steps']} (stopped at step "
                             f"{self._state['step']}); this run asks for sft.steps={steps}. The schedule depends on "
                             "the total, so a warm-up resumes only with the same sft.steps")

    # ---- what the loop calls
    def keeper(self, module: torch.nn.Module, sharded: bool = False) -> "Keeper":
        """The hooks :func:`rlvr.sft.supervised.train_steps` calls, bound to the trained ``module`` (under FSDP
        the sharded root, ``sharded=True``)."""
        return Keeper(self, module, sharded)

    def due(self, step: int, stopping: bool) -> bool:
        """Whether to save after ``step`` completed steps (a collective in a distributed run: rank 0's clock)."""
        # (stopping and the step are the same on every rank: only the clock needs rank 0's word)
        return stopping or (bool(self.every) and step % self.every == 0) or self.clock.due()

    def write(self, step: int, steps: int, weights: dict[str, torch.Tensor] | Callable[[Path], None],
              optimizer: Callable[[Path], dict[str, Any]] | None, extra: dict[str, Any]) -> None:
        """Write one checkpoint atomically (rank 0 writes; ``optimizer(tmp)`` runs on every rank, as FSDP's
        sharded save needs)."""
        tmp = self.folder.with_name(f".tmp_{self.folder.name}")
        if self.world.main:
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir(parents=True)
        self.world.barrier()
        meta = optimizer(tmp) if optimizer is not None else {"format": "none"}
        if self.world.main:
            if callable(weights):
                weights(tmp / WEIGHTS)
            else:
                save_file({k: v.detach().cpu().contiguous() for k, v in weights.items()}, str(tmp / WEIGHTS))
            save_file({"torch_cpu": torch.get_rng_state()}, str(tmp / "rng.safetensors"))
            self._state = {"step": step, "steps": steps, "optimizer": meta, **extra}
            (tmp / "state.json").write_text(json.dumps(self._state))
            seal(tmp)  # sizes and checksums, everything fsync'ed before the rename
            shutil.rmtree(self.folder, ignore_errors=True)
            tmp.rename(self.folder)
        self.world.barrier()
        self.clock.reset()

    def finish(self, model: torch.nn.Module, steps: int, losses: list[float], seconds: float) -> None:
        """The finished warm-up's weights (``model``: whole, on every rank), without an optimizer."""
        from safetensors.torch import save_model

        self.write(steps, steps, lambda path: save_model(model, str(path)), None,
                   {"losses": losses, "seconds": seconds})


class Keeper:
    """:class:`WarmupCheckpoint` bound to the module a supervised loop trains: restores the loop's optimizer,
    scheduler and sampler, and saves them with the weights when a save is due."""

    def __init__(self, ckpt: WarmupCheckpoint, module: torch.nn.Module, sharded: bool):
        self.ckpt, self.module, self.sharded = ckpt, module, sharded
        self.seconds = 0.0  # the phase's seconds before this process (a resumed phase continues the count)
        self._t0 = time.perf_counter()

    def restore(self, opt: torch.optim.Optimizer, sched: Any) -> dict[str, Any] | None:
        """The loop's state at the saved step (weights are loaded before the loop, by the caller), or None."""
        st = self.ckpt.state
        if st is None or st["step"] == 0:
            return None
        folder = self.ckpt.folder
        if self.sharded:
            from rlvr.distributed.fsdp import load_optimizer

            load_optimizer(self.module, opt, folder / "optimizer_dcp")
        else:
            opt.load_state_dict(unflatten_optimizer(load_file(str(folder / "optimizer.safetensors")),
                                                    st["optimizer"]))
        sched.load_state_dict(st["scheduler"])
        torch.set_rng_state(load_file(str(folder / "rng.safetensors"))["torch_cpu"])
        self.seconds = float(st.get("seconds", 0.0))
        return {"losses": list(st["losses"]), "order": list(st["order"]), "pos": int(st["pos"]),
                "rng": _decode_rng(st["rng"])}

    def after_step(self, step: int, steps: int, opt: torch.optim.Optimizer, sched: Any,
                   loop: Callable[[], dict[str, Any]], stopping: bool) -> None:
        """Save after ``step`` completed steps when a save is due (or the loop is stopping)."""
        if step >= steps or not self.ckpt.due(step, stopping):
            return  # the finished phase is saved by WarmupCheckpoint.finish
        state = loop()
        extra = {"losses": state["losses"], "order": state["order"], "pos": state["pos"],
                 "rng": _encode_rng(state["rng"]), "scheduler": sched.state_dict(),
                 "seconds": self.seconds + time.perf_counter() - self._t0}
        if self.sharded:
            from rlvr.distributed.fsdp import full_state_dict, save_optimizer

            weights = full_state_dict(self.module)  # a collective: every rank takes part

            def optimizer(tmp: Path) -> dict[str, Any]:
                save_optimizer(self.module, opt, tmp / "optimizer_dcp")
                return {"format": "dcp"}
        else:
            from safetensors.torch import save_model  # (tied weights written once)

            module = self.module
            weights = lambda path: save_model(module, str(path))  # noqa: E731

            def optimizer(tmp: Path) -> dict[str, Any]:
                if not self.ckpt.world.main:  # (replicas: rank 0's state is every rank's)
                    return {}
                tensors, meta = flatten_optimizer(opt)
                save_file(tensors, str(tmp / "optimizer.safetensors"))
                return meta
        self.ckpt.write(step, steps, weights, optimizer, extra)

    def elapsed(self) -> float:
        """The phase's seconds, earlier processes' included."""
        return self.seconds + time.perf_counter() - self._t0

