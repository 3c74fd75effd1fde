"""Rubric regex criteria are bounded: catastrophic patterns are refused at load, the text a regex reads is
capped, and every completion's regex criteria share one deadline (docs/verifiers.md, Rubric: bounded regex
criteria). The 99k-digit completion that took 198 s against the verifier's own rubric now takes milliseconds."""

import itertools
import json
import time

import pytest

import rlvr.verifiers.rubric as rubric_mod
from rlvr.core.types import Example
from rlvr.tasks import DataError
from rlvr.tasks.rubric_task import RubricTaskParams, rubric_task
from rlvr.verifiers.rubric import (MAX_REGEX_CHARS, RUBRIC_BUDGET_S, PolicyAwareRubric, RubricVerifier,
                                   check_pattern, parse_rubric)

ATOMS = ["a", r"\d", "[a-z]", ".", r"\w", "(?:ab)", "[^x]"]
CATASTROPHIC = ["({x}+)+", "({x}*)*", "({x}+)*", "({x}*)+", "({x}?)*", "(?:{x}+){{2,}}", "({x}+{x}+)+",
                "({x}|{x})*", "({x}|{x}b)*", "(b{x}|b)+", "({x}+b?)+$", "(|{x})+", "((?:{x}+)[^,])*",
                "(?:(?:{x})+)+y", "({x}+)+?", "((({x}+)))*", "({x}+,{x}*)+", "({x}+[^,]?)+"]
SAFE = [r"\d+\s*[*x]\s*\d+", r"\b75\s*%", "^yes$", "[a-z]", "(?:cat|dog)+", r"(\d{3},)*\d+", "(?>a+)+", "(a++)+",
        "(ab)+c", "colou?r", r"^\s*answer:\s*\w+", r"(?:\d{1,3},)+\d{3}", r"(\w+\s)+end", r"(\d+,)+\d+",
        r"((?:[a-z]+)\.)*", r"[A-Z][a-z]+ (?:Street|Road)", r"(?i)source:\s*\S+", "(a|b|c)*d", r"(?!.*sorry).*"]


@pytest.mark.parametrize("template", CATASTROPHIC)
def test_catastrophic_patterns_are_refused_at_load(template):
    for atom in ATOMS:
        pattern = template.format(x=atom)
        with pytest.raises(ValueError, match="catastrophic"):
            check_pattern(pattern)
        with pytest.raises(ValueError):
            parse_rubric([{"id": "r", "kind": "regex", "value": pattern}])


@pytest.mark.parametrize("pattern", SAFE)
def test_usual_patterns_are_accepted(pattern):
    check_pattern(pattern)
    check_pattern(pattern, "ims")


def test_other_bad_patterns_are_refused():
    for value, flags in [("a" * 1001, ""), (7, ""), ("(", ""), ("a", "x")]:
        with pytest.raises(ValueError):
            check_pattern(value, flags)


def test_the_task_refuses_a_catastrophic_rubric_at_load_naming_the_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    ok = {"prompt": "q", "rubric": [{"id": "a", "kind": "regex", "value": "[0-9]"}]}
    bad = {"prompt": "q", "rubric": [{"id": "a", "kind": "regex", "value": r"(\d+)+$"}]}
    path.write_text(json.dumps(ok) + "\n" + json.dumps(bad) + "\n")
    with pytest.raises(DataError, match=r"bad.jsonl:2: .*catastrophic"):
        rubric_task(RubricTaskParams(train_path=str(path)))


def _timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def test_the_99k_digit_completion_is_fast_against_the_verifiers_own_rubric():
    v = RubricVerifier()
    ex = v.validation_cases()[0][0]
    for n in (99_000, MAX_REGEX_CHARS, MAX_REGEX_CHARS - 10, 5_000):
        s, took = _timed(lambda: v(ex, "7" * n))
        assert took < RUBRIC_BUDGET_S + 1.0, (n, took)
        assert s.components["crit/shows_work"] == 0.0 and "verifier error" not in s.info.get("reason", "")


def test_polynomial_patterns_share_one_deadline():
    # adjacent quantifiers are polynomial, not refused: the timeout bounds them (the regex package itself
    # fails fast when a required literal is absent, so these need the literal inside a class or a repeat)
    slow = [r"\d+\s*[*x]\s*\d+", r"[0-9]+7+[0-9]+x", r"\d+\s*[x*]\s*\d+\s*=", r"7+\d+[x=]"]
    crits = [{"id": f"p{i}", "kind": "regex", "value": slow[i % len(slow)]} for i in range(12)]
    crits.append({"id": "c", "kind": "contains", "value": "7"})
    ex = Example("r", "q", "", meta={"rubric": crits})
    s, took = _timed(lambda: RubricVerifier()(ex, "7" * (MAX_REGEX_CHARS - 1)))
    assert took < 2 * RUBRIC_BUDGET_S + 0.5, took
    assert s.info["regex_timeouts"] and s.components["crit/c"] == 1.0
    group, took = _timed(lambda: PolicyAwareRubric().group_rewards(ex, ["7" * (MAX_REGEX_CHARS - 1)] * 3))
    assert took < 3 * (2 * RUBRIC_BUDGET_S + 0.5) and len(group) == 3


def test_long_completions_fail_regex_criteria_instead_of_being_cut():
    # a match beyond a cut must not flip a negative criterion: over the cap every regex criterion fails
    crits = [{"id": "polite", "kind": "regex", "value": r"^(?![\s\S]*sorry)", "flags": ""},
             {"id": "has_digit", "kind": "regex", "value": "[0-9]"}]
    ex = Example("r", "q", "", meta={"rubric": crits})
    v = RubricVerifier()
    assert v(ex, "ok 1").reward == 1.0 and v(ex, "sorry 1").components["crit/polite"] == 0.0
    padded = "1" + " " * MAX_REGEX_CHARS + "sorry"
    assert v(ex, padded).reward == 0.0


def test_without_the_regex_package_the_text_cap_is_the_guard(monkeypatch):
    monkeypatch.setattr(rubric_mod, "_regex", None)
    rubric_mod.check_pattern.cache_clear()
    try:
        ex = Example("r", "q", "", meta={"rubric": [{"id": "w", "kind": "regex", "value": r"\d+\s*[*x]\s*\d+"}]})
        v = RubricVerifier()
        assert v(ex, "6 * 7").reward == 1.0
        s, took = _timed(lambda: v(ex, "7" * 99_000))
        assert s.reward == 0.0 and took < 1.0
        with pytest.raises(ValueError, match="catastrophic"):
            check_pattern("(a+)+b")
    finally:
        rubric_mod.check_pattern.cache_clear()


def test_every_combination_of_atoms_stays_within_the_budget_on_hostile_text():
    texts = ["a" * 19_000 + "!", "ab" * 9_000 + "x", "7" * 19_000, " " * 19_000 + "x", "aaaa\n" * 3_000]
    for pattern in SAFE:
        ex = Example("r", "q", "", meta={"rubric": [{"id": "s", "kind": "regex", "value": pattern}]})
        for text, v in itertools.product(texts, [RubricVerifier()]):
            s, took = _timed(lambda: v(ex, text))
            assert took < RUBRIC_BUDGET_S + 1.0, (pattern, text[:10], took)
