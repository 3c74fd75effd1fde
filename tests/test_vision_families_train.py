"""Training each VLM family rlvr reads from a user's local directory: a JSONL with image paths (images of
different sizes, a two-image prompt, an image-free row) trains through the normal entry point with the
engine and trainer agreeing, the checkpoint loads back as the same VLM, a resume is bit for bit, and LoRA
exports a merged VLM. Qwen2.5-VL, Qwen3-VL (dense and MoE), InternVL, LLaVA-OneVision and PaliGemma 2 are among
them."""

import json
import shutil

import pytest
from safetensors.torch import load_file

from rlvr.config.run import load_config
from rlvr.models import ModelConfig, load_model
from rlvr.models.vision import vision_of
from rlvr.run.train import resume, train

from tests.vlm_tiny import img, save_family

FAMILIES = ["llava", "llava_next", "gemma3", "idefics3", "smolvlm", "qwen2_5_vl", "qwen3_vl", "qwen3_vl_moe",
            "internvl", "llava_onevision", "paligemma"]
CLASSES = {"llava": "LlavaForConditionalGeneration", "llava_next": "LlavaNextForConditionalGeneration",
           "gemma3": "Gemma3ForConditionalGeneration",
           "idefics3": "Idefics3ForConditionalGeneration", "smolvlm": "SmolVLMForConditionalGeneration",
           "qwen2_5_vl": "Qwen2_5_VLForConditionalGeneration", "qwen3_vl": "Qwen3VLForConditionalGeneration",
           "qwen3_vl_moe": "Qwen3VLMoeForConditionalGeneration", "internvl": "InternVLForConditionalGeneration",
           "llava_onevision": "LlavaOnevisionForConditionalGeneration",
           "paligemma": "PaliGemmaForConditionalGeneration"}


def _weights(run, step):
    return load_file(str(run / "checkpoints" / f"step_{step:06d}" / "model" / "model.safetensors"))


def _vision_keys(weights):
    return [k for k in weights if "vision" in k or "visual" in k]


def _user_run(family, tmp_path, extra=()):
    """A tiny ``family`` VLM saved as a local directory, a JSONL naming PNG files beside it, and the overrides
    of a short run on them."""
    save_family(family, tmp_path / "vlm", seed=1)
    (tmp_path / "data" / "img").mkdir(parents=True)
    rows = []
    for i in range(12):
        img(32 + 8 * (i % 3), 32 + 24 * (i % 2), i).save(tmp_path / "data" / "img" / f"{i}.png")
        rows.append({"prompt": f"<image>n{i}?", "answer": str(i % 3), "images": f"img/{i}.png"})
    rows.append({"prompt": "<image>and<image>?", "answer": "2", "images": ["img/0.png", "img/1.png"]})
    rows.append({"prompt": "no image: 3?", "answer": "3"})
    data = tmp_path / "data" / "train.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return [f"out={tmp_path / 'run'}", f"model.path={tmp_path / 'vlm'}", "task.name=jsonl", f"task.train_path={data}",
            "task.eval_fraction=0.25", "task.verifier=numeric", "rollout.prompts_per_step=3", "rollout.group_size=4",
            "rollout.max_new_tokens=3", "optim.lr=1e-2", "eval.num_examples=4", "eval.samples=1", *extra]


@pytest.mark.parametrize("family", FAMILIES)
def test_a_local_vlm_directory_trains_on_jsonl_image_paths_and_resumes_exactly(family, tmp_path):
    over = _user_run(family, tmp_path, ["sft.steps=2", "sft.batch_size=4", "train.steps=4", "train.checkpoint_every=2",
                                        "train.keep_checkpoints=5", "algorithm.minibatches=1"])
    summary = train(load_config(overrides=over))
    full = tmp_path / "run"
    assert summary["eval_after"]["accuracy"] is not None
    metrics = [json.loads(x) for x in (full / "metrics.jsonl").read_text().splitlines()]
    assert len(metrics) == 4 and all(m["logp_mismatch"] < 1e-4 for m in metrics)  # engine and trainer agree
    w2, w4 = _weights(full, 2), _weights(full, 4)
    assert _vision_keys(w4) and any(not (w2[k] == w4[k]).all() for k in _vision_keys(w4))
    loaded, tok = load_model(ModelConfig(path=str(full / "checkpoints" / "step_000004" / "model")))
    assert type(loaded).__name__ == CLASSES[family] and vision_of(tok) is not None
    part = tmp_path / "part"
    shutil.copytree(full, part)
    shutil.rmtree(part / "checkpoints" / "step_000004")
    resume(part / "checkpoints" / "step_000002")
    b = _weights(part, 4)
    assert all((w4[k] == b[k]).all() for k in w4)


@pytest.mark.parametrize("family", ["llava", "gemma3", "idefics3", "qwen3_vl", "internvl", "paligemma"])
def test_lora_on_each_family_keeps_adapters_and_exports_a_merged_vlm(family, tmp_path):
    from rlvr.run.export import export_model

    over = _user_run(family, tmp_path, ["sft.steps=0", "train.steps=2", "train.checkpoint_every=2",
                                        "model.lora.rank=4"])
    train(load_config(overrides=over))
    ckpt = tmp_path / "run" / "checkpoints" / "step_000002" / "model"
    assert (ckpt / "adapter_model.safetensors").is_file() and (ckpt / "preprocessor_config.json").is_file()
    merged, tok = load_model(ModelConfig(path=str(export_model(ckpt, tmp_path / "merged"))))
    assert type(merged).__name__ == CLASSES[family] and vision_of(tok) is not None
