"""Image prompts for the ``vllm`` engine: Qwen2-VL-family models served with rlvr's own image inputs.

What vLLM (0.32) needs, and what rlvr gives it instead of transformers' ``Qwen2VLProcessor``:

- **The model class without torchvision.** ``vllm/model_executor/models/qwen2_vl.py`` imports
  ``smart_resize`` from ``transformers.models.qwen2_vl.image_processing_qwen2_vl``, which imports
  ``torchvision`` (absent beside a CPU torch, see ``docs/vision.md``). Without torchvision rlvr registers that
  module name as the PIL backend's module (``image_processing_pil_qwen2_vl``: the same ``smart_resize``).
  vLLM inspects model classes in a subprocess, which would not see that alias, so rlvr registers a subclass
  of vLLM's own class *object* under the architecture's name (``ModelRegistry.register_model``), which vLLM
  inspects in-process. The model code (vision tower, M-RoPE, weight mapping) is vLLM's, unchanged.
- **Processed images, not pictures.** The engine sends each image prompt as
  ``{"prompt_token_ids": ids, "multi_modal_data": {"image": {"pixel_values": ..., "image_grid_thw": ...}}}``
  where ``ids`` are :func:`rlvr.models.prompts.encode_example`'s with each image's run of placeholders cut back
  to *one* ``<|image_pad|>`` (:func:`collapse_placeholders`) and the tensors are the prompt's
  :class:`~rlvr.core.vision.VisionInputs`, exactly what the trainer's forward reads. vLLM's Qwen2-VL parser
  takes a dict only as precomputed ``image_embeds``; rlvr's parser subclass declares ``pixel_values`` as the
  dict's values (``embedding_fields``), so the dict goes through vLLM's pass-through path (no HF processor
  call; ``enable_mm_embeds=True`` admits dict inputs) and the vision tower runs inside vLLM. vLLM expands each
  placeholder to ``t * h * w / merge**2`` tokens (its ``PromptReplacement``), the rule rlvr's encoder follows;
  the engine checks that the expanded ids vLLM reports equal ``encode_example``'s. The patches are already
  rescaled and normalised, so the engine turns vLLM's on-device normalisation off
  (``mm_device_do_normalize=False``; Qwen2-VL's default is on, and it would normalise them a second time).
- **Weight sync.** ``reload_weights`` goes through the model's ``load_weights``, whose ``hf_to_vllm_mapper``
  renames transformers' names (``model.visual.*`` -> ``visual.*``, ``model.language_model.*`` ->
  ``language_model.model.*``, ``lm_head.*`` -> ``language_model.lm_head.*``), so the vision tower is pushed
  with the rest; the engine also resets vLLM's encoder cache (image features of the old tower).
- **A processor for start-up.** vLLM sizes its encoder budget and profiles with dummy images through
  ``get_hf_processor()`` (``image_token``, ``video_token``, ``image_processor``, a call on images). rlvr's
  processing-info subclass returns :class:`_ImageProcessorOnly`: the model directory's
  ``preprocessor_config.json`` read by the PIL image processor, with the image tokens from the config. Videos
  are not offered (``get_supported_mm_limits``: images only).

The registration is process-wide (vLLM's registries are) and made once, by the first ``vllm`` engine built
for a VLM. Checked on vLLM 0.32's CPU build with the tiny ``qwen2_vl`` (``tests/test_vllm_engine.py``) and a
tiny ``qwen2_5_vl`` built by hand (window attention included): log-probs equal the trainer's to 1e-6.
Text-only models and text-only prompts of a VLM go through the engine unchanged.
"""

from __future__ import annotations

import importlib
import importlib.util
import math
import sys
import types
from functools import lru_cache

__all__ = ["VLLM_VLM_ARCHS", "Suppression", "collapse_placeholders", "register_vllm_vlms", "vllm_image_prompt"]

# model_type -> (architecture, vLLM module, prefix of its processing-info / processor / dummy-builder classes)
VLLM_VLM_ARCHS = {
    "qwen2_vl": ("Qwen2VLForConditionalGeneration", "qwen2_vl", "Qwen2VL"),
    "qwen2_5_vl": ("Qwen2_5_VLForConditionalGeneration", "qwen2_5_vl", "Qwen2_5_VL"),
}
_TV_FREE = "transformers.models.qwen2_vl.image_processing_qwen2_vl"
_registered: set[str] = set()


def _alias_torchvision_image_processor() -> None:
    """Without torchvision, ``image_processing_qwen2_vl`` (imported by vLLM's model file) is the PIL module."""
    if _TV_FREE in sys.modules or importlib.util.find_spec("torchvision") is not None:
        return
    from transformers.models.qwen2_vl import image_processing_pil_qwen2_vl as pil

    alias = types.ModuleType(_TV_FREE, "rlvr: the PIL backend of Qwen2-VL's image processor (no torchvision)")
    alias.smart_resize = pil.smart_resize
    alias.Qwen2VLImageProcessor = pil.Qwen2VLImageProcessorPil
    sys.modules[_TV_FREE] = alias


@lru_cache(maxsize=8)
def _image_processor(directory: str):
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    return Qwen2VLImageProcessorPil.from_pretrained(directory, local_files_only=True)


class _ImageProcessorOnly:
    """What vLLM's Qwen2-VL processing reads from ``Qwen2VLProcessor``, built without a video processor."""

    def __init__(self, info):
        from transformers.processing_utils import ProcessingKwargs

        self.valid_processor_kwargs = ProcessingKwargs  # the kwarg scopes vLLM routes processor options into
        cfg = info.get_hf_config()
        tok = info.get_tokenizer()
        self.image_processor = _image_processor(info.ctx.model_config.model)
        self.image_token = tok.convert_ids_to_tokens(cfg.image_token_id)
        self.video_token = tok.convert_ids_to_tokens(cfg.video_token_id)

    def __call__(self, images=None, text=None, videos=None, return_tensors="pt", **kwargs):
        from transformers import BatchFeature

        if text is not None or videos:
            raise ValueError("rlvr's vLLM processor takes images only (the prompt arrives as token ids)")
        known = getattr(getattr(self.image_processor, "valid_kwargs", None), "__annotations__", {})
        options = {k: v for k, v in kwargs.items() if k in known}  # e.g. do_normalize=False for device normalising
        return BatchFeature(dict(self.image_processor(images=images, return_tensors=return_tensors, **options)))


def register_vllm_vlms() -> None:
    """Register rlvr's subclasses of vLLM's Qwen2-VL-family models (idempotent; imports vLLM)."""
    _alias_torchvision_image_processor()
    from vllm import ModelRegistry
    from vllm.model_executor.models.qwen2_vl import Qwen2VLMultiModalDataParser
    from vllm.multimodal import MULTIMODAL_REGISTRY

    class Parser(Qwen2VLMultiModalDataParser):
        # a dict of an image's processed patches and grid, as rlvr's encoder made them
        embedding_fields = {"image": {"pixel_values": "values", "image_grid_thw": "metadata"}}  # noqa: RUF012

    for arch, module, prefix in VLLM_VLM_ARCHS.values():
        if arch in _registered:
            continue
        mod = importlib.import_module(f"vllm.model_executor.models.{module}")
        base_info, base_proc = getattr(mod, f"{prefix}ProcessingInfo"), getattr(mod, f"{prefix}MultiModalProcessor")
        dummy = getattr(mod, f"{prefix}DummyInputsBuilder")

        class Info(base_info):
            def get_hf_processor(self, **kwargs):
                return _ImageProcessorOnly(self)

            def get_image_processor(self, **kwargs):
                return _image_processor(self.ctx.model_config.model)

            def get_supported_mm_limits(self):
                return {"image": None}

            def get_mm_max_tokens_per_item(self, seq_len, mm_counts):
                return {"image": self.get_max_image_tokens()}

            def get_data_parser(self):
                return Parser(self.get_hf_config().vision_config.spatial_merge_size,
                              allow_missing_mm_embeddings=self.allow_missing_mm_embeddings)

        model_cls = MULTIMODAL_REGISTRY.register_processor(base_proc, info=Info, dummy_inputs=dummy)(
            type(f"Rlvr{arch}", (getattr(mod, arch),), {"__module__": __name__}))
        ModelRegistry.register_model(arch, model_cls)
        _registered.add(arch)


def collapse_placeholders(ids: list[int], vision, image_token_id: int, merge_size: int) -> list[int]:
    """``ids`` (rlvr's encoding: image ``k``'s placeholder repeated once per merged patch) with each image's
    run cut back to the single placeholder vLLM expands itself."""
    per_image = (vision.image_grid_thw.prod(-1) // merge_size ** 2).tolist()
    out, i, k = [], 0, 0
    while i < len(ids):
        if ids[i] == image_token_id and k < len(per_image):
            out.append(image_token_id)
            i += int(per_image[k])
            k += 1
        else:
            out.append(ids[i])
            i += 1
    return out


def vllm_image_prompt(ids: list[int], extra: list[int], vision, vp) -> dict:
    """vLLM's prompt for an image prompt (``ids`` as :func:`rlvr.models.prompts.encode_example` made them,
    then ``extra`` tokens, a prefix): the prompt's own patches and grids, one placeholder per image."""
    collapsed = collapse_placeholders(ids, vision, vp.image_token_id, vp.merge_size)
    return {"prompt_token_ids": collapsed + list(extra),
            "multi_modal_data": {"image": {"pixel_values": vision.pixel_values,
                                           "image_grid_thw": vision.image_grid_thw}}}


class Suppression:
    """A VLM's image tokens, never sampled: vLLM gives them probability 0 and renormalises the rest, as the
    trainer's ``output_head`` does (its logits of them are ``SUPPRESSED_LOGIT``, ``exp`` of which is 0).

    They go in as ``bad_words`` (vLLM sets a one-token bad word's logit to ``-inf`` before temperature, so
    ``processed_logprobs`` are of the renormalised distribution) when vLLM's tokenizer turns each token's text
    back into that one token, else as ``allowed_token_ids`` (every other id: exact too, but a vocabulary-sized
    list per request). ``raw_logprobs`` (top-p < 1 at T = 1) are taken before any masking, so then the
    suppressed tokens' own raw log-probs are asked for too (``logprob_token_ids``) and the sampled token's is
    renormalised: ``lp - log(1 - sum p_suppressed)``."""

    def __init__(self, ids: list[int], vllm_tokenizer, vocab_size: int, raw: bool):
        self.ids, self.raw = [int(i) for i in ids], raw
        texts = vllm_tokenizer.convert_ids_to_tokens(self.ids) if self.ids else []
        single = all(list(vllm_tokenizer.encode(t, add_special_tokens=False)) == [i] for t, i in zip(texts, self.ids))
        self.kwargs: dict = {}
        if self.ids and single:
            self.kwargs["bad_words"] = list(texts)
        elif self.ids:
            banned = set(self.ids)
            self.kwargs["allowed_token_ids"] = [t for t in range(vocab_size) if t not in banned]
        if self.ids and raw:
            self.kwargs.update(logprob_token_ids=list(self.ids), logprobs=len(self.ids))

    def logprob(self, position: dict, token: int) -> float:
        """The sampled token's behaviour log-prob from one position of vLLM's ``logprobs``."""
        lp = position[token].logprob
        if self.raw and self.ids:
            mass = sum(math.exp(position[i].logprob) for i in self.ids if i in position)
            lp -= math.log1p(-min(mass, 1.0 - 1e-12))
        return lp
