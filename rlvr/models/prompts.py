"""Prompts as token ids: text through the tokenizer, chat messages through its template, image prompts through
the vision processor it carries. Shared by the engines, the rollout wrappers, SFT and the prompt-length checks."""

from __future__ import annotations

from dataclasses import replace
from typing import Callable

from rlvr.core.types import Example
from rlvr.core.vision import VisionInputs
from rlvr.models.vision import vision_of

__all__ = ["encode_prompt", "encode_example", "example_length", "rewrite_prompt", "prompt_text"]


def encode_prompt(tokenizer, prompt: str | list[dict[str, str]], chat_template: bool = False) -> list[int]:
    """Token ids of a prompt: chat messages through the tokenizer's template, text as is."""
    if isinstance(prompt, list) or chat_template:
        msgs = prompt if isinstance(prompt, list) else [{"role": "user", "content": prompt}]
        ids = tokenizer.apply_chat_template(msgs, add_generation_prompt=True, tokenize=True)
        if isinstance(ids, dict) or hasattr(ids, "keys"):
            ids = ids["input_ids"]
        return list(ids)
    ids = tokenizer(prompt, add_special_tokens=True)["input_ids"]
    if not ids:
        raise ValueError(f"prompt {prompt!r} encodes to zero tokens")
    return list(ids)


def encode_example(tokenizer, example: Example, chat_template: bool = False) -> tuple[list[int], VisionInputs | None]:
    """Token ids of an example's prompt and, for a prompt with images, the images as the model reads them
    (through the vision processor the tokenizer carries; an error for a text-only model)."""
    if not example.images:
        return encode_prompt(tokenizer, example.prompt, chat_template), None
    vp = vision_of(tokenizer)
    if vp is None:
        raise ValueError(f"example {example.id!r} has images but the model is text-only (set model.path to a "
                         "vision-language model, or model.tiny.arch: qwen2_vl)")
    return vp.encode(example.prompt, example.images, chat_template)


def example_length(tokenizer, example: Example, chat_template: bool = False) -> int:
    """``len(encode_example(...)[0])``, without processing the images' pixels."""
    if not example.images:
        return len(encode_prompt(tokenizer, example.prompt, chat_template))
    vp = vision_of(tokenizer)
    if vp is None:
        encode_example(tokenizer, example, chat_template)  # the text-only model's error
    return vp.prompt_length(example.prompt, example.images, chat_template)


def rewrite_prompt(ex: Example, rewrite: Callable[[str], str]) -> Example:
    """``ex`` with ``rewrite`` applied to its prompt text, or to the content of its last chat message."""
    if isinstance(ex.prompt, list):
        msgs = [dict(m) for m in ex.prompt]
        msgs[-1]["content"] = rewrite(msgs[-1]["content"])
        return replace(ex, prompt=msgs)
    return replace(ex, prompt=rewrite(ex.prompt))


def prompt_text(prompt: str | list[dict[str, str]]) -> str:
    """A prompt as plain text for another model to read (a judge, an annotator): a conversation's messages as
    ``role: content`` lines."""
    if isinstance(prompt, list):
        return "\n".join(f"{m.get('role', 'user')}: {m.get('content', '')}" if isinstance(m, dict) else str(m)
                         for m in prompt)
    return str(prompt)
