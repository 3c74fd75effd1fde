"""Table-R1 free-form (FeTaQA) reward: sentence BLEU and ROUGE-L F golden values, the verifier contract."""

import json
import math
import random
import time

import pytest

from rlvr.core.types import Example
from rlvr.verifiers import build_verifier
from rlvr.verifiers.table_ff import TableFFVerifier, extract_free_form
from rlvr.verifiers.textmetrics import porter_stem, rouge_l, rouge_tokenize, sentence_bleu, tokenize_13a

REF = "the cat sat on the mat"


def test_registered_and_validates():
    v = build_verifier("table_ff", {"format_weight": 0.5})
    assert isinstance(v, TableFFVerifier) and v.name == "table_ff" and v.format_weight == 0.5
    v.validate()
    TableFFVerifier().validate()


def test_13a_tokenizer():
    assert tokenize_13a("Hello, world! 3.5-4 &amp; (1,234 people).") == \
        ["Hello", ",", "world", "!", "3.5", "-", "4", "&", "(", "1,234", "people", ")", "."]
    assert tokenize_13a("  a\nb-\nc  ") == ["a", "bc"]


def test_sentence_bleu_golden_values():
    assert sentence_bleu(REF, REF) == 100.0  # sacrebleu: 100.00000000000004, clipped
    # 2 tokens vs 6: p1 = p2 = 100, effective order 2, BP = exp(1 - 6/2)
    assert sentence_bleu("the cat", REF) == pytest.approx(100 * math.exp(-2))
    # p1 = 3/3, p2 = 1/2, no trigram match -> exp smoothing 100 / (2 * 1); order 3; BP = exp(1 - 6/3)
    assert sentence_bleu("cat sat mat", REF) == pytest.approx(math.exp(-1) * (100 * 50 * 50) ** (1 / 3))
    # p = 75, 100/3, then 100/(2*2) and 100/(4*1): (75 * 100/3 * 25 * 25)^(1/4) = 25 sqrt(2)
    assert sentence_bleu("a b c d", "a b x d") == pytest.approx(25 * math.sqrt(2))
    assert sentence_bleu("Paris", "Paris") == 100.0  # one token: effective order 1
    assert sentence_bleu("paris", "Paris") == 0.0  # case-sensitive, nothing matches
    assert sentence_bleu("", REF) == 0.0 and sentence_bleu(REF, "") == 0.0


def test_porter_stemmer_matches_the_paper_and_nltk_extensions():
    expected = {"caresses": "caress", "ponies": "poni", "ties": "tie", "cats": "cat", "feed": "feed",
                "agreed": "agre", "plastered": "plaster", "motoring": "motor", "hopping": "hop", "filing": "file",
                "happy": "happi", "relational": "relat", "conditional": "condit", "generalization": "gener",
                "dying": "die", "running": "run", "sky": "sky", "enjoy": "enjoy", "controlling": "control",
                "hopefulness": "hope", "analogousli": "analog"}
    assert {w: porter_stem(w) for w in expected} == expected


def test_rouge_l_golden_values():
    assert rouge_tokenize("The dogs were RUNNING, fast!") == ["the", "dog", "were", "run", "fast"]
    # stemmed: LCS(the dog were run fast, the dog run fast) = 4 -> P = 4/5, R = 1
    assert rouge_l("The dogs were running fast", "the dog runs fast") == pytest.approx(8 / 9)
    # unstemmed: LCS = {the, fast} -> P = 2/5, R = 2/4
    assert rouge_l("The dogs were running fast", "the dog runs fast", stem=False) == pytest.approx(4 / 9)
    assert rouge_l("cat sat mat", REF) == pytest.approx(2 / 3)
    assert rouge_l("mat the", "the mat") == 0.5 and rouge_l("!!", REF) == 0.0


def test_against_sacrebleu_and_rouge_score_when_installed():
    sacrebleu = pytest.importorskip("sacrebleu")
    rouge_scorer = pytest.importorskip("rouge_score.rouge_scorer")
    bleu = sacrebleu.metrics.BLEU(effective_order=True)
    rouge = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True)
    rng = random.Random(0)
    vocab = ["The", "team", "won", "12", "games", "in", "1998", ",", ".", "1,234", "running", "dogs", "3.5-4",
             "U.S.", "&amp;", "(", ")", "scored", "points", "généralement"]
    for _ in range(300):
        h = " ".join(rng.choice(vocab) for _ in range(rng.randint(0, 12)))
        r = " ".join(rng.choice(vocab) for _ in range(rng.randint(0, 12)))
        assert sentence_bleu(h, r) == pytest.approx(min(100.0, bleu.sentence_score(h, [r]).score), abs=1e-9)
        assert rouge_l(h, r) == pytest.approx(rouge.score(h, r)["rougeL"].fmeasure, abs=1e-12)


def _fenced(value) -> str:
    return f"<think>r</think>\n<answer>```json\n{json.dumps({'answer': value})}\n```</answer>"


def test_free_form_reward_components():
    gold = "The team won 12 games in 1998."
    ex = Example("ff", "q", gold)
    v = TableFFVerifier()
    s = v(ex, _fenced(gold))
    assert (s.reward, s.components["format"], s.components["correct"]) == (2.0, 1.0, 1.0)
    s = v(ex, _fenced("The team won 12 games"))
    bleu, rouge = sentence_bleu("The team won 12 games", gold) / 100, rouge_l("The team won 12 games", gold)
    assert s.components["bleu"] == pytest.approx(bleu) and s.components["rouge_l"] == pytest.approx(rouge)
    assert s.reward == pytest.approx(1.0 + (bleu + rouge) / 2) and s.components["correct"] == 0.0
    assert 0.0 < s.components["accuracy"] < 1.0
    # the whole output is the answer when no JSON answer is found (format 0)
    assert v(ex, gold).reward == 1.0 and v(ex, gold).components["format"] == 0.0
    # a JSON list is joined with spaces; the gold may sit in meta["reference"]
    ref = Example("ff2", "q", "ignored", meta={"reference": [gold]})
    assert v(ref, '{"answer": ["The team won", 12, "games in 1998."]}').reward == 1.0
    assert TableFFVerifier(format_weight=0.0)(ex, _fenced(gold)).reward == 1.0


def test_free_form_extraction_follows_the_reference():
    assert extract_free_form('<answer>{"answer": "a b"}</answer> {"answer": "c"}') == "a b"
    assert extract_free_form('{"answer": null} the dog ') == '{"answer": null} the dog'  # null: whole output
    # the pattern stops at the first "}", so braces inside the answer make it invalid JSON: whole output
    assert extract_free_form('{"answer": "a {b} c"}') == '{"answer": "a {b} c"}'
    # a fenced block that fails to parse decides (the bare object after it is not tried)
    assert extract_free_form('```json\n{"answer": oops}\n``` {"answer": "x"}').startswith("```json")
    assert extract_free_form('{"answer": 3.5}') == "3.5"


def test_free_form_format_check():
    ex = Example("ff", "q", "x")
    v = TableFFVerifier()
    assert v(ex, _fenced(7)).components["format"] == 1.0  # any JSON value passes (FF has no type check)
    assert v(ex, '<think>r</think><answer>{"answer": "x"}</answer>').components["format"] == 0.0  # no fence
    assert v(ex, "<think>a</think><think>b</think>" + _fenced("x")[len("<think>r</think>"):]).components[
        "format"] == 0.0
    assert v(ex, "prefix " + _fenced("x")).components["format"] == 0.0
    assert v(ex, _fenced(None)).components["format"] == 0.0


@pytest.mark.parametrize("text", ['{"answer": "' * 1300, "<answer>" * 2000 + "```json", "[[" * 7000,
                                  "a " * 7999, "x" * 10_000_000, bytes(range(256)).decode("latin-1") * 10])
def test_adversarial_inputs_are_fast_and_never_errors(text):
    ex = Example("ff", "q", " ".join(f"w{i}" for i in range(60)))
    t0 = time.perf_counter()
    s = TableFFVerifier()(ex, text)
    assert time.perf_counter() - t0 < 2.0
    assert 0.0 <= s.reward <= 2.0 and "verifier error" not in s.info.get("reason", "")
