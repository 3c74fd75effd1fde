"""The critic and GAE (rlvr/train/critic.py, rlvr/algorithms/advantages/gae.py): GAE against a naive loop on
ragged batches, gamma = lambda = 1 is R - V, whitening, CDE's per-token bonus by hand; the clipped value loss by
hand; the critic's values sit where the policy's logits do; it learns the returns of a fixed batch; a head
outside its bootstrap mask gets no gradient; the ppo recipe trains and a resumed run equals the
uninterrupted one, critic included; config errors."""

import math
import random

import pytest
import torch
from safetensors.torch import load_file

from rlvr.algorithms.advantages.gae import GAEParams, gae, gae_advantage, token_rewards
from rlvr.algorithms.registry import AdvantageInputs
from rlvr.config.run import ConfigError, load_config
from rlvr.config.sections import CriticConfig
from rlvr.core.batch import build_batch
from rlvr.core.types import Completion
from rlvr.models import TinyModelConfig, build_tiny_model, char_tokenizer
from rlvr.learners.critic import Critic, value_loss
from tests.methods.helpers import run_recipe_steps, tiny_overrides
from tests.methods.seed_support import BINARY, train_and_resume


def _naive_gae(r, v, length, gamma, lam):
    adv = [0.0] * length
    nxt_a = 0.0
    for t in reversed(range(length)):
        nxt_v = v[t + 1] if t + 1 < length else 0.0
        delta = r[t] + gamma * nxt_v - v[t]
        nxt_a = delta + gamma * lam * nxt_a
        adv[t] = nxt_a
    return adv


@pytest.mark.parametrize("seed", range(5))
def test_gae_matches_a_naive_loop_on_ragged_rows(seed):
    rng = random.Random(seed)
    n, t = 6, 7
    lengths = [rng.randint(0, t) for _ in range(n)]
    gamma, lam = rng.choice([1.0, 0.9, 0.5]), rng.choice([1.0, 0.95, 0.0])
    v = torch.randn(n, t, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))
    rewards = torch.tensor([rng.random() for _ in range(n)], dtype=torch.float64)
    inside = (torch.arange(t)[None, :] < torch.tensor(lengths)[:, None]).double()
    r = token_rewards(rewards, torch.tensor(lengths), (n, t))
    adv, ret = gae(r, v, inside, gamma, lam)
    for i in range(n):
        want = _naive_gae(r[i].tolist(), v[i].tolist(), lengths[i], gamma, lam)
        assert adv[i, : lengths[i]].tolist() == pytest.approx(want, abs=1e-12)
        assert adv[i, lengths[i]:].abs().sum() == 0 and ret[i, lengths[i]:].abs().sum() == 0
        assert ret[i, : lengths[i]].tolist() == pytest.approx([a + b for a, b in zip(want, v[i].tolist())])
        assert r[i].sum() == (rewards[i] if lengths[i] else 0) and (lengths[i] == 0 or r[i, lengths[i] - 1] == rewards[i])
    if gamma == lam == 1.0:  # A_t = R - V_t and G_t = R
        full = torch.tensor(lengths) > 0
        torch.testing.assert_close(adv * inside, (rewards[:, None] - v) * inside)
        torch.testing.assert_close(ret[full], (rewards[:, None] * inside)[full])


def test_the_estimator_whitens_and_adds_cdes_bonus_by_hand():
    mask = torch.tensor([[1.0, 1.0], [1.0, 0.0]])
    values = torch.zeros(2, 2)
    sigma = torch.tensor([[0.5, 2.0], [3.0, 0.0]])
    inp = AdvantageInputs(torch.tensor([1.0, 0.0], dtype=torch.float64), torch.tensor([0, 1]),
                          lengths=torch.tensor([2, 1]), mask=mask, extras={"values": values, "values_std": sigma})
    raw = gae_advantage(inp, GAEParams(whiten=False, std_bonus=0.1, std_bonus_clip=1.0))
    # r = [0.05, 1 + 0.1] and [min(3, 1) x 0.1]; gamma = lambda = 1, V = 0: A_t = sum of r from t on
    assert raw.flatten().tolist() == pytest.approx([1.15, 1.1, 0.1, 0.0])
    w = gae_advantage(inp, GAEParams())
    sel = mask.bool()
    assert float(w[sel].mean()) == pytest.approx(0.0, abs=1e-6) and float(w[sel].std()) == pytest.approx(1.0, abs=1e-4)
    assert w[1, 1] == 0


def test_the_clipped_value_loss_by_hand():
    v, old = torch.tensor([1.0, 1.0, 0.2]), torch.zeros(3)
    ret = torch.tensor([2.0, 0.0, 0.3])
    loss, won = value_loss(v, old, ret, 0.5)
    # (1 - 2)^2 = 1 vs (0.5 - 2)^2 = 2.25; (1 - 0)^2 = 1 vs 0.25; inside the clip both are 0.01
    assert loss.tolist() == pytest.approx([1.125, 0.5, 0.005]) and won.tolist() == [True, False, False]
    assert value_loss(v, old, ret, None)[0].tolist() == pytest.approx([0.5, 0.5, 0.005])


TOK = char_tokenizer("abcd ")


def _batch(rewards=(1.0, 0.0, 0.5), lengths=(3, 2, 4)):
    # distinct prompts, so no two rows share a state with different returns
    comps = [Completion(f"e{i}", [1 + i, 2][: 1 + i % 2], [3 + (i + j) % 4 for j in range(n)], [0.0] * n, "stop", "")
             for i, n in enumerate(lengths)]
    return build_batch(comps, list(rewards), TOK.pad_token_id)


def _critic(heads=1, **kw):
    model = build_tiny_model(TinyModelConfig(hidden_size=32, intermediate_size=64, num_layers=1), TOK, seed=0)
    return model, Critic(model, CriticConfig(heads=heads, **kw), torch.device("cpu"), micro_batch_size=2)


def test_values_sit_where_the_policys_logits_do():
    model, critic = _critic(heads=3)
    batch = _batch()
    v = critic.values(batch)
    with torch.no_grad():
        for i in range(batch.size):
            ids = torch.tensor([[*batch.input_ids[i][batch.attention_mask[i].bool()].tolist()]])
            h = critic.net["trunk"](input_ids=ids).last_hidden_state[0]
            p = int(batch.attention_mask[i, : batch.prompt_len].sum())
            want = critic.net["head"](h[p - 1: p - 1 + int(batch.lengths[i])])
            torch.testing.assert_close(v[i, : int(batch.lengths[i])], want, atol=1e-5, rtol=0)
    ex = critic.extras(batch)
    torch.testing.assert_close(ex["values"], v.mean(-1) * batch.completion_mask)
    assert (ex["values_std"][batch.completion_mask.bool()] > 0).all()  # three randomly started heads differ
    assert torch.equal(_critic(heads=1)[1].extras(batch)["values_std"], torch.zeros_like(batch.completion_mask))


def test_the_critic_learns_the_returns_of_a_fixed_batch():
    _, critic = _critic(heads=1, lr=3e-3, value_clip=None, init_std=0.0)
    batch = _batch()
    first = critic.update(batch, seed=0)["critic/loss"]
    for s in range(60):
        last = critic.update(batch, seed=s)["critic/loss"]
    assert last < 0.05 * first
    v = critic.values(batch)[..., 0]
    m = batch.completion_mask.bool()
    torch.testing.assert_close(v[m], (batch.rewards[:, None].float().expand_as(v))[m], atol=0.1, rtol=0)


def test_a_head_outside_its_bootstrap_mask_gets_no_gradient():
    seed = next(s for s in range(100) if (torch.rand(1, 2, generator=torch.Generator().manual_seed(s)) < 0.5)
                .tolist() == [[True, False]])
    _, critic = _critic(heads=2, bootstrap=0.5, lr=1e-2)
    batch = _batch(rewards=(1.0,), lengths=(3,))
    before = critic.net["head"].weight.detach().clone()
    critic.update(batch, seed=seed)
    after = critic.net["head"].weight.detach()
    assert not torch.equal(after[0], before[0]) and torch.equal(after[1], before[1])


def test_the_recipe_trains_and_resumes_with_its_critic(tmp_path):
    out = run_recipe_steps("ppo", tmp_path, overrides=BINARY)
    for m in out["metrics"]:
        assert all(math.isfinite(m[k]) for k in ("loss", "critic/loss", "critic/grad_norm", "critic/value_mean"))
    (tmp_path / "r").mkdir()
    res = train_and_resume("ppo", tmp_path / "r", ["algorithm.critic.lr=1e-3"])
    full, part = res["weights"]
    assert full.keys() == part.keys() and all(torch.equal(full[k], part[k]) for k in full)
    ck = [load_file(str(tmp_path / "r" / run / "checkpoints" / "step_000004" / "critic.safetensors"))
          for run in ("run", "part")]
    assert all(torch.equal(ck[0][k], ck[1][k]) for k in ck[0])
    start = load_file(str(tmp_path / "r" / "run" / "checkpoints" / "step_000002" / "critic.safetensors"))
    assert any(not torch.equal(start[k], ck[0][k]) for k in start)  # the critic trained between the two


@pytest.mark.parametrize("bad, match", [
    (["algorithm.critic.heads=0"], "needs a critic"),
    (["algorithm.advantage.std_bonus=0.1"], "heads >= 2"),
    (["algorithm.critic.lr=0"], "lr"),
    (["algorithm.critic.bootstrap=0"], "bootstrap"),
])
def test_bad_settings_are_config_errors(bad, match):
    with pytest.raises(ConfigError, match=match):
        load_config(recipe="ppo", overrides=bad)


def test_a_critic_nothing_reads_is_refused(tmp_path):
    from rlvr.config.run import needs_reference
    from rlvr.models.loading import load_model
    from rlvr.run.setup import build_components, build_task

    cfg = load_config(recipe="ppo", overrides=tiny_overrides(tmp_path) + ["algorithm.advantage={name: grpo}"])
    model, tok = load_model(cfg.model, seed=0)
    assert not needs_reference(cfg)
    with pytest.raises(ValueError, match="no component reads its values"):
        build_components(cfg, model, tok, build_task(cfg))


def test_with_a_lora_policy_the_critic_trains_adapters_of_its_own_on_the_merged_weights(tmp_path):
    from rlvr.models.loading import load_model
    from rlvr.models.lora import inference_state_dict
    from rlvr.run.setup import build_components, build_task

    cfg = load_config(recipe="ppo", overrides=tiny_overrides(tmp_path) + [
        "model.lora.rank=4", "algorithm.critic.lr=1e-2"])
    model, tok = load_model(cfg.model, seed=0)
    c = build_components(cfg, model, tok, build_task(cfg))
    with torch.no_grad():  # the policy's adapters move off zero, so merged differs from the base
        for n, p in model.named_parameters():
            if "lora_B" in n:
                p.normal_(0, 0.1)
    critic = next(x for x in c.learners if isinstance(x, Critic))
    critic = type(critic)(model, cfg.algorithm.critic, "cpu", 4)
    trainable = {n for n, p in critic.net.named_parameters() if p.requires_grad}
    assert trainable and all("lora_" in n or n.startswith("head.") for n in trainable)
    assert any(n.startswith("head.") for n in trainable) and any("lora_" in n for n in trainable)
    merged = inference_state_dict(model)
    frozen = {n.replace(".base_layer", ""): p for n, p in critic.net["trunk"].named_parameters() if "lora_" not in n}
    for name, p in frozen.items():  # the critic's frozen trunk is the policy's merged weights
        assert torch.equal(p, merged[f"{model.base_model_prefix}.{name}"]), name
    opt_params = {id(p) for g in critic.optimizer.param_groups for p in g["params"]}
    assert opt_params == {id(p) for p in critic.net.parameters() if p.requires_grad}  # adapters' state only
    before = {n: p.detach().clone() for n, p in critic.net.named_parameters()}
    critic.update(_batch(rewards=(1.0, 0.0), lengths=(3, 2)), seed=0)
    moved = {n for n, p in critic.net.named_parameters() if not torch.equal(p, before[n])}
    assert moved and moved <= trainable


def test_a_lora_ppo_run_trains_and_resumes_with_its_critic(tmp_path):
    res = train_and_resume("ppo", tmp_path, ["model.lora.rank=4", "algorithm.critic.lr=1e-3"])
    full, part = res["weights"]
    assert full.keys() == part.keys() and all(torch.equal(full[k], part[k]) for k in full)
    ck = [load_file(str(tmp_path / run / "checkpoints" / "step_000004" / "critic.safetensors"))
          for run in ("run", "part")]
    assert all(torch.equal(ck[0][k], ck[1][k]) for k in ck[0]) and any("lora_" in k for k in ck[0])
