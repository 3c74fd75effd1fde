"""Table QA, fact verification and free-form table answers: hedges, several answers, lists that contain the
gold, case/whitespace tricks and text around the answer never earn accuracy (docs/verifiers.md, Table QA:
hedges, lists and several answers). Each family is generated over many golds and wrong answers."""

import itertools
import json
import random

import pytest

from rlvr.core.types import Example
from rlvr.verifiers.table import (TableEMVerifier, TableF1Verifier, TableFVVerifier, TableQAVerifier, gold_label,
                                  hedge_reason)
from rlvr.verifiers.table_ff import TableFFVerifier

FV, QA = TableFVVerifier(format_weight=0.0), TableQAVerifier(format_weight=0.0)
EM, F1 = TableEMVerifier(), TableF1Verifier()
FF = TableFFVerifier(format_weight=0.0)
LABELS = ("entailed", "refuted")


def obj(v):
    return json.dumps({"answer": v})


def fenced(v):
    return f"```json\n{obj(v)}\n```"


def fv_hedges(a, b):
    """Completions stating both labels a and b, in every container the extractor reads."""
    for x, y in ((a, b), (b, a)):
        yield f"{obj(x)} or {obj(y)}"
        yield f"{obj(x)}\n{obj(y)}"
        yield f"{fenced(x)}\n{fenced(y)}"
        yield f"{fenced(x)} {obj(y)}"
        yield f"<answer>{obj(x)}{obj(y)}</answer>"
        yield f"<answer>{obj(x)}</answer><answer>{obj(y)}</answer>"
        yield f"<think>r</think><answer>{fenced(x)}</answer> also {obj(y)} <answer>{obj(y)}</answer>"
        yield f"Either {obj(x)} or, if the table is misread, {obj(y)}."


@pytest.mark.parametrize("gold", LABELS)
def test_fact_verification_hedges_score_zero(gold):
    e = Example("fv", "q", obj(gold), meta={"label": gold})
    n = 0
    for text in fv_hedges(*LABELS):
        s = FV(e, text)
        assert s.reward == 0.0 and "several" in s.info["reason"], (text, s)
        n += 1
    assert n == 16
    # a label next to an answer that is not a label is two answers as well
    for junk in ("Big Ben", "maybe", 1, ["entailed"]):
        for text in (f"so {obj(junk)}\nso {obj(gold)}", f"so {obj(gold)}. No wait, so {obj(junk)}"):
            if junk == ["entailed"] and gold == "entailed":
                continue
            assert FV(e, text).reward == 0.0, text
    # controls: one label, stated once or repeated, in the answer block or bare, scores
    for text in (obj(gold), f"so {fenced(gold)}", f"<think>maybe {obj('refuted' if gold == 'entailed' else 'entailed')}"
                 f"</think><answer>{fenced(gold)}</answer>", f"{obj(gold)} {obj(gold)}"):
        assert FV(e, text).reward == 1.0, text


def test_the_answer_block_decides_and_text_outside_it_is_not_an_answer():
    e = Example("fv", "q", "", meta={"label": "refuted"})
    for prose in ("entailed or refuted", "refuted", "I cannot tell", "", "SUPPORTED or REFUTED"):
        assert FV(e, f"<answer>{prose}</answer> {obj('refuted')}").reward == 0.0
        assert FV(e, f"{obj('refuted')} <answer>{prose}</answer>").reward == 0.0
    q = Example("qa", "q", "", meta={"denotation": ["Paris"]})
    assert QA(q, f'<answer>London</answer>{obj(["Paris"])}').reward == 0.0
    assert QA(q, f'<think>{obj(["Paris"])}</think><answer>{obj(["Paris"])}</answer>').reward == 1.0


def test_gold_labels_in_other_conventions():
    for gold, want in [(1, "entailed"), (0, "refuted"), (True, "entailed"), ("SUPPORTS", "entailed"),
                       ("Refuted", "refuted"), ("supported", "entailed"), (" REFUTES ", "refuted")]:
        assert gold_label(gold) == want
        e = Example("fv", "q", "", meta={"label": gold})
        assert FV(e, obj(want)).reward == 1.0 and FV(e, obj(LABELS[want == "entailed"])).reward == 0.0
    with pytest.raises(ValueError):
        gold_label("NOT ENOUGH INFO")


def test_table_qa_several_answer_objects_score_zero():
    rng = random.Random(0)
    words = ["Paris", "London", "1234", "7", "Rome", "3.5"]
    for _ in range(60):
        gold = rng.sample(words, rng.randint(1, 2))
        other = rng.sample([w for w in words if w not in gold], len(gold))
        e = Example("qa", "q", "", meta={"denotation": gold})
        for x, y in itertools.permutations([gold, other]):
            for text in (f"{obj(x)} {obj(y)}", f"<answer>{fenced(x)}\n{fenced(y)}</answer>",
                         f"<answer>{obj(x)}</answer>\n<answer>{obj(y)}</answer>"):
                assert QA(e, text).reward == 0.0, text
        assert QA(e, obj(gold[::-1])).reward == 1.0  # the same answer, once, in any order
        assert QA(e, f"{obj(gold)} {obj(gold[::-1])}").reward == 1.0  # repeated, not several
        assert QA(e, obj(gold + other[:1])).reward == 0.0  # a list that contains the gold


GOLDS = ["Paris", "The Eiffel Tower", "1998", "Marie Curie", "42 km"]
WRONG = ["London", "Big Ben", "1999", "Ada Lovelace", "41 km"]


def span_hedges(g, d):
    for x, y in ((g, d), (d, g)):
        yield f"{x} or {y}"
        yield f"either {x} or {y}"
        yield f"{x}/{y}"
        yield f"{x} | {y}"
        yield f"{x}, {y}"
        yield f"{x}; {y}"
        yield f"{x} and {y}"
        yield f"{x} & {y}"
        yield f"{x}\n{y}"
        yield f"{x} and/or {y}"
    yield f"maybe {g}"
    yield f"probably {g}"
    yield f"{g}?"
    yield f"{g}, {d}, {WRONG[0]}"


@pytest.mark.parametrize("g,d", list(zip(GOLDS, WRONG)))
def test_span_hedges_and_lists_score_zero(g, d):
    e = Example("em", "q", g)
    for h in span_hedges(g, d):
        for v in (EM, F1):
            s = v(e, f"<answer>{h}</answer>")
            assert s.reward == 0.0 and s.info.get("reason"), (v.name, h, s)
    for x, y in ((g, d), (d, g)):  # several answer blocks
        for v in (EM, F1):
            assert v(e, f"<answer>{x}</answer> ... <answer>{y}</answer>").reward == 0.0
    # case and whitespace variants of the gold still match (SQuAD normalisation); of a wrong answer never
    for v in (EM, F1):
        for tr in (str.upper, str.lower, lambda s: f"  {s}  ", lambda s: s.replace(" ", "\u00a0"), lambda s: s + "."):
            assert v(e, f"<answer>{tr(g)}</answer>").reward == 1.0, (v.name, tr(g))
            assert v(e, f"<answer>{tr(d)}</answer>").reward < 1.0
        assert v(e, f"<answer>{g}</answer> <answer> {g.upper()} </answer>").reward == 1.0  # the same answer twice


def test_golds_that_contain_separators_still_match_themselves():
    for g in ["Trinidad and Tobago", "Paris, France", "1,234", "either/or", "Romeo or Juliet", "Is it?"]:
        e = Example("em", "q", g)
        assert EM(e, f"<answer>{g}</answer>").reward == 1.0 and F1(e, f"<answer>{g}</answer>").reward == 1.0
        assert hedge_reason(g, [g]) is None
    e = Example("em", "q", "Paris, France")
    assert EM(e, "<answer>Paris, France; Lyon, France</answer>").reward == 0.0
    assert F1(e, "<answer>Paris, France; Lyon, France</answer>").reward == 0.0


def test_golds_that_normalise_to_nothing():
    e = Example("em", "q", "The")
    assert EM(e, "<answer>a</answer>").reward == 0.0 and F1(e, "<answer>an</answer>").reward == 0.0
    assert EM(e, "<answer>the</answer>").reward == 1.0


@pytest.mark.parametrize("ref", ["SUPPORTED", "REFUTED", "1998", "Marie Curie"])
def test_free_form_label_hedges_score_zero(ref):
    e = Example("ff", "q", ref)
    other = "REFUTED" if ref != "REFUTED" else "SUPPORTED"
    for x, y in ((ref, other), (other, ref)):
        for text in (f"{x} or {y}", obj(f"{x} or {y}"), obj([x, y]), f"{x} {y}", f"{x}/{y}", f"{x}\n{y}",
                     f"{obj(x)} {obj(y)}", f"<answer>{obj(x)}</answer><answer>{obj(y)}</answer>"):
            s = FF(e, text)
            assert s.components["accuracy"] == 0.0, (text, s)
    for text in (ref, ref.lower(), f"  {ref}. ", obj(ref), f"<answer>{fenced(ref)}</answer>"):
        assert FF(e, text).components["accuracy"] == 1.0, text


def test_free_form_sentence_hedges_score_zero_and_real_answers_keep_credit():
    ref = "Smith scored 12 goals in 1998."
    wrong = "Jones scored 10 goals in 1999."
    e = Example("ff", "q", ref)
    for text in (f"{ref[:-1]} or {wrong}", obj([ref, wrong]), obj([wrong, ref]), f"{obj(ref)} {obj(wrong)}",
                 f"{ref}\n{wrong}", f"Probably {ref}"):
        assert FF(e, text).components["accuracy"] == 0.0, text
    # text after the answer block earns nothing: the block alone decides
    assert FF(e, f"<answer>{obj(wrong)}</answer> {ref}").reward == FF(e, obj(wrong)).reward < 0.5
    assert FF(e, obj(["Smith scored 12 goals", "in 1998."])).components["accuracy"] == 1.0
    partial = FF(e, obj("Smith scored 12 goals")).components["accuracy"]
    assert 0.3 < partial < 1.0
