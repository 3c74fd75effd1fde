"""A reward model as a verifier (rlvr.verifiers.reward_model): a local sequence-classification directory scores
completions equal to a direct forward, the same in any batch size, never raising, and trains a run."""

from __future__ import annotations

import json
import math

import pytest
import torch

from rlvr.core.types import Example
from rlvr.verifiers import build_verifier


@pytest.fixture(scope="module")
def rm_dir(tmp_path_factory):
    from transformers import LlamaConfig, LlamaForSequenceClassification

    from rlvr.models import char_tokenizer

    tok = char_tokenizer()
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                      num_attention_heads=2, num_key_value_heads=1, num_labels=2, pad_token_id=tok.pad_token_id,
                      max_position_embeddings=256)
    model = LlamaForSequenceClassification(cfg)
    path = tmp_path_factory.mktemp("rm") / "rm"
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path


def _direct(path, texts, label):
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModelForSequenceClassification.from_pretrained(path).eval()
    with torch.no_grad():
        return [float(model(**tok([t], return_tensors="pt")).logits[0, label]) for t in texts]


def test_scores_equal_a_direct_forward_in_any_batch_size(rm_dir):
    exs = [Example(f"e{i}", f"{i}+{i}=", str(2 * i)) for i in range(7)]
    texts = ["0", "2", "44", "6 is it", "", "8", "100000000"]
    want = _direct(rm_dir, [e.prompt + t for e, t in zip(exs, texts)], 1)
    for bs in (1, 3, 16):
        v = build_verifier("reward_model", {"path": str(rm_dir), "batch_size": bs, "label": 1, "device": "cpu"})
        got = [s.reward for s in v.score_batch(exs, texts)]
        assert got == pytest.approx(want, abs=1e-5), bs  # padding and batching change nothing
    ordered = sorted(want)
    thr = (ordered[3] + ordered[4]) / 2  # between two scores, clear of float rounding
    sig = build_verifier("reward_model", {"path": str(rm_dir), "label": 1, "transform": "sigmoid",
                                          "threshold": thr})
    scores = sig.score_batch(exs, texts)
    assert [s.reward for s in scores] == pytest.approx([1 / (1 + math.exp(-w)) for w in want], abs=1e-5)
    assert [s.components["correct"] for s in scores] == [float(w >= thr) for w in want]


def test_long_inputs_are_cut_from_the_left_and_failures_never_raise(rm_dir):
    v = build_verifier("reward_model", {"path": str(rm_dir), "max_length": 16, "device": "cpu"})
    ex = Example("e", "1+1=", "2")
    long, tail = "9" * 500 + "2", "9" * 15 + "2"
    assert v(ex, long).reward == pytest.approx(v(Example("e", "", "2"), tail).reward, abs=1e-5)  # the last 16 tokens
    broken = build_verifier("reward_model", {"path": str(rm_dir / "missing"), "device": "cpu"})
    s = broken.score_batch([ex, ex], ["2", "3"])
    assert [x.reward for x in s] == [0.0, 0.0] and s[0].info["reason"].startswith("verifier error: reward_model")


def test_a_bad_config_is_refused():
    from rlvr.config.run import ConfigError, load_config

    with pytest.raises(ConfigError, match="verifier_params|reward_model"):
        load_config(overrides=["task.name=jsonl", "task.train_path=x.jsonl", "task.verifier=reward_model",
                               "task.verifier_params.batch_size=0"])


def test_a_run_trains_on_a_reward_model_beside_a_rule(rm_dir, tmp_path, tiny_cfg_overrides):
    """``task.rewards``: the exact answer and the reward model, each logged under its name."""
    from rlvr.config.run import load_config
    from rlvr.run.train import train

    rows = [{"prompt": f"{a}+{b}=", "answer": str(a + b)} for a in range(8) for b in range(8)]
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    keep = [o for o in tiny_cfg_overrides if not o.startswith("task.")]
    out = train(load_config(overrides=keep + [
        "task.name=jsonl", f"task.train_path={data}", "task.eval_fraction=0.25", "sft.steps=0", "train.steps=2",
        f"task.rewards=[{{fn: exact}}, {{fn: reward_model, weight: 0.5, params: {{path: '{rm_dir}', device: cpu}}}}]"]))
    lines = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert all("reward/reward_model" in m and math.isfinite(m["reward/reward_model"]) for m in lines)
    assert out["steps"] == 2
