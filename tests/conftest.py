import os

import pytest
import torch

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

try:  # property tests draw the same examples on every run of the suite, so a red run is reproducible; explore new
    # ones with HYPOTHESIS_PROFILE=explore (random draws, more examples)
    from hypothesis import settings

    settings.register_profile("ci", derandomize=True, print_blob=True)
    settings.register_profile("explore", derandomize=False, max_examples=1000, print_blob=True)
    settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
except ImportError:
    pass


@pytest.fixture(autouse=True)
def _quiet_transformers():
    import transformers

    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    yield


@pytest.fixture
def tiny_cfg_overrides(tmp_path):
    """A config small enough for a few real steps in a second or two."""
    return [
        f"out={tmp_path / 'run'}",
        "model.tiny.hidden_size=32", "model.tiny.intermediate_size=64", "model.tiny.num_layers=1",
        "task.max_value=20", "task.num_eval=16",
        "rollout.prompts_per_step=4", "rollout.group_size=4", "rollout.max_new_tokens=4",
        "train.steps=3", "train.micro_batch_size=8", "train.checkpoint_every=2",
        "sft.steps=5", "sft.batch_size=16", "sft.warmup_steps=0",
    ]


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def jsonl_cfg_overrides(tmp_path):
    """A user's JSONL data with a partial-credit reward function: every step carries learning signal."""
    import json

    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({"prompt": f"say {w}:", "answer": w}) + "\n"
                            for w in ["ab", "cd", "ef", "gh"]))
    return [
        f"out={tmp_path / 'run'}", "task.name=jsonl", f"task.train_path={data}", "task.eval_fraction=0.25",
        "task.verifier=tests.reward_fns:shared_chars", "model.tiny.hidden_size=32",
        "model.tiny.intermediate_size=64", "model.tiny.num_layers=1", "rollout.prompts_per_step=2",
        "rollout.group_size=4", "rollout.max_new_tokens=4", "sft.steps=0", "train.steps=3",
        "train.checkpoint_every=2", "train.keep_checkpoints=3", "optim.lr=1e-2",
    ]
