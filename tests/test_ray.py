"""Ray placement on a local cluster (2 CPUs): rollout workers as actors with the trainer's weights broadcast
after each step, scoring as Ray tasks, and the trainer itself as an actor (--launcher ray)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

ray = pytest.importorskip("ray")

from rlvr.config.run import load_config  # noqa: E402
from rlvr.core.types import Example, GenerationRequest, SamplingParams  # noqa: E402
from rlvr.models import TinyModelConfig, build_tiny_model, char_tokenizer  # noqa: E402
from rlvr.engines.hf import HFEngine  # noqa: E402
from rlvr.distributed.ray_engine import RayConfig, RayEngine  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def cluster():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def _ids(out):
    return [(c.group, c.completion_ids) for c in out]


@pytest.mark.distributed
def test_one_worker_samples_what_the_local_engine_does_and_follows_the_weights(cluster):
    tok = char_tokenizer()
    model = build_tiny_model(TinyModelConfig(hidden_size=32, intermediate_size=64, num_layers=1), tok, seed=0)
    local = HFEngine(model, tok, batch_size=64)
    remote = RayEngine(model, tok, RayConfig(workers=1, num_cpus=1), {"batch_size": 64})
    reqs = [GenerationRequest(Example(f"e{i}", f"{i}+{i}=", "x"), 3) for i in range(4)]
    sp = SamplingParams(1.0, 1.0, 6, seed=5)
    assert _ids(remote.generate(reqs, sp)) == _ids(local.generate(reqs, sp))
    with torch.no_grad():  # an "optimizer step" on the trainer's copy
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    want = local.generate(reqs, sp)
    assert _ids(remote.generate(reqs, sp)) != _ids(want)  # the worker still holds the old weights
    remote.sync_weights()
    got = remote.generate(reqs, sp)
    assert _ids(got) == _ids(want)
    assert all(abs(a - b) < 1e-5 for x, y in zip(got, want) for a, b in zip(x.logprobs, y.logprobs))
    two = RayEngine(model, tok, RayConfig(workers=2, num_cpus=0.5), {"batch_size": 64}).generate(reqs, sp)
    assert [c.group for c in two] == [0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3]  # gathered in request order


@pytest.mark.distributed
def test_training_through_ray_workers_equals_the_single_process_run(cluster, jsonl_cfg_overrides, tmp_path):
    """One rollout worker and Ray scoring tasks: the same seed gives the same completions, so the run's
    weights equal the one-process run's."""
    from rlvr.run.train import train

    over = jsonl_cfg_overrides + ["train.steps=3", "train.checkpoint_every=0", "train.eval_every=0",
                                  "algorithm.minibatches=1", "optim.lr=0.05"]
    train(load_config(overrides=over))
    ray_run = tmp_path / "ray_run"
    train(load_config(overrides=over + [f"out={ray_run}", "rollout.engine=ray", "rollout.ray.workers=1",
                                        "scoring.backend=ray"]))
    a = load_file(str(tmp_path / "run" / "checkpoints" / "step_000003" / "model" / "model.safetensors"))
    b = load_file(str(ray_run / "checkpoints" / "step_000003" / "model" / "model.safetensors"))
    assert all(torch.equal(a[k], b[k]) for k in a)
    rewards = [json.loads(x)["reward"] for x in (ray_run / "metrics.jsonl").read_text().splitlines()]
    assert any(r > 0 for r in rewards)  # a learning signal went through the Ray scoring tasks


@pytest.mark.distributed
def test_asynchronous_training_through_a_ray_worker_equals_the_in_process_producer(cluster, jsonl_cfg_overrides,
                                                                                   tmp_path, monkeypatch):
    """rollout.max_staleness with the rollout engine in a Ray actor (generation off the trainer's process): the
    worker receives every snapshot, so each step's completions and the final weights equal those of the run
    whose producer thread generates in-process."""
    import rlvr.train.loop as loop_mod
    from rlvr.run.train import train

    real, seen = loop_mod.train_step, []

    def spy(cfg, c, step, ro, t0):
        seen.append([comp.completion_ids for comp in ro.completions])
        return real(cfg, c, step, ro, t0)

    monkeypatch.setattr(loop_mod, "train_step", spy)
    over = jsonl_cfg_overrides + ["train.steps=6", "train.checkpoint_every=0", "train.eval_every=0",
                                  "algorithm.minibatches=1", "optim.lr=0.05", "rollout.max_staleness=1",
                                  "algorithm.correction.name=tis"]
    train(load_config(overrides=over))
    local, seen[:] = list(seen), []
    ray_run = tmp_path / "ray_run"
    train(load_config(overrides=over + [f"out={ray_run}", "rollout.engine=ray", "rollout.ray.workers=1"]))
    assert seen == local  # (a worker left on the initial weights samples other tokens from step 2 on)
    a = load_file(str(tmp_path / "run" / "checkpoints" / "step_000006" / "model" / "model.safetensors"))
    b = load_file(str(ray_run / "checkpoints" / "step_000006" / "model" / "model.safetensors"))
    # to rounding, not bit for bit: the worker runs torch on its own thread count, and the TIS correction puts
    # its behaviour log-probs (equal to ~1e-7) into the loss
    assert all(torch.allclose(a[k], b[k], rtol=0, atol=1e-5) for k in a)
    m = [json.loads(x) for x in (ray_run / "metrics.jsonl").read_text().splitlines()]
    assert [x["rollout/staleness_mean"] for x in m] == [0.0] + [1.0] * 5


@pytest.mark.distributed
def test_launcher_ray_runs_the_trainer_as_an_actor(tmp_path):
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({"prompt": f"say {w}:", "answer": w}) + "\n" for w in ["ab", "cd", "ef"]))
    sets = ["task.name=jsonl", f"task.train_path={data}", "task.verifier=tests.reward_fns:shared_chars",
            "task.eval_fraction=0.34", "model.tiny.hidden_size=32", "model.tiny.intermediate_size=64",
            "model.tiny.num_layers=1", "rollout.prompts_per_step=2", "rollout.group_size=2",
            "rollout.max_new_tokens=3", "train.steps=2", "sft.steps=0", "eval.samples=1", "train.eval_every=0",
            "rollout.ray.num_cpus=0.5", "rollout.ray.trainer_cpus=0.5"]
    cmd = [sys.executable, "-m", "rlvr", "train", "--launcher", "ray", "--out", str(tmp_path / "run")]
    for s in sets:
        cmd += ["--set", s]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**__import__("os").environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    cfg = load_config(tmp_path / "run" / "config.yaml")
    assert cfg.rollout.engine == "ray" and cfg.rollout.ray.engine == "hf"  # generation went to Ray workers
    assert [json.loads(x)["step"] for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()] == [1, 2]


def test_missing_ray_is_a_clear_setup_error(monkeypatch):
    import importlib.util

    from rlvr.run.preflight import SetupError, check_packages

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "ray" else real(name, *a))
    with pytest.raises(SetupError, match=r"rollout.engine=ray and scoring.backend=ray needs Ray.*rlvr\[ray\]"):
        check_packages(load_config(overrides=["rollout.engine=ray", "scoring.backend=ray"]))


@pytest.mark.distributed
def test_ctrl_c_on_the_driver_stops_the_trainer_actor_after_its_step_with_a_checkpoint(tmp_path):
    """SIGINT to the driver of --launcher ray: the actor finishes its step and checkpoints it (not only the
    last scheduled checkpoint), and the driver exits saying so, as a local run does."""
    import os
    import signal
    import time

    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({"prompt": f"say {w}:", "answer": w}) + "\n" for w in ["ab", "cd", "ef"]))
    sets = ["task.name=jsonl", f"task.train_path={data}", "task.verifier=tests.reward_fns:shared_chars",
            "task.eval_fraction=0.34", "model.tiny.hidden_size=32", "model.tiny.intermediate_size=64",
            "model.tiny.num_layers=1", "rollout.prompts_per_step=2", "rollout.group_size=2",
            "rollout.max_new_tokens=3", "train.steps=100000", "train.checkpoint_every=0", "sft.steps=0",
            "eval.samples=1", "train.eval_every=0", "rollout.ray.num_cpus=0.5", "rollout.ray.trainer_cpus=0.5"]
    cmd = [sys.executable, "-m", "rlvr", "train", "--launcher", "ray", "--out", str(tmp_path / "run")]
    for s in sets:
        cmd += ["--set", s]
    # a shell's background job ignores SIGINT and its children inherit that: give the driver the default
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)},
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    metrics = tmp_path / "run" / "metrics.jsonl"
    deadline = time.time() + 240
    while time.time() < deadline and proc.poll() is None:
        if metrics.is_file() and len(metrics.read_text().splitlines()) >= 2:
            break
        time.sleep(0.5)
    assert proc.poll() is None, proc.communicate()[1][-3000:]
    proc.send_signal(signal.SIGINT)
    try:
        out, err = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:  # never leave a training driver (and its Ray instance) behind
            proc.kill()
    assert proc.returncode != 0 and "checkpoint saved" in err, err[-3000:]
    steps = [json.loads(x)["step"] for x in metrics.read_text().splitlines()]
    saved = sorted(p.name for p in (tmp_path / "run" / "checkpoints").iterdir() if p.name.startswith("step_"))
    assert saved == [f"step_{steps[-1]:06d}"], (saved, steps)  # the step it stopped after, not step 0 or none
    assert 2 <= steps[-1] < 100000


def _ray_trainers(out: Path, trainers: int, env: dict | None = None, timeout: float = 400):
    """tests/dist_worker.py's run (its per-request engine loaded as a plugin in every actor) with
    ``--launcher ray`` and ``trainers`` trainer actors on a local 2-CPU cluster."""
    import os

    from tests.dist_config import BASE, data_file

    out.parent.mkdir(parents=True, exist_ok=True)
    sets = [*BASE, f"task.train_path={data_file(str(out))}", f"plugins=[{ROOT / 'tests' / 'dist_worker.py'}]",
            f"rollout.ray.trainers={trainers}", "rollout.ray.trainer_cpus=1"]
    cmd = [sys.executable, "-m", "rlvr", "train", "--launcher", "ray", "--out", str(out)]
    for s in sets:
        cmd += ["--set", s]
    run_env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", **(env or {})}
    run_env.pop("WORLD_SIZE", None)
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout, env=run_env)


@pytest.mark.distributed
def test_two_ray_trainer_actors_train_as_one_process_does(tmp_path):
    """--launcher ray with rollout.ray.trainers=2: two actors form a DDP group (gloo) and end each checkpointed
    step with the one-process run's parameters, as two torchrun ranks do."""
    from tests.test_distributed import differs, max_diff, metrics, ok, run, weights

    one, two = tmp_path / "one" / "run", tmp_path / "two" / "run"
    ok(run(one, 1))
    ok(_ray_trainers(two, 2))
    for step in (2, 4):
        assert not (why := differs(weights(one, step), weights(two, step), step)), why
    assert max_diff(weights(one, 2), weights(one, 4)) > 1e-4  # the runs learned something
    assert [m["step"] for m in metrics(two)] == [1, 2, 3, 4]  # rank 0 alone writes the log
    for a, b in zip(metrics(one), metrics(two)):
        for key in ("reward", "loss", "grad_norm", "completions"):
            assert a[key] == pytest.approx(b[key], rel=1e-5, abs=1e-7), (key, a["step"])
    assert json.loads((two / "summary.json").read_text())["world_size"] == 2
    import yaml

    raw = yaml.safe_load((two / "config.yaml").read_text())  # (its plugin is already imported here)
    assert raw["rollout"]["engine"] == "per_request" and raw["rollout"]["ray"]["trainers"] == 2  # generated in
    # the trainer actors, not in Ray rollout workers


@pytest.mark.distributed
def test_a_ray_trainer_rank_raising_stops_the_run_with_its_error(tmp_path):
    import time

    t0 = time.perf_counter()
    proc = _ray_trainers(tmp_path / "x" / "run", 2, env={"RLVR_TEST_FAIL_RANK": "1"}, timeout=300)
    assert proc.returncode != 0
    assert "injected failure on rank 1" in proc.stdout + proc.stderr, proc.stderr[-3000:]
    assert time.perf_counter() - t0 < 200  # rank 0 did not wait in its collective for the gloo timeout


def test_several_trainers_refuse_ray_rollout_workers():
    from rlvr.distributed.ray_launch import with_ray_engine

    cfg = load_config(overrides=["rollout.ray.trainers=2"])
    assert with_ray_engine(cfg) is cfg  # each rank generates with the run's own engine
    assert with_ray_engine(load_config()).rollout.engine == "ray"  # one trainer: rollout workers beside it
    with pytest.raises(ValueError, match="trainers=2.*rollout.engine to hf or native"):
        with_ray_engine(load_config(overrides=["rollout.ray.trainers=2", "rollout.engine=ray"]))
