"""What every VLM family's prompt encoder shares: image files, the family registry, and the encoding steps.

rlvr encodes image prompts itself instead of through transformers' full processors (``AutoProcessor``), which
will not build without ``torchvision`` for several families, and whose CUDA wheels break a CPU torch. A
family's encoder (a :class:`VisionProcessor` subclass in ``rlvr.models.vlm_*``, registered by the
``model_type`` of its ``config.json``) needs only the model's image processor (``preprocessor_config.json``,
PIL backend), the tokenizer and the model's config, and reproduces the family's processor:

1. **render**: the prompt with one *image token* (the text the family's processor looks for) per image: a
   text prompt's ``<image>`` markers (images without a marker open the prompt), or a chat prompt's
   ``{"type": "image"}`` parts through the tokenizer's chat template;
2. **process**: the image processor turns the images into the family's tensors
   (:class:`~rlvr.core.vision.VisionInputs`), and the family writes each image's *expansion*: the text that
   replaces its image token, with one feature placeholder per feature the vision tower emits for it (and
   the family's delimiters: begin/end-of-image tokens, tile and row/column tokens);
3. **expand and tokenize**: the image tokens are replaced in order by the expansions and the text is
   tokenized, as the processor does (special tokens added to a text prompt; to a rendered chat prompt only
   when it does not open with the BOS token). The count of feature placeholders in the ids is checked
   against the features the images give, so a prompt always encodes to what the model consumes.

:meth:`VisionProcessor.prompt_length` computes the same length from the images' sizes alone when the family
can tell its expansion from a size (no pixels are processed), and encodes the prompt otherwise.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from rlvr.core.vision import VisionInputs

__all__ = ["VisionProcessor", "ImageError", "load_image", "image_size", "FAMILIES", "register_family",
           "IMAGE_MARKER"]

IMAGE_MARKER = "<image>"
FAMILIES: dict[str, type["VisionProcessor"]] = {}  # model_type -> encoder class


class ImageError(ValueError):
    """An image that cannot be read, or a prompt whose image placeholders do not match its images."""


def register_family(*model_types: str):
    """Class decorator: the encoder of VLMs whose ``config.json`` has one of ``model_types``."""
    def deco(cls):
        for t in model_types:
            FAMILIES[t] = cls
        return cls
    return deco


def load_image(item: Any):
    """``item`` (a PIL image, or a path to an image file) as an RGB PIL image."""
    from PIL import Image, UnidentifiedImageError

    if isinstance(item, Image.Image):
        return item.convert("RGB") if item.mode != "RGB" else item
    if isinstance(item, (str, Path)):
        path = Path(item)
        if not path.is_file():
            raise ImageError(f"image {str(path)!r} does not exist")
        try:
            with Image.open(path) as im:
                im.load()
                return im.convert("RGB")
        except (UnidentifiedImageError, OSError, ValueError) as e:
            raise ImageError(f"image {str(path)!r} cannot be read ({type(e).__name__}: {e})") from None
    raise ImageError(f"an image must be a PIL image or a file path, got {type(item).__name__}")


def image_size(item: Any) -> tuple[int, int]:
    """``(width, height)`` of an image or image file, reading only the file's header."""
    from PIL import Image, UnidentifiedImageError

    if isinstance(item, Image.Image):
        return item.size
    if isinstance(item, (str, Path)):
        if not Path(item).is_file():
            raise ImageError(f"image {str(item)!r} does not exist")
        try:
            with Image.open(item) as im:
                return im.size
        except (UnidentifiedImageError, OSError, ValueError) as e:
            raise ImageError(f"image {str(item)!r} cannot be read ({type(e).__name__}: {e})") from None
    raise ImageError(f"an image must be a PIL image or a file path, got {type(item).__name__}")


def token_text(tokenizer, token_id: int, what: str) -> str:
    """The text of the single token ``token_id`` (an error naming ``what`` when the tokenizer lacks it)."""
    text = tokenizer.convert_ids_to_tokens(int(token_id)) if token_id is not None else None
    if text is None or tokenizer.convert_tokens_to_ids(text) != int(token_id):
        raise ValueError(f"the tokenizer has no {what} token (id {token_id} in the model's config)")
    return text


def single_token_ids(tokenizer, texts: Sequence[str]) -> list[int]:
    """The ids of those ``texts`` the tokenizer holds as one token each (others are left out)."""
    out = []
    for t in texts:
        i = tokenizer.convert_tokens_to_ids(t)
        if isinstance(i, int) and i != tokenizer.unk_token_id and tokenizer.convert_ids_to_tokens(i) == t:
            out.append(i)
    return out


class VisionProcessor:
    """Encodes a prompt with images into token ids and :class:`VisionInputs` for one VLM family.

    :attr:`image_token_id` is the feature placeholder the model fills with image features
    (:attr:`feature_token` its text) and :attr:`image_token` the text each image is rendered as before
    expansion (the same token, except where the family's processor renders another). A family implements
    :meth:`process` and :meth:`forward_kwargs`; optionally :meth:`expansion_for_size` and
    :meth:`config_suppressed`."""

    family = "?"
    own_positions = False  # True: the model computes its positions itself (Qwen2-VL's M-RoPE)
    position_offset = 0  # added to the batch's positions (PaliGemma counts them from 1)
    prefix_lm = False  # True: the prompt is a bidirectional prefix, the completion causal (PaliGemma)

    def __init__(self, image_processor, tokenizer, config):
        self.image_processor, self.tokenizer, self.config = image_processor, tokenizer, config
        self.image_token_id = int(config.image_token_id)
        self.feature_token = token_text(tokenizer, self.image_token_id, "image")
        self.image_token = self.feature_token  # Gemma 3 renders its begin-of-image token instead

    @classmethod
    def for_model(cls, model_config, image_processor, tokenizer) -> "VisionProcessor":
        """The encoder of ``model_config``'s family (an error naming the supported ones otherwise)."""
        kind = getattr(model_config, "model_type", None)
        if kind not in FAMILIES:
            raise ValueError(f"rlvr reads vision-language models of the families {', '.join(sorted(FAMILIES))}; "
                             f"{kind!r} is not supported yet")
        return FAMILIES[kind](image_processor, tokenizer, model_config)

    # ---- what a family implements -------------------------------------------------------------------

    def process(self, images: list) -> tuple[VisionInputs, list[str]]:
        """The images' tensors, and each image's expansion text (RGB PIL images in, prompt order)."""
        raise NotImplementedError

    def expansion_for_size(self, width: int, height: int) -> str | None:
        """The expansion of an image of this size, or None when only processing its pixels can tell."""
        return None

    def expansions_for_sizes(self, sizes: list[tuple[int, int]]) -> list[str | None]:
        """The expansions of one prompt's images of these ``(width, height)`` sizes (LLaVA-OneVision's depend
        on how many images the prompt holds)."""
        return [self.expansion_for_size(w, h) for w, h in sizes]

    @staticmethod
    def forward_kwargs(config, input_ids, vision) -> dict:
        """The model's (or its trunk's, or ``generate``'s) keyword arguments for ``vision`` over ``input_ids``."""
        raise NotImplementedError

    @staticmethod
    def prefix_kwargs(config, input_ids, completion_start) -> dict:
        """For a :attr:`prefix_lm` family, the keyword arguments that mark the prompt as the bidirectional
        prefix and the completion (from column ``completion_start`` of each row on) as the causal suffix."""
        return {}

    @staticmethod
    def config_suppressed(config) -> list[int]:
        """Tokens never sampled that the config names (the image placeholders and their delimiters)."""
        return [int(config.image_token_id)]

    def suppressed_ids(self) -> list[int]:
        """Every token the policy never samples: :meth:`config_suppressed` and the family's tokenizer-only
        image tokens (a sampled feature placeholder would claim image features that do not exist)."""
        return sorted(set(self.config_suppressed(self.config)))

    # ---- the shared steps ---------------------------------------------------------------------------

    def render_text(self, prompt: str | list[dict], num_images: int, chat_template: bool) -> tuple[str, bool]:
        """``(text with one image token per image, whether tokenizing adds special tokens)``."""
        if isinstance(prompt, list) or chat_template:
            msgs = (prompt if isinstance(prompt, list)
                    else [{"role": "user", "content": image_parts(prompt, num_images)}])
            text = self.tokenizer.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False)
            bos = self.tokenizer.bos_token
            special = not (bos is not None and text.startswith(bos))
        else:
            marks = prompt.count(IMAGE_MARKER)
            if marks and marks != num_images:
                raise ImageError(f"the prompt has {marks} {IMAGE_MARKER} markers for {num_images} images")
            text = prompt.replace(IMAGE_MARKER, self.image_token) if marks else self.image_token * num_images + prompt
            special = True
        found = text.count(self.image_token)
        if found != num_images:
            raise ImageError(f"the rendered prompt holds {found} image placeholders for {num_images} images"
                             + (" (does the chat template render {'type': 'image'} parts?)"
                                if isinstance(prompt, list) or chat_template else ""))
        return text, special

    def _tokenize(self, text: str, special: bool, expansions: list[str]) -> list[int]:
        pieces = text.split(self.image_token)
        full = pieces[0] + "".join(e + p for e, p in zip(expansions, pieces[1:]))
        return list(self.tokenizer(full, add_special_tokens=special)["input_ids"])

    def encode(self, prompt: str | list[dict], images: Sequence[Any],
               chat_template: bool = False) -> tuple[list[int], VisionInputs | None]:
        """``(token ids, images)`` of a prompt; each image token replaced by its image's expansion."""
        text, special = self.render_text(prompt, len(images), chat_template)
        if not images:
            return list(self.tokenizer(text, add_special_tokens=special)["input_ids"]), None
        vis, expansions = self.process([load_image(im) for im in images])
        ids = self._tokenize(text, special, expansions)
        want = sum(e.count(self.feature_token) for e in expansions)
        got = sum(1 for t in ids if t == self.image_token_id)
        if got != want:
            raise ImageError(f"the prompt encodes to {got} image feature tokens for {want} image features "
                             "(does the prompt's own text hold image tokens?)")
        return ids, vis

    def prompt_length(self, prompt: str | list[dict], images: Sequence[Any], chat_template: bool = False) -> int:
        """The length of :meth:`encode`'s ids, from the images' sizes alone where the family can tell."""
        if not images:
            return len(self.encode(prompt, images, chat_template)[0])
        expansions = self.expansions_for_sizes([image_size(im) for im in images])
        if any(e is None for e in expansions):
            return len(self.encode(prompt, images, chat_template)[0])
        text, special = self.render_text(prompt, len(images), chat_template)
        return len(self._tokenize(text, special, expansions))

    def save(self, directory: str | Path) -> None:
        self.image_processor.save_pretrained(str(directory))


def image_parts(text: str, num_images: int) -> list[dict]:
    """A text prompt's content parts: ``<image>`` markers as image parts (without markers the images open
    the prompt)."""
    pieces = text.split(IMAGE_MARKER)
    if len(pieces) == 1:
        return [{"type": "image"}] * num_images + [{"type": "text", "text": text}]
    parts: list[dict] = []
    for i, piece in enumerate(pieces):
        if i:
            parts.append({"type": "image"})
        if piece:
            parts.append({"type": "text", "text": piece})
    return parts


def fixed_output_size(image_processor) -> tuple[int, int] | None:
    """``(height, width)`` every image is processed to (a center crop, or a resize to a fixed size), or None."""
    def hw(size):
        if size is None:
            return None
        get = size.get if isinstance(size, dict) else (lambda k: getattr(size, k, None))
        h, w = get("height"), get("width")
        return (int(h), int(w)) if h and w else None

    if getattr(image_processor, "do_center_crop", False) and hw(getattr(image_processor, "crop_size", None)):
        return hw(image_processor.crop_size)
    if getattr(image_processor, "do_resize", False):
        return hw(getattr(image_processor, "size", None))
    return None
