"""On-policy distillation (rlvr.algorithms.transforms.distill): the reverse-KL advantage by hand; each divergence's
per-token term equal, summed over the vocabulary, to the gradient of the full-vocabulary divergence TRL computes;
exactly zero signal from a teacher equal to the student, a real signal from another, and the refusals."""

from __future__ import annotations

import json

import pytest
import torch

from rlvr.algorithms.registry import ADVANTAGE_TRANSFORMS, TransformInputs
from rlvr.config.run import ConfigError, load_config


def test_the_advantage_by_hand():
    from rlvr.algorithms.transforms.distill import DistillParams, distill

    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    adv = torch.tensor([[0.5, 0.5, 0.0], [-1.0, 0.0, 0.0]])
    teacher = torch.tensor([[-0.1, -2.0, -9.0], [-0.5, -7.0, -7.0]])
    old = torch.tensor([[-0.3, -1.0, -1.0], [-0.5, -1.0, -1.0]])
    inp = TransformInputs(torch.zeros(2, dtype=torch.float64), torch.tensor([0, 0]), mask, adv,
                          extras={"teacher_model_logp": teacher, "old_logp": old})
    out, m = distill(inp, DistillParams(teacher="/x", coef=2.0))
    want = torch.tensor([[0.5 + 2 * 0.2, 0.5 + 2 * -1.0, 0.0], [-1.0, 0.0, 0.0]], dtype=torch.float64)
    assert torch.allclose(out, want)
    assert m["reverse_kl"] == pytest.approx(-(0.2 - 1.0 + 0.0) / 3)  # -mean over the 3 real tokens
    assert ADVANTAGE_TRANSFORMS.get("distill").needs == frozenset({"teacher_model_logp", "old_logp"})


def _trl_divergence(student_logp, teacher_logp, beta):
    """TRL's GKDTrainer.generalized_jsd_loss for one position, over the whole vocabulary (a naive reference)."""
    import torch.nn.functional as F

    if beta == 0:
        return F.kl_div(student_logp, teacher_logp, reduction="sum", log_target=True)  # KL(T || S)
    if beta == 1:
        return F.kl_div(teacher_logp, student_logp, reduction="sum", log_target=True)  # KL(S || T)
    b = torch.tensor(beta, dtype=student_logp.dtype)
    mix = torch.logsumexp(torch.stack([student_logp + torch.log(1 - b), teacher_logp + torch.log(b)]), dim=0)
    return (beta * F.kl_div(mix, teacher_logp, reduction="sum", log_target=True)
            + (1 - beta) * F.kl_div(mix, student_logp, reduction="sum", log_target=True))


@pytest.mark.parametrize("divergence,beta", [("reverse_kl", 0.5), ("forward_kl", 0.5), ("jsd", 0.1), ("jsd", 0.5),
                                             ("jsd", 0.9), ("jsd", 0.0), ("jsd", 1.0)])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_each_term_is_the_exact_gradient_of_its_divergence_in_expectation(divergence, beta, seed):
    """sum_v S_v A_v grad log S_v (the policy gradient's expectation at one position) == -grad D(S, T), and
    sum_v S_v d_v (the logged estimate's expectation) == D(S, T), against TRL's full-vocabulary formulas."""
    from rlvr.algorithms.transforms.distill import DistillParams, token_terms

    gen = torch.Generator().manual_seed(seed)
    theta = (2 * torch.randn(11, generator=gen, dtype=torch.float64)).requires_grad_()
    teacher = torch.log_softmax(2 * torch.randn(11, generator=gen, dtype=torch.float64), -1)
    p = DistillParams(teacher="/x", divergence=divergence, beta=beta, max_ratio=None)
    trl_beta = {"reverse_kl": 1.0, "forward_kl": 0.0}.get(divergence, beta)
    want = -torch.autograd.grad(_trl_divergence(torch.log_softmax(theta, -1), teacher, trl_beta), theta)[0]
    student = torch.log_softmax(theta, -1)
    term, div = token_terms(student.detach(), teacher, p)  # every token of the vocabulary as "the sample"
    got = torch.autograd.grad((student.detach().exp() * term * student).sum(), theta)[0]
    assert torch.allclose(got, want, atol=1e-12), (got, want)
    student = student.detach()
    assert float((student.exp() * div).sum()) == pytest.approx(float(_trl_divergence(student, teacher, trl_beta)),
                                                                abs=1e-12)


@pytest.mark.parametrize("divergence", ["reverse_kl", "forward_kl", "jsd"])
def test_a_teacher_equal_to_the_student_is_exactly_no_signal(divergence):
    from rlvr.algorithms.transforms.distill import DistillParams, token_terms

    logp = torch.log_softmax(torch.randn(4, 9, dtype=torch.float64), -1)
    term, div = token_terms(logp, logp.clone(), DistillParams(teacher="/x", divergence=divergence))
    assert torch.equal(term, torch.zeros_like(term)) and torch.equal(div, torch.zeros_like(div))


def test_the_forward_ratio_is_capped():
    from rlvr.algorithms.transforms.distill import DistillParams, token_terms

    logp, teacher = torch.tensor([-9.0, -1.0], dtype=torch.float64), torch.tensor([-0.1, -1.5], dtype=torch.float64)
    term, _ = token_terms(logp, teacher, DistillParams(teacher="/x", divergence="forward_kl", max_ratio=10.0))
    assert term.tolist() == pytest.approx([9.0, float(torch.exp(torch.tensor(-0.5))) - 1])
    with pytest.raises(Exception):
        DistillParams(teacher="/x", divergence="jsd", beta=1.5)


def _save(model, tok, path):
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path


def _run(tiny_cfg_overrides, tmp_path, name, *extra):
    from rlvr.run.train import train

    train(load_config(overrides=tiny_cfg_overrides + [f"out={tmp_path / name}", "sft.steps=0", "train.steps=1",
                                                      "train.checkpoint_every=1", *extra]))
    from safetensors.torch import load_file

    lines = [json.loads(x) for x in (tmp_path / name / "metrics.jsonl").read_text().splitlines()]
    return load_file(str(tmp_path / name / "checkpoints" / "step_000001" / "model" / "model.safetensors")), lines


def test_a_teacher_equal_to_the_student_gives_exactly_zero_signal(tiny_cfg_overrides, tmp_path):
    from rlvr.models.loading import load_model

    cfg = load_config(overrides=tiny_cfg_overrides)
    student, tok = load_model(cfg.model, seed=cfg.seed)  # the run's own start (sft.steps=0)
    same = _save(student, tok, tmp_path / "same")
    base, _ = _run(tiny_cfg_overrides, tmp_path, "plain")
    got, lines = _run(tiny_cfg_overrides, tmp_path, "same_teacher",
                      f"algorithm.advantage_transforms=[{{name: distill, teacher: '{same}', coef: 3.0}}]")
    assert lines[0]["advantage_transform/distill/reverse_kl"] == 0.0
    assert all(torch.equal(base[k], got[k]) for k in base)  # the update is the one without distillation

    other, _ = load_model(cfg.model, seed=cfg.seed + 1)  # another teacher: a signal, another update
    diff = _save(other, tok, tmp_path / "other")
    moved, lines = _run(tiny_cfg_overrides, tmp_path, "other_teacher",
                        f"algorithm.advantage_transforms=[{{name: distill, teacher: '{diff}'}}]")
    assert lines[0]["advantage_transform/distill/reverse_kl"] > 0.0
    assert any(not torch.equal(base[k], moved[k]) for k in base)


def test_refusals(tiny_cfg_overrides, tmp_path):
    with pytest.raises(ConfigError, match="not a model directory"):
        load_config(overrides=[f"algorithm.advantage_transforms=[{{name: distill, teacher: '{tmp_path}'}}]"])
    from transformers import LlamaConfig, LlamaForCausalLM

    from rlvr.models import char_tokenizer

    tok = char_tokenizer()
    wide = LlamaForCausalLM(LlamaConfig(vocab_size=len(tok) + 7, hidden_size=32, intermediate_size=64,
                                        num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1))
    path = _save(wide, tok, tmp_path / "wide")
    with pytest.raises(ValueError, match=r"vocabulary has .* entries, the student's"):
        _run(tiny_cfg_overrides, tmp_path, "wide_run",
             f"algorithm.advantage_transforms=[{{name: distill, teacher: '{path}'}}]")
