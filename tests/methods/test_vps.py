"""GRPO-VPS (arXiv:2604.20659): segment boundaries, the belief probe against a naive per-prefix computation, a
hand-worked oracle, the transform's hand-computed values, and a run of the recipe."""

from dataclasses import replace

import pytest
import torch

import rlvr.models.logprobs as logprobs_mod
from rlvr.algorithms.registry import TransformInputs
from rlvr.algorithms.transforms.vps import VPSParams, segment_zscores, vps
from rlvr.config.run import load_config
from rlvr.core.batch import build_batch
from rlvr.core.types import Completion, Example
from rlvr.models import TinyModelConfig, build_tiny_model, char_tokenizer
from rlvr.models.logprobs import completion_logprobs
from rlvr.passes.belief import belief_extras, boundaries
from rlvr.train.loop import settings


def test_boundaries():
    assert boundaries([0, 1, 0, 0, 1, 0], 6, 16) == [2, 5, 6]
    assert boundaries([0, 1, 0, 0, 0, 1], 6, 16) == [2, 6]  # the last token ends a segment already
    assert boundaries([0, 0, 0], 3, 16) == [3]  # no delimiter: one segment
    many = boundaries([1] * 40, 40, 16)  # 40 segments, at most 16: every 3rd boundary and the last
    assert many == [3, 6, 9, 12, 15, 18, 21, 24, 27, 30, 33, 36, 39, 40] and len(many) <= 16


def _comps(tok):
    texts = [("1+2=", "3. so 3"), ("4+4=", "8, done. 8"), ("2+2=", "4")]
    return [Completion(str(i), tok.encode(p, add_special_tokens=False), tok.encode(c, add_special_tokens=False),
                       None, "stop", c, group=0) for i, (p, c) in enumerate(texts)]


def test_belief_probe_equals_a_naive_per_prefix_computation():
    tok = char_tokenizer()
    model = build_tiny_model(TinyModelConfig(hidden_size=32, intermediate_size=64, num_layers=1), tok, seed=3)
    comps = _comps(tok)
    examples = [Example(c.example_id, "", a) for c, a in zip(comps, ("3", "8", "4"))]
    batch = build_batch(comps, [1.0, 1.0, 0.0], tok.pad_token_id)
    from rlvr.passes.segments import segment_ends

    ends = segment_ends(batch, tok)
    cfg = load_config()
    out = belief_extras(model, batch, ends, comps, examples, tok, settings(cfg), " The answer is ", 16)

    def naive_belief(comp, prefix_len, answer):
        probe = Completion("p", comp.prompt_ids + comp.completion_ids[:prefix_len] + tok.encode(
            " The answer is ", add_special_tokens=False), tok.encode(answer, add_special_tokens=False), None, "stop", "")
        b = build_batch([probe], [0.0], tok.pad_token_id)
        with torch.no_grad():
            lp, _ = completion_logprobs(model, b, 1.0)
        return float((lp * b.completion_mask).sum() / b.completion_mask.sum())

    for i, (comp, ex) in enumerate(zip(comps, examples)):
        cuts = [0] + boundaries(ends[i].tolist(), len(comp.completion_ids), 16)
        b = [naive_belief(comp, t, ex.answer) for t in cuts]
        for k in range(1, len(cuts)):
            seg = slice(cuts[k - 1], cuts[k])
            assert torch.allclose(out["belief_progress"][i, seg], torch.tensor(b[k] - b[k - 1]), atol=1e-5)
            assert bool((out["belief_segment"][i, seg] == k).all())
    assert float(out["belief_segment"][2].max()) == 1.0  # "4": one segment
    assert float(out["belief_segment"][1].max()) == 3.0  # "8," / " done." / " 8"
    pad = batch.completion_mask == 0
    assert float(out["belief_progress"][pad].abs().sum()) == 0.0 and float(out["belief_segment"][pad].sum()) == 0.0


def test_the_methods_oracle_beliefs_give_progress_1_0_1p5(monkeypatch):
    """beliefs [-3, -2, -2, -0.5] at the 4 boundaries of a 3-segment completion -> Delta = [+1, 0, +1.5]."""
    tok = char_tokenizer()
    comp = Completion("0", [5, 6], tok.encode("a,b,c", add_special_tokens=False), None, "stop", "a,b,c")
    batch = build_batch([comp], [1.0], tok.pad_token_id)
    beliefs = torch.tensor([-3.0, -2.0, -2.0, -0.5])

    def fake(model, probe_batch, **s):  # one answer token per probe: its log-prob is the belief
        assert probe_batch.size == 4 and s["temperature"] == 1.0
        return beliefs[:, None] * probe_batch.completion_mask

    monkeypatch.setattr(logprobs_mod, "batch_logprobs", fake)
    ends = torch.tensor([[0.0, 1.0, 0.0, 1.0, 0.0]])  # "a," | "b," | "c"
    out = belief_extras(None, batch, ends, [comp], [Example("0", "", "7")], tok, settings(load_config()), " = ", 16)
    assert out["belief_progress"][0].tolist() == [1.0, 1.0, 0.0, 0.0, 1.5]
    assert out["belief_segment"][0].tolist() == [1.0, 1.0, 2.0, 2.0, 3.0]


def _inputs(adv, progress, segment, group, mask):
    return TransformInputs(rewards=torch.zeros(len(group), dtype=torch.float64), group_index=torch.tensor(group),
                           mask=mask, advantages=adv, extras={"belief_progress": progress, "belief_segment": segment})


def test_vps_adds_the_group_normalised_segment_progress():
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]])
    adv = torch.tensor([[0.5], [-0.5]]) * mask
    progress = torch.tensor([[1.0, 0.0, 0.0], [-1.0, 3.0, 0.0]])  # segments: row 0 {1}, {0, 0}; row 1 {-1}, {3}
    segment = torch.tensor([[1.0, 2.0, 2.0], [1.0, 2.0, 0.0]])
    out, m = vps(_inputs(adv, progress, segment, [0, 0], mask), VPSParams(gamma=0.5))
    vals = torch.tensor([1.0, 0.0, -1.0, 3.0], dtype=torch.float64)  # one value per segment
    z = (vals - vals.mean()) / (vals.std(unbiased=False) + 1e-6)
    want = torch.tensor([[0.5 + 0.5 * z[0], 0.5 + 0.5 * z[1], 0.5 + 0.5 * z[1]],
                         [-0.5 + 0.5 * z[2], -0.5 + 0.5 * z[3], 0.0]])
    assert torch.allclose(out.double(), want, atol=1e-6)
    assert m["segments_mean"] == 2.0
    same, _ = vps(_inputs(adv, progress, segment, [0, 0], mask), VPSParams(gamma=0.0))
    assert torch.equal(same, adv)  # gamma = 0: plain GRPO


def test_groups_are_normalised_separately_and_a_flat_group_adds_nothing():
    mask = torch.ones(4, 2)
    progress = torch.tensor([[2.0, 2.0], [2.0, 2.0], [0.0, 4.0], [1.0, 1.0]])
    segment = torch.tensor([[1.0, 1.0], [1.0, 1.0], [1.0, 2.0], [1.0, 1.0]])
    z = segment_zscores(progress, segment, torch.tensor([0, 0, 1, 1]), mask)
    assert float(z[:2].abs().max()) == 0.0  # group 0: every segment progressed alike
    vals = torch.tensor([0.0, 4.0, 1.0], dtype=torch.float64)
    want = (vals - vals.mean()) / (vals.std(unbiased=False) + 1e-6)
    assert torch.allclose(z[2], want[:2]) and torch.allclose(z[3], want[2].repeat(2))


def test_the_recipe_trains_and_reports_its_metrics(tiny_cfg_overrides):
    from rlvr.run.train import train

    summary = train(load_config(recipe="grpo_vps", overrides=tiny_cfg_overrides + ["train.steps=2", "sft.steps=0",
                                                                                    "algorithm.kl.coef=0"]))
    final = summary["final_metrics"]
    assert final["advantage_transform/vps/segments_mean"] >= 1.0
    assert "advantage_transform/vps/progress_mean" in final
