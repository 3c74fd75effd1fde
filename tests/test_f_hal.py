"""f-HAL (arXiv:2602.05946, RECONSTRUCTED): the f_preference loss term on off-policy preference pairs (a
hand-worked oracle, a naive loop over pairs with a tiny model, gradient through both sides), the pair source
(seeded sampling, malformed lines with their line numbers), the update's mix alpha L_fGRPO + (1 - alpha) L_pref
against the two parts computed separately, and two real steps of the recipe."""

import copy
import json
import math

import pytest
import torch

from rlvr.algorithms.loss_terms.f_preference import FPreferenceParams, f_preference, pair_loss
from rlvr.algorithms.objectives.f_grpo import FGRPOParams, f_grpo
from rlvr.algorithms.registry import ObjectiveInputs
from rlvr.config.run import ConfigError, load_config, needs_reference
from rlvr.core.batch import build_batch
from rlvr.core.types import Completion
from rlvr.models import TinyModelConfig, build_tiny_model, char_tokenizer
from rlvr.models.logprobs import completion_logprobs
from rlvr.passes.pairs import (PairDataError, PreferencePair, pair_rows, parse_pair, read_pairs,
                                           sample_pairs)
from rlvr.core.seeds import step_seed
from rlvr.train.loop import settings
from rlvr.algorithms.extra_producers import SideContext
from rlvr.passes.pairs import attach_pairs, pairs_of, with_pairs
from rlvr.train.update import update_policy

F64 = torch.float64
TINY = TinyModelConfig(hidden_size=32, intermediate_size=64, num_layers=1)
PAIRS = [PreferencePair("1+1=", "2", "11"), PreferencePair("say ab:", "ab", "ba!"),
         PreferencePair("3*3=", "9", "6")]


def _x(chosen_lp, chosen_ref, rejected_lp, rejected_ref, mask_c=None, mask_r=None):
    z = torch.zeros(1, 1)
    extras = {"pair_chosen_logp": chosen_lp, "pair_chosen_ref_logp": chosen_ref,
              "pair_chosen_mask": torch.ones_like(chosen_ref) if mask_c is None else mask_c,
              "pair_rejected_logp": rejected_lp, "pair_rejected_ref_logp": rejected_ref,
              "pair_rejected_mask": torch.ones_like(rejected_ref) if mask_r is None else mask_r}
    return ObjectiveInputs(z, z, z, z, extras=extras)


# --- the loss -----------------------------------------------------------------------------------------------

def test_the_methods_oracle_kl_and_pearson():
    """T_chosen 0.5, T_rejected 0.2: -(0.5 - e^-0.8) = -0.05067; dL/dT = -1 and +e^-0.8 (Pearson: +1.1)."""
    lc = torch.tensor([[0.5]], dtype=F64, requires_grad=True)
    lr = torch.tensor([[0.2]], dtype=F64, requires_grad=True)
    ref = torch.zeros(1, 1, dtype=F64)
    loss, m = f_preference(_x(lc, ref, lr, ref), FPreferenceParams(path="p", beta=1.0))
    assert float(loss.detach()) == pytest.approx(-0.05067, abs=1e-5)
    gc, gr = torch.autograd.grad(loss, (lc, lr))
    assert float(gc) == pytest.approx(-1.0) and float(gr) == pytest.approx(0.44933, abs=1e-5)
    assert float(m["critic_chosen"]) == pytest.approx(0.5) and float(m["accuracy"]) == 1.0
    loss, _ = f_preference(_x(lc, ref, lr, ref), FPreferenceParams(path="p", beta=1.0, divergence="pearson"))
    assert float(loss.detach()) == pytest.approx(-(0.5 - (0.2 + 0.04 / 4)))
    assert [float(g) for g in torch.autograd.grad(loss, (lc, lr))] == pytest.approx([-1.0, 1.1])  # f*' = 1 + t/2


def test_the_critic_is_beta_times_the_masked_sequence_log_ratio_and_pairs_are_averaged():
    lc = torch.tensor([[-1.0, -2.0, -9.0], [-0.5, -0.5, -0.5]], dtype=F64, requires_grad=True)
    rc = torch.tensor([[-1.5, -1.0, 0.0], [-1.0, -1.0, -1.0]], dtype=F64)
    lr = torch.tensor([[-3.0, -1.0, 0.0], [-2.0, -2.0, -2.0]], dtype=F64, requires_grad=True)
    rr = torch.tensor([[-2.0, -2.0, 0.0], [-1.0, -1.0, -1.0]], dtype=F64)
    mc = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]], dtype=F64)
    mr = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]], dtype=F64)
    beta = 0.3
    loss, _ = f_preference(_x(lc, rc, lr, rr, mc, mr), FPreferenceParams(path="p", beta=beta))
    tc = [beta * (-1.0 + 1.5 - 2.0 + 1.0), beta * 1.5]  # the padding token (logp -9) is left out
    tr = [beta * (-3.0 + 2.0 - 1.0 + 2.0), beta * -3.0]
    want = -(sum(tc) / 2 - sum(math.exp(t - 1) for t in tr) / 2)
    assert float(loss.detach()) == pytest.approx(want)
    gc, gr = torch.autograd.grad(loss, (lc, lr))
    assert gc.flatten().tolist() == pytest.approx([-beta / 2, -beta / 2, 0.0] + [-beta / 2] * 3)
    assert gr[1].tolist() == pytest.approx([beta * math.exp(tr[1] - 1) / 2] * 3)
    assert float(pair_loss(torch.tensor(tc), torch.tensor(tr))) == pytest.approx(want)


def _models(seed=1):
    tok = char_tokenizer()
    model = build_tiny_model(TINY, tok, seed=seed)
    ref = copy.deepcopy(model).eval().requires_grad_(False)
    with torch.no_grad():  # a reference that differs from the policy
        for p in ref.parameters():
            p.add_(0.05 * torch.randn_like(p))
    return tok, model, ref


def _seq_logp(model, prompt_ids, response_ids):
    """Sum of log pi(response | prompt) from one unpadded forward."""
    ids = torch.tensor([prompt_ids + response_ids])
    logits = model(input_ids=ids).logits[0, :-1].float()
    lp = torch.log_softmax(logits, -1).gather(-1, ids[0, 1:, None])[:, 0]
    return lp[len(prompt_ids) - 1:].sum()


def test_against_a_naive_loop_over_pairs_with_a_tiny_model():
    tok, model, ref = _models()
    rows = pair_rows(tok, PAIRS)
    assert rows.chosen.size == rows.rejected.size == 3
    # the completion mask covers the response and its eos only
    assert rows.chosen.lengths.tolist() == [len(p.chosen) + 1 for p in PAIRS]
    assert rows.rejected.completion_mask.sum(-1).tolist() == [len(p.rejected) + 1 for p in PAIRS]
    beta = 0.5
    with torch.no_grad():
        refs = [completion_logprobs(ref, rb)[0] for rb in (rows.chosen, rows.rejected)]
    lc, _ = completion_logprobs(model, rows.chosen)
    lr, _ = completion_logprobs(model, rows.rejected)
    x = _x(lc, refs[0], lr, refs[1], rows.chosen.completion_mask, rows.rejected.completion_mask)
    loss, _ = f_preference(x, FPreferenceParams(path="p", beta=beta))
    params = list(model.parameters())
    got = torch.autograd.grad(loss, params)
    naive = 0.0
    for p in PAIRS:
        prompt = tok(p.prompt)["input_ids"]
        c = tok(p.chosen, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
        r = tok(p.rejected, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
        with torch.no_grad():
            rc, rr = _seq_logp(ref, prompt, c), _seq_logp(ref, prompt, r)
        tc, tr = beta * (_seq_logp(model, prompt, c) - rc), beta * (_seq_logp(model, prompt, r) - rr)
        naive = naive - (tc - torch.exp(tr - 1.0)) / len(PAIRS)
    assert float(loss.detach()) == pytest.approx(float(naive.detach()), abs=1e-5)
    want = torch.autograd.grad(naive, params)
    for g, w in zip(got, want):
        assert torch.allclose(g, w, atol=1e-5)


def test_the_gradient_reaches_the_policy_from_both_sides():
    tok, model, ref = _models()
    rows = pair_rows(tok, PAIRS[:2])
    with torch.no_grad():
        refs = [completion_logprobs(ref, rb)[0] for rb in (rows.chosen, rows.rejected)]
    params = [p for p in model.parameters()]
    for side in ("chosen", "rejected"):  # the other side detached: each alone moves the policy
        lc, _ = completion_logprobs(model, rows.chosen)
        lr, _ = completion_logprobs(model, rows.rejected)
        lc, lr = (lc, lr.detach()) if side == "chosen" else (lc.detach(), lr)
        loss, _ = f_preference(_x(lc, refs[0], lr, refs[1], rows.chosen.completion_mask,
                                  rows.rejected.completion_mask), FPreferenceParams(path="p"))
        grads = torch.autograd.grad(loss, params, allow_unused=True)
        assert sum(float(g.abs().sum()) for g in grads if g is not None) > 0, side


# --- the pair source ----------------------------------------------------------------------------------------

def _write(path, lines):
    path.write_text("".join((ln if isinstance(ln, str) else json.dumps(ln)) + "\n" for ln in lines))
    return path


def test_reading_validates_each_line_and_names_it(tmp_path, capsys):
    good = {"prompt": "q", "chosen": "a", "rejected": "b", "id": 7}
    chat = {"prompt": [{"role": "user", "content": "q"}], "chosen": "a", "rejected": "b"}
    f = _write(tmp_path / "p.jsonl", [good, "", chat])
    pairs = read_pairs(f)
    assert [p.where for p in pairs] == [f"{f}:1", f"{f}:3"] and pairs[1].prompt == chat["prompt"]
    cases = [("{not json", "invalid JSON"), ([1, 2], "expected a JSON object"),
             ({"prompt": "q", "chosen": "a"}, "missing field.*rejected"),
             ({"prompt": "", "chosen": "a", "rejected": "b"}, "empty string"),
             ({"prompt": [{"role": "user"}], "chosen": "a", "rejected": "b"}, "message 0"),
             ({"prompt": "q", "chosen": 3, "rejected": "b"}, "'chosen' must be a non-empty string")]
    for bad, msg in cases:
        f = _write(tmp_path / "bad.jsonl", [good, good, bad])
        with pytest.raises(PairDataError, match=f"bad.jsonl:3: .*{msg}.*skip_malformed"):
            read_pairs(f)
    kept = read_pairs(_write(tmp_path / "bad.jsonl", [good, "{not json", good, [1]]), skip_malformed=True)
    assert len(kept) == 2 and "skipped 2 malformed lines; the first: " in capsys.readouterr().err
    with pytest.raises(PairDataError, match="no such file"):
        read_pairs(tmp_path / "missing.jsonl")
    with pytest.raises(PairDataError, match="no preference pairs"):
        read_pairs(_write(tmp_path / "empty.jsonl", ["", "[1]"]), skip_malformed=True)
    with pytest.raises(PairDataError, match="where: expected a JSON object"):
        parse_pair("where", "text")


def test_sampling_is_seeded_and_distinct():
    a = sample_pairs(20, 5, seed=3)
    assert a == sample_pairs(20, 5, seed=3) and len(set(a)) == 5 and all(0 <= i < 20 for i in a)
    assert len({tuple(sample_pairs(20, 5, seed=s)) for s in range(6)}) > 1
    many = sample_pairs(3, 7, seed=0)  # every pair once per pass
    assert sorted(many[:3]) == sorted(many[3:6]) == [0, 1, 2] and len(many) == 7


def test_a_step_draws_the_same_pairs_in_a_fresh_process(tmp_path):
    """What a resumed run does: fresh components (nothing cached) give the step the same rows."""
    f = _write(tmp_path / "p.jsonl", [{"prompt": f"say {i}:", "chosen": "ab"[: 1 + i % 2],
                                       "rejected": "z" * (1 + i % 3)} for i in range(12)])
    term = f"[{{name: f_preference, path: {f}, pairs_per_step: 4}}]"
    cfg = load_config(overrides=["algorithm.minibatches=1", f"algorithm.loss_terms={term}"])
    tok, _, ref = _models()
    batch = build_batch([Completion("e", [5, 6], [7], None, "stop", "")], [0.0], tok.pad_token_id)

    def rows(step):
        ctx = SideContext(step, step_seed(cfg.seed, step, salt=3), tok, torch.device("cpu"), settings(cfg),
                          cfg.algorithm, ref_model=ref)  # a fresh memo: nothing cached
        out = pairs_of(with_pairs(ctx, batch), 0)
        return out

    a, b = rows(2), rows(2)
    assert torch.equal(a.chosen.input_ids, b.chosen.input_ids) and torch.equal(a.rejected.ref_logp, b.rejected.ref_logp)
    assert a.chosen.size == 4 and a.chosen.ref_logp.shape == a.chosen.completion_mask.shape
    assert len({tuple(rows(s).chosen.input_ids.flatten().tolist()) for s in range(4)}) > 1
    with pytest.raises(ValueError, match="reference model"):
        with_pairs(SideContext(0, 0, tok, "cpu", settings(cfg), cfg.algorithm, ref_model=None), batch)


# --- the mix in the update ----------------------------------------------------------------------------------

def _rl_batch(tok, model, ref):
    g = torch.Generator().manual_seed(0)
    comps = [Completion(f"e{i // 2}", tok(p)["input_ids"], [int(t) for t in torch.randint(4, 60, (2 + i % 3,),
                                                                                          generator=g)],
                        None, "stop", "", group=i // 2) for i, p in enumerate(["1+1=", "1+1=", "2+5=", "2+5="])]
    batch = build_batch(comps, [1.0, 0.0, 0.0, 1.0], tok.pad_token_id)
    adv = torch.tensor([[1.0], [-1.0], [-0.5], [0.5]]) * batch.completion_mask
    with torch.no_grad():
        ref_lp, _ = completion_logprobs(ref, batch)
    rows = pair_rows(tok, PAIRS)
    with torch.no_grad():
        rows = rows.with_ref(completion_logprobs(ref, rows.chosen)[0], completion_logprobs(ref, rows.rejected)[0])
    from dataclasses import replace

    return attach_pairs(replace(batch, advantages=adv, ref_logp=ref_lp), {0: rows})


def _cfg(alpha, micro):
    return load_config(overrides=[
        "rollout.prompts_per_step=2", "rollout.group_size=2", "algorithm.minibatches=1", "algorithm.kl.coef=0",
        f"train.micro_batch_size={micro}", "optim.max_grad_norm=null",
        f"algorithm.objective={{name: f_grpo, alpha: {alpha}, beta: 0.5}}",
        f"algorithm.loss_terms=[{{name: f_preference, weight: {1 - alpha}, beta: 0.5, path: unused.jsonl}}]"])


def _update(model, batch, cfg):
    opt = torch.optim.SGD(model.parameters(), lr=0.0)
    model.zero_grad()
    m = update_policy(model, opt, torch.optim.lr_scheduler.LambdaLR(opt, lambda i: 1.0), batch, settings(cfg))
    return m, [p.grad.clone() for p in model.parameters()]


def test_the_update_mixes_alpha_fgrpo_and_one_minus_alpha_preference():
    tok, model, ref = _models()
    batch = _rl_batch(tok, model, ref)
    alpha = 0.3
    metrics, got = _update(model, batch, _cfg(alpha, micro=8))
    # the two parts computed separately on the same batch (f_grpo at alpha 1)
    model.zero_grad()
    logp, _ = completion_logprobs(model, batch)
    l_rl, _ = f_grpo(ObjectiveInputs(logp, logp.detach(), batch.advantages, batch.completion_mask,
                                     group_index=batch.group_index, ref_logp=batch.ref_logp), FGRPOParams(beta=0.5))
    rows = pairs_of(batch, 0)
    lc, _ = completion_logprobs(model, rows.chosen)
    lr, _ = completion_logprobs(model, rows.rejected)
    l_pref, _ = f_preference(_x(lc, rows.chosen.ref_logp, lr, rows.rejected.ref_logp, rows.chosen.completion_mask,
                                rows.rejected.completion_mask), FPreferenceParams(path="p", beta=0.5))
    total = alpha * l_rl + (1 - alpha) * l_pref
    assert metrics["loss"] == pytest.approx(float(total.detach()), abs=1e-6)
    assert metrics["loss_term/f_preference"] == pytest.approx(float(l_pref.detach()), abs=1e-6)
    assert metrics["loss_term/f_preference_weight"] == pytest.approx(1 - alpha)
    assert {"loss_term/f_preference/critic_chosen", "loss_term/f_preference/accuracy"} <= set(metrics)
    total.backward()
    for g, p in zip(got, model.parameters()):
        assert torch.allclose(g, p.grad, atol=1e-6)
    # micro-batches of one group: the pairs still enter the minibatch's loss once
    metrics1, got1 = _update(model, batch, _cfg(alpha, micro=2))
    assert metrics1["loss"] == pytest.approx(metrics["loss"], abs=1e-6)
    for a, b in zip(got, got1):
        assert torch.allclose(a, b, atol=1e-6)


def test_a_batch_without_pairs_is_a_clear_error():
    from dataclasses import replace

    tok, model, ref = _models()
    batch = replace(_rl_batch(tok, model, ref), side=())
    with pytest.raises(ValueError, match="trains on preference pairs, and this batch carries none"):
        _update(model, batch, _cfg(0.5, micro=8))


# --- config and recipe --------------------------------------------------------------------------------------

def test_config_pieces_and_list_index_overrides():
    cfg = load_config(recipe="f_hal", overrides=["algorithm.loss_terms.0.path=/data/p.jsonl",
                                                 "algorithm.loss_terms.0.pairs_per_step=2"])
    term = cfg.algorithm.loss_terms[0]
    assert term.params.path == "/data/p.jsonl" and term.params.pairs_per_step == 2 and term.params.weight == 0.5
    assert cfg.algorithm.objective.params.alpha == 0.5 and needs_reference(cfg) and cfg.algorithm.kl.coef == 0.0
    with pytest.raises(ConfigError, match="not an index of a list of 1 items"):
        load_config(recipe="f_hal", overrides=["algorithm.loss_terms.1.path=x"])
    with pytest.raises(ConfigError, match="path"):  # the pairs file has no default
        load_config(overrides=["algorithm.loss_terms=[{name: f_preference}]"])
    from rlvr.distributed.world import DistributedSetupError, World, check_world

    # under torchrun the pairs' forwards run inside the micro-batch's DDP forward (tests/test_distributed.py)
    check_world(load_config(recipe="f_hal", overrides=["rollout.prompts_per_step=4"]), World(0, 2))
    with pytest.raises(DistributedSetupError, match="not divisible"):
        check_world(load_config(recipe="f_hal", overrides=["rollout.prompts_per_step=4"]), World(0, 3))


def test_the_recipe_trains_two_real_steps(tmp_path):
    from tests.methods.helpers import run_recipe_steps
    from tests.test_recipes import _recipe_overrides

    out = run_recipe_steps("f_hal", tmp_path, steps=2, overrides=_recipe_overrides("f_hal", tmp_path))
    for m in out["metrics"]:
        assert all(math.isfinite(m[k]) for k in ("loss", "grad_norm", "critic", "loss_term/f_preference",
                                                 "loss_term/f_preference/critic_rejected")), m
        assert m["loss_term/f_preference_weight"] == pytest.approx(0.5)
    assert out["c"].ref_model is not None and len(out["c"].memo) == 1  # read once
    assert any(not torch.equal(out["before"][k], out["after"][k]) for k in out["before"])


def test_a_missing_pairs_file_stops_the_run_at_set_up(tmp_path):
    from rlvr.config.run import load_config
    from rlvr.run.preflight import SetupError
    from rlvr.run.train import train
    from tests.methods.helpers import tiny_overrides

    over = tiny_overrides(tmp_path) + ["train.steps=1", "sft.steps=5",
                                       f"algorithm.loss_terms.0.path={tmp_path / 'nope.jsonl'}"]
    with pytest.raises(SetupError, match="preference-pair file .*nope.jsonl.* does not exist"):
        train(load_config(recipe="f_hal", overrides=over))
    assert not (tmp_path / "run" / "warmup").exists()  # refused before the SFT warm-up
