"""LoRA adapters through ``peft`` (``model.lora``): only the adapters train.

Hu et al. 2021, "LoRA: Low-Rank Adaptation of Large Language Models", arXiv:2106.09685. Each targeted
linear layer ``y = W x`` becomes ``y = W x + (alpha / r) B A x`` with ``A`` (r x in, Kaiming-initialised)
and ``B`` (out x r, zeros: the adapted model starts equal to the base); ``W`` is frozen.

rlvr injects the adapters into the model in place (``peft.inject_adapter_in_model``), so the trainer, the
log-prob code and the engines keep working with the same ``transformers`` model object; every parameter
outside the adapters is frozen, so the optimizer holds state for the adapters only. The adapters apply to
the RL phase; the SFT warm-up (when ``sft.steps`` > 0) trains all weights first.

- **Engines.** ``hf`` generates with the adapted module itself; ``native`` falls back to ``hf`` (its decoder
  reads plain linear weights); ``vllm`` receives merged weights (:func:`inference_state_dict`:
  ``W + (alpha / r) B A`` under the base names, computed out of place, so the frozen base never drifts).
- **Checkpoints** hold the adapter only (``adapter_model.safetensors``, ``adapter_config.json``, the
  tokenizer); the run directory keeps the frozen base once, in ``lora_base/``. Resuming rebuilds base +
  adapter; ``rlvr export RUN_DIR --merged OUT`` writes a plain model directory with the adapter merged.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

from rlvr.lazy import no_grad, torch
from rlvr.models.config import LoRAConfig

__all__ = ["LoRAConfig", "apply_lora", "has_lora", "side_trunk", "inference_state_dict", "inference_weights", "save_adapter", "load_adapter",
           "merged_copy", "is_adapter_dir", "LoRAError"]

ADAPTER_FILE, CONFIG_FILE = "adapter_model.safetensors", "adapter_config.json"


class LoRAError(ValueError):
    """A LoRA setting that cannot apply to this model."""


def _peft_config(cfg: LoRAConfig):
    from peft import LoraConfig

    return LoraConfig(r=cfg.rank, lora_alpha=cfg.alpha, lora_dropout=cfg.dropout,
                      target_modules=cfg.target_modules, bias="none")


def _linear_names(model: torch.nn.Module) -> list[str]:
    return sorted({n.rsplit(".", 1)[-1] for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)})


def has_lora(model: torch.nn.Module) -> bool:
    return any("lora_A" in n for n, _ in model.named_parameters())


def apply_lora(model: torch.nn.Module, cfg: LoRAConfig) -> torch.nn.Module:
    """``model`` with LoRA adapters injected in place and everything else frozen (a no-op for rank 0 or a
    model that already has adapters)."""
    if cfg.rank == 0 or has_lora(model):
        return model
    try:
        from peft import inject_adapter_in_model
    except ImportError as e:
        raise LoRAError(f"model.lora needs the peft package ({e}): pip install 'rlvr[lora]'") from e
    targets = [cfg.target_modules] if isinstance(cfg.target_modules, str) else cfg.target_modules
    tied = getattr(model.config, "tie_word_embeddings", False)
    if tied and any(t.rsplit(".", 1)[-1] in ("embed_tokens", "lm_head", "wte", "embed_in", "embed_out")
                    for t in targets):
        raise LoRAError(f"model.lora.target_modules={cfg.target_modules!r} adapts a tied embedding: the input and "
                        "output embeddings share one weight, so an adapter on one of them cannot be merged; adapt "
                        "the attention and MLP layers")
    try:
        inject_adapter_in_model(_peft_config(cfg), model)
    except ValueError as e:  # peft: "Target modules {...} not found in the base model"
        raise LoRAError(f"model.lora.target_modules={cfg.target_modules!r} matches no layer of this model "
                        f"({e}); its linear layers are named: {', '.join(_linear_names(model))}") from None
    for name, p in model.named_parameters():
        p.requires_grad_("lora_" in name)
    model.config.rlvr_lora = cfg.model_dump()
    return model


def _lora_layers(model: torch.nn.Module):
    from peft.tuners.lora import LoraLayer

    return [(n, m) for n, m in model.named_modules() if isinstance(m, LoraLayer)]


def inference_weights(model: torch.nn.Module) -> Iterator[tuple[str, torch.Tensor]]:
    """``(name, tensor)`` of the model's weights as a plain model has them, one at a time: with adapters, each
    adapted ``W`` merged (``W + scaling B A``, out of place) under its base name only when its turn comes, so
    streaming them (into an inference engine) holds one merged weight at a time, not a merged copy of the
    model; the adapter tensors are dropped."""
    state = model.state_dict()
    if not has_lora(model):
        yield from state.items()
        return
    layers = dict(_lora_layers(model))
    for key, value in state.items():
        if "lora_" in key:
            continue
        plain = key.replace(".base_layer.", ".")
        owner = plain.removesuffix(".weight")
        if plain.endswith(".weight") and owner in layers and ".base_layer." in key:
            with torch.no_grad():
                yield plain, _merged(layers[owner])
        else:
            yield plain, value


def _merged(mod) -> torch.Tensor:
    w = mod.base_layer.weight
    delta = torch.zeros_like(w)
    for key in mod.active_adapters:
        if key in mod.lora_A:
            a, b = mod.lora_A[key].weight, mod.lora_B[key].weight
            delta += (b @ a).to(w.dtype) * mod.scaling[key]
    return w + delta


@no_grad
def inference_state_dict(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The model's weights as a plain model has them (:func:`inference_weights`), as one dict."""
    return dict(inference_weights(model))


def save_adapter(model: torch.nn.Module, directory: str | Path, state: dict[str, torch.Tensor] | None = None) -> None:
    """The adapter tensors and their config (not the frozen base) to ``directory``; ``state``: the tensors to
    write instead of ``model.state_dict()``'s (FSDP's gathered ones)."""
    from safetensors.torch import save_file

    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    state = model.state_dict() if state is None else state
    tensors = {k: v.detach().cpu().contiguous() for k, v in state.items() if "lora_" in k}
    save_file(tensors, str(d / ADAPTER_FILE))
    (d / CONFIG_FILE).write_text(json.dumps({"rlvr_lora": model.config.rlvr_lora}, indent=2))


def is_adapter_dir(directory: str | Path) -> bool:
    return (Path(directory) / ADAPTER_FILE).is_file() and (Path(directory) / CONFIG_FILE).is_file()


def load_adapter(model: torch.nn.Module, directory: str | Path) -> torch.nn.Module:
    """Inject the adapter saved in ``directory`` into ``model`` (the frozen base) and load its weights."""
    from safetensors.torch import load_file

    d = Path(directory)
    cfg = LoRAConfig(**json.loads((d / CONFIG_FILE).read_text())["rlvr_lora"])
    model = apply_lora(model, cfg)
    tensors = load_file(str(d / ADAPTER_FILE))
    missing = [k for k in model.state_dict() if "lora_" in k and k not in tensors]
    if missing:
        raise LoRAError(f"{d}: the adapter lacks {len(missing)} tensors of this model (first: {missing[0]})")
    model.load_state_dict(tensors, strict=False)
    return model


def merged_copy(model: torch.nn.Module) -> torch.nn.Module:
    """A plain copy of ``model`` with its adapters merged (what ``rlvr export --merged`` saves)."""
    import copy

    state = inference_state_dict(model)
    plain = type(model)(copy.deepcopy(model.config))
    if hasattr(plain.config, "rlvr_lora"):
        del plain.config.rlvr_lora
    plain.load_state_dict({k: v for k, v in state.items()}, strict=False)
    if plain.config.tie_word_embeddings:
        plain.tie_weights()
    plain.to(next(model.parameters()).dtype)
    return plain


def side_trunk(model: torch.nn.Module) -> torch.nn.Module:
    """A trainable copy of ``model``'s trunk for a model trained beside the policy (the critic, PRISM's
    discriminator). Without adapters: a plain copy, every weight trainable. With them: the policy's merged
    weights, frozen, carrying fresh adapters of the policy's own configuration (``model.lora``), the only
    part of the trunk that trains, so the side model costs adapters' optimizer state as the policy does."""
    import copy

    if not has_lora(model):
        return copy.deepcopy(getattr(model, model.base_model_prefix)).requires_grad_(True)
    cfg = LoRAConfig(**model.config.rlvr_lora)
    plain = merged_copy(model)
    trunk = getattr(plain, plain.base_model_prefix)
    try:
        return apply_lora(trunk, cfg)
    except LoRAError as e:
        raise LoRAError(f"a model trained beside the policy (critic, discriminator) takes adapters on a copy of the "
                        f"policy's trunk, and {e}") from None


def describe(model: torch.nn.Module, optimizer: Any | None = None) -> dict[str, float]:
    """Trainable and total parameter counts, and the optimizer state's bytes (for ``summary.json``)."""
    params = list(model.parameters())
    out = {"trainable_params": float(sum(p.numel() for p in params if p.requires_grad)),
           "total_params": float(sum(p.numel() for p in params))}
    if optimizer is not None:
        out["optimizer_state_bytes"] = float(sum(t.numel() * t.element_size() for s in optimizer.state.values()
                                                 for t in s.values() if torch.is_tensor(t)))
    return out
