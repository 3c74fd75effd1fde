"""Every recipe loads, names real components, and trains a few real steps on a tiny model."""

import json

import pytest
from typer.testing import CliRunner

from rlvr.cli import app
from rlvr.config import ConfigError, load_config
from rlvr.recipes import list_recipes, load_recipe, recipe_names
from rlvr.train.run import train

EXPECTED = {"grpo", "dr_grpo", "dapo", "gspo", "cispo", "rloo", "reinforce_pp", "lite_ppo", "delta_l", "balanced"}


def test_recipe_set_and_metadata():
    assert EXPECTED <= set(recipe_names())
    for name, desc, cite in list_recipes():
        assert desc and "arXiv:" in cite, name


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_recipe_trains_a_few_steps(name, tiny_cfg_overrides, tmp_path):
    cfg = load_config(overrides=tiny_cfg_overrides + ["train.steps=2", "train.checkpoint_every=0"], recipe=name)
    assert cfg.recipe.name == name
    summary = train(cfg)
    lines = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert len(lines) == 2 and all(isinstance(m["reward"], float) for m in lines)
    assert summary["eval_after"]["accuracy"] >= 0.0


def test_recipe_values_apply_and_overrides_win():
    dapo = load_config(recipe="dapo")
    assert dapo.algorithm.objective.params.clip_high == 0.28
    assert dapo.algorithm.dynamic_sampling.enabled and dapo.algorithm.overlong.soft_penalty
    assert load_config(overrides=["algorithm.objective.clip_high=0.3"], recipe="dapo").algorithm.objective.params.clip_high == 0.3
    grpo = load_config(recipe="grpo")
    assert grpo.algorithm.kl.coef == 0.04 and grpo.algorithm.aggregation.name == "seq_mean_token_mean"


def test_config_file_merges_over_recipe(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("algorithm:\n  kl:\n    coef: 0.01\nrollout:\n  group_size: 4\n")
    cfg = load_config(f, recipe="grpo")
    assert cfg.algorithm.kl.coef == 0.01 and cfg.algorithm.kl.estimator == "k3" and cfg.rollout.group_size == 4


def test_unknown_recipe_and_invalid_combination():
    with pytest.raises(ConfigError, match="unknown recipe 'nope'; valid names: "):
        load_config(recipe="nope")
    with pytest.raises(ConfigError, match="group_size"):
        load_config(overrides=["rollout.group_size=1", "algorithm.minibatches=1"], recipe="rloo")
    with pytest.raises(ConfigError, match="dynamic_sampling needs rollout.group_size >= 2"):
        load_config(overrides=["rollout.group_size=1", "algorithm.minibatches=1"], recipe="dapo")


def test_cli_lists_recipes_and_trains_with_one(tiny_cfg_overrides, tmp_path):
    r = CliRunner().invoke(app, ["recipes"])
    assert r.exit_code == 0 and all(n in r.output for n in EXPECTED)
    sets = sum((["--set", o] for o in tiny_cfg_overrides if not o.startswith("out=")), [])
    r = CliRunner().invoke(app, ["train", "--recipe", "gspo", "--out", str(tmp_path / "g"), "--set", "train.steps=1"] + sets)
    assert r.exit_code == 0, r.output
    assert "name: gspo" in (tmp_path / "g" / "config.yaml").read_text()


def test_recipe_yaml_is_a_plain_config_fragment():
    raw = load_recipe("dapo")
    assert set(raw) <= {"recipe", "algorithm", "rollout", "optim", "train"}
