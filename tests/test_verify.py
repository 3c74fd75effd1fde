"""`rlvr verify`: one output line per input line, in order; bad lines reported, never fatal."""

import json

from typer.testing import CliRunner

from rlvr.cli import app
from rlvr.cli.verify import verify_file


def _write(path, lines):
    with path.open("wb") as f:
        for ln in lines:
            f.write((json.dumps(ln) if isinstance(ln, dict) else ln).encode() if not isinstance(ln, bytes) else ln)
            f.write(b"\n")
    return path


def test_scores_good_records_and_reports_bad_ones(tmp_path):
    src = _write(tmp_path / "in.jsonl", [
        {"task": "numeric", "answer": "1/2", "completion": "0.5", "id": "a"},
        {"task": "numeric", "answer": 3, "completion": "4"},
        '{"task": "numeric", "answer": 1, ',
        b"\xff\xfe binary \x00",
        "x" * (2 << 20),
        {"task": "nope", "answer": "1", "completion": "1"},
        {"task": "exact", "answer": "Paris", "completion": " Paris"},
        {"task": "numeric", "completion": "1"},
        "",
        {"task": "exact", "answer": "a", "completion": 5},
    ])
    out = tmp_path / "out.jsonl"
    summary = verify_file(src, out, workers=2)
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert [r["line"] for r in rows] == [1, 2, 3, 4, 5, 6, 7, 8, 10]
    assert rows[0]["reward"] == 1.0 and rows[0]["id"] == "a"
    assert rows[1]["reward"] == 0.0 and rows[1]["id"] == "line-2"
    assert "invalid JSON" in rows[2]["error"] and "not UTF-8" in rows[3]["error"]
    assert "longer than" in rows[4]["error"] and "unknown verifier 'nope'" in rows[5]["error"]
    assert rows[6]["reward"] == 1.0 and "missing field 'answer'" in rows[7]["error"]
    assert "must be a string" in rows[8]["error"]
    assert summary["lines"] == 9 and summary["scored"] == 3 and summary["unusable"] == 6
    assert summary["accuracy"] == 2 / 3


def test_fixed_verifier_and_meta_reach_the_verifier(tmp_path):
    src = _write(tmp_path / "in.jsonl", [{"answer": "2", "completion": "the answer is 2", "extra": [1, 2]}])
    summary = verify_file(src, tmp_path / "o.jsonl", verifier="numeric")
    assert summary["scored"] == 1 and summary["mean_reward"] == 1.0


def test_cli_verify_writes_scores_and_summary(tmp_path):
    src = _write(tmp_path / "in.jsonl", [{"task": "numeric", "answer": "7", "completion": "7"}, "{bad"])
    r = CliRunner().invoke(app, ["verify", str(src)])
    assert r.exit_code == 0, r.output
    rows = [json.loads(x) for x in (tmp_path / "in.scores.jsonl").read_text().splitlines()]
    assert rows[0]["reward"] == 1.0 and "error" in rows[1]
    assert '"unusable": 1' in r.output
    r = CliRunner().invoke(app, ["verify", str(tmp_path / "missing.jsonl")])
    assert r.exit_code == 2


def test_defab_records_score_through_verify(tmp_path):
    from rlvr.defab.generate import generate

    recs = []
    for inst in generate(2, 2, seed=3):
        d = inst.to_json()
        base = {"task": "defab", "answer": d["gold"], "theory": d["theory"], "target": d["target"], "level": d["level"]}
        recs += [{**base, "completion": "Answer: " + d["gold"]}, {**base, "completion": "Answer: no idea"}]
    summary = verify_file(_write(tmp_path / "d.jsonl", recs), tmp_path / "o.jsonl")
    rows = [json.loads(x) for x in (tmp_path / "o.jsonl").read_text().splitlines()]
    assert [r["reward"] for r in rows] == [1.0, 0.0, 1.0, 0.0] and summary["scored"] == 4
