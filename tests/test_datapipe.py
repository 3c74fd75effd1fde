"""The data pipeline (rlvr.datapipe, `rlvr data clean`) and weight interpolation (`rlvr merge`)."""

import json
import random
import time
import tracemalloc

import pytest
import torch
from typer.testing import CliRunner

from rlvr.cli import app
from rlvr.datapipe import CleanOptions, clean_file
from rlvr.datapipe.decontam import BenchmarkIndex
from rlvr.datapipe.dedup import ExactDedup, NearDedup
from rlvr.core.jsonl import iter_jsonl as iter_rows
from rlvr.datapipe.relabel import Relabeler, members
from rlvr.datapipe.text import shingles, words

pytest.importorskip("datasketch")
runner = CliRunner()
RNG = random.Random(1234)
VOCAB = sorted({"".join(RNG.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(RNG.randint(3, 9)))
                for _ in range(4000)})


def sentence(rng, n):
    return " ".join(rng.choice(VOCAB) for _ in range(n))


def change_words(rng, text, k):
    toks = text.split()
    for i in rng.sample(range(len(toks)), k):
        toks[i] = rng.choice(VOCAB) + "x"
    return " ".join(toks)


def write_jsonl(path, rows):
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def kept_ids(path):
    return [json.loads(line)["id"] for line in path.read_text().splitlines()]


# ---------------------------------------------------------------- normalisation, reader


def test_words_and_shingles_normalise_case_and_punctuation():
    assert words("What is 2+2?  \\frac{1}{2}") == ["what", "is", "2", "2", "frac", "1", "2"]
    assert shingles("a b c", "word", 5) == {"a b c"}  # shorter than a shingle: itself
    assert shingles("A b, c d", "word", 2) == {"a b", "b c", "c d"}
    assert shingles("abcd", "char", 3) == {"abc", "bcd"}
    assert shingles("", "word", 5) == set()


def test_reader_reports_malformed_lines_and_goes_on(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_bytes(b'{"a": 1}\n{oops\n\n[1, 2]\n\xff\xfe\n{"a": 2}\n' + b'{"a": "' + b"x" * 300 + b'"}\n{"a": 3}\n')
    got = list(iter_rows(path, max_line_bytes=100))
    assert [(n, r) for n, r, e in got if r] == [(1, {"a": 1}), (6, {"a": 2}), (8, {"a": 3})]
    errors = {n: e for n, r, e in got if e}
    assert set(errors) == {2, 4, 5, 7}
    assert "invalid JSON" in errors[2] and "JSON object" in errors[4] and "UTF-8" in errors[5] and "longer" in errors[7]


# ---------------------------------------------------------------- dedup


def test_exact_dedup_normalises_case_and_whitespace_only():
    d = ExactDedup()
    assert d.check(1, "What is  2+2?") is None
    assert d.check(2, "what is 2+2?\n") == 1
    assert d.check(3, "what is 2-2?") is None


def test_lsh_oracle_collision_probabilities():
    """The reconstruction's oracle for 16 x 8 bands (docs/data.md, Near duplicates), and the parameters used by
    default (recall-weighted for 0.7)."""
    p = lambda j, b, r: 1 - (1 - j ** r) ** b  # noqa: E731
    assert p(0.9, 16, 8) == pytest.approx(0.9999, abs=1e-3) and p(0.3, 16, 8) == pytest.approx(0.0010, abs=1e-4)
    d = NearDedup()
    assert d.bands * d.rows <= 128 and p(0.8, d.bands, d.rows) > 0.99 and p(0.3, d.bands, d.rows) < 0.05


def _dedup_rows(rng, n_distinct=400):
    """Distinct rows (some sharing a 10-word prefix), planted exact and near duplicates of some of them."""
    rows, planted = [], {}
    bases = [sentence(rng, rng.randint(100, 140)) for _ in range(n_distinct)]
    prefix = sentence(rng, 10)
    for i in range(0, n_distinct, 10):  # same opening, different rest: not duplicates
        bases[i] = prefix + " " + bases[i]
    for i, text in enumerate(bases):
        rows.append({"id": f"d{i}", "prompt": text, "answer": str(i)})
    for j, i in enumerate(rng.sample(range(n_distinct), 30)):
        kind = j % 3
        if kind == 0:
            text, reason = bases[i].upper().replace(" ", "  "), "exact_duplicate"
        else:
            text, reason = change_words(rng, bases[i], kind + 1), "near_duplicate"  # 2 or 3 words changed
        at = rng.randint(next(n for n, r in enumerate(rows) if r["id"] == f"d{i}") + 1, len(rows))
        rows.insert(at, {"id": f"p{j}", "prompt": text, "answer": str(i)})
        planted[f"p{j}"] = (f"d{i}", reason)
    return rows, planted


def test_dedup_removes_planted_duplicates_and_nothing_else(tmp_path):
    rows, planted = _dedup_rows(random.Random(7))
    src = write_jsonl(tmp_path / "in.jsonl", rows)
    rep = clean_file(src, tmp_path / "out.jsonl", CleanOptions(), tmp_path / "rep.json")
    line_of = {r["id"]: n for n, r in enumerate(rows, start=1)}
    removed = {e["id"]: e for e in rep["rows"]}
    assert set(removed) == set(planted)  # every planted row, no distinct row
    for pid, (orig, reason) in planted.items():
        assert removed[pid]["reason"] == reason and removed[pid]["evidence"]["duplicate_of_line"] == line_of[orig]
        if reason == "near_duplicate":
            assert 0.7 <= removed[pid]["evidence"]["jaccard"] < 1.0
    assert kept_ids(tmp_path / "out.jsonl") == [r["id"] for r in rows if r["id"] not in planted]
    assert rep["counts"]["exact_duplicate"] == 10 and rep["counts"]["near_duplicate"] == 20
    assert json.loads((tmp_path / "rep.json").read_text())["counts"] == rep["counts"]


def test_near_dedup_no_false_positives_over_many_random_rows():
    rng = random.Random(3)
    d = NearDedup()
    hits = [d.check(i, sentence(rng, rng.randint(20, 80))) for i in range(3000)]
    assert not any(hits)


# ---------------------------------------------------------------- benchmark overlap


def test_benchmark_overlap_removed_with_evidence(tmp_path):
    rng = random.Random(5)
    bench_q = [sentence(rng, 30) for _ in range(20)]
    bench = write_jsonl(tmp_path / "gsm8k_test.jsonl", [{"question": q, "answer": "7"} for q in bench_q])
    txt = tmp_path / "arc.txt"
    passage = sentence(rng, 25)
    pw = passage.split()
    txt.write_text("header line\n\n" + " ".join(pw[:10]) + "\n" + " ".join(pw[10:]) + "\n")  # a 2-line paragraph
    leaked = bench_q[4].split()[5:18]  # exactly 13 tokens of benchmark item 5 (line 5)
    twelve = bench_q[7].split()[:12]  # only 12: not an overlap
    rows = [{"id": "leak", "prompt": "Solve: " + " ".join(leaked).upper() + "!"},
            {"id": "short", "prompt": " ".join(twelve) + " " + sentence(rng, 20)},
            {"id": "txt", "prompt": "Read: " + " ".join(words(passage)[3:17])},
            {"id": "clean", "prompt": sentence(rng, 40)}]
    src = write_jsonl(tmp_path / "in.jsonl", rows)
    rep = clean_file(src, tmp_path / "out.jsonl", CleanOptions(benchmarks=[bench, txt]))
    got = {e["id"]: e for e in rep["rows"]}
    assert set(got) == {"leak", "txt"}
    assert got["leak"]["reason"] == "benchmark_overlap"
    assert got["leak"]["evidence"] == {"benchmark": str(bench), "benchmark_line": 5, "ngram": " ".join(leaked)}
    assert got["txt"]["evidence"]["benchmark"] == str(txt) and got["txt"]["evidence"]["benchmark_line"] == 3
    assert kept_ids(tmp_path / "out.jsonl") == ["short", "clean"]
    assert rep["settings"]["benchmarks"][0]["items"] == 20


def test_benchmark_items_shorter_than_n_are_counted(tmp_path):
    idx = BenchmarkIndex([write_jsonl(tmp_path / "b.jsonl", [{"q": "one two three"}, "{bad"])], n=13)
    assert idx.summary()[0]["too_short"] == 1 and idx.summary()[0]["malformed"] == 1
    assert idx.find("one two three four") is None


# ---------------------------------------------------------------- label re-verification


def test_e2_oracles():
    r = Relabeler("math", workers=1)
    items = [("q", "1/2", {"gold": "0.5"}), ("q", "\\frac{12}{36}", {"gold": "1/3"}),
             ("q", "2", {"gold": "-2 or 2"}), ("q", "3", {"gold": "2"})]
    assert [v.status for v in r.judge(items)] == ["clean", "clean", "clean", "wrong_label"]
    r.close()
    assert members("-2 or 2") == ["-2", "2"] and members("\\pm 3") == ["3", "-3"]
    assert members("1,234") == ["1,234"] and members("(1, 2)") == ["(1, 2)"]


def test_self_check_and_ambiguous_labels():
    r = Relabeler("numeric", workers=1)
    v = r.judge([("q", "12", {}), ("q", "twelve", {}), ("q", "1 or 2", {}), ("q", "12", {"gold": "x"})])
    r.close()
    assert [x.status for x in v] == ["clean", "wrong_label", "ambiguous", "ambiguous"]
    assert v[0].mode == "self" and v[3].mode == "reference" and "not a number" in v[3].reason


def test_wrong_labels_flagged_correct_kept(tmp_path):
    rows = []
    for i in range(40):
        a, b = i + 3, 2 * i + 1
        wrong = i % 8 == 0
        rows.append({"id": f"r{i}", "prompt": f"Tom has {a} apples and buys {b} more. How many? (case {i})",
                     "solution": f"He has {a} + {b} = {a + b} apples.\n#### {a + b}",
                     "answer": str(a + b + 1 if wrong else a + b)})
    src = write_jsonl(tmp_path / "in.jsonl", rows)
    rep = clean_file(src, tmp_path / "out.jsonl", CleanOptions(verifier="math", dedup=False))
    flagged = {e["id"]: e for e in rep["rows"]}
    assert set(flagged) == {f"r{i}" for i in range(0, 40, 8)}
    e = flagged["r8"]
    assert e["reason"] == "wrong_label" and e["evidence"]["reference_field"] == "solution"
    assert e["evidence"]["label"] == "29" and e["evidence"]["verifier"] == "math"
    assert len(kept_ids(tmp_path / "out.jsonl")) == 35


# ---------------------------------------------------------------- the whole pipeline, streaming


def test_streaming_20k_rows_stays_modest(tmp_path):
    rng = random.Random(11)
    path = tmp_path / "big.jsonl"
    with path.open("w") as f:
        for i in range(20000):
            f.write(json.dumps({"id": i, "prompt": sentence(rng, rng.randint(60, 120)), "answer": str(i)}) + "\n")
            if i % 1000 == 999:
                f.write("{broken\n")
    t0 = time.perf_counter()
    rep = clean_file(path, tmp_path / "out.jsonl", CleanOptions())  # exact + near dedup
    assert time.perf_counter() - t0 < 120 and rep["rows_per_second"] > 200
    assert rep["counts"]["kept"] == 20000 and rep["counts"]["malformed"] == 20
    assert [e["line"] for e in rep["rows"]][:2] == [1001, 2002]
    tracemalloc.start()
    rep = clean_file(path, tmp_path / "out.jsonl", CleanOptions(near=False))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert rep["counts"]["kept"] == 20000
    # the rows are never held: exact dedup keeps a digest and a line number per row (~200 bytes)
    assert peak < path.stat().st_size / 3, (peak, path.stat().st_size)


def test_cli_end_to_end(tmp_path):
    rng = random.Random(2)
    bench = write_jsonl(tmp_path / "bench.jsonl", [{"question": sentence(rng, 20)}])
    leak = " ".join(json.loads(bench.read_text())["question"].split()[:14])
    base = sentence(rng, 120)
    rows = [{"id": "a", "prompt": base, "answer": "4", "gold": "4"},
            {"id": "dup", "prompt": base, "answer": "4", "gold": "4"},
            {"id": "near", "prompt": change_words(rng, base, 2), "answer": "4", "gold": "4"},
            "not json",
            {"id": "leak", "prompt": leak, "answer": "1", "gold": "1"},
            {"id": "wrong", "prompt": sentence(rng, 30), "answer": "5", "gold": "6"},
            {"id": "ok", "prompt": sentence(rng, 30), "answer": "0.5", "gold": "1/2"}]
    src = write_jsonl(tmp_path / "in.jsonl", rows)
    out, report = tmp_path / "out.jsonl", tmp_path / "r.json"
    res = runner.invoke(app, ["data", "clean", str(src), "--out", str(out), "--benchmark", str(bench),
                              "--verify", "math", "--report", str(report)])
    assert res.exit_code == 0, res.output
    assert kept_ids(out) == ["a", "ok"]
    rep = json.loads(report.read_text())
    assert {e["line"]: e["reason"] for e in rep["rows"]} == {2: "exact_duplicate", 3: "near_duplicate", 4: "malformed",
                                                           5: "benchmark_overlap", 6: "wrong_label"}
    assert "near duplicates" in res.output
    assert "different answer" not in res.output  # the exact duplicate repeats its answer
    res = runner.invoke(app, ["data", "clean", str(tmp_path / "missing.jsonl"), "--out", str(out)])
    assert res.exit_code == 2 and "no such file" in res.output


# ---------------------------------------------------------------- merge


@pytest.fixture(scope="module")
def two_models(tmp_path_factory):
    from rlvr.models.tiny import TinyModelConfig, build_tiny_model, char_tokenizer

    root = tmp_path_factory.mktemp("models")
    tok = char_tokenizer()
    cfg = TinyModelConfig(hidden_size=32, intermediate_size=64, num_layers=1)
    dirs = []
    for seed, name in ((0, "a"), (1, "b")):
        m = build_tiny_model(cfg, tok, seed=seed)
        m.save_pretrained(root / name)
        tok.save_pretrained(root / name)
        dirs.append(root / name)
    big = build_tiny_model(TinyModelConfig(hidden_size=32, intermediate_size=128, num_layers=1), tok, seed=2)
    big.save_pretrained(root / "wide")
    return (*dirs, root / "wide")


def _state(path):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(path).state_dict()


@pytest.mark.parametrize("alpha", [0.0, 1.0, 0.5, 0.25])
def test_merge_interpolates(two_models, tmp_path, alpha):
    a, b, _ = two_models
    res = runner.invoke(app, ["merge", str(a), str(b), "--alpha", str(alpha), "--out", str(tmp_path / "m")])
    assert res.exit_code == 0, res.output
    sa, sb, sm = _state(a), _state(b), _state(tmp_path / "m")
    assert (tmp_path / "m" / "model.safetensors").is_file() and (tmp_path / "m" / "tokenizer.json").is_file()
    for k in sa:
        if alpha in (0.0, 1.0):
            assert torch.equal(sm[k], sa[k] if alpha == 0.0 else sb[k]), k
        else:
            assert torch.allclose(sm[k], (1 - alpha) * sa[k] + alpha * sb[k], atol=1e-7), k
    assert not torch.equal(sa["model.embed_tokens.weight"], sb["model.embed_tokens.weight"])


def test_merge_mismatch_errors(two_models, tmp_path):
    a, _, wide = two_models
    res = runner.invoke(app, ["merge", str(a), str(wide), "--out", str(tmp_path / "m")])
    assert res.exit_code == 2 and "shape mismatch" in res.output and "mlp" in res.output
    cfg = json.loads((wide / "config.json").read_text())
    cfg["model_type"], cfg["architectures"] = "gpt2", ["GPT2LMHeadModel"]
    other = tmp_path / "other"
    other.mkdir()
    (other / "config.json").write_text(json.dumps(cfg))
    res = runner.invoke(app, ["merge", str(a), str(other), "--out", str(tmp_path / "m")])
    assert res.exit_code == 2 and "different architectures" in res.output
    res = runner.invoke(app, ["merge", str(a), str(a), "--alpha", "1.5", "--out", str(tmp_path / "m")])
    assert res.exit_code == 2 and "alpha must be in [0, 1]" in res.output


def test_cli_warns_of_duplicates_with_another_answer(tmp_path):
    """The same prompt under two answers: the second row goes as a duplicate, and the summary says its label
    disagreed with the kept row's, since one of the two is wrong. A near duplicate whose answer differs (a
    changed number) may be another problem: it is marked and warned of too, with its own advice."""
    rng = random.Random(5)
    a, b, c = sentence(rng, 30), sentence(rng, 30), sentence(rng, 60)
    rows = [{"id": "a", "prompt": a, "answer": "4"}, {"id": "b", "prompt": b, "answer": "7"},
            {"id": "c", "prompt": c + " 17 apples", "answer": "17"},
            {"id": "a2", "prompt": a.upper(), "answer": "5"}, {"id": "b2", "prompt": b, "answer": "7"},
            {"id": "c2", "prompt": c + " 18 apples", "answer": "18"}, {"id": "c3", "prompt": c + " 19 apples",
                                                                       "answer": "17"}]
    src = write_jsonl(tmp_path / "in.jsonl", rows)
    out, report = tmp_path / "out.jsonl", tmp_path / "r.json"
    res = runner.invoke(app, ["data", "clean", str(src), "--out", str(out), "--report", str(report)])
    assert res.exit_code == 0, res.output
    assert kept_ids(out) == ["a", "b", "c"]
    ev = {e["line"]: e["evidence"] for e in json.loads(report.read_text())["rows"]}
    assert ev[4] == {"duplicate_of_line": 1, "answer_differs": True}
    assert ev[5] == {"duplicate_of_line": 2, "answer_differs": False}
    assert (ev[6]["duplicate_of_line"], ev[6]["answer_differs"]) == (3, True)
    assert (ev[7]["duplicate_of_line"], ev[7]["answer_differs"]) == (3, False)
    flat = " ".join(res.output.split())
    assert "4: of line 1, another answer" in flat and "of line 2, another" not in flat
    assert "1 exact duplicate(s) had a different answer from the row kept (lines 4)" in flat
    assert "1 near duplicate(s) had a different answer from the row kept (lines 6)" in flat
