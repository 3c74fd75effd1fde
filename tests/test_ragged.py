"""Groups of unequal size through every registered advantage estimator, advantage/reward transform and
aggregation, and through a real training step with its metrics.

Nothing is skipped: every registered component runs, with a fixture for every extra tensor it may ask for
and explicit parameters where its params have required fields; one that raises fails its test."""

import math

import pytest
import torch

import rlvr.config.run  # noqa: F401  (registers every component)
from rlvr.algorithms import registry as reg
from rlvr.algorithms.registry import ADVANTAGES, AGGREGATIONS, AdvantageInputs, AggregationInputs
from rlvr.train.loop import rl_step

from tests.test_budget import rig

SIZES = [1, 2, 5, 3, 9]  # a group of one, a pair, and larger groups of different sizes
T = 6
H = 8  # width of the per-row vectors (hidden)
# a fixture for every extra tensor a component may request (registry.EXTRAS): [N, T] per token, [N, H] per row
EXTRA_FIXTURES = {
    "old_logp": lambda n, g: -torch.rand(n, T, generator=g),  # log-probs: <= 0
    "ref_logp": lambda n, g: -torch.rand(n, T, generator=g),
    "teacher_logp": lambda n, g: -torch.rand(n, T, generator=g),
    "teacher_model_logp": lambda n, g: -torch.rand(n, T, generator=g),
    "neg_teacher_logp": lambda n, g: -torch.rand(n, T, generator=g),
    "entropy": lambda n, g: torch.rand(n, T, generator=g),  # >= 0
    "self_certainty": lambda n, g: torch.rand(n, T, generator=g),  # logsumexp - mean >= 0
    "chosen_logit": lambda n, g: 3 * torch.randn(n, T, generator=g),
    "segment_end": lambda n, g: (torch.rand(n, T, generator=g) < 0.3).float(),  # 0/1
    "guided": lambda n, g: (torch.rand(n, 1, generator=g) < 0.25).float().expand(n, T).contiguous(),  # per row
    "hidden": lambda n, g: torch.randn(n, H, generator=g),
    "turn_index": lambda n, g: torch.randint(1, 4, (n, 1), generator=g).float().expand(n, T).cumsum(1).clamp(max=3),
    "turn_reward": lambda n, g: torch.rand(n, T, generator=g),
    "teacher_kl": lambda n, g: torch.rand(n, T, generator=g),  # KL >= 0
    # ROUGE-L F in [0, 1] per row, -1 where the example has no reference
    "reference_rouge_l": lambda n, g: torch.where(torch.rand(n, generator=g) < 0.3, -1.0, torch.rand(n, generator=g)),
    "context_index": lambda n, g: torch.randint(0, 3, (n, 1), generator=g).float().expand(n, T).contiguous(),
    "tree_node": lambda n, g: torch.arange(1, n + 1).float()[:, None].expand(n, T).contiguous(),  # 1..n per row
    # a node's parent is an earlier node or 0 (a root); it branched at a position inside the completion
    "tree_parent": lambda n, g: (torch.rand(n, generator=g) * torch.arange(n)).floor()[:, None].expand(n, T)
    .contiguous(),
    "tree_branch": lambda n, g: torch.randint(0, T, (n, 1), generator=g).float().expand(n, T).contiguous(),
    # -1 on rows without a scaffold, a fraction on the others
    "scaffold_credit": lambda n, g: torch.where(torch.rand(n, generator=g) < 0.5, -1.0, torch.rand(n, generator=g)),
    "step_useful_frac": lambda n, g: torch.rand(n, generator=g),  # a fraction per row
    "prompt_key": lambda n, g: torch.randint(0, 2**62, (n,), generator=g),  # an int64 key per row
    "values": lambda n, g: torch.randn(n, T, generator=g),  # a critic's values, either sign
    "values_std": lambda n, g: torch.rand(n, T, generator=g),  # spreads >= 0
    "vision_similarity": lambda n, g: torch.rand(n, T, generator=g) * 2 - 1,  # cosines in [-1, 1]
    "process_value": lambda n, g: torch.where(torch.rand(n, generator=g) < 0.8, torch.rand(n, generator=g),
                                              torch.full((n,), -1.0)),  # labels in [0, 1], -1: none
    "disc_perception": lambda n, g: 3 * torch.randn(n, generator=g),  # discriminator scores, either sign
    "disc_reasoning": lambda n, g: 3 * torch.randn(n, generator=g),
    "disc_format": lambda n, g: (torch.rand(n, generator=g) < 0.7).float(),  # 1 well-formed, 0 malformed
    "belief_progress": lambda n, g: torch.randn(n, T, generator=g),  # gains in log-prob, either sign
    # segments 1, 2, ... along each row (a new one wherever a coin flip says so)
    "belief_segment": lambda n, g: 1 + (torch.rand(n, T, generator=g) < 0.4).float().cumsum(1),
}
# parameters for the components whose params have required fields (the rest run with their defaults)
REQUIRED_PARAMS = {("REWARD_TRANSFORMS", "fgrpo"): {"constraints": {"correct": 0.5}},
                   ("ADVANTAGE_TRANSFORMS", "distill"): {"teacher": "/teacher"}}


def test_every_extra_has_a_fixture():
    assert set(EXTRA_FIXTURES) == set(reg.EXTRAS) - reg.FLAGS, "give the new extra a ragged fixture"


def ragged_batch(seed=0):
    g = torch.Generator().manual_seed(seed)
    gi = torch.cat([torch.full((n,), i, dtype=torch.long) for i, n in enumerate(SIZES)])
    n = len(gi)
    rewards = torch.randint(0, 2, (n,), generator=g).double()
    rewards[SIZES[0] + SIZES[1]: SIZES[0] + SIZES[1] + SIZES[2]] = 1.0  # one constant group
    lengths = torch.randint(1, T + 1, (n,), generator=g)
    mask = (torch.arange(T)[None, :] < lengths[:, None]).float()
    return rewards, gi, lengths, mask


def _extras(entry, n, gen):
    return {k: EXTRA_FIXTURES[k](n, gen) for k in sorted(entry.needs - reg.FLAGS)}


def _params(kind, name, entry):
    return entry.params(**REQUIRED_PARAMS.get((kind, name), {}))


def _run_advantage(entry, params, rewards, gi, lengths, mask, extras):
    from rlvr.algorithms.grouping import group_mean

    # a per-prompt prior (as the aero allocator writes it), a function of the group so relabelling keeps it
    comps = {"correct": rewards.clone(), "prior_pass_rate": 0.2 + 0.5 * group_mean(rewards, gi)}
    inp = AdvantageInputs(rewards, gi, lengths, mask, comps, extras, 0, 10)
    state = entry.state(params) if entry.state is not None else None
    return reg.call(entry, inp, params, state)


def _permuted(perm, rewards, gi, lengths, mask, extras, relabel):
    new_gi = relabel[gi][perm]
    return rewards[perm], new_gi, lengths[perm], mask[perm], {k: v[perm] for k, v in extras.items()}


@pytest.mark.parametrize("name", ADVANTAGES.names())
def test_every_advantage_handles_ragged_groups(name):
    entry = ADVANTAGES.get(name)
    params = _params("ADVANTAGES", name, entry)
    rewards, gi, lengths, mask = ragged_batch()
    extras = _extras(entry, len(gi), torch.Generator().manual_seed(1))
    adv = _run_advantage(entry, params, rewards, gi, lengths, mask, extras)
    declared = (len(gi), T) if "token_level" in entry.traits else (len(gi),)  # one shape, as registered
    assert adv.shape == declared and torch.isfinite(adv).all()
    # the same batch with rows shuffled and groups renumbered gives the same advantages, row for row
    perm = torch.randperm(len(gi), generator=torch.Generator().manual_seed(2))
    relabel = torch.tensor([40, 3, 17, 0, 8])
    adv2 = _run_advantage(entry, params, *_permuted(perm, rewards, gi, lengths, mask, extras, relabel))
    assert torch.allclose(adv2, adv[perm], atol=1e-5), name


@pytest.mark.parametrize("name", ["grpo", "dr_grpo", "rloo"])
def test_group_local_advantages_equal_per_group_computation(name):
    entry = ADVANTAGES.get(name)
    rewards, gi, lengths, mask = ragged_batch(3)
    full = _run_advantage(entry, entry.params(), rewards, gi, lengths, mask, {})
    for g in range(len(SIZES)):
        rows = gi == g
        alone = _run_advantage(entry, entry.params(), rewards[rows], torch.zeros(int(rows.sum()), dtype=torch.long),
                               lengths[rows], mask[rows], {})
        assert torch.allclose(full[rows], alone, atol=1e-6), (name, g)


TRANSFORMS = [(kind, name) for kind in ("ADVANTAGE_TRANSFORMS", "REWARD_TRANSFORMS")
              for name in getattr(reg, kind).names()]


@pytest.mark.parametrize("kind,name", TRANSFORMS)
def test_every_transform_handles_ragged_groups(kind, name):
    rewards, gi, lengths, mask = ragged_batch()
    adv = ADVANTAGES.get("grpo").fn(AdvantageInputs(rewards, gi), ADVANTAGES.get("grpo").params())[:, None] * mask
    entry = getattr(reg, kind).get(name)
    params = _params(kind, name, entry)
    extras = _extras(entry, len(gi), torch.Generator().manual_seed(4))
    inp = reg.TransformInputs(rewards, gi, mask, adv if kind == "ADVANTAGE_TRANSFORMS" else None,
                              {"correct": rewards.clone()}, extras, 0, 10)
    state = entry.state(params) if entry.state is not None else None
    out, metrics = reg.call(entry, inp, params, state)
    assert out.shape[0] == len(gi) and torch.isfinite(out).all(), name
    assert all(math.isfinite(float(v)) for v in metrics.values()), name


@pytest.mark.parametrize("name", AGGREGATIONS.names())
def test_every_aggregation_handles_ragged_groups(name):
    entry = AGGREGATIONS.get(name)
    rewards, gi, lengths, mask = ragged_batch()
    adv = ADVANTAGES.get("grpo").fn(AdvantageInputs(rewards, gi), ADVANTAGES.get("grpo").params())[:, None] * mask
    params = _params("AGGREGATIONS", name, entry)
    coef = entry.fn(AggregationInputs(mask, gi, adv, T), params)
    assert coef.shape == (len(gi),) and torch.isfinite(coef).all() and (coef >= 0).all()  # per completion
    perm = torch.randperm(len(gi), generator=torch.Generator().manual_seed(5))
    relabel = torch.tensor([40, 3, 17, 0, 8])
    coef2 = entry.fn(AggregationInputs(mask[perm], relabel[gi][perm], adv[perm], T), params)
    assert torch.allclose(coef2, coef[perm], atol=1e-7), name


@pytest.mark.parametrize("advantage,aggregation", [("grpo", "token_mean"), ("rloo", "balanced"),
                                                   ("reinforce_pp", "seq_mean_token_mean")])
def test_training_step_on_ragged_groups_reports_finite_metrics(advantage, aggregation):
    # DARS gives A (1 of 8 right) 11 more completions; B (all right) is dropped; C keeps 8
    cfg, c = rig(lambda i, k: {"A": k == 1, "B": True, "C": k % 2 == 0}[i],
                 ["data.budget.name=dars", f"algorithm.advantage.name={advantage}",
                  f"algorithm.aggregation.name={aggregation}"], ids=("A", "B", "C"))
    for g in c.optimizer.param_groups:
        g["lr"] = 1e-3
    before = [p.detach().clone() for p in c.model.parameters()]
    m = rl_step(cfg, c, 0)
    assert m["completions"] == 27 and m["rollouts/spent"] == 35 and m["rollouts/groups"] == 2
    assert m["rollouts/group_size_min"] == 8 and m["rollouts/group_size_max"] == 19
    bad = {k: v for k, v in m.items() if isinstance(v, float) and not math.isfinite(v)}
    assert not bad
    assert any(not torch.equal(a, b) for a, b in zip(before, c.model.parameters()))


def test_a_component_returning_an_undeclared_shape_is_named_in_the_error():
    from rlvr.algorithms.registry import objective_loss_shape, row_coefficients, token_advantages

    rewards, gi, lengths, mask = ragged_batch()
    n = len(gi)
    grpo, vimpo = ADVANTAGES.get("grpo"), ADVANTAGES.get("vimpo")
    assert torch.equal(token_advantages(grpo, torch.ones(n, dtype=torch.float64), mask), mask.double())
    with pytest.raises(ValueError, match=r"advantage estimator 'grpo' returned shape \(20, 6\).*declares \(20,\)"):
        token_advantages(grpo, torch.ones(n, T), mask)
    with pytest.raises(ValueError, match="advantage estimator 'vimpo' returned shape"):
        token_advantages(vimpo, torch.ones(n), mask)
    with pytest.raises(ValueError, match="loss aggregation 'token_mean'"):
        row_coefficients(AGGREGATIONS.get("token_mean"), torch.ones(n, T), mask)
    with pytest.raises(ValueError, match=r"policy objective 'ppo_clip' returned shape \(\)"):
        objective_loss_shape(reg.OBJECTIVES.get("ppo_clip"), torch.tensor(1.0), mask)
    with pytest.raises(ValueError, match="policy objective 'tpo' returned shape"):
        objective_loss_shape(reg.OBJECTIVES.get("tpo"), torch.ones(n, T), mask)
