"""How the ``choice`` verifier reads a completion: its answer statements and what each one says.

The rules are stated in :mod:`rlvr.verifiers.choice` (the verifier); this module implements them
(:func:`extract_choice`), apart so that each stays within the module size budget.
"""

from __future__ import annotations

import bisect
import re
import string
from dataclasses import dataclass
from typing import Any

from rlvr.verifiers.math.extract import boxes

__all__ = ["LETTERS", "Choice", "clean", "extract_choice", "options_of", "letters_block"]

LETTERS = string.ascii_uppercase
_SPAN = 400  # characters of a statement read (a line, a box): an answer is short, and this bounds the time
_STATEMENTS = 500  # statements read, from the last: beyond them a completion has no answer

_WRAPPERS = re.compile(r"\\(?:text|textbf|textit|mathrm|mathbf|textrm|mbox)\s*\{([^{}]*)\}")
_ANCHOR = re.compile(
    r"(?:\b(?:final\s+|correct\s+|best\s+|right\s+|my\s+)?answer(?:\s+(?:option|choice|letter))?"
    r"\s*(?:is|was|would\s+be|will\s+be|should\s+be|must\s+be|:|=|-|–|—)"
    r"|\b(?:correct|best|right|final)\s+(?:option|choice)\s*(?:is|was|would\s+be|:|=|-|–|—)"
    r"|\b(?:option|choice)\s+is"
    r"|\bI\s*(?:['’]d|['’]ll|\s+would|\s+will)?\s*(?:choose|pick|select|go\s+with)\b)"
    r"[ \t]*:?[ \t]*", re.IGNORECASE)
_CORRECT = re.compile(
    r"(?:\b(?:option|choice)\s+\(?(?P<a>[A-Za-z])\)?|\((?P<b>[A-Za-z])\)|\b(?P<c>[A-Z]))"
    r"\s+is\s+(?:the\s+)?(?:(?:correct|right)\b|best\s+(?:answer|option|choice)\b)", re.IGNORECASE)
_FILLER = re.compile(r"^(?:(?:that|definitely|clearly|indeed|therefore|thus|so|then|obviously|simply|the|"
                     r"correct|right|best|final|answer|letter)\b[\s:,-]*)+", re.IGNORECASE)
_CONNECTIVE = re.compile(r"^(?:so|thus|hence|therefore|finally|final|answer)\b[\s:,-]*", re.IGNORECASE)
_LEAD_HEDGE = re.compile(r"^(?:maybe|perhaps|possibly|probably|likely|most\s+likely|presumably|either|not|neither|"
                         r"unsure|uncertain|i\s+think|i\s+believe|i\s+guess|guess|not\s+sure)\b", re.IGNORECASE)
_HEDGE = re.compile(r"(?<![A-Za-z])(?:or|either|maybe|perhaps|possibly|probably|likely|presumably|unsure|uncertain|"
                    r"not|i\s+think|i\s+believe|i\s+guess|guess|and/or)(?![A-Za-z])", re.IGNORECASE)
_NEGATION = re.compile(r"^(?:is\s+)?(?:not|n't|never|isn't|incorrect|wrong)\b", re.IGNORECASE)
_CLAUSE_END = re.compile(r"[.!](?:\s|$)|\s[-–—]\s|[–—]|\n|\b(?:because|since|as|given|which|due\s+to|based\s+on|"
                         r"from\s+the|considering)\b", re.IGNORECASE)
_LABEL = re.compile(r"^(?:option|choice)\s*[:#]?\s*", re.IGNORECASE)
_BRACKETED = re.compile(r"^[(\[]\s*([A-Za-z])\s*[)\]]")
_PAREN_AFTER = re.compile(r"^([A-Za-z])\s*\)")
_BARE = re.compile(r"^([A-Za-z])(?![\w'’])")
_SEP = re.compile(r"^\s*[.:\-–—]?(?:\s+|$)")
_LETTER_TOKEN = re.compile(r"\(\s*[A-Za-z]\s*\)|\[\s*[A-Za-z]\s*\]|[A-Za-z]\)?")
_LIST_SEP = re.compile(r"\b(?:or|and)\b|[,/;&]", re.IGNORECASE)


def _letter_tokens(s: str) -> list[str] | None:
    """The letter tokens of ``s`` when it is nothing but letters (``A``, ``(b)``, ``C)``) and separators (``,``
    ``/`` ``;`` ``&`` "or" "and"), else ``None`` (split, not one regex: a regex with nested repeats over such
    lists takes exponential time on long ones)."""
    tokens = _LIST_SEP.sub(" ", s.strip().rstrip(".")).split()
    return tokens if tokens and all(_LETTER_TOKEN.fullmatch(t) for t in tokens) else None


@dataclass(frozen=True)
class Choice:
    """What a completion answered: ``letter`` (``None`` when it gave none or hedged), how it was found, and
    why it scores 0 when it does."""

    letter: str | None
    how: str = ""
    reason: str = ""


class _Hedge(Exception):
    """A statement that answers ambiguously: it decides the completion, and the completion scores 0."""


def clean(text: str) -> str:
    """The completion or an option text without emphasis, backticks, ``$``, ``\\(``/``\\)`` and LaTeX text
    wrappers."""
    for _ in range(3):
        new = _WRAPPERS.sub(r"\1", text)
        if new == text:
            break
        text = new
    text = text.replace("\\(", "").replace("\\)", "").replace("$", "").replace("`", "")
    return text.replace("**", "").replace("__", "").replace("*", "")


def _norm(text: str) -> str:
    """For comparing option texts: cleaned, case-folded, spaces collapsed, quotes and a final period dropped."""
    t = " ".join(clean(text).split()).casefold()
    t = t.strip("\"'“”‘’ ")
    return t[:-1].rstrip() if t.endswith(".") else t


def options_of(meta: dict[str, Any]) -> list[str]:
    """The option texts of ``meta["options"]`` in letter order (a list, or a mapping of letters to texts)."""
    opts = meta.get("options")
    if isinstance(opts, dict):
        return [str(opts[k]) for k in sorted(opts, key=lambda k: str(k).strip().upper())]
    if isinstance(opts, (list, tuple)):
        return [str(o) for o in opts]
    return []


def letters_block(options: list[str]) -> str:
    """``A) text`` lines, one per option."""
    return "\n".join(f"{LETTERS[i]}) {o}" for i, o in enumerate(options))


class _Reader:
    """Reads statements against one item's options (see the module doc)."""

    def __init__(self, options: list[str], letters: str, text_answers: bool = True):
        self.letters = letters
        self.texts = [_norm(o) for o in options] if text_answers else []

    # ---- pieces ----------------------------------------------------------------------------------------------
    def _option_prefix(self, s: str) -> tuple[int, int] | None:
        """``(option index, length of its text in s)`` of the longest option text that ``s`` starts with."""
        low = _norm_keep_len(s)
        best = None
        for i, t in enumerate(self.texts):
            if t and low.startswith(t) and (len(low) == len(t) or not low[len(t)].isalnum()):
                if best is None or len(t) > best[1]:
                    best = (i, len(t))
        if best is not None and sum(1 for t in self.texts if t == self.texts[best[0]]) > 1:
            raise _Hedge("two options have this text")
        return best

    def _exact_option(self, s: str) -> int | None:
        hits = [i for i, t in enumerate(self.texts) if t and t == _norm(s)]
        if len(hits) > 1:
            raise _Hedge("two options have this text")
        return hits[0] if hits else None

    def _other_letters(self, clause: str, own: str) -> bool:
        """Whether ``clause`` names a valid letter other than ``own`` (a capital alone, or any in brackets)."""
        for m in re.finditer(r"[(\[]\s*([A-Za-z])\s*[)\]]|(?<![\w'’])([A-Z])(?![\w'’])", clause):
            letter = (m.group(1) or m.group(2)).upper()
            if letter in self.letters and letter != own:
                return True
        return False

    def _lead_letter(self, s: str, labelled: bool) -> tuple[str, str, bool] | None:
        """``(letter, rest, explicit)`` of a letter form at the start of ``s``."""
        for pattern, explicit in ((_BRACKETED, True), (_PAREN_AFTER, True), (_BARE, labelled)):
            m = pattern.match(s)
            if m is None:
                continue
            raw = m.group(1)
            rest = s[m.end():]
            whole = not rest.strip(" .:!")
            if raw.islower() and not (explicit or whole):
                return None
            if raw.upper() not in self.letters:
                return None
            return raw.upper(), rest, explicit
        return None

    def _starts_with(self, body: str, i: int) -> bool:
        t = self.texts[i] if i < len(self.texts) else ""
        low = _norm_keep_len(body)
        return bool(t) and low.startswith(t) and (len(low) == len(t) or not low[len(t)].isalnum())

    def _after(self, letter: str, rest: str, strict: bool) -> str:
        """Check what follows a letter: its own option text may follow, another's may not; the remainder."""
        m = _SEP.match(rest)
        body = rest[m.end():] if m else rest
        if self.texts and body.strip():
            own = LETTERS.index(letter)
            if self._starts_with(body, own):
                return body[_raw_len(body, len(self.texts[own])):]
            hit = self._option_prefix(body)
            if hit is not None:
                raise _Hedge(f"letter {letter} but the text of option {LETTERS[hit[0]]}")
        return body if strict else rest

    def _checked(self, letter: str, remainder: str, strict: bool) -> str | None:
        """``letter``, unless what follows it hedges (lenient) or is more than punctuation (strict)."""
        if strict:
            rest = remainder.strip(" .!")
            if rest and _letter_tokens(rest) and self._other_letters(rest, letter):
                raise _Hedge("several letters")  # "A, B", "A or B" on the last line
            return None if rest else letter
        stripped = remainder.lstrip()
        if stripped.startswith("?"):
            raise _Hedge("asked, not answered")
        if _NEGATION.match(stripped):
            raise _Hedge("negated")
        clause = _clause(remainder)
        if self._other_letters(clause, letter):
            raise _Hedge("several letters")
        if _HEDGE.search(clause):
            raise _Hedge(f"hedged: {clause.strip()[:60]!r}")
        return letter

    def _mentioned(self, s: str) -> str | None:
        """The one valid letter the first clause of an anchor's span names ("most likely B" hedges)."""
        clause = _clause(s)
        found = {(m.group(1) or m.group(2)).upper()
                 for m in re.finditer(r"[(\[]\s*([A-Za-z])\s*[)\]]|(?<![\w'’])([A-Z])(?![\w'’])", clause)}
        found &= set(self.letters)
        if not found:
            return None
        if _HEDGE.search(clause) or len(found) > 1:
            raise _Hedge("several letters" if len(found) > 1 else f"hedged: {clause.strip()[:60]!r}")
        return found.pop()

    # ---- one statement ---------------------------------------------------------------------------------------
    def read(self, span: str, strict: bool) -> str | None:
        """The letter one statement gives, ``None`` when it gives none; raises :class:`_Hedge`."""
        s = span.strip().strip("\"'“”")
        if not s:
            return None
        exact = self._exact_option(s) if self.texts else None
        if exact is None:
            s = (_CONNECTIVE if strict else _FILLER).sub("", s.lstrip(" :,-–—")).strip()
            exact = self._exact_option(s) if self.texts and s else None
        if not s:
            return None
        labelled = bool(_LABEL.match(s))
        body = _LABEL.sub("", s, count=1) if labelled else s
        lead = self._lead_letter(body, labelled)
        if exact is not None and (lead is None or not lead[2]):
            if lead is not None and lead[0] != LETTERS[exact] and not lead[1].strip(" .:!"):
                raise _Hedge(f"{lead[0]!r} is a letter and the text of option {LETTERS[exact]}")
            return LETTERS[exact]
        if self.texts and (lead is None or not lead[2]):  # an option text may start with a bare capital
            hit = self._option_prefix(body)
            if hit is not None and (lead is None or self.texts[hit[0]] != lead[0].casefold()):
                return self._checked(LETTERS[hit[0]], body[_raw_len(body, hit[1]):], strict)
        if not strict and _LEAD_HEDGE.match(s):
            raise _Hedge(f"hedged: {s[:60]!r}")
        if lead is not None:
            letter, rest, _ = lead
            return self._checked(letter, self._after(letter, rest, strict), strict)
        tokens = _letter_tokens(s)  # "a, b": lower-case letters in a list
        if tokens and len({re.sub(r"[^A-Za-z]", "", t).upper() for t in tokens} & set(self.letters)) > 1:
            raise _Hedge("several letters")
        return None if strict else self._mentioned(s)


def _clause(s: str) -> str:
    """``s`` up to the end of its first clause."""
    cut = _CLAUSE_END.search(s)
    return s[: cut.start()] if cut else s


def _norm_keep_len(s: str) -> str:
    """``s`` case-folded with runs of spaces made one, for prefix matching against :func:`_norm` texts."""
    return " ".join(clean(s).split()).casefold().lstrip("\"'“”‘’ ")


def _raw_len(s: str, n: int) -> int:
    """How many characters of ``s`` make up the first ``n`` characters of ``_norm_keep_len(s)``."""
    lead = len(s) - len(s.lstrip("\"'“”‘’ \t"))
    seen, i, space = 0, lead, False
    while i < len(s) and seen < n:
        if s[i].isspace():
            if not space:
                seen += 1
            space = True
        else:
            seen += 1
            space = False
        i += 1
    return i


def _statements(text: str, cap: int = _SPAN) -> list[tuple[int, str, str]]:
    """``(position, kind, span)`` of every answer statement of the cleaned completion (spans cut at ``cap``)."""
    out: list[tuple[int, str, str]] = []
    for start, _, content in boxes(text):
        out.append((start, "box", content[:cap]))
    low = text.lower()
    pos = 0
    while (close := low.find("</answer>", pos)) >= 0:
        opened = low.rfind("<answer>", pos, close)
        if opened >= 0:
            out.append((opened, "box", text[opened + 8:min(close, opened + 8 + cap)]))
        pos = close + 9
    breaks = [m.start() for m in re.finditer("\n", text)] + [len(text)]
    for m in _ANCHOR.finditer(text):
        k = bisect.bisect_left(breaks, m.end())
        span = text[m.end(): min(breaks[k], m.end() + cap)]
        while not span.strip() and k + 1 < len(breaks):  # "The answer is:\n\nB": the next non-empty line
            span, k = text[breaks[k] + 1: min(breaks[k + 1], breaks[k] + 1 + cap)], k + 1
        out.append((m.start(), "anchor", span))
    for m in _CORRECT.finditer(text):
        if m.group("c") and not m.group("c").isupper():  # "a is correct": a word, not a letter
            continue
        out.append((m.start(), "correct", f"({m.group('a') or m.group('b') or m.group('c')})"))
    return out


def extract_choice(text: str, options: list[str] | None = None, letters: str | None = None,
                   text_answers: bool = True, several: str = "last") -> Choice:
    """The letter a completion answers (the rules: :mod:`rlvr.verifiers.choice`); ``several="zero"``: no letter
    when an earlier statement gives another one."""
    options = list(options or [])
    letters = letters or (LETTERS[: len(options)] if options else "ABCD")
    if "</think>" in text:
        text = text.rsplit("</think>", 1)[1]
    elif "<think>" in text:
        return Choice(None, reason="unfinished <think>")
    text = clean(text)
    reader = _Reader(options, letters, text_answers)
    cap = _SPAN + max((len(o) for o in options), default=0)
    found: list[tuple[int, str, str, bool]] = [(p, k, s, False) for p, k, s in _statements(text, cap)]
    lines = [(m.start(1), m.group(1)[:cap]) for m in re.finditer(r"[^\S\n]*(\S[^\n]*)", text)][-30:]
    if lines:
        found.append((lines[-1][0], "final line", lines[-1][1], True))
    try:
        if lines and _listed_options(reader, lines):
            raise _Hedge("several options listed at the end")
        decided: Choice | None = None
        for pos, how, span, strict in sorted(found, key=lambda f: (f[0], not f[3]), reverse=True)[:_STATEMENTS]:
            if decided is None:
                letter = reader.read(span, strict)
                if letter is not None:
                    decided = Choice(letter, how)
                    if several == "last":
                        return decided
                continue
            try:  # several="zero": an earlier statement with another letter makes the answer ambiguous
                earlier = reader.read(span, strict)
            except _Hedge:
                continue
            if earlier is not None and earlier != decided.letter:
                raise _Hedge(f"several answers: {earlier} before {decided.letter}")
        if decided is not None:
            return decided
    except _Hedge as e:
        return Choice(None, reason=str(e))
    return Choice(None, reason="no answer")


def _listed_options(reader: _Reader, lines: list[tuple[int, str]]) -> bool:
    """Whether the completion ends with two or more lines that each give a different option."""
    seen = []
    for _, line in reversed(lines):
        if not re.match(r"\s*(?:[(\[]\s*[A-Za-z]\s*[)\]]|[A-Za-z]\s*[).:]|(?:option|choice)\s+[A-Za-z]\b)", line,
                        re.IGNORECASE):
            break
        try:
            letter = reader.read(line, strict=True)
        except _Hedge:
            letter = None
        if letter is None:
            break
        seen.append(letter)
    return len(set(seen)) > 1
