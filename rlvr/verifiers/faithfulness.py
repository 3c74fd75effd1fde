"""Rule-based FGRPO constraint checks: ``consistency`` and ``grounding`` of a completion's reasoning.

FGRPO (Kancheti et al. 2026, arXiv:2604.08476; the ``fgrpo`` reward transform) constrains two qualities of
the chain of thought, scored in the paper by a judge model. Where no judge is available these verifiers
score them by rules, each in [0, 1], as the score components ``consistency`` and ``grounding`` that the
transform's ``constraints`` name. A task adds them with weight 0 (they change no reward; the transform
reads them): ``shapes``, ``vla_scenes`` and ``jsonl`` / ``dataset`` take ``faithfulness: true``; in Python,
``[WeightedVerifier(v, 0.0) for v in faithfulness_checks()]``. RECONSTRUCTED: the rules are ours.

**Reasoning and final answer** (:func:`split_reasoning`): ``<think>R</think>A`` gives reasoning R and answer
A (the inside of an ``<answer>``/``<output>`` block in A when there is one); without a think block, ``... the
answer is A`` gives the text before the last "answer is" (or "answer:") and A. An unclosed ``<think>`` is
reasoning without an answer; a bare answer (or an empty think block) is no reasoning.

**consistency**: the reasoning's stated answer equals the final answer, compared as the gold answer's kind:
JSON (box or list) values compared structurally, numbers numerically, other text case- and space-folded.
The reasoning's stated answer is the last value following a conclusion marker ("=", "answer is", "so",
"therefore", "thus", "hence", "total") or, without one, the reasoning's last value of that kind (text
answers need a marker). The final number is read as the ``numeric`` verifier reads it (the segment if it
is a number, else its last number). 1 when equal, 0 when not, and by parameter:

- ``no_reasoning`` (1.0): no reasoning at all. Nothing contradicts the answer, and the constraint counts
  contradictions, as the paper's "inconsistency rate" does; require reasoning with a format reward, or set 0;
- ``no_value`` (1.0): reasoning that states no value of the answer's kind (nothing to contradict either);
- ``no_answer`` (0.0): reasoning but no final answer of that kind (unclosed think block, nothing after it).

**grounding**: the fraction of the reasoning's distinct checkable visual claims that are true of the
example's scene. A *scene reader* finds and checks the claims; :data:`SCENE_READERS` maps an
``Example.meta`` field to its reader, and the first field present in the meta picks it (parameter
``reader`` forces one). A reader is ``(reasoning, meta) -> [(claim, true?), ...]``, one pair per claim it
could check; :func:`register_scene_reader` adds one (e.g. for a data file's own scene field). Claims are
deduplicated by their normalised text, so repeating a true claim does not hide a false one. No reasoning, no
reader for the meta, or no checkable claim gives ``no_claims`` (1.0: nothing false was said, the same
reading as ``no_reasoning``; 0 makes the constraint ask for checkable claims). Readers here:

- ``layout`` (the ``shapes`` task: ``[[cell, colour, kind], ...]``): "2 red", "2 red discs", "3 shapes",
  "1 square", "no green", "red: 2" (exact counts; digits or number words), "a blue disc" (at least one);
- ``objects`` (the ``vla_scenes`` task: ``[[colour, x0, y0, x1, y1], ...]`` plus ``gripper`` ``[x, y]``):
  "red left of the gripper" / "red is above" (block centre against the gripper's centre, image y down),
  "red right of blue" (against that block's centre), "3 blocks", "no green", and every other colour named
  (such a block exists).

Colour words come from :data:`COLOURS` (wider than any palette, so a claim about an absent colour is
checked and false). Work is bounded: only the first ``MAX_CHARS`` characters are read.
"""

from __future__ import annotations

import json
import re
from fractions import Fraction
from typing import Any, Callable, Mapping

from pydantic import Field

from rlvr.core.types import Example, Score
from rlvr.registry import Params
from rlvr.verifiers.base import VERIFIERS, BaseVerifier
from rlvr.verifiers.numeric import _NUM, extract_answer, parse_number

__all__ = ["ConsistencyParams", "ConsistencyVerifier", "GroundingParams", "GroundingVerifier", "SCENE_READERS",
           "SceneReader", "register_scene_reader", "split_reasoning", "faithfulness_checks", "COLOURS",
           "read_layout", "read_tabletop"]

MAX_CHARS = 20_000
COLOURS = ("red", "green", "blue", "yellow", "white", "purple", "orange", "cyan", "black", "brown", "pink",
           "grey", "gray", "magenta")
SceneReader = Callable[[str, Mapping[str, Any]], list[tuple[str, bool]]]

_FINAL_TAG = re.compile(r"<(answer|output)>(.*?)(?:</\1>|$)", re.S | re.I)
_ANSWER_IS = re.compile(r"\banswer\s*(?:is\b|:)\s*", re.I)
_MARKER = r"(?:=|\banswer\s*(?:is\b|:)|\bso\b|\btherefore\b|\bthus\b|\bhence\b|\btotal(?:\s+is)?\b)"
_CONCLUDED_NUM = re.compile(_MARKER + r"\s*:?\s*(" + _NUM.pattern + r")", re.I)
_CONCLUDED_TEXT = re.compile(_MARKER + r"\s*([^.;,\n]+)", re.I)


def split_reasoning(text: str) -> tuple[str | None, str | None]:
    """``(reasoning, final answer)`` of a completion, each None when absent or blank (see the module doc)."""
    text = text[:MAX_CHARS]
    low = text.lower()
    close, open_ = low.rfind("</think>"), low.find("<think>")
    if close >= 0:
        start = open_ + len("<think>") if 0 <= open_ < close else 0
        reasoning, final = text[start:close], text[close + len("</think>"):]
    elif open_ >= 0:
        return text[open_ + len("<think>"):].strip() or None, None
    else:
        marks = list(_ANSWER_IS.finditer(text))
        if not marks:
            reasoning, final = "", text
        else:
            reasoning, final = text[:marks[-1].start()], text[marks[-1].end():]
    m = _FINAL_TAG.search(final)
    if m:
        final = m.group(2)
    return reasoning.strip() or None, final.strip() or None


# --- consistency ----------------------------------------------------------------------------------------

def _json_values(text: str, last: bool, tries: int = 64) -> Any:
    """The first (or last) outermost JSON object or array in ``text`` that parses, or None; at most ``tries``
    opening brackets are tried (from the end for the last: the value ending last, the earliest start)."""
    starts = [i for i, ch in enumerate(text) if ch in "[{"]
    dec = json.JSONDecoder()
    best = None  # (end, -start, value)
    for i in (starts[::-1] if last else starts)[:tries]:
        try:
            value, end = dec.raw_decode(text, i)
        except (ValueError, RecursionError):
            continue
        if not last:
            return value
        if best is None or (end, -i) > best[:2]:
            best = (end, -i, value)
    return None if best is None else best[2]


def _same(a: Any, b: Any) -> bool:
    """Structural equality with numbers compared numerically (1 == 1.0; booleans only equal booleans)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return abs(float(a) - float(b)) <= 1e-9 * max(1.0, abs(float(a)))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


def _fold(s: str) -> str:
    return " ".join(re.sub(r"[^\w\s.\-/]", " ", s.lower()).split()).strip(". ")


def _kind(gold: str | None, final: str | None) -> str:
    """The answer's kind from the gold answer's final part (else the completion's): json, number or text."""
    for s in (gold, final):
        if not s:
            continue
        part = split_reasoning(s)[1]
        if not part:
            continue
        if part[0] in "[{" and _json_values(part, last=False, tries=1) is not None:
            return "json"
        if parse_number(part) is not None:
            return "number"
        return "text"
    return "text"


def _stated(reasoning: str, kind: str) -> Any:
    """The reasoning's stated answer of ``kind``, or None."""
    if kind == "json":
        return _json_values(reasoning, last=True)
    if kind == "number":
        found = [parse_number(m.group(1)) for m in _CONCLUDED_NUM.finditer(reasoning)]
        found = [v for v in found if v is not None] or [v for v in map(parse_number, _NUM.findall(reasoning))
                                                         if v is not None]
        return found[-1] if found else None
    found = [_fold(m.group(1)) for m in _CONCLUDED_TEXT.finditer(reasoning)]
    found = [f for f in found if f]
    return found[-1] if found else None


def _final_value(final: str, kind: str) -> Any:
    if kind == "json":
        return _json_values(final, last=False)
    if kind == "number":
        cand = extract_answer(final)
        return parse_number(cand) if cand is not None else None
    return _fold(final) or None


def _show(v: Any) -> str:
    return str(v) if isinstance(v, Fraction) else json.dumps(v)[:80]


class ConsistencyParams(Params):
    no_reasoning: float = Field(1.0, ge=0.0, le=1.0, description="score of a completion without reasoning")
    no_value: float = Field(1.0, ge=0.0, le=1.0, description="score when the reasoning states no value of the "
                                                             "answer's kind")
    no_answer: float = Field(0.0, ge=0.0, le=1.0, description="score of reasoning without a final answer")


class ConsistencyVerifier(BaseVerifier):
    """1 when the reasoning's stated answer equals the final answer (see the module doc)."""

    name = "consistency"

    def __init__(self, p: ConsistencyParams | None = None):
        self.p = p or ConsistencyParams()

    def _out(self, value: float, reason: str, **info: str) -> Score:
        return Score(value, {"consistency": value}, {"reason": reason, **info})

    def score(self, example: Example, text: str) -> Score:
        reasoning, final = split_reasoning(text)
        if reasoning is None:
            return self._out(self.p.no_reasoning, "no reasoning")
        kind = _kind(example.answer, final)
        stated = _stated(reasoning, kind)
        if stated is None:
            return self._out(self.p.no_value, f"the reasoning states no {kind} answer")
        got = _final_value(final, kind) if final is not None else None
        if got is None:
            return self._out(self.p.no_answer, f"no final {kind} answer")
        ok = _same(stated, got) if kind == "json" else stated == got
        return self._out(float(ok), "consistent" if ok else "the reasoning states another answer",
                         stated=_show(stated), final=_show(got))

    def validation_cases(self):
        ex = Example("consistency-1", "<image>shapes?", "3")
        return [(ex, "<think>2 red 1 blue, total 3</think>3", 1.0), (ex, "<think>2+2=4</think>3", 0.0),
                (ex, "3", self.p.no_reasoning), (ex, "<think>so it is 3", self.p.no_answer)]


# --- grounding --------------------------------------------------------------------------------------------

_WORDS = {"no": 0, "zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
          "eight": 8, "nine": 9, "ten": 10}
_COL = "|".join(COLOURS)
_N = r"((?<!\d)\d+|\b(?:" + "|".join(_WORDS) + r"|an?)\b)"
_SHAPE_COUNT = re.compile(_N + r"\s*(?:\b(" + _COL + r")\b\s*)?(\b(?:squares?|discs?|circles?|dots?|shapes?|"
                          r"objects?)\b)?", re.I)
_COLOUR_IS = re.compile(r"\b(" + _COL + r")\s*[:=]\s*(\d+)", re.I)
_KINDS = {"square": "square", "disc": "disc", "circle": "disc", "dot": "disc"}
_POSITION = re.compile(r"\b(" + _COL + r")\b(?:\s+(?:block|cube|object|one))?(?:\s+is)?(?:\s+to\s+the)?\s+"
                       r"(left|right|above|below|over|under|beneath)\b(?:\s+of)?(?:\s+the)?"
                       r"(?:\s+(" + _COL + r")\b(?:\s+(?:block|cube|object|one))?|\s+gripper\b)?", re.I)
_BLOCK_COUNT = re.compile(_N + r"\s*(\b(?:" + _COL + r")\s+)?\b(blocks?|cubes?|objects?)\b", re.I)
_NO_COLOUR = re.compile(r"\bno\s+(" + _COL + r")\b", re.I)
_COLOUR = re.compile(r"\b(" + _COL + r")\b", re.I)


def _count_word(tok: str) -> int | None:
    """A claimed count (None for "a"/"an": at least one); more than six digits is no scene's count: -1."""
    tok = tok.lower()
    if tok.isdigit():
        return int(tok) if len(tok) <= 6 else -1
    return None if tok in ("a", "an") else _WORDS[tok]


def _holds(n: int | None, count: int) -> bool:
    return count >= 1 if n is None else count == n


def read_layout(reasoning: str, meta: Mapping[str, Any]) -> list[tuple[str, bool]]:
    """Count and existence claims about coloured squares and discs, checked against ``meta["layout"]``."""
    shapes = [(str(s[1]).lower(), str(s[2]).lower()) for s in meta["layout"] if isinstance(s, (list, tuple))
              and len(s) >= 3]
    out = []
    for m in _SHAPE_COUNT.finditer(reasoning):
        tok, colour, kind = m.group(1), (m.group(2) or "").lower() or None, (m.group(3) or "").lower()
        if colour is None and not kind:
            continue
        want = _KINDS.get(kind.rstrip("s"))
        n = _count_word(tok)
        count = sum(1 for c, k in shapes if colour in (None, c) and want in (None, k))
        label = " ".join(w for w in (tok.lower(), colour, want or (None if colour else "shapes")) if w)
        out.append((label, _holds(n, count)))
    for m in _COLOUR_IS.finditer(reasoning):
        colour, n = m.group(1).lower(), _count_word(m.group(2))
        out.append((f"{m.group(2)} {colour}", _holds(n, sum(1 for c, _ in shapes if c == colour))))
    return out


def _centre(b) -> tuple[float, float]:
    return (float(b[1]) + float(b[3]) + 1) / 2, (float(b[2]) + float(b[4]) + 1) / 2


_SIDES = {"left": (0, -1), "right": (0, 1), "above": (1, -1), "over": (1, -1), "below": (1, 1),
          "under": (1, 1), "beneath": (1, 1)}  # (axis, sign): x grows rightwards, y downwards
_SIDE_NAMES = {"over": "above", "under": "below", "beneath": "below"}


def _mark(used: bytearray, m: re.Match) -> None:
    used[m.start():m.end()] = b"\x01" * (m.end() - m.start())


def read_tabletop(reasoning: str, meta: Mapping[str, Any]) -> list[tuple[str, bool]]:
    """Claims about blocks (``meta["objects"]``) and their side of the gripper (``meta["gripper"]``) or of
    another block: positions, counts, absent and present colours."""
    blocks = {str(b[0]).lower(): _centre(b) for b in meta["objects"] if isinstance(b, (list, tuple)) and len(b) >= 5}
    g = meta.get("gripper")
    grip = (float(g[0]) + 0.5, float(g[1]) + 0.5) if isinstance(g, (list, tuple)) and len(g) >= 2 else None
    out, used = [], bytearray(len(reasoning))  # used[i]: character i belongs to a claim read already
    for m in _POSITION.finditer(reasoning):
        colour, side, other = m.group(1).lower(), m.group(2).lower(), (m.group(3) or "").lower() or None
        ref = blocks.get(other) if other else grip
        axis, sign = _SIDES[side]
        ok = colour in blocks and ref is not None and sign * (blocks[colour][axis] - ref[axis]) > 0
        out.append((f"{colour} {_SIDE_NAMES.get(side, side)} {other or 'gripper'}", ok))
        _mark(used, m)
    for m in _BLOCK_COUNT.finditer(reasoning):
        colour = (m.group(2) or "").strip().lower() or None
        n = _count_word(m.group(1))
        count = len(blocks) if colour is None else int(colour in blocks)
        out.append((" ".join(w for w in (m.group(1).lower(), colour, "blocks") if w), _holds(n, count)))
        _mark(used, m)
    for m in _NO_COLOUR.finditer(reasoning):
        if not used[m.start()]:
            out.append((f"no {m.group(1).lower()}", m.group(1).lower() not in blocks))
            _mark(used, m)
    for m in _COLOUR.finditer(reasoning):
        if not used[m.start()]:
            out.append((f"{m.group(1).lower()} exists", m.group(1).lower() in blocks))
    return out


SCENE_READERS: dict[str, SceneReader] = {"layout": read_layout, "objects": read_tabletop}


def register_scene_reader(field: str, reader: SceneReader) -> None:
    """Check the claims of examples whose meta has ``field`` with ``reader(reasoning, meta) -> [(claim, bool)]``
    (replacing any reader of that field; fields registered earlier are tried first)."""
    SCENE_READERS[field] = reader


class GroundingParams(Params):
    no_claims: float = Field(1.0, ge=0.0, le=1.0, description="score when the reasoning makes no checkable claim")
    reader: str | None = Field(None, description="the scene reader (a key of SCENE_READERS; default: the first "
                                                 "whose meta field the example has)")


class GroundingVerifier(BaseVerifier):
    """The fraction of the reasoning's distinct checkable claims true of the example's scene."""

    name = "grounding"

    def __init__(self, p: GroundingParams | None = None):
        self.p = p or GroundingParams()
        if self.p.reader is not None and self.p.reader not in SCENE_READERS:
            raise ValueError(f"unknown scene reader {self.p.reader!r}; known: {sorted(SCENE_READERS)}")

    def _out(self, value: float, reason: str, **info: Any) -> Score:
        return Score(value, {"grounding": value}, {"reason": reason, **info})

    def score(self, example: Example, text: str) -> Score:
        reasoning = split_reasoning(text)[0]
        if reasoning is None:
            return self._out(self.p.no_claims, "no reasoning")
        key = self.p.reader or next((k for k in SCENE_READERS if k in example.meta), None)
        if key is None:
            return self._out(self.p.no_claims, "no scene reader for this example's meta")
        claims = dict(SCENE_READERS[key](reasoning, example.meta) or [])  # distinct claims (by their text)
        if not claims:
            return self._out(self.p.no_claims, "no checkable claim")
        true = sum(1 for ok in claims.values() if ok)
        false = [c for c, ok in claims.items() if not ok]
        return self._out(true / len(claims), f"{true} of {len(claims)} claims true",
                         **({"false_claims": "; ".join(false)[:200]} if false else {}))

    def validation_cases(self):
        ex = Example("grounding-1", "<image>shapes?", "3", meta={"layout": [[0, "red", "disc"], [5, "red", "square"],
                                                                          [9, "blue", "disc"]]})
        return [(ex, "<think>2 red 1 blue</think>3", 1.0), (ex, "<think>3 green</think>3", 0.0)]


def faithfulness_checks(consistency: ConsistencyParams | None = None,
                        grounding: GroundingParams | None = None) -> list[BaseVerifier]:
    """The two checks, for a task to add with weight 0: ``[WeightedVerifier(v, 0.0) for v in ...]``."""
    return [ConsistencyVerifier(consistency), GroundingVerifier(grounding)]


@VERIFIERS.register("consistency", ConsistencyParams)
def _consistency(p: ConsistencyParams) -> ConsistencyVerifier:
    """FGRPO consistency by rule: the reasoning's stated answer equals the final answer (1/0)."""
    return ConsistencyVerifier(p)


@VERIFIERS.register("grounding", GroundingParams)
def _grounding(p: GroundingParams) -> GroundingVerifier:
    """FGRPO grounding by rule: the fraction of the reasoning's checkable scene claims that are true."""
    return GroundingVerifier(p)
