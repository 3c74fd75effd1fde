"""Renderings M1–M4, their decoders, the rendering-robust score, and the `defab` task and verifier."""

import pytest

from rlvr.core.types import Example
from rlvr.defab.generate import generate
from rlvr.defab.render import (STYLES, answer_text, decode, extract_answer, render_prompt, render_theory,
                               rendering_robust_accuracy, robust_score, score_completion)
from rlvr.tasks.defab import DefabParams, DefabVerifier, defab_task, instance_example
from rlvr.tasks.base import TASKS
from rlvr.verifiers.base import VERIFIERS, build_verifier


@pytest.mark.parametrize("level", [1, 2, 3])
@pytest.mark.parametrize("nonsense", [False, True])
def test_round_trip_every_style(level, nonsense):
    for kb in ("animals", "vehicles", "food", "occupations"):
        for inst in generate(level, 2, 4, kb=kb, strategy="mixed", nonsense=nonsense):
            for style in STYLES:
                text = "Some reasoning first.\n" + answer_text(inst.gold, inst.glossary, style,
                                                                inst.gold_superiority, inst.theory) + "\n"
                h, gamma = decode(text, inst.glossary, style, inst.theory)
                assert gamma == inst.gold_superiority  # Level-3 exceptions carry their priority in every style
                assert (h == inst.gold if style in ("annotated", "formal") else
                        (h.with_label(inst.gold.label) if hasattr(h, "label") else h) == inst.gold)
                v = score_completion(inst.theory, inst.target, level, inst.glossary, style, text)
                assert v.score == 1.0, (style, text, v)


def test_theory_renderings_differ_and_carry_statements():
    inst = generate(2, 1, 0, kb="animals")[0]
    texts = {s: render_theory(inst.theory, inst.glossary, s) for s in STYLES}
    assert len(set(texts.values())) == 4
    n = len(inst.theory.facts) + len(inst.theory.rules)
    assert all(len(t.strip().splitlines()) == n for t in texts.values())
    assert "normally" in texts["narrative"] and "typically" in texts["semiformal"] and "%" in texts["annotated"]


@pytest.mark.parametrize("text, style, want", [
    ("blah\nAnswer: bird(tweety).\n", "formal", "bird(tweety)."),
    ("Answer: x.\nActually, Answer: **`bird(tweety).`**", "formal", "bird(tweety)."),
    ("Answer:\n\n  r: a(X) => b(X).\n  r > s.\n\nthanks", "formal", "r: a(X) => b(X).\n  r > s."),
    ("the answer is bird(tweety)", "formal", ""),
    ("ANSWER: tweety is a bird. More prose", "narrative", "tweety is a bird. More prose"),
])
def test_extract_answer(text, style, want):
    assert extract_answer(text, style) == want


def test_decoders_are_strict():
    inst = generate(2, 1, 0, kb="animals")[0]
    gold = answer_text(inst.gold, inst.glossary, "semiformal")
    for bad in (gold + " Or maybe not.", gold.replace("typically", "usually"), gold.replace("If", "When"),
                "Answer: " + str(inst.gold), gold.replace(inst.gold.head.predicate.replace("_", " "), "glorps")):
        assert score_completion(inst.theory, inst.target, 2, inst.glossary, "semiformal", bad).score == 0.0, bad
    # a narrative answer in the formal style (and vice versa) is not decoded
    narr = answer_text(inst.gold, inst.glossary, "narrative")
    assert score_completion(inst.theory, inst.target, 2, inst.glossary, "formal", narr).score == 0.0
    assert score_completion(inst.theory, inst.target, 2, inst.glossary, "narrative", "Answer: " +
                            str(inst.gold)).score == 0.0


def test_rendering_robust_score_is_worst_case():
    inst = generate(1, 1, 3, kb="food")[0]
    good = {s: answer_text(inst.gold, inst.glossary, s) for s in STYLES}
    assert robust_score(inst, good) == 1.0
    for s in STYLES:
        assert robust_score(inst, {**good, s: "no idea"}) == 0.0
    assert robust_score(inst, {k: v for k, v in good.items() if k != "formal"}) == 0.0
    other = generate(1, 1, 4, kb="food")[0]
    pairs = [(inst, good), (other, {s: "Answer: nothing." for s in STYLES})]
    assert rendering_robust_accuracy(pairs) == 0.5 and rendering_robust_accuracy([]) == 0.0


def test_prompt_mentions_target_and_format():
    inst = generate(3, 1, 0, kb="vehicles")[0]
    p = render_prompt(inst.theory, inst.target, 3, inst.glossary, "semiformal")
    assert "If X is" in p and p.rstrip().splitlines()[-1].startswith("Answer: If X is")
    assert inst.target.args[0] in p


def test_task_registered_and_splits_disjoint():
    entry = TASKS.get("defab")
    task = entry.fn(entry.params.model_validate({"n_train": 6, "n_eval": 4, "level": 1, "rendering": "mixed",
                                                 "kb": "occupations", "nonsense": True}))
    train, ev = task.examples("train"), task.examples("eval")
    assert len(train) == 6 and len(ev) == 4
    assert not {e.meta["theory"] for e in train} & {e.meta["theory"] for e in ev}
    assert {e.meta["rendering"] for e in train} == set(STYLES)
    for ex in train + ev:
        assert {"theory", "target", "level", "gold"} <= set(ex.meta)
        assert task.score(ex, "Let me see.\n" + ex.answer).reward == 1.0
        assert task.score(ex, ex.prompt).reward == 0.0  # echoing the prompt (its example answer) fails


def test_task_params_validated():
    with pytest.raises(Exception):
        DefabParams(level=4)
    with pytest.raises(Exception):
        DefabParams(rendering="latex")


def test_verifier_validates_and_never_raises():
    v = build_verifier("defab")
    assert isinstance(v, DefabVerifier) and "defab" in VERIFIERS
    v.validate()
    ex = instance_example(generate(2, 1, 0)[0], "formal")
    junks = ("", "Answer:", "Answer: ((((", "Answer: a(X) => b(X). c(X) => d(X).", "\x00" * 50, "Answer: " + "p," * 5000)
    for junk in junks:
        s = v(ex, junk)
        assert s.reward == 0.0
    broken = Example("x", "p", "a", meta={"theory": "p(", "target": "q", "level": 1})
    assert v(broken, "Answer: q.").reward == 0.0  # a broken record scores 0 with a reason, no exception


def test_verifier_scores_plain_records_without_rendering():
    inst = generate(2, 1, 5, kb="animals")[0]
    ex = Example("r", "prompt", "", meta={"theory": str(inst.theory), "target": str(inst.target), "level": 2})
    assert DefabVerifier()(ex, "Answer: " + inst.gold_text).reward == 1.0
    assert DefabVerifier()(ex, "Answer: " + inst.gold_text.replace("=>", "->")).reward == 0.0


def test_eval_rendering_all_reports_the_worst_rendering_per_instance():
    """With ``eval_rendering: all`` each eval instance appears in the four renderings and evaluation reports
    the rendering-robust accuracy: an instance counts only if every rendering of it is answered right."""
    from rlvr.config.run import load_config
    from rlvr.eval.evaluate import evaluate
    from rlvr.run.train import build_task
    from tests.test_eval import ScriptedEngine

    task = build_task(load_config(overrides=["task.name=defab", "task.eval_rendering=all", "task.n_eval=3",
                                             "task.n_train=1"]))
    exs = task.examples("eval")
    assert len(exs) == 12 and [e.meta["rendering"] for e in exs[:4]] == ["narrative", "semiformal", "annotated",
                                                                         "formal"]
    # instance 0: right in every rendering; instance 1: wrong in its narrative one; instance 2: all wrong
    script = {e.id: [e.answer if (k // 4 == 0 or (k // 4 == 1 and k % 4 != 0)) else "no idea"]
              for k, e in enumerate(exs)}
    result = evaluate(ScriptedEngine(script), task, "eval", samples=1, temperature=0.0)
    assert result["accuracy"] == pytest.approx(7 / 12)
    assert result["robust_accuracy"] == pytest.approx(1 / 3) and result["robust_problems"] == 3
