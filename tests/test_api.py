"""The README's Python API example runs as written, and the API's pieces behave as documented."""

import re
from pathlib import Path

import pytest

from rlvr.api import config, evaluate, task, train
from rlvr.config.run import ConfigError, RunConfig

README = Path(__file__).resolve().parents[1] / "README.md"


def _example() -> str:
    text = README.read_text()
    m = re.search(r"<!-- api-example -->\s*```python\n(.*?)```", text, re.S)
    assert m, "README has no Python API example"
    return m.group(1)


def test_readme_example_is_short_and_runs(tmp_path, monkeypatch, capsys):
    code = _example()
    assert len(code.strip().splitlines()) <= 16
    monkeypatch.chdir(tmp_path)
    scope: dict = {}
    exec(compile(code, "README.md", "exec"), scope)
    summary, result = scope["summary"], scope["result"]
    assert Path(summary["run_dir"]) == Path("runs/api-demo")
    assert (tmp_path / "runs/api-demo/checkpoints").is_dir() and (tmp_path / "runs/api-demo/summary.json").is_file()
    assert result["num_examples"] == 30 and 0.0 <= result["accuracy"] <= 1.0
    out = capsys.readouterr()
    assert "Loading" not in out.err and "it/s]" not in out.err  # no transformers progress bars


def test_config_from_dict_yaml_and_config(tmp_path):
    cfg = config({"train": {"steps": 7}}, overrides=["optim.lr=1e-3"])
    assert isinstance(cfg, RunConfig) and cfg.train.steps == 7 and cfg.optim.lr == 1e-3
    path = tmp_path / "c.yaml"
    path.write_text("train: {steps: 9}\n")
    assert config(path).train.steps == 9 and config(str(path), ["train.steps=2"]).train.steps == 2
    assert config(cfg, ["seed=3"]).train.steps == 7 and config(cfg, ["seed=3"]).seed == 3
    assert config(recipe="dapo").recipe.name == "dapo"
    with pytest.raises(ConfigError, match="train.steps"):
        config({"train": {"steps": -1}})


def test_task_rows_and_errors():
    t = task([{"prompt": "1+1=", "answer": 2, "level": "easy"}, {"prompt": "2+2=", "answer": "4"}],
             eval=[{"prompt": "3+3=", "answer": "6"}])
    assert [e.answer for e in t.examples("train")] == ["2", "4"] and t.examples("train")[0].meta == {"level": "easy"}
    assert t.score(t.examples("eval")[0], "6").reward == 1.0  # the default numeric verifier
    with pytest.raises(ValueError, match="row 0: expected a mapping with 'prompt' and 'answer'"):
        task([{"question": "x"}])
    with pytest.raises(ValueError, match="not both"):
        task([{"prompt": "p", "answer": "a"}], reward=lambda p, c, **k: [0.0] * len(c), verifier="numeric")


def test_model_object_and_evaluate(tmp_path):
    from rlvr.models.loading import load_model

    cfg = config({"model": {"tiny": {"hidden_size": 32, "intermediate_size": 64, "num_layers": 1}},
                  "sft": {"steps": 0}, "train": {"steps": 1, "checkpoint_every": 0},
                  "rollout": {"prompts_per_step": 2, "group_size": 2, "max_new_tokens": 3},
                  "eval": {"num_examples": 4, "report_greedy": False}, "out": str(tmp_path / "r")})
    model, tok = load_model(cfg.model, seed=1)
    summary = train(cfg, model=(model, tok), reward=lambda p, c, **k: [float(len(x) > 1) for x in c])
    assert summary["steps"] == 1
    result = evaluate(cfg, model=model, tokenizer=tok)
    assert result["model"] == "model object" and result["num_examples"] == 4
