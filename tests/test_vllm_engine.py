"""The ``vllm`` rollout engine on vLLM's CPU build: log-probs equal the trainer's, in-memory weight sync,
the sampling distribution, seeds, prefixes, stops, per-request lengths, and GRPO runs that learn as ``hf``
runs do. Marked ``vllm``: run with ``bash scripts/test_vllm.sh`` (skipped where vLLM is absent)."""

import json
import subprocess
import sys
import time

import pytest
import torch

pytest.importorskip("vllm")

from rlvr.config import load_config  # noqa: E402
from rlvr.core.batch import build_batch  # noqa: E402
from rlvr.core.types import Example, GenerationRequest, SamplingParams  # noqa: E402
from rlvr.models import TinyModelConfig, build_tiny_model, char_tokenizer, completion_logprobs  # noqa: E402
from rlvr.rollout import ENGINES, HFEngine  # noqa: E402
from rlvr.rollout.vllm_config import VLLMConfig  # noqa: E402
from rlvr.rollout.vllm_engine import VLLMEngine, logprobs_mode  # noqa: E402
from rlvr.train.run import train  # noqa: E402
from tests.test_native_engine import _exact_two_token_probs  # noqa: E402

pytestmark = pytest.mark.vllm

TOK = char_tokenizer()
# vLLM's CPU attention needs a head size of 32 or more
SHAPE = dict(hidden_size=64, intermediate_size=128, num_layers=2, num_heads=2, num_kv_heads=1)
REQS = [GenerationRequest(Example("a", "7=", "7"), 3), GenerationRequest(Example("b", "12+30=", "42"), 4),
        GenerationRequest(Example("c", "hello, 4+5 is", "9"), 2)]


def chaotic_model(seed=0, tok=TOK, **shape):
    """Larger weights make a random tiny model's continuations depend on every position (not an echo)."""
    model = build_tiny_model(TinyModelConfig(**{**SHAPE, **shape}), tok, seed=seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 2 and "embed" not in name:
                p.mul_(4.0)
    return model


@pytest.fixture(scope="module")
def model():
    return chaotic_model()


def trainer_logprobs(model, out, temperature):
    batch = build_batch(out, [0.0] * len(out), TOK.pad_token_id).to(next(model.parameters()).device)
    with torch.no_grad():
        lp, _ = completion_logprobs(model, batch, temperature=temperature)
    return lp, batch


@pytest.mark.parametrize("temperature,top_p", [(1.0, 1.0), (0.7, 1.0), (1.0, 0.8), (0.0, 1.0)])
def test_behaviour_logprobs_equal_the_trainers(model, temperature, top_p):
    engine = VLLMEngine(model, TOK, temperature=temperature, top_p=top_p)
    out = engine.generate(REQS, SamplingParams(temperature, top_p, max_new_tokens=10, seed=3))
    assert [c.group for c in out] == [0, 0, 0, 1, 1, 1, 1, 2, 2]
    lp, batch = trainer_logprobs(model, out, 1.0 if temperature == 0 else temperature)
    torch.testing.assert_close(lp, batch.behaviour_logp, rtol=0, atol=1e-4)
    if temperature > 0:
        assert len({tuple(c.completion_ids) for c in out}) > 3  # it sampled: a group's rows differ


def test_logprobs_mode_follows_rlvrs_convention():
    assert logprobs_mode(0.7, 1.0) == "processed_logprobs"  # log_softmax(logits / T)
    assert logprobs_mode(1.0, 0.9) == "raw_logprobs"  # before top-p truncation = log_softmax(logits)
    assert logprobs_mode(0.0, 1.0) == "processed_logprobs"


def test_greedy_tokens_equal_hf(model):
    s = SamplingParams(temperature=0.0, max_new_tokens=12)
    ours, ref = VLLMEngine(model, TOK).generate(REQS, s), HFEngine(model, TOK).generate(REQS, s)
    assert [c.completion_ids for c in ours] == [c.completion_ids for c in ref]
    assert len({tuple(c.completion_ids) for c in ours}) == 3
    assert [(c.finish_reason, c.text, c.prompt_ids) for c in ours] == [(c.finish_reason, c.text, c.prompt_ids)
                                                                       for c in ref]


def test_weight_sync_in_memory_updates_the_engine_and_its_prefix_cache():
    model = chaotic_model(seed=1)
    engine = VLLMEngine(model, TOK, settings=VLLMConfig(enable_prefix_caching=True))
    s = SamplingParams(1.0, max_new_tokens=8, seed=0)
    before = engine.generate(REQS, s)  # fills the prefix cache with the old weights' KV
    old = {k: v.clone() for k, v in model.state_dict().items()}
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.3 * torch.randn_like(p))
    stale = engine.generate(REQS, s)  # no sync yet: still the old policy
    assert [c.completion_ids for c in stale] == [c.completion_ids for c in before]
    engine.sync_weights()
    t0 = time.perf_counter()
    after = engine.generate(REQS, s)
    print(f"\nsync + generate: {time.perf_counter() - t0:.3f} s; syncs: {engine.weight_syncs}")
    assert engine.weight_syncs == 2
    lp, batch = trainer_logprobs(model, after, 1.0)
    torch.testing.assert_close(lp, batch.behaviour_logp, rtol=0, atol=1e-4)
    model.load_state_dict(old)
    lp_old, _ = trainer_logprobs(model, after, 1.0)
    assert (lp_old - batch.behaviour_logp).abs().max() > 1e-2  # the new weights really differ


def test_first_two_tokens_follow_the_models_distribution():
    """Chi-square goodness of fit of 6000 samples per prompt of (token 1, token 2) over a 6-token vocabulary,
    with temperature and top-p both active: vLLM samples the distribution the trainer defines."""
    tok = char_tokenizer("ab ")
    model = build_tiny_model(TinyModelConfig(**SHAPE), tok, seed=1)
    with torch.no_grad():
        model.model.norm.weight.mul_(2.0)  # sharpen the logits: a random model is close to uniform
    temperature, top_p, n = 0.9, 0.85, 6000
    reqs = [GenerationRequest(Example("s", "a", ""), n), GenerationRequest(Example("l", "ab ba b", ""), n)]
    out = VLLMEngine(model, tok, batch_size=256, temperature=temperature, top_p=top_p).generate(
        reqs, SamplingParams(temperature, top_p, max_new_tokens=2, seed=0))
    for gi, req in enumerate(reqs):
        rows = [c for c in out if c.group == gi]
        expected = _exact_two_token_probs(model, tok, rows[0].prompt_ids, temperature, top_p)
        assert (expected > 0).sum() > 6 and expected.max() < 0.6
        counts = torch.zeros_like(expected)
        for c in rows:
            t1, t2 = (c.completion_ids + [tok.pad_token_id])[:2]
            counts[t1, t2] += 1
        assert counts[expected == 0].sum() == 0  # nothing outside the top-p nucleus is drawn
        e, o = expected[expected > 0] * n, counts[expected > 0]
        small = e < 5
        if small.any():
            e = torch.cat([e[~small], e[small].sum()[None]])
            o = torch.cat([o[~small], o[small].sum()[None]])
        chi2 = ((o - e) ** 2 / e).sum()
        p_value = torch.special.gammaincc(torch.tensor((len(e) - 1) / 2), chi2 / 2).item()
        assert p_value > 1e-3, (req.example.id, chi2.item(), len(e), p_value)


def test_seeds_repeat_and_differ(model):
    engine = VLLMEngine(model, TOK)
    ids = lambda seed: [c.completion_ids for c in engine.generate(REQS, SamplingParams(1.0, max_new_tokens=8,  # noqa
                                                                                        seed=seed))]
    assert ids(11) == ids(11)
    assert ids(11) != ids(12)


def test_prefix_requests_continue_the_prefix_with_its_logprobs(model):
    prefix = tuple(TOK("34")["input_ids"])
    engine = VLLMEngine(model, TOK)
    reqs = [GenerationRequest(Example("p", "12+30=", "42"), 3, prefix_ids=prefix, prefix_logprobs=(-0.5, -0.25)),
            GenerationRequest(Example("i", "12+30=", "42"), 2, prefix_ids=prefix, prefix_source="inserted"),
            GenerationRequest(Example("q", "12+30=", "42"), 2)]
    out = engine.generate(reqs, SamplingParams(0.8, max_new_tokens=6, seed=2))
    for c in out[:5]:
        assert c.completion_ids[:2] == list(prefix) and len(c.completion_ids) <= 8
        assert [(s.start, s.end) for s in c.segments] == [(0, 2), (2, len(c.completion_ids))]
    assert out[0].logprobs[:2] == [-0.5, -0.25] and out[3].logprobs is None
    assert out[3].mask()[:2] == [0.0, 0.0] and out[3].mask()[2:] == [1.0] * (len(out[3]) - 2)
    # the sampled part's log-probs are the trainer's given prompt + prefix
    lp, batch = trainer_logprobs(model, out[:3], 0.8)
    torch.testing.assert_close(lp[:, 2:], batch.behaviour_logp[:, 2:], rtol=0, atol=1e-4)
    # a prefix continued greedily equals hf's continuation of the same prefix
    g = SamplingParams(0.0, max_new_tokens=6)
    ours = engine.generate(reqs[:1], g)[0]
    ref = HFEngine(model, TOK).generate(reqs[:1], g)[0]
    assert ours.completion_ids == ref.completion_ids


def test_stops_and_per_request_lengths_match_hf(model):
    g = SamplingParams(0.0, max_new_tokens=10)
    ex = Example("b", "12+30=", "42")
    free = HFEngine(model, TOK).generate([GenerationRequest(ex, 1)], g)[0].completion_ids
    assert len(free) == 10 and TOK.eos_token_id not in free
    stop_tok = free[4]
    first = free.index(stop_tok)
    stop_str = TOK.decode(free[2:4])
    reqs = [GenerationRequest(ex, 1, stop_token_ids=(stop_tok,)), GenerationRequest(ex, 1, stop=(stop_str,)),
            GenerationRequest(ex, 1, max_new_tokens=3), GenerationRequest(ex, 1)]
    ours = VLLMEngine(model, TOK).generate(reqs, g)
    ref = HFEngine(model, TOK).generate(reqs, g)
    assert ours[0].completion_ids == free[: first + 1] and ours[0].finish_reason == "stop"
    assert stop_str in ours[1].text and ours[1].finish_reason == "stop"
    assert stop_str not in TOK.decode(ours[1].completion_ids[:-1])  # cut right after the completing token
    assert ours[2].completion_ids == free[:3] and ours[2].finish_reason == "length"
    assert ours[3].completion_ids == free
    for a, b in zip(ours, ref):
        assert (a.completion_ids, a.finish_reason, a.text) == (b.completion_ids, b.finish_reason, b.text)


def test_zero_new_tokens_and_empty_requests(model):
    engine = VLLMEngine(model, TOK)
    prefix = tuple(TOK("9")["input_ids"])
    out = engine.generate([GenerationRequest(Example("z", "1=", "1"), 2, prefix_ids=prefix, prefix_logprobs=(-1.0,),
                                             max_new_tokens=0), GenerationRequest(Example("e", "2=", "2"), 0),
                           GenerationRequest(Example("o", "3=", "3"), 1)], SamplingParams(max_new_tokens=4, seed=0))
    assert [c.group for c in out] == [0, 0, 2]
    assert out[0].completion_ids == list(prefix) and out[0].logprobs == [-1.0]


def test_registered_builder_reads_the_rollout_section(model):
    cfg = load_config(overrides=["rollout.engine=vllm", "rollout.temperature=0.5", "rollout.vllm.kv_cache_gib=0.5",
                                 "rollout.vllm.enable_prefix_caching=false"])
    engine = ENGINES.get("vllm").fn(model, TOK, batch_size=16, rollout=cfg.rollout, seed=cfg.seed)
    assert isinstance(engine, VLLMEngine) and not engine.settings.enable_prefix_caching
    assert engine.settings.kv_cache_gib == 0.5


LEARN = ["model.tiny.hidden_size=64", "model.tiny.intermediate_size=128", "model.tiny.num_layers=1",
         "model.tiny.num_heads=2", "model.tiny.num_kv_heads=1", "task.max_value=3", "task.num_eval=4",
         "task.num_train=4", "rollout.prompts_per_step=4", "rollout.group_size=8", "rollout.max_new_tokens=2",
         "sft.steps=6", "sft.lr=3e-3", "sft.batch_size=8", "sft.warmup_steps=0", "train.steps=60",
         "optim.lr=5e-3", "train.checkpoint_every=0", "algorithm.minibatches=1", "eval.split=train"]


def _learning_run(tmp_path, engine):
    summary = train(load_config(overrides=[f"out={tmp_path / engine}", f"rollout.engine={engine}", *LEARN]))
    lines = [json.loads(x) for x in (tmp_path / engine / "metrics.jsonl").read_text().splitlines()]
    return summary, lines


def test_grpo_with_vllm_learns_like_hf_on_the_same_seed(tmp_path):
    """The fixed-prompt-set learning run of tests/test_train.py, once per engine: both raise the reward, and
    the engine-vs-trainer mismatch stays at float rounding for vllm as for hf."""
    runs = {engine: _learning_run(tmp_path, engine) for engine in ("hf", "vllm")}
    report = {}
    for engine, (summary, lines) in runs.items():
        early = sum(m["reward"] for m in lines[:5]) / 5
        late = sum(m["reward"] for m in lines[-5:]) / 5
        report[engine] = (early, late, summary["eval_before"]["accuracy"], summary["eval_after"]["accuracy"],
                          max(m["logp_mismatch"] for m in lines))
        assert late > early + 0.3, (engine, early, late)
        assert summary["eval_after"]["accuracy"] > summary["eval_before"]["accuracy"]
        assert max(m["logp_mismatch"] for m in lines) < 1e-3
    print("\nengine: (early reward, late reward, eval before, eval after, max logp mismatch)", report)
    assert abs(report["hf"][1] - report["vllm"][1]) < 0.35  # the same learning, up to sampling noise


def test_cli_trains_a_few_steps_with_vllm(tmp_path):
    """As a user would start it: ``rlvr train --set rollout.engine=vllm`` (no ``__main__`` guard needed)."""
    cmd = [sys.executable, "-m", "rlvr", "train", "--out", str(tmp_path / "cli"), "--set", "rollout.engine=vllm",
           "--set", "train.steps=2", "--set", "sft.steps=2", "--set", "model.tiny.hidden_size=64",
           "--set", "model.tiny.num_heads=2", "--set", "model.tiny.num_kv_heads=1", "--set", "task.num_eval=4",
           "--set", "rollout.prompts_per_step=2", "--set", "rollout.group_size=2", "--set", "train.checkpoint_every=0"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    lines = [json.loads(x) for x in (tmp_path / "cli" / "metrics.jsonl").read_text().splitlines()]
    assert len(lines) == 2 and all("logp_mismatch" in m for m in lines)


def test_parameter_noise_reaches_the_engine_and_leaves_it_clean():
    """PSN-RLVR perturbs the trainer's module; vllm holds its own copy, so the noisy weights are pushed for
    the call and the clean ones after it."""
    from rlvr.rollout.param_noise import ParamNoiseConfig, ParamNoiseEngine

    model = chaotic_model(seed=2)
    engine = VLLMEngine(model, TOK)
    noisy = ParamNoiseEngine(engine, model, ParamNoiseConfig(sigma=0.05))
    s = SamplingParams(1.0, max_new_tokens=8, seed=4)
    out = noisy.generate(REQS, s)
    lp, batch = trainer_logprobs(model, out, 1.0)  # the clean weights are back in the trainer
    assert (lp - batch.behaviour_logp).abs().max() > 1e-2  # sampled under the noise
    clean = engine.generate(REQS, s)
    lp, batch = trainer_logprobs(model, clean, 1.0)
    torch.testing.assert_close(lp, batch.behaviour_logp, rtol=0, atol=1e-4)


def test_multi_turn_episodes_through_vllm_are_token_in_token_out(model):
    """Two-turn episodes over the vllm engine: every later turn is a prefix request, observations are
    inserted and masked, and the sampled spans' behaviour log-probs are the trainer's."""
    from rlvr.envs import MultiTurnEngine
    from tests.test_multiturn import Countdown, _examples

    drv = MultiTurnEngine(VLLMEngine(model, TOK), TOK, Countdown, max_turns=3)
    out = drv.generate([GenerationRequest(ex, 2) for ex in _examples(2, 1)],
                       SamplingParams(temperature=0.8, max_new_tokens=5, seed=2))
    assert [c.turns for c in out] == [2, 2, 1, 1]
    lp, batch = trainer_logprobs(model, out, 0.8)
    for i, c in enumerate(out):
        sampled = [j for s in c.segments if s.source == "sampled" for j in range(s.start, s.end)]
        inserted = [j for s in c.segments if s.source == "inserted" for j in range(s.start, s.end)]
        assert bool(inserted) == (c.turns == 2) and all(batch.completion_mask[i, j] == 0 for j in inserted)
        torch.testing.assert_close(lp[i, sampled], torch.tensor([c.logprobs[j] for j in sampled]), rtol=0, atol=1e-4)


def test_a_two_turn_training_run_with_vllm(tmp_path):
    """``rollout.engine=vllm`` with ``rollout.multiturn``: two-turn episodes train for real."""
    from rlvr.envs import ENVIRONMENTS
    from rlvr.registry import Params
    from tests.test_multiturn import Countdown

    class TwoTurns(Countdown):
        def reset(self, example, seed):
            return super().reset(Example(example.id, example.prompt, example.answer, meta={"steps": 2}), seed)

    ENVIRONMENTS.register("_t_two_turns", Params)(lambda p: TwoTurns())
    try:
        cfg = load_config(overrides=[f"out={tmp_path / 'mt'}", "rollout.engine=vllm", *LEARN[:5],
                                     "rollout.multiturn.env=_t_two_turns", "rollout.multiturn.max_turns=2",
                                     "rollout.multiturn.max_tokens=64", "rollout.max_new_tokens=4",
                                     "rollout.prompts_per_step=2", "rollout.group_size=4", "train.steps=2",
                                     "sft.steps=0", "train.checkpoint_every=0", "task.num_eval=4"])
        train(cfg)
    finally:
        ENVIRONMENTS.unregister("_t_two_turns")
    lines = [json.loads(x) for x in (tmp_path / "mt" / "metrics.jsonl").read_text().splitlines()]
    assert len(lines) == 2 and all(m["engine/env/turns_mean"] == 2.0 for m in lines)
    assert all(m["logp_mismatch"] < 1e-3 for m in lines) and all(m["engine/env/errors"] == 0 for m in lines)


def test_a_lora_model_is_served_with_its_adapters_merged():
    """model.lora: the engine receives W + (alpha / r) B A under the base names; its log-probs are the
    adapted trainer's."""
    from rlvr.models.lora import LoRAConfig, apply_lora

    model = apply_lora(chaotic_model(seed=5), LoRAConfig(rank=4, alpha=8))
    with torch.no_grad():
        for n, p in model.named_parameters():
            if "lora_B" in n:
                p.normal_(0, 0.3)
    out = VLLMEngine(model, TOK).generate(REQS, SamplingParams(1.0, max_new_tokens=8, seed=1))
    lp, batch = trainer_logprobs(model, out, 1.0)
    torch.testing.assert_close(lp, batch.behaviour_logp, rtol=0, atol=1e-4)
