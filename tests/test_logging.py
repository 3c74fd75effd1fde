"""Metric logging: metrics.jsonl always; TensorBoard, W&B (offline) and MLflow where their packages are
installed, each read back from what it wrote; a clear error naming the pip extra when one is missing."""

import builtins

import pytest

from rlvr.config.run import ConfigError, load_config
from rlvr.run.logging import MultiLog, open_metrics_log, read_metrics

STEPS = [(1, {"reward": 0.25, "eval/pass@4": 0.5, "eval/ci95": [0.1, 0.9], "flag": True}),
         (2, {"reward": 0.75, "loss": float("nan")})]


def _cfg(tmp_path, *backends):
    return load_config(overrides=[f"out={tmp_path}", f"logging.backends=[{','.join(backends)}]"])


def _write(log):
    for step, m in STEPS:
        log.write(step, m)
    log.close()


def test_jsonl_is_always_written_and_resume_drops_later_lines(tmp_path):
    cfg = _cfg(tmp_path, "jsonl")
    _write(open_metrics_log(cfg, tmp_path))
    lines = read_metrics(tmp_path / "metrics.jsonl")
    assert [m["step"] for m in lines] == [1, 2] and lines[0]["eval/pass@4"] == 0.5 and lines[1]["loss"] == "nan"
    log = open_metrics_log(cfg, tmp_path, resume_step=1)
    log.write(2, {"reward": 1.0})
    log.close()
    assert [(m["step"], m["reward"]) for m in read_metrics(tmp_path / "metrics.jsonl")] == [(1, 0.25), (2, 1.0)]


def test_config_rejects_unknown_backend():
    with pytest.raises(ConfigError, match="tensorboard"):
        load_config(overrides=["logging.backends=[jsonl,neptune]"])


@pytest.mark.parametrize("backend,module", [("tensorboard", "tensorboard"), ("wandb", "wandb"), ("mlflow", "mlflow")])
def test_missing_package_names_the_extra(tmp_path, monkeypatch, backend, module):
    real = builtins.__import__

    def fake(name, *a, **kw):
        if name == module or name.startswith(module + "."):
            raise ImportError(f"No module named {module!r}")
        return real(name, *a, **kw)

    monkeypatch.setattr(builtins, "__import__", fake)
    import importlib

    real_import_module = importlib.import_module
    monkeypatch.setattr(importlib, "import_module",
                        lambda name, *a: fake(name) if name.split(".")[0] == module else real_import_module(name, *a))
    with pytest.raises(ImportError, match=rf"pip install 'rlvr\[{backend}\]'"):
        open_metrics_log(_cfg(tmp_path, backend), tmp_path)


def test_failing_backend_is_dropped_not_fatal(tmp_path):
    class Broken:
        closed = False

        def write(self, step, metrics):
            raise OSError("disk full")

        def close(self):
            Broken.closed = True

    from rlvr.run.logging import MetricsLog

    log = MultiLog(MetricsLog(tmp_path / "metrics.jsonl"), [Broken()])
    with pytest.warns(UserWarning, match="disk full"):
        log.write(1, {"reward": 1.0})
    log.write(2, {"reward": 0.0})
    log.close()
    assert len(read_metrics(tmp_path / "metrics.jsonl")) == 2 and not log.backends


def test_tensorboard_events_hold_the_scalars(tmp_path):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    _write(open_metrics_log(_cfg(tmp_path, "jsonl", "tensorboard"), tmp_path))
    acc = EventAccumulator(str(tmp_path / "tensorboard"))
    acc.Reload()
    assert [(e.step, e.value) for e in acc.Scalars("reward")] == [(1, 0.25), (2, 0.75)]
    assert [e.value for e in acc.Scalars("eval/pass@4")] == [0.5]
    assert "eval/ci95" not in acc.Tags()["scalars"] and "flag" not in acc.Tags()["scalars"]
    assert (tmp_path / "metrics.jsonl").is_file()


def test_wandb_offline_run_is_written_and_resumes_the_same_run(tmp_path, monkeypatch):
    pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    cfg = _cfg(tmp_path, "wandb")
    log = open_metrics_log(cfg, tmp_path)
    for step, m in STEPS:
        log.write(step, m)
    run = log.backends[0]._run
    assert run.summary["reward"] == 0.75 and run.summary["eval/pass@4"] == 0.5 and "eval/ci95" not in run.summary.keys()
    assert run.config["rollout"]["group_size"] == 8
    log.close()
    run_id = (tmp_path / "wandb-run-id").read_text()
    runs = list((tmp_path / "wandb").glob(f"offline-run-*-{run_id}"))
    assert len(runs) == 1 and list(runs[0].glob("*.wandb"))
    log = open_metrics_log(cfg, tmp_path, resume_step=1)
    log.close()
    assert (tmp_path / "wandb-run-id").read_text() == run_id


def test_mlflow_run_holds_metrics_and_params(tmp_path):
    mlflow = pytest.importorskip("mlflow")
    cfg = _cfg(tmp_path, "mlflow")
    _write(open_metrics_log(cfg, tmp_path))
    run_id = (tmp_path / "mlflow-run-id").read_text()
    client = mlflow.tracking.MlflowClient((tmp_path / "mlruns").resolve().as_uri())
    assert [(m.step, m.value) for m in client.get_metric_history(run_id, "reward")] == [(1, 0.25), (2, 0.75)]
    assert [m.value for m in client.get_metric_history(run_id, "eval/pass_at_4")] == [0.5]
    run = client.get_run(run_id)
    assert run.data.params["rollout.group_size"] == "8" and run.info.status == "FINISHED"
    log = open_metrics_log(cfg, tmp_path, resume_step=2)  # resumes the same MLflow run
    log.write(3, {"reward": 1.0})
    log.close()
    assert len(client.get_metric_history(run_id, "reward")) == 3


def test_backends_in_a_real_training_run(tmp_path, tiny_cfg_overrides):
    pytest.importorskip("tensorboard")
    from rlvr.run.train import train

    train(load_config(overrides=tiny_cfg_overrides + ["logging.backends=[tensorboard]", "sft.steps=0",
                                                      "train.steps=2"]))
    run = tmp_path / "run"
    assert list((run / "tensorboard").glob("events.out.tfevents.*"))
    assert len(read_metrics(run / "metrics.jsonl")) == 2
