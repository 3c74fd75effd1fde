"""A first run that never surprises: context limits, bad model directories, missing pieces, interruption.

Each failure is checked for what a user sees: one message naming the file or setting, before any work.
"""

import json
import os
import signal
import subprocess
import sys
import time

import pytest
import torch
from typer.testing import CliRunner

import rlvr.train.loop as loop_mod
import rlvr.sft.supervised as sft_mod
from rlvr.cli import app
from rlvr.config.run import load_config
from rlvr.models.checks import ModelDirError
from rlvr.models.loading import ModelConfig, load_model
from rlvr.models.tiny import char_tokenizer
from rlvr.run.checkpoint import list_checkpoints
from rlvr.run.preflight import SetupError
from rlvr.run.prompt_limits import PromptLimitError, fit_prompts
from rlvr.run.train import resume, train
from rlvr.run.rundir import RunDirBusy, lock_run_dir

runner = CliRunner()


def _jsonl(tmp_path, prompts):
    path = tmp_path / "d.jsonl"
    path.write_text("".join(json.dumps({"prompt": p, "answer": "1", "id": f"p{i}"}) + "\n" for i, p in enumerate(prompts)))
    return path


def _data_cfg(tmp_path, prompts, *extra):
    return load_config(overrides=[f"out={tmp_path / 'run'}", "task.name=jsonl", f"task.train_path={_jsonl(tmp_path, prompts)}",
                                  "task.eval_fraction=0.25", "model.tiny.hidden_size=32",
                                  "model.tiny.intermediate_size=64", "model.tiny.num_layers=1",
                                  "model.tiny.max_positions=32", "rollout.max_new_tokens=8",
                                  "rollout.prompts_per_step=2", "rollout.group_size=2", "sft.steps=0", "train.steps=1",
                                  "eval.report_greedy=false", *extra])


# --- context limits ------------------------------------------------------------------------------------


def test_prompts_past_the_context_are_refused_with_the_numbers(tmp_path):
    prompts = ["short:"] * 6 + ["x" * 30 + ":", "y" * 40 + ":"]  # 32 positions - 8 new tokens = 24 for a prompt
    with pytest.raises(PromptLimitError, match=r"longer than 24 tokens .*32 positions minus rollout.max_new_tokens=8"):
        train(_data_cfg(tmp_path, prompts, "task.eval_path=" + str(_jsonl(tmp_path / "..", ["e:"]))))


def test_drop_and_truncate_left_fit_every_prompt(tmp_path):
    tok = char_tokenizer()
    prompts = [f"q{i}:" for i in range(6)] + ["a" * 20 + "the question: 7+8=", "b" * 50 + "what is 1+1?"]
    for policy, want_kept in (("drop", 6), ("truncate_left", 8)):
        cfg = _data_cfg(tmp_path, prompts, "task.eval_fraction=0.0", f"data.prompt_overflow={policy}",
                        "data.max_prompt_tokens=20")
        from rlvr.run.setup import build_task

        task, model = build_task(cfg), load_model(cfg.model)[0]
        report = fit_prompts(task, tok, model, 8, 20, policy)
        kept = task.examples("train")
        assert len(kept) == want_kept and report.limit == 20
        assert all(len(tok(e.prompt)["input_ids"]) <= 20 for e in kept)
        if policy == "truncate_left":
            assert report.splits["train"]["truncated"] == 2
            cut = {e.id: e.prompt for e in kept}
            assert cut["p6"].endswith("the question: 7+8=") and cut["p7"].endswith("what is 1+1?")
        else:
            assert report.splits["train"]["dropped"] == 2


def test_learned_position_model_from_a_local_directory_is_checked(tmp_path):
    from transformers import GPT2Config, GPT2LMHeadModel

    tok = char_tokenizer()
    model = GPT2LMHeadModel(GPT2Config(vocab_size=len(tok), n_positions=16, n_embd=32, n_layer=1, n_head=2,
                                       bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id))
    model.save_pretrained(tmp_path / "gpt2")
    tok.save_pretrained(tmp_path / "gpt2")
    cfg = _data_cfg(tmp_path, ["a" * 12 + ":"] * 4, f"model.path={tmp_path / 'gpt2'}")
    with pytest.raises(PromptLimitError, match="16 positions"):  # not IndexError deep in the embedding
        train(cfg)
    result = runner.invoke(app, ["train", "--set", f"model.path={tmp_path / 'gpt2'}", "--set", "rollout.max_new_tokens=16",
                                 "--out", str(tmp_path / "r2")])
    assert result.exit_code == 2 and "leaves no room for a prompt" in result.output


# --- bad model directories and missing pieces ----------------------------------------------------------


@pytest.fixture
def model_dir(tmp_path):
    cfg = load_config(overrides=["model.tiny.hidden_size=32", "model.tiny.intermediate_size=64", "model.tiny.num_layers=1"])
    model, tok = load_model(cfg.model)
    model.save_pretrained(tmp_path / "m")
    tok.save_pretrained(tmp_path / "m")
    return tmp_path / "m"


def test_corrupted_config_json_names_the_file_and_line(model_dir):
    (model_dir / "config.json").write_text('{\n  "model_type": "qwen2",\n  "hidden_size": 32,,\n}')
    with pytest.raises(ModelDirError, match=r"config.json: invalid JSON .* line 3"):
        load_model(ModelConfig(path=str(model_dir)))


def test_directory_without_weights_or_tokenizer(model_dir):
    (model_dir / "model.safetensors").unlink()
    with pytest.raises(ModelDirError, match="no weights"):
        load_model(ModelConfig(path=str(model_dir)))


def test_unreadable_tokenizer(model_dir):
    (model_dir / "tokenizer.json").write_text("{not json")
    with pytest.raises(ModelDirError, match="cannot read the tokenizer"):
        load_model(ModelConfig(path=str(model_dir)))


def test_cli_prints_one_line_for_a_bad_model_dir(model_dir, tmp_path):
    (model_dir / "config.json").write_text("{}")
    result = runner.invoke(app, ["train", "--set", f"model.path={model_dir}", "--out", str(tmp_path / "r")])
    assert result.exit_code == 2 and "no 'model_type' field" in result.output and "Traceback" not in result.output


def test_chat_template_missing_is_a_clear_error(tmp_path):
    result = runner.invoke(app, ["train", "--set", "model.chat_template=true", "--set", "sft.steps=0",
                                 "--out", str(tmp_path / "r")])
    assert result.exit_code == 2 and "has no chat template" in result.output and "chat_template=false" in result.output
    assert not (tmp_path / "r" / "eval").exists()


def test_missing_logging_backend_fails_before_any_work(tmp_path, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "wandb" else real(name, *a))
    cfg = load_config(overrides=[f"out={tmp_path / 'r'}", "logging.backends=[jsonl,wandb]"])
    t0 = time.perf_counter()
    with pytest.raises(SetupError, match=r"pip install 'rlvr\[wandb\]'"):
        train(cfg)
    assert time.perf_counter() - t0 < 20 and not (tmp_path / "r" / "eval").exists()


def test_vllm_engine_without_vllm_or_with_sleep_mode_on_cpu_fails_before_any_work(tmp_path, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "vllm" else real(name, *a))
    t0 = time.perf_counter()
    with pytest.raises(SetupError, match=r"needs vLLM.*pip install 'rlvr\[vllm\]'.*scripts/setup_vllm.sh"):
        train(load_config(overrides=[f"out={tmp_path / 'a'}", "rollout.engine=vllm"]))
    assert time.perf_counter() - t0 < 20 and not (tmp_path / "a" / "warmup").exists()
    monkeypatch.setattr(importlib.util, "find_spec", real)
    if not torch.cuda.is_available():
        monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: object() if name == "vllm" else real(name, *a))
        with pytest.raises(SetupError, match="sleep_mode=true needs a GPU"):
            train(load_config(overrides=[f"out={tmp_path / 'b'}", "rollout.engine=vllm", "rollout.vllm.sleep_mode=true"]))


def test_bad_vllm_settings_are_config_errors():
    from rlvr.config.errors import ConfigError

    for bad in ("rollout.vllm.gpu_memory_utilization=1.5", "rollout.vllm.tensor_parallel_size=0",
                "rollout.vllm.dtype=float8", "rollout.vllm.kv_cache_gib=0", "rollout.vllm.unknown=1"):
        with pytest.raises((ConfigError, ValueError)):
            load_config(overrides=["rollout.engine=vllm", bad])


def test_cuda_without_a_gpu_and_group_size_one(tmp_path):
    if not torch.cuda.is_available():
        with pytest.raises(SetupError, match="no CUDA device"):
            train(load_config(overrides=[f"out={tmp_path / 'a'}", "device=cuda"]))
    with pytest.raises(SetupError, match="group-relative advantage is 0"):
        train(load_config(overrides=[f"out={tmp_path / 'b'}", "rollout.group_size=1",
                                     "algorithm.advantage.name=batch_std"]))


def test_eval_of_a_missing_model_path(tmp_path):
    result = runner.invoke(app, ["eval", "--model", str(tmp_path / "nope")])
    assert result.exit_code == 2 and "no such file or directory" in result.output
    (tmp_path / "empty").mkdir()
    result = runner.invoke(app, ["eval", "--model", str(tmp_path / "empty")])
    assert result.exit_code == 2 and "neither a model directory" in result.output


# --- interruption, locking, messages -------------------------------------------------------------------


def test_sigterm_finishes_the_step_and_checkpoints(tiny_cfg_overrides, tmp_path, monkeypatch):
    real = loop_mod.rl_step

    def step_then_term(cfg, c, step):
        out = real(cfg, c, step)
        if step == 1:
            os.kill(os.getpid(), signal.SIGTERM)
        return out

    monkeypatch.setattr(loop_mod, "rl_step", step_then_term)
    with pytest.raises(KeyboardInterrupt, match="SIGTERM: stopped after step 2"):
        train(load_config(overrides=tiny_cfg_overrides + ["train.steps=5", "train.checkpoint_every=0"]))
    assert [p.name for p in list_checkpoints(tmp_path / "run")] == ["step_000002"]
    monkeypatch.setattr(loop_mod, "rl_step", real)
    assert resume(tmp_path / "run")["steps"] == 5


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupted_sft_saves_its_progress(tiny_cfg_overrides, tmp_path, monkeypatch, sig):
    real = sft_mod.sft

    def sft_with_signal(*a, on_step=None, **kw):
        def hook(i, loss):
            on_step(i, loss)
            if i == 2:
                os.kill(os.getpid(), sig)
        return real(*a, on_step=hook, **kw)

    monkeypatch.setattr("rlvr.run.train.sft", sft_with_signal)
    with pytest.raises(KeyboardInterrupt, match=r"during SFT after step 3 of 50.*rlvr train --resume"):
        train(load_config(overrides=tiny_cfg_overrides + ["sft.steps=50"]))
    saved = tmp_path / "run" / "warmup"
    state = json.loads((saved / "state.json").read_text())
    assert state["step"] == 3 and state["steps"] == 50 and len(state["losses"]) == 3
    assert not list_checkpoints(tmp_path / "run")
    monkeypatch.setattr("rlvr.run.train.sft", real)
    summary = resume(tmp_path / "run")  # the warm-up continues at step 4, then RL runs
    assert summary["steps"] == 3 and list_checkpoints(tmp_path / "run")
    assert summary["sft_seconds"] > 0
    assert not saved.exists()  # the first RL checkpoint holds the warm-up's result


def test_a_locked_run_directory_refuses_a_second_writer(tiny_cfg_overrides, tmp_path):
    train(load_config(overrides=tiny_cfg_overrides + ["train.steps=2"]))
    run = tmp_path / "run"
    with lock_run_dir(run):
        with pytest.raises(RunDirBusy, match=f"pid {os.getpid()}"):
            resume(run, ["train.steps=3"])
        code = ("import sys; from rlvr.run.train import resume\n"
                "try:\n    resume(sys.argv[1], ['train.steps=3'])\n"
                "except Exception as e:\n    print(type(e).__name__, e); sys.exit(3)\n")
        proc = subprocess.run([sys.executable, "-c", code, str(run)], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 3 and "RunDirBusy" in proc.stdout and "in use by another rlvr process" in proc.stdout
    assert len([json.loads(ln) for ln in (run / "metrics.jsonl").read_text().splitlines()]) == 2
    resume(run, ["train.steps=3"])  # the lock is gone with its holder
    assert [json.loads(ln)["step"] for ln in (run / "metrics.jsonl").read_text().splitlines()] == [1, 2, 3]


def test_resume_says_where_it_starts_and_when_there_is_nothing_to_do(tiny_cfg_overrides, tmp_path, capsys):
    train(load_config(overrides=tiny_cfg_overrides))
    capsys.readouterr()
    summary = resume(tmp_path / "run")
    err = capsys.readouterr().err
    assert "already complete (step 3 of 3)" in err and "train.steps=N" in err
    assert summary["steps"] == 3 and summary == json.loads((tmp_path / "run" / "summary.json").read_text())


def test_resume_message_names_the_step(tiny_cfg_overrides, tmp_path, capsys):
    train(load_config(overrides=tiny_cfg_overrides))
    capsys.readouterr()
    resume(tmp_path / "run", ["train.steps=4"])
    assert "from step_000003 (step 3 of 4)" in capsys.readouterr().err


def test_nan_message_names_a_checkpoint_only_when_one_exists(tiny_cfg_overrides, tmp_path, monkeypatch):
    import rlvr.train.update as update_mod
    from rlvr.train.update import NonFiniteError

    real_loss = update_mod._micro_loss
    monkeypatch.setattr(update_mod, "_micro_loss", lambda *a, **k: real_loss(*a, **k) * float("nan"))
    with pytest.raises(NonFiniteError, match="no checkpoint had been written yet"):
        train(load_config(overrides=tiny_cfg_overrides))


def test_evaluations_inside_training_show_progress(tiny_cfg_overrides, capsys):
    train(load_config(overrides=tiny_cfg_overrides + ["train.eval_every=2"]))
    err = capsys.readouterr().err
    for step in (0, 2, 3):
        assert f"eval @{step} 16/16 prompts" in err
