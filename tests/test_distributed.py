"""Data-parallel training under torchrun on CPU (gloo, 2 processes): a 2-rank run trains exactly as a 1-rank
run on the same global batches, resumes identically, stops every rank when one raises, and refuses settings
it cannot honour. Runs go through ``tests/dist_worker.py`` (its engine seeds each request by its own id, so
which rank generates a group does not change it)."""

import json
import math
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from rlvr.cli.launch import without_nproc
from rlvr.config.run import load_config
from rlvr.distributed.world import DistributedSetupError, World, check_world

ROOT = Path(__file__).resolve().parents[1]
WORKER = str(ROOT / "tests" / "dist_worker.py")


def _env():
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    env.pop("WORLD_SIZE", None)
    return env


def run(out: Path, nproc: int, *args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    out.parent.mkdir(parents=True, exist_ok=True)
    launcher = ([sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}"]
                if nproc > 1 else [sys.executable])
    return subprocess.run([*launcher, WORKER, str(out), *args], cwd=ROOT, env=_env(), capture_output=True,
                          text=True, timeout=timeout)


def ok(proc: subprocess.CompletedProcess) -> None:
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]


def weights(run_dir: Path, step: int) -> dict[str, torch.Tensor]:
    folder = run_dir / "checkpoints" / f"step_{step:06d}" / "model"
    full = folder / "model.safetensors"  # a LoRA run's checkpoint holds the adapter alone
    return load_file(str(full if full.is_file() else folder / "adapter_model.safetensors"))


# The key bias's gradient is zero in exact arithmetic (it adds q . b to every logit of a query alike, which
# softmax ignores), so Adam turns its rounding noise into lr-sized steps of random sign: any change in the
# order of a float sum (FSDP's reduce-scatter) moves it by ~lr. Every other parameter must agree to tolerance().
NOISE_ONLY = ("k_proj.bias",)


def max_diff(a, b) -> float:
    assert a.keys() == b.keys()
    return max(float((a[k] - b[k]).abs().max()) for k in a if not k.endswith(NOISE_ONLY))


# How far "N ranks equal one process" may differ, from the arithmetic rather than from one machine's luck.
# Two things round differently with the rank layout. The extras (old log-probs, a critic's values, a
# discriminator's scores) are computed on each rank's groups, in batches of other shapes than one process
# uses, and CPU kernels round by shape (on this x86 CPU, MKL's product of a 1- or 2-row input differs in the
# last bit from the same rows inside a larger one). And when a minibatch has more micro-batches than ranks, the
# ranks sum their gradients in another order ((g0 + g2) + g1 against (g0 + g1) + g2). A gradient element summed
# from M parts so carries a float32 rounding difference of relative size up to M 2^-24 kappa, kappa =
# sum_k |g_k| / |sum_k g_k| (how much its parts cancel). Adam's step lr m / sqrt(v) does not scale with the
# gradient, so it does not shrink such a difference with the gradient either: each step can move the element
# by up to about 2 lr times it. The tests accept elements whose parts cancel up to kappa = 2^10 (relative
# error 3 x 2^-14 for three parts); a micro-batch left out of the sum, a loss normalised per rank or a stale
# snapshot moves elements by a fraction of lr per step, 1e2-1e4 times more (a rank's gradients left out of
# grpo_minibatches: 0.056 at step 2). Measured on a 2-core Xeon with AVX-512 and AMX, one thread per rank:
# 1.7e-6 at step 2 and 1.8e-6 at step 4 for the critic and discriminator runs (lr 0.02), against this bound's
# 1.5e-5 and 2.9e-5, where another machine measured under 1e-6; 0 where every rank's batches match one
# process's and no side model trains.
KAPPA = 2**10
PARTS = 3  # micro-batches summed per minibatch in these runs, at most


def tolerance(step: int, lr: float = 0.02) -> float:
    """The largest difference a rank layout's float rounding explains after ``step`` Adam steps at ``lr``."""
    return 2 * step * lr * PARTS * 2**-24 * KAPPA


# Elements whose parts cancel beyond KAPPA exist: Adam's step lr m / sqrt(v) has the same size whatever the
# gradient's, so an element whose gradient is nearly zero passes its relative rounding to the step whole.
# Measured on a 2-core AMD EPYC (one thread per rank): one element of the discriminator trunk's gate_proj
# (of ~11,000 elements) 9.4e-7 apart at step 2 and 4 (lr 0.001; tolerance 7.3e-7 and 1.5e-6), every other
# element under 1.2e-7. A bug of the rank layout moves most elements, each by a fraction of lr a step. So a few
# elements (OUTLIER_SHARE of them, at least one) may pass tolerance(), each still within OUTLIER_STEP lr a
# step: 1e1-1e3 times less than such a bug.
OUTLIER_SHARE = 2**-10
OUTLIER_STEP = 2**-7


def differs(a, b, step: int, lr: float = 0.02) -> str:
    """Why ``a`` and ``b`` (state dicts after ``step`` Adam steps at ``lr``) differ by more than the rank
    layout's rounding explains (see tolerance() and OUTLIER_SHARE); empty when they do not."""
    assert a.keys() == b.keys()
    keys = [k for k in a if not k.endswith(NOISE_ONLY)]
    d = torch.cat([(a[k] - b[k]).abs().flatten().double() for k in keys])
    tol, cap = tolerance(step, lr), step * lr * OUTLIER_STEP
    over = int((d > tol).sum())
    allowed = max(1, int(OUTLIER_SHARE * d.numel()))
    if float(d.max()) > cap or over > allowed:
        worst = max(keys, key=lambda k: float((a[k] - b[k]).abs().max()))
        return (f"step {step}: {over} of {d.numel()} elements beyond {tol:.3g} (at most {allowed} may be, each "
                f"within {cap:.3g}); largest {float(d.max()):.3g} in {worst}")
    return ""



def test_differs_tells_rounding_from_a_layout_bug():
    """The bound of the tests below: rounding-sized differences pass, a few high-cancellation elements pass,
    what a bug does (many elements moved, or one by a sizeable share of lr) fails."""
    g = torch.Generator().manual_seed(0)
    a = {"w": torch.randn(64, 64, generator=g), "k_proj.bias": torch.zeros(8)}
    tol = tolerance(2)
    assert differs(a, {k: v.clone() for k, v in a.items()}, 2) == ""
    b = {"w": a["w"] + tol * (torch.rand(64, 64, generator=g) - 0.5), "k_proj.bias": torch.full((8,), 0.02)}
    assert differs(a, b, 2) == ""  # within tolerance; the noise-only key is not compared
    few = b["w"].clone()
    few.view(-1)[:4] += 3 * tol  # 4 of 4096: within OUTLIER_SHARE
    assert differs(a, {**b, "w": few}, 2) == ""
    many = b["w"].clone()
    many.view(-1)[:64] += 3 * tol  # 64 of 4096 elements beyond the bound
    assert "64 of 4096" in differs(a, {**b, "w": many}, 2)
    one = b["w"].clone()
    one.view(-1)[7] += 0.1 * 0.02  # one element moved by a tenth of an Adam step
    assert "largest" in differs(a, {**b, "w": one}, 2)
    lost = a["w"] + 0.5 * 0.02 * torch.sign(torch.randn(64, 64, generator=g))  # a rank's gradients left out
    assert differs(a, {**b, "w": lost}, 2)

# Under FSDP the SFT warm-up is data-parallel on shards (rlvr.sft.sharded) and equals the one-process warm-up only
# to float rounding (its own test below bounds it). Where a side model is copied from the warmed-up policy (the
# critic's and the discriminator's trunks), that rounding reaches the advantages, and Adam at lr 0.02 then moves
# the policy by ~1e-4 (measured: 8.5e-5 at step 2 for the critic). These tests compare the RL phase, so both
# runs start it from the same weights: no warm-up.
SAME_START = ["--set", "sft.steps=0"]


def metrics(run_dir: Path) -> list[dict]:
    return [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]


CASES = {
    # two minibatches: old log-probs are an extra forward, split over the ranks and gathered
    "grpo_minibatches": ["--set", "algorithm.minibatches=2"],
    # a reference model (its log-probs gathered), DAPO's dynamic sampling and token-level aggregation
    # FSDP2: parameters, gradients and optimizer state sharded; generation on gathered weights
    "fsdp_minibatches": ["--set", "train.distributed.strategy=fsdp", "--set", "algorithm.minibatches=2"],
    # asynchronous rollouts: each rank's producer generates its share one step ahead, gathering through a
    # process group of its own while the trainers all-reduce; TIS weighs the stale samples
    "async_staleness": ["--set", "rollout.max_staleness=1", "--set", "algorithm.correction=tis"],
    # the same under FSDP2: each snapshot is gathered by the trainers (a collective) into the producer's copy
    "fsdp_async_staleness": ["--set", "train.distributed.strategy=fsdp", "--set", "rollout.max_staleness=2",
                             "--set", "algorithm.correction=tis"],
    # Mu-GRPO's stages: a stage's own rollouts need its first step's snapshot (FSDP2: test below)
    "stages": ["--set", "rollout.stages=2"],
    # interleaved SFT phases: every rank trains the same phase, rank 0's weights are broadcast after it
    "interleaved_sft": ["--set", "sft.interleave_every=2", "--set", "sft.interleave_steps=2"],
    # LoRA adapters sharded by FSDP2 beside the frozen base (checkpoints gather the adapters alone)
    "fsdp_lora": ["--set", "train.distributed.strategy=fsdp", "--set", "model.lora.rank=4", "--set",
                  "model.lora.alpha=8"],
    # the reference under FSDP2: sharded like the policy, its log-probs in a lockstep block of their own
    "fsdp_kl": ["--set", "train.distributed.strategy=fsdp", "--set", "algorithm.kl.coef=0.05"],
    "dapo_kl": ["--set", "algorithm.kl.coef=0.05", "--set", "algorithm.dynamic_sampling.enabled=true",
                "--set", "algorithm.dynamic_sampling.batch_prompts=2", "--set", "algorithm.aggregation.name=token_mean"],
}


@pytest.mark.distributed
@pytest.mark.parametrize("case", sorted(CASES))
def test_two_ranks_equal_one_rank_on_the_same_global_batch(tmp_path, case):
    one, two = tmp_path / "one" / "run", tmp_path / "two" / "run"
    ok(run(one, 1, *CASES[case]))
    ok(run(two, 2, *CASES[case]))
    for step in (2, 4):
        assert not (why := differs(weights(one, step), weights(two, step), step)), why
    moved = max_diff(weights(one, 2), weights(one, 4))
    assert moved > 1e-4  # the runs learned something: the equality is not of untouched weights
    assert moved > 100 * tolerance(4)  # and the tolerance is far below what a step moves
    m1, m2 = metrics(one), metrics(two)
    assert [m["step"] for m in m2] == [1, 2, 3, 4]  # rank 0 alone writes the log, once per step
    for a, b in zip(m1, m2):
        for key in ("reward", "accuracy", "loss", "grad_norm", "entropy", "completions", "rollouts/spent",
                    "rollouts/informative_groups"):
            assert a[key] == pytest.approx(b[key], rel=1e-5, abs=1e-7), (key, a["step"])
    summary = json.loads((two / "summary.json").read_text())
    assert summary["world_size"] == 2 and json.loads((one / "summary.json").read_text())["world_size"] == 1


@pytest.mark.distributed
def test_an_sft_phase_under_fsdp_leaves_the_shards_of_the_one_process_phase():
    """Interleaved SFT with FSDP2: the phase trains a whole copy gathered from the shards and every rank takes
    its shard of rank 0's result; gathered again, they equal the phase run on one process from the same
    weights, bit for bit (tests/dist_fsdp_phase.py). (A whole run is not compared with the one-process run:
    the phase's fresh AdamW takes a first step of lr x sign(g), so the update's float rounding under FSDP,
    1e-7, flips the sign of near-zero gradients into lr-sized differences.)"""
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2",
                           str(ROOT / "tests" / "dist_fsdp_phase.py")], cwd=ROOT, env=_env(), capture_output=True,
                          text=True, timeout=240)
    ok(proc)
    assert sorted(line for line in proc.stdout.splitlines() if line.startswith("ok")) == ["ok 0", "ok 1"]


@pytest.mark.distributed
def test_the_sft_warm_up_under_fsdp_trains_on_shards_like_one_process():
    """rlvr.sft.sharded: each rank trains on its share of every step's rows through FSDP2 (rank 0: three rows in
    two micro-batches, rank 1: two rows and a weight-0 one); one step's gradients equal the one-process step's
    (rtol 1e-4; Adam and clipping would hide a wrong constant scale, so the gradients are compared before the
    optimizer), the losses agree, and after 4 steps the weights agree within float rounding (tests/
    dist_sft_sharded.py). The bound is tolerance()'s arithmetic with 4 parts and kappa 2^12: the one-process run
    sums micro-batches of other shapes (2 + 2 + 1 rows against 2 + 1 and 2 + 0), which CPU kernels round
    differently. Measured: 2.9e-5 (one element of a gate projection; every other under 3.3e-6); leaving a rank's
    rows out fails the loss check, and a wrong gradient scale the gradient check."""
    steps, lr = 4, 0.01
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2",
                           str(ROOT / "tests" / "dist_sft_sharded.py"), str(steps), str(lr)], cwd=ROOT, env=_env(),
                          capture_output=True, text=True, timeout=300)
    ok(proc)
    lines = sorted(line.split() for line in proc.stdout.splitlines() if line.startswith("ok"))
    assert [x[1] for x in lines] == ["0", "1"], proc.stdout
    bound = 2 * steps * lr * 4 * 2**-24 * 2**12
    assert all(float(x[2]) <= bound for x in lines), (lines, bound)


@pytest.mark.distributed
def test_fsdp_shards_stream_whole_in_buckets_in_the_engines_dtype():
    """What vLLM receives under FSDP (rlvr.distributed.fsdp.streamed_weights): every tensor whole and equal to its
    ``full_tensor()`` bit for bit, cast to the engine's dtype, for shapes FSDP2 splits unevenly (an odd first
    dimension, fewer rows than ranks, a vector), with one all-gather per bucket (tests/dist_streamed_weights.py)."""
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2",
                           str(ROOT / "tests" / "dist_streamed_weights.py")], cwd=ROOT, env=_env(),
                          capture_output=True, text=True, timeout=240)
    ok(proc)
    assert sorted(line for line in proc.stdout.splitlines() if line.startswith("ok")) == ["ok 0 5", "ok 1 5"]


@pytest.mark.distributed
def test_a_run_with_sft_phases_under_fsdp_trains_them(tmp_path):
    out = tmp_path / "run"
    ok(run(out, 2, "--set", "train.distributed.strategy=fsdp", "--set", "sft.interleave_every=2", "--set",
           "sft.interleave_steps=2"))
    assert [m.get("sft/steps") for m in metrics(out)] == [None, 2.0, None, 2.0]
    assert max_diff(weights(out, 2), weights(out, 4)) > 1e-4


@pytest.mark.distributed
def test_stages_under_fsdp_take_each_stages_snapshot(tmp_path):
    """Mu-GRPO's stages with FSDP2: the trainers gather the snapshot a stage's own rollouts are generated
    with. With samples up to a stage stale, successive gradients of some embedding rows nearly cancel in
    Adam's moments, which scales FSDP's reduce-scatter rounding (7e-7 at most without stages) up to 2.7e-6 here
    (DDP's staged run is exact), inside :func:`tolerance`. A snapshot of the wrong version would differ by a
    whole step's movement (about 0.03 per element)."""
    args = ["--set", "train.distributed.strategy=fsdp", "--set", "rollout.stages=2"]
    one, two = tmp_path / "one" / "run", tmp_path / "two" / "run"
    ok(run(one, 1, *args))
    ok(run(two, 2, *args))
    for step in (2, 4):
        assert not (why := differs(weights(one, step), weights(two, step), step)), why
    assert max_diff(weights(one, 2), weights(one, 4)) > 1e-2
    assert [m["rollout/staleness_max"] for m in metrics(two)] == [0.0, 1.0, 0.0, 1.0]


@pytest.mark.distributed
@pytest.mark.parametrize("recipe", ["nudge_rl", "nudge_rl+fsdp", "f_hal", "f_hal+fsdp"])
def test_loss_terms_with_forwards_of_their_own_train_alike_on_two_ranks(tmp_path, recipe):
    # NudgeRL's distillation term scores the rows again under their plain prompts, f-HAL's term scores
    # preference pairs: forwards beside the micro-batch's, with gradient, which run inside its one DDP call
    # (FSDP2: inside the sharded update, and f-HAL's pairs' reference log-probs on the reference's shards)
    recipe, *strategy = recipe.split("+")
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text("".join(json.dumps({"prompt": f"say {w}:", "chosen": w, "rejected": w[::-1] + "x"}) + "\n"
                             for w in ["ab", "cd", "ef", "gh", "ij", "kl"]))
    # (p_dropout 0: the contexts wrapper draws its dropouts from the rank's own seed)
    sets = {"nudge_rl": ["--set", "rollout.group_size=4", "--set", "rollout.contexts.per_context=2", "--set",
                         "rollout.contexts.p_dropout=0"],
            "f_hal": ["--set", f"algorithm.loss_terms.0.path={pairs}", "--set",
                      "algorithm.loss_terms.0.pairs_per_step=4"]}[recipe]
    sets += [x for s in strategy for x in ("--set", f"train.distributed.strategy={s}")]
    one, two = tmp_path / "one" / "run", tmp_path / "two" / "run"
    ok(run(one, 1, "--recipe", recipe, *sets))
    ok(run(two, 2, "--recipe", recipe, *sets))
    # f-HAL under FSDP is compared up to step 2: its pair term leaves many gradients near AdamW's eps, where a
    # rounding difference moves a weight by up to lr x (difference / eps), so by step 4 two one-process runs
    # that differ only in their thread count (1 and 2) are 3e-4 apart in 2,715 weights (FSDP's reductions: 1.6e-4
    # in 1,077), and their grad norms 1.4% apart; DDP's all-reduce matches one process bit for bit
    last = 2 if recipe == "f_hal" and strategy else 4
    for step in (2, 4)[: last // 2]:
        assert not (why := differs(weights(one, step), weights(two, step), step)), why
    assert max_diff(weights(one, 2), weights(one, 4)) > 1e-4
    term = {"nudge_rl": "loss_term/context_distill", "f_hal": "loss_term/f_preference"}[recipe]
    m1, m2 = metrics(one), metrics(two)
    assert all(term in m for m in m2)
    for a, b in zip(m1 if last == 4 else m1[:1], m2):  # (f-HAL under FSDP: step 1, before any update)
        for key in ("loss", "grad_norm", term):
            assert a[key] == pytest.approx(b[key], rel=1e-5, abs=1e-7), (key, a["step"])


@pytest.mark.distributed
@pytest.mark.parametrize("strategy", ["ddp", "fsdp"])
def test_a_critic_trains_alike_on_two_ranks(tmp_path, strategy):
    # PPO's value model, two bootstrapped heads: old values gathered by groups, micro-batches dealt to the
    # ranks (16 rows in micro-batches of 6: rank 0 runs two, rank 1 one), gradients summed over ranks; with
    # FSDP the critic is a whole replica beside the sharded policy
    sets = ["--recipe", "ppo", "--set", "algorithm.critic.heads=2", "--set", "algorithm.critic.bootstrap=0.75",
            "--set", "algorithm.critic.lr=0.001", "--set", f"train.distributed.strategy={strategy}", *SAME_START]
    one, two = tmp_path / "one" / "run", tmp_path / "two" / "run"
    ok(run(one, 1, *sets))
    ok(run(two, 2, *sets))
    for step in (2, 4):
        assert not (why := differs(weights(one, step), weights(two, step), step)), why
        critic = [load_file(str(r / "checkpoints" / f"step_{step:06d}" / "critic.safetensors")) for r in (one, two)]
        assert not (why := differs(*critic, step, lr=0.001)), why
    first = load_file(str(one / "checkpoints" / "step_000002" / "critic.safetensors"))
    assert max_diff(first, load_file(str(one / "checkpoints" / "step_000004" / "critic.safetensors"))) > 1e-4
    for a, b in zip(metrics(one), metrics(two)):
        for key in ("loss", "critic/loss", "critic/value_mean", "critic/grad_norm", "critic/clip_frac"):
            assert a[key] == pytest.approx(b[key], rel=1e-5, abs=1e-7), (key, a["step"])


@pytest.mark.distributed
def test_two_ranks_equal_one_rank_with_two_threads_each_on_a_loaded_machine(tmp_path):
    # the conditions that vary between machines: more than one thread per process (so every kernel splits its
    # work between threads) and cores busy with other work; the critic case: old log-probs and values computed
    # on each rank's groups, the critic's micro-batches dealt unevenly (summed in another order than one
    # process's)
    sets = ["--recipe", "ppo", "--set", "algorithm.critic.heads=2", "--set", "algorithm.critic.lr=0.001",
            "--set", "train.threads=2"]
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        one, two = tmp_path / "one" / "run", tmp_path / "two" / "run"
        ok(run(one, 1, *sets))
        ok(run(two, 2, *sets))
    finally:
        for b in burners:
            b.kill()
    for step in (2, 4):
        assert not (why := differs(weights(one, step), weights(two, step), step)), why
    assert max_diff(weights(one, 2), weights(one, 4)) > 100 * tolerance(4)


@pytest.mark.distributed
@pytest.mark.parametrize("strategy", ["ddp", "fsdp"])
def test_a_discriminator_trains_alike_on_two_ranks(tmp_path, strategy):
    # PRISM's alignment advantage for the first 3 steps (the discriminator scores and trains on each rank's
    # groups, gradients summed), then plain GRPO at step 4 (no rank scores: every rank skips its update); with
    # FSDP the discriminator is a whole replica beside the sharded policy
    sets = ["--set", f"train.distributed.strategy={strategy}",
            "--set", "algorithm.advantage_transforms=[{name: prism, steps: 3}]",
            "--set", "algorithm.discriminator.enabled=true", "--set", "algorithm.discriminator.format=null",
            "--set", "algorithm.discriminator.perception_tag=null", "--set", "algorithm.discriminator.lr=0.001",
            # scores of O(1), not the default initialisation's O(1e-3): the group normalisation divides the
            # scores' float rounding (which differs with how rows are batched) by their spread in the group
            "--set", "algorithm.discriminator.init_std=1.0", *SAME_START]
    one, two = tmp_path / "one" / "run", tmp_path / "two" / "run"
    ok(run(one, 1, *sets))
    ok(run(two, 2, *sets))
    for step in (2, 4):
        assert not (why := differs(weights(one, step), weights(two, step), step)), why
        disc = [load_file(str(r / "checkpoints" / f"step_{step:06d}" / "discriminator.safetensors"))
                for r in (one, two)]
        assert not (why := differs(*disc, step, lr=0.001)), why
    m1, m2 = metrics(one), metrics(two)
    assert [("discriminator/loss" in m) for m in m2] == [True, True, True, False]
    for a, b in zip(m1, m2):
        for key in ("loss", "discriminator/loss", "discriminator/acc", "discriminator/pairs",
                    "discriminator/grad_norm"):
            if key in a or key in b:
                assert a[key] == pytest.approx(b[key], rel=1e-5, abs=1e-7), (key, a["step"])


@pytest.mark.distributed
@pytest.mark.parametrize("strategy", ["ddp", "fsdp", "fsdp+lora", "fsdp+kl"])
def test_two_rank_resume_equals_uninterrupted(tmp_path, strategy):
    full = tmp_path / "a" / "run"
    strategy, *extra = strategy.split("+")  # lora: adapters; kl: a reference, reloaded and sharded on resume
    sets = {"lora": ["--set", "model.lora.rank=4"], "kl": ["--set", "algorithm.kl.coef=0.05"]}
    extra = [x for e in extra for x in sets[e]]
    ok(run(full, 2, "--set", f"train.distributed.strategy={strategy}", *extra))
    if strategy == "fsdp":  # the optimizer state is sharded: one DCP file per rank, no safetensors copy
        ckpt = full / "checkpoints" / "step_000002"
        assert len(list((ckpt / "optimizer_dcp").glob("*.distcp"))) == 2
        assert not (ckpt / "optimizer.safetensors").exists()
    cut = tmp_path / "b" / "run"
    shutil.copytree(full, cut)
    shutil.rmtree(cut / "checkpoints" / "step_000004")
    (cut / "summary.json").unlink()
    ok(run(cut, 2, "--resume"))
    a, b = weights(full, 4), weights(cut, 4)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)  # bit for bit
    assert [m["step"] for m in metrics(cut)] == [1, 2, 3, 4]
    for x, y in zip(metrics(cut)[2:], metrics(full)[2:]):
        assert [x[k] for k in ("reward", "loss", "grad_norm")] == [y[k] for k in ("reward", "loss", "grad_norm")]


@pytest.mark.distributed
def test_fsdp_mixed_precision_computes_in_bfloat16_and_keeps_float32_shards(tmp_path):
    # MixedPrecisionPolicy(param_dtype=bfloat16, reduce_dtype=float32): the forward and backward run on bf16
    # copies of the gathered parameters, the shards and the AdamW state stay float32
    base = ["--set", "train.distributed.strategy=fsdp"]
    full, mixed = tmp_path / "full" / "run", tmp_path / "mixed" / "run"
    ok(run(full, 2, *base))
    ok(run(mixed, 2, *base, "--set", "train.distributed.mixed_precision=bfloat16"))
    a, b = weights(full, 4), weights(mixed, 4)
    assert all(v.dtype == torch.float32 for v in b.values())
    assert max_diff(a, b) > 0  # the policy applied: bf16 compute rounds otherwise
    first_full, first_mixed = metrics(full)[0], metrics(mixed)[0]  # the same samples (the same start)
    for key in ("loss", "grad_norm", "entropy"):  # bf16 rounding, not another computation
        assert first_mixed[key] == pytest.approx(first_full[key], rel=0.05, abs=1e-3), key
    assert all(math.isfinite(m["loss"]) and math.isfinite(m["grad_norm"]) for m in metrics(mixed))


def test_fsdp_policies_need_fsdp_and_cpu_offload_a_gpu():
    with pytest.raises(ValueError, match="FSDP2 policies"):
        load_config(overrides=["train.distributed.cpu_offload=true"])
    cfg = load_config(overrides=["rollout.prompts_per_step=4", "device=cpu", "train.distributed.strategy=fsdp",
                                 "train.distributed.cpu_offload=true"])
    with pytest.raises(DistributedSetupError, match="nothing to offload"):
        check_world(cfg, World(0, 2, strategy="fsdp"))


def test_sharded_checkpoint_is_refused_by_a_replicated_resume(tmp_path):
    from rlvr.run.checkpoint import load_checkpoint

    ckpt = tmp_path / "step_000002"
    ckpt.mkdir()
    (ckpt / "state.json").write_text(json.dumps({"step": 2, "optimizer": {"format": "dcp"}}))
    with pytest.raises(ValueError, match="strategy=fsdp"):
        load_checkpoint(ckpt, None, None)


@pytest.mark.distributed
def test_one_rank_raising_stops_every_rank_with_its_error(tmp_path):
    t0 = time.perf_counter()
    proc = run(tmp_path / "x" / "run", 2, "--fail-rank", "1", timeout=180)
    assert proc.returncode != 0
    assert "injected failure on rank 1" in proc.stdout + proc.stderr
    assert time.perf_counter() - t0 < 120  # no rank waits for the dead one until the collective timeout


@pytest.mark.distributed
def test_async_run_stopped_on_one_rank_stops_every_rank_after_the_same_step(tmp_path):
    # one segment of eight steps (no checkpoint inside it), rank 1 alone gets SIGTERM while its producer
    # generates step 2 ahead: both producers stop before the same step, the in-flight steps are trained on
    # both ranks, rank 0 saves, and the run resumes to the end
    out = tmp_path / "x" / "run"
    sets = ["--set", "rollout.max_staleness=1", "--set", "algorithm.correction=tis", "--set", "train.steps=8",
            "--set", "train.checkpoint_every=8"]
    t0 = time.perf_counter()
    proc = run(out, 2, *sets, "--signal-rank", "1", timeout=180)
    assert time.perf_counter() - t0 < 150
    assert "checkpoint saved" in proc.stdout + proc.stderr, proc.stderr[-4000:]
    done = [m["step"] for m in metrics(out)]
    assert done == list(range(1, len(done) + 1)) and 2 <= len(done) <= 5, done
    assert (out / "checkpoints" / f"step_{len(done):06d}").is_dir()
    ok(run(out, 2, "--resume"))
    assert [m["step"] for m in metrics(out)] == list(range(1, 9))


def test_interleaved_sft_and_async_rollouts_are_accepted_under_both_strategies():
    for extra in ("sft.interleave_every=2", "rollout.max_staleness=1", "rollout.stages=2"):
        cfg = load_config(overrides=["rollout.prompts_per_step=4", extra])
        check_world(cfg, World(0, 2))
        check_world(cfg, World(0, 2, strategy="fsdp"))


@pytest.mark.distributed
def test_rlvr_train_nproc_launches_torchrun(tmp_path):
    out = tmp_path / "cli" / "run"
    data = tmp_path / "cli" / "data.jsonl"
    data.parent.mkdir(parents=True)
    data.write_text("".join(json.dumps({"prompt": f"say {w}:", "answer": w}) + "\n" for w in ["ab", "cd", "ef"]))
    sets = ["task.name=jsonl", f"task.train_path={data}", "task.verifier=tests.reward_fns:shared_chars",
            "task.eval_fraction=0.34", "model.tiny.hidden_size=32", "model.tiny.intermediate_size=64",
            "model.tiny.num_layers=1", "rollout.prompts_per_step=2", "rollout.group_size=2",
            "rollout.max_new_tokens=3", "train.steps=2", "sft.steps=0", "eval.samples=1", "train.eval_every=0"]
    cmd = [sys.executable, "-m", "rlvr", "train", "--nproc", "2", "--out", str(out)]
    for s in sets:
        cmd += ["--set", s]
    proc = subprocess.run(cmd, cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=240)
    ok(proc)
    assert [m["step"] for m in metrics(out)] == [1, 2]
    assert json.loads((out / "summary.json").read_text())["world_size"] == 2
    assert proc.stdout.count("held-out accuracy before RL") == 1  # rank 0 alone prints the summary


def test_a_bad_config_with_nproc_is_one_message_before_torchrun_starts(monkeypatch):
    from typer.testing import CliRunner

    import rlvr.cli.launch as launch
    from rlvr.cli import app

    started = []
    def fake_launch(n, check=None):  # what launch_torchrun does before it starts torchrun
        if check is not None:
            check()
        started.append(n)
        return 0

    monkeypatch.setattr(launch, "launch_torchrun", fake_launch)
    r = CliRunner().invoke(app, ["train", "--nproc", "2", "--set", "optim.lr=-1"])
    assert r.exit_code == 2 and "optim.lr" in r.output and "Traceback" not in r.output
    assert started == []  # refused here, not once per rank
    r = CliRunner().invoke(app, ["train", "--nproc", "2", "--set", "train.steps=1"])
    assert r.exit_code == 0 and started == [2]


def test_without_nproc_keeps_every_other_argument():
    assert without_nproc(["train", "--nproc", "2", "--set", "a=1"]) == ["train", "--set", "a=1"]
    assert without_nproc(["train", "--nproc=4", "-r", "demo"]) == ["train", "-r", "demo"]


def test_world_size_that_does_not_divide_the_batch_is_refused():
    cfg = load_config(overrides=["rollout.prompts_per_step=3"])
    with pytest.raises(DistributedSetupError, match="prompts_per_step=3 is not divisible by the world size 2"):
        check_world(cfg, World(0, 2))
    check_world(cfg, World())  # one process: anything goes
    check_world(load_config(overrides=["rollout.prompts_per_step=4"]), World(1, 2))
    bad = load_config(overrides=["rollout.prompts_per_step=4", "algorithm.dynamic_sampling.batch_prompts=3"])
    with pytest.raises(DistributedSetupError, match="batch_prompts=3"):
        check_world(bad, World(0, 2))


def test_missing_backend_and_half_set_environment_are_clear(monkeypatch):
    from rlvr.distributed import process_group as d

    with pytest.raises(DistributedSetupError, match="nccl"):
        if torch.cuda.is_available():
            pytest.skip("nccl exists here")
        d._backend("nccl")
    monkeypatch.setenv("WORLD_SIZE", "2")
    for k in ("RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(k, raising=False)
    with pytest.raises(DistributedSetupError, match="torchrun"):
        d.init_world()


def test_single_process_world_is_the_identity():
    w = World()
    assert w.gather(3) == [3] and w.broadcast("x") == "x" and w.sum([1.5, 2.0]) == [1.5, 2.0]
    assert w.share(5) == [0, 1, 2, 3, 4] and w.seed(123) == 123 and w.any("stop") == "stop"
    assert World(1, 3).share(7) == [1, 4]
    got = w.gather_rows(3, torch.tensor([0, 0, 1]), lambda rows: {"x": rows.float()[:, None] * 2})
    assert torch.equal(got["x"], torch.tensor([[0.0], [2.0], [4.0]]))


def test_vllm_under_torchrun_runs_one_engine_per_rank_and_refuses_tensor_parallelism():
    check_world(load_config(overrides=["rollout.prompts_per_step=4", "rollout.engine=vllm"]), World(0, 2))
    check_world(load_config(overrides=["rollout.prompts_per_step=4", "rollout.engine=vllm"]),
                World(0, 2, strategy="fsdp"))
    tp = load_config(overrides=["rollout.prompts_per_step=4", "rollout.engine=vllm",
                                "rollout.vllm.tensor_parallel_size=2"])
    with pytest.raises(DistributedSetupError, match="tensor_parallel_size=2 under torchrun is not supported"):
        check_world(tp, World(0, 2))
    check_world(tp, World())  # one process: vLLM decides


@pytest.mark.distributed
def test_no_grad_passes_run_on_fsdp_shards_in_lockstep():
    """The old / reference log-prob passes under FSDP (rlvr.distributed.fsdp.lockstep_passes): rank 0 runs three
    forwards, rank 1 one; the ranks keep in step (a rank done runs one-token forwards while another still runs),
    every log-prob equals the unsharded model's to float rounding, no rank ever holds the whole model, the
    shards are unchanged and the update runs after; then the reference, sharded like the policy (each rank
    keeps about half of it), in a block of its own with the counts the other way round
    (tests/dist_lockstep.py)."""
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2",
                           str(ROOT / "tests" / "dist_lockstep.py")], cwd=ROOT, env=_env(),
                          capture_output=True, text=True, timeout=240)
    ok(proc)
    lines = sorted(line.split() for line in proc.stdout.splitlines() if line.startswith("ok"))
    assert [(x[1], x[2], x[4]) for x in lines] == [("0", "3", "1"), ("1", "1", "3")], proc.stdout
    assert all(float(x[3]) <= 1e-6 and float(x[5]) <= 1e-6 for x in lines), lines
    assert all(0.4 <= float(x[6]) <= 0.6 for x in lines), lines  # the reference: about half of it on each rank
