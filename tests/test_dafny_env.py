"""The ``dafny`` environment: the specification-hacking filters against many distinct cheats (no Dafny
needed), then, where Dafny is installed (``apt-get install -y dafny``), honest programs verified and
scored 1, honest wrong ones answered with diagnostics, cheats only Dafny's /noCheating catches, cheats
Dafny itself would accept (so the filters are what stops them), time limits, and a scripted multi-turn
rollout through the driver."""

import pytest

from rlvr.core.types import Example, GenerationRequest, SamplingParams
from rlvr.envs import ENVIRONMENTS, MultiTurnWrapper, env_factory
from rlvr.envs import dafny_env
from rlvr.envs.dafny_env import DafnyEnv, DafnyParams, dafny_available, extract_dafny, spec_violations
from rlvr.models import char_tokenizer
from tests.test_multiturn import Scripted  # a policy that says given texts, one per turn

MAX_SPEC = """// the larger of two integers
method Max(a: int, b: int) returns (m: int)
  ensures m >= a && m >= b
  ensures m == a || m == b
"""
MAX_OK = MAX_SPEC + "{\n  if a >= b { m := a; } else { m := b; }\n}\n"
SUM_SPEC = """function Sum(s: seq<int>): int { if |s| == 0 then 0 else Sum(s[..|s|-1]) + s[|s|-1] }

method ComputeSum(s: seq<int>) returns (r: int)
  ensures r == Sum(s)
"""
SUM_OK = SUM_SPEC + """{
  r := 0;
  var i := 0;
  while i < |s|
    invariant 0 <= i <= |s|
    invariant r == Sum(s[..i])
  {
    assert s[..i+1][..i] == s[..i];
    r := r + s[i];
    i := i + 1;
  }
  assert s[..|s|] == s;
}
"""
needs_dafny = pytest.mark.skipif(not dafny_available(), reason="Dafny is not installed (apt-get install -y dafny)")

CHEATS = {  # name -> (program, words its reason must contain)
    "assume false": (MAX_SPEC + "{\n  assume false;\n}\n", "assume"),
    "verify false": (MAX_OK.replace("method Max", "method {:verify false} Max"), "{:verify}"),
    "weakened ensures": (MAX_OK.replace("m == a || m == b", "m == a || m == b || true"), "last clause was changed"),
    "removed ensures": (MAX_OK.replace("  ensures m == a || m == b\n", ""), "ensures clause removed or weakened"),
    "changed signature": (MAX_OK.replace("b: int)", "b: nat)"), "signature was changed"),
    "extra requires false": (MAX_OK.replace("ensures m == a || m == b\n", "ensures m == a || m == b\n  requires false\n"),
                             "requires clause was added"),
    "requires false in the middle": (MAX_OK.replace("returns (m: int)", "returns (m: int)\n  requires false"),
                                     "clause was added to its specification: requires false"),
    "axiom lemma": ("lemma {:axiom} False() ensures false\n" + MAX_SPEC + "{\n  False();\n}\n", "{:axiom}"),
    "extern helper": ("method {:extern} Oracle(a: int, b: int) returns (m: int) ensures m >= a && m >= b "
                      "ensures m == a || m == b\n" + MAX_SPEC + "{\n  m := Oracle(a, b);\n}\n", "{:extern}"),
    "non-termination": (MAX_SPEC + "  decreases *\n{\n  while true decreases * {}\n}\n", "decreases *"),
    "termination off": ("function {:termination false} Loop(x: int): int { Loop(x) }\n" + MAX_OK, "{:termination}"),
    "ghost added": ("ghost " + MAX_OK, "modifier was added"),
    "no body": (MAX_SPEC, "has no body"),
    "missing": ("method Other() {}\n", "method Max from the specification is missing"),
    "hidden in a class": ("class C {\n" + MAX_OK + "}\n", "must be declared at the top level"),
    "inside a module": ("module M {\n" + MAX_OK + "}\n", "modules"),
    "declared twice": (MAX_OK + "\n" + MAX_OK.replace("m := a; }", "m := a; } "), "declared more than once"),
    "include": ('include "/usr/lib/dafny/lib.dfy"\n' + MAX_OK, "include"),
    "changed fixed function": (SUM_OK.replace("Sum(s[..|s|-1]) + s[|s|-1] }", "0 }"), "definition was changed"),
    "shadowed fixed function": ("class Box {\n  function Sum(s: seq<int>): int { 0 }\n}\n" + SUM_OK,
                                "declared more than once"),
}


@pytest.mark.parametrize("name", sorted(CHEATS))
def test_every_cheat_is_named_by_the_filters(name):
    program, why = CHEATS[name]
    spec = SUM_SPEC if "fixed function" in name else MAX_SPEC
    reasons = spec_violations(spec, program)
    assert reasons and any(why in r for r in reasons), reasons


def test_honest_programs_pass_the_filters_whatever_their_layout():
    assert spec_violations(MAX_SPEC, MAX_OK) == [] and spec_violations(SUM_SPEC, SUM_OK) == []
    relaid = ("/* a comment /* nested */ */ method   Max(a:int,b:int)\nreturns(m:int) // hi\n ensures m>=a&&m>=b "
              "ensures m==a||m==b { m := if a >= b then a else b; }\n"
              'method Note() { var s := "assume {:axiom} decreases *"; } // assume false\n'
              "lemma {:induction s} Helper(s: seq<int>) ensures |s| >= 0 {}\n")
    assert spec_violations(MAX_SPEC, relaid) == []  # comments, strings and spacing never matter
    assert extract_dafny("x\n```dafny\nA\n```\n```\nB\n```") == "A\n" and extract_dafny("```\nB\n```") == "B\n"


def test_without_dafny_building_the_environment_says_how_to_install_it(monkeypatch):
    monkeypatch.setattr(dafny_env.os.path, "exists", lambda p: False)
    monkeypatch.setattr(dafny_env.shutil, "which", lambda name: None)
    dafny_env.find_dafny.cache_clear()
    try:
        with pytest.raises(RuntimeError, match=r"apt-get install -y dafny"):
            env_factory("dafny", {"time_limit_s": 5})()
        assert not dafny_available()
    finally:
        monkeypatch.undo()
        dafny_env.find_dafny.cache_clear()


def _env(spec=MAX_SPEC, **kw):
    env = DafnyEnv(DafnyParams(**kw))
    assert env.reset(Example("d1", "Implement Max.", "", meta={"spec": spec}), seed=0) == ""
    return env


@needs_dafny
def test_honest_programs_verify_and_score_one():
    for spec, program in ((MAX_SPEC, MAX_OK), (SUM_SPEC, SUM_OK)):
        obs, reward, done, info = _env(spec).step(f"Here:\n```dafny\n{program}```")
        assert (obs, reward, done) == ("Verified.", 1.0, True) and info["verified"] and info["dafny_s"] > 0


@needs_dafny
def test_honest_wrong_programs_get_diagnostics_and_zero():
    env = _env()
    obs, reward, done, info = env.step(f"```dafny\n{MAX_SPEC}{{\n  m := a;\n}}\n```")
    assert (reward, done) == (0.0, False) and not info["verified"] and not info["violations"]
    assert obs.startswith("Dafny did not verify the program:\nprogram.dfy(5,0): Error BP5003: A postcondition "
                          "might not hold on this return path.")
    assert "Related location" in obs and "Execution trace" not in obs and "model_compress" not in obs
    obs, *_ = env.step(f"```dafny\n{MAX_SPEC}{{\n  m := a\n}}\n```")
    assert "semi expected" in obs and "    | }" in obs and "/box/" not in obs  # its source line, no host path
    obs, *_ = env.step(f"```dafny\n{MAX_SPEC}{{\n  m := c;\n}}\n```")
    assert "unresolved identifier: c" in obs and env.turns == 3


@needs_dafny
@pytest.mark.parametrize("body", ["lemma False() ensures false\n" + MAX_SPEC + "{\n  False();\n}\n",
                                  MAX_SPEC + "{\n  forall x: int | x == x ensures false;\n  m := a;\n}\n"])
def test_bodyless_axioms_are_caught_by_no_cheating(body):
    assert spec_violations(MAX_SPEC, body) == []  # past the filters: Dafny's /noCheating:1 is the second layer
    obs, reward, done, info = _env().step(body)
    assert (reward, done) == (0.0, False) and "must have a body" in info["violations"][0]


@needs_dafny
def test_the_filters_stop_cheats_that_dafny_itself_accepts():
    env = _env()
    for name in ("axiom lemma", "non-termination"):
        program = CHEATS[name][0]
        raw = env._verify(program, {"violations": []})  # Dafny alone, without the filters
        assert raw.reward == 1.0, (name, raw.observation)
        obs, reward, done, info = env.step(program)
        assert (reward, done) == (0.0, False) and info["violations"] and info["dafny_s"] == 0.0
        assert obs.startswith("The program does not keep the specification:\n- ")


@needs_dafny
def test_time_limits_end_the_turn_with_a_reason():
    hard = ("lemma G(a: int, b: int, c: int, d: int)\n  requires a > 1 && b > 1 && c > 1 && d > 1\n  ensures "
            "a*b*c*d*a*b*c*d*a*b != (a*a*b + 3) * (c*c*d + 5) * (a + b + c + d) * (a*b + c*d + 7) + 1\n")
    obs, reward, done, info = _env(hard, time_limit_s=1).step(hard + "{}\n")
    assert (reward, done) == (0.0, False) and info["dafny_s"] < 15
    # z3 usually runs into /timeLimit here; now and then it gives up first, which Dafny reports as an error
    assert "timed out after 1 seconds" in obs or "postcondition might not hold" in obs
    obs, reward, done, info = _env(wall_s=0.3).step(MAX_OK)
    assert (reward, done) == (0.0, False) and info["reason"].startswith("the verifier was stopped (wall_time)")


@needs_dafny
def test_floods_of_errors_and_huge_programs_are_cut():
    many = MAX_OK + "".join(f"lemma L{i}(x: int) ensures x > {i} {{}}\n" for i in range(40))  # 40 errors
    obs, reward, done, info = _env(max_observation_chars=800).step(many)
    assert (reward, done) == (0.0, False) and len(obs) <= 850 and obs.endswith("[... diagnostics cut]")
    obs, reward, done, info = _env(max_program_chars=1000).step(MAX_OK + "// " + "x" * 2000)
    assert info["reason"] == "the program is too long" and info["dafny_s"] == 0.0 and not done


def test_the_config_validates_the_params():
    from rlvr.rollout.multiturn import MultiTurnConfig

    assert MultiTurnConfig(env="dafny", params={"time_limit_s": 5}).params == {"time_limit_s": 5}
    with pytest.raises(Exception, match="time_limit_s"):
        MultiTurnConfig(env="dafny", params={"time_limit_s": 0})
    with pytest.raises(Exception, match="reward"):
        MultiTurnConfig(env="code_feedback", params={"reward": "best"})
    with pytest.raises(Exception, match="timeout_s"):
        MultiTurnConfig(env="python_tool", params={"timeout_s": -1})


@needs_dafny
def test_a_scripted_episode_through_the_driver():
    assert "dafny" in ENVIRONMENTS
    tok = char_tokenizer()
    turns = [CHEATS["assume false"][0], f"```dafny\n{MAX_SPEC}{{\n  m := b;\n}}\n```", f"```dafny\n{MAX_OK}```"]
    drv = MultiTurnWrapper(Scripted(tok, turns), tok, env_factory("dafny"), max_turns=4, max_tokens=6000,
                          step_timeout_s=120)
    c = drv.generate([GenerationRequest(Example("d", "Max:", "", meta={"spec": MAX_SPEC}), 1)],
                     SamplingParams(max_new_tokens=400))[0]
    assert c.turns == 3 and c.env_done and c.env_error is None and c.turn_rewards == [0.0, 0.0, 1.0]
    assert c.env_reward == 1.0 and c.env_info["verified"]
    obs = [tok.decode(c.completion_ids[s.start: s.end]) for s in c.segments if s.source == "inserted"]
    assert "does not keep the specification" in obs[0] and "assume" in obs[0]
    assert "postcondition might not hold" in obs[1] and len(obs) == 2
    mask = c.mask()
    for s in c.segments:
        assert set(mask[s.start: s.end]) == ({0.0} if s.source == "inserted" else {1.0})
