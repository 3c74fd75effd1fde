"""Seconds per GRPO step: rlvr against TRL's ``GRPOTrainer`` and a bare-PyTorch floor, on one workload.

The three run the same work in one process, one step of each in turn, so machine noise hits them alike:

- model: the tiny random Qwen2 of ``rlvr.models.tiny`` (same size, same init seed, one copy each) and its
  character tokenizer;
- data: the same equal-length text prompts (no padding anywhere), ``--prompts`` per step, ``--group``
  completions each, sampled at temperature 1 with no top-k / top-p;
- completions forced to exactly ``--new-tokens`` tokens (``min_new_tokens = max_new_tokens``, which masks
  EOS), so every step generates and trains on the same number of tokens;
- reward: one bit of a CRC32 of the completion text, the same function for all three;
- loss: GRPO advantages (group mean and std), token-level PPO-clip (eps 0.2) averaged over all completion
  tokens of the batch (rlvr ``token_mean`` == TRL ``bnpo`` here), no KL and no reference model, one
  optimizer step per generation batch (rlvr ``epochs=1, minibatches=1``; TRL ``num_iterations=1``,
  ``steps_per_generation=1``, no gradient accumulation), the whole batch in one forward/backward;
- optimizer: torch AdamW (non-fused), same lr, no weight decay, grad-norm clip 1.0; float32, CPU;
  no gradient checkpointing (TRL's default turns it on: it recomputes the forward, which is other work).

The floor is ``model.generate`` + one forward whose last ``T + 1`` logits give the completion log-probs +
the clipped loss + backward + clip + AdamW, with no framework around it (and no metrics: it is the least
work a GRPO step on this workload can do with these tools).

Printed: median seconds per step of each (after ``--warmup`` steps), rlvr / TRL, rlvr / floor, and each
one's phase split (generation, scoring, update, rest). ``--profile`` adds a cProfile of rlvr's steps.
TRL is optional (``pip install 'rlvr[trl]'``); without it the TRL column is skipped with the reason.

Usage: python benchmarks/trl_speed.py [--steps 15] [--warmup 3] [--prompts 16] [--group 8] [--new-tokens 64]
                                      [--hidden 128] [--layers 2] [--threads 1] [--profile] [--no-trl]
"""

from __future__ import annotations

import argparse
import gc
import random
import tempfile
import time
import warnings
import zlib

import torch

from rlvr.config.run import RunConfig
from rlvr.core.types import Example
from rlvr.models.tiny import TinyModelConfig
from rlvr.tasks.base import Task, WeightedVerifier
from rlvr.train.loop import rl_step
from rlvr.run.setup import build_components
from rlvr.verifiers.base import from_callable
# this script's folder is on sys.path
from trl_speed_support import Phases, SamplingCheck, profile_rlvr, report, summary

CLIP = 0.2
MAX_GRAD_NORM = 1.0


def hash_reward(prompts, completions, **_) -> list[float]:
    """1 or 0 by one bit of the completion's CRC32: random-looking, deterministic, equal cost everywhere."""
    return [float(zlib.crc32(c.encode()) & 1) for c in completions]


def make_prompts(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [f"Add {rng.randrange(1000):03d} and {rng.randrange(1000):03d}: " for _ in range(n)]


def tiny_config(a) -> TinyModelConfig:
    return TinyModelConfig(hidden_size=a.hidden, num_layers=a.layers, num_heads=4, num_kv_heads=2,
                           intermediate_size=4 * a.hidden, max_positions=32 + a.new_tokens)


def workload_tokenizer():
    """The character tokenizer with its EOS moved past the model's vocabulary (the model has
    ``len(tok) - 1`` logits), so no framework or engine can sample it: every completion is exactly
    ``--new-tokens`` long without a length processor, in ``generate``-based and other engines alike."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    from rlvr.models.tiny import CHARSET

    vocab = {"<pad>": 0, "<unk>": 1}
    for ch in CHARSET:
        vocab.setdefault(ch, len(vocab))
    vocab["<eos>"] = len(vocab)
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    tok.decoder = decoders.Fuse()
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>",
                                   padding_side="left")


def workload_model(a, tok):
    """The tiny Qwen2 of ``rlvr.models.tiny`` over every token but EOS (same init seed in every framework)."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    c = tiny_config(a)
    cfg = Qwen2Config(vocab_size=len(tok) - 1, hidden_size=c.hidden_size, intermediate_size=c.intermediate_size,
                      num_hidden_layers=c.num_layers, num_attention_heads=c.num_heads,
                      num_key_value_heads=c.num_kv_heads, max_position_embeddings=c.max_positions,
                      tie_word_embeddings=True, pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id,
                      bos_token_id=tok.eos_token_id)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(a.seed)
        model = Qwen2ForCausalLM(cfg)
    model.generation_config.pad_token_id = tok.pad_token_id
    model.generation_config.eos_token_id = tok.eos_token_id
    return model


# ---------------------------------------------------------------------------------------------- floor

class Floor:
    """generate -> reward -> advantages -> forward -> log-probs -> clipped loss -> backward -> AdamW."""

    def __init__(self, a, prompts: list[str]):
        self.a, self.prompts, self.phases = a, prompts, Phases()
        self.tok = workload_tokenizer()
        self.model = workload_model(a, self.tok)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=a.lr, weight_decay=0.0)
        self.i = 0

    def step(self) -> None:
        a, tok, model = self.a, self.tok, self.model
        SamplingCheck.label = "floor"
        self.phases.start()
        t0 = time.perf_counter()
        batch = [self.prompts[(self.i * a.prompts + k) % len(self.prompts)] for k in range(a.prompts)]
        self.i += 1
        enc = tok([p for p in batch for _ in range(a.group)], return_tensors="pt", padding=True)
        model.eval()
        with torch.no_grad():
            seq = model.generate(**enc, do_sample=True, max_new_tokens=a.new_tokens,
                                 temperature=1.0, top_p=1.0, top_k=0, pad_token_id=tok.pad_token_id,
                                 eos_token_id=tok.eos_token_id)
        t1 = time.perf_counter()
        p = enc["input_ids"].shape[1]
        comp = seq[:, p:]
        rewards = torch.tensor(hash_reward(None, tok.batch_decode(comp, skip_special_tokens=True)))
        g = rewards.view(-1, a.group)
        adv = ((g - g.mean(1, keepdim=True)) / (g.std(1, keepdim=True) + 1e-6)).view(-1, 1)
        t2 = time.perf_counter()
        model.train()
        attn = torch.ones_like(seq)
        logits = model(input_ids=seq, attention_mask=attn, logits_to_keep=a.new_tokens + 1).logits[:, :-1]
        logp = logits.float().log_softmax(-1).gather(-1, comp.unsqueeze(-1)).squeeze(-1)
        ratio = torch.exp(logp - logp.detach())
        loss = -torch.minimum(ratio * adv, ratio.clamp(1 - CLIP, 1 + CLIP) * adv).mean()
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), MAX_GRAD_NORM)
        self.opt.step()
        t3 = time.perf_counter()
        self.phases.stop()
        self.phases.add("generate", t1 - t0)
        self.phases.add("score", t2 - t1)
        self.phases.add("update", t3 - t2)


# ---------------------------------------------------------------------------------------------- rlvr

class Rlvr:
    """``rl_step`` over Components built as ``rlvr train`` builds them, with rollout engine ``engine``."""

    def __init__(self, a, prompts: list[str], engine: str = "hf"):
        self.a, self.phases, self.step_i, self.engine = a, Phases(), 0, engine
        n = a.prompts * a.group
        t = tiny_config(a)
        name, _, extra = engine.partition("+")  # "native+compile": rollout.native.compile on
        compiled = extra == "compile"
        self.cfg = RunConfig.model_validate({
            "seed": a.seed, "device": "cpu",
            "model": {"tiny": t.model_dump()},
            "rollout": {"engine": name, "prompts_per_step": a.prompts, "group_size": a.group, "max_new_tokens": a.new_tokens,
                        "temperature": 1.0, "top_p": 1.0, "batch_size": n,
                        "native": {"compile": compiled}},
            "algorithm": {"advantage": {"name": "grpo"},
                          "objective": {"name": "ppo_clip", "clip_low": CLIP, "clip_high": CLIP},
                          "aggregation": {"name": "token_mean"}, "kl": {"coef": 0.0}, "epochs": 1, "minibatches": 1},
            "optim": {"lr": a.lr, "weight_decay": 0.0, "max_grad_norm": MAX_GRAD_NORM, "warmup_steps": 0,
                      "schedule": "constant"},
            "train": {"steps": a.warmup + a.steps, "micro_batch_size": n, "eval_every": 0},
            "sft": {"steps": 0},
        })
        tok = workload_tokenizer()
        model = workload_model(a, tok)
        examples = [Example(f"p{i}", p, "") for i, p in enumerate(prompts)]
        task = Task("hash_bits", {"train": examples}, [WeightedVerifier(from_callable(hash_reward, "hash_bit"))])
        self.c = build_components(self.cfg, model, tok, task, torch.device("cpu"))

    def step(self) -> None:
        SamplingCheck.label = f"rlvr-{self.engine}"
        self.phases.start()
        m = rl_step(self.cfg, self.c, self.step_i)
        self.phases.stop()
        self.step_i += 1
        if m["completion_length"] != self.a.new_tokens:
            raise RuntimeError(f"rlvr ({self.engine}) completions are {m['completion_length']} tokens, "
                               f"not {self.a.new_tokens}")
        self.phases.add("generate", m["time/rollout"])
        self.phases.add("score", m["time/score"])
        self.phases.add("update", m["time/update"])


# ---------------------------------------------------------------------------------------------- TRL

def trl_missing() -> str | None:
    try:
        import trl  # noqa: F401
    except Exception as e:  # ImportError, or a trl that does not import with this transformers
        return f"{type(e).__name__}: {e}"
    return None


def build_trl(a, prompts: list[str], on_step_end, out_dir: str):
    """A GRPOTrainer configured to the workload; ``on_step_end()`` runs after each of its optimizer steps."""
    import dataclasses

    from datasets import Dataset
    from transformers import PrinterCallback, ProgressCallback, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    n = a.prompts * a.group
    names = {f.name for f in dataclasses.fields(GRPOConfig)}  # newer transformers renamed the flag
    no_ckpt = {"activation_checkpointing" if "activation_checkpointing" in names else "gradient_checkpointing": False}
    args = GRPOConfig(
        output_dir=out_dir, report_to="none", save_strategy="no", disable_tqdm=True, logging_steps=10,
        use_cpu=True, bf16=False, fp16=False, seed=a.seed, **no_ckpt,
        per_device_train_batch_size=n, gradient_accumulation_steps=1, steps_per_generation=1,
        num_generations=a.group, num_iterations=1, max_completion_length=a.new_tokens,
        temperature=1.0, top_p=1.0, top_k=0,
        beta=0.0, epsilon=CLIP, loss_type="bnpo", scale_rewards="group", mask_truncated_completions=False,
        learning_rate=a.lr, lr_scheduler_type="constant", warmup_steps=0, weight_decay=0.0, optim="adamw_torch",
        max_grad_norm=MAX_GRAD_NORM, max_steps=a.warmup + a.steps, log_completions=False,
    )
    tok = workload_tokenizer()
    model = workload_model(a, tok)
    phases = Phases()

    class Alternate(TrainerCallback):
        def on_train_begin(self, *args, **kw):
            SamplingCheck.label = "trl"
            phases.start()

        def on_step_end(self, *args, **kw):
            phases.stop()
            on_step_end()
            SamplingCheck.label = "trl"
            phases.start()

    trainer = GRPOTrainer(model=model, reward_funcs=[hash_reward], args=args,
                          train_dataset=Dataset.from_dict({"prompt": prompts}), processing_class=tok,
                          callbacks=[Alternate()])
    for cb in (PrinterCallback, ProgressCallback):
        trainer.remove_callback(cb)
    _time_method(trainer, "_generate_single_turn", phases, "generate", check=lambda out: _full_length(out[0], a))
    _time_method(trainer, "_calculate_rewards", phases, "score")
    _time_method(trainer, "_generate_and_score_completions", phases, "gsb")
    return trainer, phases


def _time_method(obj, name: str, phases: Phases, label: str, check=None) -> None:
    """Time calls of ``obj.name`` (a private TRL method: when a TRL version lacks it, its phase shows nan)."""
    fn = getattr(obj, name, None)
    if fn is None:
        print(f"note: this TRL has no {name}; its '{label}' phase is not measured")
        return

    def timed(*args, **kw):
        t0 = time.perf_counter()
        out = fn(*args, **kw)
        phases.add(label, time.perf_counter() - t0)
        if check is not None:
            check(out)
        return out

    setattr(obj, name, timed)


def _full_length(completion_ids, a) -> None:
    lengths = {len(ids) for ids in completion_ids}
    if lengths != {a.new_tokens} or len(completion_ids) != a.prompts * a.group:
        raise RuntimeError(f"TRL generated {len(completion_ids)} completions of lengths {sorted(lengths)}, "
                           f"not {a.prompts * a.group} of {a.new_tokens}")


def run_workload(a, engines: list[str]) -> dict[str, dict[str, float]]:
    """TRL (when installed), rlvr with each engine, and the floor on one workload, one step each in turn."""
    prompts = make_prompts(a.prompts * (a.warmup + a.steps), a.seed)
    rlvrs = {e: Rlvr(a, prompts, e) for e in engines}
    floor = Floor(a, prompts)
    order = [*rlvrs.values(), floor]
    rounds = [0]
    SamplingCheck.start()

    def others() -> None:  # one step of each rlvr engine and of the floor, the order rotating every round
        k = rounds[0] % len(order)
        for r in order[k:] + order[:k]:
            r.step()
        rounds[0] += 1
        if rounds[0] == a.warmup:
            SamplingCheck.stop()

    missing = "--no-trl" if a.no_trl else trl_missing()
    runners = {f"rlvr-{e}": r.phases for e, r in rlvrs.items()}
    runners["floor"] = floor.phases
    if missing:
        print(f"TRL skipped ({missing}); install it with: pip install 'rlvr[trl]'")
        for _ in range(a.warmup + a.steps):
            others()
    else:
        with tempfile.TemporaryDirectory() as out:
            trainer, trl_phases = build_trl(a, prompts, others, out)
            trainer.train()
        runners = {"trl": trl_phases, **runners}
    SamplingCheck.stop()  # (already stopped after the warm-up, unless there was none)
    print(f"sampling: the same logits processors in every generate() call: {SamplingCheck.verify() or 'none'}")
    med = report(a, runners)
    if a.profile:
        profile_rlvr(a, Rlvr(a, prompts, engines[0]))
    return med


def engines_available(names: list[str]) -> list[str]:
    import importlib.util

    out = []
    for e in names:
        if e == "vllm" and importlib.util.find_spec("vllm") is None:
            print("engine vllm skipped: vLLM is not installed (bash scripts/setup_vllm.sh, then run from .venv-vllm)")
            continue
        out.append(e)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=15, help="timed steps of each")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps of each first")
    p.add_argument("--workloads", default="16x8x64,4x8x16",
                   help="comma-separated PROMPTSxGROUPxTOKENS workloads, each run in turn")
    p.add_argument("--engines", default="hf,native,vllm", help="rlvr rollout engines to time (vllm when installed); "
                   "native+compile: the native engine with rollout.native.compile")
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1,
                   help="torch intra-op threads (0: torch's default). One keeps a tiny model's timings stable on a "
                        "shared machine: with more, threads spin-wait on each other at every small op")
    p.add_argument("--no-trl", action="store_true", help="skip TRL even when it is installed")
    p.add_argument("--profile", action="store_true", help="then cProfile rlvr's steps (first engine)")
    a = p.parse_args()
    try:
        workloads = [tuple(int(x) for x in w.lower().split("x")) for w in a.workloads.split(",")]
        assert all(len(w) == 3 for w in workloads)
    except (ValueError, AssertionError):
        p.error("--workloads takes PROMPTSxGROUPxTOKENS items, e.g. 16x8x64,4x8x16")
    if a.steps < 1 or a.warmup < 0 or any(g < 2 or n < 1 or t < 1 for n, g, t in workloads):
        p.error("need --steps >= 1, --warmup >= 0, group >= 2 (GRPO), prompts >= 1, tokens >= 1")
    warnings.filterwarnings("ignore", category=FutureWarning)  # deprecation notices of transformers / TRL
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    engines = engines_available([e.strip() for e in a.engines.split(",") if e.strip()])
    import transformers

    print(f"torch {torch.__version__}, transformers {transformers.__version__}"
          + ("" if trl_missing() else f", trl {__import__('trl').__version__}"))
    results = {}
    for n, g, t in workloads:
        wa = argparse.Namespace(**{**vars(a), "prompts": n, "group": g, "new_tokens": t})
        results[f"{n}x{g}x{t}"] = run_workload(wa, engines)
        gc.collect()  # the previous workload's engines go before the next ones start (one vLLM per process)
    summary(results)


if __name__ == "__main__":
    main()
