"""The ``vllm`` rollout engine on vLLM's CPU build: log-probs equal the trainer's, in-memory weight sync,
the sampling distribution, seeds, prefixes, stops, per-request lengths, GRPO runs that learn as ``hf``
runs do, and image prompts on the tiny VLM. Marked ``vllm``: run with ``bash scripts/test_vllm.sh``
(skipped where vLLM is absent)."""

import json
import subprocess
import sys
import time

import pytest
import torch

pytest.importorskip("vllm")

from rlvr.config.run import load_config  # noqa: E402
from rlvr.core.batch import build_batch  # noqa: E402
from rlvr.core.types import Example, GenerationRequest, SamplingParams  # noqa: E402
from rlvr.models import TinyModelConfig, build_tiny_model, char_tokenizer, completion_logprobs  # noqa: E402
from rlvr.engines import ENGINES, HFEngine  # noqa: E402
from rlvr.engines.vllm_config import VLLMConfig  # noqa: E402
from rlvr.engines.vllm import VLLMEngine, logprobs_mode  # noqa: E402
from rlvr.run.train import train  # noqa: E402
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
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=_user_env())
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    lines = [json.loads(x) for x in (tmp_path / "cli" / "metrics.jsonl").read_text().splitlines()]
    assert len(lines) == 2 and all("logp_mismatch" in m for m in lines)


def _user_env() -> dict:
    """A user's shell: without the rendezvous variables this process's in-process vLLM set for itself (a child
    inheriting MASTER_PORT would try to listen on the port this process holds)."""
    import os

    drop = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
    return {k: v for k, v in os.environ.items() if k not in drop}


def test_parameter_noise_reaches_the_engine_and_leaves_it_clean():
    """PSN-RLVR perturbs the trainer's module; vllm holds its own copy, so the noisy weights are pushed for
    the call and the clean ones after it."""
    from rlvr.rollout.param_noise import ParamNoiseConfig, ParamNoiseWrapper

    model = chaotic_model(seed=2)
    engine = VLLMEngine(model, TOK)
    noisy = ParamNoiseWrapper(engine, model, ParamNoiseConfig(sigma=0.05))
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
    from rlvr.envs import MultiTurnWrapper
    from tests.test_multiturn import Countdown, _examples

    drv = MultiTurnWrapper(VLLMEngine(model, TOK), TOK, Countdown, max_turns=3)
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


# ---- image prompts: a tiny Qwen2-VL (one engine for the module, then one training run) ---------------------
# text head size 32 (vLLM's CPU attention); the vision tower's is 64 / 4 = 16, which vLLM's vision attention takes
VLM = TinyModelConfig(arch="qwen2_vl", hidden_size=128, intermediate_size=256, num_layers=2, num_heads=4,
                      num_kv_heads=2, max_positions=128)


def _img(h, w, seed):
    import numpy as np
    from PIL import Image

    return Image.fromarray((np.random.default_rng(seed).random((h, w, 3)) * 255).astype("uint8"))


def _vlm_requests(n=(3, 2, 2, 2)):
    """Images of two sizes (4 and 8 merged patches), two images in one prompt, and a text-only prompt."""
    exs = [Example("small", "<image>n?", "1", images=(_img(32, 32, 1),)),
           Example("wide", "<image>red?", "2", images=(_img(32, 64, 2),)),
           Example("two", "<image>and<image>?", "3", images=(_img(48, 40, 3), _img(32, 32, 4))),
           Example("text", "plain 12+3=", "15")]
    return [GenerationRequest(ex, k) for ex, k in zip(exs, n)]


@pytest.fixture(scope="module")
def vlm():
    import gc

    from rlvr.models import ModelConfig, load_model

    model, tok = load_model(ModelConfig(tiny=VLM), seed=4)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 2 and "embed" not in name:
                p.mul_(3.0)
    gc.collect()  # earlier tests' engines are gone before this one starts (one engine per process)
    t0 = time.perf_counter()
    engine = VLLMEngine(model, tok)
    print(f"\nVLM engine start: {time.perf_counter() - t0:.1f} s")
    return model, tok, engine


def _vlm_mismatch(model, tok, out, temperature):
    batch = build_batch(out, [0.0] * len(out), tok.pad_token_id)
    with torch.no_grad():
        lp, _ = completion_logprobs(model, batch, temperature=temperature)
    return ((lp - batch.behaviour_logp) * batch.completion_mask).abs(), batch


@pytest.mark.parametrize("temperature", [1.0, 0.7, 0.0])
def test_image_prompts_carry_rlvrs_ids_and_images_and_the_trainers_logprobs(vlm, temperature):
    from rlvr.models.prompts import encode_example

    model, tok, engine = vlm
    reqs = _vlm_requests()
    out = engine.generate(reqs, SamplingParams(temperature, max_new_tokens=8, seed=3))
    assert [c.group for c in out] == [0] * 3 + [1] * 2 + [2] * 2 + [3] * 2
    for c in out:
        ids, vision = encode_example(tok, reqs[c.group].example)
        assert c.prompt_ids == ids  # placeholders expanded one per merged patch, as rlvr's encoder writes them
        if vision is None:
            assert c.vision is None
        else:
            assert torch.equal(c.vision.pixel_values, vision.pixel_values)
            assert torch.equal(c.vision.image_grid_thw, vision.image_grid_thw)
    pad = tok.convert_tokens_to_ids("<|image_pad|>")
    assert [out[k].prompt_ids.count(pad) for k in (0, 3, 5)] == [4, 8, 6 + 4]  # merged patches per image size
    diff, batch = _vlm_mismatch(model, tok, out, 1.0 if temperature == 0 else temperature)
    assert batch.vision.row_images.tolist() == [1] * 5 + [2] * 2 + [0] * 2
    print(f"\nT={temperature}: max |vllm - trainer| log-prob {diff.max().item():.2e}")
    assert diff.max() < 1e-4
    if temperature > 0:
        assert len({tuple(c.completion_ids) for c in out[:3]}) > 1  # it sampled


def test_weight_sync_reaches_the_vision_tower(vlm):
    model, tok, engine = vlm
    reqs, s = _vlm_requests(), SamplingParams(1.0, max_new_tokens=8, seed=5)
    before = engine.generate(reqs, s)
    old, _ = _vlm_mismatch(model, tok, before, 1.0)
    with torch.no_grad():  # the vision tower alone: only the image rows' policy moves
        for name, p in model.named_parameters():
            if "visual" in name:
                p.add_(0.5 * torch.randn_like(p))
    stale = engine.generate(reqs, s)
    assert [c.completion_ids for c in stale] == [c.completion_ids for c in before]  # not synced yet
    moved, _ = _vlm_mismatch(model, tok, stale, 1.0)
    assert moved[:7].max() > 1e-2 and moved[7:].max() < 1e-4  # image rows only
    engine.sync_weights()
    after = engine.generate(reqs, s)
    diff, _ = _vlm_mismatch(model, tok, after, 1.0)
    print(f"\nvision tower changed, synced: max |vllm - trainer| {diff.max().item():.2e} (before the change "
          f"{old.max().item():.2e}; the stale engine was {moved.max().item():.2e} off)")
    assert diff.max() < 1e-4
    with torch.no_grad():  # and every weight
        for p in model.parameters():
            p.add_(0.1 * torch.randn_like(p))
    engine.sync_weights()
    diff, _ = _vlm_mismatch(model, tok, engine.generate(reqs, s), 1.0)
    print(f"all weights changed, synced: max |vllm - trainer| {diff.max().item():.2e}")
    assert diff.max() < 1e-4


def test_a_vlms_image_tokens_are_never_sampled(vlm):
    """At T = 2 (vLLM's maximum) the unsuppressed head would draw the four image tokens dozens of times in
    these samples; vLLM draws none, and its log-probs stay the trainer's (suppressed and renormalised)."""
    from rlvr.models.logprobs import forward_inputs
    from rlvr.models.vision import suppressed_tokens

    model, tok, engine = vlm
    banned, temperature = suppressed_tokens(model), 2.0
    assert len(banned) == 4
    out = engine.generate(_vlm_requests(n=(24, 24, 24, 24)), SamplingParams(temperature, max_new_tokens=16, seed=9))
    drawn = [t for c in out for t in c.completion_ids]
    assert not set(drawn) & set(banned)
    diff, batch = _vlm_mismatch(model, tok, out, temperature)
    assert diff.max() < 1e-4
    with torch.no_grad():  # how many the raw (unsuppressed) head would have drawn, in expectation
        logits = model(**forward_inputs(model, batch)).logits[:, batch.prompt_len - 1: -1].float()
    mass = torch.softmax(logits / temperature, -1)[..., banned].sum(-1)
    expected = (mass * batch.completion_mask).sum().item()
    print(f"\n{len(drawn)} tokens at T={temperature}: 0 image tokens drawn, {expected:.0f} expected unsuppressed")
    assert expected > 20


def test_a_vlm_trains_on_image_prompts_with_vllm(tmp_path):
    """The shapes task on the tiny VLM through ``rollout.engine=vllm``; top-p 0.9 at T = 1 takes vLLM's raw
    log-probs, renormalised over the unsuppressed tokens, and the mismatch stays at float rounding."""
    over = [f"out={tmp_path / 'vlm'}", "rollout.engine=vllm", "task.name=shapes", "model.tiny.arch=qwen2_vl",
            "model.tiny.hidden_size=128", "model.tiny.num_heads=4", "model.tiny.num_kv_heads=2",
            "model.tiny.intermediate_size=256", "model.tiny.num_layers=1", "model.tiny.vision.depth=1",
            "model.tiny.max_positions=64", "task.num_train=16", "task.num_eval=4", "rollout.prompts_per_step=2",
            "rollout.group_size=4", "rollout.max_new_tokens=3", "rollout.top_p=0.9", "sft.steps=1",
            "sft.batch_size=4", "train.steps=2", "train.checkpoint_every=0", "eval.num_examples=4",
            "eval.samples=1"]
    t0 = time.perf_counter()
    summary = train(load_config(overrides=over))
    lines = [json.loads(x) for x in (tmp_path / "vlm" / "metrics.jsonl").read_text().splitlines()]
    print(f"\nVLM run with vllm: {time.perf_counter() - t0:.1f} s; logp_mismatch {[m['logp_mismatch'] for m in lines]}")
    assert len(lines) == 2 and all(m["logp_mismatch"] < 1e-4 for m in lines)
    assert 0.0 <= summary["eval_after"]["accuracy"] <= 1.0


def test_views_of_one_engine_each_sample_their_own_weights():
    """Asynchronous training's producer generates through a view of the run's vLLM on its snapshot: the view and
    the engine take turns on one vLLM, each pushing its own weights first, so each one's behaviour log-probs
    are its own model's, in any order of calls."""
    trainer = chaotic_model(seed=2)
    snapshot = chaotic_model(seed=2)
    with torch.no_grad():
        for p in trainer.parameters():
            p.add_(0.3 * torch.randn_like(p))
    engine = VLLMEngine(trainer, TOK)
    view = engine.view(snapshot)
    s = SamplingParams(1.0, max_new_tokens=8, seed=0)
    for who, model in [(engine, trainer), (view, snapshot), (view, snapshot), (engine, trainer), (view, snapshot)]:
        out = who.generate(REQS, s)
        lp, batch = trainer_logprobs(model, out, 1.0)
        torch.testing.assert_close(lp, batch.behaviour_logp, rtol=0, atol=1e-4)
        other = snapshot if model is trainer else trainer
        assert (trainer_logprobs(other, out, 1.0)[0] - batch.behaviour_logp).abs().max() > 1e-2
    assert (engine.weight_syncs, view.weight_syncs) == (2, 2)  # a push only when the other's weights are in


def test_asynchronous_training_with_vllm_learns(tmp_path):
    """rollout.max_staleness=1 with rollout.engine=vllm, started as a user would: the producer thread samples
    through a view of the run's vLLM on the snapshot one step behind, and the run learns as the synchronous
    one does (in a process of its own: one vLLM per process, as in a run)."""
    cmd = [sys.executable, "-m", "rlvr", "train", "--out", str(tmp_path / "async"), "--set", "rollout.engine=vllm",
           "--set", "rollout.max_staleness=1", "--set", "train.threads=1"]
    for o in LEARN:
        cmd += ["--set", o]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=_user_env())
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    lines = [json.loads(x) for x in (tmp_path / "async" / "metrics.jsonl").read_text().splitlines()]
    summary = json.loads((tmp_path / "async" / "summary.json").read_text())
    assert [m["rollout/staleness_mean"] for m in lines[:3]] == [0.0, 1.0, 1.0]
    early = sum(m["reward"] for m in lines[:5]) / 5
    late = sum(m["reward"] for m in lines[-5:]) / 5
    print(f"\nasync vllm: reward {early:.3f} -> {late:.3f}, eval {summary['eval_before']['accuracy']:.3f} -> "
          f"{summary['eval_after']['accuracy']:.3f}")
    assert late > early + 0.3, (early, late)
    assert summary["eval_after"]["accuracy"] > summary["eval_before"]["accuracy"]


@pytest.mark.parametrize("launch", ["ddp", "fsdp", "ray"])
def test_two_ranks_with_vllm_on_every_rank_learn(tmp_path, launch):
    """``rlvr train --nproc 2`` (DDP, FSDP) or ``--launcher ray`` with two trainer actors, with
    rollout.engine=vllm, as a user starts them: every rank runs its own vLLM in the process group its launcher
    started and generates its share. The engine-vs-trainer mismatch (over both ranks' tokens) stays at float
    rounding through every step, so each rank's engine holds its trainer's weights after every sync (FSDP:
    gathered shard by shard in the sync, a collective); one rank whose engine missed the syncs measured 0.07
    on this model. The run learns as the one-process run above does."""
    out = tmp_path / launch
    how = (["--launcher", "ray", "--set", "rollout.ray.trainers=2", "--set", "rollout.ray.trainer_cpus=1"]
           if launch == "ray" else ["--nproc", "2", "--set", f"train.distributed.strategy={launch}"])
    cmd = [sys.executable, "-m", "rlvr", "train", *how, "--out", str(out), "--set", "rollout.engine=vllm",
           "--set", "train.threads=1"]
    for s in LEARN:
        cmd += ["--set", s]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env={**_user_env(), "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-6000:]
    assert "Traceback" not in done.stderr, done.stderr[-6000:]  # vLLM's shutdown included
    lines = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["world_size"] == 2 and len(lines) == 60
    assert max(m["logp_mismatch"] for m in lines) < 1e-3
    early, late = (sum(m["reward"] for m in part) / 5 for part in (lines[:5], lines[-5:]))
    assert late > early + 0.3, (early, late)
    assert summary["eval_after"]["accuracy"] > summary["eval_before"]["accuracy"]
