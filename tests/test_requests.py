"""The request and completion model: prefixes to continue, per-request lengths and stops, loss masks and
segments, through the hf engine, the batch and a real training step."""

from dataclasses import replace

import pytest
import torch

from rlvr.core.batch import build_batch
from rlvr.core.types import Completion, Example, GenerationRequest, SamplingParams, Segment
from rlvr.models import TinyModelConfig, build_tiny_model, char_tokenizer
from rlvr.models.logprobs import completion_logprobs
from rlvr.engines.hf import HFEngine


@pytest.fixture(scope="module")
def engine():
    tok = char_tokenizer()
    model = build_tiny_model(TinyModelConfig(hidden_size=32, intermediate_size=64, num_layers=1), tok, seed=3)
    return HFEngine(model, tok, batch_size=64)


def _ids(engine, text):
    return engine.tokenizer(text, add_special_tokens=False)["input_ids"]


EX = Example("e", "12+7=", "19")


def test_a_prefix_continues_exactly_like_the_longer_prompt(engine):
    prefix = _ids(engine, "1")
    sp = SamplingParams(temperature=1.0, max_new_tokens=5, seed=11)
    got = engine.generate([GenerationRequest(EX, 6, prefix_ids=tuple(prefix))], sp)
    ref = engine.generate([GenerationRequest(replace(EX, prompt="12+7=1"), 6)], sp)
    for g, r in zip(got, ref):
        assert g.completion_ids == prefix + r.completion_ids  # the same input ids, the same seed
        assert g.prompt_ids == engine.generate([GenerationRequest(EX, 1)], sp)[0].prompt_ids
        assert g.segments == [Segment(0, 1, "prefix"), Segment(1, 1 + len(r.completion_ids), "sampled")]
        assert g.text == engine.tokenizer.decode(g.completion_ids, skip_special_tokens=True)
        assert g.logprobs is None  # the prefix came without its behaviour log-probs


def test_behaviour_logprobs_of_a_prefixed_completion_match_the_trainer(engine):
    prefix = _ids(engine, "19")
    sp = SamplingParams(temperature=0.7, max_new_tokens=4, seed=5)
    first = engine.generate([GenerationRequest(EX, 1, prefix_ids=tuple(prefix))], sp)[0]
    batch = build_batch([first], [0.0], engine.tokenizer.pad_token_id)
    trainer, _ = completion_logprobs(engine.model, batch, 0.7)
    known = tuple(trainer[0, : len(prefix)].tolist())
    comps = engine.generate([GenerationRequest(EX, 3, prefix_ids=tuple(prefix), prefix_logprobs=known)], sp)
    batch = build_batch(comps, [0.0] * 3, engine.tokenizer.pad_token_id)
    trainer, _ = completion_logprobs(engine.model, batch, 0.7)
    assert torch.allclose(batch.behaviour_logp * batch.completion_mask, trainer * batch.completion_mask, atol=1e-5)


def test_inserted_tokens_are_masked_out_of_the_loss(engine):
    inserted = _ids(engine, "=>")
    sp = SamplingParams(max_new_tokens=3, seed=1)
    comps = engine.generate([GenerationRequest(EX, 2, prefix_ids=tuple(inserted), prefix_source="inserted",
                                               prefix_logprobs=(0.0, 0.0))], sp)
    batch = build_batch(comps, [1.0, 0.0], engine.tokenizer.pad_token_id)
    for i, c in enumerate(comps):
        assert c.mask() == [0.0, 0.0] + [1.0] * (len(c) - 2)
        assert batch.completion_mask[i, : len(c)].tolist() == c.mask()
        assert int(batch.lengths[i]) == len(c)  # inserted tokens still count as completion tokens


def test_explicit_loss_mask_wins_and_must_fit():
    c = Completion("x", [1, 2], [5, 6, 7], None, "stop", "", loss_mask=[1.0, 0.0, 1.0],
                   segments=[Segment(0, 3, "inserted")])
    assert c.mask() == [1.0, 0.0, 1.0]
    with pytest.raises(ValueError, match="loss_mask has 2 entries for 3 tokens"):
        replace(c, loss_mask=[1.0, 1.0]).mask()


def test_per_request_lengths_and_stop_tokens(engine):
    sp = SamplingParams(temperature=1.0, max_new_tokens=8, seed=2)
    short, long_ = GenerationRequest(EX, 16, max_new_tokens=2), GenerationRequest(EX, 16)
    comps = engine.generate([short, long_], sp)
    assert [c.group for c in comps] == [0] * 16 + [1] * 16  # request order kept across chunks
    assert all(len(c) <= 2 for c in comps[:16]) and max(len(c) for c in comps[16:]) > 2
    assert all(c.finish_reason == "length" for c in comps[:16] if engine.tokenizer.eos_token_id not in c.completion_ids)
    # stop at a frequent token: pick the most common first sampled token
    first = torch.tensor([c.completion_ids[0] for c in comps[16:]]).mode().values.item()
    stopped = engine.generate([GenerationRequest(EX, 16, stop_token_ids=(first,))], sp)
    assert any(c.completion_ids[-1] == first for c in stopped)
    for c in stopped:
        assert first not in c.completion_ids[:-1]  # nothing generated after the first stop token
        if c.completion_ids[-1] == first:
            assert c.finish_reason == "stop"


def test_stop_strings_cut_after_the_token_that_completes_them(engine):
    sp = SamplingParams(temperature=1.0, max_new_tokens=8, seed=4)
    plain = engine.generate([GenerationRequest(EX, 24)], sp)
    text = next(c.text for c in plain if len(c.text) >= 3)
    stop = text[1:3]
    cut = engine.generate([GenerationRequest(EX, 24, stop=(stop,))], sp)
    assert [c.completion_ids for c in plain] != [c.completion_ids for c in cut] or stop not in text
    for p, c in zip(plain, cut):
        assert p.completion_ids[: len(c)] == c.completion_ids  # same samples, cut short
        if stop in p.text:  # one character per token: the text ends exactly with the stop string
            assert c.text.endswith(stop) and stop not in engine.tokenizer.decode(c.completion_ids[:-1])
            assert c.finish_reason == "stop"


def test_bad_requests_are_refused():
    with pytest.raises(ValueError, match="prefix_logprobs has 1 entries for 2 prefix tokens"):
        GenerationRequest(EX, 1, prefix_ids=(1, 2), prefix_logprobs=(0.0,))
    with pytest.raises(ValueError, match="n >= 0"):
        GenerationRequest(EX, -1)


def test_a_training_step_on_completions_with_inserted_spans(tiny_cfg_overrides, monkeypatch):
    """An engine returning multi-span completions (as a multi-turn driver does) trains through the same
    batch, advantage and loss code; only the sampled spans carry gradient."""
    from rlvr.config.run import load_config
    from rlvr.train.loop import rl_step
    from rlvr.run.train import build_components, build_task
    from rlvr.models.loading import load_model

    cfg = load_config(overrides=tiny_cfg_overrides + ["sft.steps=0", "algorithm.minibatches=1"])
    model, tok = load_model(cfg.model, seed=0)
    c = build_components(cfg, model, tok, build_task(cfg))
    inner = c.engine.generate
    tool = _ids(c.engine, "[t]")

    def with_tool_output(requests, sampling):
        out = []
        for comp in inner(requests, sampling):
            ids = tool + comp.completion_ids
            out.append(replace(comp, completion_ids=ids, logprobs=[0.0] * len(tool) + list(comp.logprobs),
                               segments=[Segment(0, len(tool), "inserted"), Segment(len(tool), len(ids))]))
        return out

    monkeypatch.setattr(c.engine, "generate", with_tool_output)
    import rlvr.train.loop as loop_mod

    seen = {}
    real_update = loop_mod.update_policy
    monkeypatch.setattr(loop_mod, "update_policy", lambda *a, **k: seen.setdefault("batch", a[3]) and real_update(*a, **k))
    m = rl_step(cfg, c, 0)
    assert all(torch.isfinite(torch.tensor(v)) for v in m.values() if isinstance(v, float))
    b = seen["batch"]
    assert bool((b.completion_mask[:, : len(tool)] == 0).all())  # the inserted span never enters the loss
    assert torch.equal(b.completion_mask.sum(-1), (b.lengths - len(tool)).float())  # every sampled token does
    assert m["completion_length"] >= len(tool)
