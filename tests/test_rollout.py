"""The hf rollout engine: seeding, behaviour log-probs, finish reasons, groups."""

import pytest
import torch

from rlvr.core.batch import build_batch
from rlvr.core.types import Example, GenerationRequest, SamplingParams
from rlvr.models import TinyModelConfig, build_tiny_model, char_tokenizer, completion_logprobs
from rlvr.engines import HFEngine


@pytest.fixture(scope="module")
def engine():
    tok = char_tokenizer()
    model = build_tiny_model(TinyModelConfig(hidden_size=32, intermediate_size=64, num_layers=1), tok, seed=0)
    return HFEngine(model, tok, batch_size=5)


REQS = [GenerationRequest(Example("a", "12+3=", "15"), 3), GenerationRequest(Example("b", "7+100=", "107"), 4)]


def test_groups_and_counts(engine):
    out = engine.generate(REQS, SamplingParams(max_new_tokens=5, seed=1))
    assert [c.group for c in out] == [0, 0, 0, 1, 1, 1, 1]
    assert [c.example_id for c in out] == ["a"] * 3 + ["b"] * 4


def test_seeded_sampling_is_reproducible_and_leaves_global_rng(engine):
    state = torch.get_rng_state()
    a = engine.generate(REQS, SamplingParams(max_new_tokens=5, seed=7))
    assert torch.equal(state, torch.get_rng_state())
    b = engine.generate(REQS, SamplingParams(max_new_tokens=5, seed=7))
    c = engine.generate(REQS, SamplingParams(max_new_tokens=5, seed=8))
    assert [x.completion_ids for x in a] == [x.completion_ids for x in b]
    assert [x.completion_ids for x in a] != [x.completion_ids for x in c]


def test_behaviour_logprobs_match_trainer(engine):
    out = engine.generate(REQS, SamplingParams(temperature=0.8, max_new_tokens=6, seed=3))
    batch = build_batch(out, [0.0] * len(out), engine.pad_id)
    lp, _ = completion_logprobs(engine.model, batch, temperature=0.8)
    assert torch.allclose(lp, batch.behaviour_logp, atol=1e-4)


def test_finish_reasons_and_eos(engine):
    out = engine.generate(REQS, SamplingParams(max_new_tokens=3, seed=0))
    for c in out:
        if c.finish_reason == "stop":
            assert c.completion_ids[-1] == engine.eos_id and engine.eos_id not in c.completion_ids[:-1]
        else:
            assert len(c.completion_ids) == 3 and engine.eos_id not in c.completion_ids
        assert len(c.logprobs) == len(c.completion_ids)


def test_stops_on_eos_after_learning_to():
    from rlvr.sft.supervised import sft

    tok = char_tokenizer()
    model = build_tiny_model(TinyModelConfig(hidden_size=32, intermediate_size=64, num_layers=1), tok, seed=0)
    ex = Example("a", "12+3=", "15")
    sft(model, tok, [ex], steps=60, batch_size=4, lr=1e-2)
    out = HFEngine(model, tok).generate([GenerationRequest(ex, 1)], SamplingParams(temperature=0.0, max_new_tokens=6))
    assert out[0].finish_reason == "stop" and out[0].text == "15"
    assert out[0].completion_ids == tok("15")["input_ids"] + [tok.eos_token_id]


def test_greedy_is_deterministic_without_seed(engine):
    a = engine.generate(REQS, SamplingParams(temperature=0.0, max_new_tokens=5))
    b = engine.generate(REQS, SamplingParams(temperature=0.0, max_new_tokens=5))
    assert [x.completion_ids for x in a] == [x.completion_ids for x in b]
    assert len({tuple(x.completion_ids) for x in a[:3]}) == 1


def test_top_p_restricts_to_the_nucleus(engine):
    out = engine.generate([GenerationRequest(Example("a", "1=", "1"), 40)],
                          SamplingParams(top_p=1e-6, max_new_tokens=2, seed=5))
    greedy = engine.generate([GenerationRequest(Example("a", "1=", "1"), 1)],
                             SamplingParams(temperature=0.0, max_new_tokens=2))
    assert all(c.completion_ids == greedy[0].completion_ids for c in out)


@pytest.mark.parametrize("temperature,top_p", [(1.0, 1.0), (0.7, 0.8), (1.3, 0.95), (0.0, 1.0)])
def test_streamed_behaviour_logprobs_equal_generate_output_logits(engine, temperature, top_p):
    """The one-step-at-a-time recorder samples the same tokens and gives the same log-probs as asking
    ``generate`` for every step's logits (the memory-hungry way)."""
    import torch.nn.functional as F

    reqs = [GenerationRequest(Example(str(i), f"{i}+{i}=", "0"), 3) for i in range(5)]
    sampling = SamplingParams(temperature, top_p, max_new_tokens=6, seed=11)
    ours = HFEngine(engine.model, engine.tokenizer, batch_size=64).generate(reqs, sampling)  # one generate call
    m, tok = engine.model, engine.tokenizer
    prompts = [c.prompt_ids for c in ours]
    width = max(map(len, prompts))
    ids = torch.tensor([[tok.pad_token_id] * (width - len(p)) + p for p in prompts])
    attn = (torch.arange(width)[None] >= torch.tensor([width - len(p) for p in prompts])[:, None]).long()
    kw = dict(do_sample=temperature > 0, max_new_tokens=6, eos_token_id=tok.eos_token_id,
              pad_token_id=tok.pad_token_id, return_dict_in_generate=True, output_logits=True, top_k=None,
              temperature=temperature or None, top_p=top_p if temperature else None)
    with torch.random.fork_rng():
        torch.manual_seed(11)
        m.eval()
        gen = m.generate(input_ids=ids, attention_mask=attn, **kw)
    new = gen.sequences[:, width:]
    t = temperature or 1.0
    ref = torch.stack([F.log_softmax(lg.float() / t, -1).gather(1, new[:, i: i + 1]).squeeze(1)
                       for i, lg in enumerate(gen.logits)], 1)
    for i, c in enumerate(ours):
        assert c.completion_ids == new[i, : len(c.completion_ids)].tolist()
        torch.testing.assert_close(torch.tensor(c.logprobs), ref[i, : len(c.logprobs)], rtol=1e-5, atol=1e-6)
