"""PROPA's process reward model: its rows from a search tree (the reference's rules), learning soft labels,
checkpoint files, the step-level best-of-N search it guides, and `rlvr eval --search prm` on a trained run."""

import random

import torch

from rlvr.core.types import Completion, Example, GenerationRequest, SamplingParams
from rlvr.models import ModelConfig, TinyModelConfig, load_model
from rlvr.models.tiny import char_tokenizer
from rlvr.learners.prm import ProcessRewardModel
from rlvr.eval.prm_search import PRMSearchWrapper
from rlvr.rollout.strategies.propa_tree import Node, log_boost, prm_rows


def _node(parent, ids, visits=0, value=0.0):
    n = Node(list(ids), [0.0] * len(ids), parent, visits=visits, value=value,
             depth=0 if parent is None else parent.depth + 1)
    if parent is not None:
        parent.children.append(n)
    return n


def test_prm_rows_follow_the_reference_rules():
    root = _node(None, [])
    a = _node(root, [1], visits=2, value=1.0)
    _node(root, [2])  # unvisited, a sibling (a) has Q 0.5: label 0
    a1 = _node(a, [3], visits=1, value=1.0)
    _node(a, [4])  # unvisited beside a1 (Q 1): label 0
    z = _node(a1, [5], visits=1, value=0.0)
    _node(a1, [6])  # unvisited, its only sibling has Q 0: left out
    rows = prm_rows("q", root, [9, 9])
    got = [(r.completion_ids, lab) for r, lab in rows]
    assert got == [([1], log_boost(0.5)), ([1, 3], 1.0), ([1, 3, 5], 0.0), ([1, 4], 0.0), ([2], 0.0)]
    assert all(r.prompt_ids == [9, 9] for r, _ in rows) and z.visits == 1


def _tiny():
    return load_model(ModelConfig(tiny=TinyModelConfig(hidden_size=32, intermediate_size=64, num_layers=1)), seed=0)


def test_the_prm_learns_soft_labels_and_round_trips_through_its_files(tmp_path):
    model, tok = _tiny()
    prm = ProcessRewardModel(model, tok.pad_token_id, lr=3e-3, batch_size=4)
    enc = lambda s: tok(s)["input_ids"]  # noqa: E731
    rows = [Completion("q", enc("x="), enc(step), None, "stop", "") for step in ("good", "bad", "fine", "nope")]
    labels = [1.0, 0.0, 0.8, 0.1]
    assert prm.score(rows) == [0.5] * 4  # a zero head: every prefix at 0.5
    losses = [prm.update(rows, labels, seed=i)["prm/loss"] for i in range(60)]
    assert losses[-1] < 0.6 * losses[0]
    s = prm.score(rows)
    assert s[0] > s[2] > s[3] and s[0] > s[1] and s[2] > s[1]
    prm.save(tmp_path)
    other = ProcessRewardModel(model, tok.pad_token_id, lr=3e-3, batch_size=4)
    other.load(tmp_path)
    assert other.score(rows) == s
    assert other.optimizer.state_dict()["state"][0]["step"] == prm.optimizer.state_dict()["state"][0]["step"]


class Steps:
    """Sampled steps 'a\\n' / 'b\\n' / 'end' + EOS (seeded), so a search can be steered by its scorer."""

    def __init__(self, tok):
        self.tok = tok

    def sync_weights(self):
        pass

    def generate(self, requests, sampling):
        rng, out = random.Random(sampling.seed), []
        for gi, req in enumerate(requests):
            for _ in range(req.n):
                pick = rng.choice(["a\n", "b\n", "end"])
                new = self.tok(pick)["input_ids"] + ([self.tok.eos_token_id] if pick == "end" else [])
                new = new[: req.max_new_tokens if req.max_new_tokens is not None else sampling.max_new_tokens]
                ids = list(req.prefix_ids) + new
                out.append(Completion(req.example.id, self.tok("q")["input_ids"], ids, [-1.0] * len(ids), "stop",
                                      "", group=gi))
        return out


def test_the_search_keeps_the_step_the_scorer_likes_best():
    tok = char_tokenizer()
    seen = []

    def prefers_a(rows):  # a's are good, the end is good only after three a's
        seen.append(len(rows))
        out = []
        for r in rows:
            text = tok.decode(r.completion_ids, skip_special_tokens=True)
            out.append(text.count("a") + (10 if text.count("a") >= 3 and text.endswith("end") else 0)
                       - (5 if text.endswith("end") and text.count("a") < 3 else 0))
        return out

    eng = PRMSearchWrapper(Steps(tok), tok, prefers_a, candidates=6, max_steps=8, terminal="end")
    comps = eng.generate([GenerationRequest(Example("q", "q", "1"), 2), GenerationRequest(Example("r", "q", "1"), 1)],
                         SamplingParams(temperature=1.0, max_new_tokens=40, seed=0))
    assert [c.group for c in comps] == [0, 0, 1]
    for c in comps:
        assert c.text == "a\na\na\nend" and c.finish_reason == "stop" and c.completion_ids[-1] == tok.eos_token_id
        assert c.logprobs == [-1.0] * len(c.completion_ids)
    assert all(k % 6 == 0 for k in seen)  # every candidate of every live search is scored
    short = PRMSearchWrapper(Steps(tok), tok, prefers_a, candidates=6, max_steps=2, terminal="end")
    (c,) = short.generate([GenerationRequest(Example("q", "q", "1"), 1)], SamplingParams(max_new_tokens=40, seed=0))
    assert c.text == "a\na\n" and c.finish_reason == "length"  # max_steps ends the search


def test_a_propa_run_trains_its_prm_resumes_it_and_evaluates_with_search(tmp_path):
    import shutil

    from safetensors.torch import load_file

    from rlvr.config.run import load_config
    from rlvr.run.train import eval_model, resume, train
    from tests.methods.helpers import tiny_overrides
    from tests.methods.seed_support import BINARY

    over = tiny_overrides(tmp_path) + list(BINARY) + [
        "rollout.strategy.prm=true", "rollout.strategy.iterations=3", "train.steps=2", "train.checkpoint_every=1",
        "train.keep_checkpoints=3", "sft.interleave_every=0"]
    train(load_config(recipe="propa", overrides=over))
    run = tmp_path / "run"
    one, two = (run / "checkpoints" / f"step_00000{k}" / "prm" / "prm.safetensors" for k in (1, 2))
    a, b = load_file(str(one)), load_file(str(two))
    assert any(not torch.equal(a[k], b[k]) for k in a)  # it trained between the checkpoints
    part = tmp_path / "part"
    shutil.copytree(run, part)
    shutil.rmtree(part / "checkpoints" / "step_000002")
    resume(part / "checkpoints" / "step_000001")
    c = load_file(str(part / "checkpoints" / "step_000002" / "prm" / "prm.safetensors"))
    assert all(torch.equal(b[k], c[k]) for k in b)  # the resumed run trains the same PRM
    cfg = load_config(run / "config.yaml", overrides=["eval.search.name=prm", "eval.search.candidates=2",
                                                 "eval.search.max_steps=2", "eval.samples=1"])
    result = eval_model(cfg, run)
    assert result["num_examples"] > 0 and 0.0 <= result["accuracy"] <= 1.0
    # the command line: --search prm reads the run's PRM; a run without one is refused with the reason
    from typer.testing import CliRunner

    from rlvr.cli import app

    res = CliRunner().invoke(app, ["eval", "--model", str(run), "--search", "prm", "-n", "1", "--num-examples", "2",
                                   "--set", "eval.search.candidates=2", "--set", "eval.search.max_steps=2",
                                   "--output", str(tmp_path / "e.json")])
    assert res.exit_code == 0, res.output
    bare = tmp_path / "bare"
    shutil.copytree(run, bare)
    for ck in (bare / "checkpoints").iterdir():
        shutil.rmtree(ck / "prm")
    res = CliRunner().invoke(app, ["eval", "--model", str(bare), "--search", "prm", "-n", "1", "--num-examples", "2"])
    assert res.exit_code == 2 and "no process reward model" in res.output
