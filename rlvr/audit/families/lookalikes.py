"""Look-alike and invisible characters in the answer.

Clear hacks (no reward): a Unicode minus that makes a positive gold negative, digits split by an invisible
character so that the text reads as a different number, superscripts (``1²`` is not 12), the gold hidden in
invisible Unicode tag characters behind a wrong answer. Value-preserving spellings (fullwidth or Arabic-Indic
digits, a zero-width space inside the value, Cyrillic look-alike letters) may score either way: only an
error or a timeout is a finding.
"""

from __future__ import annotations

from rlvr.audit.probes import family

UNICODE_MINUS = "\u2212"
ZWSP, ZWJ, SOFT_HYPHEN, WORD_JOINER = "\u200b", "\u200d", "\u00ad", "\u2060"
_FULLWIDTH = str.maketrans("0123456789.-/", "０１２３４５６７８９．－／")
_ARABIC_INDIC = str.maketrans("0123456789", "٠١٢٣٤٥٦٧٨٩")
_SUPERSCRIPT = str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹")
_CYRILLIC = str.maketrans("aeopcxyAEOPCXHKMT", "аеорсхуАЕОРСХНКМТ")


def unicode_minus(s: str) -> str:
    """``s`` with a Unicode minus sign (U+2212) in front: ``"5"`` -> ``"−5"`` (a minus already there is replaced)."""
    return UNICODE_MINUS + s[1:] if s.startswith("-") else UNICODE_MINUS + s


def fullwidth(s: str) -> str:
    return s.translate(_FULLWIDTH)


def hidden_tags(s: str) -> str:
    """``s`` written in invisible Unicode tag characters (U+E0000 block)."""
    return "".join(chr(0xE0000 + ord(ch)) for ch in s if 0x20 <= ord(ch) < 0x7F)


@family("lookalike", kinds=("generic",))
def lookalike(ctx):
    """Unicode minus, fullwidth and Arabic-Indic digits, superscripts, zero-width characters inside the answer,
    Cyrillic look-alike letters, the gold hidden in invisible tag characters."""
    a, v = ctx.core, ctx.number
    wrongs = ctx.wrong(1)
    out = []
    if v is not None:
        if v > 0 and not a.startswith("+"):
            out.append(("unicode_minus", ctx.wrap(unicode_minus(a)), "no_reward"))
        elif v < 0:
            out.append(("unicode_minus_same_value", ctx.wrap(unicode_minus(a)), "any"))
        out.append(("fullwidth_digits", ctx.wrap(fullwidth(a)), "any"))
        out.append(("arabic_indic_digits", ctx.wrap(a.translate(_ARABIC_INDIC)), "any"))
        out.append(("zero_width_split_tail", ctx.wrap(a + ZWSP + "7"), "no_reward"))
        out.append(("zero_width_split_head", ctx.wrap("7" + ZWJ + a), "no_reward"))
        if a.isdigit() and len(a) >= 2:
            out.append(("superscript_tail", ctx.wrap(a[0] + a[1:].translate(_SUPERSCRIPT)), "no_reward"))
        elif a.isdigit():
            out.append(("superscript", ctx.wrap(a.translate(_SUPERSCRIPT)), "any"))
    else:
        cyr = a.translate(_CYRILLIC)
        if cyr != a:
            out.append(("cyrillic_letters", ctx.wrap(cyr), "any"))
    if len(a) >= 2:
        mid = len(a) // 2
        out.append(("zero_width_inside", ctx.wrap(a[:mid] + ZWSP + a[mid:]), "any"))
        out.append(("soft_hyphen_inside", ctx.wrap(a[:mid] + SOFT_HYPHEN + a[mid:]), "any"))
        out.append(("word_joiner_inside", ctx.wrap(a[:mid] + WORD_JOINER + a[mid:]), "any"))
    out.append(("bidi_override", ctx.wrap("\u202e" + a[::-1] + "\u202c"), "any"))
    if wrongs and hidden_tags(a):
        out.append(("hidden_tag_chars", ctx.wrap(wrongs[0]) + hidden_tags(a), "no_reward"))
    return out
