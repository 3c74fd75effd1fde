"""The command line: exit codes and messages for bad input, eval of a checkpoint, sft."""

import json

from typer.testing import CliRunner

from rlvr.cli import app

runner = CliRunner()


def test_config_command_prints_resolved_config():
    r = runner.invoke(app, ["config", "--set", "rollout.group_size=4"])
    assert r.exit_code == 0 and "group_size: 4" in r.stdout


def test_bad_config_exits_2_naming_the_field():
    r = runner.invoke(app, ["train", "--set", "rollout.temperatur=0.5"])
    assert r.exit_code == 2
    assert "rollout.temperatur: unknown field" in r.output


def test_malformed_data_exits_2_with_file_and_line(tmp_path):
    f = tmp_path / "d.jsonl"
    f.write_text('{"prompt": "a", "answer": 1}\n{"prompt": "b"\n')
    r = runner.invoke(app, ["train", "--out", str(tmp_path / "r"), "--set", "task.name=jsonl",
                            "--set", f"task.train_path={f}"])
    assert r.exit_code == 2 and f"{f}:2" in r.output


def test_resume_without_checkpoint_fails_clearly(tmp_path):
    r = runner.invoke(app, ["train", "--resume", str(tmp_path)])
    assert r.exit_code == 2 and "no checkpoint found" in r.output


def test_sft_then_eval_of_its_model(tmp_path, tiny_cfg_overrides):
    sets = sum((["--set", o] for o in tiny_cfg_overrides if not o.startswith("out=")), [])
    r = runner.invoke(app, ["sft", "--out", str(tmp_path / "s")] + sets)
    assert r.exit_code == 0, r.output
    assert (tmp_path / "s" / "model" / "config.json").is_file()
    out = tmp_path / "e.json"
    r = runner.invoke(app, ["eval", "--model", str(tmp_path / "s" / "model"), "--output", str(out)] + sets)
    assert r.exit_code == 0, r.output
    result = json.loads(out.read_text())
    assert result["num_examples"] == 16 and 0.0 <= result["accuracy"] <= 1.0


def test_train_with_no_config_no_recipe_and_no_overrides_is_the_demo(tmp_path):
    """`rlvr train` (with at most --seed and --out) runs the demo recipe; a config file, a recipe or any --set
    is the user's own run, on the library's defaults, not the demo's task and budget."""
    import yaml

    def shown(*args):
        r = runner.invoke(app, ["config", *args])
        assert r.exit_code == 0, r.output
        return yaml.safe_load(r.stdout)

    demo = shown()
    assert demo["recipe"]["name"] == "demo" and demo["task"]["teacher_error"] == 0.7
    assert demo["sft"]["steps"] == 1500 and demo["train"]["threads"] == 2
    assert shown("--recipe", "grpo")["recipe"]["name"] == "grpo"
    mine = shown("--set", "task.name=chains")
    assert mine["recipe"] is None and mine["sft"]["steps"] == 600 and mine["train"]["threads"] is None
    assert shown("--set", "train.steps=5")["recipe"] is None
    cfg = tmp_path / "c.yaml"
    cfg.write_text("train: {steps: 3}\n")
    assert shown("-c", str(cfg))["recipe"] is None
    from rlvr.cli.commands import _train_config

    assert _train_config(None, None, tmp_path / "o", 3, None).recipe.name == "demo"  # --seed and --out keep it


def test_naming_another_component_drops_the_old_ones_parameters():
    r = runner.invoke(app, ["config", "--recipe", "demo", "--set", "task.name=chains"])
    assert r.exit_code == 0, r.output
    import yaml

    task = yaml.safe_load(r.stdout)["task"]
    assert task["name"] == "chains" and "teacher_error" not in task
