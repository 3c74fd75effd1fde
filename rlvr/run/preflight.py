"""Checks run when a run is set up, before any work: each failure is one clear :class:`SetupError`.

They cover what a config cannot know until the model, the data and the installed packages are at hand:
optional packages that a setting needs, a CUDA device, a model vLLM's CPU attention cannot serve, a Ray
cluster too small for the actors asked of it, a chat template the tokenizer lacks, a group size
that leaves a group-relative advantage nothing to compare, and (via :mod:`rlvr.run.prompt_limits`)
prompts longer than the model's context.
"""

from __future__ import annotations

import importlib.util

import torch

from rlvr.algorithms.registry import ADVANTAGES, AdvantageInputs, call

__all__ = ["SetupError", "check_packages", "check_device", "check_chat_template", "check_group_size",
           "check_compiler", "check_vllm", "check_ray"]

_BACKEND_MODULES = {"tensorboard": "tensorboard", "wandb": "wandb", "mlflow": "mlflow"}


class SetupError(ValueError):
    """A run cannot start as configured; the message says what is missing and how to fix it."""


def check_packages(cfg) -> None:
    """Optional packages the config needs are installed (a logging backend, say)."""
    for backend in cfg.logging.backends:
        module = _BACKEND_MODULES.get(backend)
        if module is not None and importlib.util.find_spec(module) is None:
            raise SetupError(f"logging backend {backend!r} needs the {module!r} package, which is not installed: "
                             f"pip install 'rlvr[{backend}]', or remove it from logging.backends")
    if cfg.rollout.engine == "vllm" and importlib.util.find_spec("vllm") is None:
        raise SetupError("rollout.engine=vllm needs vLLM, which is not installed: pip install 'rlvr[vllm]' on a GPU "
                         "machine, or bash scripts/setup_vllm.sh for vLLM's CPU build; or use rollout.engine=hf")
    ray_use = [k for k, on in (("rollout.engine=ray", cfg.rollout.engine == "ray"),
                               ("scoring.backend=ray", cfg.scoring.backend == "ray")) if on]
    if ray_use and importlib.util.find_spec("ray") is None:
        raise SetupError(f"{' and '.join(ray_use)} needs Ray, which is not installed: pip install 'rlvr[ray]'")
    if cfg.rollout.engine == "vllm" and cfg.rollout.vllm.sleep_mode and not torch.cuda.is_available():
        raise SetupError("rollout.vllm.sleep_mode=true needs a GPU (vLLM's sleep mode frees CUDA memory); set it to "
                         "false on CPU")


def check_vllm(cfg, device, model=None, model_cfg=None) -> None:
    """A vLLM engine can serve the model where it runs (its CPU attention takes a few head sizes only), checked
    before the model is loaded, so a refusal does not wait for the SFT warm-up. The model is ``model`` (an
    object the run was given), else ``model_cfg`` (a checkpoint's or evaluated directory's), else ``cfg.model``."""
    from rlvr.engines.vllm_config import vllm_problems

    config = model.config.to_dict() if model is not None and hasattr(model, "config") else None
    problems = vllm_problems(cfg, device, model_cfg, config)
    if problems:
        raise SetupError("; ".join(problems))


def check_ray(cfg) -> None:
    """Rollout workers (``rollout.engine: ray``) and scoring tasks (``scoring.backend: ray``) fit the Ray cluster
    the run joins (or starts), checked before the model is loaded: Ray would otherwise queue what it cannot
    place and the run would wait at its first generation, silently
    (:mod:`rlvr.distributed.ray_resources`)."""
    from rlvr.distributed.ray_resources import RayResourceError, check_ray_resources, ray_asks

    asks = ray_asks(cfg)
    if asks:
        from rlvr.distributed.ray_engine import _connect

        try:
            check_ray_resources(_connect(cfg.rollout.ray.address), asks)
        except RayResourceError as e:
            raise SetupError(str(e)) from None


def check_device(name: str) -> None:
    if name == "cuda" and not torch.cuda.is_available():
        raise SetupError("device=cuda, but no CUDA device is available (torch "
                         f"{torch.__version__} {'has no CUDA support' if torch.version.cuda is None else 'sees no GPU'}); "
                         "use device=cpu or device=auto")


def check_compiler(cfg, device) -> None:
    """``rollout.native.compile`` on a CPU device needs a C++ compiler for torch.compile's kernels."""
    if cfg.rollout.native.compile:
        from rlvr.engines.native import check_compiler as check

        try:
            check(device, "rollout.native.compile")
        except RuntimeError as e:
            raise SetupError(str(e)) from None


def check_chat_template(tokenizer, chat_template: bool, examples, where: str) -> None:
    """Chat rendering (``model.chat_template`` or prompts given as messages) needs a template."""
    chat_prompts = any(isinstance(ex.prompt, list) for ex in examples)
    if (chat_template or chat_prompts) and not getattr(tokenizer, "chat_template", None):
        what = "model.chat_template=true" if chat_template else "the data's prompts are chat messages"
        raise SetupError(f"{what}, but the tokenizer of {where} has no chat template. Set model.chat_template=false"
                         " (text prompts are then used as they are), or add a 'chat_template' to the model's "
                         "tokenizer_config.json")


def check_group_size(cfg) -> str | None:
    """With one completion per prompt a group-relative advantage is 0 for every completion: refuse. Other
    estimators run (GRPO's singleton convention, mean 0 and std 1, makes A = r), with a warning returned.

    Whether an estimator is group-relative is read off the estimator itself: two singleton groups with
    rewards 1 and 0 must not both get advantage 0. Estimators with state or extra inputs are not probed.
    """
    if cfg.rollout.group_size > 1 or cfg.data.budget.name != "fixed":
        return None
    adv = cfg.algorithm.advantage
    warning = (f"warning: rollout.group_size=1: no completions to compare within a group; advantage "
               f"{adv.name!r} then has no group baseline")
    entry = ADVANTAGES.get(adv.name)
    if entry.state is not None or getattr(entry, "needs", ()):
        return warning
    inputs = AdvantageInputs(torch.tensor([1.0, 0.0], dtype=torch.float64), torch.tensor([0, 1]),
                             torch.tensor([1, 1]), torch.ones(2, 1), {"correct": torch.tensor([1.0, 0.0])}, {}, 0, 1)
    try:
        out = call(entry, inputs, adv.params)
    except Exception:  # an estimator that cannot run on this probe is not judged by it
        return warning
    if torch.is_tensor(out) and bool((out == 0).all()):
        raise SetupError(f"rollout.group_size=1 with advantage {adv.name!r}: each group holds one completion, so "
                         "every group-relative advantage is 0 and nothing is learned. Use rollout.group_size>=2, "
                         "or an advantage with a baseline across the batch (e.g. reinforce_pp)")
    return warning
