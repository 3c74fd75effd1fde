"""Under torchrun (2 ranks, gloo): an interleaved SFT phase of an FSDP2-sharded policy leaves the shards
holding exactly what the same phase gives on one process from the same weights.

    python -m torch.distributed.run --standalone --nproc-per-node 2 tests/dist_fsdp_phase.py

The policy is first moved by an optimizer step through the FSDP module (so the phase starts from weights
FSDP updated, not from the initial ones). Then the phase runs through :func:`interleaved_sft` with a whole
copy; a one-process reference runs the phase on a copy of the gathered pre-phase weights; every rank
gathers its shards after the phase and compares: exactly equal. Prints ``ok RANK`` for every rank (rank 0 prints).
"""

from __future__ import annotations

import copy

import torch

from rlvr.config.run import load_config
from rlvr.core.batch import build_batch
from rlvr.core.types import Completion
from rlvr.models import build_tiny_model, char_tokenizer
from rlvr.models.logprobs import CompletionLogprobs
from rlvr.distributed.process_group import init_world
from rlvr.distributed.fsdp import gather_into
from rlvr.sft.interleave import interleaved_sft
from rlvr.run.setup import build_task


def main() -> None:
    world = init_world("gloo", strategy="fsdp")
    cfg = load_config(overrides=["model.tiny.hidden_size=32", "model.tiny.intermediate_size=64",
                                 "model.tiny.num_layers=2", "sft.interleave_every=2", "sft.interleave_steps=3",
                                 "sft.batch_size=4", "optim.lr=0.01", "train.threads=1"])
    torch.set_num_threads(1)
    tok = char_tokenizer()
    model = build_tiny_model(cfg.model.tiny, tok, seed=0)
    whole = copy.deepcopy(model)
    wrapper = world.wrap(CompletionLogprobs(model))
    opt = torch.optim.AdamW(model.parameters(), lr=0.01)
    gen = torch.Generator().manual_seed(world.rank)
    rows = [Completion(f"x{i}", torch.randint(3, 90, (5,), generator=gen).tolist(),
                       torch.randint(3, 90, (6,), generator=gen).tolist(), None, "length", "") for i in range(4)]
    logp, _ = wrapper(build_batch(rows, [0.0] * 4, tok.pad_token_id))
    (-logp.mean()).backward()  # any loss through the shards
    opt.step()
    task = build_task(cfg)

    before = copy.deepcopy(whole)
    gather_into(before, model)
    reference = copy.deepcopy(before)  # the phase on one process, from the same weights
    ref_metrics = interleaved_sft(cfg, reference, tok, task)(1)
    metrics = interleaved_sft(cfg, model, tok, task, world=world, whole=whole)(1)
    assert metrics == ref_metrics and metrics["sft/steps"] == 3.0, (metrics, ref_metrics)
    after = copy.deepcopy(whole)
    gather_into(after, model)
    for (name, a), r, b in zip(after.named_parameters(), reference.parameters(), before.parameters()):
        assert torch.equal(a, r), (world.rank, name, float((a - r).abs().max()))
    moved = max(float((r - b).abs().max()) for r, b in zip(reference.parameters(), before.parameters()))
    assert moved > 1e-3, moved
    assert interleaved_sft(cfg, model, tok, task, world=world, whole=whole)(0) == {}  # no phase at this step
    for rank in world.gather(world.rank):  # printed by rank 0 alone: two ranks' lines can interleave ("okok 1")
        if world.main:
            print("ok", rank, flush=True)


if __name__ == "__main__":
    main()
