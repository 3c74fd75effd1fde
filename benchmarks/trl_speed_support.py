"""``trl_speed.py``'s checks, profiler and report: that the frameworks sample alike, (``--profile``) where
rlvr's GRPO step time goes, from cProfile's cumulative CPU times, and the per-workload tables and summary."""

from __future__ import annotations

import cProfile
import io
import pstats
import statistics
import time
from collections import defaultdict

import torch

__all__ = ["SamplingCheck", "profile_rlvr", "report", "summary"]


class Phases:
    """Per-step seconds of named phases: ``step`` (wall clock), ``cpu`` (this process's CPU time), and parts."""

    def __init__(self):
        self.t = defaultdict(list)
        self._w = self._c = 0.0

    def start(self) -> None:
        self._w, self._c = time.perf_counter(), time.process_time()

    def stop(self) -> None:
        self.add("step", time.perf_counter() - self._w)
        self.add("cpu", time.process_time() - self._c)

    def add(self, name: str, seconds: float) -> None:
        self.t[name].append(seconds)

    def median(self, name: str, skip: int) -> float:
        v = self.t.get(name, [])[skip:]
        return statistics.median(v) if v else float("nan")


class SamplingCheck:
    """Records which logits processors each framework's ``generate`` applies (during the warm-up only): the
    three must sample from the same distribution with the same per-token work (e.g. transformers adds top-k
    50 unless told ``top_k=0``). rlvr's engine records behaviour log-probs in a processor that applies the
    temperature and top-p warpers itself; the warpers it applies are what is compared."""

    label = ""
    seen: dict[str, set] = defaultdict(set)
    _orig = None

    @classmethod
    def start(cls) -> None:
        from transformers.generation.logits_process import LogitsProcessorList

        cls._orig = orig = LogitsProcessorList.__call__

        def names(p) -> list[str]:  # rlvr's log-prob recorder applies temperature / top-p itself: count those
            inner = getattr(p, "warpers", None)
            return [type(w).__name__ for w in inner] if inner is not None else [type(p).__name__]

        def call(self, *args, **kw):
            cls.seen[cls.label].add(tuple(n for p in self for n in names(p)))
            return orig(self, *args, **kw)

        LogitsProcessorList.__call__ = call

    @classmethod
    def stop(cls) -> None:
        if cls._orig is not None:
            from transformers.generation.logits_process import LogitsProcessorList

            LogitsProcessorList.__call__, cls._orig = cls._orig, None

    @classmethod
    def verify(cls) -> str:
        kinds = {frozenset(v) for v in cls.seen.values()}
        if len(kinds) != 1 or len(next(iter(kinds))) != 1:
            raise RuntimeError(f"the frameworks sample differently: {dict(cls.seen)}")
        return ", ".join(next(iter(next(iter(kinds)))))


# (label, file suffix, function name): rlvr's step split into nested parts, read off cProfile's cumulative times
PROFILE_PARTS = (
    ("rl_step", "rlvr/train/loop.py", "rl_step"),
    ("hf generate", "transformers/generation/utils.py", "generate"),
    ("hf engine", "rlvr/engines/hf.py", "_generate_chunk"),
    ("rollouts", "rlvr/train/rollouts.py", "collect_rollouts"),
    ("scoring", "rlvr/tasks/scoring.py", "score_many"),
    ("build_batch", "rlvr/core/batch.py", "build_batch"),
    ("no-grad log-probs", "rlvr/train/update.py", "batch_logprobs"),
    ("update_policy", "rlvr/train/update.py", "update_policy"),
    ("log-probs fwd", "rlvr/models/logprobs.py", "completion_logprobs"),
    ("micro loss", "rlvr/train/update.py", "_micro_loss"),
    ("backward", "torch/_tensor.py", "backward"),
    ("clip grad", "torch/nn/utils/clip_grad.py", "clip_grad_norm_"),
    ("optimizer", "torch/optim/adam.py", "step"),
)


def _cumulative(stats: pstats.Stats) -> dict[str, float]:
    out = dict.fromkeys((label for label, _, _ in PROFILE_PARTS), 0.0)
    for (file, _, func), (_, _, _, ct, _) in stats.stats.items():
        for label, suffix, name in PROFILE_PARTS:
            if func == name and file.replace("\\", "/").endswith(suffix):
                out[label] = max(out[label], ct)  # recursive wrappers repeat a function: keep the outermost
    return out


def profile_rlvr(a, r) -> None:
    """cProfile of ``a.steps`` steps of the rlvr runner ``r`` after ``a.warmup``: where rlvr's step time goes."""
    for _ in range(a.warmup):
        r.step()
    prof = cProfile.Profile(time.process_time)  # CPU time: other processes on the machine do not count
    prof.enable()
    for _ in range(a.steps):
        r.step()
    prof.disable()
    stats = pstats.Stats(prof)
    c = _cumulative(stats)
    total = c["rl_step"]
    rows = [
        ("generate: transformers generate", c["hf generate"]),
        ("generate: rlvr engine (log-probs, Completions)", c["hf engine"] - c["hf generate"]),
        ("rollouts: sampler, allocator, metrics", c["rollouts"] - c["hf engine"] - c["scoring"]),
        ("scoring (reward function)", c["scoring"]),
        ("build_batch", c["build_batch"]),
        ("no-grad log-probs (old / reference)", c["no-grad log-probs"]),
        ("update: log-prob forward (trunk, head, entropy)", c["log-probs fwd"]),
        ("update: loss, aggregation, metrics", c["micro loss"] - c["log-probs fwd"]),
        ("update: backward", c["backward"]),
        ("update: clip grad norm", c["clip grad"]),
        ("update: AdamW step", c["optimizer"]),
        ("update: the rest (minibatching, coefficients)", c["update_policy"] - c["micro loss"] - c["backward"]
         - c["clip grad"] - c["optimizer"]),
    ]
    rows.append(("rl_step: the rest (advantages, metrics, ...)", total - sum(v for _, v in rows)))
    print(f"\n=== where rlvr's step goes (cProfile, CPU s/step over {a.steps} steps; cProfile's own overhead "
          f"inflates the Python-heavy parts, generate most) ===")
    for label, v in rows:
        print(f"  {label:52}{v / a.steps:7.3f} {100 * v / total:6.1f}%")
    print(f"  {'total':52}{total / a.steps:7.3f}")
    buf = io.StringIO()
    pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(15)
    print("\n=== top functions by own time ===")
    text = buf.getvalue()
    print(text[text.find("   ncalls"):].rstrip())


# ---------------------------------------------------------------------------------------------- report

def report(a, runners: dict) -> dict[str, dict[str, float]]:
    """Medians after the warm-up of each runner's ``Phases``, printed; returned as {runner: {phase: seconds}}.
    ``rest`` is, per step, what the named phases leave of the wall time (for TRL: its generation-batch
    preparation besides generate and reward calls; its ``update`` is the remainder of the step: loss, backward,
    clip, optimizer, logging)."""
    w = a.warmup
    print(f"\nworkload: {a.prompts} prompts x {a.group} completions x {a.new_tokens} tokens, tiny qwen2 "
          f"h={a.hidden} L={a.layers}, {torch.get_num_threads()} torch threads; median of {a.steps} steps "
          f"after {w} warm-up\n")
    print(f"{'':12}{'s/step':>8}{'cpu s':>8}{'generate':>10}{'score':>8}{'update':>8}{'rest':>8}   wall min-max")
    med: dict[str, dict[str, float]] = {}
    for name, ph in runners.items():
        t = ph.t

        def part(k: str, i: int) -> float:
            return t[k][i] if i < len(t.get(k, [])) else float("nan")

        n = len(t["step"])
        if name == "trl":  # generate+score+batch is timed as a whole; the rest of the step is the update
            t["update"] = [part("step", i) - part("gsb", i) for i in range(n)]
            t["rest"] = [part("gsb", i) - part("generate", i) - part("score", i) for i in range(n)]
        else:
            t["rest"] = [part("step", i) - part("generate", i) - part("score", i) - part("update", i)
                         for i in range(n)]
        keys = ("step", "cpu", "generate", "score", "update", "rest")
        med[name] = {k: ph.median(k, w) for k in keys}
        cols = "".join(f"{med[name][k]:{width}.3f}" for k, width in zip(keys, (8, 8, 10, 8, 8, 8)))
        print(f"{name:12}{cols}   {min(t['step'][w:]):.3f}-{max(t['step'][w:]):.3f}")
    fl = med["floor"]
    print(f"\n{'':16}{'step wall':>10}{'step cpu':>10}{'generate':>10}{'update':>10}")
    for name, m in med.items():
        if not name.startswith("rlvr"):
            continue
        print(f"{name + ' / floor':16}{m['step'] / fl['step']:10.3f}{m['cpu'] / fl['cpu']:10.3f}"
              f"{m['generate'] / fl['generate']:10.3f}{m['update'] / fl['update']:10.3f}")
        if "trl" in med:
            tr = med["trl"]
            print(f"{'  TRL / ' + name[5:]:16}{tr['step'] / m['step']:10.2f}x{tr['cpu'] / m['cpu']:9.2f}x"
                  f"{tr['generate'] / m['generate']:9.2f}x{tr['update'] / m['update']:9.2f}x   (TRL's time over rlvr's)")
    return med


def summary(results: dict[str, dict[str, dict[str, float]]]) -> None:
    """The goals side by side: step time against TRL, generation against HF generate (the floor's), update
    against the floor's."""
    print("\nsummary (wall-clock medians):")
    print(f"{'workload':12}{'engine':9}{'TRL/rlvr step':>15}{'gen speed-up':>14}{'update/floor':>14}")
    for wl, med in results.items():
        for name, m in med.items():
            if not name.startswith("rlvr"):
                continue
            vs_trl = f"{med['trl']['step'] / m['step']:.2f}x" if "trl" in med else "-"
            print(f"{wl:12}{name[5:]:9}{vs_trl:>15}{med['floor']['generate'] / m['generate']:13.2f}x"
                  f"{m['update'] / med['floor']['update']:14.3f}")
