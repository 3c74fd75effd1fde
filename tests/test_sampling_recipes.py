"""Data-selection and budget recipes end to end: each trains on the demo task, a resumed run with stateful
samplers and allocators equals an uninterrupted one, a mixture trains with per-task metrics, and adaptive
allocation is compared with the fixed baseline on the same prompts and model."""

import json
import shutil

import pytest
import torch

from rlvr.config.run import load_config
from rlvr.models import TinyModelConfig, build_tiny_model, char_tokenizer
from rlvr.engines.base import ENGINES
from rlvr.sampling import build_data
from rlvr.core.seeds import step_seed
from rlvr.train.loop import Components
from rlvr.train.rollouts import collect_rollouts
from rlvr.run.train import build_task, resume, train
from rlvr.sft.supervised import sft

from tests.test_train import same_weights, weights

RECIPES = ["prompt_replay", "fg_expo", "pairing", "paced_rl", "dars", "dars_b", "ar3po", "aero", "coba_rl", "tac"]
MIXTURE = ["task.name=mixture",
           "task.tasks=[{task: {name: arithmetic, max_value: 20, num_eval: 16}, weight: 3, name: add},"
           " {task: {name: arithmetic, ops: ['*'], max_value: 9, num_eval: 16}, name: mul}]"]


def lines(run):
    return [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("name", RECIPES)
def test_recipe_trains_on_the_demo_task(name, tiny_cfg_overrides, tmp_path):
    over = [o for o in tiny_cfg_overrides if not o.startswith("task.")] if name == "tac" else tiny_cfg_overrides
    cfg = load_config(overrides=over + (MIXTURE if name == "tac" else []) + ["train.steps=2", "train.checkpoint_every=0"],
                      recipe=name)
    train(cfg)
    got = lines(tmp_path / "run")
    assert len(got) == 2
    for m in got:
        assert m["rollouts/spent"] >= 1 and 0 <= m["rollouts/informative_groups"] <= m["rollouts/groups"]
    if name == "tac":
        assert {"task/add/accuracy", "task/mul/accuracy", "sampler/p/add", "sampler/transfer/mul"} <= set(got[0])


@pytest.mark.parametrize("sampler,budget", [
    (["data.sampler.name=paced", "data.sampler.replay_fraction=0.5"], ["data.budget.name=coba", "data.budget.n_up=8"]),
    (["data.sampler.name=prompt_replay", "data.sampler.pr_min=0.01", "data.sampler.pr_max=1.0",
      "data.sampler.cooldown=1"], ["data.budget.name=dars", "data.budget.n_max=8", "data.budget.drop_zero_accuracy=false",
                                   "data.budget.upper_threshold=1.0"]),
])
def test_resume_with_stateful_sampler_and_allocator_matches_uninterrupted(sampler, budget, jsonl_cfg_overrides, tmp_path):
    over = jsonl_cfg_overrides + sampler + budget + ["train.steps=4", "train.checkpoint_every=2",
                                                     "train.keep_checkpoints=5", "algorithm.minibatches=1"]
    train(load_config(overrides=over))
    full = tmp_path / "run"
    state = json.loads((full / "checkpoints" / "step_000002" / "state.json").read_text())
    assert state["sampler"] and len(state["stats"]["ids"]) > 0
    assert not same_weights(weights(full, 2), weights(full, 4))
    part = tmp_path / "part"
    shutil.copytree(full, part)
    shutil.rmtree(part / "checkpoints" / "step_000004")
    resume(part / "checkpoints" / "step_000002")
    assert same_weights(weights(full, 4), weights(part, 4))
    drop = ("time/", "tokens_per_s", "gen_tokens_per_s")
    clean = lambda ms: [{k: v for k, v in m.items() if not k.startswith(drop)} for m in ms]
    assert clean(lines(full)) == clean(lines(part))
    end_a = json.loads((full / "checkpoints" / "step_000004" / "state.json").read_text())
    end_b = json.loads((part / "checkpoints" / "step_000004" / "state.json").read_text())
    assert (end_a["sampler"], end_a["allocator"], end_a["stats"]) == (end_b["sampler"], end_b["allocator"], end_b["stats"])


def test_mixture_uses_weights_and_per_task_verifiers(tiny_cfg_overrides, tmp_path):
    over = [o for o in tiny_cfg_overrides if not o.startswith("task.")] + MIXTURE
    cfg = load_config(overrides=over + ["train.steps=2", "train.checkpoint_every=0", "rollout.prompts_per_step=8",
                                        "sft.steps=0", "eval.num_examples=32"])  # both tasks' eval splits
    task = build_task(cfg)
    mul = next(e for e in task.examples("train") if e.task == "mul")
    assert task.score(mul, mul.answer).reward == 1.0 and task.score(mul, "0").reward == 0.0
    sampler, _, _ = build_data(cfg, task)
    drawn = [e.task for s in range(50) for e in sampler.next(8, s)]
    assert 0.68 < drawn.count("add") / len(drawn) < 0.82  # weight 3 : 1
    summary = train(cfg)
    m = lines(tmp_path / "run")[0]
    assert m["task/add/completions"] + m["task/mul/completions"] == m["rollouts/spent"]
    ev = json.loads((tmp_path / "run" / "eval" / "step_000002.json").read_text())  # held-out, per task
    per = {name: [sum(p["correct"]) / len(p["correct"]) for p in ev["per_prompt"] if p["task"] == name]
           for name in ("add", "mul")}
    for name, accs in per.items():
        assert accs and summary["eval_after"][f"task/{name}/num_examples"] == len(accs)
        assert summary["eval_after"][f"task/{name}/accuracy"] == pytest.approx(sum(accs) / len(accs))


@pytest.mark.slow
def test_adaptive_allocation_beats_fixed_on_the_demo_task():
    """Same SFT-warmed model, same 32 prompts, same first-stage seed: DARS and AR3PO spend more on hard prompts
    and leave fewer groups without signal than GRPO's fixed 8; AERO stays within the fixed budget."""
    tok = char_tokenizer()
    model = build_tiny_model(TinyModelConfig(hidden_size=64, intermediate_size=128, num_layers=2), tok, seed=0)
    base = ["rollout.prompts_per_step=32", "rollout.group_size=8", "rollout.max_new_tokens=4"]
    cfg0 = load_config(overrides=base)
    task = build_task(cfg0)
    sft(model, tok, task.examples("sft"), 150, 64, 3e-3, 10, seed=0)
    result = {}
    for name, extra in [("fixed", []), ("dars", ["data.budget.name=dars", "data.budget.drop_zero_accuracy=false",
                                                 "data.budget.upper_threshold=1.0"]),
                        ("aero", ["data.budget.name=aero"]), ("ar3po", ["data.budget.name=ar3po", "data.budget.k=8"])]:
        cfg = load_config(overrides=base + extra)
        sampler, allocator, stats = build_data(cfg, task)
        engine = ENGINES.get("hf").fn(model, tok, batch_size=256)
        opt = torch.optim.SGD(model.parameters(), lr=0.0)
        c = Components(model, tok, task, engine, sampler, allocator, stats, opt, None)
        ro = collect_rollouts(cfg, c, 0, lambda r: step_seed(0, 0, salt=10 * r))
        m = ro.metrics
        first = {ex_id: stats.row(ex_id) for ex_id in stats.ids}
        hard = [i for i in stats.ids if first[i]["correct"] / max(first[i]["rollouts"], 1) < 0.25]
        result[name] = {"spent": m["rollouts/spent"], "zero_var_frac": 1 - m["rollouts/informative_frac"],
                        "spent_on_hard": sum(first[i]["rollouts"] for i in hard) / max(len(hard), 1)}
    print("ALLOCATION-COMPARISON", json.dumps(result))
    assert result["dars"]["zero_var_frac"] < result["fixed"]["zero_var_frac"]
    assert result["dars"]["spent_on_hard"] > result["fixed"]["spent_on_hard"]
    assert result["ar3po"]["zero_var_frac"] < result["fixed"]["zero_var_frac"]
    assert result["ar3po"]["spent_on_hard"] > result["fixed"]["spent_on_hard"]
    # AERO stays within GRPO's budget and moves it to hard prompts; on a weak model its 4-completion
    # exploration leaves more constant groups than fixed 8 (measured: 0.84 vs 0.75), so no claim on that here
    assert result["aero"]["spent"] <= result["fixed"]["spent"]
    assert result["aero"]["spent_on_hard"] > 4  # hard prompts got rescue stages beyond n_explore = 4
