"""Standard benchmarks from local files (``task: {name: benchmark, ...}``, ``rlvr eval --benchmark``): each
benchmark's loader on a few rows written here in its published schema (the awkward cases included: GSM8K
answers with thousands separators, MATH answers in LaTeX, GPQA options with letters and words such as "A"
and "I" inside, MBPP tests that need their setup code, HumanEval prompts with helper functions), the formats
(JSONL, JSON, CSV, parquet, saved datasets, directories), one clear error for a wrong path or schema, the
held-out route for training, and the command line."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from rlvr.tasks import TASKS, DataError
from rlvr.tasks.benchmarks import BENCHMARKS, NAMES, BenchmarkParams, SchemaError, benchmark_examples
from rlvr.verifiers.choice import LETTERS

# ---- fixtures in the published schemas -------------------------------------------------------------------------

MATH500 = [
    {"problem": "Convert the point $(0,3)$ in rectangular coordinates to polar coordinates.",
     "solution": "We have $r = 3$ and $\\theta = \\frac{\\pi}{2}$, so $\\boxed{\\left( 3, \\frac{\\pi}{2} \\right)}$.",
     "answer": "\\left( 3, \\frac{\\pi}{2} \\right)", "subject": "Precalculus", "level": 2,
     "unique_id": "test/precalculus/807.json"},
    {"problem": "What is $\\frac{1}{2} + \\frac{1}{3}$?", "solution": "It is $\\boxed{\\frac{5}{6}}$.",
     "answer": "\\frac56", "subject": "Prealgebra", "level": 1, "unique_id": "test/prealgebra/1.json"},
    {"problem": "Which is the answer? (A) 1 (B) 2 (C) 3", "solution": "Clearly $\\boxed{\\text{(C)}}$.",
     "answer": "\\text{(C)}", "subject": "Algebra", "level": 1, "unique_id": "test/algebra/2.json"},
]
AIME2024 = [{"id": 60, "problem": "Find the remainder when $2^{10}$ is divided by $1000$.", "solution": "$1024$.",
             "answer": "24", "url": "https://example.org/aime/60", "year": 2024},
            {"id": 61, "problem": "Find $7 \\cdot 11 \\cdot 13$ minus $1000$.", "solution": "",
             "answer": "1", "url": "https://example.org/aime/61", "year": 2024}]
AIME2025_OPENCOMPASS = [{"question": "Find the sum of all integer bases $b>9$ for which $17_b$ divides $97_b$.",
                         "answer": "70"}, {"question": "Find $2+3$.", "answer": 5}]
GSM8K = [{"question": "A shop sells 1,000 pens a day. How many in 2 days?",
          "answer": "1,000 * 2 = <<1000*2=2000>>2,000 pens.\n#### 2,000"},
         {"question": "Tom has 3 apples and eats 1. How many are left?", "answer": "3 - 1 = <<3-1=2>>2\n#### 2"}]
GPQA = [{"Record ID": "rec1", "Question": "Which vitamin is fat-soluble?", "Correct Answer": " Vitamin A ",
         "Incorrect Answer 1": "Vitamin B12", "Incorrect Answer 2": "Vitamin C\n",
         "Incorrect Answer 3": "A and B", "Explanation": "A is stored in fat.", "Subdomain": "Biochemistry"},
        {"Record ID": "rec2", "Question": "Which statements hold?\nI. x > 0\nII. x < 5",
         "Correct Answer": "I only", "Incorrect Answer 1": "II only", "Incorrect Answer 2": "I and II",
         "Incorrect Answer 3": "I", "Explanation": "", "Subdomain": "Math"},
        {"Record ID": "rec3", "Question": "What is $\\frac{1}{2}$ of 4?", "Correct Answer": "$2$",
         "Incorrect Answer 1": "$4$", "Incorrect Answer 2": "$8$", "Incorrect Answer 3": "$\\frac{1}{2}$",
         "Explanation": "", "Subdomain": "Math"}]
HE_PROMPT_1 = ('from typing import List\n\n\ndef below_zero(operations: List[int]) -> bool:\n'
               '    """ True if the running balance ever falls below zero.\n    >>> below_zero([1, 2, -4])\n'
               '    True\n    """\n')
HE_PROMPT_2 = ('\n\ndef encode_shift(s: str):\n    """shifts every character by 5"""\n'
               '    return "".join([chr(((ord(ch) + 5 - ord("a")) % 26) + ord("a")) for ch in s])\n\n\n'
               'def decode_shift(s: str):\n    """ takes as input string encoded with encode_shift function. '
               'Returns decoded string.\n    """\n')
HUMANEVAL = [
    {"task_id": "HumanEval/3", "prompt": HE_PROMPT_1, "entry_point": "below_zero",
     "canonical_solution": "    balance = 0\n    for op in operations:\n        balance += op\n"
                           "        if balance < 0:\n            return True\n    return False\n",
     "test": "\n\nMETADATA = {'author': 'jt'}\n\n\ndef check(candidate):\n    assert candidate([]) == False\n"
             "    assert candidate([1, 2, -4]) == True\n    assert candidate([1, -1, 2]) == False\n"},
    {"task_id": "HumanEval/50", "prompt": HE_PROMPT_2, "entry_point": "decode_shift",
     "canonical_solution": '    return "".join([chr(((ord(ch) - 5 - ord("a")) % 26) + ord("a")) for ch in s])\n',
     "test": "\n\ndef check(candidate):\n    assert candidate(encode_shift('hello')) == 'hello'\n"},
]
MBPP = [{"task_id": 11, "text": "Write a python function to remove first and last occurrence of a given character "
         "from the string.", "code": "def remove_Occ(s, ch):\n    return s.replace(ch, '', 1)[::-1].replace(ch, '', 1)"
         "[::-1]", "test_list": ["assert remove_Occ(\"hello\",\"l\") == \"heo\"",
                                 "assert remove_Occ(\"abcda\",\"a\") == \"bcd\""],
         "test_setup_code": "", "challenge_test_list": []},
        {"task_id": 77, "text": "Write a function to compute the area of a circle of radius r.",
         "code": "import math\ndef circle_area(r):\n    return math.pi * r * r",
         "test_list": ["assert isclose(circle_area(1), 3.14159, rel_tol=1e-4)"],
         "test_setup_code": "from math import isclose", "challenge_test_list": ["assert circle_area(0) == 0"]}]
MBPP_SANITIZED = [{"source_file": "Benchmark Questions Verification V2.ipynb", "task_id": 2,
                   "prompt": "Write a function to find the shared elements from the given two lists.",
                   "code": "def similar_elements(a, b):\n    return tuple(set(a) & set(b))",
                   "test_imports": [], "test_list": ["assert set(similar_elements((3, 4, 5, 6),(5, 7, 4, 10))) "
                                                     "== set((4, 5))"]}]
DEFAB_RELEASED = [
    {"target": "organism(robin)", "level": 2,
     "candidates": ["df_organism(robin):  => organism(robin)", "df_organism(parrot):  => organism(parrot)",
                    "df_animal(robin):  => animal(robin)", "df_bird(owl):  => bird(owl)"],
     "gold": ["df_organism(robin):  => organism(robin)"],
     "metadata": {"ablated_element": "df_organism(robin)", "distractor_strategy": "syntactic"}},
    {"name": "penguin", "domain": "biology", "level": 3, "anomaly": "flies(opus)",
     "gold": "d_penguin: penguin(X) ~> ~flies(X)",
     "candidates": ["d_penguin: penguin(X) ~> ~flies(X)", "d_penguin_broad: bird(X) ~> ~flies(X)",
                    "d_penguin_positive: penguin(X) => walks(X)", "d_penguin_wrong_cond: large(X) ~> ~flies(X)"],
     "theory_facts": ["bird(opus)", "bird(tweety)", "penguin(opus)"],
     "theory_rules": ["r_flies: bird(X) => flies(X)"]},
]


def _write(path: Path, rows, fmt: str = "jsonl") -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    if fmt == "jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    elif fmt == "json":
        path.write_text(json.dumps({"metadata": {"total": len(rows)}, "instances": rows}, indent=2))
    elif fmt == "csv":
        with path.open("w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
    return str(path)


def _params(name: str, path: str, **kw) -> BenchmarkParams:
    return BenchmarkParams(benchmark=name, path=path, **kw)


def _task(name: str, path: str, **kw):
    return TASKS.get("benchmark").fn(_params(name, path, **kw))


def _close(task) -> None:
    for wv in task.verifiers:
        getattr(wv.verifier, "close", lambda: None)()


def _defab_rlvr_rows() -> list[dict]:
    from rlvr.defab.generate import generate

    return [inst.to_json() for inst in generate(2, 2, 0)]


FIXTURES = {"math500": MATH500, "aime2024": AIME2024, "aime2025": AIME2025_OPENCOMPASS, "gsm8k": GSM8K,
            "gpqa_diamond": GPQA, "humaneval": HUMANEVAL, "mbpp": MBPP, "defab": DEFAB_RELEASED}


# ---- every benchmark ---------------------------------------------------------------------------------------------

def test_every_name_has_a_benchmark_and_a_fixture():
    assert tuple(BENCHMARKS) == NAMES or set(BENCHMARKS) == set(NAMES)
    assert set(FIXTURES) == set(NAMES)
    for bench in BENCHMARKS.values():
        assert any("{" + k + "}" in bench.template for k in bench.placeholders), bench.name


@pytest.mark.parametrize("name", NAMES)
def test_loads_its_schema_with_the_standard_template(tmp_path, name):
    rows = FIXTURES[name]
    exs = benchmark_examples(_params(name, _write(tmp_path / f"{name}.jsonl", rows)))
    assert len(exs) == len(rows) and len({e.id for e in exs}) == len(exs)
    assert all(e.task == name and isinstance(e.prompt, str) and e.prompt for e in exs)
    first = exs[0].prompt
    if name in ("math500", "aime2024", "aime2025", "gsm8k"):
        assert first.endswith("Please reason step by step, and put your final answer within \\boxed{}.")
    elif name in ("gpqa_diamond", "defab"):
        assert "'Answer: $LETTER'" in first and "\nA) " in first and "\nD) " in first
    elif name == "humaneval":
        assert "```python\n" + HE_PROMPT_1 + "```" in first
    else:
        assert first.startswith("You are an expert Python programmer, and here is your task: Write a python")
        assert 'assert remove_Occ("hello","l") == "heo"' in first


def test_math_gold_answers(tmp_path):
    m = benchmark_examples(_params("math500", _write(tmp_path / "m.jsonl", MATH500)))
    assert [e.id for e in m] == ["test/precalculus/807.json", "test/prealgebra/1.json", "test/algebra/2.json"]
    assert m[0].answer == "\\left( 3, \\frac{\\pi}{2} \\right)" and m[0].meta["subject"] == "Precalculus"
    assert m[0].sft_target.startswith("We have")
    g = benchmark_examples(_params("gsm8k", _write(tmp_path / "g.jsonl", GSM8K)))
    assert [e.answer for e in g] == ["2000", "2"]  # thousands separators removed
    a = benchmark_examples(_params("aime2024", _write(tmp_path / "a.jsonl", AIME2024)))
    assert [(e.id, e.answer) for e in a] == [("60", "24"), ("61", "1")] and a[0].meta["year"] == 2024
    b = benchmark_examples(_params("aime2025", _write(tmp_path / "aime2025-I.jsonl", AIME2025_OPENCOMPASS)))
    assert [(e.id, e.answer) for e in b] == [("aime2025-I-1", "70"), ("aime2025-I-2", "5")]  # JSONL: line numbers
    assert b[0].prompt.startswith("Find the sum of all integer bases")


def test_math_benchmarks_score_with_the_math_verifier(tmp_path):
    task = _task("math500", _write(tmp_path / "m.jsonl", MATH500))
    g = _task("gsm8k", _write(tmp_path / "g.jsonl", GSM8K))
    try:
        polar, half, letter = task.examples("eval")
        assert task.score(polar, "So the point is $\\boxed{\\left( 3, \\frac{\\pi}{2} \\right)}$.").reward == 1.0
        assert task.score(half, "The sum is \\boxed{\\frac{5}{6}}").reward == 1.0
        assert task.score(half, "The sum is \\boxed{\\frac{5}{7}}").reward == 0.0
        assert task.score(letter, "\\boxed{\\text{(C)}}").reward == 1.0
        pens = g.examples("eval")[0]
        assert g.score(pens, "They sell \\boxed{2,000} pens.").reward == 1.0
        assert g.score(pens, "#### 2000").reward == 1.0
        assert g.score(pens, "\\boxed{200}").reward == 0.0
    finally:
        _close(task), _close(g)


# ---- GPQA: shuffled options, recorded ----------------------------------------------------------------------------

def test_gpqa_options_shuffled_with_a_recorded_seed(tmp_path):
    path = _write(tmp_path / "gpqa_diamond.csv", GPQA, "csv")  # the release is a CSV with multi-line cells
    exs = benchmark_examples(_params("gpqa_diamond", path, seed=3))
    for ex, row in zip(exs, GPQA):
        texts = [row[f].strip() for f in ("Correct Answer", "Incorrect Answer 1", "Incorrect Answer 2",
                                          "Incorrect Answer 3")]
        m = ex.meta
        assert ex.id == row["Record ID"] and m["shuffle_seed"] == 3
        assert sorted(m["options"]) == sorted(texts) and m["options"] == [texts[i] for i in m["option_order"]]
        assert ex.answer == m["correct_letter"] == LETTERS[m["option_order"].index(0)]
        assert m["options"][LETTERS.index(ex.answer)] == texts[0]
        assert f"{ex.answer}) {texts[0]}" in ex.prompt
    # the order depends on the seed and the record only: the same in reversed files, other with another seed
    again = benchmark_examples(_params("gpqa_diamond", _write(tmp_path / "r.jsonl", GPQA[::-1]), seed=3))
    assert {e.id: e.meta["options"] for e in again} == {e.id: e.meta["options"] for e in exs}
    orders = {tuple(e.meta["option_order"]) for s in range(8)
              for e in benchmark_examples(_params("gpqa_diamond", path, seed=s))}
    assert len(orders) > 3


def test_gpqa_scores_letters_and_option_texts(tmp_path):
    task = _task("gpqa_diamond", _write(tmp_path / "g.jsonl", GPQA))
    vit, stmts, half = task.examples("eval")
    right, wrong = vit.answer, next(x for x in "ABCD" if x != vit.answer)
    assert task.score(vit, f"Fat-soluble ones are A, D, E, K.\nAnswer: {right}").reward == 1.0
    assert task.score(vit, "Vitamins B12 and C are water-soluble.\nThe answer is Vitamin A.").reward == 1.0
    assert task.score(vit, f"Answer: {wrong}").reward == 0.0
    assert task.score(vit, f"Answer: {right} or {wrong}").reward == 0.0
    opt = stmts.meta["options"]
    assert task.score(stmts, "Only the first statement holds.\nAnswer: I only").reward == 1.0
    assert task.score(stmts, f"Answer: {LETTERS[opt.index('I')]}").reward == 0.0  # option "I" is a distractor
    assert task.score(stmts, "I and II").reward == 0.0
    assert task.score(half, "\\boxed{2}").reward == 1.0 and task.score(half, "\\boxed{4}").reward == 0.0


# ---- code ------------------------------------------------------------------------------------------------------

def test_humaneval_in_the_sandbox(tmp_path):
    task = _task("humaneval", _write(tmp_path / "he.jsonl", HUMANEVAL))
    below, decode = task.examples("eval")
    assert below.meta["tests"]["entry_point"] == "below_zero" and task.score(below, below.answer).reward == 1.0
    full = ("Here it is:\n```python\ndef below_zero(operations: List[int]) -> bool:\n    b = 0\n"
            "    for op in operations:\n        b += op\n        if b < 0:\n            return True\n"
            "    return False\n```")
    assert task.score(below, full).reward == 1.0  # List comes from the prompt's imports
    assert task.score(below, "```python\n    return any(x < 0 for x in operations)\n```").reward == 0.0
    body = '    return "".join(chr((ord(c) - 5 - ord("a")) % 26 + ord("a")) for c in s)\n'
    assert task.score(decode, body).reward == 1.0  # a body continuing the prompt; encode_shift from the prompt
    whole = f"```python\ndef decode_shift(s: str):\n{body}```"
    assert task.score(decode, whole).reward == 1.0  # the whole function; the helper still there
    assert task.score(decode, "```python\ndef decode_shift(s):\n    return s\n```").reward == 0.0
    assert task.score(decode, "I cannot do this.").reward == 0.0


def test_mbpp_both_layouts_with_setup_code(tmp_path):
    task = _task("mbpp", _write(tmp_path / "mbpp.jsonl", MBPP))
    occ, area = task.examples("eval")
    assert occ.id == "11" and area.meta["tests"]["test_setup_code"] == "from math import isclose"
    assert area.meta["challenge_test_list"] == ["assert circle_area(0) == 0"]
    assert task.score(area, f"```python\n{area.answer}\n```").reward == 1.0  # isclose comes from the setup code
    assert task.score(area, "```python\ndef circle_area(r):\n    return 3 * r * r\n```").reward == 0.0
    assert task.score(occ, f"```python\n{occ.answer}\n```").reward == 1.0
    sanitized = _task("mbpp", _write(tmp_path / "s.jsonl", MBPP_SANITIZED))
    ex = sanitized.examples("eval")[0]
    assert "find the shared elements" in ex.prompt and sanitized.score(ex, ex.answer).reward == 1.0


# ---- DeFAb -------------------------------------------------------------------------------------------------------

def test_defab_released_layout_is_multiple_choice(tmp_path):
    task = _task("defab", _write(tmp_path / "instances.json", DEFAB_RELEASED, "json"), seed=1)
    l2, l3 = task.examples("eval")
    assert l2.id == "instances-0" and l3.id == "penguin"
    assert "theory in defeasible logic" not in l2.prompt and "organism(robin)?" in l2.prompt  # no theory stored
    assert "penguin(opus)\nr_flies: bird(X) => flies(X)" in l3.prompt and "concludes flies(opus)" in l3.prompt
    for ex, row in zip((l2, l3), DEFAB_RELEASED):
        gold = row["gold"][0] if isinstance(row["gold"], list) else row["gold"]
        assert ex.meta["options"][LETTERS.index(ex.answer)] == gold and ex.meta["correct"] == [ex.answer]
        assert task.score(ex, f"Answer: {ex.answer}").reward == 1.0
        assert task.score(ex, f"Answer: {gold}").reward == 1.0
        other = next(x for x in "ABCD" if x != ex.answer)
        assert task.score(ex, f"Answer: {other}").reward == 0.0
    assert [benchmark_examples(_params("defab", str(tmp_path / "instances.json"), seed=s))[1].answer
            for s in range(6)] != ["A"] * 6  # the release's gold is always first: shuffled


def test_defab_release_download_as_laid_out(tmp_path):
    """A download of the release: tier0 files wrapped in {metadata, instances}, tier1 files as bare lists, beside
    summary, statistics and one-instance files that are not instance lists; a row with a single candidate; a
    theory kept under metadata.facts."""
    snap = tmp_path / "instances"
    l2, l3 = DEFAB_RELEASED
    single = {**l2, "target": "alloy(brass)", "candidates": ["df_alloy(brass):  => alloy(brass)"],
              "gold": ["df_alloy(brass):  => alloy(brass)"]}
    facts = {**l3, "name": "rts", "theory_facts": None, "theory_rules": None,
             "metadata": {"facts": ["unit(w1)", "r1: unit(X) => busy(X)"]}}
    _write(snap / "tier0" / "biology_dev_instances.json", [l2, single, l3], "json")
    (snap / "tier1" / "bio").mkdir(parents=True)
    (snap / "tier1" / "bio" / "instances.json").write_text(json.dumps([{**l2, "id": ""}, facts]))
    (snap / "tier1" / "generation_summary.json").write_text(json.dumps({"total": 3, "domains": {"bio": 3}}))
    (snap / "instance_statistics.json").write_text(json.dumps({"levels": {"1": 0, "2": 2, "3": 2}}))
    (snap / "minimal_test_instance.json").write_text(json.dumps({"instance": l2}))
    (snap / "synthetic_instances.json").write_text(json.dumps([{"level": 2, "theory": {"facts": [], "rules": []}}]))
    with pytest.warns(UserWarning) as caught:
        exs = benchmark_examples(_params("defab", str(snap)))
    said = " ".join(str(w.message) for w in caught)
    assert "4 file(s) not in the DeFAb schema passed over" in said and "generation_summary.json" in said
    assert "1 DeFAb row(s) with a single candidate" in said and "item 1" in said
    assert len(exs) == 4 and len({e.id for e in exs}) == 4
    rts = next(e for e in exs if e.id == "rts")
    assert "unit(w1)\nr1: unit(X) => busy(X)" in rts.prompt
    # a file that starts in the schema must hold it: a bad later row is an error, not a file passed over
    bad = tmp_path / "bad"
    _write(bad / "a.json", [l2], "json")
    _write(bad / "b.json", [l2, {"level": 2, "oops": 1}], "json")
    with pytest.raises(SchemaError, match=r"b.json item 1"):
        benchmark_examples(_params("defab", str(bad)))
    # nothing in the schema anywhere, or only single-candidate rows: an error
    none = tmp_path / "none"
    none.mkdir()
    (none / "a.json").write_text(json.dumps({"total": 1}))
    (none / "b.json").write_text(json.dumps({"levels": {}}))
    with pytest.raises(SchemaError, match="not a DeFAb row"):
        benchmark_examples(_params("defab", str(none)))
    with pytest.warns(UserWarning, match="single candidate"), pytest.raises(DataError, match="no DeFAb examples"):
        benchmark_examples(_params("defab", _write(tmp_path / "one.json", [single], "json")))
    with pytest.raises(DataError, match="two or more"):
        benchmark_examples(_params("defab", _write(tmp_path / "zero.json", [{**l2, "candidates": []}], "json")))


def test_defab_rlvr_layout_is_scored_exactly(tmp_path):
    rows = _defab_rlvr_rows()
    task = _task("defab", _write(tmp_path / "d.jsonl", rows))
    ex = task.examples("eval")[0]
    assert ex.id == f"{rows[0]['id']}-formal" and ex.meta["theory"] == rows[0]["theory"]
    assert task.score(ex, "Reasoning.\n" + ex.answer).reward == 1.0
    assert task.score(ex, "Answer: nothing.").reward == 0.0
    robust = _task("defab", _write(tmp_path / "d.jsonl", rows), rendering="all")
    assert len(robust.examples("eval")) == 4 * len(rows)


# ---- formats and errors ------------------------------------------------------------------------------------------

def test_formats_parquet_saved_dataset_and_directories(tmp_path):
    datasets = pytest.importorskip("datasets")
    ds = datasets.Dataset.from_list(MATH500)
    ds.to_parquet(str(tmp_path / "test-00000-of-00001.parquet"))
    assert len(benchmark_examples(_params("math500", str(tmp_path / "test-00000-of-00001.parquet")))) == 3
    datasets.DatasetDict({"test": ds}).save_to_disk(str(tmp_path / "saved"))
    exs = benchmark_examples(_params("math500", str(tmp_path / "saved")))
    assert [e.id for e in exs] == [r["unique_id"] for r in MATH500]
    datasets.DatasetDict({"test": ds, "train": ds}).save_to_disk(str(tmp_path / "two"))
    with pytest.raises(DataError, match=r"splits \['test', 'train'\]; set task.split"):
        benchmark_examples(_params("math500", str(tmp_path / "two")))
    assert len(benchmark_examples(_params("math500", str(tmp_path / "two"), split="test"))) == 3
    # a snapshot-like directory: both AIME 2025 halves, and a train file left out by split
    snap = tmp_path / "AIME2025"
    _write(snap / "aime2025-I.jsonl", AIME2025_OPENCOMPASS)
    _write(snap / "aime2025-II.jsonl", AIME2025_OPENCOMPASS[:1])
    assert [e.id for e in benchmark_examples(_params("aime2025", str(snap)))] == \
        ["aime2025-I-1", "aime2025-I-2", "aime2025-II-1"]
    gsm = tmp_path / "gsm8k" / "main"
    _write(gsm / "train.jsonl", GSM8K * 2, "jsonl")
    _write(gsm / "test.jsonl", GSM8K)
    assert len(benchmark_examples(_params("gsm8k", str(tmp_path / "gsm8k"), split="test"))) == 2


@pytest.mark.parametrize("name", NAMES)
def test_wrong_schema_is_one_error_naming_fields_and_schema(tmp_path, name):
    other = "humaneval" if name != "humaneval" else "gsm8k"
    path = _write(tmp_path / "x.jsonl", FIXTURES[other])
    with pytest.raises(SchemaError) as e:
        benchmark_examples(_params(name, path))
    msg, bench = str(e.value), BENCHMARKS[name]
    assert msg.startswith(f"{path}:1: not a {bench.title} row: missing field(s) ") and bench.schema() in msg
    have = ", ".join(repr(k) for k in FIXTURES[other][0])
    assert msg.endswith(f"The row has: {have}")
    missing = [alts for alts in bench.required if not any(f in FIXTURES[other][0] for f in alts)]
    assert missing and all(" or ".join(map(repr, alts)) in msg for alts in missing)


def test_aime_answers_must_be_integers(tmp_path):
    with pytest.raises(SchemaError, match=r"not an AIME 2025 row: 'answer' must be an integer"):
        benchmark_examples(_params("aime2025", _write(tmp_path / "gsm8k.jsonl", GSM8K)))


def test_wrong_path_and_bad_rows(tmp_path):
    with pytest.raises(DataError, match=r"nope.jsonl: no such file or directory \(benchmark gpqa_diamond expects "
                                        r"GPQA-Diamond \(Idavidrein/gpqa"):
        benchmark_examples(_params("gpqa_diamond", str(tmp_path / "nope.jsonl")))
    with pytest.raises(DataError, match="has no final '#### N' line"):
        benchmark_examples(_params("gsm8k", _write(tmp_path / "g.jsonl", [{"question": "q", "answer": "7"}])))
    with pytest.raises(DataError, match="example ids repeat"):
        benchmark_examples(_params("math500", _write(tmp_path / "m.jsonl", MATH500[:1] * 2)))
    with pytest.raises(DataError, match="must be one of the 'candidates'"):
        bad = dict(DEFAB_RELEASED[0], gold=["x: => y(a)"])
        benchmark_examples(_params("defab", _write(tmp_path / "d.jsonl", [bad])))
    with pytest.raises(DataError, match=r"empty.*no such file|neither a saved dataset"):
        (tmp_path / "empty").mkdir()
        benchmark_examples(_params("math500", str(tmp_path / "empty")))


def test_template_override_and_its_check(tmp_path):
    path = _write(tmp_path / "g.jsonl", GSM8K)
    ex = benchmark_examples(_params("gsm8k", path, template="Q: {question}\nA: \\boxed{}"))[1]
    assert ex.prompt == "Q: Tom has 3 apples and eats 1. How many are left?\nA: \\boxed{}"
    with pytest.raises(ValueError, match=r"names none of gsm8k's placeholders \(\{question\}\)"):
        _params("gsm8k", path, template="Solve: {problem}")


# ---- held out in training, config and command line ------------------------------------------------------------

def test_train_task_with_the_benchmark_held_out(tmp_path):
    from rlvr.config.run import load_config

    path = _write(tmp_path / "gsm8k.jsonl", GSM8K)
    cfg_file = tmp_path / "c.yaml"
    cfg_file.write_text("task:\n  name: benchmark\n  benchmark: gsm8k\n  path: gsm8k.jsonl\n"
                        "  train: {name: arithmetic, max_value: 9, num_eval: 3}\n")
    cfg = load_config(cfg_file)
    assert cfg.task.params.path == path  # resolved beside the config
    task = TASKS.get(cfg.task.name).fn(cfg.task.params)
    try:
        assert set(task.splits) == {"train", "sft", "eval"} and len(task.examples("eval")) == 2  # sft: arithmetic's
        assert all(e.task == "arithmetic" for e in task.examples("train"))
        add = task.examples("train")[0]
        pens = task.examples("eval")[0]
        assert task.score(add, add.answer).reward == 1.0  # the train task's verifier
        assert task.score(pens, "\\boxed{2000}").reward == 1.0  # the benchmark's
        scores = task.score_batch([add, pens], ["nonsense", "\\boxed{2000}"])
        assert [s.reward for s in scores] == [0.0, 1.0]
        assert [wv.verifier.name for wv in task.verifiers] == ["numeric"]
    finally:
        _close(task.bench_task)


def test_eval_overrides(tmp_path):
    from rlvr.cli.evalopts import EvalOptionError, eval_overrides
    from rlvr.config.run import load_config

    path = _write(tmp_path / "g.jsonl", GSM8K)
    sets = eval_overrides(["task.seed=2"], {"samples": 1, "split": None}, "gsm8k", Path(path))
    assert sets[0] == "task=" + json.dumps({"name": "benchmark", "benchmark": "gsm8k", "path": path})
    assert sets[1:] == ["task.seed=2", "eval.samples=1"]
    cfg = load_config(None, sets)
    assert cfg.task.name == "benchmark" and cfg.task.params.benchmark == "gsm8k" and cfg.task.params.seed == 2
    for bad, msg in (({"benchmark": "gsm8k"}, "go together"), ({"benchmark": "mmlu", "path": Path(path)}, "unknown"),
                     ({"benchmark": "gsm8k", "path": tmp_path / "no"}, "no such file")):
        with pytest.raises(EvalOptionError, match=msg):
            eval_overrides(None, {}, **bad)


def test_rlvr_eval_benchmark_end_to_end(tmp_path):
    from typer.testing import CliRunner

    from rlvr.cli import app

    path = _write(tmp_path / "g.jsonl", GSM8K)
    out = tmp_path / "e.json"
    sets = ["model.tiny.hidden_size=32", "model.tiny.intermediate_size=64", "model.tiny.num_layers=1",
            "rollout.max_new_tokens=4", "sft.steps=0"]
    r = CliRunner().invoke(app, ["eval", "--benchmark", "gsm8k", "--path", path, "--output", str(out), "-n", "1",
                                 *sum((["--set", s] for s in sets), [])])
    assert r.exit_code == 0, r.output
    result = json.loads(out.read_text())
    assert result["task"] == "benchmark" and result["num_examples"] == 2
    r = CliRunner().invoke(app, ["eval", "--benchmark", "gsm8k"])
    assert r.exit_code == 2 and "--benchmark and --path go together" in r.output
