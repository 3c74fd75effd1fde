"""PEPO: the token weights against a line-by-line transcription of the reference code, the anneal, and the
perception score against a naive per-token, per-image-token, per-layer loop on the tiny VLM."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from PIL import Image

from rlvr.algorithms.registry import ADVANTAGE_TRANSFORMS, TransformInputs, call
from rlvr.algorithms.transforms.pepo import PEPOParams, pepo_weights
from rlvr.core.batch import build_batch
from rlvr.core.types import Completion, Example
from rlvr.models import ModelConfig, TinyModelConfig, load_model
from rlvr.models.prompts import encode_example
from rlvr.passes.perception import vision_similarity


def _reference(vision_scores, entropy, completion_mask, alpha, tau):
    """PepoGRPOTrainer._get_pepo_per_token_outputs_single, after the scores (transcribed)."""
    eps = 1e-6
    completion_mask = completion_mask.bool()
    valid_counts = completion_mask.sum(dim=1, keepdim=True).clamp(min=1)
    v_min = vision_scores.masked_fill(~completion_mask, float("inf")).min(dim=1, keepdim=True).values
    v_max = vision_scores.masked_fill(~completion_mask, float("-inf")).max(dim=1, keepdim=True).values
    v_norm = (vision_scores - v_min) / (v_max - v_min).clamp(min=eps)
    v_norm = torch.where(completion_mask, v_norm, torch.zeros_like(v_norm))
    h_min = entropy.masked_fill(~completion_mask, float("inf")).min(dim=1, keepdim=True).values
    h_max = entropy.masked_fill(~completion_mask, float("-inf")).max(dim=1, keepdim=True).values
    h_norm = (entropy - h_min) / (h_max - h_min).clamp(min=eps)
    h_norm = torch.where(completion_mask, h_norm, torch.zeros_like(h_norm))
    mixed = v_norm + h_norm
    mixed_centered = mixed - (mixed * completion_mask).sum(dim=1, keepdim=True) / valid_counts
    gate = 1.0 + alpha * torch.tanh(mixed_centered)
    gated = vision_scores * gate / tau
    weights = torch.softmax(torch.where(completion_mask, gated, torch.full_like(gated, -float("inf"))), dim=1)
    return weights * valid_counts.to(weights.dtype)


@pytest.mark.parametrize("seed", range(5))
def test_weights_equal_the_reference_on_ragged_rows(seed):
    g = torch.Generator().manual_seed(seed)
    n, t = 6, 9
    lengths = torch.randint(1, t + 1, (n,), generator=g)
    mask = (torch.arange(t)[None] < lengths[:, None]).double()
    score = torch.rand(n, t, generator=g, dtype=torch.float64) * 2 - 1
    ent = torch.rand(n, t, generator=g, dtype=torch.float64) * 3
    alpha, tau = [(0.05, 1.8), (0.5, 1.0), (2.0, 0.3)][seed % 3]
    w = pepo_weights(score, ent, mask, alpha, tau)
    ref = _reference(score, ent, mask, alpha, tau) * mask
    assert torch.allclose(w, ref, atol=1e-12)
    assert torch.allclose((w * mask).sum(1), lengths.double())  # mean 1 over each row's tokens
    assert (w[mask == 0] == 0).all()


def test_hand_computed_weights():
    # one row of two tokens: s = (1, 0), H = (0, 0): v = (1, 0), h = (0, 0) (range 0 -> eps), m = (0.5, -0.5)
    score, ent, mask = torch.tensor([[1.0, 0.0]], dtype=torch.float64), torch.zeros(1, 2, dtype=torch.float64), torch.ones(1, 2)
    g = 1 + 0.5 * np.tanh(np.array([0.5, -0.5]))
    z = np.array([1.0, 0.0]) * g / 2.0
    want = 2 * np.exp(z) / np.exp(z).sum()
    assert np.allclose(pepo_weights(score, ent, mask, 0.5, 2.0).numpy()[0], want, atol=1e-12)


def test_the_transform_anneals_from_identity_to_the_weights_and_is_identity_without_images():
    g = torch.Generator().manual_seed(0)
    adv = torch.randn(4, 5, generator=g)
    mask = torch.ones(4, 5)
    extras = {"vision_similarity": torch.rand(4, 5, generator=g), "entropy": torch.rand(4, 5, generator=g)}
    entry = ADVANTAGE_TRANSFORMS.get("pepo")
    p = PEPOParams()

    def at(step, ex=extras, params=p):
        inp = TransformInputs(torch.zeros(4, dtype=torch.float64), torch.arange(4), mask, adv, extras=ex, step=step,
                              total_steps=10)
        return call(entry, inp, params)[0]

    w = pepo_weights(extras["vision_similarity"].double(), extras["entropy"].double(), mask, p.alpha, p.tau)
    assert torch.allclose(at(0), adv)
    assert torch.allclose(at(5), adv * (0.5 + 0.5 * w.float()), atol=1e-6)
    assert torch.allclose(at(10), adv * w.float(), atol=1e-6)
    assert torch.allclose(at(0, params=PEPOParams(anneal=False)), adv * w.float(), atol=1e-6)
    flat = {"vision_similarity": torch.zeros(4, 5), "entropy": extras["entropy"]}  # a row without images
    assert torch.allclose(at(10, flat), adv, atol=1e-6)


def test_vision_similarity_equals_a_naive_loop():
    cfg = TinyModelConfig(arch="qwen2_vl", hidden_size=32, intermediate_size=64, num_layers=2, max_positions=96)
    model, tok = load_model(ModelConfig(tiny=cfg), seed=1)
    model.eval()
    rng = np.random.default_rng(0)
    img = lambda h, w: Image.fromarray((rng.random((h, w, 3)) * 255).astype("uint8"))  # noqa: E731
    rows = []
    for ex in [Example("a", "<image>n?", "1", images=(img(32, 32),)), Example("b", "<image>x<image>?", "1",
               images=(img(48, 32), img(32, 32))), Example("t", "text only", "1")]:
        ids, vis = encode_example(tok, ex)
        rows.append(Completion(ex.id, ids, tok("12" * (len(rows) + 1))["input_ids"], None, "stop", "", vision=vis))
    batch = build_batch(rows, [0.0] * 3, tok.pad_token_id)
    got = vision_similarity(model, batch, micro_batch_size=2)
    image_id = model.config.image_token_id
    for i, c in enumerate(rows):
        one = build_batch([c], [0.0], tok.pad_token_id)
        if c.vision is None:
            assert (got[i] == 0).all()
            continue
        with torch.no_grad():
            hs = model.model(input_ids=one.input_ids, attention_mask=one.attention_mask,
                             pixel_values=c.vision.pixel_values, image_grid_thw=c.vision.image_grid_thw,
                             mm_token_type_ids=(one.input_ids == image_id).int(), output_hidden_states=True).hidden_states
        p = one.prompt_len
        img_pos = [j for j in range(p) if one.input_ids[0, j] == image_id]
        for t in range(len(c.completion_ids)):
            s = np.mean([np.mean([F.cosine_similarity(h[0, p + t], h[0, j], dim=0).item() for j in img_pos])
                         for h in hs])
            assert abs(got[i, t].item() - s) < 1e-5
        assert (got[i, len(c.completion_ids):] == 0).all()
