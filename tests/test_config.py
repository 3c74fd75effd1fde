"""Config loading, overrides, clear errors, and the resolved config reproducing a run."""

import pytest
import yaml

from rlvr.config.run import Component, ConfigError, RunConfig, apply_overrides, dump_config, load_config


def test_defaults_are_the_demo_and_valid():
    cfg = load_config()
    assert cfg.task.name == "arithmetic" and cfg.model.path is None and cfg.sft.steps > 0


def test_override_sets_component_param():
    cfg = load_config(overrides=["algorithm.objective.clip_high=0.28", "rollout.group_size=4"])
    assert cfg.algorithm.objective.params.clip_high == 0.28
    assert cfg.rollout.group_size == 4


def test_override_on_component_given_by_name(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("algorithm:\n  advantage: grpo\n")
    cfg = load_config(f, ["algorithm.advantage.std=population"])
    assert cfg.algorithm.advantage.params.std == "population"


@pytest.mark.parametrize("override,needle", [
    ("rollout.temperatur=1.0", "rollout.temperatur: unknown field (allowed: engine, prompts_per_step"),
    ("algorithm.objective.clip_hgh=0.3", "clip_hgh: unknown field (allowed: clip_low, clip_high"),
    ("algorithm.advantage.name=nope", "unknown advantage estimator 'nope'; valid names: "),
    ("algorithm.advantage.std=sample", "'unbiased', 'population' or 'none'"),
    ("optim.schedule=cos", "optim.schedule: Input should be 'constant', 'linear' or 'cosine'"),
    ("rollout.group_size=0", "rollout.group_size: Input should be greater than 0"),
    ("algorithm.kl.estimator=k4", "valid names: k1, k2, k3"),
    ("task.name=nope", "unknown task 'nope'; valid names: arithmetic, benchmark, chains, dataset, "),
    ("algorithm.minibatches=3", "must divide the completions per step"),
    ("task.max_value=abc", "max_value: Input should be a valid integer"),
    ("rollout.top_p=1.5", "rollout.top_p: Input should be less than or equal to 1"),
])
def test_bad_config_names_field_and_allowed_values(override, needle):
    with pytest.raises(ConfigError) as e:
        load_config(overrides=[override])
    assert needle in str(e.value)


def test_several_errors_reported_together():
    with pytest.raises(ConfigError) as e:
        load_config(overrides=["rollout.group_size=0", "optim.lr=-1"])
    assert len(e.value.lines) == 2


def test_malformed_override_and_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="expected KEY=VALUE"):
        load_config(overrides=["rollout.group_size"])
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("rollout: [1, 2\n")
    with pytest.raises(ConfigError, match="invalid YAML"):
        load_config(bad)


def test_resolved_config_round_trips(tmp_path):
    cfg = load_config(overrides=["algorithm.objective.clip_high=0.28", "seed=7", "task.max_value=50"])
    f = tmp_path / "config.yaml"
    f.write_text(dump_config(cfg))
    again = load_config(f)
    assert again == cfg
    assert yaml.safe_load(f.read_text())["algorithm"]["objective"]["clip_high"] == 0.28


def test_config_is_frozen():
    cfg = load_config()
    with pytest.raises(Exception):
        cfg.seed = 3


def test_apply_overrides_parses_yaml_values():
    raw = apply_overrides({}, ["a.b=1e-4", "a.c=[1, 2]", "a.d=null", "e=true"])
    assert raw == {"a": {"b": 1e-4, "c": [1, 2], "d": None}, "e": True}


def test_every_field_has_a_description():
    def walk(model, path=""):
        for name, field in model.model_fields.items():
            ann = field.annotation
            if isinstance(ann, type) and hasattr(ann, "model_fields") and ann is not Component:
                walk(ann, f"{path}{name}.")
            else:
                assert field.description, f"{path}{name} has no description"
    walk(RunConfig)
