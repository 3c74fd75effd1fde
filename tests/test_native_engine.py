"""The native rollout engine: the same tokens and log-probs as ``hf``, the model's exact sampling
distribution, shared-prompt prefill, fallback for other architectures, and a real GRPO run on it."""

import json
import logging

import pytest
import torch
import torch.nn.functional as F

from rlvr.core.batch import build_batch
from rlvr.core.types import Example, GenerationRequest, SamplingParams
from rlvr.models import TinyModelConfig, build_tiny_model, char_tokenizer, completion_logprobs
from rlvr.engines import ENGINES, HFEngine, NativeEngine
from rlvr.engines.native import build_native_engine

TOK = char_tokenizer()
# prompts of 2, 6 and 13 tokens in one batch: left padding of 0 to 11
REQS = [GenerationRequest(Example("a", "7=", "7"), 3), GenerationRequest(Example("b", "12+30=", "42"), 4),
        GenerationRequest(Example("c", "hello, 4+5 is", "9"), 2)]


@pytest.fixture(scope="module", params=["qwen2", "llama"])
def model(request):
    cfg = TinyModelConfig(arch=request.param, hidden_size=32, intermediate_size=64, num_layers=2, num_heads=4,
                          num_kv_heads=2)
    model = build_tiny_model(cfg, TOK, seed=0)
    with torch.no_grad():  # a random tiny model echoes its last token; larger weights make it chaotic, so
        for name, p in model.named_parameters():  # a wrong position, mask or cache row changes the tokens
            if p.dim() == 2 and "embed" not in name:
                p.mul_(8.0)
    return model


def _ids(out):
    return [c.completion_ids for c in out]


def test_greedy_tokens_equal_hf_for_prompts_of_different_lengths(model):
    s = SamplingParams(temperature=0.0, max_new_tokens=12)
    ours = NativeEngine(model, TOK).generate(REQS, s)
    ref = HFEngine(model, TOK).generate(REQS, s)
    assert _ids(ours) == _ids(ref)
    assert len({tuple(c.completion_ids) for c in ours}) == 3  # the three prompts decode differently
    for a, b in zip(ours, ref):
        assert a.finish_reason == b.finish_reason and a.text == b.text and a.prompt_ids == b.prompt_ids
        torch.testing.assert_close(torch.tensor(a.logprobs), torch.tensor(b.logprobs), rtol=0, atol=1e-5)


@pytest.mark.parametrize("temperature,top_p", [(1.0, 1.0), (0.7, 0.9)])
def test_sampled_tokens_equal_hf_at_the_same_seed(model, temperature, top_p):
    """Same warpers, same ``multinomial`` over the same rows: the same random draws give the same tokens,
    also when a group is split across batches (batch size 4 over groups of 3, 4 and 2)."""
    s = SamplingParams(temperature, top_p, max_new_tokens=10, seed=5)
    ours = NativeEngine(model, TOK, batch_size=4).generate(REQS, s)
    ref = HFEngine(model, TOK, batch_size=4).generate(REQS, s)
    assert _ids(ours) == _ids(ref)
    assert [c.group for c in ours] == [0, 0, 0, 1, 1, 1, 1, 2, 2]
    assert len({tuple(c.completion_ids) for c in ours}) > 3  # sampling happened: a group's rows differ
    for a, b in zip(ours, ref):
        torch.testing.assert_close(torch.tensor(a.logprobs), torch.tensor(b.logprobs), rtol=0, atol=1e-5)


@pytest.mark.parametrize("temperature,top_p", [(0.8, 1.0), (1.3, 0.9)])
def test_behaviour_logprobs_equal_the_trainers(model, temperature, top_p):
    out = NativeEngine(model, TOK).generate(REQS, SamplingParams(temperature, top_p, max_new_tokens=8, seed=3))
    batch = build_batch(out, [0.0] * len(out), TOK.pad_token_id)
    lp, _ = completion_logprobs(model, batch, temperature=temperature)
    torch.testing.assert_close(lp, batch.behaviour_logp, rtol=0, atol=1e-5)


def test_finish_reasons_seeds_and_global_rng(model):
    engine = NativeEngine(model, TOK, batch_size=12)  # 3 batches a call, groups split across them
    state = torch.get_rng_state()
    a = engine.generate(REQS * 4, SamplingParams(max_new_tokens=12, seed=7))
    assert torch.equal(state, torch.get_rng_state())
    assert _ids(a) == _ids(engine.generate(REQS * 4, SamplingParams(max_new_tokens=12, seed=7)))
    assert _ids(a) != _ids(engine.generate(REQS * 4, SamplingParams(max_new_tokens=12, seed=8)))
    reasons = {c.finish_reason for c in a}
    assert reasons == {"stop", "length"}  # both occur in 36 samples of 12 tokens from a random model
    for c in a:
        if c.finish_reason == "stop":
            assert c.completion_ids[-1] == TOK.eos_token_id and TOK.eos_token_id not in c.completion_ids[:-1]
        else:
            assert len(c.completion_ids) == 12 and TOK.eos_token_id not in c.completion_ids
        assert len(c.logprobs) == len(c.completion_ids)


def test_a_group_is_prefilled_once(model, monkeypatch):
    from rlvr.engines import native_model

    widths = []
    original = native_model.Decoder._prefill

    def spy(self, ids, valid, row_group):
        widths.append(tuple(ids.shape))
        return original(self, ids, valid, row_group)

    monkeypatch.setattr(native_model.Decoder, "_prefill", spy)
    out = NativeEngine(model, TOK).generate(REQS, SamplingParams(max_new_tokens=3, seed=0))
    assert len(out) == 9 and widths == [(3, 13)]  # 3 prompts, not 9 rows


def _exact_two_token_probs(model, tok, prompt_ids, temperature, top_p):
    """``P(t1, t2)`` under the processed distribution, from plain full forwards (no cache, no engine)."""

    def probs(ids):
        logits = model(torch.tensor([ids])).logits[0, -1].float() / temperature
        p = F.softmax(logits, -1)
        order = p.argsort(descending=True)
        keep = torch.zeros_like(p, dtype=torch.bool)
        before = p[order].cumsum(0) - p[order]  # mass of the tokens ranked above each one
        keep[order[before < top_p]] = True  # the smallest top set whose mass reaches top_p
        q = torch.where(keep, p, torch.zeros_like(p))
        return q / q.sum()

    with torch.no_grad():
        p1 = probs(prompt_ids)
        joint = torch.zeros(len(p1), len(p1))
        for t1 in p1.nonzero().flatten().tolist():
            if t1 == tok.eos_token_id:
                joint[t1, tok.pad_token_id] = p1[t1]  # a finished row is padded
            else:
                joint[t1] = p1[t1] * probs(prompt_ids + [t1])
    return joint


def test_first_two_tokens_follow_the_models_distribution():
    """Chi-square goodness of fit of 6000 samples per prompt of (token 1, token 2), a 6-token vocabulary,
    two prompts of different lengths in one batch, temperature and top-p both active."""
    tok = char_tokenizer("ab ")
    model = build_tiny_model(TinyModelConfig(hidden_size=32, intermediate_size=64, num_layers=2), tok, seed=1)
    with torch.no_grad():
        model.model.norm.weight.mul_(3.0)  # sharpen the logits: a random model is close to uniform
    temperature, top_p, n = 0.9, 0.85, 6000
    reqs = [GenerationRequest(Example("s", "a", ""), n), GenerationRequest(Example("l", "ab ba b", ""), n)]
    out = NativeEngine(model, tok, batch_size=4096).generate(
        reqs, SamplingParams(temperature, top_p, max_new_tokens=2, seed=0))
    for gi, req in enumerate(reqs):
        rows = [c for c in out if c.group == gi]
        expected = _exact_two_token_probs(model, tok, rows[0].prompt_ids, temperature, top_p)
        assert (expected > 0).sum() > 6 and expected.max() < 0.6  # a distribution worth testing
        counts = torch.zeros_like(expected)
        for c in rows:
            t1, t2 = (c.completion_ids + [tok.pad_token_id])[:2]
            counts[t1, t2] += 1
        assert counts[expected == 0].sum() == 0  # nothing outside the top-p nucleus is ever drawn
        e, o = expected[expected > 0] * n, counts[expected > 0]
        small = e < 5  # pool sparse cells: the chi-square approximation wants expected counts of 5 or more
        if small.any():
            e = torch.cat([e[~small], e[small].sum()[None]])
            o = torch.cat([o[~small], o[small].sum()[None]])
        chi2 = ((o - e) ** 2 / e).sum()
        p_value = torch.special.gammaincc(torch.tensor((len(e) - 1) / 2), chi2 / 2).item()
        assert p_value > 1e-3, (req.example.id, chi2.item(), len(e), p_value)


def _windowed(kind):
    """Window 4, shorter than the prompts: active in prefill and decoding. Qwen2: layer 0 full, layer 1
    sliding (``max_window_layers``), so both kinds of layer are in one model."""
    from transformers import MistralConfig, MistralForCausalLM, Qwen2Config, Qwen2ForCausalLM

    common = dict(vocab_size=len(TOK), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, sliding_window=4, max_position_embeddings=64,
                  pad_token_id=TOK.pad_token_id, eos_token_id=TOK.eos_token_id)
    torch.manual_seed(0)
    if kind == "mistral":
        return MistralForCausalLM(MistralConfig(**common))
    return Qwen2ForCausalLM(Qwen2Config(use_sliding_window=True, max_window_layers=1, **common))


@pytest.mark.parametrize("kind", ["mistral", "qwen2"])
def test_sliding_window_matches_hf_and_the_trainer(kind):
    model = _windowed(kind)
    greedy = SamplingParams(temperature=0.0, max_new_tokens=8)
    assert _ids(NativeEngine(model, TOK).generate(REQS, greedy)) == _ids(HFEngine(model, TOK).generate(REQS, greedy))
    out = NativeEngine(model, TOK).generate(REQS, SamplingParams(0.9, max_new_tokens=8, seed=1))
    batch = build_batch(out, [0.0] * len(out), TOK.pad_token_id)
    lp, _ = completion_logprobs(model, batch, temperature=0.9)
    torch.testing.assert_close(lp, batch.behaviour_logp, rtol=0, atol=1e-5)
    full = NativeEngine(model, TOK)
    for layer in full.decoder.layers:  # the window matters: without it the log-probs differ
        layer.window = None
    first = [c.logprobs[0] for c in full.generate(REQS, SamplingParams(0.9, max_new_tokens=1, seed=1))]
    assert not torch.allclose(torch.tensor(first), torch.tensor([c.logprobs[0] for c in out]), atol=1e-4)


def test_an_unsupported_architecture_falls_back_to_hf_with_a_message(caplog):
    from transformers import GPT2Config, GPT2LMHeadModel

    model = GPT2LMHeadModel(GPT2Config(vocab_size=len(TOK), n_embd=32, n_layer=1, n_head=2, n_positions=64,
                                       eos_token_id=TOK.eos_token_id, pad_token_id=TOK.pad_token_id))
    with caplog.at_level(logging.WARNING, logger="rlvr.engines.native"):
        engine = ENGINES.get("native").fn(model, TOK, batch_size=8, chat_template=False)
    assert type(engine) is HFEngine and engine.batch_size == 8
    assert "'gpt2'" in caplog.text and "hf engine" in caplog.text
    assert len(engine.generate(REQS[:1], SamplingParams(max_new_tokens=3, seed=0))) == 3
    with pytest.raises(ValueError, match="gpt2"):
        build_native_engine(model, TOK, strict=True)
    with pytest.raises(ValueError, match="gpt2"):
        NativeEngine(model, TOK)


def test_a_replaced_layer_is_refused(model):
    import copy

    wrapped = copy.deepcopy(model)
    wrapped.model.layers[0].self_attn.q_proj = torch.nn.Sequential(wrapped.model.layers[0].self_attn.q_proj)
    with pytest.raises(ValueError, match="q_proj is a Sequential"):
        NativeEngine(wrapped, TOK)


def test_weights_changed_in_place_are_used_by_the_next_call(model):
    import copy

    m = copy.deepcopy(model)
    engine, s = NativeEngine(m, TOK), SamplingParams(temperature=0.0, max_new_tokens=6)
    before = engine.generate(REQS, s)
    with torch.no_grad():
        for p in m.parameters():
            p.add_(torch.randn_like(p) * 0.5, alpha=1.0)
    engine.sync_weights()
    after = engine.generate(REQS, s)
    assert _ids(after) == _ids(HFEngine(m, TOK).generate(REQS, s)) and _ids(after) != _ids(before)


def test_grpo_run_on_the_native_engine_equals_the_hf_run(jsonl_cfg_overrides, tmp_path, monkeypatch):
    """Two real GRPO steps through ``train``: the native engine draws the same completions as ``hf``, so the
    whole run (rewards, gradients, the trained weights' metrics) is the same run."""
    from rlvr.config.run import load_config
    from rlvr.run.train import train

    chunks = []
    original = NativeEngine._generate_chunk
    monkeypatch.setattr(NativeEngine, "_generate_chunk", lambda self, *a: chunks.append(1) or original(self, *a))
    metrics = {}
    for engine in ("hf", "native"):
        over = [o for o in jsonl_cfg_overrides if not o.startswith("out=")]
        summary = train(load_config(overrides=over + [f"out={tmp_path / engine}", f"rollout.engine={engine}",
                                                      "train.steps=2"]))
        assert 0.0 <= summary["eval_after"]["accuracy"] <= 1.0
        metrics[engine] = [json.loads(x) for x in (tmp_path / engine / "metrics.jsonl").read_text().splitlines()]
    assert chunks  # the native run's rollouts went through the native engine
    assert [m["step"] for m in metrics["native"]] == [1, 2]
    assert any(m["grad_norm"] > 0 for m in metrics["native"])  # a step with learning signal
    assert metrics["native"][0]["logp_mismatch"] < 1e-5  # before any update: the engine's are the trainer's
    for ours, ref in zip(metrics["native"], metrics["hf"]):
        for key in ("reward", "completion_length", "grad_norm", "kl", "entropy", "logp_mismatch"):
            assert ours[key] == pytest.approx(ref[key], rel=1e-4, abs=1e-6), key


def test_prefix_and_stop_requests_go_through_the_hf_path():
    """Requests the native loop does not handle yet (prefixes, per-request lengths, stops) sample exactly
    what the hf engine samples for them."""
    from rlvr.core.types import Example, GenerationRequest, SamplingParams
    from rlvr.models import TinyModelConfig, build_tiny_model, char_tokenizer
    from rlvr.engines.hf import HFEngine
    from rlvr.engines.native import NativeEngine

    tok = char_tokenizer()
    model = build_tiny_model(TinyModelConfig(hidden_size=32, intermediate_size=64, num_layers=1), tok, seed=2)
    ex = Example("e", "3+4=", "7")
    reqs = [GenerationRequest(ex, 3, prefix_ids=tuple(tok("7", add_special_tokens=False)["input_ids"])),
            GenerationRequest(ex, 2, max_new_tokens=2, stop=("1",))]
    sp = SamplingParams(max_new_tokens=5, seed=9)
    got, ref = NativeEngine(model, tok).generate(reqs, sp), HFEngine(model, tok).generate(reqs, sp)
    assert [c.completion_ids for c in got] == [c.completion_ids for c in ref]
    assert [c.segments for c in got] == [c.segments for c in ref] and got[0].segments is not None


def test_fused_projections_decode_as_the_separate_ones_and_follow_new_weights(model):
    """The per-call fused q/k/v and gate/up products give the unfused decoder's tokens and log-probs, and a
    weight change between calls reaches the next call (the copies are rebuilt, never kept)."""
    s = SamplingParams(1.0, max_new_tokens=10, seed=3)
    fused, plain = NativeEngine(model, TOK), NativeEngine(model, TOK)
    fused.decoder.fuse, plain.decoder.fuse = True, False
    a, b = fused.generate(REQS, s), plain.generate(REQS, s)
    assert _ids(a) == _ids(b)
    for x, y in zip(a, b):
        torch.testing.assert_close(torch.tensor(x.logprobs), torch.tensor(y.logprobs), rtol=0, atol=1e-5)
    assert all(L.qkv is None and L.gate_up is None for L in fused.decoder.layers)  # released after the call
    saved = {n: p.detach().clone() for n, p in model.named_parameters()}
    try:
        with torch.no_grad():
            model.model.layers[0].self_attn.k_proj.weight.mul_(-1.5)
            model.model.layers[1].mlp.up_proj.weight.mul_(2.0)
        c, d = fused.generate(REQS, s), plain.generate(REQS, s)
        assert _ids(c) == _ids(d) and _ids(c) != _ids(a)
    finally:
        with torch.no_grad():
            for n, p in model.named_parameters():
                p.copy_(saved[n])


def test_non_finite_logits_stop_sampling_with_a_clear_error():
    """The sampler skips torch.multinomial's per-step validity check; one check of the chunk's log-probs
    stands in for it, so a model gone NaN raises instead of sampling argmax-of-NaN tokens."""
    broken = build_tiny_model(TinyModelConfig(hidden_size=32, intermediate_size=64, num_layers=1, num_heads=4,
                                              num_kv_heads=2), TOK, seed=0)
    with torch.no_grad():
        broken.get_output_embeddings().weight[5, 0] = float("nan")
    for greedy in (False, True):
        with pytest.raises(FloatingPointError, match="NaN or inf"):
            NativeEngine(broken, TOK).generate(REQS, SamplingParams(temperature=0.0 if greedy else 1.0,
                                                                    max_new_tokens=4, seed=1))


def test_sampling_does_not_touch_other_generators(model):
    """Seeding a call seeds the generator it samples from and restores it: the global CPU state is unchanged,
    and the same seed gives the same tokens whatever was drawn before."""
    engine = NativeEngine(model, TOK)
    first = _ids(engine.generate(REQS, SamplingParams(max_new_tokens=6, seed=11)))
    torch.rand(1000)
    state = torch.get_rng_state()
    assert _ids(engine.generate(REQS, SamplingParams(max_new_tokens=6, seed=11))) == first
    assert torch.equal(state, torch.get_rng_state())
