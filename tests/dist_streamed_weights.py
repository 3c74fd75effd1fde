"""Under torchrun (2 ranks, gloo): FSDP2 shards streamed whole in buckets equal each tensor's ``full_tensor()``
bit for bit (cast to the asked dtype), for shapes FSDP splits unevenly (an odd first dimension, fewer rows than
ranks, a vector), with one all-gather per bucket.

    python -m torch.distributed.run --standalone --nproc-per-node 2 tests/dist_streamed_weights.py

Prints ``ok RANK GATHERS`` for every rank (rank 0 prints).
"""

from __future__ import annotations

import torch
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard

from rlvr.distributed.fsdp import streamed_weights
from rlvr.distributed.process_group import init_world
from rlvr.distributed.world import World, mesh_world

SHAPES = {"odd": (7, 3), "one_row": (1, 5), "vector": (9,), "cube": (4, 2, 3), "big": (40, 8)}


class Bag(torch.nn.Module):
    def __init__(self):
        super().__init__()
        gen = torch.Generator().manual_seed(0)
        for name, shape in SHAPES.items():
            self.register_parameter(name, torch.nn.Parameter(torch.randn(shape, generator=gen)))


def main() -> None:
    world = init_world("gloo", strategy="fsdp")
    torch.set_num_threads(1)
    bag = Bag()
    mesh = init_device_mesh("cpu", (world.size,))
    fully_shard(bag, mesh=mesh)
    calls = []
    original = World.all_gather_flat

    def counted(self, t):
        calls.append(t.numel())
        return original(self, t)

    World.all_gather_flat = counted
    params = list(bag.named_parameters())
    for dtype, bucket, want in [(torch.float32, 10**9, 1), (torch.bfloat16, 10**9, 1),
                                (torch.float32, 1280, 2), (torch.float32, 200, 3), (torch.float32, 1, len(SHAPES))]:
        calls.clear()
        got = dict(streamed_weights(params, mesh_world(mesh), dtype, bucket))
        assert list(got) == list(SHAPES), list(got)
        for name, p in params:
            whole = p.full_tensor().to(dtype)
            assert got[name].dtype == dtype and torch.equal(got[name], whole), (name, dtype, bucket)
        # buckets by hand: every tensor padded to ceil(d0 / 2) rows per rank, gathered whole in float32:
        # odd 8x3 = 96 B, one_row 2x5 (rank 1's shard empty) = 40 B, vector 10 = 40 B, cube 4x2x3 = 96 B,
        # big 40x8 = 1280 B. 1280 B buckets: [odd..cube] (272 B), then big; 200 B buckets: [odd, one_row, vector]
        # (176 B), [cube], [big] (a tensor larger than a bucket is one of its own); 1 B: one each
        assert len(calls) == want, (dtype, bucket, calls)
        if want == 1:
            assert calls == [(24 + 10 + 10 + 24 + 320) // 2], calls
    for rank, n in world.gather((world.rank, len(calls))):  # printed by rank 0 alone: lines do not interleave
        if world.main:
            print("ok", rank, n, flush=True)
    world.finish()


if __name__ == "__main__":
    main()
