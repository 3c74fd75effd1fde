"""MURPHY: a hand-worked credit oracle, MaRS / MeRS against a recursive computation on random trees, the tree on a
scripted policy and a task whose scores and feedback the test controls (top-k pruning, passing nodes left alone,
refinement prefixes masked, labels = R), the code verifier's feedback in the sandbox, and the recipe through the
trainer."""

import math
import random

import pytest

from rlvr.core.types import Completion, Example, GenerationRequest, SamplingParams, Score
from rlvr.models.tiny import char_tokenizer
from rlvr.rollout.strategies.murphy import (MurphyWrapper, MurphyParams, feedback_text, pass_fraction, retrospective_credit,
                                 top_failing)

# ---- credit ----------------------------------------------------------------------------------------------


def test_methods_oracle_mars_and_mers():
    # A (r 0) -> (1, 0); B (r 0) -> (0, 0); C (r 1, passing, no children)
    r, ok, parent = [0, 0, 1, 1, 0, 0, 0], [False, False, True, True, False, False, False], [-1, -1, -1, 0, 0, 1, 1]
    mars = retrospective_credit(r, ok, parent, "max")
    assert mars[:3] == [1.0, 0.0, 1.0]
    mers = retrospective_credit(r, ok, parent, "mean")
    assert mers[:3] == pytest.approx([1 / 3, 0.0, 1.0])
    assert mars[3:] == mers[3:] == [1.0, 0.0, 0.0, 0.0]  # leaves keep r
    with pytest.raises(ValueError):
        retrospective_credit([0, 0], [False, False], [1, -1])


def _random_tree(rng, depth):
    node = {"r": rng.choice([0.0, 0.25, 0.5, 1.0, rng.random()]), "kids": []}
    node["ok"] = node["r"] >= 1.0 or rng.random() < 0.1
    if depth > 1:
        node["kids"] = [_random_tree(rng, depth - 1) for _ in range(rng.randint(0, 3))]
    return node


def _recursive(node, rule):
    if node["ok"] or not node["kids"]:
        return node["r"]
    vals = [_recursive(k, rule) for k in node["kids"]]
    return max([node["r"]] + vals) if rule == "max" else sum([node["r"]] + vals) / (1 + len(vals))


def test_credit_equals_a_recursive_computation_on_random_trees():
    rng = random.Random(0)
    for _ in range(200):
        roots = [_random_tree(rng, rng.randint(1, 4)) for _ in range(rng.randint(1, 4))]
        flat, parent = [], []
        queue = [(n, -1) for n in roots]
        while queue:  # breadth first: parents before children, as the strategy creates them
            n, p = queue.pop(0)
            flat.append(n)
            parent.append(p)
            queue += [(k, len(flat) - 1) for k in n["kids"]]
        for rule in ("max", "mean"):
            got = retrospective_credit([n["r"] for n in flat], [n["ok"] for n in flat], parent, rule)
            assert got == pytest.approx([_recursive(n, rule) for n in flat], abs=1e-12)


def test_top_failing_and_score_reading():
    assert top_failing([0.5, 0.0, 1.0, 0.2, 0.5], [False, False, True, False, False], 2) == [0, 4]
    assert top_failing([0.5, 0.0, 1.0, 0.2], [False, False, True, False], None) == [0, 1, 3]
    code = Score(0.0, {"code": 0.0, "correct": 0.0}, {"code.passed": 1, "code.total": 4, "code.reason":
                 "3 of 4 tests failed; first: t1", "code.failures": ["t1: expected 3, got -1", "t2: boom"]})
    assert pass_fraction(code) == 0.25
    assert feedback_text(code) == ("3 of 4 tests failed; first: t1\nFailing tests:\n- t1: expected 3, got -1\n"
                                   "- t2: boom")
    assert feedback_text(Score(0.0, {}, {"env.feedback": "  look at line 2 "})) == "look at line 2"
    assert feedback_text(Score(0.0), "nope") == "nope" and pass_fraction(Score(0.4)) == 0.4
    assert pass_fraction(Score(0.0, {"pass_fraction": 0.5})) == 0.5


# ---- the tree on a scripted policy -----------------------------------------------------------------------

FB = "\n[{feedback}]\n"  # a short template: the feedback between brackets


class ScriptedEngine:
    """Attempts are 'sX;' where X in 0-9 is a pass fraction of X/10 and 'A' passes; what is sampled after a
    prefix is ``script[last attempt in the prefix]`` (turn 1: ``script[""]``), cycled over the n samples."""

    def __init__(self, tok, script, logprobs=True):
        self.tok, self.script, self.logprobs, self.calls = tok, script, logprobs, []

    def sync_weights(self):
        pass

    def generate(self, requests, sampling):
        self.calls.append([(self.tok.decode(list(r.prefix_ids)), r.n, r.max_new_tokens) for r in requests])
        out = []
        for gi, req in enumerate(requests):
            out.append([])
            prompt = self.tok(req.example.prompt)["input_ids"]
            prefix = list(req.prefix_ids)
            text = self.tok.decode(prefix)
            last = text[text.rindex("s"): text.rindex(";") + 1] if ";" in text else ""
            for j in range(req.n):
                new = self.tok(self.script[last][j % len(self.script[last])])["input_ids"] + [self.tok.eos_token_id]
                new = new[: req.max_new_tokens if req.max_new_tokens is not None else sampling.max_new_tokens]
                lps = None if not self.logprobs or (prefix and req.prefix_logprobs is None) else \
                    list(req.prefix_logprobs or ()) + [-0.5] * len(new)
                out[-1].append(Completion(req.example.id, prompt, prefix + new, lps, "stop",
                                          self.tok.decode(prefix + new), group=gi))
        return [c for part in out[::-1] for c in part]  # requests out of order: the strategy sorts them


class ScriptedTask:
    def __init__(self):
        self.scored = []

    def score(self, example, text):
        return self.score_batch([example], [text])[0]

    def score_batch(self, examples, texts):
        out = []
        for t in texts:
            self.scored.append(t)
            ok = t.startswith("sA")
            r = 1.0 if ok else int(t[1]) / 10
            out.append(Score(float(ok), {"correct": float(ok)}, {} if ok else {"reason": f"bad {t}"}))
            out[-1].info.update(passed=round(r * 10), total=10)
        return out


SCRIPT = {"": ["s5;", "s0;", "sA;", "s2;"], "s5;": ["sA;", "s1;"], "s2;": ["s3;", "s0;"], "s0;": ["s4;", "s4;"],
          "s1;": ["s6;", "s0;"], "s3;": ["s2;", "s7;"]}


def _run(script=SCRIPT, reqs=None, logprobs=True, **kw):
    tok = char_tokenizer()
    inner = ScriptedEngine(tok, script, logprobs)
    p = {"turns": 3, "branch": 2, "keep_failed": 2, "template": FB, **kw}
    eng = MurphyWrapper(inner, tok, MurphyParams(**p))
    task = ScriptedTask()
    eng.bind_task(task)
    reqs = reqs or [GenerationRequest(Example("q", "x=", "1"), 4)]
    comps = eng.generate(reqs, SamplingParams(max_new_tokens=400, seed=1))
    return eng, inner, task, tok, comps


def _own(tok, c):
    return tok.decode(c.completion_ids[c.tree_branch:], skip_special_tokens=True)


def test_the_tree_expands_the_top_failing_nodes_and_labels_them_with_their_credit():
    eng, inner, task, tok, comps = _run()
    # turn 1: r = .5 .0 pass .2 -> the top-2 failing are s5 and s2; turn 2: sA s1 | s3 s0 -> s3 and s1
    assert [[(p, n) for p, n, _ in call] for call in inner.calls] == [
        [("", 4)], [("s5;\n[bad s5;]\n", 2), ("s2;\n[bad s2;]\n", 2)],
        [("s5;\n[bad s5;]\ns1;\n[bad s1;]\n", 2), ("s2;\n[bad s2;]\ns3;\n[bad s3;]\n", 2)]]
    assert sorted(task.scored) == sorted(["s5;", "s0;", "sA;", "s2;", "sA;", "s1;", "s3;", "s0;", "s6;", "s0;",
                                          "s2;", "s7;"])
    assert len(comps) == 12 and {c.group for c in comps} == {0}
    by_node = {c.tree_node: c for c in comps}
    assert sorted(by_node) == list(range(1, 13))
    tree = {n: [c.tree_node for c in comps if c.tree_parent == n] for n in range(13)}
    assert [len(tree[0])] + sorted(len(v) for n, v in tree.items() if n and v) == [4, 2, 2, 2, 2]
    own = {n: _own(tok, c) for n, c in by_node.items()}
    # passing nodes (sA) and the unpicked s0 are leaves; the deepest turn is too
    for n, kids in tree.items():
        if n and kids:
            assert own[n] in ("s5;", "s2;", "s1;", "s3;") and not by_node[n].node_reward >= 1.0
    # labels = MaRS credit computed by hand: s5 -> max(.5, 1, R(s1) = max(.1, .6, 0)) = 1; s2 -> max(.2, R(s3) =
    # max(.3, .2, .7) = .7, 0) = .7
    label = {own[n]: c.process_value for n, c in by_node.items() if c.turn == 1}
    assert label == {"s5;": 1.0, "s0;": 0.0, "sA;": 1.0, "s2;": pytest.approx(0.7)}
    for c in comps:
        assert c.text == _own(tok, c)
        assert c.node_reward == pytest.approx(1.0 if c.text.startswith("sA") else int(c.text[1]) / 10)
        if not tree[c.tree_node]:
            assert c.process_value == pytest.approx(c.node_reward)  # a leaf's credit is its reward
    assert {c.turn for c in comps} == {1, 2, 3}
    m = eng.metrics()
    assert m["murphy/groups"] == 5 and m["murphy/nodes"] == 12 and m["murphy/expanded"] == 4
    assert m["murphy/first_pass"] == 0.25 and m["murphy/refine_pass"] == 1 / 8 and m["murphy/solved"] == 1.0
    assert eng.metrics() == {}


def test_refinement_rows_train_only_their_own_attempt():
    eng, inner, task, tok, comps = _run()
    for c in comps:
        mask, b = c.mask(), c.tree_branch
        assert mask == [0.0] * b + [1.0] * (len(c.completion_ids) - b)
        assert c.prompt_ids == tok("x=")["input_ids"] and c.completion_ids[-1] == tok.eos_token_id
        kinds = [(s.source, tok.decode(c.completion_ids[s.start: s.end])) for s in c.segments]
        assert kinds[-1][0] == "sampled" and kinds[-1][1].startswith(c.text[:3])
        assert [k for k, _ in kinds[:-1]] == ["prefix", "inserted"] * (c.turn - 1)
        for (k, text), nxt in zip(kinds[:-1], kinds[1:]):
            if k == "prefix":  # an earlier attempt (its EOS dropped), then the feedback it got
                assert text.startswith("s") and text.endswith(";") and nxt[1] == f"\n[bad {text}]\n"
        assert c.segments[-1].end == len(c.completion_ids) and c.segments[0].start == 0
        inserted = [i for s in c.segments if s.source == "inserted" for i in range(s.start, s.end)]
        assert all(c.logprobs[i] == 0.0 for i in inserted) and c.logprobs[-1] == -0.5
    # no behaviour log-probs from the engine: none on the rows either
    assert all(c.logprobs is None for c in _run(logprobs=False)[-1])


def test_mers_keep_all_cap_and_passing_first_turn():
    *_, comps = _run(credit="mean", keep_failed=None, turns=2)
    turn1 = {c.text: c.process_value for c in comps if c.turn == 1}
    # s5 -> mean(.5, 1, .1); s0 -> mean(0, .4, .4); s2 -> mean(.2, .3, 0)
    assert turn1 == pytest.approx({"s5;": 1.6 / 3, "s0;": 0.8 / 3, "sA;": 1.0, "s2;": 0.5 / 3})
    assert len(comps) == 4 + 3 * 2
    # everything passes at once: nothing to refine, one engine call
    eng, inner, *_, comps = _run(script={"": ["sA;"]})
    assert len(inner.calls) == 1 and len(comps) == 4 and all(c.process_value == 1.0 for c in comps)
    # max_tokens: a refinement's prefix plus its attempt fit; a prefix with no room left is not expanded
    eng, inner, *_, comps = _run(max_tokens=20)
    assert all(len(c.completion_ids) <= 20 for c in comps) and len(inner.calls) == 2
    assert all(m <= 20 - len(p) for p, _, m in inner.calls[1])


def test_drop_constant_sets_requests_apart_and_passthrough():
    script = {"": ["s1;", "s2;"], "s1;": ["s0;", "s0;"], "s2;": ["sA;", "s3;"]}
    *_, comps = _run(script=script, turns=2, drop_constant=True, reqs=[GenerationRequest(Example("q", "x=", "1"), 2)])
    assert sorted(c.text for c in comps) == ["s1;", "s2;", "s3;", "sA;"]  # s1's set is all 0: dropped
    reqs = [GenerationRequest(Example("a", "x=", "1"), 2), GenerationRequest(Example("b", "y=", "1"), 0),
            GenerationRequest(Example("c", "z=", "1"), 1, prefix_ids=(5, 6)), GenerationRequest(Example("d", "w=", "1"), 2)]
    eng, inner, task, tok, comps = _run(script=script, reqs=reqs, turns=2)
    assert {c.group for c in comps} == {0, 2, 3}
    assert [c.example_id for c in comps if c.group == 2] == ["c"]
    for g in (0, 3):
        rows = [c for c in comps if c.group == g]
        assert len(rows) == 2 + 2 * 2 and sorted(c.tree_node for c in rows) == list(range(1, 7))
    with pytest.raises(RuntimeError, match="bind_task"):
        MurphyWrapper(inner, tok, MurphyParams()).generate(reqs, SamplingParams())


def test_config_checks():
    from rlvr.config.run import ConfigError, load_config

    cfg = load_config(overrides=["rollout.strategy={name: murphy, turns: 2, branch: 3, credit: mean}"])
    assert cfg.rollout.strategy.params.branch == 3 and cfg.rollout.strategy.params.keep_failed == 2
    with pytest.raises(ConfigError, match="murphy"):
        load_config(overrides=["rollout.strategy={name: murphy}", "rollout.guidance.fraction=0.5"])


# ---- the code verifier in the sandbox --------------------------------------------------------------------


def test_code_feedback_reaches_the_refinement(tmp_path):
    from rlvr.sandbox import LocalSandbox
    from rlvr.tasks.base import Task, WeightedVerifier
    from rlvr.verifiers.code import CodeParams, CodeVerifier

    sb = LocalSandbox(use_bwrap=None)
    if sb.mode() != "bwrap":
        pytest.skip("bubblewrap is missing or cannot create namespaces here (apt-get install -y bubblewrap)")
    ex = Example("add", "Write add(a, b).", "", task="code",
                 meta={"tests": ["assert add(1, 2) == 3", "assert add(-1, 1) == 0", "assert add(2, 2) == 4"]})
    task = Task("code", {"train": [ex]}, [WeightedVerifier(CodeVerifier(CodeParams(timeout_s=2.0), sb))])
    tok = char_tokenizer()
    wrong, right = "def add(a, b):\n    return a * b\n", "def add(a, b):\n    return a + b\n"

    class Fixer(ScriptedEngine):
        def generate(self, requests, sampling):
            out = []
            for gi, req in enumerate(requests):
                prefix = list(req.prefix_ids)
                self.calls.append(tok.decode(prefix))
                for _ in range(req.n):
                    new = tok(right if "2 of 3 tests failed" in tok.decode(prefix) else wrong)["input_ids"]
                    out.append(Completion(ex.id, tok(ex.prompt)["input_ids"], prefix + new, None, "stop", "", group=gi))
            return out

    inner = Fixer(tok, {})
    eng = MurphyWrapper(inner, tok, MurphyParams(turns=2, branch=1, keep_failed=1, workers=2))
    eng.bind_task(task)
    comps = eng.generate([GenerationRequest(ex, 2)], SamplingParams(max_new_tokens=4000))
    # the verifier's reason and failing tests, after the attempt (a * b passes add(2, 2) == 4 only)
    assert inner.calls[1].startswith(wrong + "\n\nExecution feedback:\n2 of 3 tests failed; first: assert 0")
    assert "Failing tests:\n- assert 0" in inner.calls[1] and inner.calls[1].endswith("fix it.\n")
    first = [c for c in comps if c.turn == 1]
    assert [c.node_reward for c in first] == pytest.approx([1 / 3, 1 / 3])
    assert sorted(c.process_value for c in first) == pytest.approx([1 / 3, 1.0])  # the expanded one: MaRS 1
    assert [c.process_value for c in comps if c.turn == 2] == [1.0]


# ---- the recipe ------------------------------------------------------------------------------------------


def test_recipe_trains_two_steps(tmp_path):
    from rlvr.config.recipes import load_recipe
    from tests.methods.helpers import run_recipe_steps
    from tests.methods.seed_support import BINARY

    raw = load_recipe("murphy")
    assert "arXiv:2511.07833" in raw["recipe"]["citation"]
    out = run_recipe_steps("murphy", tmp_path, steps=2, overrides=list(BINARY))
    for m in out["metrics"]:
        assert all(isinstance(v, (int, float)) and math.isfinite(v) for v in m.values())
    assert any(m.get("grad_norm", 0.0) > 0 for m in out["metrics"])
    assert any(k.startswith("engine/murphy/") for m in out["metrics"] for k in m), out["metrics"][0].keys()
