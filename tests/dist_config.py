"""The distributed tests' run settings, apart from ``tests/dist_worker.py`` so that a test can read them
without registering that file's engine in its own process."""

from __future__ import annotations

import json
import os

WORDS = ["ab", "cd", "ef", "gh", "ij", "kl", "mn", "op", "qr", "st"]
BASE = [  # a user's JSONL task with a partial-credit reward: every step carries learning signal
    "task.name=jsonl", "task.verifier=tests.reward_fns:shared_chars", "task.eval_fraction=0.2",
    "model.tiny.hidden_size=32", "model.tiny.intermediate_size=64", "model.tiny.num_layers=1", "eval.samples=1",
    "rollout.prompts_per_step=4", "rollout.group_size=4", "rollout.max_new_tokens=4", "rollout.engine=per_request",
    "train.steps=4", "train.micro_batch_size=6", "train.checkpoint_every=2", "train.keep_checkpoints=4",
    "train.eval_every=0", "train.threads=1", "optim.lr=0.02", "sft.steps=2", "sft.batch_size=4",
    "sft.warmup_steps=0",
]


def data_file(out: str) -> str:
    """The prompts, beside the run directory (their ids come from the file's name: the same in every run)."""
    path = os.path.join(os.path.dirname(os.path.abspath(out)), "data.jsonl")
    with open(path, "w") as f:
        f.writelines(json.dumps({"prompt": f"say {w}:", "answer": w}) + "\n" for w in WORDS)
    return path
