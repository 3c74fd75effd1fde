"""The extra passes of rlvr/passes/ against naive full-logits computations on the tiny model."""

from types import SimpleNamespace

import pytest
import torch

from rlvr.core.batch import build_batch
from rlvr.core.types import Completion, Example
from rlvr.models.logprobs import completion_logprobs
from rlvr.models.tiny import TinyModelConfig, build_tiny_model, char_tokenizer
from rlvr.config.algorithm import AlgorithmConfig
from rlvr.passes.policy import token_statistics
from rlvr.passes.teacher import rejected_answer, teacher_completions
from rlvr.train.loop import compute_extras

TEMP = 0.7
HINT = " {answer}\n"


def alg(hint: str, context: str = "answer", cot_tokens: int = 200) -> AlgorithmConfig:
    """The teacher settings of a run's algorithm section."""
    return AlgorithmConfig(teacher_hint=hint, teacher_context=context, teacher_cot_tokens=cot_tokens)


@pytest.fixture(scope="module")
def setup():
    tok = char_tokenizer()
    model = build_tiny_model(TinyModelConfig(hidden_size=32, intermediate_size=64, num_layers=2), tok, seed=3).eval()
    enc = lambda s: tok.encode(s, add_special_tokens=False)  # noqa: E731
    prompts = ["12+3=", "7+8=", "40+41="]
    examples = [Example(id=str(i), prompt=p, answer=str(eval(p[:-1]))) for i, p in enumerate(prompts)]
    # (group, completion text, reward): ragged prompts and completions, one empty completion
    rows = [(0, "15", 1.0), (0, "14x", 0.0), (0, "\\boxed{13}!", 0.2), (1, "15", 1.0), (1, "", 0.0),
            (2, "81", 1.0), (2, "81", 1.0)]
    comps = [Completion(example_id=str(g), prompt_ids=enc(prompts[g]), completion_ids=enc(text), logprobs=None,
                        finish_reason="stop", text=text, group=g) for g, text, _ in rows]
    rewards = [r for _, _, r in rows]
    batch = build_batch(comps, rewards, tok.pad_token_id)
    return SimpleNamespace(tok=tok, model=model, comps=comps, examples=[examples[g] for g, _, _ in rows],
                           rewards=torch.tensor(rewards, dtype=torch.float64), batch=batch, enc=enc)


def naive_row(model, ids: list[int], n_prompt: int, n_comp: int):
    """Full logits of one unpadded sequence; rows predicting the completion tokens, and their hidden states."""
    with torch.no_grad():
        out = model(input_ids=torch.tensor([ids]), output_hidden_states=True)
    logits = out.logits[0, n_prompt - 1: n_prompt + n_comp - 1].double()
    hidden = out.hidden_states[-1][0, n_prompt: n_prompt + n_comp].double()
    return logits, torch.tensor(ids[n_prompt:], dtype=torch.long), hidden


def test_token_statistics_match_naive_full_logits(setup):
    s = setup
    got = token_statistics(s.model, s.batch, TEMP, micro_batch_size=3, chunk_tokens=2,
                           wanted=["entropy", "self_certainty", "chosen_logit", "hidden"])
    assert got["entropy"].shape == s.batch.completion_mask.shape and got["hidden"].shape == (7, 32)
    for i, c in enumerate(s.comps):
        n = len(c.completion_ids)
        logits, tgt, hidden = naive_row(s.model, c.prompt_ids + c.completion_ids, len(c.prompt_ids), n)
        zt = logits / TEMP
        logp = torch.log_softmax(zt, -1)
        want = {"entropy": -(logp.exp() * logp).sum(-1),
                "self_certainty": torch.logsumexp(zt, -1) - zt.mean(-1),  # = KL(U || p) + log V
                "chosen_logit": logits[torch.arange(n), tgt]}
        for k, v in want.items():
            assert torch.allclose(got[k][i, :n].double(), v, atol=1e-4), (k, i)
            assert (got[k][i, n:] == 0).all()
        pooled = hidden.mean(0) if n else torch.zeros(32, dtype=torch.float64)
        assert torch.allclose(got["hidden"][i].double(), pooled, atol=1e-4), i
    # self-certainty is KL(Uniform || p) + log V >= log V - log V ... i.e. >= 0, and the entropy at most log V
    v = s.model.config.vocab_size
    mask = s.batch.completion_mask.bool()
    assert (got["self_certainty"][mask] >= -1e-5).all() and (got["entropy"][mask] <= torch.log(torch.tensor(v))).all()


def test_token_statistics_entropy_matches_the_log_prob_pass_with_softcap(setup):
    s = setup
    s.model.config.final_logit_softcapping = 2.0
    try:
        got = token_statistics(s.model, s.batch, TEMP, 8, 64, ["entropy"])["entropy"]
        _, ent = completion_logprobs(s.model, s.batch, TEMP, 64, with_entropy=True)
    finally:
        s.model.config.final_logit_softcapping = None
    assert torch.allclose(got, ent, atol=1e-5)
    plain = token_statistics(s.model, s.batch, TEMP, 8, 64, ["entropy"])["entropy"]
    assert not torch.allclose(got, plain, atol=1e-3)  # the cap matters, so the comparison is not vacuous


def test_rejected_answer():
    assert rejected_answer("so \\boxed{\\frac{1}{2}} hence \\boxed{7}.") == "7"
    assert rejected_answer("x \\boxed{\\frac{1}{2}}") == "\\frac{1}{2}"
    assert rejected_answer("a" * 80) == "a" * 50
    assert rejected_answer("  14x ") == "14x"


def test_teacher_contexts(setup):
    s = setup
    pos = teacher_completions(s.comps, s.examples, s.rewards, s.tok, HINT, negative=False)
    neg = teacher_completions(s.comps, s.examples, s.rewards, s.tok, HINT, negative=True)
    for i, c in enumerate(s.comps):
        assert pos[i].completion_ids == c.completion_ids
        assert pos[i].prompt_ids == c.prompt_ids + s.enc(f" {s.examples[i].answer}\n")
    # group 0: rejected rows score 0.0 ("14x") and 0.2; the worst is "14x"; group 1's worst is the empty
    # completion (answer "" -> the gold answer); group 2 has no rejected row -> the gold answer
    assert [s.tok.decode(n.prompt_ids[len(c.prompt_ids):]) for n, c in zip(neg, s.comps)] == \
        [" 14x\n"] * 3 + [" 15\n"] * 2 + [" 81\n"] * 2


def test_teacher_logp_equals_hand_computed_log_probs(setup):
    s = setup
    c = SimpleNamespace(model=s.model, ref_model=None, tokenizer=s.tok, device=torch.device("cpu"))
    st = SimpleNamespace(temperature=TEMP, micro_batch_size=2, chunk_tokens=3)
    out = compute_extras(frozenset({"teacher_logp", "neg_teacher_logp", "old_logp"}), c, s.batch, st, s.comps,
                         s.examples, algorithm=alg(HINT))
    assert set(out) == {"teacher_logp", "neg_teacher_logp", "old_logp"}
    hints = {"teacher_logp": [f" {e.answer}\n" for e in s.examples],
             "neg_teacher_logp": [" 14x\n"] * 3 + [" 15\n"] * 2 + [" 81\n"] * 2, "old_logp": [""] * 7}
    for key, hint_texts in hints.items():
        assert out[key].shape == s.batch.completion_mask.shape
        for i, comp in enumerate(s.comps):
            ctx = comp.prompt_ids + s.enc(hint_texts[i])
            n = len(comp.completion_ids)
            logits, tgt, _ = naive_row(s.model, ctx + comp.completion_ids, len(ctx), n)
            want = torch.log_softmax(logits / TEMP, -1)[torch.arange(n), tgt]
            assert torch.allclose(out[key][i, :n].double(), want, atol=1e-4), (key, i)
            assert (out[key][i, n:] == 0).all()
    # the hint changes the log-probs (the comparison above is not vacuous), and rows of a group without
    # a rejected completion have identical positive and negative teachers
    assert not torch.allclose(out["teacher_logp"], out["old_logp"], atol=1e-3)
    assert torch.equal(out["teacher_logp"][5:], out["neg_teacher_logp"][5:])


def test_unknown_extra_and_missing_reference(setup):
    s = setup
    c = SimpleNamespace(model=s.model, ref_model=None, tokenizer=s.tok, device=torch.device("cpu"))
    st = SimpleNamespace(temperature=1.0, micro_batch_size=8, chunk_tokens=64)
    with pytest.raises(ValueError, match="unknown extras"):
        compute_extras(frozenset({"nope"}), c, s.batch, st, s.comps, s.examples, algorithm=alg(HINT))
    with pytest.raises(ValueError, match="no reference model"):
        compute_extras(frozenset({"ref_logp"}), c, s.batch, st, s.comps, s.examples, algorithm=alg(HINT))


def test_old_logp_from_the_statistics_pass_equals_batch_logprobs():
    """When token statistics are requested, old log-probs come from the same forward and equal the
    trainer's own log-prob computation."""
    from types import SimpleNamespace

    from rlvr.config.run import load_config
    from rlvr.train.loop import settings
    from rlvr.models.logprobs import batch_logprobs, pass_args

    tok = char_tokenizer()
    model = build_tiny_model(TinyModelConfig(hidden_size=32, intermediate_size=64, num_layers=1), tok, seed=3)
    g = torch.Generator().manual_seed(0)
    comps = [Completion(str(i), torch.randint(3, 60, (2 + i % 3,), generator=g).tolist(),
                        torch.randint(3, 60, (1 + i % 5,), generator=g).tolist(), None, "stop", "", i // 2)
             for i in range(6)]
    batch = build_batch(comps, [0.0] * 6, tok.pad_token_id)
    s = settings(load_config(overrides=["rollout.temperature=0.7", "train.micro_batch_size=4"]))
    c = SimpleNamespace(model=model, device=torch.device("cpu"), ref_model=None, tokenizer=tok)
    both = compute_extras(frozenset({"old_logp", "entropy"}), c, batch, s, comps, [], algorithm=alg(""))
    ref = batch_logprobs(model, batch, **pass_args(s))
    torch.testing.assert_close(both["old_logp"], ref, rtol=0, atol=1e-6)
    alone = token_statistics(model, batch, 0.7, 4, s.chunk_tokens, ["entropy"])
    torch.testing.assert_close(both["entropy"], alone["entropy"], rtol=0, atol=0)


def test_teacher_kl_equals_the_naive_kl_of_full_distributions(setup):
    """KL(P_S || P_T) per completion position, against full logits of the unpadded prompt + completion and
    prompt + gold-answer hint + completion; 0 when the hint is empty (teacher = student)."""
    s = setup
    c = SimpleNamespace(model=s.model, ref_model=None, tokenizer=s.tok, device=torch.device("cpu"))
    st = SimpleNamespace(temperature=TEMP, micro_batch_size=3, chunk_tokens=2)
    out = compute_extras(frozenset({"teacher_kl"}), c, s.batch, st, s.comps, s.examples, algorithm=alg(HINT))["teacher_kl"]
    assert out.shape == s.batch.completion_mask.shape
    for i, comp in enumerate(s.comps):
        n = len(comp.completion_ids)
        ls, _, _ = naive_row(s.model, comp.prompt_ids + comp.completion_ids, len(comp.prompt_ids), n)
        ctx = comp.prompt_ids + s.enc(f" {s.examples[i].answer}\n")
        lt, _, _ = naive_row(s.model, ctx + comp.completion_ids, len(ctx), n)
        ps, pt = torch.log_softmax(ls / TEMP, -1), torch.log_softmax(lt / TEMP, -1)
        want = (ps.exp() * (ps - pt)).sum(-1)
        assert torch.allclose(out[i, :n].double(), want, atol=1e-5), i
        assert (out[i, n:] == 0).all()
    assert float(out.max()) > 1e-3  # the hint moves the distributions: the comparison is not vacuous
    same = compute_extras(frozenset({"teacher_kl"}), c, s.batch, st, s.comps, s.examples, algorithm=alg(""))["teacher_kl"]
    assert float(same.abs().max()) < 1e-6


def test_cot_teacher_contexts_follow_cepo_code(setup):
    """CEPO's CoT teacher: the first (last) k tokens of the group's best correct completion, the gold answer
    when none is correct; the negative: those of the worst rejected one, the positive when none is rejected."""
    s = setup
    ids = [list(c.completion_ids) for c in s.comps]
    k = 2
    pos = teacher_completions(s.comps, s.examples, s.rewards, s.tok, HINT, False, "cot_prefix", k)
    neg = teacher_completions(s.comps, s.examples, s.rewards, s.tok, HINT, True, "cot_prefix", k)
    hint = lambda out, i: out[i].prompt_ids[len(s.comps[i].prompt_ids):]  # noqa: E731
    # group 0: rewards [1, 0, 0.2] -> best correct row 0 ("15"), worst rejected row 1 ("14x")
    assert all(hint(pos, i) == ids[0][:k] for i in range(3)) and all(hint(neg, i) == ids[1][:k] for i in range(3))
    # group 1: rewards [1, 0] -> best row 3, worst row 4 (the empty completion: an empty hint)
    assert hint(pos, 3) == ids[3][:k] and hint(neg, 4) == []
    # group 2: both correct -> no rejected one: the negative teacher is the positive one
    assert hint(neg, 5) == hint(pos, 5) == ids[5][:k]
    suffix = teacher_completions(s.comps, s.examples, s.rewards, s.tok, HINT, False, "cot_suffix", 2)
    assert hint(suffix, 1) == ids[0][-2:]
    assert all(out.completion_ids == c.completion_ids for out, c in zip(pos, s.comps))  # completions unchanged
    nobody = torch.zeros(len(s.comps), dtype=torch.float64)  # no correct completion anywhere: the gold answer
    gold = teacher_completions(s.comps, s.examples, nobody, s.tok, HINT, False, "cot_prefix", k)
    assert hint(gold, 0) == s.enc(f" {s.examples[0].answer}")


def test_cot_teacher_logp_equals_hand_computed(setup):
    s = setup
    c = SimpleNamespace(model=s.model, ref_model=None, tokenizer=s.tok, device=torch.device("cpu"))
    st = SimpleNamespace(temperature=TEMP, micro_batch_size=3, chunk_tokens=2)
    out = compute_extras(frozenset({"teacher_logp"}), c, s.batch, st, s.comps, s.examples, algorithm=alg(HINT, "cot_prefix", 3))
    best = {0: 0, 1: 3, 2: 5}
    for i, comp in enumerate(s.comps):
        ctx = comp.prompt_ids + list(s.comps[best[comp.group]].completion_ids)[:3]
        n = len(comp.completion_ids)
        logits, tgt, _ = naive_row(s.model, ctx + comp.completion_ids, len(ctx), n)
        want = torch.log_softmax(logits / TEMP, -1)[torch.arange(n), tgt]
        assert torch.allclose(out["teacher_logp"][i, :n].double(), want, atol=1e-4), i
