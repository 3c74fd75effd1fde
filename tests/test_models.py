"""Tiny model factory, local HF directory loading, and chunked log-probs."""

import pytest
import torch
import torch.nn.functional as F

from rlvr.core.batch import build_batch
from rlvr.core.types import Completion
from rlvr.models import ModelConfig, TinyModelConfig, build_tiny_model, char_tokenizer, completion_logprobs, load_model
from rlvr.models.logprobs import token_logprobs_from_hidden


@pytest.fixture(scope="module")
def tiny():
    tok = char_tokenizer()
    return build_tiny_model(TinyModelConfig(hidden_size=32, intermediate_size=64, num_layers=1), tok, seed=3), tok


def _batch(tok, pairs):
    comps = []
    for i, (p, c) in enumerate(pairs):
        comps.append(Completion(str(i), tok(p)["input_ids"], tok(c)["input_ids"] + [tok.eos_token_id], None, "stop", c, i))
    return build_batch(comps, [0.0] * len(comps), tok.pad_token_id)


def test_char_tokenizer_round_trips():
    tok = char_tokenizer()
    for text in ["12+34=", "a b\nc", "x/y=0.5!"]:
        ids = tok(text, add_special_tokens=True)["input_ids"]
        assert len(ids) == len(text) and tok.decode(ids) == text
    assert tok.pad_token_id != tok.eos_token_id


def test_tiny_model_is_seeded(tiny):
    m, tok = tiny
    other = build_tiny_model(TinyModelConfig(hidden_size=32, intermediate_size=64, num_layers=1), tok, seed=3)
    assert all(torch.equal(a, b) for a, b in zip(m.state_dict().values(), other.state_dict().values()))


@pytest.mark.parametrize("arch", ["qwen2", "llama"])
def test_local_hf_directory_round_trip(tmp_path, arch):
    cfg = ModelConfig(tiny=TinyModelConfig(arch=arch, hidden_size=32, intermediate_size=64, num_layers=1))
    model, tok = load_model(cfg, seed=1)
    model.save_pretrained(tmp_path / "m")
    tok.save_pretrained(tmp_path / "m")
    loaded, tok2 = load_model(ModelConfig(path=str(tmp_path / "m")))
    ids = torch.tensor([tok("12 + 7 =")["input_ids"]])
    assert tok2("12 + 7 =")["input_ids"] == ids[0].tolist()  # spaces survive (Qwen2's class would drop them)
    assert tok2.decode(ids[0]) == "12 + 7 ="
    assert torch.allclose(model(ids).logits, loaded(ids).logits, atol=1e-6)
    assert type(loaded).__name__.lower().startswith(arch)


def test_missing_model_dir_fails_clearly(tmp_path):
    with pytest.raises(FileNotFoundError, match="not a local directory"):
        load_model(ModelConfig(path=str(tmp_path / "nope")))


def test_logprobs_match_full_logits_and_ignore_padding(tiny):
    m, tok = tiny
    b = _batch(tok, [("1+2=", "3"), ("10+20=", "30"), ("5=", "5555")])
    lp, ent = completion_logprobs(m, b, temperature=0.7, chunk_tokens=2, with_entropy=True)
    logits = m(input_ids=b.input_ids, attention_mask=b.attention_mask, position_ids=b.position_ids).logits
    p = b.prompt_len
    full = F.log_softmax(logits[:, p - 1:-1].float() / 0.7, -1)
    want = full.gather(-1, b.input_ids[:, p:, None]).squeeze(-1) * b.completion_mask
    assert torch.allclose(lp, want, atol=1e-5)
    want_ent = -(full.exp() * full).sum(-1) * b.completion_mask
    assert torch.allclose(ent, want_ent, atol=1e-5)
    assert torch.all(lp[b.completion_mask == 0] == 0)


def test_chunked_gradients_equal_unchunked(tiny):
    m, tok = tiny
    b = _batch(tok, [("1+2=", "3"), ("10+20=", "30")])
    grads = []
    for chunk in (1, 10_000):
        m.zero_grad()
        lp, _ = completion_logprobs(m, b, chunk_tokens=chunk)
        lp.sum().backward()
        grads.append([p.grad.clone() for p in m.parameters()])
    for a, c in zip(*grads):
        assert torch.allclose(a, c, atol=1e-6)


def test_chunked_head_never_materialises_full_vocab():
    """With chunking, the largest float tensor alive is chunk x vocab, not tokens x vocab."""
    torch.manual_seed(0)
    vocab, hidden, k, chunk = 5000, 16, 64, 8
    head = torch.nn.Linear(hidden, vocab, bias=False)
    h = torch.randn(k, hidden, requires_grad=True)
    t = torch.randint(0, vocab, (k,))
    sizes = []

    def pack(x):
        sizes.append(x.numel())
        return x

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda x: x):
        lp, _ = token_logprobs_from_hidden(head, h, t, chunk_tokens=chunk)
    assert max(sizes) <= chunk * vocab
    full = F.log_softmax(head(h), -1).gather(-1, t[:, None]).squeeze(-1)
    assert torch.allclose(lp, full, atol=1e-5)
    lp.sum().backward()
    assert torch.isfinite(h.grad).all()
