"""Token-weighting advantage transforms: UCAS, CEPO / RLSD, RLRT (reconstructed), GRPO-SG (reconstructed), and the
FG-ExPO AKL recipe: oracles, properties, naive loops, real steps."""

import math
from collections import defaultdict

import pytest
import torch

from rlvr.algorithms.registry import ADVANTAGE_TRANSFORMS, TransformInputs
from rlvr.algorithms.transforms.cepo import TeacherCreditParams, cepo, lambda_at, rlsd
from rlvr.algorithms.transforms.grpo_sg import GRPOSGParams, grpo_sg, logit_grad_norm
from rlvr.algorithms.transforms.rlrt import RLRTParams, rlrt
from rlvr.algorithms.transforms.ucas import UCASParams, ucas
from tests.methods.helpers import run_recipe_steps


def inputs(adv, mask=None, group_index=None, step=0, **extras):
    adv = torch.as_tensor(adv, dtype=torch.float32)
    mask = torch.ones_like(adv) if mask is None else torch.as_tensor(mask, dtype=torch.float32)
    gi = torch.zeros(adv.shape[0], dtype=torch.long) if group_index is None else torch.as_tensor(group_index)
    ex = {k: torch.as_tensor(v, dtype=torch.float32) for k, v in extras.items()}
    return TransformInputs(torch.zeros(adv.shape[0], dtype=torch.float64), gi, mask, adv, {}, ex, step, 100)


def test_registered_with_their_extra_passes():
    assert ADVANTAGE_TRANSFORMS.get("ucas").needs == {"self_certainty", "chosen_logit"}
    assert ADVANTAGE_TRANSFORMS.get("cepo").needs == {"teacher_logp", "neg_teacher_logp"}
    assert ADVANTAGE_TRANSFORMS.get("rlsd").needs == {"teacher_logp", "old_logp"}
    assert ADVANTAGE_TRANSFORMS.get("rlrt").needs == {"teacher_logp", "old_logp"}
    assert ADVANTAGE_TRANSFORMS.get("grpo_sg").needs == {"old_logp"}


# --- UCAS --------------------------------------------------------------------------------------------------------

def test_ucas_oracle():
    a = 1 / math.sqrt(2)  # GRPO advantage of rewards [1, 0] with the unbiased std
    adv = [[a, a], [-a, -a]]
    # C = [10, 20] summed over tokens; chosen logits 5 and 0 give n = 1 and n = 0
    inp = inputs(adv, self_certainty=[[4.0, 6.0], [8.0, 12.0]], chosen_logit=[[5.0, 0.0], [5.0, 0.0]])
    out, m = ucas(inp, UCASParams())
    assert out[:, 1].tolist() == pytest.approx([0.84383, -0.90566], abs=1e-5)  # n = 0: A' unchanged
    assert out[:, 0].tolist() == pytest.approx([0.79383, -0.95566], abs=1e-5)  # n = 1: A' - 0.05
    assert m["clamped_frac"] == 0.0


def test_ucas_clamps_positive_tokens_at_zero_and_constant_logits_give_half():
    inp = inputs([[0.03, 0.03], [-0.03, -0.03]], group_index=[0, 1], self_certainty=[[1.0, 1.0], [1.0, 1.0]],
                 chosen_logit=[[5.0, 0.0], [5.0, 0.0]])
    out, m = ucas(inp, UCASParams(beta_pos=0.0, beta_neg=0.0))
    assert out[0].tolist() == pytest.approx([0.0, 0.03])  # max(0.03 - 0.05, 0) = 0: never flipped negative
    assert out[1].tolist() == pytest.approx([-0.08, -0.03])  # negative tokens are not clamped
    assert m["clamped_frac"] == pytest.approx(0.25)
    flat, _ = ucas(inputs([[1.0, -1.0]], self_certainty=[[0.0, 0.0]], chosen_logit=[[3.0, 3.0]]), UCASParams())
    assert flat[0].tolist() == pytest.approx([1.0 - 0.025, -1.0 - 0.025])  # all logits equal: n = 0.5


def naive_ucas(adv_row, sc, logits, mask, gi, bp=0.25, bn=0.35, kappa=0.05, eps=1e-6):
    """The reference code's loops: per-group torch.std (unbiased), batch min-max of the chosen logits."""
    n = len(adv_row)
    C = [float((sc[i] * mask[i]).sum()) for i in range(n)]
    groups = defaultdict(list)
    for i in range(n):
        groups[int(gi[i])].append(C[i])
    valid = logits[mask.bool()]
    lo, hi = valid.min(), valid.max()
    out = torch.zeros_like(logits, dtype=torch.float64)
    for i in range(n):
        vals = torch.tensor(groups[int(gi[i])], dtype=torch.float64)
        mean, std = (0.0, 1.0) if len(vals) == 1 else (vals.mean(), vals.std())
        c = (C[i] - mean) / (std + eps)
        a = float(adv_row[i])
        shaped = a * math.exp(-bp * c) if a > 0 else a * math.exp(bn * c)
        for t in range(logits.shape[1]):
            if not mask[i, t]:
                continue
            nt = 0.5 if torch.isclose(hi, lo) else float((logits[i, t] - lo) / (hi - lo + eps))
            raw = shaped - kappa * nt
            out[i, t] = max(raw, 0.0) if shaped > 0 else raw
    return out


def test_ucas_equals_naive_loops_on_random_ragged_batch():
    g = torch.Generator().manual_seed(0)
    n, t = 9, 6
    gi = torch.tensor([0, 0, 0, 1, 1, 2, 2, 2, 2])
    adv_row = torch.randn(n, generator=g)
    mask = (torch.rand(n, t, generator=g) > 0.25).float()
    mask[:, 0] = 1
    sc, logits = torch.rand(n, t, generator=g) * 5, torch.randn(n, t, generator=g) * 3
    out, _ = ucas(inputs(adv_row[:, None] * mask, mask, gi, self_certainty=sc, chosen_logit=logits), UCASParams())
    want = naive_ucas(adv_row, sc, logits, mask, gi)
    assert torch.allclose(out.double(), want, atol=1e-5)


# --- CEPO / RLSD -------------------------------------------------------------------------------------------------

def test_cepo_oracle():
    p = TeacherCreditParams(lam0=0.5, schedule="constant", eps_w=0.2)
    delta = [0.5, -0.5, 0.0]
    out, m = cepo(inputs([[1.0] * 3, [-1.0] * 3], teacher_logp=[delta, delta], neg_teacher_logp=[[0.0] * 3] * 2), p)
    assert out.tolist() == [pytest.approx([1.1, 0.9, 1.0]), pytest.approx([-0.9, -1.1, -1.0])]
    assert m["lambda"] == 0.5
    zero, _ = cepo(inputs([[1.0, -2.0]], teacher_logp=[[3.0, 3.0]], neg_teacher_logp=[[0.0, 0.0]]),
                   TeacherCreditParams(lam0=0.0))
    assert zero.tolist() == [[1.0, -2.0]]  # lam = 0: A exactly


def test_cepo_lambda_schedule_and_bounds():
    lin = TeacherCreditParams(lam0=0.5, warmup=25)
    assert [lambda_at(lin, s) for s in (0, 5, 25, 40)] == pytest.approx([0.5, 0.4, 0.0, 0.0])
    assert lambda_at(TeacherCreditParams(lam0=0.5, schedule="constant"), 1000) == 0.5
    g = torch.Generator().manual_seed(1)
    adv = torch.randn(6, 1, generator=g).expand(6, 5).contiguous()
    pos, neg = torch.randn(6, 5, generator=g) * 3, torch.randn(6, 5, generator=g) * 3
    out, _ = cepo(inputs(adv, step=5, teacher_logp=pos, neg_teacher_logp=neg), TeacherCreditParams())
    ratio = out / adv
    assert (ratio >= 1 - 0.4 * 0.2 - 1e-6).all() and (ratio <= 1 + 0.4 * 0.2 + 1e-6).all()  # never flips a sign
    # decisive tokens (gold answer favours, wrong answer disfavours) get more credit on a correct rollout
    good, _ = cepo(inputs([[1.0, 1.0]], teacher_logp=[[1.0, 0.0]], neg_teacher_logp=[[0.0, 0.0]]),
                   TeacherCreditParams())
    assert good[0, 0] > good[0, 1] == 1.0


def test_cepo_and_rlsd_equal_naive_loops():
    g = torch.Generator().manual_seed(2)
    n, t = 5, 4
    adv = torch.randn(n, 1, generator=g).expand(n, t).contiguous()
    mask = torch.ones(n, t)
    mask[0, 2:] = 0
    pos, neg, old = (torch.randn(n, t, generator=g) for _ in range(3))
    p = TeacherCreditParams(lam0=0.7, warmup=10)
    for fn, other, key in ((cepo, neg, "neg_teacher_logp"), (rlsd, old, "old_logp")):
        out, m = fn(inputs(adv * mask, mask, step=3, teacher_logp=pos, **{key: other}), p)
        lam = 0.7 * (1 - 3 / 10)
        assert m["lambda"] == pytest.approx(lam)
        for i in range(n):
            sign = math.copysign(1.0, float(adv[i, 0])) if adv[i, 0] != 0 else 0.0
            for j in range(t):
                w = min(max(math.exp(sign * float(pos[i, j] - other[i, j])), 0.8), 1.2)
                want = float(adv[i, j]) * ((1 - lam) + lam * w) * float(mask[i, j])
                assert float(out[i, j]) == pytest.approx(want, abs=1e-6)


# --- RLRT (reconstructed) ----------------------------------------------------------------------------------------

def test_rlrt_oracle_and_negative_rows_untouched():
    out, m = rlrt(inputs([[1.0, 1.0], [-1.0, -1.0]], teacher_logp=[[-0.5, 0.5], [-0.5, 0.5]],
                         old_logp=[[0.0, 0.0], [0.0, 0.0]]), RLRTParams(lam=0.5, eps_w=0.2))
    assert out.tolist() == [pytest.approx([1.1, 0.9]), [-1.0, -1.0]]
    assert m["weight_mean_positive"] == pytest.approx(1.0)


def test_rlrt_reverses_rlsd_on_correct_rollouts():
    g = torch.Generator().manual_seed(3)
    teacher, old = torch.randn(1, 6, generator=g), torch.randn(1, 6, generator=g)
    a, _ = rlrt(inputs([[1.0] * 6], teacher_logp=teacher, old_logp=old), RLRTParams())
    b, _ = rlsd(inputs([[1.0] * 6], teacher_logp=old, old_logp=teacher),
                TeacherCreditParams(lam0=0.5, schedule="constant"))
    assert torch.allclose(a, b)  # exp(-D) on correct rows == RLSD's weight with teacher and student swapped


# --- GRPO-SG (reconstructed) -------------------------------------------------------------------------------------

def test_grpo_sg_oracle_mean_one_and_padding_ignored():
    old = torch.log(torch.tensor([[0.9, 0.5, 0.01, 0.3]]))
    mask = torch.tensor([[1.0, 1.0, 1.0, 0.0]])
    out, m = grpo_sg(inputs([[1.0, 1.0, 1.0, 0.0]], mask, old_logp=old), GRPOSGParams(alpha=0.5))
    assert out[0, :3].tolist() == pytest.approx([1.62095, 1.20819, 0.17086], abs=1e-5)
    assert out[0, 3] == 0 and float(out[0, :3].mean()) == pytest.approx(1.0)
    assert m["weight_min"] == pytest.approx(0.17086, abs=1e-5)
    neg, _ = grpo_sg(inputs([[-2.0, -2.0, -2.0, 0.0]], mask, old_logp=old), GRPOSGParams(alpha=0.5))
    assert torch.allclose(neg, -2 * out)  # a positive weight: signs kept, the update scales linearly


def test_logit_grad_norm_helper():
    z = torch.tensor([[60.0, 0.0, 0.0]])
    assert logit_grad_norm(z, torch.tensor([0])).item() == pytest.approx(0.0, abs=1e-12)  # p = 1: no gradient
    g = torch.Generator().manual_seed(4)
    z = torch.randn(5, 11, generator=g, requires_grad=True)
    tok = torch.randint(0, 11, (5,), generator=g)
    norms = logit_grad_norm(z.detach(), tok)
    for i in range(5):
        (grad,) = torch.autograd.grad(torch.log_softmax(z[i], -1)[tok[i]], z)
        assert grad[i].norm().item() == pytest.approx(norms[i].item(), rel=1e-5)
    # ||e_o - pi||^2 = 1 - 2 pi_o + sum_v pi_v^2: within one distribution, largest for the least likely token,
    # the tokens the weight pi^alpha damps
    row = z.detach()[0].expand(11, 11)
    every = logit_grad_norm(row, torch.arange(11))
    assert torch.equal(torch.argsort(torch.softmax(z.detach()[0], -1)), torch.argsort(-every))


# --- real steps --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("recipe,transform", [("ucas", "ucas"), ("cepo", "cepo"), ("rlrt", "rlrt"),
                                              ("grpo_sg", "grpo_sg"), ("cepo", "rlsd")])
def test_recipe_trains_two_real_steps(recipe, transform, tmp_path):
    over = [f"algorithm.advantage_transforms=[{{name: {transform}}}]"] if transform != recipe else []
    out = run_recipe_steps(recipe, tmp_path, overrides=over)
    assert [t.name for t in out["cfg"].algorithm.advantage_transforms] == [transform]
    for m in out["metrics"]:
        keys = [k for k in m if k.startswith(f"advantage_transform/{transform}/")]
        assert keys and all(math.isfinite(m[k]) for k in keys)
        assert all(math.isfinite(v) for v in m.values())
    assert any(not torch.equal(out["before"][k], out["after"][k]) for k in out["before"])


def test_fg_expo_akl_recipe_moves_the_kl_coefficient_with_accuracy(tmp_path):
    out = run_recipe_steps("fg_expo_akl", tmp_path)
    m0, m1 = out["metrics"]
    assert m0["kl_coef"] == 0.04  # step 0: the configured coefficient
    want = 0.04 / (1 + math.exp(-10 * (m0["accuracy"] - 0.5)))
    assert m1["kl_coef"] == pytest.approx(want, rel=1e-9)
    assert all(math.isfinite(v) for m in out["metrics"] for v in m.values())
    assert any(not torch.equal(out["before"][k], out["after"][k]) for k in out["before"])


def test_cepo_skips_itself_and_its_teacher_passes_once_lambda_is_zero(tmp_path, monkeypatch):
    """With warmup 2, steps 0 and 1 run both teacher forwards; from step 2 (lambda 0, weight exactly 1) the
    transform and its passes are skipped."""
    import rlvr.train.loop as loop_mod
    from tests.methods.helpers import run_recipe_steps

    requested = []
    real = loop_mod.compute_extras

    def spy(needs, *args, **kw):
        requested.append(set(needs))
        return real(needs, *args, **kw)

    monkeypatch.setattr(loop_mod, "compute_extras", spy)
    out = run_recipe_steps("cepo", tmp_path, steps=4, overrides=["algorithm.advantage_transforms=[{name: cepo, "
                                                                 "lam0: 0.5, warmup: 2}]"])
    # compute_extras is the step's one producer (old log-probs included), so it runs every step; the teacher
    # passes are requested only while lambda > 0
    assert [("teacher_logp" in r and "neg_teacher_logp" in r) for r in requested] == [True, True, False, False]
    assert all("old_logp" in r for r in requested)
    assert [("advantage_transform/cepo/lambda" in m) for m in out["metrics"]] == [True, True, False, False]


def test_rlrt_decision_weights_only_decision_points():
    """rlrt_decision = rlrt where KL(P_S || P_T) >= threshold, the plain advantage elsewhere (hand-worked oracle
    values: lam 0.5, eps_w 0.2, A = +1: D = -0.5 -> 1.1, D = +0.5 -> 0.9; A = -1 unchanged)."""
    from rlvr.algorithms.registry import ADVANTAGE_TRANSFORMS, TransformInputs
    from rlvr.algorithms.transforms.rlrt import RLRTDecisionParams

    adv = torch.tensor([[1.0, 1.0, 1.0], [-1.0, -1.0, -1.0]])
    mask = torch.ones(2, 3)
    old = torch.zeros(2, 3)
    teacher = torch.tensor([[-0.5, 0.5, 0.5], [0.5, -0.5, 0.5]])  # D = teacher - old
    kl = torch.tensor([[0.3, 0.3, 0.01], [0.3, 0.3, 0.3]])
    inp = TransformInputs(torch.tensor([1.0, 0.0], dtype=torch.float64), torch.tensor([0, 0]), mask, adv, {},
                          {"teacher_logp": teacher, "old_logp": old, "teacher_kl": kl}, 0, 1, 0.0)
    out, m = ADVANTAGE_TRANSFORMS.get("rlrt_decision").fn(inp, RLRTDecisionParams(lam=0.5, eps_w=0.2, threshold=0.1))
    want = torch.tensor([[1.1, 0.9, 1.0], [-1.0, -1.0, -1.0]])  # third token: not a decision point
    assert torch.allclose(out.double(), want.double(), atol=1e-6)
    assert m["decision_frac"] == pytest.approx(5 / 6)
    every, _ = ADVANTAGE_TRANSFORMS.get("rlrt_decision").fn(inp, RLRTDecisionParams(threshold=0.0))
    plain, _ = ADVANTAGE_TRANSFORMS.get("rlrt").fn(inp, RLRTDecisionParams(threshold=0.0))
    assert torch.equal(every, plain)  # threshold 0: every position is a decision point


def test_rlrt_decision_recipe_trains(tmp_path):
    from tests.methods.helpers import recipe_trains

    out = recipe_trains("rlrt_decision", tmp_path, ["reward", "loss"])
    assert all(0.0 <= m["advantage_transform/rlrt_decision/decision_frac"] <= 1.0 for m in out["metrics"])


def test_cepo_cot_recipe_trains(tmp_path):
    from tests.methods.helpers import recipe_trains

    out = recipe_trains("cepo_cot", tmp_path, ["reward", "loss"])
    assert out["cfg"].algorithm.teacher_context == "cot_prefix"
