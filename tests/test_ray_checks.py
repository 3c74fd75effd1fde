"""Ray runs that cannot fit the cluster are refused up front with the numbers and the fields (Ray would queue
their actors and wait forever); a --launcher ray run shows its progress on the driver; an error raised in
the trainer actor is reported as a local run's is, in one line."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rlvr.config.run import load_config
from rlvr.distributed.ray_resources import RayAsk, RayResourceError, check_ray_resources, ray_asks

ROOT = Path(__file__).resolve().parents[1]


class FakeRay:
    """What the check reads of a cluster: nodes with their resources, and what is free now."""

    def __init__(self, *nodes, free=None, dead=()):
        self._nodes = [{"Alive": True, "Resources": n} for n in nodes] + \
                      [{"Alive": False, "Resources": n} for n in dead]
        self._free = free

    def cluster_resources(self):
        out = {}
        for n in self._nodes:
            if n["Alive"]:
                for k, v in n["Resources"].items():
                    out[k] = out.get(k, 0.0) + v
        return out

    def nodes(self):
        return self._nodes

    def available_resources(self):
        return self._free if self._free is not None else self.cluster_resources()


def _asks(*sets, launcher=True):
    return ray_asks(load_config(overrides=list(sets)), launcher=launcher)


def test_what_a_run_asks_for():
    launch = _asks("rollout.ray.workers=3", "rollout.ray.num_cpus=0.5", "rollout.ray.trainer_gpus=1")
    assert [(a.what, a.count, a.cpus, a.gpus) for a in launch] == [("trainer", 1, 1.0, 1.0),
                                                                   ("rollout worker", 3, 0.5, 0.0)]
    assert _asks("rollout.engine=ray", launcher=False)[0].what == "rollout worker"
    assert _asks(launcher=False) == []  # a local run on the hf engine asks nothing of Ray
    assert [a.what for a in _asks("rollout.engine=ray", "scoring.backend=ray", launcher=False)] == [
        "rollout worker", "scoring task"]
    several = _asks("rollout.ray.trainers=2", "rollout.engine=hf")  # each rank generates in its own actor
    assert [(a.what, a.count) for a in several] == [("trainer", 2)]


def test_more_cpus_than_the_cluster_has_names_numbers_and_fields():
    asks = [RayAsk("trainer", 1, 1.0, 0.0, "rollout.ray.trainers", "rollout.ray.trainer_cpus",
                   "rollout.ray.trainer_gpus"),
            RayAsk("rollout worker", 5, 1.0, 0.0, "rollout.ray.workers", "rollout.ray.num_cpus",
                   "rollout.ray.num_gpus")]
    with pytest.raises(RayResourceError) as e:
        check_ray_resources(FakeRay({"CPU": 2.0}), asks)
    msg = str(e.value)
    assert msg.startswith("the Ray cluster has 2 CPUs in all, but the run asks for 6: ")
    assert "1 trainer x 1 CPU (rollout.ray.trainers x rollout.ray.trainer_cpus)" in msg
    assert "5 rollout workers x 1 CPU (rollout.ray.workers x rollout.ray.num_cpus)" in msg
    assert "rollout.ray.address" in msg and "num_gpus" not in msg


@pytest.mark.parametrize("count,each,fits", [(4, 0.5, True), (5, 0.5, False), (1, 2.0, True), (1, 2.01, False),
                                             (3, 0.0, True)])
def test_the_boundary_is_exact(count, each, fits):
    asks = [RayAsk("rollout worker", count, each, 0.0, "rollout.ray.workers", "rollout.ray.num_cpus")]
    if fits:
        check_ray_resources(FakeRay({"CPU": 2.0}), asks, say=lambda m: None)
    else:
        with pytest.raises(RayResourceError, match="has 2 CPUs in all"):
            check_ray_resources(FakeRay({"CPU": 2.0}), asks)


def test_gpus_on_a_cluster_without_any():
    asks = _asks("rollout.ray.num_gpus=1")
    with pytest.raises(RayResourceError) as e:
        check_ray_resources(FakeRay({"CPU": 8.0}), asks)
    msg = str(e.value)
    assert "has 0 GPUs in all, but the run asks for 1: 1 rollout worker x 1 GPU (rollout.ray.workers x " \
           "rollout.ray.num_gpus)" in msg and "0 runs on CPUs" in msg
    check_ray_resources(FakeRay({"CPU": 8.0, "GPU": 1.0}), asks)  # one GPU is enough
    two = _asks("rollout.ray.num_gpus=0.5", "rollout.ray.workers=2", "rollout.ray.trainer_gpus=0.5")
    with pytest.raises(RayResourceError, match="asks for 1.5: 1 trainer x 0.5 GPUs .* \\+ 2 rollout workers x 0.5"):
        check_ray_resources(FakeRay({"CPU": 8.0, "GPU": 1.0}), two)


def test_an_actor_no_single_node_can_hold():
    """Enough CPUs in all, but spread over nodes smaller than one actor: Ray could never place it."""
    asks = _asks("rollout.ray.num_cpus=3", "rollout.ray.trainer_cpus=1")
    with pytest.raises(RayResourceError) as e:
        check_ray_resources(FakeRay({"CPU": 2.0}, {"CPU": 2.0}), asks)
    msg = str(e.value)
    assert "no node of the Ray cluster can hold one rollout worker of 3 CPUs and 0 GPUs (rollout.ray.num_cpus)" in msg
    assert "its 2 nodes have at most 2 CPUs and 0 GPUs each" in msg
    check_ray_resources(FakeRay({"CPU": 2.0}, {"CPU": 3.0}), asks)  # the larger node holds it


def test_dead_nodes_do_not_count():
    with pytest.raises(RayResourceError, match="has 2 CPUs in all"):
        check_ray_resources(FakeRay({"CPU": 2.0}, dead=[{"CPU": 64.0}]), _asks("rollout.ray.workers=4"))


def test_resources_held_by_other_work_are_waited_for_with_a_message():
    said = []
    check_ray_resources(FakeRay({"CPU": 4.0}, free={"CPU": 1.0}), _asks(), say=said.append)
    assert said == ["waiting for Ray resources other work holds now (2 CPUs asked, 1 free)"]
    said.clear()
    check_ray_resources(FakeRay({"CPU": 4.0}, free={"CPU": 2.0}), _asks(), say=said.append)
    assert said == []


def test_a_local_run_with_ray_workers_is_checked_at_setup(monkeypatch):
    """rollout.engine=ray without the launcher: the trainer is this process, the workers are Ray actors; the
    check is a set-up error (what train, sft and eval all print as one message)."""
    import rlvr.distributed.ray_engine as ray_engine
    from rlvr.run.preflight import SetupError, check_ray

    monkeypatch.setattr(ray_engine, "_connect", lambda address: FakeRay({"CPU": 1.0}))
    with pytest.raises(SetupError, match=r"has 1 CPU in all, but the run asks for 2: 1 rollout worker x 2 CPUs"):
        check_ray(load_config(overrides=["rollout.engine=ray", "rollout.ray.num_cpus=2"]))
    check_ray(load_config(overrides=["rollout.engine=ray", "rollout.ray.num_cpus=1"]))
    monkeypatch.setattr(ray_engine, "_connect", lambda address: pytest.fail("no Ray for a run that uses none"))
    check_ray(load_config())


# --- the driver's progress display -----------------------------------------------------------------------


class _Handle:
    """A trainer actor's handle whose calls run at once, here."""

    def __init__(self):
        from rlvr.distributed.ray_launch import _Trainer

        self.metrics_since = type("M", (), {"remote": staticmethod(_Trainer.metrics_since)})()


class _SyncRay:
    @staticmethod
    def wait(refs, timeout=None):
        return refs, []

    @staticmethod
    def get(ref):
        return ref


def _lines(path, steps, extra=""):
    with open(path, "a") as f:
        for s in steps:
            f.write(json.dumps({"step": s, "reward": s / 10, "accuracy": 0.5, "completion_length": 7.25}) + "\n")
        f.write(extra)


def test_metrics_since_returns_whole_lines_only(tmp_path):
    from rlvr.distributed.ray_launch import _Trainer

    path = tmp_path / "metrics.jsonl"
    assert _Trainer.metrics_since(str(path), 0) == (0, [])  # not written yet
    _lines(path, [1], extra='{"step": 2, "rew')  # a line being written
    offset, lines = _Trainer.metrics_since(str(path), 0)
    assert [json.loads(x)["step"] for x in lines] == [1] and offset == len(lines[0]) + 1
    with open(path, "a") as f:
        f.write('ard": 0}\n')
    offset, lines = _Trainer.metrics_since(str(path), offset)
    assert [json.loads(x)["step"] for x in lines] == [2] and offset == path.stat().st_size
    path.write_text("")  # rewritten shorter (a resumed run): read again from the start
    assert _Trainer.metrics_since(str(path), offset) == (0, [])


def test_progress_lines_show_step_total_and_reward(tmp_path, capsys):
    from rlvr.distributed.ray_launch import _Progress

    path = tmp_path / "metrics.jsonl"
    progress = _Progress(_SyncRay(), _Handle(), path, 3)
    progress.poll()
    _lines(path, [1, 2])
    progress.poll()
    _lines(path, [3], extra="not json\n")
    progress.close(finished=True)
    err = capsys.readouterr().err.splitlines()
    assert err == ["RL 1/3 reward 0.100  acc 0.500  len 7.2", "RL 2/3 reward 0.200  acc 0.500  len 7.2",
                   "RL 3/3 reward 0.300  acc 0.500  len 7.2"]


def test_progress_of_a_resumed_run_shows_only_its_own_steps(tmp_path, capsys):
    from rlvr.distributed.ray_launch import _Progress

    path = tmp_path / "metrics.jsonl"
    _lines(path, [1, 2, 3])  # step 3 ran, but the checkpoint is step 2: the resumed run writes step 3 again
    progress = _Progress(_SyncRay(), _Handle(), path, 40, resume_step=2)
    progress.poll()
    assert capsys.readouterr().err == ""
    path.write_text("")
    _lines(path, [1, 2])  # the resumed run drops step 3 ...
    progress.poll()
    _lines(path, range(3, 41))  # ... and trains on
    progress.close(finished=True)
    err = capsys.readouterr().err.splitlines()
    assert err == [f"RL {s}/40 reward {s / 10:.3f}  acc 0.500  len 7.2" for s in (4, 8, 12, 16, 20, 24, 28, 32, 36, 40)]


def test_a_trainer_error_comes_out_of_rays_wrapper():
    from rlvr.distributed.ray_launch import _remote_cause
    from rlvr.models.checks import ModelDirError

    class Wrapped(Exception):
        def __init__(self, cause):
            super().__init__("ray::_Trainer.train() ... Traceback ...")
            self.cause = cause

    err = _remote_cause(Wrapped(ModelDirError("model.path x: model.safetensors is truncated")))
    assert isinstance(err, ModelDirError) and str(err) == "model.path x: model.safetensors is truncated"
    assert "ray::_Trainer.train()" in err.__notes__[0]  # the actor's traceback, for an error the CLI does not print
    plain = RuntimeError("actor died")
    assert _remote_cause(plain) is plain


# --- a real local cluster --------------------------------------------------------------------------------


def _launch(tmp_path, *sets, timeout=240):
    pytest.importorskip("ray")
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({"prompt": f"say {w}:", "answer": w}) + "\n" for w in ["ab", "cd", "ef"]))
    base = ["task.name=jsonl", f"task.train_path={data}", "task.verifier=tests.reward_fns:shared_chars",
            "task.eval_fraction=0.34", "model.tiny.hidden_size=32", "model.tiny.intermediate_size=64",
            "model.tiny.num_layers=1", "rollout.prompts_per_step=2", "rollout.group_size=2",
            "rollout.max_new_tokens=3", "sft.steps=0", "eval.samples=1", "train.eval_every=0",
            "rollout.ray.num_cpus=0.5", "rollout.ray.trainer_cpus=0.5"]
    cmd = [sys.executable, "-m", "rlvr", "train", "--launcher", "ray", "--out", str(tmp_path / "run")]
    for s in base + list(sets):
        cmd += ["--set", s]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})


@pytest.mark.distributed
def test_launcher_ray_asking_for_more_cpus_than_the_cluster_has_fails_fast(tmp_path):
    t0 = time.perf_counter()
    proc = _launch(tmp_path, "rollout.ray.workers=64", "rollout.ray.num_cpus=1", timeout=120)
    took = time.perf_counter() - t0
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out[-3000:]
    assert "but the run asks for 64.5: 1 trainer x 0.5 CPUs (rollout.ray.trainers x rollout.ray.trainer_cpus) + " \
           "64 rollout workers x 1 CPU (rollout.ray.workers x rollout.ray.num_cpus)" in out, out[-3000:]
    assert "Traceback" not in out and took < 60, took
    assert not (tmp_path / "run" / "metrics.jsonl").exists()


@pytest.mark.distributed
def test_launcher_ray_shows_progress_and_one_line_errors(tmp_path):
    proc = _launch(tmp_path, "train.steps=3")
    assert proc.returncode == 0, proc.stderr[-3000:]
    rl = [ln for ln in proc.stderr.splitlines() if ln.startswith("RL ")]
    assert [ln.split()[1] for ln in rl] == ["1/3", "2/3", "3/3"] and all(" reward " in ln for ln in rl), proc.stderr
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from rlvr.models.tiny import char_tokenizer

    bad, tok = tmp_path / "bad", char_tokenizer()
    Qwen2ForCausalLM(Qwen2Config(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                 num_attention_heads=1, num_key_value_heads=1)).save_pretrained(bad)
    tok.save_pretrained(bad)
    (bad / "model.safetensors").write_bytes((bad / "model.safetensors").read_bytes()[:500])
    (tmp_path / "b").mkdir()
    proc = _launch(tmp_path / "b", f"model.path={bad}", "train.steps=1")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2 and "Traceback" not in out, out[-3000:]  # raised in the actor, shown as one line
    assert f"error: model.path {bad}: model.safetensors is truncated or corrupt" in out
