"""Muon and Pion (arXiv:2605.19282; docs/methods.md, `muon`, `pion`): spectral oracles of the Newton-Schulz maps,
the optimizer step against naive implementations, parameter routing, checkpoint round trips and real recipe
steps."""

import json
import math
import shutil

import pytest
import torch
from safetensors.torch import load_file

from rlvr.config.run import load_config
from rlvr.models.tiny import TinyModelConfig, build_tiny_model, char_tokenizer
from rlvr.optim import OPTIMIZERS
from rlvr.optim.spectral import SpectralAdamW
from rlvr.optim.newton_schulz import (head_blocks, merge_head_blocks, muon_schedule, pion_schedule,
                                      polynomial_iteration, singular_value_map)
from rlvr.run.checkpoint import load_checkpoint, save_checkpoint
from rlvr.run.train import resume, train
from tests.methods.helpers import run_recipe_steps, tiny_overrides

S0 = torch.tensor([3.0, 1.0], dtype=torch.float64) / math.sqrt(10.0)  # diag(3, 1), Frobenius-normalised
F64 = torch.float64


def orthogonal(n: int, seed: int) -> torch.Tensor:
    q, _ = torch.linalg.qr(torch.randn(n, n, dtype=F64, generator=torch.Generator().manual_seed(seed)))
    return q


# --- the scalar singular-value maps (oracle: diag(3, 1)) ---------------------------------------------------

def test_singular_value_oracles():
    assert S0.tolist() == pytest.approx([0.94868, 0.31623], abs=1e-5)
    assert singular_value_map(S0, pion_schedule(1, 0)).tolist() == pytest.approx([0.98189, 0.07431], abs=1e-5)
    five = singular_value_map(S0, pion_schedule(5, 0))
    assert five[0] == pytest.approx(1.0, abs=1e-12) and 0 < five[1] < 1e-70  # ~3e-76
    one_promote = singular_value_map(S0, pion_schedule(5, 1))
    assert one_promote[0] == pytest.approx(1.0, abs=1e-12) and one_promote[1] == pytest.approx(3.06e-8, rel=2e-3)
    assert singular_value_map(S0, muon_schedule(5)).tolist() == pytest.approx([0.75303, 1.13371], abs=1e-5)


def test_suppression_fixed_points_and_high_pass():
    supp = pion_schedule(1, 0)
    star = math.sqrt(2.0 / 3.0)
    fixed = torch.tensor([0.0, 1.0, star], dtype=F64)
    assert singular_value_map(fixed, supp).tolist() == pytest.approx(fixed.tolist(), abs=1e-15)
    # sqrt(2/3) repels: slope 7.5 s^2 - 7.5 s^4 there is 5/3 > 1; 0 and 1 attract (slope 0)
    assert 7.5 * star**2 - 7.5 * star**4 == pytest.approx(5.0 / 3.0)
    s = torch.tensor([star - 1e-3, star + 1e-3, 0.3, 0.95], dtype=F64)
    out = singular_value_map(s, pion_schedule(20, 0))
    assert out.tolist() == pytest.approx([0.0, 1.0, 0.0, 1.0], abs=1e-9)


def test_muon_values_oscillate_in_band_and_promotion_lifts_small_values():
    s = torch.linspace(0.05, 1.0, 200, dtype=F64)
    out = singular_value_map(s, muon_schedule(5))
    assert out.min() > 0.68 and out.max() < 1.2  # not convergent: the band is the point of Muon's coefficients
    assert (out - 1).abs().max() > 0.1
    promoted = singular_value_map(torch.tensor([0.01], dtype=F64), pion_schedule(1, 1))
    assert promoted.item() == pytest.approx(1.875 * 0.01, rel=1e-3)


# --- the matrix iteration ------------------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(2, 2), (3, 5), (5, 3)])
def test_pion_matrix_keeps_singular_vectors_and_filters_values(shape):
    m, n = shape
    u, v = orthogonal(m, 1)[:, :2], orthogonal(n, 2)[:, :2]
    g = u @ torch.diag(torch.tensor([3.0, 1.0], dtype=F64)) @ v.T
    x = polynomial_iteration(g, pion_schedule(5, 0), dtype=F64)
    assert torch.allclose(x, u @ torch.diag(torch.tensor([1.0, 0.0], dtype=F64)) @ v.T, atol=1e-10)
    y = polynomial_iteration(g, muon_schedule(5), dtype=F64)
    want = u @ torch.diag(singular_value_map(S0, muon_schedule(5))) @ v.T
    assert torch.allclose(y, want, atol=1e-10)


def test_iteration_equals_naive_svd_map_on_random_matrices():
    g = torch.randn(6, 9, dtype=F64, generator=torch.Generator().manual_seed(0))
    for schedule in (muon_schedule(5), pion_schedule(5, 1), pion_schedule(3, 0)):
        u, s, vh = torch.linalg.svd(g / (g.norm() + 1e-7), full_matrices=False)
        naive = u @ torch.diag(singular_value_map(s, schedule)) @ vh
        assert torch.allclose(polynomial_iteration(g, schedule, dtype=F64), naive, atol=1e-10)
    # batched input: each matrix is normalised on its own
    batch = torch.randn(3, 4, 6, dtype=F64, generator=torch.Generator().manual_seed(1))
    out = polynomial_iteration(batch, muon_schedule(5), dtype=F64)
    for i in range(3):
        assert torch.allclose(out[i], polynomial_iteration(batch[i], muon_schedule(5), dtype=F64), atol=1e-12)
    # scale invariance (Frobenius normalisation)
    assert torch.allclose(polynomial_iteration(7.0 * g, muon_schedule(5), dtype=F64),
                          polynomial_iteration(g, muon_schedule(5), dtype=F64), atol=1e-9)


@pytest.mark.parametrize("split_dim", [0, 1])
def test_head_blocks_round_trip(split_dim):
    g = torch.arange(8 * 12, dtype=F64).reshape(8, 12)
    blocks = head_blocks(g, 4, split_dim)
    assert blocks.shape == ((4, 2, 12) if split_dim == 0 else (4, 8, 3))
    assert torch.equal(blocks[1], g[2:4] if split_dim == 0 else g[:, 3:6])
    assert torch.equal(merge_head_blocks(blocks, split_dim), g)
    assert head_blocks(g, 5, split_dim) is None


# --- the optimizer step -----------------------------------------------------------------------------------------

def tiny_model(seed: int = 0):
    return build_tiny_model(TinyModelConfig(hidden_size=32, intermediate_size=64, num_layers=1), char_tokenizer(),
                            seed=seed)


def make_opt(model, name: str, *extra: str) -> torch.optim.Optimizer:
    cfg = load_config(overrides=[f"optim.optimizer.name={name}", "optim.lr=0.01", "optim.weight_decay=0.1",
                                 "optim.optimizer.ns_dtype=float64", *extra])
    return OPTIMIZERS.get(name).fn(model, cfg.optim, cfg.optim.optimizer.params)


def set_random_grads(model, seed: int):
    gen = torch.Generator().manual_seed(seed)
    for p in model.parameters():
        p.grad = torch.randn(p.shape, generator=gen)


def test_parameter_routing_excludes_embeddings_and_vectors():
    model = tiny_model()
    names = {id(p): n for n, p in model.named_parameters()}
    groups = make_opt(model, "pion").param_groups
    matrix = {names[id(p)] for g in groups if g["matrix"] for p in g["params"]}
    other = {names[id(p)] for g in groups if not g["matrix"] for p in g["params"]}
    assert "model.embed_tokens.weight" in other  # tied with the LM head
    assert all(model.get_parameter(n).ndim == 2 for n in matrix) and len(matrix) == 7  # q k v o gate up down
    assert all(model.get_parameter(n).ndim == 1 for n in other - {"model.embed_tokens.weight"})
    assert matrix | other == set(names.values()) and not matrix & other
    groups = make_opt(model, "muon", "optim.optimizer.per_head=true").param_groups
    per_head = {names[id(p)]: (g["heads"], g["split_dim"]) for g in groups if g["matrix"] for p in g["params"]}
    attn = "model.layers.0.self_attn."
    assert [per_head[attn + f"{k}_proj.weight"] for k in "qkvo"] == [(4, 0), (2, 0), (2, 0), (4, 1)]
    assert per_head["model.layers.0.mlp.up_proj.weight"] == (None, 0)


@pytest.mark.parametrize("name,schedule,nesterov", [("muon", muon_schedule(5), False),
                                                     ("pion", pion_schedule(5, 0), True),
                                                     ("pion", pion_schedule(5, 1), False)])
def test_matrix_step_equals_naive_and_adamw_part_equals_torch(name, schedule, nesterov):
    model, ref = tiny_model(), tiny_model()
    promo = ["optim.optimizer.promotion_steps=1"] if schedule == pion_schedule(5, 1) else []
    opt = make_opt(model, name, f"optim.optimizer.nesterov={str(nesterov).lower()}", *promo)
    other = [p for n, p in ref.named_parameters() if p.ndim < 2 or "embed" in n]
    torch_adamw = torch.optim.AdamW(other, lr=0.01, weight_decay=0.1, foreach=False)
    bufs = {}
    for step in range(3):
        set_random_grads(model, step)
        set_random_grads(ref, step)
        opt.step()
        torch_adamw.step()
        for (n, p), (_, q) in zip(model.named_parameters(), ref.named_parameters()):
            if q.ndim < 2 or "embed" in n:
                continue
            # naive Muon/Pion: momentum, optional Nesterov, SVD map of the normalised update, scaled step
            buf = bufs.setdefault(n, torch.zeros_like(q))
            buf.mul_(0.95).add_(q.grad, alpha=0.05)
            u = 0.05 * q.grad + 0.95 * buf if nesterov else buf
            uu, s, vh = torch.linalg.svd(u.double() / (u.double().norm() + 1e-7), full_matrices=False)
            x = uu @ torch.diag(singular_value_map(s, schedule)) @ vh
            with torch.no_grad():
                q.mul_(1 - 0.01 * 0.1).add_(x.float(), alpha=-0.01 * 5.0 * math.sqrt(max(q.shape)))
        for (n, p), (_, q) in zip(model.named_parameters(), ref.named_parameters()):
            assert torch.allclose(p, q, atol=1e-5, rtol=1e-5), (step, n)


def test_per_head_step_filters_each_head_separately():
    model = tiny_model()
    opt = make_opt(model, "pion", "optim.optimizer.per_head=true", "optim.optimizer.promotion_steps=1")
    assert isinstance(opt, SpectralAdamW)
    u = torch.randn(32, 32, dtype=F64, generator=torch.Generator().manual_seed(3))
    for heads, split in ((4, 0), (4, 1)):
        got = opt.direction(u, heads, split)
        blocks = [u[h * 8:(h + 1) * 8] if split == 0 else u[:, h * 8:(h + 1) * 8] for h in range(4)]
        want = [polynomial_iteration(b, pion_schedule(5, 1), dtype=F64) * math.sqrt(32) for b in blocks]
        assert torch.allclose(got, torch.cat(want, dim=split), atol=1e-10)
    assert torch.allclose(opt.direction(u, 5, 0), polynomial_iteration(u, pion_schedule(5, 1), dtype=F64)
                          * math.sqrt(32), atol=1e-10)  # 5 heads do not divide 32 rows: whole matrix


def test_promotion_steps_validated():
    with pytest.raises(Exception, match="promotion_steps"):
        load_config(overrides=["optim.optimizer.name=pion", "optim.optimizer.promotion_steps=6"])


def test_checkpoint_round_trip_then_identical_steps(tmp_path):
    """Optimizer state (momentum, AdamW moments, integer steps) survives rlvr's safetensors checkpoint."""
    tok = char_tokenizer()
    models, opts = [], []
    for _ in range(2):
        m = tiny_model()
        opt = make_opt(m, "pion", "optim.optimizer.ns_dtype=bfloat16")
        models.append(m)
        opts.append(opt)
    m0, o0 = models[0], opts[0]
    sched0 = torch.optim.lr_scheduler.LambdaLR(o0, lambda i: 1.0)
    for step in range(2):
        set_random_grads(m0, step)
        o0.step()
    ckpt = save_checkpoint(tmp_path, 2, m0, tok, o0, sched0, {})
    m1, o1 = models[1], opts[1]
    m1.load_state_dict(m0.state_dict())
    load_checkpoint(ckpt, o1, torch.optim.lr_scheduler.LambdaLR(o1, lambda i: 1.0))
    flat = load_file(str(ckpt / "optimizer.safetensors"))
    assert any(k.endswith(".momentum_buffer") for k in flat) and any(k.endswith(".exp_avg_sq") for k in flat)
    assert json.loads((ckpt / "state.json").read_text())["optimizer"]["scalars"]["0.step"] == 2
    for p0, p1 in zip(m0.parameters(), m1.parameters()):
        a, b = o0.state[p0], o1.state[p1]
        assert a and a.keys() == b.keys() and all(torch.equal(a[k], b[k]) if torch.is_tensor(a[k]) else a[k] == b[k]
                                            for k in a)
    for step in range(2, 4):
        for m in (m0, m1):
            set_random_grads(m, step)
        o0.step()
        o1.step()
    assert all(torch.equal(p, q) for p, q in zip(m0.parameters(), m1.parameters()))


# --- real training --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("recipe", ["muon", "pion"])
def test_recipe_trains_two_real_steps(recipe, tmp_path):
    out = run_recipe_steps(recipe, tmp_path)
    assert out["cfg"].optim.optimizer.name == recipe and out["cfg"].algorithm.kl.coef == 0.001
    assert isinstance(out["c"].optimizer, SpectralAdamW)
    for m in out["metrics"]:
        assert all(math.isfinite(v) for v in m.values())
    changed = [k for k in out["before"] if not torch.equal(out["before"][k], out["after"][k])]
    assert "model.layers.0.mlp.up_proj.weight" in changed and "model.embed_tokens.weight" in changed
    state = out["c"].optimizer.state
    assert any("momentum_buffer" in s for s in state.values()) and any("exp_avg" in s for s in state.values())


@pytest.mark.slow
def test_pion_resume_matches_uninterrupted_run(tmp_path):
    over = tiny_overrides(tmp_path) + ["train.steps=4", "train.checkpoint_every=2", "train.keep_checkpoints=5"]
    train(load_config(recipe="pion", overrides=over))
    full = tmp_path / "run"
    part = tmp_path / "part"
    shutil.copytree(full, part)
    shutil.rmtree(part / "checkpoints" / "step_000004")
    resume(part / "checkpoints" / "step_000002")
    for name in ("model/model.safetensors", "optimizer.safetensors"):
        a = load_file(str(full / "checkpoints" / "step_000004" / name))
        b = load_file(str(part / "checkpoints" / "step_000004" / name))
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a), name
    w2 = load_file(str(full / "checkpoints" / "step_000002" / "model" / "model.safetensors"))
    w4 = load_file(str(full / "checkpoints" / "step_000004" / "model" / "model.safetensors"))
    assert any(not torch.equal(w2[k], w4[k]) for k in w2)


def test_adamw_uses_the_fused_kernel_with_the_same_updates_as_the_loop():
    """optim.optimizer=adamw picks torch's fused kernel on CPU; 20 steps match the per-parameter loop (and a
    hand-written AdamW) to float rounding, and fused=false gives the loop."""
    tok = char_tokenizer()
    cfg = load_config(overrides=["optim.lr=1e-2", "optim.weight_decay=0.1"])
    runs = {}
    for fused in (None, False):
        model = build_tiny_model(TinyModelConfig(hidden_size=32, intermediate_size=64, num_layers=1), tok, seed=0)
        entry = OPTIMIZERS.get("adamw")
        opt = entry.fn(model, cfg.optim, entry.params(fused=fused))
        assert bool(opt.param_groups[0]["fused"]) is (fused is None)
        g = torch.Generator().manual_seed(1)
        for _ in range(20):
            for p in model.parameters():
                p.grad = torch.randn(p.shape, generator=g)
            opt.step()
        runs[fused] = [p.detach().clone() for p in model.parameters()]
    for a, b in zip(runs[None], runs[False]):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-6)
    # the same 20 steps by hand: m, v with bias correction, decoupled weight decay
    model = build_tiny_model(TinyModelConfig(hidden_size=32, intermediate_size=64, num_layers=1), tok, seed=0)
    (b1, b2), lr, wd, eps = cfg.optim.betas, 1e-2, 0.1, 1e-8
    params = [p.detach().clone() for p in model.parameters()]
    m = [torch.zeros_like(p) for p in params]
    v = [torch.zeros_like(p) for p in params]
    g = torch.Generator().manual_seed(1)
    for k in range(1, 21):
        for i, p in enumerate(params):
            grad = torch.randn(p.shape, generator=g)
            p.mul_(1 - lr * wd)
            m[i] = b1 * m[i] + (1 - b1) * grad
            v[i] = b2 * v[i] + (1 - b2) * grad * grad
            p.sub_(lr * (m[i] / (1 - b1 ** k)) / ((v[i] / (1 - b2 ** k)).sqrt() + eps))
    for a, b in zip(runs[None], params):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-5)
