"""A training run for the distributed tests, started under torchrun or alone.

    python tests/dist_worker.py OUT [--resume] [--fail-rank R] [--set key=value ...]

It registers the engine ``per_request``: HF sampling with each request seeded by its own (call number,
example id), so a completion does not depend on which rank generates it or what else is in its batch. A
2-rank run and a 1-rank run of the same config then train on the same global batches, and their parameters
must agree. ``--fail-rank R`` makes rank R raise in its generation of the second step.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from dataclasses import replace

from rlvr.config import load_config
from rlvr.rollout.base import ENGINES
from rlvr.rollout.hf import HFEngine
from rlvr.train.distributed import SEED_STRIDE

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


class PerRequestEngine(HFEngine):
    fail_rank: int | None = None

    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self.calls = 0

    def generate(self, requests, sampling):
        self.calls += 1
        rank = int(os.environ.get("RANK", "0"))
        if self.fail_rank == rank and self.calls == 3:  # eval before RL is call 1 on rank 0
            raise RuntimeError(f"injected failure on rank {rank}")
        base = (sampling.seed - rank * SEED_STRIDE) % (2**31 - 1)  # the round's seed, before the rank's salt
        out = []
        for gi, req in enumerate(requests):
            h = hashlib.sha256(f"{base}/{req.example.id}".encode()).digest()
            seed = int.from_bytes(h[:4], "little") % (2**31 - 1)
            out += [replace(c, group=gi) for c in super().generate([req], replace(sampling, seed=seed))]
        return out


@ENGINES.register("per_request")
def _build(model, tokenizer, batch_size: int = 256, chat_template: bool = False, **_):
    return PerRequestEngine(model, tokenizer, batch_size=batch_size, chat_template=chat_template)


def main(argv: list[str]) -> None:
    from rlvr.train.run import resume, train

    out, rest = argv[0], argv[1:]
    sets = [rest[i + 1] for i, a in enumerate(rest) if a == "--set"]
    if "--fail-rank" in rest:
        PerRequestEngine.fail_rank = int(rest[rest.index("--fail-rank") + 1])
    if "--resume" in rest:
        resume(out, sets or None)
    else:
        train(load_config(overrides=BASE + [f"out={out}", f"task.train_path={data_file(out)}"] + sets))


if __name__ == "__main__":
    main(sys.argv[1:])
