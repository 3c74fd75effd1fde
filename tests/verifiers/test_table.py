import json
import time

import pytest

import rlvr.verifiers.table  # noqa: F401  (registers the table verifiers)
from rlvr.core.types import Example
from rlvr.verifiers import build_verifier
from rlvr.verifiers.table import (TableEMVerifier, TableF1Verifier, TableFVVerifier, TableQAVerifier,
                                  denotation_match, normalize_denotation, squad_normalize, token_f1)

WELL_FORMED = '<think>r</think>\n<answer>```json\n{"answer": ["1,234", "Paris"]}\n```</answer>'


def qa(gold):
    return Example("tq", "q", json.dumps({"answer": gold}), meta={"denotation": gold})


@pytest.mark.parametrize("name,cls", [("table_qa", TableQAVerifier), ("table_fv", TableFVVerifier),
                                      ("table_em", TableEMVerifier), ("table_f1", TableF1Verifier)])
def test_registered_and_validates(name, cls):
    v = build_verifier(name)
    assert isinstance(v, cls) and v.name == name
    v.validate()


def test_table_r1_oracles():
    """Table-R1 (arXiv:2505.23621), verified against the reference functions."""
    s = TableQAVerifier()(qa(["Paris", "1234"]), WELL_FORMED)
    assert (s.reward, s.components["format"], s.components["accuracy"]) == (2.0, 1.0, 1.0)
    s = TableQAVerifier()(qa(["1234"]), 'the result {"answer": [1234.004]}')
    assert (s.reward, s.components["format"], s.components["accuracy"]) == (1.0, 0.0, 1.0)
    s = TableQAVerifier()(qa(["Paris"]), WELL_FORMED)
    assert (s.reward, s.components["format"], s.components["accuracy"]) == (1.0, 1.0, 0.0)
    fv = Example("fv", "q", "refuted", meta={"label": "refuted"})
    assert TableFVVerifier()(fv, '<think>r</think><answer>```json\n{"answer": "refuted"}\n```</answer>').reward == 2.0


def test_gold_one_wrong_zero_without_format():
    v = TableQAVerifier(format_weight=0.0)
    assert v(qa(["Paris", "1234"]), WELL_FORMED).reward == 1.0
    assert v(qa(["Paris", "1234"]), '{"answer": ["Paris", "1235"]}').reward == 0.0
    e = qa(["Paris"])
    assert TableQAVerifier()(e, e.answer).reward == 1.0  # the bare gold JSON: accuracy 1, format 0


def test_denotation_rules():
    assert normalize_denotation(["1,234", "3.5e2", 7, "x"]) == [1234.0, 350.0, 7.0, "x"]
    assert normalize_denotation([["nested"]]) == []
    assert denotation_match([100.005], [100.0]) and not denotation_match([100.02], [100.0])
    assert denotation_match(["b", "a"], ["a", "b"]) and not denotation_match(["a", "a"], ["a", "b"])
    assert not denotation_match(["Paris"], ["paris"])  # case-sensitive, as in Table-R1
    v = TableQAVerifier(format_weight=0.0)
    assert v(qa(["a"] * 101), json.dumps({"answer": ["a"] * 101})).reward == 0.0  # > 100 items
    assert v(qa(["a"]), '{"answer": []}').reward == 0.0
    assert v(qa(["a"]), '{"answer": [{"x": 1}]}').reward == 0.0
    assert v(qa(["7"]), '{"answer": 7}').reward == 1.0  # a scalar becomes a one-element list


def test_format_check_details():
    v = TableQAVerifier()
    e = qa(["Paris"])
    fenced = '<think>r</think><answer>```json\n{"answer": ["Paris"]}\n```</answer>'
    assert v(e, fenced).components["format"] == 1.0
    assert v(e, "<think>a</think><think>b</think>" + fenced[len("<think>r</think>"):]).components["format"] == 0.0
    assert v(e, '<think>r</think><answer>{"answer": ["Paris"]}</answer>').components["format"] == 0.0  # no fence
    assert v(qa([3]), '<think>r</think><answer>```json\n{"answer": [3]}\n```</answer>').components == {
        "correct": 1.0, "format": 0.0, "accuracy": 1.0}  # non-string element fails the strict format
    assert v(e, "prefix " + fenced).components["format"] == 0.0


def test_fact_verification_labels():
    v = TableFVVerifier(format_weight=0.0)
    e = Example("fv", "q", '{"answer": "entailed"}')
    assert v(e, '{"answer": "entailed"}').reward == 1.0
    assert v(e, '{"answer": "refuted"}').reward == 0.0
    assert v(e, '{"answer": "Entailed"}').reward == 0.0
    assert v(e, "entailed").reward == 0.0


def test_squad_em_and_f1():
    assert squad_normalize("The  Eiffel-Tower!") == "eiffeltower"
    assert token_f1("Eiffel Tower in Paris", "The Eiffel Tower") == pytest.approx(2 / 3)
    e = Example("em", "q", "The Eiffel Tower")
    assert TableEMVerifier()(e, "<answer>eiffel tower</answer>").reward == 1.0
    assert TableEMVerifier()(e, "<answer>Eiffel Tower in Paris</answer>").reward == 0.0
    assert TableF1Verifier()(e, "<answer>Eiffel Tower in Paris</answer>").reward == pytest.approx(2 / 3)
    assert TableF1Verifier()(e, "<answer>Big Ben</answer>").reward == 0.0
    assert TableF1Verifier(max_answer_tokens=5)(e, "<answer>" + "eiffel tower " * 10 + "</answer>").reward == 0.0


@pytest.mark.parametrize("text", [
    '{"answer": [' * 1000 + "]" * 3000,
    '{"answer": "' * 1300,
    "<answer>" * 2000 + "```json",
    "[[" * 7000,
    "x" * 10_000_000,
    bytes(range(256)).decode("latin-1") * 10,
    '{"answer": [' + "[" * 5000 + "]" * 5000 + "]}",
])
def test_adversarial_inputs_are_fast_zeros(text):
    for v in (TableQAVerifier(), TableFVVerifier(), TableEMVerifier(), TableF1Verifier()):
        t0 = time.perf_counter()
        s = v(qa(["1"]) if v.name in ("table_qa", "table_fv") else Example("s", "q", "1"), text)
        assert time.perf_counter() - t0 < 2.0
        assert s.reward == 0.0 and "verifier error" not in s.info.get("reason", ""), (v.name, s)
