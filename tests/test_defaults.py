"""Defaults follow the model (rlvr.config.defaults): the demo's settings under a model built from scratch, current
practice for a pretrained one; whatever the user sets wins over both; the start of a run prints what matters;
checkpoints by time in the RL loop."""

from __future__ import annotations

import io
import json

import pytest

from rlvr.config.defaults import demo_settings
from rlvr.config.run import ConfigError, dump_config, load_config
from rlvr.run.settings import describe_settings, key_settings


def _pretrained_ok(cfg):
    assert cfg.defaults == "pretrained"
    assert (cfg.sft.steps, cfg.optim.lr, cfg.rollout.max_new_tokens) == (0, 1e-6, 256)
    assert cfg.train.checkpoint_minutes == 10.0 and cfg.train.checkpoint_every == 50
    assert cfg.train.micro_batch_size == 8


def test_no_model_gives_the_demo_and_a_model_path_gives_the_pretrained_defaults(tmp_path):
    demo = load_config()
    assert demo.defaults == "demo"
    assert (demo.sft.steps, demo.sft.lr, demo.optim.lr, demo.rollout.max_new_tokens) == (600, 3e-3, 2e-4, 8)
    _pretrained_ok(load_config(overrides=[f"model.path={tmp_path}"]))
    # a task of the user's with the tiny model: still a model from scratch, which needs the warm-up
    assert load_config(overrides=["task.name=lookup"]).sft.steps == 600


def test_every_demo_setting_is_a_real_field_and_differs_from_the_schema_default(tmp_path):
    flat = {}

    def walk(node, prefix=""):
        for k, v in node.items():
            (walk(v, f"{prefix}{k}.") if isinstance(v, dict) else flat.__setitem__(prefix + k, v))

    walk(demo_settings())
    pre = json.loads(json.dumps(load_config(overrides=[f"model.path={tmp_path}"]).model_dump(mode="json")))
    for key, value in flat.items():
        node = pre
        for part in key.split("."):
            node = node[part]
        assert node != value, key  # otherwise it has no business in demo.yaml


@pytest.mark.parametrize("setting, key, value", [
    ("sft.steps=7", ("sft", "steps"), 7), ("optim.lr=3e-5", ("optim", "lr"), 3e-5),
    ("rollout.max_new_tokens=64", ("rollout", "max_new_tokens"), 64), ("sft.lr=2e-5", ("sft", "lr"), 2e-5),
    ("train.checkpoint_every=0", ("train", "checkpoint_every"), 0),
])
def test_what_the_user_sets_wins_under_either(tmp_path, setting, key, value):
    for extra in ([], [f"model.path={tmp_path}"]):
        cfg = load_config(overrides=extra + [setting])
        assert getattr(getattr(cfg, key[0]), key[1]) == value


def test_a_config_file_and_a_recipe_sit_over_the_defaults(tmp_path):
    f = tmp_path / "my.yaml"
    f.write_text(f"model:\n  path: {tmp_path}\nsft:\n  steps: 3\n")
    cfg = load_config(f)
    assert cfg.defaults == "pretrained" and cfg.sft.steps == 3 and cfg.optim.lr == 1e-6
    f.write_text("optim:\n  lr: 0.01\n")  # no model: the demo, with the file's lr over it
    cfg = load_config(f)
    assert cfg.defaults == "demo" and cfg.optim.lr == 0.01 and cfg.sft.steps == 600
    rec = load_config(recipe="tool_demo", overrides=[f"model.path={tmp_path}"])  # the recipe's own settings win
    assert rec.rollout.max_new_tokens == load_config(recipe="tool_demo").rollout.max_new_tokens


def test_the_choice_can_be_forced_and_is_recorded(tmp_path):
    forced = load_config(overrides=["defaults=pretrained"])
    _pretrained_ok(forced)
    demo = load_config(overrides=["defaults=demo", f"model.path={tmp_path}"])
    assert demo.defaults == "demo" and demo.sft.steps == 600
    with pytest.raises(ConfigError, match="defaults"):
        load_config(overrides=["defaults=pretraind"])
    # the run directory's config.yaml holds the resolved choice and values: reloading it changes nothing
    path = tmp_path / "config.yaml"
    for cfg in (forced, demo, load_config()):
        path.write_text(dump_config(cfg))
        assert load_config(path) == cfg


def test_the_python_api_takes_the_model_into_account(tmp_path, monkeypatch):
    import rlvr.api as api

    assert api.config().defaults == "demo"
    assert api.config({"train": {"steps": 5}}, model_given=True).defaults == "pretrained"
    seen = {}
    monkeypatch.setattr("rlvr.run.train.train", lambda cfg, **kw: seen.setdefault("cfg", cfg))
    api.train({"train": {"steps": 2}}, model=str(tmp_path))
    _pretrained_ok(seen.pop("cfg"))
    api.train({"train": {"steps": 2}}, model=(object(), object()))  # a model object: pretrained too
    _pretrained_ok(seen.pop("cfg"))
    api.train({"train": {"steps": 2}})
    assert seen.pop("cfg").defaults == "demo"
    (tmp_path / "config.json").write_text("{}")  # a model directory: evaluated with the pretrained defaults
    monkeypatch.setattr("rlvr.run.train.eval_model", lambda cfg, *a, **kw: seen.setdefault("cfg", cfg))
    api.evaluate(model=str(tmp_path))
    _pretrained_ok(seen.pop("cfg"))
    api.evaluate(model=str(tmp_path / "run"))  # a run directory (no config.json): not taken for a pretrained model
    assert seen.pop("cfg").defaults == "demo"


def test_rlvr_config_shows_the_pretrained_defaults_for_a_model_path(tmp_path):
    from typer.testing import CliRunner

    from rlvr.cli.commands import app

    out = CliRunner().invoke(app, ["config", "--set", f"model.path={tmp_path}"])
    assert out.exit_code == 0, out.output
    assert "defaults: pretrained" in out.output and "max_new_tokens: 256" in out.output


def test_the_settings_that_matter_are_printed(tmp_path):
    cfg = load_config(overrides=[f"model.path={tmp_path}", "train.checkpoint_minutes=null"])
    rows = dict(key_settings(cfg))
    assert "pretrained" in rows["defaults"] and str(tmp_path) in rows["model"]
    assert "lr 1e-06" in rows["learning"] and "256 new tokens" in rows["rollout"]
    assert rows["warm-up"] == "none (sft.steps: 0)" and "every 50 steps" in rows["run"]
    assert "min" not in rows["run"]
    demo = dict(key_settings(load_config(), model=None))
    assert "from scratch" in demo["defaults"] and "600 SFT steps" in demo["warm-up"] and "lr 0.003" in demo["warm-up"]
    buf = io.StringIO()
    describe_settings(cfg, file=buf)
    assert buf.getvalue().startswith("settings:") and "lr 1e-06" in buf.getvalue()


def test_a_run_prints_its_settings_first(tiny_cfg_overrides, capfd):
    from rlvr.run.train import train

    train(load_config(overrides=tiny_cfg_overrides + ["train.steps=1", "sft.steps=2"]))
    err = capfd.readouterr().err
    assert err.index("settings:") < err.index("SFT") and "K parameters, float32" in err


def test_rl_checkpoints_by_time(tiny_cfg_overrides, tmp_path, monkeypatch):
    """train.checkpoint_minutes: with saves by steps off, a checkpoint after every step that ends 1 minute or
    more after the last save (a fake clock moves 40 s a reading), and one at the end."""
    from rlvr.run.checkpoint import list_checkpoints
    from rlvr.run.train import train
    from rlvr.core.clock import SaveClock

    t = [0.0]

    def clock():
        t[0] += 40.0
        return t[0]

    monkeypatch.setattr(SaveClock, "now", staticmethod(clock))
    train(load_config(overrides=tiny_cfg_overrides + ["train.steps=5", "train.checkpoint_every=0",
                                                      "train.checkpoint_minutes=1", "train.keep_checkpoints=9"]))
    steps = [int(p.name.split("_")[1]) for p in list_checkpoints(tmp_path / "run")]
    assert steps == [2, 4, 5]
