"""Invisible characters and blank look-alikes against the format and length rewards and the BLEU/ROUGE
tokenizers: text joined by zero-width spaces is not one word, a word split by them is not many, and a tag
holding only invisible characters is empty."""

import sys
import unicodedata

import pytest

from rlvr.core.types import Example
from rlvr.verifiers.format import FormatVerifier, LengthVerifier, text_length
from rlvr.verifiers.math.chars import BLANKS
from rlvr.verifiers.textmetrics import rouge_l, rouge_tokenize, sentence_bleu, tokenize_13a

E = Example("f", "q", "")
JOINERS = ["\u200b", "\u2060", "\ufeff", "\u180e"] + list(BLANKS)
INVISIBLE = [chr(c) for c in range(sys.maxunicode + 1) if unicodedata.category(chr(c)) == "Cf"]
WORDS = [f"word{i}" for i in range(60)]


@pytest.mark.parametrize("joiner", JOINERS)
def test_words_joined_by_invisible_separators_are_counted(joiner):
    text = joiner.join(WORDS)
    assert text_length(text, "words") == len(WORDS)
    soft = LengthVerifier(target=10, mode="soft", slack=10)
    assert soft(E, text).reward == 0.0 and soft(E, " ".join(WORDS)).reward == 0.0


@pytest.mark.parametrize("ch", INVISIBLE + ["\u034f", "\ufe0f"])
def test_invisible_characters_inside_words_never_lengthen_or_shorten_the_text(ch):
    """Each invisible character is read both ways (separator, or nothing); the reward is the worse one, so
    neither padding a short text up to a target nor hiding a long one under a cap pays."""
    split = " ".join(w[:2] + ch + w[2:] for w in WORDS[:5])  # 5 visible words, each split by an invisible char
    linear = LengthVerifier(target=10, mode="linear", tolerance=5)
    assert linear(E, split).reward == 0.0  # 5 words, not 10
    padded = "abcde" + ch * 95
    assert LengthVerifier(target=100, mode="linear", unit="chars", tolerance=50)(E, padded).reward <= 0.1 + 1e-9
    joined = ch.join(WORDS)
    assert LengthVerifier(target=10, mode="soft", slack=5)(E, joined).reward == 0.0


def test_plain_text_lengths_are_unchanged():
    assert text_length("a b  c\n d", "words") == 4 and text_length("a b", "chars") == 3
    assert text_length("caf\u00e9 na\u00efve", "words") == 2 and text_length("\u00e9", "chars") == 1
    assert LengthVerifier(target=3, mode="linear")(E, "a b c").reward == 1.0


@pytest.mark.parametrize("ch", INVISIBLE[:40] + JOINERS)
def test_a_tag_holding_only_invisible_characters_is_empty(ch):
    v = FormatVerifier()
    assert v(E, f"<think>w</think><answer>{ch * 3}</answer>").reward == 0.0
    assert v(E, f"<think>{ch}</think><answer>4</answer>").reward == 0.0
    assert v(E, f"<think>w</think>{ch}<answer>4</answer>{ch}").reward == 1.0  # around the tags: ignored
    assert v(E, f"{ch}<think>w</think><answer>4{ch}</answer>").reward == 1.0


def test_format_on_huge_invisible_text_is_fast():
    import time

    for text in ["\u200b" * 190_000, "<think>" + "\u2060" * 150_000 + "</think><answer>1</answer>",
                 "<answer>" + "\ufeff" * 150_000 + "</answer>"]:
        t = time.perf_counter()
        FormatVerifier()(E, text)
        LengthVerifier(target=10)(E, text)
        assert time.perf_counter() - t < 0.5


@pytest.mark.parametrize("joiner", JOINERS)
def test_bleu_and_rouge_read_invisible_separators_as_spaces(joiner):
    ref = "the cat sat on the mat"
    hyp = joiner.join(ref.split())
    assert tokenize_13a(hyp) == tokenize_13a(ref)
    assert rouge_tokenize(hyp) == rouge_tokenize(ref)
    assert sentence_bleu(hyp, ref) == pytest.approx(100.0) and rouge_l(hyp, ref) == pytest.approx(1.0)


@pytest.mark.parametrize("ch", ["\u200c", "\u200d", "\u00ad", "\u2062", "\U000e0041"])
def test_invisible_characters_inside_a_word_do_not_change_it(ch):
    ref = "the cat sat"
    hyp = f"the c{ch}at sat"
    assert tokenize_13a(hyp) == tokenize_13a(ref) and sentence_bleu(hyp, ref) == pytest.approx(100.0)
