"""``rollout.native.compile``: the native engine's decode step through ``torch.compile``.

The compiled step attends over the whole static cache with future and pad slots masked; it must compute the
eager step's logits (to float tolerance) at every step, for left-padded prompts, grouped-query attention,
biases, sliding windows and the unfused projections, and compile few graphs over many batch shapes. The tests that
compile are marked ``compile`` (``pytest -m compile``: about a minute of compiling on 2 CPU cores)."""

import pytest
import torch

from rlvr.core.batch import build_batch
from rlvr.core.types import Example, GenerationRequest, SamplingParams
from rlvr.models import TinyModelConfig, build_tiny_model, char_tokenizer, completion_logprobs
from rlvr.engines import NativeEngine
from rlvr.engines import native as native_mod
from rlvr.engines.native_model import COMPILE_BUCKET, Decoder

TOK = char_tokenizer()
REQS = [GenerationRequest(Example("a", "7=", "7"), 3), GenerationRequest(Example("b", "12+30=", "42"), 4),
        GenerationRequest(Example("c", "hello, 4+5 is", "9"), 2)]


def _chaotic(model):
    with torch.no_grad():  # larger weights: a wrong position, mask or cache slot changes the logits visibly
        for name, p in model.named_parameters():
            if p.dim() == 2 and "embed" not in name:
                p.mul_(8.0)
    return model.eval()


def _qwen2():
    cfg = TinyModelConfig(arch="qwen2", hidden_size=32, intermediate_size=64, num_layers=2, num_heads=4,
                          num_kv_heads=2)
    return _chaotic(build_tiny_model(cfg, TOK, seed=0))


def _mistral_window():
    """Window 4, shorter than prompt + completion: the compiled step's window mask is exercised."""
    from transformers import MistralConfig, MistralForCausalLM

    torch.manual_seed(0)
    return _chaotic(MistralForCausalLM(MistralConfig(
        vocab_size=len(TOK), hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, sliding_window=4, max_position_embeddings=128, pad_token_id=TOK.pad_token_id,
        eos_token_id=TOK.eos_token_id)))


def _prompts(texts):
    ids = [TOK(t)["input_ids"] for t in texts]
    width = max(map(len, ids))
    out = torch.full((len(ids), width), TOK.pad_token_id)
    mask = torch.zeros_like(out)
    for i, p in enumerate(ids):
        out[i, width - len(p):] = torch.tensor(p)
        mask[i, width - len(p):] = 1
    return out, mask


def _decode(dec, ids, mask, row_group, steps, feed):
    """Logits of every step, feeding the tokens ``feed`` gives (so both decoders see the same inputs)."""
    out = [dec.start(ids, mask, row_group, steps)]
    for t in range(steps - 1):
        out.append(dec.step(feed[:, t], t))
    dec.release()
    return torch.stack(out, 1)


@pytest.mark.compile
@pytest.mark.parametrize("make,fuse", [(_qwen2, True), (_mistral_window, False)], ids=["qwen2-fused", "mistral-window"])
def test_compiled_step_computes_the_eager_logits(make, fuse):
    model = make()
    ids, mask = _prompts(["7=", "12+30=", "hello, 4+5 is"])  # left padding 0 to 11
    row_group = torch.tensor([0, 0, 1, 1, 1, 2])
    steps = 12
    feed = torch.randint(3, len(TOK) - 1, (6, steps), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        eager = _decode(Decoder(model, fuse=fuse), ids, mask, row_group, steps, feed)
        compiled_dec = Decoder(model, fuse=fuse, compile=True)
        compiled = _decode(compiled_dec, ids, mask, row_group, steps, feed)
    assert compiled_dec.fuse is fuse
    torch.testing.assert_close(compiled, eager, rtol=1e-5, atol=1e-4)
    # each step's logits differ from the last, so a wrong slot, position or mask would show
    assert (eager[:, 1:] - eager[:, :-1]).abs().amax(-1).min() > 0.05  # 500x the tolerance


@pytest.mark.compile
def test_the_window_matters_to_the_compiled_step():
    """Without its window the windowed model's compiled logits change: the mask is not a no-op."""
    model = _mistral_window()
    ids, mask = _prompts(["12+30=", "hello, 4+5 is"])
    feed = torch.randint(3, len(TOK) - 1, (2, 10), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        ref = _decode(Decoder(model, compile=True), ids, mask, torch.tensor([0, 1]), 10, feed)
        full = Decoder(model, compile=True)
        for layer in full.layers:
            layer.window = None
        unwindowed = _decode(full, ids, mask, torch.tensor([0, 1]), 10, feed)
    assert not torch.allclose(ref[:, 4:], unwindowed[:, 4:], atol=1e-3)


@pytest.mark.compile
def test_batch_shapes_share_few_compiled_graphs():
    """Widths within one bucket share the first (static) graph; a new cache length, then a new row count, make
    that size dynamic (one recompile each), after which no shape compiles again."""
    from torch._dynamo.utils import counters

    torch._dynamo.reset()  # graphs are cached per function: start from none
    dec = Decoder(_qwen2(), compile=True)
    feed = torch.randint(3, len(TOK) - 1, (4, 6), generator=torch.Generator().manual_seed(2))
    shapes = [(["12+30=", "1+1="], [0, 1]), (["7=", "9+9="], [0, 1]),  # widths 6 and 4 + 6 steps: one bucket
              (["hello, 4+5 is", "7="], [0, 1]), (["1+2=", "hello, 4+5 is"], [0, 0, 1, 1]), (["a" * 30], [0, 0, 0])]
    graphs, base = [], counters["stats"]["unique_graphs"]
    with torch.no_grad():
        for texts, rows in shapes + shapes[::-1]:
            ids, mask = _prompts(texts)
            _decode(dec, ids, mask, torch.tensor(rows), 6, feed[: len(rows)])
            assert dec.width + 6 <= dec.total < dec.width + 6 + COMPILE_BUCKET and dec.total % COMPILE_BUCKET == 0
            graphs.append(counters["stats"]["unique_graphs"] - base)
    assert graphs[:2] == [1, 1]  # the second width shares the first graph
    assert graphs[-1] <= 3 and graphs[len(shapes) - 1:] == [graphs[-1]] * (len(shapes) + 1)  # nothing new after


@pytest.mark.compile
def test_compiled_engine_samples_the_trainers_distribution():
    """The engine's behaviour log-probs are the trainer's, and at one seed it draws the eager engine's tokens
    (the sampler is the same; logits agree to float rounding, which flips a draw only at an exact tie)."""
    model = _qwen2()
    s = SamplingParams(0.8, 0.95, max_new_tokens=10, seed=4)
    out = NativeEngine(model, TOK, compile=True).generate(REQS, s)
    ref = NativeEngine(model, TOK).generate(REQS, s)
    assert [c.completion_ids for c in out] == [c.completion_ids for c in ref]
    assert len({tuple(c.completion_ids) for c in out}) > 3
    batch = build_batch(out, [0.0] * len(out), TOK.pad_token_id)
    lp, _ = completion_logprobs(model, batch, temperature=0.8)
    torch.testing.assert_close(lp, batch.behaviour_logp, rtol=0, atol=1e-4)


def test_compile_config_is_checked():
    from rlvr.config.run import load_config

    for engine in (["rollout.engine=hf"], ["rollout.engine=ray", "rollout.ray.engine=hf"]):
        with pytest.raises(ValueError, match="rollout.native.compile applies to the native engine"):
            load_config(overrides=["rollout.native.compile=true", *engine])
    for engine in (["rollout.engine=native"], ["rollout.engine=ray", "rollout.ray.engine=native"]):  # Ray workers
        assert load_config(overrides=["rollout.native.compile=true", *engine]).rollout.native.compile


def test_a_missing_cpu_compiler_is_refused_with_what_to_do(monkeypatch):
    monkeypatch.delenv("CXX", raising=False)
    monkeypatch.setattr(native_mod.shutil, "which", lambda name: None)
    with pytest.raises(RuntimeError, match="C.. compiler.*rollout.native.compile=false"):
        NativeEngine(_qwen2(), TOK, compile=True)
    from rlvr.config.run import load_config
    from rlvr.run.preflight import SetupError, check_compiler

    cfg = load_config(overrides=["rollout.engine=native", "rollout.native.compile=true"])
    with pytest.raises(SetupError, match="C.. compiler"):  # `rlvr train` says so before loading anything
        check_compiler(cfg, torch.device("cpu"))
    check_compiler(cfg, torch.device("meta"))  # kernels for other devices are not C++
    check_compiler(load_config(overrides=["rollout.engine=native"]), torch.device("cpu"))  # off: nothing to check


@pytest.mark.compile
def test_a_training_run_decodes_with_the_compiled_step(jsonl_cfg_overrides, tmp_path, monkeypatch):
    """``rlvr train`` with rollout.native.compile: the engine it builds decodes through the compiled step, and the
    run learns from its rollouts (the behaviour log-probs are the trainer's before the first update)."""
    import json

    from rlvr.config.run import load_config
    from rlvr.run.train import train

    calls = []
    original = Decoder._full_step
    monkeypatch.setattr(Decoder, "_full_step", lambda self, *a: calls.append(1) or original(self, *a))
    over = [o for o in jsonl_cfg_overrides if not o.startswith("out=")]
    train(load_config(overrides=over + [f"out={tmp_path / 'run'}", "rollout.engine=native",
                                        "rollout.native.compile=true", "train.steps=2"]))
    metrics = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert calls  # traced by torch.compile (and run eagerly nowhere else)
    assert [m["step"] for m in metrics] == [1, 2]
    assert metrics[0]["logp_mismatch"] < 1e-4
    assert any(m["grad_norm"] > 0 for m in metrics)
