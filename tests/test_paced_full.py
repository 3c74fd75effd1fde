"""PACED-RL in full (arXiv:2602.12642, RECONSTRUCTED): the learned log Z table of ``tb`` (its update is the exact
gradient step on the TB loss; on a synthetic stream it learns the base accuracy), the ``paced`` sampler reading
p_hat off it, the ``paced_replay`` budget (highest-priority stored groups, capacity, ratio, behaviour log-probs,
checkpoints), hand-worked oracles, and the ``paced_rl_full`` recipe (trains; resumes exactly)."""

import json
import math
import shutil

import numpy as np
import pytest
import torch

from rlvr.algorithms.objectives.log_z_table import LogZTable, accuracy_of_log_z
from rlvr.algorithms.objectives.tb import TBParams, new_table, tb
from rlvr.algorithms.registry import OBJECTIVES, ObjectiveInputs, call
from rlvr.config.run import load_config
from rlvr.core.batch import build_batch
from rlvr.core.prompt_keys import prompt_key
from rlvr.core.types import Completion, Example, Score
from rlvr.sampling import build_data
from rlvr.sampling.base import Group
from rlvr.sampling.paced import PacedParams, PacedSampler, paced_weights
from rlvr.sampling.paced_replay import PacedReplay, PacedReplayParams, replay_count, replay_priority
from rlvr.sampling.stats import PromptStats
from rlvr.train.algo_state import AlgorithmState

LN3 = math.log(3.0)


def test_methods_oracles():
    assert accuracy_of_log_z(np.log([1.0, 3.0, 2.0]), LN3).tolist() == pytest.approx([0.0, 1.0, 0.5])
    t = LogZTable(LN3, 0.1, init=0.0)
    t.step([7, 8, 9], np.zeros(3), np.ones(3), 3)  # three rows
    t.log_z[:3] = np.log([1.0, 3.0, 2.0])  # Z = 1, 3, 2
    assert t.accuracy([7, 8, 9, 10], 0.25).tolist() == pytest.approx([0.0, 1.0, 0.5, 0.25])  # 10: never trained
    assert replay_priority(0.5, 0.125) == pytest.approx(0.375)
    assert paced_weights(np.array([0.5, 0.0, 1.0]), 0.05).tolist() == pytest.approx([0.3, 0.05, 0.05])
    assert replay_count(8, 0.25) == 2 and replay_count(3, 0.5) == 1


def _inp(keys, n_rows=0, seed=0, t=4):
    g = torch.Generator().manual_seed(seed)
    n = len(keys)
    logp = (-torch.rand(n, t, generator=g)).requires_grad_(True)
    mask = (torch.rand(n, t, generator=g) < 0.8).float()
    mask[:, 0] = 1
    gi = torch.tensor([sorted(set(keys)).index(k) for k in keys])
    return ObjectiveInputs(logp, logp.detach().clone(), torch.zeros(n, t), mask, ref_logp=-torch.rand(n, t, generator=g),
                           rewards=torch.randint(0, 2, (n,), generator=g).double(), group_index=gi,
                           extras={"prompt_key": torch.tensor(keys, dtype=torch.int64)}, n_rows=n_rows)


@pytest.mark.parametrize("z_loss", ["prompt", "batch"])
def test_the_table_update_is_the_gradient_step_on_the_tb_loss(z_loss):
    keys = [11, 11, 11, 22, 22, 33]
    inp = _inp(keys, n_rows=10)  # a micro-batch of a 10-row minibatch
    p = TBParams(beta=0.7, log_z="learned", z_lr=0.3, z_init=0.2, z_loss=z_loss)
    table = new_table(p)
    table.step([22], np.array([1.5]), np.array([1.0]), 1)  # 22 has been trained once before
    z22 = table.value(22)
    loss, m = call(OBJECTIVES.get("tb"), inp, p, table)
    # naive: log Z as a leaf, the TB loss of the rows, autograd
    seq = lambda x: (x * inp.mask).sum(-1)
    resid = 0.7 * inp.rewards.float() + seq(inp.ref_logp) - seq(inp.logp.detach())
    z = torch.tensor([0.2, z22, 0.2], dtype=torch.float64, requires_grad=True)
    slot = torch.tensor([{11: 0, 22: 1, 33: 2}[k] for k in keys])
    sq = (z[slot] - resid.double()) ** 2
    assert loss.item() == pytest.approx(float(sq.detach().sum() / 10), rel=1e-6)  # the loss uses log Z before the step
    torch.testing.assert_close(m["log_z"][:, 0].double(), z.detach()[slot].float().double())
    if z_loss == "batch":
        (sq.sum() / 10).backward()  # the gradient of the loss tb returns
        grad = z.grad
    else:  # each prompt's own mean squared residual
        grad = torch.stack([torch.autograd.grad(sq[slot == j].mean(), z, retain_graph=True)[0][j] for j in range(3)])
    want = (z.detach() - 0.3 * grad).tolist()
    assert [table.value(k) for k in (11, 22, 33)] == pytest.approx(want, rel=1e-6)
    assert table.steps[[table.index[k] for k in (11, 22, 33)]].tolist() == [1, 2, 1]
    # and the policy's gradient is the TB gradient with log Z held fixed
    loss.backward()
    logp = inp.logp.detach().clone().requires_grad_(True)
    r2 = 0.7 * inp.rewards.float() + seq(inp.ref_logp) - seq(logp)
    ((z.detach()[slot].float() - r2) ** 2).sum().div(10).backward()
    torch.testing.assert_close(inp.logp.grad, logp.grad * inp.mask, rtol=1e-5, atol=1e-7)


def test_optimum_init_starts_at_the_least_squares_value_and_optimum_mode_keeps_no_state():
    inp = _inp([5, 5, 5, 6, 6, 6])
    table = new_table(TBParams(log_z="learned", z_init="optimum"))
    loss_learned, _ = tb(inp, TBParams(log_z="learned"), table)
    loss_opt, m = tb(inp, TBParams())
    assert loss_learned.item() == pytest.approx(loss_opt.item(), rel=1e-6)
    assert table.value(5) == pytest.approx(float(m["log_z"][0, 0]), rel=1e-5)  # zero gradient at the optimum
    assert new_table(TBParams()) is None
    with pytest.raises(ValueError, match="needs its state"):
        tb(inp, TBParams(log_z="learned"))


def _stream(p_true, steps=200, g=32, seed=0, table=None, theta=None, start=0):
    """TB on one prompt whose base policy is right with probability p_true: a two-outcome policy (logit theta)
    and the learned log Z trained jointly on on-policy samples; returns p_hat per step, the table, theta."""
    p = TBParams(beta=LN3, base="ref", log_z="learned", z_lr=0.25, z_init=0.0)
    table = table if table is not None else new_table(p)
    theta = theta if theta is not None else torch.tensor(math.log(p_true / (1 - p_true)), requires_grad=True)
    log_b = torch.tensor([math.log(1 - p_true), math.log(p_true)])
    gen = torch.Generator().manual_seed(seed)
    out = []
    for s in range(start, start + steps):
        gen.manual_seed(seed * 100_003 + s)
        y = (torch.rand(g, generator=gen) < torch.sigmoid(theta.detach())).long()
        logp = torch.where(y == 1, torch.nn.functional.logsigmoid(theta), torch.nn.functional.logsigmoid(-theta))
        inp = ObjectiveInputs(logp[:, None], logp.detach()[:, None], torch.zeros(g, 1), torch.ones(g, 1),
                              ref_logp=log_b[y][:, None], rewards=y.double(), group_index=torch.zeros(g, dtype=torch.long),
                              extras={"prompt_key": torch.full((g,), 42, dtype=torch.int64)})
        loss, _ = call(OBJECTIVES.get("tb"), inp, p, table)
        grad, = torch.autograd.grad(loss, theta)
        with torch.no_grad():
            theta -= 0.5 * grad
        out.append(float(table.accuracy([42], 0.5)[0]))
    return out, table, theta


@pytest.mark.parametrize("p_true", [0.15, 0.5, 0.8])
def test_the_learned_estimate_converges_to_the_base_accuracy(p_true):
    est, table, theta = _stream(p_true)
    tail = np.mean(est[-50:])
    assert abs(tail - p_true) < 0.05, (p_true, tail)
    z_star = math.log(1 + 2 * p_true)  # Z = 1 + p (e^beta - 1), e^beta = 3
    assert abs(table.value(42) - z_star) < 0.05
    pi_star = 3 * p_true / (1 + 2 * p_true)  # the policy reached the tilted target too
    assert abs(float(torch.sigmoid(theta.detach())) - pi_star) < 0.05


def test_table_state_round_trip_and_a_resumed_stream_continues_the_same_table():
    full, table, _ = _stream(0.3, steps=40)
    half, t1, theta = _stream(0.3, steps=20)
    state = json.loads(json.dumps(t1.state_dict()))
    t2 = new_table(TBParams(beta=LN3, log_z="learned", z_lr=0.25, z_init=0.0))
    t2.load_state_dict(state)
    assert t2.state_dict() == t1.state_dict() and t2.generation == 1
    rest, t2, _ = _stream(0.3, steps=20, table=t2, theta=theta, start=20)
    assert half + rest == full and t2.value(42) == table.value(42)
    cfg = load_config(recipe="paced_rl_full")
    a = AlgorithmState(cfg)
    assert isinstance(a.get("algorithm.objective"), LogZTable)
    a.get("algorithm.objective").load_state_dict(state)
    b = AlgorithmState(cfg)
    b.load_state_dict(json.loads(json.dumps(a.state_dict())))
    assert b.get("algorithm.objective").value(42) == t1.value(42)
    assert AlgorithmState(load_config(recipe="paced_tb")).state_dict() == {}  # optimum: nothing to save


def _examples(n):
    return [Example(f"q{i}", f"prompt {i}", "a") for i in range(n)]


def test_the_sampler_weights_follow_p_hat_from_the_table():
    ex = _examples(4)
    table = LogZTable(LN3, 0.1, init=0.0)
    table.step([prompt_key("q0"), prompt_key("q1"), prompt_key("q2")], np.zeros(3), np.ones(3), 3)
    table.log_z[:3] = np.log([2.0, 1.2, 1.0])  # p_hat 0.5, 0.1, 0 (q3: never trained -> prior)
    stats = PromptStats()
    stats.update(["q3"] * 4, [1, 1, 1, 1], 0)  # pass rates are ignored when the table is there
    s = PacedSampler(ex, stats, PacedParams(replay_fraction=0.0, floor=0.05, prior=0.5), seed=0, table=table)
    assert s.estimates.all(0.5).tolist() == pytest.approx([0.5, 0.1, 0.0, 0.5])
    w = paced_weights(np.array([0.5, 0.1, 0.0, 0.5]), 0.05)
    counts = np.zeros(4)
    for step in range(4000):
        counts[int(s.next(1, step)[0].id[1:])] += 1
    assert counts / counts.sum() == pytest.approx(w / w.sum(), abs=0.02)
    table.step([prompt_key("q3")], np.zeros(1), np.ones(1), 1)  # a prompt the table adds later is picked up
    table.log_z[3] = math.log(3.0)
    assert s.estimates.all(0.5)[3] == pytest.approx(1.0)
    fresh = LogZTable(LN3, 0.1)
    fresh.load_state_dict(table.state_dict())
    s.table = s.estimates.table = fresh  # a reload (new generation) re-reads every row
    assert s.estimates.all(0.5).tolist() == pytest.approx([0.5, 0.1, 0.0, 1.0])


def test_build_data_shares_the_objectives_table_with_sampler_and_budget(tmp_path):
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({"prompt": f"p{i}", "answer": "x"}) + "\n" for i in range(6)))
    cfg = load_config(recipe="paced_rl_full", overrides=["task.name=jsonl", f"task.train_path={data}",
                                                         "task.verifier=tests.reward_fns:shared_chars"])
    from rlvr.run.setup import build_task

    algo = AlgorithmState(cfg)
    sampler, allocator, _ = build_data(cfg, build_task(cfg), algo)
    assert sampler.table is algo.get("algorithm.objective") is allocator.table
    with pytest.raises(ValueError, match="log_z: learned"):
        build_data(cfg, build_task(cfg))  # estimate: log_z without the table


def _group(ex, correct, step=0):
    comps = [Completion(ex.id, [1, 2], [3 + j, 4], [-0.1 * (j + 1), -0.2 - step], "stop", f"t{j}")
             for j in range(len(correct))]
    return Group(ex, comps, [Score(float(c), {"correct": float(c)}) for c in correct], [float(c) for c in correct])


def _replay(examples, table, **kw):
    return PacedReplay(PacedReplayParams(**kw), 4, examples, PromptStats(), table)


def test_replay_picks_the_highest_priority_groups_within_ratio_and_capacity():
    ex = _examples(10)
    table = LogZTable(LN3, 0.1)
    table.step([prompt_key(e.id) for e in ex], np.zeros(10), np.ones(10), 10)
    table.log_z[:10] = np.log(1 + 2 * np.full(10, 0.5))  # p_hat 0.5 everywhere
    a = _replay(ex, table, replay_ratio=0.5, capacity=4, max_age=None)
    first = ex[:6]
    patterns = [[1, 1, 1, 1], [0, 0, 0, 0], [1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0], [0, 0, 0, 1]]
    a.allocate(first)
    out = a.finalize([_group(e, c) for e, c in zip(first, patterns)], 0)
    assert len(out) == 6 and a.metrics()["replayed"] == 0  # nothing stored yet
    # priorities |0.5 - p_obs|: q0 0.5, q1 0.5, q2 0.25, q3 0 (not stored), q4 0.25, q5 0.25; capacity keeps 4
    assert sorted(a.buffer) == ["q0", "q1", "q2", "q4"]
    nxt = [ex[1], ex[6], ex[7], ex[8]]  # q1 is in this batch: its stored group waits (and is superseded)
    a.allocate(nxt)
    out = a.finalize([_group(e, [1, 0, 1, 0]) for e in nxt], 1)
    replayed = out[4:]
    assert [g.example.id for g in replayed] == ["q0", "q2"]  # 4 fresh x 0.5, highest priority, ties by id
    assert all(g.reused == g.n == 4 for g in replayed) and a.metrics()["replayed_completions"] == 8
    assert replayed[0].completions[2].logprobs == [-0.30000000000000004, -0.2]  # stored behaviour log-probs
    assert replayed[0].rewards == [1.0] * 4 and all(s.info["replayed"] for s in replayed[0].scores)
    batch = build_batch([c for g in out for c in g.completions], [r for g in out for r in g.rewards], 0)
    torch.testing.assert_close(batch.behaviour_logp[16 + 2], torch.tensor([-0.3, -0.2]))
    assert "q0" not in a.buffer and "q1" not in a.buffer  # replayed once (max_replays 1); q1: p_obs 0.5 now
    assert len(a.buffer) <= 4


def test_replay_refreshes_priorities_drops_old_groups_and_round_trips_its_state():
    ex = _examples(5)
    table = LogZTable(LN3, 0.1)
    table.step([prompt_key(e.id) for e in ex], np.zeros(5), np.ones(5), 5)
    table.log_z[:5] = math.log(2.0)  # p_hat 0.5
    a = _replay(ex, table, replay_ratio=1.0, max_age=2, max_replays=2)
    a.allocate(ex[:3])
    a.finalize([_group(e, c) for e, c in zip(ex[:3], [[1, 1], [1, 0, 0, 0], [0, 0, 0]])], 0)
    table.log_z[table.index[prompt_key("q0")]] = math.log(3.0)  # q0's estimate is now right: p_hat 1 = p_obs
    b = PacedReplay(a.p, 4, ex, PromptStats(), table)
    b.load_state_dict(json.loads(json.dumps(a.state_dict())))
    for alloc in (a, b):
        alloc.allocate([ex[3]])
        got = alloc.finalize([_group(ex[3], [1, 0])], 1)
        assert [g.example.id for g in got[1:]] == ["q2"]  # q0's error shrank to 0 with the refreshed estimate
    assert a.state_dict() == b.state_dict() and a.buffer["q2"]["replays"] == 1
    a.allocate([ex[4]])
    a.finalize([_group(ex[4], [1, 1])], 5)  # q0, q1, q2 and q3 are older than max_age = 2 steps
    assert sorted(a.buffer) == ["q4"]
    img = Example("im", "look", "a", images=("x.png",))
    a.allocate([img])
    a.finalize([_group(img, [0, 0])], 6)
    assert "im" not in a.buffer  # image prompts are not stored


def test_the_full_recipe_trains_and_replays(tmp_path):
    from tests.methods.helpers import run_recipe_steps
    from tests.methods.seed_support import BINARY

    out = run_recipe_steps("paced_rl_full", tmp_path, steps=3, overrides=BINARY)
    ms = out["metrics"]
    assert all(math.isfinite(v) for m in ms for v in m.values() if isinstance(v, float))
    assert all(m["sampler/from_log_z"] == 1.0 for m in ms) and sum(m["budget/replayed"] for m in ms) > 0
    assert sum(m["rollouts/reused"] for m in ms) > 0
    table = out["c"].algo_state.get("algorithm.objective")
    assert len(table) > 0 and table.steps[: len(table)].sum() >= 8 + 1  # fresh groups and replayed ones
    assert any(not torch.equal(out["before"][k], out["after"][k]) for k in out["before"])


def test_a_resumed_run_continues_the_same_table(jsonl_cfg_overrides, tmp_path):
    from rlvr.run.train import resume, train

    over = jsonl_cfg_overrides + ["train.steps=4", "train.checkpoint_every=2", "train.keep_checkpoints=5",
                                  "algorithm.minibatches=2", "data.budget.replay_ratio=0.5"]
    train(load_config(recipe="paced_rl_full", overrides=over))
    full = tmp_path / "run"
    part = tmp_path / "part"
    shutil.copytree(full, part)
    shutil.rmtree(part / "checkpoints" / "step_000004")
    mid = json.loads((full / "checkpoints" / "step_000002" / "state.json").read_text())
    assert mid["algorithm_state"]["algorithm.objective"]["keys"] and mid["allocator"]["buffer"]
    resume(part / "checkpoints" / "step_000002")
    end_a = json.loads((full / "checkpoints" / "step_000004" / "state.json").read_text())
    end_b = json.loads((part / "checkpoints" / "step_000004" / "state.json").read_text())
    for key in ("algorithm_state", "allocator", "sampler", "stats"):
        assert end_a[key] == end_b[key], key
    assert end_a["algorithm_state"] != mid["algorithm_state"]
    lines = lambda run: [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert sum(m["budget/replayed"] for m in lines(full)) > 0
    drop = ("time/", "tokens_per_s", "gen_tokens_per_s")
    clean = lambda ms: [{k: v for k, v in m.items() if not k.startswith(drop)} for m in ms]
    assert clean(lines(full)) == clean(lines(part))
