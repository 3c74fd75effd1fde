"""A training run for the distributed tests, started under torchrun or alone.

    python tests/dist_worker.py OUT [--resume] [--recipe NAME] [--fail-rank R] [--set key=value ...]

It registers the engine ``per_request``: HF sampling with each request seeded by its own (call number,
example id), so a completion does not depend on which rank generates it or what else is in its batch. A
2-rank run and a 1-rank run of the same config then train on the same global batches, and their parameters
must agree. ``--signal-rank R`` makes rank R send itself SIGTERM in its generation of the second step (as a
cluster's scheduler stopping one node would). ``--fail-rank R`` (or the environment variable ``RLVR_TEST_FAIL_RANK``, for ranks started by
Ray, which load this file as a plugin) makes rank R raise in its generation of the second step.
"""

from __future__ import annotations

import hashlib
import os
import signal
import sys
from dataclasses import replace

from rlvr.config.run import load_config
from rlvr.engines.base import ENGINES
from rlvr.engines.hf import HFEngine
from rlvr.distributed.world import SEED_STRIDE
from tests.dist_config import BASE, data_file


class PerRequestEngine(HFEngine):
    fail_rank: int | None = int(os.environ["RLVR_TEST_FAIL_RANK"]) if "RLVR_TEST_FAIL_RANK" in os.environ else None
    signal_rank: int | None = None

    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self.calls = 0

    def generate(self, requests, sampling):
        self.calls += 1
        rank = int(os.environ.get("RANK", "0"))
        if self.fail_rank == rank and self.calls == 3:  # eval before RL is call 1 on rank 0
            raise RuntimeError(f"injected failure on rank {rank}")
        if self.signal_rank == rank and self.calls == 3:
            os.kill(os.getpid(), signal.SIGTERM)
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
    from rlvr.run.train import resume, train

    out, rest = argv[0], argv[1:]
    sets = [rest[i + 1] for i, a in enumerate(rest) if a == "--set"]
    if "--fail-rank" in rest:
        PerRequestEngine.fail_rank = int(rest[rest.index("--fail-rank") + 1])
    if "--signal-rank" in rest:
        PerRequestEngine.signal_rank = int(rest[rest.index("--signal-rank") + 1])
    if "--resume" in rest:
        resume(out, sets or None)
    else:
        recipe = rest[rest.index("--recipe") + 1] if "--recipe" in rest else None
        train(load_config(recipe=recipe, overrides=BASE + [f"out={out}", f"task.train_path={data_file(out)}"] + sets))


if __name__ == "__main__":
    main(sys.argv[1:])
