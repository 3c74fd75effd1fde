"""Format and length rewards, plus the tag helpers the task-family verifiers share.

``format`` (:class:`FormatVerifier`): 1 when the completion has the required structure, else 0. By default
that is ``<think>...</think>`` followed by ``<answer>...</answer>`` (the R1 / TinyZero / Table-R1 layout):
the whole stripped completion must match ``pattern`` (DOTALL) and each required tag must open and close
exactly once, in the listed order, around non-empty content. Keep this reward small or use it as a gate:
*Spurious Rewards* (Shao et al. 2025, arXiv 2506.10947) measured a format-only reward lifting
Qwen2.5-Math-7B by +16.4 pp, so format credit alone can look like learning.

``length`` (:class:`LengthVerifier`): a reward for hitting a length ``L`` (characters or whitespace words):

- ``linear``: ``r = max(0, 1 - |L - target| / tolerance)`` (peaks at the target; tolerance defaults to it);
- ``soft``:   ``r = 1`` for ``L <= target``, ``1 - (L - target) / slack`` up to ``target + slack``, 0 beyond:
  DAPO's soft overlong punishment (arXiv 2503.14476; docs/methods.md, DAPO's sampling and shaping) with
  ``L_max = target + slack`` and ``L_cache = slack``, shifted from ``[-1, 0]`` to ``[0, 1]``.

Invisible characters cannot game either reward (docs/verifiers.md, *Format and length: invisible
characters*): a zero-width space, word joiner or BOM (U+200B, U+2060, U+FEFF, U+180E) and the blank
look-alikes (braille blank, Hangul fillers) separate words as a space does, so 500 words joined by them are
500 words; other invisible format characters (Unicode Cf: joiners, soft hyphens, bidi and tag characters)
are not text. Since any invisible character can join words (a soft hyphen, a joiner) or split one visible
word into many, the length reward is the smaller of the rewards for the two readings (every invisible
character a separator and counted, or every one removed with its words joined); text without them scores as
before. The format reward requires visible content in each tag (an ``<answer>`` holding only a zero-width
space is empty) and ignores invisible characters around the tags.

A per-prompt budget ``meta["target_length"]`` overrides ``target`` (length-controlled training). Token
lengths belong to the trainer's own overlong shaping (``rlvr.algorithms.shaping``); this one sees text only.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field

from rlvr.core.types import Example, Score
from rlvr.registry import Params
from rlvr.verifiers.base import VERIFIERS, BaseVerifier
from rlvr.verifiers.math.chars import INVISIBLE, SEPARATORS, visible

__all__ = ["extract_tag", "last_line", "tags_well_formed", "FormatVerifier", "FormatParams", "LengthVerifier",
           "LengthParams", "text_length", "length_reward", "visible", "THINK_ANSWER"]

THINK_ANSWER = r"<think>.*?</think>\s*<answer>.*?</answer>"
MAX_FORMAT_CHARS = 200_000  # longer completions are scored 0 rather than scanned



def extract_tag(text: str, tag: str, last: bool = True) -> str | None:
    """Content of the last (or first) complete ``<tag>...</tag>`` block, stripped; None when there is none."""
    open_t, close_t = f"<{tag}>", f"</{tag}>"
    if last:
        end = text.rfind(close_t)
        start = text.rfind(open_t, 0, end) if end >= 0 else -1
    else:
        start = text.find(open_t)
        end = text.find(close_t, start + len(open_t)) if start >= 0 else -1
    if start < 0 or end < 0:
        return None
    return text[start + len(open_t):end].strip()


def last_line(text: str) -> str | None:
    """The last non-empty line, stripped; None for blank text."""
    for line in reversed(text.splitlines()):
        if line.strip():
            return line.strip()
    return None


def tags_well_formed(text: str, tags: list[str]) -> str | None:
    """None when each tag opens and closes exactly once, in order, around non-empty text; else the reason."""
    pos = 0
    for tag in tags:
        open_t, close_t = f"<{tag}>", f"</{tag}>"
        if text.count(open_t) != 1 or text.count(close_t) != 1:
            return f"<{tag}> must open and close exactly once"
        start, end = text.find(open_t), text.find(close_t)
        if start < pos or end < start:
            return f"<{tag}> out of order"
        if not visible(text[start + len(open_t):end]).strip():
            return f"<{tag}> is empty"
        pos = end + len(close_t)
    return None


class FormatVerifier(BaseVerifier):
    """1 when the completion matches ``pattern`` and the required tags are well formed, else 0."""

    name = "format"

    def __init__(self, pattern: str = THINK_ANSWER, tags: tuple[str, ...] = ("think", "answer")):
        self.pattern, self.tags = re.compile(pattern, re.DOTALL), list(tags)

    def score(self, example: Example, text: str) -> Score:
        if len(text) > MAX_FORMAT_CHARS:
            return Score(0.0, {"correct": 0.0}, {"reason": "completion too long"})
        stripped = visible(text).strip()
        if not self.pattern.fullmatch(stripped):
            return Score(0.0, {"correct": 0.0}, {"reason": "does not match the format pattern"})
        bad = tags_well_formed(stripped, self.tags)
        if bad:
            return Score(0.0, {"correct": 0.0}, {"reason": bad})
        return Score(1.0, {"correct": 1.0})

    def validation_cases(self):
        ex = Example("format-1", "q", "<think>x</think><answer>4</answer>")
        return [(ex, "<think>2+2</think>\n<answer>4</answer>", 1.0), (ex, "4", 0.0),
                (ex, "<answer>4</answer><think>late</think>", 0.0), (ex, "<think>a</think><answer></answer>", 0.0),
                (ex, "<think><think>a</think><answer>4</answer></think><answer>4</answer>", 0.0)]


class FormatParams(Params):
    pattern: str = Field(THINK_ANSWER, description="regex the whole stripped completion must match (DOTALL)")
    tags: list[str] = Field(["think", "answer"], description="tags that must each occur exactly once, in this "
                                                             "order, around non-empty text")


@VERIFIERS.register("format", FormatParams)
def _format(p: FormatParams) -> FormatVerifier:
    """Format reward: 1 iff the completion matches the pattern with each required tag exactly once."""
    re.compile(p.pattern)
    return FormatVerifier(p.pattern, tuple(p.tags))


def text_length(text: str, unit: str) -> int:
    """Length in characters or whitespace-separated words; invisible separators (zero-width space, word
    joiner, BOM, blank look-alikes) separate words, and other invisible characters count for nothing."""
    if unit == "chars":
        return len(INVISIBLE.sub("", text)) if not text.isascii() else len(text)
    return len(visible(text).split())


def _readings(text: str, unit: str) -> set[int]:
    """The lengths of the two readings of text with invisible characters: every one of them a separator
    (and, for characters, counted), or every one removed (the words it splits or joins are one word)."""
    if text.isascii():
        return {text_length(text, unit)}
    joined = INVISIBLE.sub("", SEPARATORS.sub("", text))
    if unit == "chars":
        return {len(text), len(joined)}
    apart = INVISIBLE.sub(" ", SEPARATORS.sub(" ", text))
    return {len(apart.split()), len(joined.split())}


def length_reward(length: int, target: int, mode: str, tolerance: int | None = None, slack: int | None = None
                  ) -> float:
    """The ``linear`` or ``soft`` length reward in [0, 1] (see the module docstring)."""
    if mode == "linear":
        tol = tolerance or max(target, 1)
        return max(0.0, 1.0 - abs(length - target) / tol)
    if mode == "soft":
        cache = slack or max(target // 4, 1)
        if length <= target:
            return 1.0
        return max(0.0, 1.0 - (length - target) / cache)
    raise ValueError(f"unknown length mode {mode!r}")


class LengthVerifier(BaseVerifier):
    """Reward for the completion's length relative to a target (``linear`` peak or ``soft`` cap)."""

    name = "length"

    def __init__(self, target: int, mode: str = "soft", unit: str = "words", tolerance: int | None = None,
                 slack: int | None = None):
        self.target, self.mode, self.unit, self.tolerance, self.slack = target, mode, unit, tolerance, slack

    def score(self, example: Example, text: str) -> Score:
        target = int(example.meta.get("target_length", self.target))
        n = text_length(text, self.unit)
        r = min(length_reward(k, target, self.mode, self.tolerance, self.slack) for k in _readings(text, self.unit))
        return Score(r, {"length": float(n), "correct": float(r >= 1.0)}, {"target_length": target})

    def validation_cases(self):
        ex = Example("length-1", "q", "a b c", meta={"target_length": 3})
        far = " ".join(["w"] * (3 * max(self.target, 3) + 3 + (self.slack or 0) + (self.tolerance or 0)))
        return [(ex, "a b c", 1.0), (ex, far, 0.0)]


class LengthParams(Params):
    target: int = Field(256, gt=0, description="target length (meta['target_length'] overrides it per prompt)")
    mode: Literal["linear", "soft"] = Field("soft", description="linear: peak at the target; soft: 1 up to the "
                                                                "target, then a linear ramp to 0 over `slack`")
    unit: Literal["chars", "words"] = Field("words", description="length unit")
    tolerance: int | None = Field(None, gt=0, description="linear: distance from the target at which the reward "
                                                           "reaches 0 (default: the target)")
    slack: int | None = Field(None, gt=0, description="soft: length over the target at which the reward reaches 0 "
                                                       "(default: target/4)")


@VERIFIERS.register("length", LengthParams)
def _length(p: LengthParams) -> LengthVerifier:
    """Length reward in [0,1]: linear peak at the target, or 1 up to it then a linear ramp to 0 (soft)."""
    return LengthVerifier(p.target, p.mode, p.unit, p.tolerance, p.slack)
