"""Every collective rlvr issues goes through one place (:class:`rlvr.distributed.world.World`), which puts its
tensors where the group's backend takes them: NCCL serves CUDA tensors only, so a CPU tensor all-reduced under
NCCL fails ("No backend type associated with device type cpu"), while gloo accepts both. gloo accepting a
CPU tensor is no evidence that NCCL would, so these tests check the placement itself: the device rule, a real
process group whose only backend is bound to CUDA, and the source (no collective outside World)."""

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from rlvr.distributed.world import collective_device

ROOT = Path(__file__).resolve().parents[1]

COLLECTIVES = {"all_reduce", "broadcast", "all_gather", "all_gather_into_tensor", "all_gather_single", "reduce_scatter",
               "reduce_scatter_tensor", "reduce", "gather", "scatter", "all_to_all", "all_to_all_single", "send",
               "recv", "isend", "irecv", "barrier", "monitored_barrier", "all_gather_object",
               "broadcast_object_list", "gather_object", "scatter_object_list", "batch_isend_irecv"}


@pytest.mark.parametrize("types, device, rank, want", [
    (["cuda"], "cpu", 3, "cuda:3"),  # NCCL: a CPU tensor goes to the rank's GPU
    (["cuda"], "cuda:1", 1, "cuda:1"),
    (["cpu", "cuda"], "cpu", 0, "cpu"),  # gloo: as it is
    (["cpu", "cuda"], "cuda:0", 0, "cuda:0"),
    (["cpu"], "cuda:2", 2, "cpu"),  # a CPU-only backend: a GPU tensor goes to the CPU
])
def test_the_backend_device_rule(types, device, rank, want):
    assert collective_device(types, torch.device(device), rank) == torch.device(want)


_BOUND_TO_CUDA = r"""
import os, torch, torch.distributed as dist
from rlvr.distributed.world import World, served_types
dist.init_process_group("cuda:gloo", rank=0, world_size=1)  # the group's only backend serves CUDA tensors
assert served_types() == ["cuda"], served_types()
try:
    dist.all_reduce(torch.ones(2))  # a CPU tensor handed to the backend as it is
except RuntimeError as e:
    print("direct:", e)
world = World(0, 2, group=dist.group.WORLD)  # (as a rank of a larger group would see it)
for name, call in [("sum", lambda: world.sum([1.0, 2.0])), ("all_reduce_", lambda: world.all_reduce_(torch.ones(3))),
                   ("sync_params", lambda: world.sync_params(torch.nn.Linear(2, 2))),
                   ("all_gather_flat", lambda: world.all_gather_flat(torch.ones(3)))]:
    try:
        print(name, "ok", call())
    except Exception as e:
        print(name, "raised:", type(e).__name__, e)
"""


def test_a_group_bound_to_cuda_gets_its_tensors_on_cuda():
    """With a process group whose only backend serves CUDA (NCCL's situation), a CPU tensor handed over as it
    is fails for want of a CPU backend; through World it is moved to the GPU first (on a machine without one,
    the move itself is what fails)."""
    env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29611", "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", _BOUND_TO_CUDA], capture_output=True, text=True, env=env,
                         timeout=120, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.splitlines()
    assert any(line.startswith("direct:") and "No backend type associated with device type cpu" in line
               for line in lines), out.stdout  # the failure a CPU tensor meets without the move
    for name in ("sum", "all_reduce_", "sync_params", "all_gather_flat"):
        line = next(x for x in lines if x.startswith(name + " "))
        if torch.cuda.is_available():
            assert " ok " in line, line
        else:
            assert "raised" in line and "No backend type associated" not in line and "CUDA" in line, line


def bypasses(source: str, path: str) -> list[str]:
    """``path:line`` of every reference to a torch.distributed collective outside class ``World`` of
    rlvr/distributed/world.py (``dist.all_reduce``, ``torch.distributed.barrier``, ``from torch.distributed
    import broadcast``...)."""
    tree = ast.parse(source)
    inside: set[int] = set()
    if path.endswith("rlvr/distributed/world.py"):
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and node.name == "World":
                inside |= {id(n) for n in ast.walk(node)}
    out = []
    for node in ast.walk(tree):
        hit = None
        if isinstance(node, ast.Attribute) and node.attr in COLLECTIVES:
            base = ast.unparse(node.value)
            if base in ("dist", "torch.distributed", "_dist", "td"):
                hit = f"{base}.{node.attr}"
        elif isinstance(node, ast.ImportFrom) and node.module == "torch.distributed":
            names = [a.name for a in node.names if a.name in COLLECTIVES]
            hit = f"from torch.distributed import {', '.join(names)}" if names else None
        if hit and id(node) not in inside:
            out.append(f"{path}:{node.lineno}: {hit}")
    return out


def test_no_collective_bypasses_world():
    found = []
    for f in sorted((ROOT / "rlvr").rglob("*.py")):
        rel = f.relative_to(ROOT).as_posix()
        found += bypasses(f.read_text(), rel)
    assert not found, "collectives outside World (route them through it):\n" + "\n".join(found)


def test_the_source_check_finds_a_bypass():
    bad = "import torch.distributed as dist\ndef f(t):\n    dist.all_reduce(t)\n"
    assert bypasses(bad, "rlvr/train/x.py") == ["rlvr/train/x.py:3: dist.all_reduce"]
    assert bypasses("from torch.distributed import broadcast\n", "rlvr/a.py") == \
        ["rlvr/a.py:1: from torch.distributed import broadcast"]
    inside = "import torch.distributed as dist\nclass World:\n    def g(self):\n        dist.barrier()\n"
    assert bypasses(inside, "rlvr/distributed/world.py") == []
    assert bypasses(inside, "rlvr/other.py") == ["rlvr/other.py:4: dist.barrier"]
