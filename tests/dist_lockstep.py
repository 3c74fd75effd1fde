"""Under torchrun (2 ranks, gloo): no-grad passes on FSDP shards (rlvr.distributed.fsdp.lockstep_passes). Rank 0
runs three forwards of different shapes, rank 1 one (and then none): every log-prob equals the unsharded
model's; while the passes run, every decoder layer stays sharded between its forwards (a rank never holds the
whole model); the shards are untouched afterwards and the update's forward still works. Then the reference
(a frozen copy sharded like the policy, :meth:`World.shard_frozen`): a rank keeps about half of it, its passes
run in a block of their own with the counts the other way round (rank 1 three, rank 0 one), every log-prob
equals the unsharded model's, and its layers are shards again after the block.

    python -m torch.distributed.run --standalone --nproc-per-node 2 tests/dist_lockstep.py

Prints ``ok RANK FORWARDS MAXDIFF REF_FORWARDS REF_MAXDIFF REF_HELD_FRACTION`` for every rank (rank 0 prints).
"""

from __future__ import annotations

import copy

import torch

from rlvr.config.run import load_config
from rlvr.core.batch import build_batch
from rlvr.core.types import Completion
from rlvr.distributed.fsdp import _units
from rlvr.distributed.process_group import init_world
from rlvr.models import build_tiny_model, char_tokenizer
from rlvr.models.logprobs import CompletionLogprobs, completion_logprobs


def batches(tok, rank: int):
    def row(p, c):
        return Completion("x", tok(p)["input_ids"], tok(c)["input_ids"], None, "stop", c)

    mine = {0: [[row("12+7=", "19"), row("3+4=", "7")], [row("1+1=", "2")], [row("40+41=", "81"), row("2+9=", "11"),
                                                                              row("5+5=", "10")]],
            1: [[row("8+8=", "16"), row("9+1=", "10")]]}[rank]
    return [build_batch(rows, [0.0] * len(rows), tok.pad_token_id) for rows in mine]


def main() -> None:
    world = init_world("gloo", strategy="fsdp")
    torch.set_num_threads(1)
    cfg = load_config(overrides=["model.tiny.hidden_size=32", "model.tiny.intermediate_size=64",
                                 "model.tiny.num_layers=3"])
    tok = char_tokenizer()
    model = build_tiny_model(cfg.model.tiny, tok, seed=0)
    plain = copy.deepcopy(model)
    wrapper = world.wrap(CompletionLogprobs(model), "cpu")
    before = {k: v.to_local().clone() for k, v in wrapper.state_dict().items()}
    layers = [m for m in model.modules() if type(m).__name__.startswith("FSDP")]
    assert len(layers) == 3 and not _units(model)  # (sharded, a layer's class is FSDP<its class>)
    seen_whole = []

    def watch(module, args, out):  # after each layer's forward: every layer's parameters are shards again
        seen_whole.append(any(p.to_local().shape != p.shape for L in layers for p in L.parameters()))

    hooks = [L.register_forward_hook(watch) for L in layers]
    diffs, n = [], 0
    with torch.no_grad(), world.passes(wrapper):
        for b in batches(tok, world.rank):
            got, _ = completion_logprobs(model, b)
            want, _ = completion_logprobs(plain, b)
            diffs.append(float(((got - want) * b.completion_mask).abs().max()))
            n += 1
    for h in hooks:
        h.remove()
    assert seen_whole and all(seen_whole), seen_whole  # never the whole model: other layers stayed sharded
    after = {k: v.to_local() for k, v in wrapper.state_dict().items()}
    assert all(torch.equal(before[k], after[k]) for k in before)
    b = batches(tok, 0)[0]
    logp, _ = wrapper(b)  # the update's forward and backward still run
    (-(logp * b.completion_mask).sum()).backward()
    assert all(p.grad is not None for p in wrapper.parameters() if p.requires_grad)

    ref_root = world.shard_frozen(CompletionLogprobs(copy.deepcopy(plain).requires_grad_(False)), "cpu")
    held = sum(p.to_local().numel() for p in ref_root.parameters()) / sum(p.numel() for p in ref_root.parameters())
    ref_layers = [m for m in ref_root.model.modules() if type(m).__name__.startswith("FSDP")]
    assert len(ref_layers) == 3 and not any(p.requires_grad for p in ref_root.parameters())
    ref_diffs = []
    with torch.no_grad(), world.passes(ref_root):
        for b in batches(tok, 1 - world.rank):  # the other rank's batches: the counts the other way round
            got, _ = completion_logprobs(ref_root.model, b)
            want, _ = completion_logprobs(plain, b)
            ref_diffs.append(float(((got - want) * b.completion_mask).abs().max()))
    assert all(p.to_local().shape != p.shape for L in ref_layers for p in L.parameters())  # shards again
    for rank, k, d, rk, rd, h in world.gather((world.rank, n, max(diffs), len(ref_diffs), max(ref_diffs), held)):
        if world.main:
            print("ok", rank, k, f"{d:.3g}", rk, f"{rd:.3g}", f"{h:.3f}", flush=True)
    world.finish()


if __name__ == "__main__":
    main()
