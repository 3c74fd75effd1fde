"""SSB (arXiv:2512.05105): the hand-worked oracles (the KD loss with T = 2 on a 2-way vocabulary; the majority
wrong answer), final answers, curation with a scripted engine (the teacher prompt holds both attempts; mixes only;
a wrong robust solution is dropped), distillation moves the student toward the frozen teacher and leaves the
teacher alone, and ``rlvr sft`` with ``sft.method=ssb`` curates, writes its rows and trains."""

import json
import math
import random

import pytest
import torch

from rlvr.config.train import SSBConfig
from rlvr.core.types import Completion, Example
from rlvr.models import TinyModelConfig, build_tiny_model, char_tokenizer
from rlvr.rollout.demos import question_text
from rlvr.sft.ssb import SSBRow, _logits, curate, distill, final_answer, kd_loss, select_pair
from rlvr.core.batch import build_batch
from tests.methods.helpers import tiny_overrides
from tests.methods.seed_support import BINARY


def test_the_kd_loss_oracle():
    teacher = torch.tensor([[[2.0, 0.0]]])
    student = torch.zeros(1, 1, 2)
    mask = torch.ones(1, 1)
    assert kd_loss(student, teacher, mask, 2.0).item() == pytest.approx(0.4438, abs=1e-4)
    pt = torch.softmax(torch.tensor([1.0, 0.0]), 0)
    want = 4 * float((pt * (pt / 0.5).log()).sum())
    assert kd_loss(student, teacher, mask, 2.0).item() == pytest.approx(want, rel=1e-6)
    assert kd_loss(teacher, teacher, mask, 2.0).item() == pytest.approx(0.0, abs=1e-7)
    # averaged over the selected tokens only: a masked token with a huge gap changes nothing
    s2 = torch.cat([student, torch.tensor([[[9.0, -9.0]]])], 1)
    t2 = torch.cat([teacher, torch.tensor([[[-9.0, 9.0]]])], 1)
    assert kd_loss(s2, t2, torch.tensor([[1.0, 0.0]]), 2.0).item() == pytest.approx(0.4438, abs=1e-4)


def test_the_majority_wrong_answer_is_the_one_shown():
    attempts = [("so \\boxed{12}", True), ("I get \\boxed{7}", False), ("it is \\boxed{7}.", False),
                ("\\boxed{12}!", True)]
    assert select_pair(attempts, random.Random(0)) == ("so \\boxed{12}", "I get \\boxed{7}")
    # no majority: a random wrong answer, its first attempt; none without a mix, or without a parsable answer
    picks = {select_pair([("\\boxed{1}", True), ("\\boxed{2}", False), ("\\boxed{3}", False)],
                         random.Random(s))[1] for s in range(20)}
    assert picks == {"\\boxed{2}", "\\boxed{3}"}
    assert select_pair([("\\boxed{1}", True), ("\\boxed{1}", True)], random.Random(0)) is None
    assert select_pair([("\\boxed{1}", True), ("", False)], random.Random(0)) is None


def test_final_answers():
    assert final_answer("a \\boxed{\\frac{1}{2}} then \\boxed{x^{2}}") == "x^{2}"
    assert final_answer("unclosed \\boxed{3 and 4 and 5") == "5"
    assert final_answer("the sum is 19, not 20.") == "20"
    assert final_answer("yes\n\n  maybe  \n") == "maybe"
    assert final_answer("") is None


class _Task:
    def score_batch(self, examples, texts):
        class S:
            def __init__(self, ok):
                self.correct = ok
        return [S(final_answer(t) == ex.answer) for ex, t in zip(examples, texts)]


class _Scripted:
    """Returns the scripted texts: attempts by example id, robust solutions for teacher prompts."""

    def __init__(self, attempts, robust):
        self.attempts, self.robust, self.prompts = attempts, robust, []

    def sync_weights(self):
        pass

    def generate(self, requests, sampling):
        out = []
        for g, r in enumerate(requests):
            self.prompts.append(r.example.prompt)
            texts = (self.attempts[r.example.id] if r.n > 1 else [self.robust[r.example.id]])[: r.n]
            out += [Completion(r.example.id, [1], [5, 6], [0.0, 0.0], "stop", t, group=g) for t in texts]
        return out


def test_curation_keeps_mixes_with_a_correct_robust_solution():
    exs = [Example("a", "What is 5+7?", "12"), Example("b", "What is 2+2?", "4"), Example("c", "1+1?", "2")]
    eng = _Scripted({"a": ["12", "7", "7", "12"], "b": ["4", "4", "4", "4"], "c": ["2", "3", "3", "2"]},
                    {"a": "Add: 5 + 7 = 12", "c": "1 + 1 = 3"})
    rows = curate(eng, _Task(), None, exs, SSBConfig(), max_new_tokens=8, seed=0)
    assert [r.example.id for r in rows] == ["a"]  # b has no wrong attempt; c's robust solution is wrong
    teacher = question_text(rows[0].teacher)
    assert "What is 5+7?" in teacher and "---\n12\n---" in teacher and "---\n7\n---" in teacher
    assert rows[0].solution == "Add: 5 + 7 = 12" and rows[0].example.prompt == "What is 5+7?"
    assert eng.prompts.count("What is 2+2?") == 1  # b was attempted, never sent to the teacher


def test_distillation_moves_the_student_toward_the_frozen_teacher():
    tok = char_tokenizer("abcd 0123456789+=")
    model = build_tiny_model(TinyModelConfig(hidden_size=32, intermediate_size=64, num_layers=1), tok, seed=0)
    rows = []
    for i in range(6):
        ex = Example(f"e{i}", f"{i}+1=", str(i + 1))
        teacher = Example(f"e{i}", f"hint {i + 1}. {i}+1=", str(i + 1))
        ids = tuple(tok(str(i + 1), add_special_tokens=False)["input_ids"])
        rows.append(SSBRow(ex, teacher, ids, str(i + 1)))
    before = {k: v.clone() for k, v in model.state_dict().items()}

    def gap(student) -> float:
        enc = lambda e, r: Completion(e.id, list(tok(e.prompt)["input_ids"]), list(r.solution_ids) + [tok.eos_token_id],
                                      None, "stop", "")
        sb = build_batch([enc(r.example, r) for r in rows], [0.0] * 6, tok.pad_token_id)
        tb = build_batch([enc(r.teacher, r) for r in rows], [0.0] * 6, tok.pad_token_id)
        ref = build_tiny_model(TinyModelConfig(hidden_size=32, intermediate_size=64, num_layers=1), tok, seed=0)
        with torch.no_grad():
            return kd_loss(_logits(student, sb), _logits(ref, tb), sb.completion_mask, 2.0).item()

    start = gap(model)
    losses = distill(model, tok, rows, SSBConfig(), steps=30, batch_size=6, lr=3e-3)
    assert len(losses) == 30 and losses[-1] < 0.5 * losses[0]
    assert gap(model) < 0.5 * start  # the teacher is the model as it was: the copy, not the trained student
    assert any(not torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert distill(model, tok, [], SSBConfig(), steps=5, batch_size=2, lr=1e-3) == []


def test_rlvr_sft_with_ssb_curates_writes_its_rows_and_trains(tmp_path):
    from typer.testing import CliRunner

    from rlvr.cli import app

    # a parity verifier: about half of any model's attempts are correct, so problems have mixes
    overrides = [o for o in tiny_overrides(tmp_path) + BINARY if not o.startswith(("out=", "sft."))]
    sets = sum((["--set", o] for o in overrides), [])
    sets += ["--set", "sft.method=ssb", "--set", "sft.ssb.rollouts=4", "--set", "sft.steps=3",
             "--set", "sft.batch_size=4", "--set", "sft.warmup_steps=0", "--set", "task.eval_fraction=0.25"]
    r = CliRunner().invoke(app, ["sft", "--out", str(tmp_path / "s")] + sets)
    assert r.exit_code == 0, r.output
    data = tmp_path / "s" / "ssb_data.jsonl"
    assert (tmp_path / "s" / "model" / "config.json").is_file()
    rows = [json.loads(line) for line in data.read_text().splitlines()]
    assert rows, "no curated row: the parity verifier should give mixes"
    for row in rows:
        assert row["question"] in row["teacher_prompt"] and row["solution"]
    result = json.loads((tmp_path / "s" / "sft.json").read_text())
    assert math.isfinite(result["final_loss"]) and result["final_loss"] > 0
