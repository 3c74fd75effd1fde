"""The math verifier: extraction, hedging rules, the pure-Python fast path, then the worker pool.

For each ``(gold, completion)`` pair, in order (the first step that decides wins):

1. extract the final answer (:mod:`.extract`; the gold goes through the same extraction, so a GSM8K
   solution ending in ``#### 72`` or a MATH solution with a ``\\boxed{}`` works as gold);
2. zero for no answer, an unfinished ``<think>``, an answer over ``max_answer_chars``, a hedge
   (:func:`.extract.hedge_reason`), or bracket nesting deeper than 25 ("too complex": such answers only
   cost time, and a worker would spend its whole deadline on some of them);
3. normalise both (:mod:`.normalize`); identical strings are equal, and two plain numbers (``1,234``,
   ``-3.5``) compare as fractions at once;
4. text answers (the gold is words such as "Monday", or a choice letter "(C)") compare as case-folded
   strings and never reach sympy;
5. the exact fast path (:mod:`.fastpath`), retried once with trailing unit words removed ("18 dollars");
6. everything else goes to the worker pool (:mod:`.pool`, :mod:`.symbolic`) with a hard deadline
   (``timeout_s``, 1 s by default: no pair costs more; one that reaches it scores 0, reason "timeout").

A completion that gives its answer more than once (two boxes whose equality takes sympy, an answer
restated after the box) scores 1 only when every one of them equals the gold.

Policies (docs/verifiers.md, *Math: answer formats and look-alikes*; each is tested in
``tests/verifiers/test_math_redteam.py``):

- look-alike characters are folded before anything else (:mod:`.chars`): a Unicode minus or a dash before a
  number is a minus (never dropped: ``−5`` is -5, not 5), other scripts' digits are digits, ``10²`` is 100,
  ``½`` is 1/2, zero-width characters are removed, a thin or no-break space between digit groups separates
  thousands; a character that cannot be read (a struck-through digit) makes the answer 0;
- units: a currency sign (``$12``, ``\\$12``), unit text (``\\text{ cm}^2``) and trailing unit words
  (``12 cm^2``, ``60km/h``, ``12 m``, "18 dollars") are dropped; degrees (``30^\\circ``) equal the bare
  number and are not converted to radians; letters written onto a number that are not a unit abbreviation
  (``5xy``, ``5m``) are a product of variables, never a unit;
- percent: when one side ends in ``%`` (or "percent") and the other does not, ``p%`` equals ``p`` and
  ``p/100`` (``12%`` matches 12 and 0.12: datasets store a percentage both ways); when both do, the values
  must be equal;
- number words: zero to twenty, as the whole answer (``three``, ``\\text{Three}``); larger numbers only in
  digits;
- retraction: the answer is the last committed one (the last marker, anchor or final statement); prose before
  it may change its mind, anything after it that takes it back, hedges or states another value scores 0, and
  a final statement that retracts ("5. No wait, actually 6.") states no answer (0);
- multiple choice (a gold ``A``-``J`` or ``(B)``): the letter is read from a marker, an anchor ("Answer: B"),
  ``(B)``, ``B)``, ``**B**``, "option B", "The correct option is B.", "I choose B", "B is correct"; the
  option's text may follow the letter; naming a second letter scores 0;
- hacks that score 0: several different answers (boxes, ``####`` lines, ``<answer>`` blocks, a list "5, 6"
  or "5 or 6"), hedges and bounds, a completion ending in a list of numbers, numbers side by side (``1 5``),
  two minus signs in a row, a decimal comma for one value (``5,5``), an answer marker inside the answer, text
  addressed to the grader ("Correct! reward=1", ``reward = 1``), words where a number is expected, and
  empty or whitespace-only (or invisible-only) completions.

``info["reason"]`` says why: "equal", "not equal", "no answer", "gold has no answer", "hedged: ...",
"answer too long", "too complex", "unparsable", "undecidable" (equal only as far as a 40-digit float can
tell, e.g. ``10^{10^6}`` and ``10^{10^6}+1``), "too large" (``9^{9^{9^9}}``), "timeout", "worker crashed",
"worker unavailable"; ``MathVerifier.counts`` counts every reason returned (timeouts included);
``info["path"]`` says which step decided (extract, string, fast, symbolic, math-verify, ...) and
``info["extracted"]`` holds the answer span (first 200 characters).
Worker verdicts (except timeouts and errors) are cached per verifier, since a group of completions often
repeats an answer.
"""

from __future__ import annotations

import importlib.util
import re
import threading
from collections import Counter, OrderedDict
from fractions import Fraction
from typing import Iterable, Literal

from pydantic import Field

from rlvr.core.types import Example, Score
from rlvr.registry import Params
from rlvr.verifiers.base import BaseVerifier

from .extract import extract_answer, hedge_reason
from .fastpath import fast_equal, parse_exact, percent_match
from .guards import malformed_reason
from .normalize import MATH_WORDS, is_plain_number, nesting_depth, normalize, strip_unit_words
from .pool import WorkerPool
from .statement import choice_span

__all__ = ["MathParams", "MathVerifier", "MAX_NESTING", "decide_span"]

MAX_NESTING = 25
MAX_INNER_BOXES = 4  # boxes nested inside the answer's box (5 deep in all) are unwrapped; deeper is "too complex"
_CACHE_SIZE = 4096
_CHOICE = re.compile(r"\(?([A-Ja-j])\)?")
# A choice letter followed by the option's text: "(C) 42", "C. 42", "C: $\frac12$".
# The text must not continue an expression: "C + 1" is not option C.
_CHOICE_TEXT = re.compile(r"(?:\(([A-Ja-j])\)|([A-J])(?:[.:)]|(?=\s)))\s*"
                          r"(?P<rest>(?![-+*/^=<>|]|\\(?:cdot|times|div|pm|mp)(?![a-zA-Z]))\S.*)", re.DOTALL)
_OTHER_LETTER = re.compile(r"(?<![A-Za-z\\])[A-J](?![A-Za-z])")
_DOUBT_TEXT = re.compile(r"\b(?:not|no|unsure|sure|maybe|perhaps|possibly|probably|or|actually|wrong|either"
                         r"|guess)\b", re.IGNORECASE)
_VERDICTS = ("symbolic", "math-verify")
_SECOND_ANSWER = "hedged: another answer in the completion differs"
_TEXTY = re.compile(r"[A-Za-z][A-Za-z '\-]*[A-Za-z]")

class MathParams(Params):
    """Parameters of the ``math`` verifier."""

    timeout_s: float = Field(1.0, gt=0, le=60, description="hard deadline per symbolic comparison (a pair "
                             "that reaches it scores 0 with reason 'timeout')")
    workers: int = Field(2, ge=1, le=32, description="worker processes for symbolic comparisons")
    max_answer_chars: int = Field(500, ge=1, le=10_000, description="longer extracted answers score 0")
    backend: Literal["auto", "sympy", "math_verify"] = Field(
        "auto", description="auto: our sympy parser, math-verify for what it cannot parse")
    memory_mb: int = Field(4096, ge=0, description="address-space limit per worker (0: none)")


def _is_text(s: str) -> bool:
    if s.lower() in ("yes", "no"):
        return True
    return bool(_TEXTY.fullmatch(s)) and not set(re.findall(r"[a-zA-Z]+", s.lower())) <= MATH_WORDS \
        and len(max(re.findall(r"[A-Za-z]+", s), key=len)) >= 3


def _text_equal(gold: str, pred: str) -> bool | None:
    """Verdict for a choice letter or a word answer; None when the gold is neither."""
    m = _CHOICE.fullmatch(gold)
    if m and (gold.startswith("(") or gold.isupper()):
        pred = pred.replace("option", "").replace("Option", "").strip()
        pred = choice_span(pred) or pred  # "I choose B", "the option is (B) 42"
        pm = _CHOICE.fullmatch(pred)
        if pm:
            return pm.group(1).upper() == m.group(1).upper()
        pm = _CHOICE_TEXT.fullmatch(pred)
        if not pm or _OTHER_LETTER.search(pm.group("rest")) or _DOUBT_TEXT.search(pm.group("rest")):
            return False
        return (pm.group(1) or pm.group(2)).upper() == m.group(1).upper()
    if _is_text(gold):
        return " ".join(pred.casefold().split()) == " ".join(gold.casefold().split())
    return None


class _Job(tuple):
    """``(first worker job key, extracted answer)``; ``keys`` holds every job key of the completion (its
    other answers too), all of which must come back equal."""

    def __new__(cls, keys: list[tuple], extracted: str, first_is_main: bool = True):
        job = super().__new__(cls, (keys[0], extracted))
        job.keys, job.first_is_main = keys, first_is_main
        return job


def _score(ok: bool, reason: str, path: str, extracted: str | None) -> Score:
    info = {"reason": reason, "path": path}
    if extracted is not None:
        info["extracted"] = extracted[:200]
    return Score(float(ok), {"correct": float(ok)}, info)


class MathVerifier(BaseVerifier):
    """Math answers, exact where possible and symbolic otherwise; see the module docstring."""

    name = "math"

    def __init__(self, timeout_s: float = 1.0, workers: int = 2, max_answer_chars: int = 500,
                 backend: str = "auto", memory_mb: int = 4096):
        if backend == "math_verify" and importlib.util.find_spec("math_verify") is None:
            raise ValueError("backend 'math_verify' needs the optional extra: "
                             "pip install 'math-verify[antlr4_13_2]'")
        self.timeout_s, self.workers, self.max_answer_chars = timeout_s, workers, max_answer_chars
        self.backend, self.memory_mb = backend, memory_mb
        self._pool: WorkerPool | None = None
        self._cache: OrderedDict[tuple, tuple[bool, str]] = OrderedDict()
        self.counts: Counter[str] = Counter()  # reasons of every Score returned ("timeout", "undecidable", ...)
        self._lock = threading.Lock()

    # -- public API -----------------------------------------------------------------------------------

    def score(self, example: Example, text: str) -> Score:
        return self.verify_many([(example.answer, text)])[0]

    def verify(self, gold: str, completion: str) -> Score:
        """Score one completion against a gold answer (or a gold solution to extract it from)."""
        return self.verify_many([(gold, completion)])[0]

    def verify_many(self, pairs: Iterable[tuple[str, str]]) -> list[Score]:
        """Score ``(gold, completion)`` pairs: fast path here, the rest in parallel in the workers."""
        prepared = [self._prepare(g, c) for g, c in pairs]
        keys = list(dict.fromkeys(k for p in prepared if isinstance(p, _Job) for k in p.keys))
        with self._lock:
            known = {k: self._cache[k] for k in keys if k in self._cache}
        todo = [k for k in keys if k not in known]
        if todo:
            requests = [{"gold": k[0], "gpct": k[1], "pred": k[2], "ppct": k[3]} for k in todo]
            try:
                replies = self._get_pool().run(requests)
            except Exception:  # e.g. no process could be started: score 0, never raise into training
                replies = [{"ok": False, "how": "worker unavailable"}] * len(todo)
            for k, r in zip(todo, replies):
                known[k] = (r["ok"], r["how"])
                if r["how"] in ("symbolic", "math-verify", "unparsable", "undecidable", "too large"):
                    self._remember(k, known[k])
        out = []
        for p in prepared:
            if not isinstance(p, Score):
                p = self._combine([known[k] for k in p.keys], p[1], p.first_is_main)
            with self._lock:
                self.counts[p.info["reason"]] += 1
            out.append(p)
        return out

    def _combine(self, verdicts: list[tuple[bool, str]], extracted: str, first_is_main: bool) -> Score:
        """One Score from the worker verdicts of a completion's answers (all must be equal to the gold)."""
        for i, (ok, how) in enumerate(verdicts):
            if not ok:
                main = i == 0 and first_is_main
                reason = ("not equal" if main else _SECOND_ANSWER) if how in _VERDICTS else how
                return _score(False, reason, how, extracted)
        return _score(True, "equal", verdicts[0][1], extracted)

    def close(self) -> None:
        """Stop the worker processes (they also stop when this object is collected or the process exits)."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()

    def validation_cases(self):
        half = Example("math-frac", "Half of one, as a fraction?", "\\frac{1}{2}")
        surd = Example("math-surd", "sin(pi/4)?", "\\frac{\\sqrt{2}}{2}")
        gsm = Example("math-gsm", "How many?", "Natalia sold 48 + 24 = 72 clips.\n#### 72")
        return [(half, "The answer is $0.5$.", 1.0), (half, "\\boxed{\\frac{2}{4}}", 1.0),
                (half, "\\boxed{0.6}", 0.0), (half, "\\boxed{1} or \\boxed{\\frac12}", 0.0),
                (surd, "So $\\boxed{\\frac{1}{\\sqrt{2}}}$", 1.0), (surd, "\\boxed{\\sqrt{2}}", 0.0),
                (gsm, "48 + 24 = 72\n#### 72", 1.0), (gsm, "The answer is 72 or 73.", 0.0)]

    # -- internals ------------------------------------------------------------------------------------

    def _get_pool(self) -> WorkerPool:
        with self._lock:
            if self._pool is None:
                self._pool = WorkerPool(self.workers, self.timeout_s, self.backend, self.memory_mb)
            return self._pool

    def _remember(self, key: tuple, value: tuple[bool, str]) -> None:
        with self._lock:
            self._cache[key] = value
            if len(self._cache) > _CACHE_SIZE:
                self._cache.popitem(last=False)

    def _prepare(self, gold: object, completion: object) -> Score | _Job:
        """A decided Score, or the worker jobs of the symbolic path."""
        try:
            return self._decide(gold, completion)
        except Exception as e:  # odd input must score 0 with a reason, never raise into training
            return _score(False, f"verifier error: {type(e).__name__}", "error", None)

    def _decide(self, gold: object, completion: object) -> Score | _Job:
        if not isinstance(gold, str) or not isinstance(completion, str):
            return _score(False, "not text", "extract", None)
        g, p = extract_answer(gold, is_gold=True), extract_answer(completion)
        if g.span is None:
            return _score(False, "gold has no answer", "extract", None)
        if p.span is None:
            return _score(False, "no answer", "extract", None)
        if p.hedge:
            return _score(False, p.hedge, "extract", p.span)
        first = self._decide_span(g.span, p.span)
        if isinstance(first, Score) and not first.reward:
            return first
        keys = [] if isinstance(first, Score) else [first]
        for other in p.others:  # every answer the completion gives must be the gold's
            got = self._decide_span(g.span, other)
            if isinstance(got, Score) and not got.reward:
                return _score(False, _SECOND_ANSWER, "extract", p.span)
            if not isinstance(got, Score):
                keys.append(got)
        return _Job(keys, p.span, not isinstance(first, Score)) if keys else first

    def _decide_span(self, gold: str, span: str) -> Score | tuple:
        return decide_span(gold, span, self.max_answer_chars)


def decide_span(gold: str, span: str, max_answer_chars: int = 500) -> Score | tuple:
    """One answer span against the gold's, in this process: a decided Score, or the worker job key
    ``(gold, gold percent, answer, answer percent)`` when only the symbolic path can tell."""
    if len(span) > max_answer_chars or len(gold) > max_answer_chars:
        return _score(False, "answer too long", "extract", span[:200])
    if span.count("\\boxed") + span.count("\\fbox") > MAX_INNER_BOXES:
        return _score(False, "too complex", "extract", span[:200])  # \boxed{\boxed{\boxed{...}}}
    (gn, gpct), (pn, ppct) = normalize(gold), normalize(span)
    if not pn:
        return _score(False, "no answer", "extract", span)
    if is_plain_number(pn) and is_plain_number(gn):  # the common GSM8K case, decided in microseconds
        ok = percent_match(Fraction(gn.replace(",", "")), gpct, Fraction(pn.replace(",", "")), ppct,
                           lambda a, b: a == b)
        return _score(ok, "equal" if ok else "not equal", "fast", span)
    hedge = hedge_reason(pn, gn) or malformed_reason(pn, gn)
    if hedge:
        return _score(False, hedge, "extract", span)
    if max(nesting_depth(pn), nesting_depth(gn)) > MAX_NESTING:
        return _score(False, "too complex", "extract", span)
    if pn == gn and gpct == ppct:
        return _score(True, "equal", "string", span)
    verdict = _text_equal(gn, pn)
    if verdict is None and _is_text(pn) and parse_exact(gn) is not None:
        verdict = False  # words ("correct", "the gold answer") never equal a number
    if verdict is None and not pn.isascii():  # math-verify would drop what it cannot read
        return _score(False, "unparsable", "extract", span)
    if verdict is None:
        verdict = fast_equal(gn, gpct, pn, ppct)
    if verdict is None and (strip_unit_words(pn) != pn or strip_unit_words(gn) != gn):
        pn, gn = strip_unit_words(pn), strip_unit_words(gn)
        verdict = fast_equal(gn, gpct, pn, ppct)
    if verdict is not None:
        return _score(verdict, "equal" if verdict else "not equal", "fast", span)
    return gn, gpct, pn, ppct
