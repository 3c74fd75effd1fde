"""The shared-prefix forward (rlvr.models.shared_prefix) against the standard one.

Every check compares the same model's log-probs and gradients with the layout on and off: across the
enabled families, ragged groups (sizes 1-5, prompt lengths 1-9, empty and long completions), sliding
windows that bite, activation checkpointing, LoRA, and a training run; and checks that ordinary forwards
(generation, padding) are sdpa's, that the setting never reaches config.json, and that batches the layout
cannot serve take the standard path.
"""

from __future__ import annotations

import json
import random

import pytest
import torch
import transformers

from rlvr.core.batch import build_batch
from rlvr.core.types import Completion
from rlvr.models import shared_prefix as sp
from rlvr.models.logprobs import completion_logprobs

V = 50
COMMON = dict(vocab_size=V, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, max_position_embeddings=128, pad_token_id=0, bos_token_id=1, eos_token_id=2)


def _configs() -> dict:
    return {
        "llama": lambda: transformers.LlamaConfig(**COMMON),
        "qwen2": lambda: transformers.Qwen2Config(**COMMON),
        "qwen2_window": lambda: transformers.Qwen2Config(**COMMON, use_sliding_window=True, sliding_window=4,
                                                          max_window_layers=0),
        "qwen3": lambda: transformers.Qwen3Config(**COMMON, head_dim=16),
        "mistral_window": lambda: transformers.MistralConfig(**COMMON, sliding_window=5),
        "qwen2_moe": lambda: transformers.Qwen2MoeConfig(**COMMON, num_experts=4, num_experts_per_tok=2,
                                                          moe_intermediate_size=32, shared_expert_intermediate_size=32),
        "qwen3_moe": lambda: transformers.Qwen3MoeConfig(**COMMON, num_experts=4, num_experts_per_tok=2,
                                                          moe_intermediate_size=32, head_dim=16),
        "olmo2": lambda: transformers.Olmo2Config(**COMMON),
        "gemma": lambda: transformers.GemmaConfig(**COMMON, head_dim=16),
        "phi3": lambda: transformers.Phi3Config(**COMMON),
    }


def _model(name: str, seed: int = 0):
    torch.manual_seed(seed)
    cfg = _configs()[name]()
    m = transformers.AutoModelForCausalLM.from_config(cfg, attn_implementation="sdpa").float()
    m.train()  # dropout is 0 in every config: train mode only checks that the layout works there
    return m


def _completions(rng: random.Random, groups: list[tuple[int, int]], max_len: int = 12) -> list[Completion]:
    """``groups``: (prompt length, completions); lengths drawn from 0..max_len, one long one per group."""
    out = []
    for gi, (plen, n) in enumerate(groups):
        prompt = [rng.randrange(3, V) for _ in range(plen)]
        for i in range(n):
            length = max_len if i == 0 else rng.randrange(0, max_len)
            out.append(Completion(f"e{gi}", prompt, [rng.randrange(3, V) for _ in range(length)], None,
                                  "length", "", group=gi))
    return out


def _batch(comps):
    return build_batch(comps, [0.0] * len(comps), pad_id=0)


def _logp_and_grads(model, batch):
    model.zero_grad(set_to_none=True)
    lp, _ = completion_logprobs(model, batch)
    weights = torch.linspace(0.5, 1.5, lp.numel()).view_as(lp)  # every token's gradient counts differently
    (lp * weights * batch.completion_mask).sum().backward()
    grads = {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None}
    return lp.detach(), grads


def _compare(model, batch, rtol=1e-4, atol=2e-5):
    ref_lp, ref_g = _logp_and_grads(model, batch)
    assert sp.enable(model) is None
    assert sp.pack(batch) is not None, "the batch was meant to take the packed layout"
    lp, grads = _logp_and_grads(model, batch)
    mask = batch.completion_mask.bool()
    torch.testing.assert_close(lp[mask], ref_lp[mask], rtol=rtol, atol=atol)
    assert ref_g.keys() == grads.keys()
    for name in ref_g:
        torch.testing.assert_close(grads[name], ref_g[name], rtol=rtol, atol=atol, msg=name)


@pytest.fixture
def always_pack(monkeypatch):
    monkeypatch.setattr(sp, "MIN_SAVING", -10.0)  # pack even batches where it saves nothing


@pytest.mark.parametrize("family", list(_configs()))
def test_families_equal_standard_forward(family, always_pack):
    rng = random.Random(hash(family) % 1000)
    comps = _completions(rng, [(5, 3), (9, 5), (1, 1), (7, 2), (3, 4)])
    _compare(_model(family), _batch(comps))


@pytest.mark.parametrize("family", ["qwen2_window", "mistral_window"])
def test_sliding_windows_bite(family):
    """The window is shorter than the sequences, so the equality above checks the windowed masks: the same
    weights without a window give other log-probs."""
    batch = _batch(_completions(random.Random(1), [(6, 2), (9, 3)]))
    m = _model(family)
    cfg = m.config.to_dict()
    cfg.update(sliding_window=None, use_sliding_window=False, layer_types=None)
    cfg.pop("max_window_layers", None)
    plain = transformers.AutoModelForCausalLM.from_config(type(m.config)(**cfg), attn_implementation="sdpa")
    plain.load_state_dict(m.state_dict())
    windowed, _ = completion_logprobs(m, batch)
    full, _ = completion_logprobs(plain, batch)
    assert (windowed - full).abs().max() > 1e-3


def test_random_layouts(always_pack):
    """Many random group structures, prompt lengths and completion lengths on one model."""
    m = _model("qwen2")
    for seed in range(12):
        rng = random.Random(seed)
        groups = [(rng.randrange(1, 10), rng.randrange(1, 6)) for _ in range(rng.randrange(1, 6))]
        if sum(n for _, n in groups) < 2:
            groups.append((3, 2))
        comps = _completions(rng, groups, max_len=rng.randrange(1, 16))
        rng.shuffle(comps)  # a group's rows need not be adjacent
        sp.enable(m)
        m.config._attn_implementation = "sdpa"  # _compare enables it again after the reference pass
        _compare(m, _batch(comps))


def test_layout_against_naive_packing():
    """The state ``gather`` names for completion token j is the token before it, at the position before it,
    in a packed row that starts with the row's own prompt."""
    comps = _completions(random.Random(3), [(4, 3), (6, 2), (4, 1)], max_len=5)
    packed = sp.pack(_batch(comps), min_saving=-10)
    width, p = packed.input_ids.shape[1], packed.layout.width
    flat_ids, flat_pos = packed.input_ids.reshape(-1), packed.position_ids.reshape(-1)
    for r, c in enumerate(comps):
        row = int(packed.gather[r, 0]) // width
        assert packed.input_ids[row, p - len(c.prompt_ids): p].tolist() == c.prompt_ids
        assert packed.layout.key_valid[row].sum() == len(c.prompt_ids)
        before = (c.prompt_ids[-1:] + c.completion_ids)[: len(c.completion_ids)]  # what predicts each token
        where = packed.gather[r, : len(c.completion_ids)]
        assert flat_ids[where].tolist() == before
        assert flat_pos[where].tolist() == list(range(len(c.prompt_ids) - 1, len(c.prompt_ids) + len(c.completion_ids) - 1))
        assert all(int(i) // width == row for i in where)
    assert packed.input_ids.shape[0] == 3 and packed.layout.n == 3


def test_rows_merge_by_prompt_tokens_not_by_group_index(always_pack):
    rng = random.Random(4)
    a = [rng.randrange(3, V) for _ in range(5)]
    b = a[:4] + [a[4] % (V - 3) + 3 if a[4] % (V - 3) + 3 != a[4] else 3]  # differs in the last token only
    comps = [Completion("x", a, [5, 6, 7], None, "length", "", group=0),
             Completion("x", b, [5, 6, 7], None, "length", "", group=0),  # same group, another prompt
             Completion("y", a, [8, 9], None, "length", "", group=1)]  # another group, the same prompt
    packed = sp.pack(_batch(comps), min_saving=-10)
    rows = (packed.gather[:, 0] // packed.input_ids.shape[1]).tolist()
    assert rows[0] == rows[2] != rows[1]
    _compare(_model("llama"), _batch(comps))


def test_standard_layout_when_packing_saves_little():
    rng = random.Random(5)
    short_prompts = _completions(rng, [(2, 2), (2, 2)], max_len=30)
    assert sp.pack(_batch(short_prompts)) is None
    distinct = _completions(rng, [(8, 1), (8, 1), (8, 1)])
    assert sp.pack(_batch(distinct)) is None
    shared = _completions(rng, [(16, 8), (16, 8)], max_len=16)
    assert sp.pack(_batch(shared)) is not None


def test_activation_checkpointing_recomputes_with_the_layout(always_pack):
    """The recomputed layers in the backward must see the layout too (it travels in the forward's keywords)."""
    from rlvr.train.update import checkpointing

    comps = _completions(random.Random(6), [(6, 4), (3, 3)])
    m = _model("qwen2")
    checkpointing(m, True)
    _compare(m, _batch(comps))


def test_lora_adapters(always_pack):
    pytest.importorskip("peft")
    from rlvr.models.config import LoRAConfig
    from rlvr.models.lora import apply_lora

    m = apply_lora(_model("qwen2"), LoRAConfig(rank=4, alpha=8, target_modules=["q_proj", "v_proj", "up_proj"]))
    for n, p in m.named_parameters():  # non-zero adapters, so their gradients differ from zero-B ones
        if "lora_B" in n:
            torch.nn.init.normal_(p, std=0.1)
    _compare(m, _batch(_completions(random.Random(7), [(6, 4), (5, 3)])))


def test_bf16_autocast_agrees_with_the_standard_forward(always_pack):
    m = _model("llama")
    batch = _batch(_completions(random.Random(8), [(6, 4), (5, 3)]))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        ref, _ = completion_logprobs(m, batch)
        sp.enable(m)
        got, _ = completion_logprobs(m, batch)
    mask = batch.completion_mask.bool()
    assert (got - ref)[mask].abs().max() < 0.1  # bf16 rounding of different matmul shapes
    assert (got - ref)[mask].abs().mean() < 0.02


def test_ordinary_forwards_are_sdpa():
    """Generation and padded forwards without a layout are exactly the sdpa model's."""
    m = _model("qwen2").eval()
    ids = torch.tensor([[0, 0, 5, 6, 7], [8, 9, 10, 11, 12]])
    mask = (ids != 0).long()
    with torch.no_grad():
        before = m(input_ids=ids, attention_mask=mask).logits
        torch.manual_seed(0)
        gen_before = m.generate(ids, attention_mask=mask, do_sample=True, max_new_tokens=6, pad_token_id=0)
        sp.enable(m)
        after = m(input_ids=ids, attention_mask=mask).logits
        torch.manual_seed(0)
        gen_after = m.generate(ids, attention_mask=mask, do_sample=True, max_new_tokens=6, pad_token_id=0)
    assert torch.equal(before, after)
    assert torch.equal(gen_before, gen_after)


def test_setting_is_never_saved(tmp_path):
    m = _model("llama")
    sp.enable(m)
    m.save_pretrained(tmp_path)
    assert sp.NAME not in (tmp_path / "config.json").read_text()
    back = transformers.AutoModelForCausalLM.from_pretrained(tmp_path)
    assert back.config._attn_implementation in ("sdpa", "eager") and not sp.enabled(back)
    json.loads((tmp_path / "config.json").read_text())


def test_unsupported_models_keep_the_standard_forward():
    gpt2 = transformers.GPT2LMHeadModel(transformers.GPT2Config(vocab_size=V, n_embd=32, n_layer=1, n_head=2))
    assert "gpt2" in sp.enable(gpt2) and not sp.enabled(gpt2)
    eager = transformers.AutoModelForCausalLM.from_config(_configs()["llama"](), attn_implementation="eager")
    assert "eager" in sp.enable(eager) and not sp.enabled(eager)


def test_training_run_matches_the_standard_forward(tmp_path, tiny_cfg_overrides, monkeypatch):
    """A few GRPO steps with the layout end where the same run without it ends (float rounding apart), and the
    packed path was taken."""
    from safetensors.torch import load_file

    from rlvr.config.run import load_config
    from rlvr.run.train import train

    calls = []
    real = sp.packed_hidden
    monkeypatch.setattr(sp, "packed_hidden", lambda *a, **k: calls.append(1) or real(*a, **k))
    params = {}
    for flag in (True, False):
        over = [o for o in tiny_cfg_overrides if not o.startswith("out=")] + [
            f"out={tmp_path / str(flag)}", f"train.shared_prefix={flag}", "train.checkpoint_every=0",
            "algorithm.epochs=2", "algorithm.minibatches=2"]
        train(load_config(None, over))
        params[flag] = load_file(str(tmp_path / str(flag) / "checkpoints" / "step_000003" / "model" / "model.safetensors"))
        if flag:
            assert calls, "the packed layout was never used"
            calls_on = len(calls)
    assert len(calls) == calls_on  # off means off
    for n in params[True]:
        torch.testing.assert_close(params[True][n], params[False][n], rtol=1e-4, atol=1e-5, msg=n)


def test_an_enabled_model_pickled_into_a_fresh_process_runs(tmp_path):
    """A Ray actor or any other process that unpickles an enabled model (which never imported rlvr's attention)
    gets the implementation registered by the unpickling itself."""
    import pickle
    import subprocess
    import sys

    m = _model("qwen2").eval()
    sp.enable(m)
    ids = torch.tensor([[0, 5, 6, 7]])
    with torch.no_grad():
        want = m(input_ids=ids, attention_mask=(ids != 0).long()).logits
    (tmp_path / "m.pkl").write_bytes(pickle.dumps(m))
    torch.save(want, tmp_path / "want.pt")
    code = ("import pickle, sys, torch\n"
            "assert 'rlvr' not in sys.modules\n"
            f"m = pickle.loads(open({str(tmp_path / 'm.pkl')!r}, 'rb').read())\n"
            "ids = torch.tensor([[0, 5, 6, 7]])\n"
            "with torch.no_grad():\n"
            "    got = m(input_ids=ids, attention_mask=(ids != 0).long()).logits\n"
            f"assert torch.equal(got, torch.load({str(tmp_path / 'want.pt')!r}))\n"
            "print(m.config._attn_implementation)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == sp.NAME
