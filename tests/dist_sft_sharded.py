"""Under torchrun (2 ranks, gloo): the SFT warm-up under FSDP (rlvr.sft.sharded), each rank training on its share
of every step's rows, ends where the one-process warm-up from the same weights ends, within float rounding;
the step losses agree; the policy it returns is a plain module with the trained weights; a warm-up stopped and resumed from its checkpoint
ends bit for bit where the uninterrupted sharded one ends. And one step's gradients
(before the optimizer, which would hide a constant scale: Adam and clipping to norm 1 both are scale-free) equal
the one-process step's.

    python -m torch.distributed.run --standalone --nproc-per-node 2 tests/dist_sft_sharded.py STEPS LR

Prints ``ok RANK MAXDIFF`` for every rank (rank 0 prints) (MAXDIFF: the largest weight difference, the key bias left out:
its gradient is rounding noise, tests/test_distributed.py).
"""

from __future__ import annotations

import copy
import sys

import torch

from rlvr.config.run import load_config
from rlvr.distributed.process_group import init_world
from rlvr.models import build_tiny_model, char_tokenizer
from rlvr.run.setup import build_task
from rlvr.sft.sharded import sft_sharded
from rlvr.sft.supervised import sft


def grads_equal(world, cfg, tok, examples) -> None:
    from rlvr.core.batch import build_batch
    from rlvr.models.logprobs import CompletionLogprobs, completion_logprobs
    from rlvr.sft.sharded import sharded_step_loss
    from rlvr.sft.supervised import sft_rows

    rows = sft_rows(tok, examples, False)
    picked = [4, 9, 2, 31, 17]
    one = build_tiny_model(cfg.model.tiny, tok, seed=1)
    sharded = copy.deepcopy(one)
    batch = build_batch([rows[i] for i in picked], [0.0] * 5, tok.pad_token_id)
    logp, _ = completion_logprobs(one, batch)
    (-(logp * batch.completion_mask).sum() / batch.completion_mask.sum()).backward()
    wrapper = world.wrap(CompletionLogprobs(sharded), "cpu")
    sharded_step_loss(wrapper, rows, tok.pad_token_id, world, 2, torch.device("cpu"))(picked)
    for (name, a), b in zip(sharded.named_parameters(), one.parameters()):
        g = a.grad.full_tensor()
        assert torch.allclose(g, b.grad, rtol=1e-4, atol=1e-7), (name, float((g - b.grad).abs().max()))


def resume_equal(world, cfg, tok, examples, kw, want_losses, want_model) -> None:
    """A sharded warm-up stopped after 2 steps (its checkpoint: weights gathered onto rank 0, the optimizer's
    shards through DCP) and resumed from a fresh model equals the uninterrupted sharded warm-up bit for bit."""
    import tempfile
    from pathlib import Path

    from rlvr.sft.checkpoint import WarmupCheckpoint

    folder = Path(world.broadcast(tempfile.mkdtemp() if world.main else None)) / "warmup"
    seen: list[int] = []
    first = build_tiny_model(cfg.model.tiny, tok, seed=0)
    sft_sharded(first, tok, examples, **kw, world=world, device="cpu", on_step=lambda i, loss: seen.append(i),
                stop=lambda: world.any(len(seen) >= 2) is not None, checkpoint=WarmupCheckpoint(folder, world))
    ck = WarmupCheckpoint(folder, world)
    assert ck.state["step"] == 2 and (folder / "optimizer_dcp").is_dir(), ck.state
    second = build_tiny_model(cfg.model.tiny, tok, seed=0)
    ck.load_weights(second)
    got = sft_sharded(second, tok, examples, **kw, world=world, device="cpu", checkpoint=ck)
    assert got == want_losses, (got, want_losses)
    for (name, a), b in zip(second.named_parameters(), want_model.parameters()):
        assert torch.equal(a, b), (name, float((a - b).abs().max()))


def main() -> None:
    steps, lr = int(sys.argv[1]), float(sys.argv[2])
    world = init_world("gloo", strategy="fsdp")
    torch.set_num_threads(1)
    cfg = load_config(overrides=["model.tiny.hidden_size=32", "model.tiny.intermediate_size=64",
                                 "model.tiny.num_layers=2", "train.threads=1"])
    tok = char_tokenizer()
    model = build_tiny_model(cfg.model.tiny, tok, seed=0)
    examples = build_task(cfg).examples("train")[:40]
    reference = copy.deepcopy(model)
    # 5 rows a step, micro-batches of 2: rank 0 runs 3 rows in 2 micro-batches, rank 1 two rows and one of weight 0
    kw = dict(steps=steps, batch_size=5, lr=lr, warmup_steps=1, seed=3, micro_batch_size=2)
    want = sft(reference, tok, examples, **kw)
    got = sft_sharded(model, tok, examples, **kw, world=world, device="cpu")
    assert len(got) == steps and all(abs(a - b) <= 1e-5 * max(1.0, abs(b)) for a, b in zip(got, want)), (got, want)
    assert not any(hasattr(p, "full_tensor") for p in model.parameters())  # plain again
    diff = max(float((a - b).abs().max()) for (name, a), b in zip(model.named_parameters(), reference.parameters())
               if not name.endswith("k_proj.bias"))
    moved = max(float((a - b).abs().max()) for a, b in zip(reference.parameters(),
                                                          build_tiny_model(cfg.model.tiny, tok, seed=0).parameters()))
    assert moved > 10 * lr * 0.1, moved  # the phase trained
    if len(sys.argv) > 3 and world.rank == 0:
        for (name, a), b in zip(model.named_parameters(), reference.parameters()):
            print(name, f"{float((a - b).abs().max()):.3g}", f"{float(b.abs().max()):.3g}")
    grads_equal(world, cfg, tok, examples)
    resume_equal(world, cfg, tok, examples, kw, got, model)
    for rank, d in world.gather((world.rank, diff)):  # printed by rank 0 alone: lines do not interleave
        if world.main:
            print("ok", rank, f"{d:.3g}", flush=True)
    world.finish()


if __name__ == "__main__":
    main()
