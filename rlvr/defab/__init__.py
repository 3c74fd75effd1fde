"""DeFAb: defeasible logic and the answer checks of the Defeasible Abduction Benchmark.

Cooper & Velasquez, "DeFAb: A Verifiable Benchmark for Defeasible Abduction in Foundation Models"
(arXiv 2606.18557); the logic is standard defeasible logic (Antoniou, Billington, Governatori & Maher,
ACM TOCL 2001) computed in linear time (Maher, TPLP 2001).

- :mod:`~rlvr.defab.syntax` — literals, rules, superiority, theories; :mod:`~rlvr.defab.parser` — text.
- :mod:`~rlvr.defab.ground` — datalog grounding (full-grounding semantics; relevance as an option).
- :mod:`~rlvr.defab.engine` — ``derive(theory, variant)`` → +Δ/−Δ/+∂/−∂; :mod:`~rlvr.defab.naive` — test oracle.
- :mod:`~rlvr.defab.checks` — the DeFAb checks and the decisions of VERIFIERS 5.9.
- :mod:`~rlvr.defab.score` — ``score_answer(theory, target, answer, level)`` → ``Verdict``;
  :mod:`~rlvr.defab.incremental` — the per-instance cache that makes each check ground and derive only
  the part of D⁻ ∪ {h} ∪ Γ its answer depends on (``reground=True`` selects the full reference path).
- :mod:`~rlvr.defab.kb` — knowledge bases (shipped ``kb/*.tsv`` and users' files);
  :mod:`~rlvr.defab.generate` — Levels 1–3 instances; :mod:`~rlvr.defab.distract` — distractors;
  :mod:`~rlvr.defab.nonsense` — made-up vocabulary; :mod:`~rlvr.defab.render` — renderings M1–M4,
  decoders, rendering-robust score.

The ``defab`` task and verifier built on these live with the other tasks, in :mod:`rlvr.tasks.defab`.
"""

from rlvr.defab.checks import InstanceError, LanguageBias, Strength
from rlvr.defab.engine import Conclusions, Logic, derive
from rlvr.defab.ground import GroundingError, GroundTheory, ground
from rlvr.defab.parser import TheoryParseError, load_theory, parse_literal, parse_rule, parse_theory
from rlvr.defab.generate import GenerationError, Instance, generate, load_instances
from rlvr.defab.kb import KB, KBError, load_kb
from rlvr.defab.render import STYLES, decode, rendering_robust_accuracy, robust_score, score_completion
from rlvr.defab.score import Verdict, score_answer
from rlvr.defab.syntax import Atom, Literal, Rule, RuleKind, Superiority, Theory, TheoryError

__all__ = ["Atom", "Literal", "Rule", "RuleKind", "Superiority", "Theory", "TheoryError", "TheoryParseError",
           "parse_theory", "parse_literal", "parse_rule", "load_theory", "GroundTheory", "GroundingError",
           "ground", "Conclusions", "Logic", "derive", "InstanceError", "LanguageBias", "Strength", "Verdict",
           "score_answer", "KB", "KBError", "load_kb", "Instance", "GenerationError", "generate", "load_instances",
           "STYLES", "decode", "score_completion", "robust_score", "rendering_robust_accuracy"]
