"""PRISM (rlvr/algorithms/transforms/prism.py, rlvr/learners/discriminator.py): the alignment advantage by hand and
against a transcription of the reference's per-row loops, the stage switch and the warm-up, span splitting,
responses judged by their text, the Bradley-Terry loss by hand, the discriminator learning to separate demonstrations, the recipe's
task format, training and resuming with the discriminator, and config errors."""

import json
import math
import random
import re

import pytest
import torch
from safetensors.torch import load_file

from rlvr.algorithms.registry import ADVANTAGE_TRANSFORMS, TransformInputs
from rlvr.algorithms.transforms.prism import PRISMParams, alignment_advantage, prism_align
from rlvr.config.run import ConfigError, load_config
from rlvr.config.sections import PRISM_FORMAT, DiscriminatorConfig
from rlvr.core.types import Completion, Example
from rlvr.models import TinyModelConfig, build_tiny_model, char_tokenizer
from rlvr.learners.discriminator import Discriminator, pairwise_loss, read_demos, split_text
from tests.methods.helpers import run_recipe_steps, tiny_overrides
from tests.methods.seed_support import BINARY, train_and_resume

FMT = re.compile(PRISM_FORMAT, re.DOTALL)
PLAIN = ["algorithm.discriminator.format=null", "algorithm.discriminator.perception_tag=null",
         "algorithm.advantage_transforms.0.warmup=0"]


def _task(path) -> str:
    """The tiny JSONL task in place of the recipe's shapes task, rewarded by the binary verifier."""
    return f"task={{name: jsonl, train_path: {path}, verifier: '{BINARY[0].partition('=')[2]}'}}"


# ---- the alignment advantage -----------------------------------------------------------------------------

def test_alignment_advantage_by_hand():
    # one group of three: the third is malformed, so its scores become min(valid) - 1
    c = torch.tensor([1.0, 2.0, 7.0])
    r = torch.tensor([3.0, 1.0, 9.0])
    bad = torch.tensor([False, False, True])
    g = torch.zeros(3, dtype=torch.long)
    a = alignment_advantage(c, r, bad, g, 0.5, 0.5, 0.0)
    # c' = [1, 2, 0]: mean 1, unbiased std 1 -> [0, 1, -1]
    # r' = [3, 1, 0]: mean 4/3, std sqrt(7/3) -> [5/3, -1/3, -4/3] / sqrt(7/3)
    s = math.sqrt(7 / 3)
    want = [0.5 * 0 + 0.5 * (5 / 3) / s, 0.5 * 1 + 0.5 * (-1 / 3) / s, 0.5 * -1 + 0.5 * (-4 / 3) / s]
    assert a.tolist() == pytest.approx(want, abs=1e-12)


def test_singleton_groups_keep_their_scores_and_all_malformed_groups_get_zero():
    c, r = torch.tensor([2.0, 5.0, 6.0]), torch.tensor([-1.0, 3.0, 4.0])
    bad = torch.tensor([False, True, True])
    g = torch.tensor([0, 1, 1])
    a = alignment_advantage(c, r, bad, g, 0.5, 0.5, 1e-6)
    assert a[0].item() == pytest.approx(0.5 * 2 / (1 + 1e-6) + 0.5 * -1 / (1 + 1e-6))
    assert a[1:].tolist() == [0.0, 0.0]  # both -1: no spread


def _reference(cap, cot, fmt_ok, acc, index, mode, w_c, w_r, penalty, coef, eps):
    """The reference's compute_grpo_multi_reward_advantage (modes 1 and 4), row by row with dicts."""
    n = len(cap)
    invalid = [0.0 if ok else 1.0 for ok in fmt_ok]
    cap_adj, cot_adj = list(cap), list(cot)
    mins_c, mins_r = {}, {}
    for i in range(n):
        if invalid[i] == 0:
            mins_c[index[i]] = min(mins_c.get(index[i], cap[i]), cap[i])
            mins_r[index[i]] = min(mins_r.get(index[i], cot[i]), cot[i])
    for i in range(n):
        if invalid[i] == 1:
            cap_adj[i] = mins_c.get(index[i], 0.0) - 1.0
            cot_adj[i] = mins_r.get(index[i], 0.0) - 1.0

    def gn(xs):
        groups = {}
        for i in range(n):
            groups.setdefault(index[i], []).append(xs[i])
        stats = {}
        for k, v in groups.items():
            if len(v) == 1:
                stats[k] = (0.0, 1.0)
            else:
                m = sum(v) / len(v)
                stats[k] = (m, math.sqrt(sum((x - m) ** 2 for x in v) / (len(v) - 1)))
        return [(xs[i] - stats[index[i]][0]) / (stats[index[i]][1] + eps) for i in range(n)]

    a_align = [w_c * x + w_r * y for x, y in zip(gn(cap_adj), gn(cot_adj))]
    if mode == "replace":
        return [a_align[i] - penalty * invalid[i] for i in range(n)]
    wrong = [float(acc[i] <= 0) * (1 - invalid[i]) for i in range(n)]
    r_v = [float(acc[i]) for i in range(n)]
    a_v = gn(r_v)
    return [a_v[i] + coef * a_align[i] * (1 - invalid[i]) * (1 - wrong[i]) for i in range(n)]


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("mode", ["replace", "gated"])
def test_the_transform_equals_the_reference_loops_on_ragged_groups(seed, mode):
    rng = random.Random(seed)
    sizes = [rng.randint(1, 5) for _ in range(5)]
    index = [g for g, k in enumerate(sizes) for _ in range(k)]
    n, t = len(index), 6
    cap = [rng.gauss(0, 3) for _ in range(n)]
    cot = [rng.gauss(0, 3) for _ in range(n)]
    ok = [rng.random() < 0.7 for _ in range(n)]
    acc = [float(rng.random() < 0.5) for _ in range(n)]
    cap = [x if o else 0.0 for x, o in zip(cap, ok)]  # the discriminator scores malformed rows 0
    cot = [x if o else 0.0 for x, o in zip(cot, ok)]
    lengths = [rng.randint(1, t) for _ in range(n)]
    mask = torch.tensor([[1.0 if j < k else 0.0 for j in range(t)] for k in lengths])
    p = PRISMParams(mode=mode, perception_weight=0.3, reasoning_weight=0.7, format_penalty=1.5, align_coef=0.8)
    # the verifiable advantage A_v of gated mode: the reference normalises acc per group (GRPO, unbiased std)
    gi = torch.tensor(index)
    rewards = torch.tensor(acc, dtype=torch.float64)
    a_v = torch.zeros(n, dtype=torch.float64)
    for g in gi.unique():
        rows = gi == g
        v = rewards[rows]
        a_v[rows] = v if v.numel() == 1 else (v - v.mean()) / (v.std() + p.eps)
    inp = TransformInputs(rewards, gi, mask, a_v[:, None] * mask, {"correct": rewards},
                          {"disc_perception": torch.tensor(cap), "disc_reasoning": torch.tensor(cot),
                           "disc_format": torch.tensor([float(o) for o in ok])}, 0, 10)
    adv, metrics = prism_align(inp, p)
    want = torch.tensor(_reference(cap, cot, ok, acc, index, mode, 0.3, 0.7, 1.5, 0.8, p.eps), dtype=torch.float64)
    assert torch.allclose(adv.double(), want[:, None] * mask, atol=1e-6)
    assert metrics["format_valid"] == pytest.approx(sum(ok) / n)


@pytest.mark.parametrize("mode", ["replace", "gated"])
def test_during_the_warm_up_the_policy_waits_while_the_discriminator_learns(mode):
    n, t = 4, 3
    mask = torch.ones(n, t)
    a_v = torch.tensor([[1.0], [-1.0], [0.5], [-0.5]]) * mask
    inp = lambda step: TransformInputs(torch.zeros(n), torch.zeros(n, dtype=torch.long), mask, a_v,  # noqa: E731
                                       {"correct": torch.tensor([1.0, 0.0, 1.0, 0.0])},
                                       {"disc_perception": torch.tensor([3.0, 1.0, 2.0, 0.0]),
                                        "disc_reasoning": torch.tensor([1.0, 2.0, 3.0, 0.0]),
                                        "disc_format": torch.tensor([1.0, 1.0, 1.0, 0.0])}, step, 10)
    p = PRISMParams(mode=mode, warmup=2, steps=5)
    adv, m = prism_align(inp(1), p)
    assert torch.equal(adv, torch.zeros_like(a_v) if mode == "replace" else a_v) and m["warmup"] == 1.0
    adv, m = prism_align(inp(2), p)
    assert not torch.equal(adv, torch.zeros_like(a_v)) and m["warmup"] == 0.0
    with pytest.raises(ValueError, match="warmup"):
        PRISMParams(warmup=5, steps=5)


def test_the_transform_is_active_only_during_the_alignment_stage():
    entry = ADVANTAGE_TRANSFORMS.get("prism")
    assert entry.active(PRISMParams(steps=3), 2) and not entry.active(PRISMParams(steps=3), 3)
    assert entry.active(PRISMParams(), 10**6)
    from rlvr.config.run import algorithm_needs
    cfg = load_config(recipe="prism")
    assert {"disc_perception", "disc_reasoning", "disc_format"} <= algorithm_needs(cfg, 0)
    assert not {"disc_perception", "disc_reasoning", "disc_format"} & algorithm_needs(cfg, 100)


# ---- spans ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, want", [
    ("<caption>2 red</caption><think>2 shapes</think><answer>2</answer>",
     ("<caption>2 red</caption>", "<think>2 shapes</think><answer>2</answer>")),
    (" <caption>a</caption>\n<think>b</think> <answer>c</answer>\n", (" <caption>a</caption>",
                                                                       "\n<think>b</think> <answer>c</answer>\n")),
    ("<think>b</think><answer>c</answer>", None),  # no caption
    ("<caption>a</caption><think>b</think>", None),  # no answer
    ("<caption>a</caption><think>b</think><answer>c</answer> and more", None),  # trailing text
    ("<answer>c</answer><caption>a</caption><think>b</think>", None),  # out of order
    ("", None),
])
def test_split_text_follows_the_format(text, want):
    assert split_text(text, FMT, "caption") == want


def test_split_without_format_or_tag():
    assert split_text("anything", None, None) == ("", "anything")
    assert split_text("   ", None, None) is None
    assert split_text("<c>x</c>", None, "c") is None  # nothing after the perception span
    assert split_text("<c>x</c>y", None, "c") == ("<c>x</c>", "y")


def test_a_sampled_response_is_judged_by_its_text_not_its_tokens_or_eos():
    tok, d = _disc()
    ids = tok(DEMO, add_special_tokens=False)["input_ids"]
    p = tok("q:", add_special_tokens=False)["input_ids"]
    plain = Completion("e0", p, ids, None, "stop", DEMO)
    with_eos = Completion("e1", p, ids + [tok.eos_token_id], None, "stop", DEMO)  # as the engines return it
    ex = [Example("e", "q:", "2", target=DEMO)] * 2
    out = d.extras([plain, with_eos], ex)
    assert out["disc_reasoning"][0] == out["disc_reasoning"][1]
    assert out["disc_perception"][0] == out["disc_perception"][1]
    # and the demonstration itself is the same input: the discriminator cannot tell it from an exact copy
    assert d.spans(DEMO) == d._teacher_spans(ex[0])


# ---- the discriminator ------------------------------------------------------------------------------------

def test_pairwise_loss_by_hand():
    got = pairwise_loss(torch.tensor([1.0, 0.0, -2.0]), torch.tensor([0.0, 0.0, 1.0]))
    assert got.tolist() == pytest.approx([math.log(1 + math.exp(-1)), math.log(2), math.log(1 + math.exp(3))])


def _disc(lr=1e-3, **kw):
    torch.manual_seed(0)  # the expert heads' initialisation draws from the global generator
    tok = char_tokenizer()
    model = build_tiny_model(TinyModelConfig(hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64), tok,
                             seed=0)
    cfg = DiscriminatorConfig(enabled=True, lr=lr, **kw)
    return tok, Discriminator(model, tok, cfg, torch.device("cpu"), micro_batch_size=2)


def _rows(tok, texts, prompt="q:"):
    p = tok(prompt, add_special_tokens=False)["input_ids"]
    return [Completion(f"e{i}", p, tok(t, add_special_tokens=False)["input_ids"], None, "stop", t, group=0)
            for i, t in enumerate(texts)]


DEMO = "<caption>2 red</caption><think>2 shapes</think><answer>2</answer>"


def test_scores_loss_and_the_malformed_rows():
    tok, d = _disc(score_reg=0.01)
    texts = [DEMO.replace("2", "3"), "no format", DEMO.replace("red", "blue")]
    comps = _rows(tok, texts)
    examples = [Example(c.example_id, "q:", "2", target=DEMO) for c in comps]
    ex = d.extras(comps, examples)
    assert ex["disc_format"].tolist() == [1.0, 0.0, 1.0]
    assert ex["disc_perception"][1] == 0 and ex["disc_reasoning"][1] == 0
    # the loss by hand from the same network before its step: rows 0 and 2 pair with the demonstration
    with torch.no_grad():
        d.net.eval()
        sp, sr, tp, tr = [], [], [], []
        for i in (0, 2):
            cap, rest = split_text(texts[i], d.fmt, "caption")
            dcap, drest = split_text(DEMO, d.fmt, "caption")
            enc = [tok(x, add_special_tokens=False)["input_ids"] for x in (cap, rest, dcap, drest)]
            sp.append(d._scores("perception", [Completion("x", comps[i].prompt_ids, enc[0], None, "stop", "")]))
            sr.append(d._scores("reasoning", [Completion("x", comps[i].prompt_ids, enc[1], None, "stop", "")]))
            tp.append(d._scores("perception", [Completion("x", comps[i].prompt_ids, enc[2], None, "stop", "")]))
            tr.append(d._scores("reasoning", [Completion("x", comps[i].prompt_ids, enc[3], None, "stop", "")]))
        sp, sr, tp, tr = (torch.cat(x) for x in (sp, sr, tp, tr))
        assert torch.allclose(torch.stack([sp, sr]), torch.stack([ex["disc_perception"][[0, 2]],
                                                                  ex["disc_reasoning"][[0, 2]]]), atol=1e-5)
        want = (pairwise_loss(tp, sp).mean() + pairwise_loss(tr, sr).mean()
                + 0.01 * torch.cat([sp, sr, tp, tr]).pow(2).mean())
    m = d.update()
    assert m["discriminator/pairs"] == 2
    assert m["discriminator/loss"] == pytest.approx(float(want), rel=1e-4)
    assert d.update() == {}  # nothing scored since


@pytest.mark.parametrize("reads", [False, True])
def test_the_reasoning_expert_reads_the_caption_only_when_asked(reads):
    """Two responses with the same reasoning after different captions: the reference's reasoning expert (reading
    the reasoning alone) cannot tell them apart; with reasoning_reads_perception it reads caption + reasoning."""
    tok, d = _disc(reasoning_reads_perception=reads)
    texts = [DEMO, DEMO.replace("2 red", "3 red")]
    cap, rest = split_text(texts[1], d.fmt, "caption")
    enc = d.spans(texts[1])
    assert enc["perception"] == tok(cap, add_special_tokens=False)["input_ids"]
    assert enc["reasoning"] == tok(cap + rest if reads else rest, add_special_tokens=False)["input_ids"]
    out = d.extras(_rows(tok, texts), [Example("e", "q:", "2", target=DEMO)] * 2)
    assert (out["disc_reasoning"][0] == out["disc_reasoning"][1]).item() is not reads
    assert out["disc_perception"][0] != out["disc_perception"][1]


def test_accuracy_counts_only_the_pairs_a_discriminator_could_tell_apart():
    """Exact copies of the demonstration score the same as it: they are neither right nor wrong, so they leave the
    accuracy and are reported as the share of pairs that differ."""
    tok, d = _disc(init_std=0.5)
    wrong_answer = DEMO.replace("2 shapes</think><answer>2", "3 shapes</think><answer>3")  # same caption
    wrong_caption = DEMO.replace("2 red", "2 blue")  # same reasoning
    texts = [DEMO, DEMO, wrong_answer, wrong_caption]
    comps = _rows(tok, texts)
    examples = [Example(c.example_id, "q:", "2", target=DEMO) for c in comps]
    ex = d.extras(comps, examples)
    demo = d.extras(_rows(tok, [DEMO]), examples[:1])
    # by hand from the scores before the step: each expert has exactly one pair that differs
    want_p = float(demo["disc_perception"][0] > ex["disc_perception"][3])
    want_r = float(demo["disc_reasoning"][0] > ex["disc_reasoning"][2])
    d.extras(comps, examples)
    m = d.update()
    assert m["discriminator/pairs"] == 4
    assert m["discriminator/perception_differ"] == 0.25 and m["discriminator/reasoning_differ"] == 0.25
    assert m["discriminator/perception_acc"] == want_p and m["discriminator/reasoning_acc"] == want_r
    assert m["discriminator/acc"] == (want_p + want_r) / 2
    # every response a copy of the demonstration: nothing to tell apart, so no accuracy at all
    d.extras(comps[:2], examples[:2])
    m = d.update()
    assert m["discriminator/perception_differ"] == 0.0 and m["discriminator/reasoning_differ"] == 0.0
    assert not any(k.endswith("acc") for k in m)


def test_the_discriminator_learns_to_rank_demonstrations_first():
    tok, d = _disc(lr=1e-3)
    students = ["<caption>1 blue</caption><think>1 shapes</think><answer>1</answer>",  # both spans differ
                "<caption>2 rod</caption><think>2 things</think><answer>2</answer>",
                "<caption>3 red</caption><think>3 shapes</think><answer>5</answer>"]
    comps = _rows(tok, students)
    examples = [Example(c.example_id, "q:", "2", target=DEMO) for c in comps]
    accs = []
    for _ in range(60):
        d.extras(comps, examples)
        accs.append(d.update()["discriminator/acc"])
    assert accs[-1] == 1.0 and accs[-1] > min(accs)
    # the demonstration now outscores every student response on both experts
    demo_row = _rows(tok, [DEMO])
    top = d.extras(demo_row, examples[:1])
    low = d.extras(comps, examples)
    assert float(top["disc_perception"][0]) > float(low["disc_perception"].max())
    assert float(top["disc_reasoning"][0]) > float(low["disc_reasoning"].max())


def test_with_a_lora_policy_only_the_discriminators_own_adapters_and_experts_learn():
    from rlvr.models.lora import apply_lora
    from rlvr.models.config import LoRAConfig

    torch.manual_seed(0)
    tok = char_tokenizer()
    model = build_tiny_model(TinyModelConfig(hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64), tok,
                             seed=0)
    apply_lora(model, LoRAConfig(rank=4))
    d = Discriminator(model, tok, DiscriminatorConfig(enabled=True, lr=1e-2), torch.device("cpu"), micro_batch_size=2)
    trainable = {n for n, p in d.net.named_parameters() if p.requires_grad}
    assert all("lora_" in n or n.startswith("heads.") for n in trainable)
    assert any("lora_" in n for n in trainable) and any(n.startswith("heads.") for n in trainable)
    before = {n: p.detach().clone() for n, p in d.net.named_parameters()}
    policy = {n: p.detach().clone() for n, p in model.named_parameters()}
    comps = _rows(tok, [DEMO.replace("2", "3"), DEMO.replace("red", "blue")])
    d.extras(comps, [Example(c.example_id, "q:", "2", target=DEMO) for c in comps])
    assert d.update()["discriminator/pairs"] == 2
    moved = {n for n, p in d.net.named_parameters() if not torch.equal(p, before[n])}
    assert moved and moved <= trainable
    assert all(torch.equal(p, policy[n]) for n, p in model.named_parameters())  # a copy: the policy is untouched


def test_demos_file_is_read_by_id_and_bad_lines_are_named(tmp_path):
    f = tmp_path / "d.jsonl"
    f.write_text(json.dumps({"id": "a", "response": "x"}) + "\n" + json.dumps({"id": 3, "response": "y"}) + "\n")
    assert read_demos(f) == {"a": "x", "3": "y"}
    f.write_text(json.dumps({"id": "a", "response": "x"}) + "\n{oops\n")
    with pytest.raises(ValueError, match="d.jsonl:2"):
        read_demos(f)
    f.write_text(json.dumps({"id": "a"}) + "\n")
    with pytest.raises(ValueError, match=":1: needs"):
        read_demos(f)


# ---- the task format, training, resuming, config errors ---------------------------------------------------

def test_the_shapes_perception_targets_are_well_formed_true_captions():
    from rlvr.tasks.shapes import ShapesParams, shapes_task
    task = shapes_task(ShapesParams(perception=True, teacher_error=0.5, num_train=60, num_eval=10))
    for ex, sft in zip(task.examples("train"), task.examples("sft")):
        cap, rest = split_text(ex.target, FMT, "caption")
        counts = {}
        for _, colour, _ in ex.meta["layout"]:
            counts[colour] = counts.get(colour, 0) + 1
        assert cap == "<caption>" + ",".join(f"{counts[c]} {c}" for c in ("red", "green", "blue") if c in counts) \
            + "</caption>"
        assert rest.endswith(f"<answer>{ex.answer}</answer>")
        assert split_text(sft.sft_target, FMT, "caption")[0] == cap  # the annotator sees right, may answer wrong
    noisy = sum(a.target != b.sft_target for a, b in zip(task.examples("train"), task.examples("sft")))
    assert 0 < noisy < 60
    score = task.score(task.examples("train")[0], task.examples("train")[0].target)
    assert score.components["correct"] == 1.0


def test_the_recipe_trains_aligns_then_hands_over_and_resumes(tmp_path):
    over = BINARY + PLAIN + ["algorithm.advantage_transforms.0.steps=1", "algorithm.discriminator.lr=1e-3"]
    out = run_recipe_steps("prism", tmp_path, steps=2, overrides=[_task(tmp_path / "data.jsonl"), *over])
    first, second = out["metrics"]
    assert first["discriminator/pairs"] > 0 and math.isfinite(first["discriminator/loss"])
    assert "discriminator/pairs" not in second and "advantage_transform/prism/format_valid" not in second
    (tmp_path / "r").mkdir()
    res = train_and_resume("prism", tmp_path / "r", [_task(tmp_path / "r" / "data.jsonl"), *PLAIN, "algorithm.advantage_transforms.0.steps=null",
                                                     "algorithm.discriminator.lr=1e-3"])
    full, part = res["weights"]
    assert all(torch.equal(full[k], part[k]) for k in full)
    ck = [load_file(str(tmp_path / "r" / run / "checkpoints" / "step_000004" / "discriminator.safetensors"))
          for run in ("run", "part")]
    assert all(torch.equal(ck[0][k], ck[1][k]) for k in ck[0])
    start = load_file(str(tmp_path / "r" / "run" / "checkpoints" / "step_000002" / "discriminator.safetensors"))
    assert any(not torch.equal(start[k], ck[0][k]) for k in start)


@pytest.mark.parametrize("bad, match", [
    (["algorithm.discriminator.enabled=false"], "enabled=true"),
    (["algorithm.advantage_transforms=[]"], "no component reads"),
    ([], "well-formed demonstration"),  # the tiny task's answers are not in the recipe's caption format
])
def test_bad_settings_are_refused_at_set_up(tmp_path, bad, match):
    with pytest.raises((ValueError, ConfigError), match=match):
        run_recipe_steps("prism", tmp_path, steps=1, overrides=[_task(tmp_path / "data.jsonl"), *bad])


def test_tiny_tokens_keep_the_format_tags_whole_and_save_with_the_tokenizer(tmp_path):
    from rlvr.models.config import ModelConfig
    from rlvr.models.loading import load_model, load_tokenizer
    tags = ["<caption>", "</caption>", "<think>", "</think>", "<answer>", "</answer>"]
    model, tok = load_model(ModelConfig(tiny=TinyModelConfig(tokens=tags + ["<think>"])))  # repeats are ignored
    plain = load_model(ModelConfig())[1]
    assert len(tok) == len(plain) + 6 and model.get_input_embeddings().weight.shape[0] == len(tok)
    ids = tok(DEMO, add_special_tokens=False)["input_ids"]
    assert len(ids) == len(DEMO) - sum(len(t) - 1 for t in tags) and tok.decode(ids) == DEMO
    assert tok.decode(ids, skip_special_tokens=True) == DEMO  # the tags are text, not special tokens
    tok.save_pretrained(tmp_path)
    assert load_tokenizer(tmp_path)(DEMO, add_special_tokens=False)["input_ids"] == ids


def test_identical_responses_score_identically_so_their_alignment_advantage_is_zero():
    tok, d = _disc()  # micro-batches of 2 rows
    same = DEMO.replace("2", "3")
    # rows 0-2 are one group's identical responses; row 2 shares its micro-batch with a longer prompt, so scored
    # row by row it would be left-padded and differ from rows 0 and 1 by float noise (~1e-9)
    comps = _rows(tok, [same, same, same], prompt="q:") + _rows(tok, [DEMO], prompt="a much longer prompt:")
    for j, c in enumerate(comps):
        c.group = 0 if j < 3 else 1
    examples = [Example(c.example_id, "q", "2", target=DEMO) for c in comps]
    ex = d.extras(comps, examples)
    for key in ("disc_perception", "disc_reasoning"):
        assert ex[key][0] == ex[key][1] == ex[key][2]  # exactly, not to float noise
    group = torch.tensor([c.group for c in comps])
    a = alignment_advantage(ex["disc_perception"], ex["disc_reasoning"], ex["disc_format"] <= 0, group, 0.5, 0.5,
                            1e-6)
    assert a[:3].tolist() == [0.0, 0.0, 0.0]
