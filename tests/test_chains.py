"""The chains testbed (rlvr.tasks.chains) and its step-by-step verifier (rlvr.verifiers.chain): every exact chain
verifies in any layout; wrong chains that end in the right answer, incomplete chains, extra or reordered steps and
invalid countdown paths score 0; the imperfect annotator skips and errs at its stated rates; splits are disjoint
and reproducible."""

from __future__ import annotations

import itertools
import random
import re
import time

import pytest

from rlvr.core.types import Example
from rlvr.tasks.chains import ChainsParams, annotated_chain, chains_task, exact_chain, problem
from rlvr.verifiers.chain import ChainVerifier, column_steps

V = ChainVerifier()


def _problems(seed, n=60, families=("add", "mul", "countdown"), **kw):
    rng, p = random.Random(seed), ChainsParams(**kw)
    drawn = [problem(families[i % len(families)], rng, p) for i in range(n)]
    return [Example(f"e{i}", prompt, answer, meta=meta) for i, (prompt, answer, meta) in enumerate(drawn)]


def _steps(chain):
    *steps, answer = chain.split(";")
    return steps, answer


def _relayout(chain, rng):
    """The same chain in another layout: separators, spaces, operator signs, operand order, prose, answer form."""
    steps, answer = _steps(chain)
    out = []
    for s in steps:
        lhs, rhs = s.split("=")
        terms = lhs.split("+")
        if rng.random() < 0.5 and all("*" not in t and "/" not in t and "-" not in t for t in terms):
            rng.shuffle(terms)  # 3+6+1 -> 1+3+6
        lhs = "+".join(terms)
        lhs = lhs.replace("*", rng.choice(["*", "×", "·", " x "])) if "*" in lhs else lhs
        sp = rng.choice(["", " "])
        eq = re.sub(r"([-+*/×·])", rf"{sp}\1{sp}", lhs) + f"{sp}={sp}{rhs}"
        out.append(eq + rng.choice(["", ", write the last digit", " (carry on)"]))
    sep = rng.choice([";", "\n", "; ", ". Then ", "\n\n"])
    value = answer.split(":")[1].strip()
    return sep.join(out) + rng.choice([f"\nAnswer: {value}", f". The answer is {value}.", f"\n#### {value}"])


@pytest.mark.parametrize("seed", range(4))
def test_every_exact_chain_verifies_in_any_layout(seed):
    rng = random.Random(seed)
    for ex in _problems(seed):
        chain = exact_chain(ex.meta)
        assert V(ex, chain).reward == 1.0, (ex.prompt, chain, V(ex, chain).info)
        other = _relayout(chain, rng)
        assert V(ex, other).reward == 1.0, (ex.prompt, other, V(ex, other).info)


@pytest.mark.parametrize("seed", range(4))
def test_wrong_incomplete_or_padded_chains_that_end_in_the_right_answer_score_0(seed):
    rng = random.Random(100 + seed)
    for ex in _problems(seed):
        steps, answer = _steps(exact_chain(ex.meta))
        k = rng.randrange(len(steps))
        lhs, rhs = steps[k].split("=")
        wrong = steps[:k] + [f"{lhs}={int(rhs) + rng.choice([-2, -1, 1, 2])}"] + steps[k + 1:]
        missing = steps[:k] + steps[k + 1:]
        padded = steps + ["1+1=2"]
        # (countdown need not use every number: a path with a step left out may still reach the target)
        for bad in (wrong, padded) if ex.meta["family"] == "countdown" else (wrong, missing, padded):
            text = ";".join(bad + [answer])
            s = V(ex, text)
            assert s.reward == 0.0 and s.components["answer"] == 1.0, (ex.prompt, text)
        if len(steps) > 1 and ex.meta["family"] != "countdown" and steps[0] != steps[-1]:
            assert V(ex, ";".join(steps[::-1] + [answer])).reward == 0.0  # columns in the wrong order
        assert V(ex, answer).reward == 0.0  # the bare answer is no chain
        value = int(answer.split(":")[1])
        assert V(ex, ";".join(steps + [answer, f"Answer: {value + 1}"])).reward == 0.0  # two answers
        assert V(ex, ";".join(steps + [f"Answer: {value + 1}"])).reward == 0.0
        for tail in (f" or {value + 1}", f"; {value + 1}", f" and/or {value + 1}", f"\u200b{rng.randint(0, 9)}",
                     f", maybe {value - 1}"):  # a hedge or a hidden second answer on the answer's line
            assert V(ex, ";".join(steps + [answer + tail])).reward == 0.0, answer + tail


_WORDS = {"+": " plus ", "-": " minus ", "*": " times ", "/": " divided by "}


def _typeset(chain, rng):
    """The same chain as a model writing LaTeX, Markdown or words might: operators as ``\\times``/``\\cdot``/
    ``∗``/words, equations in ``$...$`` or spelled ``equals``, a word note inside an equation, the problem
    restated with its result, and the answer boxed, emphasised, with thousands separators or a zero decimal."""
    steps, answer = _steps(chain)
    value = int(answer.split(":")[1])
    out = []
    for s in steps:
        lhs, rhs = s.split("=")
        style = rng.choice(["latex", "words", "unicode", "note"])
        if style == "latex":
            lhs = re.sub(r"\*", lambda _: rng.choice([r" \times ", r"\cdot ", r" \ast "]), lhs)
            out.append(f"${lhs} = {rhs}$")
        elif style == "words":
            spelled = re.sub(r"[-+*/]", lambda m: _WORDS[m.group(0)], lhs)
            out.append(spelled + rng.choice([" equals ", " is equal to "]) + rhs)
        elif style == "unicode":
            out.append(lhs.replace("*", rng.choice(["∗", "⋅", "✕"])) + "=" + rhs)
        else:
            out.append(f"{lhs} ({rng.choice(['carry', 'column', 'next step'])}) = {rhs}")
    stated = rng.choice([f"\\boxed{{{value}}}", f"$\\boxed{{{value}}}$", f"**Answer:** {value}",
                         f"Answer: **{value}**.", f"Answer: {value:,}", f"Answer: {value}.0",
                         f"\\text{{Answer:}} {value}"])
    text = rng.choice(["\n", "; ", ", then "]).join(out) + "\n" + stated
    return text


@pytest.mark.parametrize("seed", range(4))
def test_right_chains_typeset_in_latex_markdown_or_words_verify(seed):
    rng = random.Random(300 + seed)
    for ex in _problems(seed, n=90, min_digits=2, max_digits=7):
        text = _typeset(exact_chain(ex.meta), rng)
        assert V(ex, text).reward == 1.0, (ex.prompt, text, V(ex, text).info)
        if ex.meta["family"] != "countdown":  # the problem restated with its result, before or after the chain
            a, b = ex.meta["operands"]
            op = "+" if ex.meta["family"] == "add" else "*"
            restated = f"{b}{op}{a}={ex.answer}" if rng.random() < 0.5 else f"{a} {op} {b} = {ex.answer}"
            for t in (restated + ". " + text, text.replace("\n", f"\nSo {restated}.\n", 1)):
                assert V(ex, t).reward == 1.0, (ex.prompt, t, V(ex, t).info)


@pytest.mark.parametrize("seed", range(4))
def test_the_new_layouts_open_no_door_to_a_wrong_chain(seed):
    """What the typeset layouts read must still be checked: a false step in words or LaTeX, the problem restated
    with a wrong result or in place of its steps, a boxed answer beside another one, a hedge in thousands
    separators, a nonzero decimal, a note that hides a number."""
    rng = random.Random(400 + seed)
    for ex in _problems(seed, n=60, min_digits=2, max_digits=7):
        steps, answer = _steps(exact_chain(ex.meta))
        value = int(ex.answer)
        lhs, rhs = steps[-1].split("=")
        false_words = re.sub(r"[-+*/]", lambda m: _WORDS[m.group(0)], lhs) + f" equals {int(rhs) + 1}"
        false_latex = lhs.replace("*", r" \times ") + f" = {int(rhs) + 1}"
        for bad in (steps[:-1] + [false_words], steps[:-1] + [false_latex]):
            assert V(ex, ";".join(bad + [answer])).reward == 0.0, bad
        for stated in (f"\\boxed{{{value + 1}}}", f"\\boxed{{{value}}} Answer: {value + 1}",
                       f"Answer: {value}, {value + 1}", f"Answer: {value}.5", f"**Answer:** {value} or {value + 1}",
                       f"Answer: {value:,}{rng.randint(0, 9)}"):
            t = ";".join(steps) + "\n" + stated
            assert V(ex, t).reward == 0.0, t
        if ex.meta["family"] != "countdown":
            a, b = ex.meta["operands"]
            op = "+" if ex.meta["family"] == "add" else "*"
            assert V(ex, f"{a}{op}{b}={value}. Answer: {value}").reward == 0.0  # the restatement is no chain
            assert V(ex, f"{a}{op}{b}={value + 1}. " + ";".join(steps) + ";" + answer).reward == 0.0
            # a note with a number in it is not read past: "(carry 1)" inside an equation breaks it
            broken = steps[:-1] + [lhs + " (carry 1) = " + rhs]
            assert V(ex, ";".join(broken + [answer])).reward == 0.0


def _other_paths(numbers, target):
    """Every path reaching the target with all or some numbers (brute force, small inputs)."""
    found = []

    def go(pool, path):
        if path and path[-1][3] == target:
            found.append(list(path))
        for i, j in itertools.permutations(range(len(pool)), 2):
            a, b = pool[i], pool[j]
            for op, r in (("+", a + b), ("-", a - b), ("*", a * b), ("/", a // b if b and a % b == 0 else None)):
                if r is None or r <= 0 or r > 999:
                    continue
                rest = [x for k, x in enumerate(pool) if k not in (i, j)] + [r]
                go(rest, path + [(a, op, b, r)])

    go(list(numbers), [])
    return found


@pytest.mark.parametrize("seed", range(3))
def test_equations_read_either_way_round(seed):
    """``13=8+5`` is ``8+5=13``: a right chain with any of its steps turned round verifies; turned round, a
    false step, a missing step, a reordered chain or a step written twice still scores 0."""
    rng = random.Random(seed)
    for ex in _problems(seed, n=90, min_digits=2, max_digits=6):
        steps, answer = _steps(exact_chain(ex.meta))
        turned = []
        for s in steps:
            lhs, rhs = s.split("=")
            turned.append(f"{rhs} = {lhs}" if rng.random() < 0.6 else s)
        assert V(ex, ";".join(turned + [answer])).reward == 1.0, turned
        everywhere = [f"{s.split('=')[1]}={s.split('=')[0]}" for s in steps]
        assert V(ex, "\n".join(everywhere + [answer])).reward == 1.0
        lhs, rhs = steps[0].split("=")
        assert V(ex, ";".join([f"{int(rhs) + 1}={lhs}"] + steps[1:] + [answer])).reward == 0.0
        if ex.meta["family"] != "countdown":  # (a countdown path may leave a number out: a shorter path counts)
            assert V(ex, ";".join(everywhere[1:] + [answer])).reward == 0.0
            assert V(ex, ";".join([steps[0], everywhere[0]] + steps[1:] + [answer])).reward == 0.0
            if len(set(steps)) > 1:
                assert V(ex, ";".join(everywhere[::-1] + [answer])).reward == 0.0


def test_any_valid_countdown_path_counts_and_reusing_a_number_does_not():
    rng = random.Random(7)
    exs = [e for e in _problems(7, n=30, families=("countdown",), countdown_numbers=(3, 3))]
    for ex in exs[:10]:
        paths = _other_paths(ex.meta["numbers"], ex.meta["target"])
        assert paths
        for path in rng.sample(paths, min(5, len(paths))):
            text = ";".join(f"{a}{op}{b}={r}" for a, op, b, r in path) + f";Answer: {ex.meta['target']}"
            assert V(ex, text).reward == 1.0, (ex.prompt, text)
        a = ex.meta["numbers"][0]
        twice = f"{a}+{a}={2 * a};Answer: {ex.meta['target']}"
        if ex.meta["numbers"].count(a) < 2:
            assert V(ex, twice).reward == 0.0


def test_the_annotator_skips_and_errs_at_its_rates():
    rng = random.Random(0)
    exs = _problems(3, n=600, families=("add", "mul"), min_digits=4, max_digits=8)
    steps = skipped = wrong = 0
    for ex in exs:
        exact, _ = column_steps(ex.meta["family"], ex.meta["operands"])
        written = annotated_chain(ex.meta, 0.1, 0.2, rng).split(";")[:-1]
        steps += len(exact)
        skipped += len(exact) - len(written)
        truth = {f"{e}={r}" for e, r in exact}
        wrong += sum(w not in truth for w in written)
    # each step: left out with p 0.1; written with a wrong result with p 0.2 (written ones only are seen)
    assert abs(skipped / steps - 0.1) < 0.02
    assert abs(wrong / (steps - skipped) - 0.2) < 0.03
    assert all(annotated_chain(e.meta, 0.0, 0.0, rng) == exact_chain(e.meta) for e in exs[:50])


def test_the_annotators_notes_are_right_only_longer_and_at_their_rate():
    """A note is words after a step: a chain noted everywhere still verifies (so a noted completion is right, only
    longer), notes come at their rate, and rate 0 spends no draw (the chains written before notes are kept)."""
    exs = _problems(5, n=450, min_digits=2, max_digits=6, countdown_numbers=(3, 5))
    rng = random.Random(1)
    steps = notes = 0
    for ex in exs:
        full = annotated_chain(ex.meta, 0.0, 0.0, rng, note_rate=1.0)
        assert V(ex, full).reward == 1.0, (ex.prompt, full)
        assert len(full) > len(exact_chain(ex.meta))
        some = annotated_chain(ex.meta, 0.0, 0.0, rng, note_rate=0.3)
        assert V(ex, some).reward == 1.0, (ex.prompt, some)
        steps += len(some.split(";")) - 1
        notes += some.count("(")
        if ex.meta["family"] == "countdown":  # the numbers in hand after the last step: the target alone
            assert full.split(";")[-2].endswith(f"(have {ex.meta['target']})")
    assert abs(notes / steps - 0.3) < 0.04
    a, b = random.Random(7), random.Random(7)
    assert [annotated_chain(e.meta, 0.1, 0.2, a) for e in exs] == \
        [annotated_chain(e.meta, 0.1, 0.2, b, note_rate=0.0) for e in exs]
    assert a.random() == b.random()
    # a wrong step's note follows the annotator's own (wrong) result: the chain is wrong, not its narration
    ex = next(e for e in exs if e.meta["family"] == "add")
    wrong = annotated_chain(ex.meta, 0.0, 1.0, random.Random(3), note_rate=1.0)
    assert V(ex, wrong).reward == 0.0
    for step in wrong.split(";")[:-1]:
        r = int(step.split("=")[1].split(" ")[0])
        assert step.endswith(f"(write {r % 10}" + (f", carry {r // 10})" if r >= 10 else ")"))


def test_the_task_splits_are_disjoint_reproducible_and_spread_in_length():
    p = ChainsParams(num_train=1500, num_eval=200)
    a, b = chains_task(p), chains_task(p)
    ev, tr = a.examples("eval"), a.examples("train")
    assert {e.prompt for e in ev}.isdisjoint(e.prompt for e in tr)
    assert [e.prompt for e in ev] == [e.prompt for e in b.examples("eval")]
    assert [e.prompt for e in ev] != [e.prompt for e in chains_task(ChainsParams(num_train=1500, data_seed=1)).examples("eval")]
    lengths = sorted(len(e.sft_target) for e in tr)
    assert lengths[0] >= 20 and lengths[-1] <= 150 and lengths[len(lengths) // 2] >= 35 and lengths[-1] >= 90
    assert {e.meta["family"] for e in ev} == {"add", "mul", "countdown"}
    sft = a.examples("sft")
    assert len(sft) == len(tr) and 0.5 < sum(V(e, e.target).reward for e in sft) / len(sft) < 0.95
    exact = chains_task(ChainsParams(num_train=300, skip_rate=0.0, error_rate=0.0))
    assert [e.target for e in exact.examples("sft")] == [e.target for e in exact.examples("train")]


def test_reading_is_bounded():
    ex = _problems(0, n=1)[0]
    for text in ("1+1=2;" * 50_000, "9" * 200_000 + "=9", ("(" * 10_000) + "Answer: 1"):
        t0 = time.perf_counter()
        assert V(ex, text).reward == 0.0
        assert time.perf_counter() - t0 < 1.0


def test_bad_params_are_refused():
    from pydantic import ValidationError

    for bad in ({"min_digits": 5, "max_digits": 3}, {"countdown_numbers": (1, 3)}, {"skip_rate": 1.5}):
        with pytest.raises(ValidationError):
            ChainsParams(**bad)
    with pytest.raises(ValueError, match="distinct problems"):
        chains_task(ChainsParams(families=["add"], min_digits=1, max_digits=1, num_train=200, num_eval=10))


def test_a_short_run_trains_on_the_chains(tmp_path, tiny_cfg_overrides):
    import json

    from rlvr.config.run import load_config
    from rlvr.run.train import train

    keep = [o for o in tiny_cfg_overrides if not o.startswith(("task.", "rollout.max_new_tokens"))]
    out = train(load_config(overrides=keep + [
        "task.name=chains", "task.num_train=200", "task.num_eval=8", "task.max_digits=3", "sft.steps=3",
        "train.steps=2", "rollout.max_new_tokens=24", "model.tiny.max_positions=64"]))
    lines = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert out["steps"] == 2 and len(lines) == 2


def test_draw_distinct_keeps_first_draws_in_order_skips_none_and_gives_up():
    from rlvr.tasks.base import draw_distinct

    seen_k = []
    stream = iter([3, None, 3, 5, 4, None, 5, 7])

    def draw(k):
        seen_k.append(k)
        return next(stream)

    assert draw_distinct(draw, 4, key=lambda x: x % 10, what="numbers", hint="h") == [3, 5, 4, 7]
    assert seen_k == [0, 1, 1, 1, 2, 3, 3, 3]  # the count kept so far, at each draw
    with pytest.raises(ValueError, match=r"only 2 distinct pairs found for 3: allow more"):
        draw_distinct(lambda k: k % 2, 3, key=lambda x: x, what="pairs", hint="allow more", patience=4)
