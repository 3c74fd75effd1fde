"""``rlvr plan``: the model's shape counted without loading it, the per-part arithmetic, the phases, the engines'
memory rules and the command. The plan against measured peak memory is ``benchmarks/plan_memory.py`` (and the
slow test at the end)."""

from __future__ import annotations

import json

import pytest
import torch
from typer.testing import CliRunner

from rlvr.config.run import load_config
from rlvr.engines.base import ENGINES, EngineMemory, MemoryQuery, engine_memory, memory_rule
from rlvr.models.shape import Shape, model_shape
from rlvr.run.plan import GIB, Part, Plan, plan_memory

QWEN25 = {  # the published configs of Qwen2.5-0.5B, -1.5B and -7B (hidden, layers, heads, kv heads, MLP, vocab)
    "0.5b": (dict(hidden_size=896, num_hidden_layers=24, num_attention_heads=14, num_key_value_heads=2,
                  intermediate_size=4864, vocab_size=151936, tie_word_embeddings=True), 494_032_768),
    "1.5b": (dict(hidden_size=1536, num_hidden_layers=28, num_attention_heads=12, num_key_value_heads=2,
                  intermediate_size=8960, vocab_size=151936, tie_word_embeddings=True), 1_543_714_304),
    "7b": (dict(hidden_size=3584, num_hidden_layers=28, num_attention_heads=28, num_key_value_heads=4,
                intermediate_size=18944, vocab_size=152064, tie_word_embeddings=False), 7_615_616_512),
}


def _config_dir(tmp_path, name: str, **kw) -> str:
    from transformers import Qwen2Config

    d = tmp_path / name
    Qwen2Config(**kw, max_position_embeddings=4096).save_pretrained(d)  # config.json only: no weights
    return str(d)


@pytest.mark.parametrize("name", sorted(QWEN25))
def test_parameter_count_of_published_shapes_from_config_alone(tmp_path, name):
    kw, published = QWEN25[name]
    cfg = load_config(overrides=[f"model.path={_config_dir(tmp_path, name, **kw)}"])
    s = model_shape(cfg.model)
    assert s.params == published  # the model cards' counts (0.49B, 1.54B, 7.62B)
    assert (s.hidden, s.layers, s.kv_heads, s.vocab) == (kw["hidden_size"], kw["num_hidden_layers"],
                                                         kw["num_key_value_heads"], kw["vocab_size"])


def test_shape_counts_like_a_built_model_and_lora_like_the_run(tmp_path):
    from transformers import AutoModelForCausalLM, Qwen2Config

    from rlvr.models.lora import apply_lora

    kw = dict(hidden_size=64, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2,
              intermediate_size=96, vocab_size=300, tie_word_embeddings=False)
    path = _config_dir(tmp_path, "small", **kw)
    cfg = load_config(overrides=[f"model.path={path}", "model.lora.rank=4", "model.lora.target_modules=[q_proj,down_proj]"])
    s = model_shape(cfg.model)
    real = AutoModelForCausalLM.from_config(Qwen2Config.from_pretrained(path))
    assert s.params == sum(p.numel() for p in real.parameters())
    apply_lora(real, cfg.model.lora)
    assert s.lora_params == sum(p.numel() for p in real.parameters() if p.requires_grad)
    # by hand: q_proj 64->64 and down_proj 96->64 per layer, r (in + out) each
    assert s.lora_params == 3 * 4 * ((64 + 64) + (96 + 64))
    assert s.trainable == s.lora_params


SHAPE = Shape(params=1_000_000, hidden=128, layers=4, heads=4, kv_heads=2, intermediate=512, vocab=1000)


def _cfg(*sets):
    base = ["rollout.prompts_per_step=4", "rollout.group_size=4", "rollout.max_new_tokens=32", "rollout.batch_size=8",
            "algorithm.minibatches=1", "train.micro_batch_size=8", "model.dtype=float32", "rollout.engine=hf"]
    return load_config(overrides=base + list(sets))


def _parts(plan: Plan) -> dict[str, Part]:
    return {p.name: p for p in plan.parts}


def test_parts_by_hand_one_device():
    cfg = _cfg("train.shared_prefix=false")
    plan = plan_memory(cfg, device="cpu", prompt_tokens=16, shape=SHAPE)
    p = _parts(plan)
    P = SHAPE.params
    assert p["weights"].update == P * 4 and p["weights"].generation == P * 4
    assert p["gradients"].update == P * 4 and p["gradients"].when == "backward" and p["gradients"].generation == 0
    assert p["optimizer"].update == 2 * P * 4
    tokens = 8 * (16 + 32)  # 8 rows of a 16-token prompt and 32 new tokens
    assert plan.tokens["micro_batch_tokens"] == tokens and plan.tokens["completion_tokens"] == 8 * 32
    per_layer = (18 * 128 + 4 * 512) * 4  # c_h h + c_i I float32 values per token and layer
    assert p["activations"].update == tokens * 4 * per_layer and p["activations"].when == "forward"
    assert p["log-probs"].update == 3 * 8 * 32 * 1000 * 4  # logits, log-softmax and softmax of every completion token
    kv = 8 * 4 * 2 * 2 * 32 * (16 + 32) * 4  # batch_size rows x layers x (k, v) x kv heads x head_dim x tokens x 4 B
    assert p["engine"].generation == kv + 8 * 1000 * 4 * 2 and p["engine"].update == 0
    held = sum(x.update for x in plan.parts if x.when == "held")
    fwd = p["activations"].update + p["log-probs"].update
    assert plan.total("update") == held + max(fwd, p["gradients"].update)
    assert plan.total("generation") == sum(x.generation for x in plan.parts)
    assert plan.peak == max(plan.total("update"), plan.total("generation"))
    assert plan.fits(plan.peak / GIB) and not plan.fits(plan.peak / GIB * 0.99)


def test_shared_prefix_counts_each_groups_prompt_once_and_checkpointing_keeps_layer_inputs():
    a = _parts(plan_memory(_cfg("train.shared_prefix=true"), device="cpu", prompt_tokens=16, shape=SHAPE))
    b = _parts(plan_memory(_cfg("train.activation_checkpointing=true"), device="cpu", prompt_tokens=16, shape=SHAPE))
    tokens = 2 * 16 + 8 * 32  # 8 rows = 2 groups of 4: two prompts, eight completions
    per_layer = (18 * 128 + 4 * 512) * 4
    assert a["activations"].update == tokens * 4 * per_layer
    assert b["activations"].update == tokens * (4 * 128 * 4 + per_layer)  # each layer's input + one layer's inside
    assert b["activations"].update < a["activations"].update


def test_logprob_chunks_bound_the_head_and_autocast_halves_activations():
    whole = _parts(plan_memory(_cfg("model.logprob_chunk_tokens=1024"), device="cpu", prompt_tokens=16, shape=SHAPE))
    chunked = _parts(plan_memory(_cfg("model.logprob_chunk_tokens=64"), device="cpu", prompt_tokens=16, shape=SHAPE))
    assert whole["log-probs"].update == 3 * 256 * 1000 * 4 and chunked["log-probs"].update == 3 * 64 * 1000 * 4
    amp = _parts(plan_memory(_cfg("train.autocast=bfloat16"), device="cpu", prompt_tokens=16, shape=SHAPE))
    assert amp["activations"].update * 2 == whole["activations"].update
    assert amp["weights"].update == whole["weights"].update  # float32 storage either way


def test_fsdp_shards_weights_gradients_optimizer_but_not_activations():
    cfg = _cfg("train.distributed.strategy=fsdp", "rollout.prompts_per_step=8")
    one = _parts(plan_memory(cfg, world_size=1, device="cuda", prompt_tokens=16, shape=SHAPE))
    four = _parts(plan_memory(cfg, world_size=4, device="cuda", prompt_tokens=16, shape=SHAPE))
    for name in ("gradients", "optimizer"):
        assert four[name].update * 4 == one[name].update
    assert four["weights"].update * 4 == one["weights"].update
    # hf decodes with the trainer's model: the whole model is gathered on every rank while generating
    assert four["weights"].generation == one["weights"].update / 4 + one["weights"].update
    assert four["activations"].update == one["activations"].update
    # the no-grad passes run on the shards: the root unit and one layer gathered (in the compute dtype: float32
    # here). By hand: a layer is 128 x (2 x 128 + 2 x 64) attention + 3 x 128 x 512 MLP + 2 x 128 norms = 246,016;
    # the root what the 4 layers leave of 1,000,000 = 15,936
    assert four["weights"].during("passes") == one["weights"].update / 4 + (15_936 + 246_016) * 4
    assert four["log-probs"].during("passes") == four["log-probs"].update and four["gradients"].during("passes") == 0
    ddp = _parts(plan_memory(_cfg("train.distributed.strategy=ddp", "rollout.prompts_per_step=8"), world_size=4,
                             device="cuda", prompt_tokens=16, shape=SHAPE))
    assert ddp["optimizer"].update == one["optimizer"].update


def test_the_reference_is_sharded_under_fsdp_and_whole_under_ddp():
    kl = ("algorithm.kl.coef=0.05", "rollout.prompts_per_step=8")
    fsdp = _parts(plan_memory(_cfg("train.distributed.strategy=fsdp", *kl), world_size=4, device="cuda",
                              prompt_tokens=16, shape=SHAPE))
    ddp = _parts(plan_memory(_cfg("train.distributed.strategy=ddp", *kl), world_size=4, device="cuda",
                             prompt_tokens=16, shape=SHAPE))
    P = SHAPE.params
    assert ddp["reference"].update == ddp["reference"].generation == ddp["reference"].during("passes") == P * 4
    # FSDP: a quarter on each rank in every phase; its passes gather its own root and one layer after the policy's
    # (the weights part counts one such set), so the passes hold its shards only
    for phase in ("update", "generation", "passes"):
        assert fsdp["reference"].during(phase) == P * 4 / 4
    assert "1/4 sharded" in fsdp["reference"].note and "every rank" in ddp["reference"].note
    assert "reference" not in _parts(plan_memory(_cfg(), device="cpu", prompt_tokens=16, shape=SHAPE))


def test_auto_dtype_is_bfloat16_on_a_gpu_float32_on_cpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    gpu = _parts(plan_memory(_cfg("model.dtype=auto"), device="cuda", prompt_tokens=16, shape=SHAPE))
    cpu = _parts(plan_memory(_cfg("model.dtype=auto"), device="cpu", prompt_tokens=16, shape=SHAPE))
    assert gpu["weights"].update == SHAPE.params * 2 and cpu["weights"].update == SHAPE.params * 4


def test_lora_trains_only_the_adapters():
    s = Shape(**{**SHAPE.__dict__, "lora_params": 5000})
    p = _parts(plan_memory(_cfg(), device="cpu", prompt_tokens=16, shape=s))
    assert p["gradients"].update == 5000 * 4 and p["optimizer"].update == 2 * 5000 * 4
    assert p["weights"].update == SHAPE.params * 4


def test_vllm_rule_takes_its_share_of_the_card_and_sleeps_during_the_update():
    base = ["rollout.engine=vllm", "rollout.vllm.gpu_memory_utilization=0.5"]
    awake = _parts(plan_memory(_cfg(*base), device="cuda", prompt_tokens=16, shape=SHAPE, card_gib=80))
    asleep = _parts(plan_memory(_cfg(*base, "rollout.vllm.sleep_mode=true"), device="cuda", prompt_tokens=16,
                                shape=SHAPE, card_gib=80))
    assert awake["engine"].generation == asleep["engine"].generation == 40 * GIB
    assert awake["engine"].update == 40 * GIB and asleep["engine"].update == 0
    cpu = _parts(plan_memory(_cfg(*base, "rollout.vllm.kv_cache_gib=2"), device="cpu", prompt_tokens=16, shape=SHAPE))
    assert cpu["engine"].update == cpu["engine"].generation == 2.25 * SHAPE.params * 4 + 2 * GIB + 0.45 * GIB
    # under FSDP vLLM never reads the trainer's model: no whole copy on the ranks, one sync bucket instead
    fsdp = _parts(plan_memory(_cfg(*base, "rollout.prompts_per_step=8", "train.distributed.strategy=fsdp",
                                   "rollout.vllm.sync_bucket_mb=256"), world_size=4, device="cuda", prompt_tokens=16,
                              shape=SHAPE, card_gib=80))
    assert fsdp["weights"].generation == fsdp["weights"].update == SHAPE.params * 4 / 4
    assert fsdp["engine"].generation == 40 * GIB + 256 * 2**20


def test_an_engine_without_a_rule_is_said_not_counted_and_a_rule_is_found_by_name():
    name = "plan-test-engine"
    ENGINES.register(name)(lambda *a, **k: None)
    q = MemoryQuery(shape=SHAPE, device="cpu", rollout=None, rows=1, sequence=1, bytes_per_value=4, card_bytes=0)
    assert "not counted" in engine_memory(name, q).note
    memory_rule(name)(lambda q: EngineMemory(1.0, 2.0, "mine"))
    assert engine_memory(name, q) == EngineMemory(1.0, 2.0, "mine")


def test_plan_command(tmp_path):
    from rlvr.cli import app

    kw, _ = QWEN25["7b"]
    path = _config_dir(tmp_path, "7b", **kw)
    runner = CliRunner()
    args = ["plan", "-c", "configs/gpu/node-8gpu-7b.yaml", "--set", f"model.path={path}", "--gpu-gib", "80",
            "--json"]
    r = runner.invoke(app, [*args, "--world-size", "8"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["fits"] is True and out["world_size"] == 8 and out["device"] == "cuda"
    parts = {p["name"]: p for p in out["parts"]}
    assert parts["optimizer"]["update_gib"] == pytest.approx(2 * 7_615_616_512 * 4 / 8 / GIB)
    # the same run on one card does not fit, and the command says so with exit code 1
    r1 = runner.invoke(app, [*args, "--world-size", "1"])
    assert r1.exit_code == 1 and json.loads(r1.stdout)["fits"] is False
    r2 = runner.invoke(app, ["plan", "--set", f"model.path={tmp_path / 'missing'}"])
    assert r2.exit_code == 2 and "no config.json" in r2.output


def test_plan_command_measures_the_tasks_prompts():
    from rlvr.cli import app

    r = CliRunner().invoke(app, ["plan", "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["tokens"]["prompt"] < 16  # the demo's additions, measured with its tokenizer, not the 128 default
    assert out["device"] == "cpu" and out["fits"] is True


@pytest.mark.slow
def test_plan_within_fifteen_percent_of_a_measured_run(tmp_path):
    import argparse
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from plan_memory import run_shape

    args = argparse.Namespace(prompts=4, group=4, new_tokens=32, prompt_words=32, micro=16, threads=2, set=[])
    r = run_shape("s256", args, tmp_path)
    assert 0.85 <= r["ratio"] <= 1.15, r
