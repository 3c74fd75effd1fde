"""Unicode look-alikes in model output: one canonical ASCII spelling, or a character that never parses.

Pure standard library (the worker processes and the other verifiers load it without sympy or torch). A
policy that writes ``−5`` (U+2212), ``１２`` or ``10²`` must be read as the same number as ``-5``, ``12``
and ``10^2``, and never as a different one: a minus sign that is dropped turns -5 into +5, a superscript
that is dropped turns 100 into 10. :func:`fold` (linear time; pure-ASCII text is returned unchanged) makes
these decisions, applied alike to gold and completion:

- invisible format characters are removed (Unicode category Cf: zero-width space, joiners, word joiner,
  BOM, soft hyphen, bidi controls, tag characters; also variation selectors and the combining grapheme
  joiner), so ``1<U+200B>000`` reads as it displays, 1000; blank look-alikes (braille blank, Hangul
  fillers) are spaces;
- a no-break, thin, narrow no-break, figure, punctuation or hair space between digits followed by a group
  of exactly three digits is a thousands separator (``1 000 000`` is 10^6, as ``1\\,000`` is); any other
  Unicode space is a space (an ASCII space is never a thousands separator: ``1 000`` stays two numbers);
- minus look-alikes (U+2212 minus sign, U+2012 figure dash, U+2010/U+2011 hyphens, U+FE63 small and
  U+FF0D fullwidth hyphen-minus, U+02D7, U+2796) are ``-``; every other dash of Unicode (category Pd: en
  dash, em dash, horizontal bar, other scripts' hyphens) is ``-`` where it is a sign (directly before a
  number, not after a value: ``–5``, ``= —3``, ``(–2)``), and ``" -- "`` elsewhere: between two values it is
  a range (``3–5``, which the hedging rules reject), and with a space after it, or doubled, it is
  punctuation; so no dash ever turns -5 into 5; the wave dashes (U+301C, U+3030) are ``~`` ("about");
- digits of every script (fullwidth, Arabic-Indic, Devanagari, mathematical bold, ...; Unicode Nd) are ASCII
  digits, with the Arabic decimal and thousands separators (U+066B, U+066C) as ``.`` and ``,``;
- superscripts are a power and subscripts an index: ``10²`` is ``10^{2}`` (100, never 102 or 10), ``x⁻¹``
  is ``x^{-1}``, ``1011₂`` is ``1011_{2}``;
- vulgar fractions are fractions: ``½`` is ``\\frac{1}{2}``, ``2½`` is ``2\\frac{1}{2}`` (5/2), and the
  fraction slash U+2044 is ``/``;
- everything else goes through NFKC (fullwidth ``＄１２`` is ``$12``, ``①`` is 1, ``…`` is ``...``);
- a combining mark left on an ASCII character after that (``5̶``: a struck-through 5) becomes U+FFFD,
  which no parser reads: such an answer is rejected, never read without its mark.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["fold", "visible", "REJECT", "INVISIBLE", "SEPARATORS", "BLANKS"]

REJECT = "\ufffd"
# Blank look-alikes that are not whitespace to Python: braille blank, Hangul fillers.
BLANKS = "\u2800\u3164\u115f\u1160\uffa0"
# Invisible characters: category Cf (the ranges of Unicode 15), variation selectors, combining grapheme joiner.
_CF = ("\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064"
       "\u2066-\u206f\ufeff\ufff9-\ufffb\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3"
       "\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f")
INVISIBLE = re.compile(f"[{_CF}\u034f\ufe00-\ufe0f\U000e0100-\U000e01ef]")
_BLANK = re.compile(f"[{BLANKS}]")
# Invisible characters that separate words (zero-width space, word joiner, BOM, Mongolian vowel separator),
# and the blank look-alikes: words joined by them are separate words (format and length rewards).
SEPARATORS = re.compile(f"[\u200b\u2060\ufeff\u180e{BLANKS}]")
_THOUSANDS = re.compile(r"(?<=\d)[\u00a0\u2009\u202f\u2007\u2008\u200a](?=\d{3}(?!\d))")
_SUPER = dict(zip("⁰¹²³⁴⁵⁶⁷⁸⁹⁺⁻⁼⁽⁾ⁿⁱ", "0123456789+-=()ni"))
_SUB = dict(zip("₀₁₂₃₄₅₆₇₈₉₊₋₌₍₎", "0123456789+-=()"))
_SUPER_RUN = re.compile(f"[{''.join(_SUPER)}]+")
_SUB_RUN = re.compile(f"[{''.join(_SUB)}]+")
_VULGAR_CHARS = "\u00bc\u00bd\u00be\u2150-\u215e\u2189"
_VULGAR = re.compile(f"[{_VULGAR_CHARS}]")
_MINUS = dict.fromkeys(map(ord, "\u2212\u2012\u2010\u2011\u02d7\u2796\ufe63\uff0d"), "-")
# The other dashes of Unicode (category Pd): en dash, em dash, horizontal bar, two- and three-em dashes,
# and the hyphens of other scripts (NFKC has made U+FE31/U+FE32/U+FE58 em and en dashes)
_DASHES = ("\u2013\u2014\u2015\u2e3a\u2e3b\u058a\u05be\u1400\u1806\u2e17\u2e1a\u2e40\u2e5d\u30a0"
           "\U00010ead")
_DASH = re.compile(f"[{_DASHES}]+")
# A value just before: a digit, a closing bracket, !, %, or a one-letter variable (not the end of a word).
_VALUE_BEFORE = re.compile(r"(?:[0-9)\]}!%]|(?<![A-Za-z\\])[A-Za-z])[ \t]*$")
_VALUE_AFTER = re.compile(r"[ \t]*[-+]?[0-9.(\\A-Za-z]")
_COMBINING = re.compile(r"(?<=[\x00-\x7f])[\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f]+")


class _Digits(dict):
    """``str.translate`` table: any decimal digit (Nd) to its ASCII digit, filled lazily."""

    def __missing__(self, cp: int):
        c = chr(cp)
        value = unicodedata.decimal(c, None) if cp > 127 else None
        out = str(value) if value is not None else cp
        self[cp] = out
        return out


_DIGITS = _Digits({0x066B: ".", 0x066C: ",", 0x066A: "%", 0x2044: "/", 0x301C: "~", 0x3030: "~", **_MINUS})


def _vulgar(m: re.Match) -> str:
    num, _, den = unicodedata.normalize("NFKC", m.group()).partition("\u2044")
    return f"\\frac{{{num or 1}}}{{{den or 1}}}"


def _dash(m: re.Match, text: str) -> str:
    """A sign, a range or punctuation, by what is around the dash (see the module docstring)."""
    start, end = m.span()
    before = text[max(0, start - 40):start]
    after = text[end:end + 1]
    if _VALUE_BEFORE.search(before) and _VALUE_AFTER.match(text, end):
        return " -- "  # between two values: a range (3–5), or subtraction typed as a dash: never a sign
    if end - start == 1 and after and (after.isdigit() or after in ".(\\"):
        return "-"
    return " -- "


def fold(text: str) -> str:
    """``text`` with the look-alikes of the module docstring replaced; pure ASCII is returned as is."""
    if text.isascii():
        return text
    text = INVISIBLE.sub("", text)
    text = _BLANK.sub(" ", text)
    text = _THOUSANDS.sub("", text)
    text = _SUPER_RUN.sub(lambda m: "^{" + "".join(_SUPER[c] for c in m.group()) + "}", text)
    text = _SUB_RUN.sub(lambda m: "_{" + "".join(_SUB[c] for c in m.group()) + "}", text)
    text = _VULGAR.sub(_vulgar, text)
    text = unicodedata.normalize("NFKC", text)
    text = text.translate(_DIGITS)
    if _DASH.search(text):
        text = _DASH.sub(lambda m: _dash(m, text), text)
    return _COMBINING.sub(REJECT, text)


def visible(text: str) -> str:
    """``text`` as words go: invisible separators (:data:`SEPARATORS`) become spaces, other invisible
    characters are removed; pure ASCII is returned as is. Unlike :func:`fold`, nothing else changes."""
    if text.isascii():
        return text
    return INVISIBLE.sub("", SEPARATORS.sub(" ", text))
