"""The GPU configurations a user starts from (configs/gpu/) validate as they stand, and say what they promise:
one GPU with vLLM asleep during the update; a node of 8 GPUs with FSDP2, bfloat16 compute and a vLLM engine per
rank; several nodes under Ray. (Their model and data paths are placeholders: validation does not read them.)"""

from pathlib import Path

from rlvr.config.run import load_config
from rlvr.distributed.world import World, check_world

CONFIGS = Path(__file__).resolve().parents[1] / "configs" / "gpu"


def test_every_gpu_config_validates_with_rlvr_config():
    from typer.testing import CliRunner

    from rlvr.cli import app

    files = sorted(CONFIGS.glob("*.yaml"))
    assert len(files) == 3
    for f in files:
        r = CliRunner().invoke(app, ["config", "-c", str(f)])
        assert r.exit_code == 0, (f, r.output)
        assert "model:" in r.output and "/models/" in r.output  # the resolved config, printed


def test_one_gpu_colocates_a_sleeping_vllm_engine():
    cfg = load_config(CONFIGS / "one-gpu-1.5b.yaml")
    assert cfg.device == "cuda" and cfg.model.dtype == "auto" and cfg.sft.steps == 0
    assert cfg.rollout.engine == "vllm" and cfg.rollout.vllm.sleep_mode
    assert cfg.train.activation_checkpointing and cfg.train.micro_batch_tokens


def test_the_8_gpu_node_shards_with_fsdp_in_bfloat16_and_fits_its_world():
    cfg = load_config(CONFIGS / "node-8gpu-7b.yaml")
    d = cfg.train.distributed
    assert d.strategy == "fsdp" and d.mixed_precision == "bfloat16" and d.backend == "nccl"
    assert cfg.model.dtype == "float32" and cfg.rollout.vllm.dtype == "bfloat16" and cfg.rollout.vllm.sleep_mode
    assert cfg.rollout.vllm.tensor_parallel_size == 1 and cfg.train.activation_checkpointing
    check_world(cfg, World(0, 8, strategy="fsdp"))  # 8 ranks can honour it (raises otherwise)


def test_the_ray_config_places_trainers_and_workers_on_gpus():
    cfg = load_config(CONFIGS / "ray-multinode.yaml")
    r = cfg.rollout.ray
    assert cfg.rollout.engine == "ray" and r.engine == "vllm" and r.workers > 1 and r.num_gpus >= 1
    assert r.trainers == 2 and r.trainer_gpus >= 1 and cfg.scoring.backend == "ray"
