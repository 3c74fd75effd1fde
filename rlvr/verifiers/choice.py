"""The ``choice`` verifier: multiple-choice answers, given as the option's letter or as its text.

**The example.** ``answer`` is the correct letter (``"B"``). ``meta["options"]`` holds the option texts in the
order shown (the first is A), or maps letters to texts (``{"A": ..., "B": ...}``); ``meta["correct"]``
(optional) lists every letter that counts as correct, for items with several gold options. Without options
only letters are read, and the valid letters run from A to D (or to the answer's letter, if later).

**What is read.** Only the text after the last ``</think>``; a ``<think>`` left open means no answer.
Markdown emphasis (``*``, ``__``), backticks, ``$``, ``\\(``/``\\)`` and LaTeX text wrappers (``\\text{}``,
``\\textbf{}``, ``\\mathrm{}``, ``\\mathbf{}``) are removed first, from the completion and the option texts
alike. The *answer statements* are:

1. ``\\boxed{...}`` / ``\\fbox{...}`` and ``<answer>...</answer>`` blocks;
2. an anchor followed by the answer on the same line (or, when the line ends there, the next non-empty
   line): "answer is / was / would be / should be / must be", "answer:", "final answer", "correct / best /
   right answer (option, choice) is / :", "option is", "choice is", "my answer", "I choose / pick / select /
   go with / would choose / 'd pick / 'll go with", in any letter case;
3. a letter said to be right: "(B) is correct", "option B is correct / right", "B is the correct answer";
4. the last non-empty line when it is an answer by itself, after an optional "So," / "Thus" / "Hence" /
   "Therefore" / "Answer": ``B``, ``(b)``, ``B)``, ``[B]``, ``B.``, ``Option B``, ``B. <option text>``,
   ``B) <option text>``, ``**B**``, or an option's text alone.

**The last statement that gives an answer decides**, by its position in the completion: letters mentioned
in the reasoning before it (or after it, outside any statement) do not count, and a statement that names
no letter or option ("the answer is tricky") is passed over for the one before it. A statement is read up to
400 characters past its start (plus the longest option's length), and only the last 500 statements are read.

**Reading one statement.** Letters are case-insensitive inside brackets, after "option"/"choice", or when
the statement is the letter alone; elsewhere only a capital letter is a letter (so "a" and "I" in prose are
words), and only the valid letters count. In order:

- an option's whole text (case, spacing and a final period ignored) is that option: "I and II" or "Vitamin
  A" are read as options, not as letters; a statement that is both a bare valid letter and a *different*
  option's text ("A" where option C's text is "A") is ambiguous and scores 0, unless bracketed or labelled
  ("(A)", "Option A", "C) A");
- an option's text at the start, followed by a clause ("Paris, because ..."), unless the statement starts
  with a bracketed or labelled letter;
- a leading letter form (``(B)``, ``[B]``, ``B)``, ``Option B``, a bare ``B``), with what follows it: an
  option text after the letter must be that letter's ("B. <text of C>" contradicts itself and scores 0);
- in an anchor's span with no letter or option at its start ("the answer is most likely B"), the one valid
  letter its first clause names.

The answer is then checked in its clause (up to ``.``, ``!``, a dash, or "because", "since", "as",
"given", "which", "due to", "based on"; not a comma or ``;``), the matched option text excluded. It scores 0
when the clause names another valid letter ("A or B", "A, B", "B; A", "A and C", "A/B", every letter
listed), uses a hedge word (or, either, maybe, perhaps, possibly, probably, likely, presumably, unsure,
uncertain, not, "not sure", "I think", "I believe", "I guess", guess) before or after the answer, is negated
("not B", "B is not ..."), or asks ("B?").

The last line is read strictly: nothing but the letter, the letter with its own option text, or an option's
text may be on it; a line of several letters, or two or more option lines at the end ("A) ...", "B) ...":
the options restated), scores 0, and any other line is not a statement.

Several statements with different letters score 0 by default (``several: zero``: two boxes or "Answer:" lines
with different letters, a statement in the reasoning that differs from the final one), the math verifier's rule
for several answer markers: a policy must not learn that writing every letter in turn is safe. Repeating one
letter is one answer. ``several: last`` lets the last statement decide instead ("Answer: A ... Actually, the
answer is B" is B), as a reader takes a corrected answer.

``info["extracted"]`` is the letter read (so maj@n votes on letters), ``info["how"]`` the kind of statement
(box, anchor, correct, final line), ``info["reason"]`` why a completion scored 0.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from rlvr.core.types import Example, Score
from rlvr.registry import Params
from rlvr.verifiers.base import VERIFIERS, BaseVerifier
from rlvr.verifiers.choice_extract import LETTERS, Choice, extract_choice, letters_block, options_of

__all__ = ["ChoiceParams", "ChoiceVerifier", "Choice", "LETTERS", "extract_choice", "options_of", "letters_block"]


class ChoiceParams(Params):
    """Parameters of the ``choice`` verifier."""

    text_answers: bool = Field(True, description="accept an option's text as the answer (not only its letter)")
    several: Literal["last", "zero"] = Field("zero", description="statements giving different letters: the "
                                             "completion scores 0, as the math verifier's several markers do, or "
                                             "(last) the last decides")


class ChoiceVerifier(BaseVerifier):
    """1 when the completion's answer statement names the correct option (see the module doc)."""

    name = "choice"

    def __init__(self, params: ChoiceParams | None = None):
        self.params = params or ChoiceParams()

    def score(self, example: Example, text: str) -> Score:
        options = options_of(example.meta)
        gold = str(example.answer).strip().strip("()").upper()
        correct = example.meta.get("correct")
        golds = {str(c).strip().upper() for c in correct} if isinstance(correct, (list, tuple)) and correct else {gold}
        n = len(options) or max(4, max((LETTERS.index(g) + 1 for g in golds if g in LETTERS), default=4))
        if not golds <= set(LETTERS[:n]):
            return Score(0.0, {"correct": 0.0}, {"reason": f"gold {sorted(golds)} is not a letter of the {n} options"})
        got = extract_choice(text or "", options, LETTERS[:n], self.params.text_answers, self.params.several)
        ok = got.letter in golds
        info: dict[str, Any] = {"extracted": got.letter, "how": got.how}
        if not ok:
            info["reason"] = got.reason or f"answered {got.letter}, not {'/'.join(sorted(golds))}"
        return Score(float(ok), {"correct": float(ok)}, info)

    def validation_cases(self) -> list[tuple[Example, str, float]]:
        ex = Example("choice-1", "Which is a noble gas?", "B", "choice",
                     meta={"options": ["Vitamin A", "Argon", "I and II", "Iron"]})
        return [(ex, "Argon is inert.\nAnswer: B", 1.0), (ex, "The answer is (b).", 1.0),
                (ex, "\\boxed{B}", 1.0), (ex, "Argon", 1.0), (ex, "**B) Argon**", 1.0),
                (ex, "The answer is A or B", 0.0), (ex, "A, B", 0.0), (ex, "Answer: B. Vitamin A", 0.0),
                (ex, "B looks wrong. The answer is C.", 0.0), (ex, "I and II", 0.0)]


@VERIFIERS.register("choice", ChoiceParams)
def _choice(p: ChoiceParams) -> ChoiceVerifier:
    """Multiple-choice answers: a letter or an option's text from the last answer statement; hedges score 0."""
    return ChoiceVerifier(p)
