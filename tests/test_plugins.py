"""``plugins``: your own components from the command line, a config file or a resumed run."""

import json
import sys
import textwrap

import pytest

from rlvr.algorithms.registry import ADVANTAGES
from rlvr.config.run import ConfigError, dump_config, load_config

PLUGIN = textwrap.dedent('''
    from pydantic import Field

    from rlvr.algorithms.registry import ADVANTAGES
    from rlvr.registry import Params


    class CenteredParams(Params):
        scale: float = Field(1.0, gt=0.0)


    @ADVANTAGES.register("{name}", CenteredParams)
    def centered(inp, p):
        """Reward minus the batch mean, scaled (a user's own estimator)."""
        r = inp.rewards
        return (r - r.mean()) * p.scale
''')


@pytest.fixture
def plugin(tmp_path):
    made = []

    def write(name, where=None):
        path = (where or tmp_path) / f"{name}_plugin.py"
        path.write_text(PLUGIN.format(name=name))
        made.append(name)
        return path

    yield write
    for name in made:
        if name in ADVANTAGES:
            ADVANTAGES.unregister(name)


def test_a_plugin_file_on_the_command_line_registers_its_component(plugin, tmp_path, monkeypatch):
    path = plugin("t_cli_adv")
    monkeypatch.chdir(tmp_path)
    cfg = load_config(overrides=[f"plugins=[{path.name}]", "algorithm.advantage={name: t_cli_adv, scale: 2}"])
    assert cfg.algorithm.advantage.params.scale == 2.0
    assert ADVANTAGES.get("t_cli_adv").summary.startswith("Reward minus the batch mean")


def test_a_plugin_in_a_config_file_resolves_beside_it_and_the_run_trains_and_resumes(plugin, tmp_path,
                                                                                     tiny_cfg_overrides, monkeypatch):
    from rlvr.run.train import resume, train

    exp = tmp_path / "exp"
    exp.mkdir()
    plugin("t_file_adv", exp)
    (exp / "run.yaml").write_text("plugins: [t_file_adv_plugin.py]\nalgorithm:\n  advantage: {name: t_file_adv}\n")
    monkeypatch.chdir(tmp_path)  # not the config's folder
    over = tiny_cfg_overrides + ["train.steps=2", "train.checkpoint_every=1", "sft.steps=0"]
    cfg = load_config(exp / "run.yaml", overrides=over)
    assert cfg.plugins == [str((exp / "t_file_adv_plugin.py").resolve())]
    train(cfg)
    run = tmp_path / "run"
    assert "t_file_adv" in (run / "config.yaml").read_text()
    assert load_config(run / "config.yaml").algorithm.advantage.name == "t_file_adv"
    resume(run / "checkpoints" / "step_000001", ["train.steps=3"])
    assert [json.loads(x)["step"] for x in (run / "metrics.jsonl").read_text().splitlines()][-1] == 3


def test_a_dotted_module_on_sys_path(plugin, tmp_path, monkeypatch):
    plugin("t_dotted_adv")
    monkeypatch.syspath_prepend(str(tmp_path))
    cfg = load_config(overrides=["plugins=[t_dotted_adv_plugin]", "algorithm.advantage.name=t_dotted_adv"])
    assert cfg.algorithm.advantage.name == "t_dotted_adv"
    assert "t_dotted_adv_plugin" in sys.modules
    assert "plugins:\n- t_dotted_adv_plugin" in dump_config(cfg)


def test_bad_plugins_are_config_errors_naming_them(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match="plugin 'no_such_module_xyz' could not be imported: ModuleNotFoundError"):
        load_config(overrides=["plugins=[no_such_module_xyz]"])
    with pytest.raises(ConfigError, match="plugin 'missing.py' could not be imported: FileNotFoundError"):
        load_config(overrides=["plugins=[missing.py]"])
    (tmp_path / "broken.py").write_text("raise RuntimeError('half-written plugin')\n")
    with pytest.raises(ConfigError, match="RuntimeError: half-written plugin"):
        load_config(overrides=["plugins=[broken.py]"])
    with pytest.raises(ConfigError, match="plugins must be a list"):
        load_config(overrides=["plugins=3"])
    # without the plugin its component is unknown, with the usual message
    with pytest.raises(ConfigError, match="unknown advantage estimator 't_never_registered'"):
        load_config(overrides=["algorithm.advantage.name=t_never_registered"])
