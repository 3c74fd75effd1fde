"""Training a vision-language model end to end: a user's local VLM directory and a JSONL with image paths,
resumed bit for bit; the shapes task through the config; image prompts refused where they cannot go."""

import json
import shutil

import pytest
from safetensors.torch import load_file

from rlvr.config.run import load_config
from rlvr.models import ModelConfig, TinyModelConfig, load_model
from rlvr.models.vision import save_tokenizer, vision_of
from rlvr.tasks.shapes import ShapesParams, shapes_task
from rlvr.run.preflight import SetupError
from rlvr.run.train import resume, train

TINY = ["model.tiny.hidden_size=32", "model.tiny.intermediate_size=64", "model.tiny.num_layers=1",
        "model.tiny.arch=qwen2_vl", "model.tiny.vision.depth=1", "model.tiny.vision.embed_dim=32"]


def _weights(run, step):
    return load_file(str(run / "checkpoints" / f"step_{step:06d}" / "model" / "model.safetensors"))


@pytest.fixture
def user_vlm_data(tmp_path):
    """A tiny VLM saved as a local Hugging Face directory, and a JSONL whose rows name PNG files beside it."""
    model, tok = load_model(ModelConfig(tiny=TinyModelConfig(arch="qwen2_vl", hidden_size=32, intermediate_size=64,
                                                             num_layers=1, max_positions=64)), seed=2)
    model.save_pretrained(tmp_path / "vlm")
    save_tokenizer(tok, tmp_path / "vlm")
    task = shapes_task(ShapesParams(num_train=12, num_eval=4, max_shapes=2))
    (tmp_path / "data" / "img").mkdir(parents=True)
    rows = []
    for i, ex in enumerate(task.examples("train") + task.examples("eval")):
        ex.images[0].save(tmp_path / "data" / "img" / f"{i}.png")
        rows.append({"prompt": ex.prompt, "answer": ex.answer, "images": f"img/{i}.png"})
    data = tmp_path / "data" / "train.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return [f"out={tmp_path / 'run'}", f"model.path={tmp_path / 'vlm'}", "task.name=jsonl",
            f"task.train_path={data}", "task.eval_fraction=0.25", "task.verifier=numeric",
            "rollout.prompts_per_step=3", "rollout.group_size=4", "rollout.max_new_tokens=3", "sft.steps=2",
            "sft.batch_size=4", "train.steps=4", "train.checkpoint_every=2", "train.keep_checkpoints=5",
            "optim.lr=1e-2", "eval.num_examples=4", "eval.samples=1", "algorithm.minibatches=2"]


def test_a_local_vlm_directory_trains_on_jsonl_image_paths_and_resumes_exactly(user_vlm_data, tmp_path):
    summary = train(load_config(overrides=user_vlm_data))
    full = tmp_path / "run"
    assert summary["eval_after"]["accuracy"] is not None
    assert _weights(full, 2).keys() == _weights(full, 4).keys()
    assert any("visual" in k for k in _weights(full, 4))
    assert any(not (_weights(full, 2)[k] == _weights(full, 4)[k]).all() for k in _weights(full, 4) if "visual" in k)
    ckpt = full / "checkpoints" / "step_000004" / "model"
    loaded, tok = load_model(ModelConfig(path=str(ckpt)))  # a checkpoint is a loadable VLM directory
    assert vision_of(tok) is not None and type(loaded).__name__ == "Qwen2VLForConditionalGeneration"
    part = tmp_path / "part"
    shutil.copytree(full, part)
    shutil.rmtree(part / "checkpoints" / "step_000004")
    resume(part / "checkpoints" / "step_000002")
    a, b = _weights(full, 4), _weights(part, 4)
    assert all((a[k] == b[k]).all() for k in a)


def test_the_shapes_task_trains_the_tiny_vlm_from_config(tmp_path):
    over = TINY + [f"out={tmp_path / 'run'}", "task.name=shapes", "task.num_train=16", "task.num_eval=4",
                   "rollout.prompts_per_step=2", "rollout.group_size=2", "rollout.max_new_tokens=2", "sft.steps=1",
                   "sft.batch_size=4", "train.steps=1", "train.checkpoint_every=0", "eval.num_examples=4",
                   "eval.samples=1", "model.tiny.max_positions=64"]
    summary = train(load_config(overrides=over))
    assert 0.0 <= summary["eval_after"]["accuracy"] <= 1.0
    metrics = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert metrics and all(m["logp_mismatch"] < 1e-4 for m in metrics)  # engine and trainer agree on image prompts


@pytest.mark.parametrize("extra, lacking", [(["rollout.strategy.name=spec_rl"], "engine wrapper 'strategy'"),
                                            (["model.tiny.arch=qwen2"], "text-only")])
def test_image_prompts_are_refused_where_they_cannot_go(tmp_path, extra, lacking):
    over = TINY + [f"out={tmp_path / 'run'}", "task.name=shapes", "task.num_train=16", "task.num_eval=4",
                   "rollout.prompts_per_step=2", "rollout.group_size=2", "rollout.max_new_tokens=2", "sft.steps=0",
                   "train.steps=1", "model.tiny.max_positions=64"] + extra
    with pytest.raises((SetupError, ValueError), match=lacking):
        train(load_config(overrides=over))


def test_lora_on_the_vlm_keeps_adapters_and_exports_a_merged_vlm(tmp_path):
    from rlvr.run.export import export_model

    over = TINY + [f"out={tmp_path / 'run'}", "task.name=shapes", "task.num_train=16", "task.num_eval=4",
                   "rollout.prompts_per_step=2", "rollout.group_size=2", "rollout.max_new_tokens=2", "sft.steps=1",
                   "sft.batch_size=4", "train.steps=2", "train.checkpoint_every=2", "eval.num_examples=4",
                   "eval.samples=1", "model.tiny.max_positions=64", "model.lora.rank=4"]
    train(load_config(overrides=over))
    ckpt = tmp_path / "run" / "checkpoints" / "step_000002" / "model"
    assert (ckpt / "adapter_model.safetensors").is_file() and (ckpt / "preprocessor_config.json").is_file()
    out = export_model(ckpt, tmp_path / "merged")
    merged, tok = load_model(ModelConfig(path=str(out)))
    assert type(merged).__name__ == "Qwen2VLForConditionalGeneration" and vision_of(tok) is not None
