"""vLLM's CPU attention serves a few head sizes only: a model it would refuse is named when the run is set up
(before the model is loaded and the SFT warm-up runs), from the config alone, without importing vLLM."""

import importlib.util
import json
import sys
import time

import pytest
import torch
from typer.testing import CliRunner

from rlvr.cli.commands import app
from rlvr.config.run import load_config
from rlvr.engines.vllm_config import VLLM_CPU_HEAD_SIZES, vllm_problems
from rlvr.models.shape import config_head_size, head_size
from rlvr.run.preflight import SetupError, check_vllm

runner = CliRunner()


def _cfg(*sets):
    """The config of ``sets`` as the set-up check sees it (load_config runs the same check at load time and
    would refuse the bad ones first: the engine settings are applied after it here)."""
    from rlvr.config.overrides import apply_overrides
    from rlvr.config.rollout import RolloutConfig

    engine = [s for s in sets if s.startswith("rollout.")]
    cfg = load_config(overrides=[s for s in sets if s not in engine])
    rollout = apply_overrides({"rollout": cfg.rollout.model_dump(mode="json")}, engine)["rollout"]
    return cfg.model_copy(update={"rollout": RolloutConfig.model_validate(rollout)})


def test_the_config_itself_is_refused_at_load_time(monkeypatch):
    from rlvr.config.run import ConfigError

    with pytest.raises(ConfigError, match=r"vLLM's CPU attention serves head sizes .* the model's is 16"):
        load_config(overrides=["rollout.engine=vllm", "device=cpu", *_tiny(32, 2)])
    load_config(overrides=["rollout.engine=vllm", "device=cpu", *_tiny(64, 2)])
    load_config(overrides=["rollout.engine=vllm", *_tiny(32, 2)])  # device auto: the set-up check decides


def _tiny(hidden, heads, kv=1):
    return [f"model.tiny.hidden_size={hidden}", f"model.tiny.num_heads={heads}", f"model.tiny.num_kv_heads={kv}"]


@pytest.fixture
def vllm_installed(monkeypatch):
    """find_spec('vllm') answers as if vLLM were installed (the check must come before vLLM is imported)."""
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: object() if name == "vllm" else real(name, *a))


@pytest.mark.parametrize("hidden,heads,refused", [(32, 2, True), (32, 1, False), (64, 4, True), (64, 2, False),
                                                  (48, 2, True), (96, 1, False), (160, 2, False), (128, 4, False),
                                                  (1024, 1, True), (512, 1, False), (40, 5, True)])
def test_tiny_head_sizes_on_cpu(hidden, heads, refused):
    cfg = _cfg("rollout.engine=vllm", "device=cpu", *_tiny(hidden, heads))
    problems = vllm_problems(cfg)
    assert bool(problems) == refused, problems
    if refused:
        msg = problems[0]
        assert f"the model's is {hidden // heads}" in msg
        assert "32, 64, 80, 96, 112, 128, 160, 192, 224, 256, 512" in msg
        assert f"model.tiny.hidden_size={hidden} / model.tiny.num_heads={heads}" in msg
        assert f"model.tiny.hidden_size={32 * heads}" in msg and "rollout.engine=hf" in msg


def test_the_suggested_fixes_are_accepted():
    cfg = _cfg("rollout.engine=vllm", "device=cpu", *_tiny(64, 4, 2))
    msg = vllm_problems(cfg)[0]
    assert "model.tiny.hidden_size=128" in msg and "model.tiny.num_heads=2" in msg
    for fix in (_tiny(128, 4, 2), _tiny(64, 2, 2)):
        assert vllm_problems(_cfg("rollout.engine=vllm", "device=cpu", *fix)) == []
    # no head count fits the key/value heads: only the width is suggested
    msg = vllm_problems(_cfg("rollout.engine=vllm", "device=cpu", *_tiny(32, 4, 2)))[0]
    assert "set model.tiny.hidden_size=128 (head size 32), run" in msg


def test_only_where_vllm_runs_on_a_cpu(monkeypatch):
    small = _tiny(32, 2)
    assert vllm_problems(_cfg("rollout.engine=hf", "device=cpu", *small)) == []
    assert vllm_problems(_cfg("rollout.engine=native", "device=cpu", *small)) == []
    assert vllm_problems(_cfg("rollout.engine=vllm", "device=cuda", *small)) == []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert vllm_problems(_cfg("rollout.engine=vllm", *small)) == []  # auto with CUDA: a GPU
    assert vllm_problems(_cfg("rollout.engine=vllm", *small), device=torch.device("cpu"))  # the run's real device
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert vllm_problems(_cfg("rollout.engine=vllm", *small))  # auto without CUDA: the CPU
    assert vllm_problems(_cfg("rollout.engine=vllm", *small), device=torch.device("cuda", 0)) == []


def test_ray_workers_running_vllm_without_gpus():
    small = _tiny(32, 2)
    msg = vllm_problems(_cfg("rollout.engine=ray", "rollout.ray.engine=vllm", *small))
    assert msg and "rollout.ray.engine=vllm on CPU workers" in msg[0] and "rollout.ray.num_gpus" in msg[0]
    assert vllm_problems(_cfg("rollout.engine=ray", "rollout.ray.engine=vllm", "rollout.ray.num_gpus=1", *small)) == []
    assert vllm_problems(_cfg("rollout.engine=ray", "rollout.ray.engine=hf", *small)) == []


def _model_dir(tmp_path, **config):
    d = tmp_path / "m"
    d.mkdir(exist_ok=True)
    (d / "config.json").write_text(json.dumps({"model_type": "qwen2", **config}))
    return d


def test_head_size_of_a_local_model_dir(tmp_path):
    d = _model_dir(tmp_path, hidden_size=64, num_attention_heads=4)
    cfg = _cfg("rollout.engine=vllm", "device=cpu", f"model.path={d}")
    assert head_size(cfg.model) == 16
    msg = vllm_problems(cfg)[0]
    assert "the model's is 16" in msg and f"from {d}/config.json" in msg and "use a model whose head size" in msg
    _model_dir(tmp_path, hidden_size=64, num_attention_heads=4, head_dim=32)  # an explicit head_dim wins
    assert vllm_problems(cfg) == []
    _model_dir(tmp_path, hidden_size=128, num_attention_heads=4, head_dim=24)
    assert "the model's is 24" in vllm_problems(cfg)[0]


def test_head_size_of_other_config_layouts(tmp_path):
    assert config_head_size({"n_embd": 64, "n_head": 4}) == 16  # GPT-2's names
    assert config_head_size({"text_config": {"hidden_size": 256, "num_attention_heads": 8}}) == 32  # a VLM's
    assert config_head_size({"model_type": "x"}) is None
    assert config_head_size({"hidden_size": 64, "num_attention_heads": 0}) is None


@pytest.mark.parametrize("content", [None, "{not json", "[1, 2]", '{"model_type": "qwen2"}'])
def test_an_unreadable_config_is_left_to_the_model_loader(tmp_path, content):
    d = tmp_path / "m"
    d.mkdir()
    if content is not None:
        (d / "config.json").write_text(content)
    assert vllm_problems(_cfg("rollout.engine=vllm", "device=cpu", f"model.path={d}")) == []


def test_setup_check_reads_the_model_it_is_given():
    from rlvr.models.tiny import TinyModelConfig, build_tiny_model, char_tokenizer

    cfg = _cfg("rollout.engine=vllm", "device=cpu")  # the default tiny model: head size 32
    check_vllm(cfg, torch.device("cpu"))
    model = build_tiny_model(TinyModelConfig(hidden_size=32, num_heads=2, num_kv_heads=1), char_tokenizer())
    with pytest.raises(SetupError, match=r"the model's is 16 \(the given model's config\)"):
        check_vllm(cfg, torch.device("cpu"), model)


def test_cli_refuses_before_any_work(tmp_path, vllm_installed):
    t0 = time.perf_counter()
    result = runner.invoke(app, ["train", "--set", "rollout.engine=vllm", "--set", "device=cpu",
                                 "--set", "model.tiny.hidden_size=32", "--set", "model.tiny.num_heads=2",
                                 "--set", "model.tiny.num_kv_heads=1", "--out", str(tmp_path / "run")])
    assert result.exit_code == 2, result.output
    assert "the model's is 16" in result.output and "Traceback" not in result.output
    assert "model.tiny.hidden_size=64" in result.output
    assert not (tmp_path / "run" / "sft_model").exists() and not (tmp_path / "run" / "eval").exists()
    assert time.perf_counter() - t0 < 30
    assert "vllm" not in sys.modules


def test_cli_eval_of_a_model_dir_with_an_unserved_head_size(tmp_path, vllm_installed):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from rlvr.models.tiny import char_tokenizer

    tok = char_tokenizer()
    Qwen2ForCausalLM(Qwen2Config(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                 num_attention_heads=2, num_key_value_heads=1)).save_pretrained(tmp_path / "m")
    tok.save_pretrained(tmp_path / "m")
    result = runner.invoke(app, ["eval", "--model", str(tmp_path / "m"), "--set", "rollout.engine=vllm",
                                 "--set", "device=cpu", "--output", str(tmp_path / "e.json")])
    assert result.exit_code == 2 and "the model's is 16" in result.output, result.output
    assert str(tmp_path / "m") in result.output and "Traceback" not in result.output


@pytest.mark.vllm
def test_the_list_is_vllms_own():
    pytest.importorskip("vllm")
    from vllm.v1.attention.backends.cpu_attn import CPUAttentionBackend

    assert tuple(CPUAttentionBackend.get_supported_head_sizes()) == VLLM_CPU_HEAD_SIZES
