"""DeFAb: defeasible logic and the answer checks of the Defeasible Abduction Benchmark.

Cooper & Velasquez, "DeFAb: A Verifiable Benchmark for Defeasible Abduction in Foundation Models"
(arXiv 2606.18557); the logic is standard defeasible logic (Antoniou, Billington, Governatori & Maher,
ACM TOCL 2001) computed in linear time (Maher, TPLP 2001).

- :mod:`~rlvr.defab.syntax` — literals, rules, superiority, theories; :mod:`~rlvr.defab.parser` — text.
- :mod:`~rlvr.defab.ground` — datalog grounding (full-grounding semantics; relevance as an option).
- :mod:`~rlvr.defab.engine` — ``derive(theory, variant)`` → +Δ/−Δ/+∂/−∂; :mod:`~rlvr.defab.naive` — test oracle.
- :mod:`~rlvr.defab.checks` — the DeFAb checks and the decisions the definitions leave open
  (docs/verifiers.md, DeFAb decision 1 to 8).
- :mod:`~rlvr.defab.score` — ``score_answer(theory, target, answer, level)`` → ``Verdict``;
  :mod:`~rlvr.defab.incremental` — the per-instance cache that makes each check ground and derive only
  the part of D⁻ ∪ {h} ∪ Γ its answer depends on (``reground=True`` selects the full reference path).
- :mod:`~rlvr.defab.kb` — knowledge bases (shipped ``kb/*.tsv`` and users' files);
  :mod:`~rlvr.defab.generate` — Levels 1–3 instances; :mod:`~rlvr.defab.distract` — distractors;
  :mod:`~rlvr.defab.nonsense` — made-up vocabulary; :mod:`~rlvr.defab.render` — renderings M1–M4,
  decoders, rendering-robust score.

The ``defab`` task and verifier built on these live with the other tasks, in :mod:`rlvr.tasks.defab`.
"""

from rlvr.lazy import lazy_exports

__all__ = ["Atom", "Literal", "Rule", "RuleKind", "Superiority", "Theory", "TheoryError", "TheoryParseError",
           "parse_theory", "parse_literal", "parse_rule", "load_theory", "GroundTheory", "GroundingError",
           "ground", "Conclusions", "Logic", "derive", "InstanceError", "LanguageBias", "Strength", "Verdict",
           "score_answer", "KB", "KBError", "load_kb", "Instance", "GenerationError", "generate", "load_instances",
           "STYLES", "decode", "score_completion", "robust_score", "rendering_robust_accuracy"]

# each name loads its module on first use, so rlvr.defab.names (the CLI's choices) imports alone
__getattr__ = lazy_exports(__name__, {
    "InstanceError": "checks", "LanguageBias": "checks", "Strength": "checks", "Conclusions": "engine",
    "Logic": "engine", "derive": "engine", "GroundingError": "ground", "GroundTheory": "ground",
    "ground": "ground", "TheoryParseError": "parser", "load_theory": "parser", "parse_literal": "parser",
    "parse_rule": "parser", "parse_theory": "parser", "GenerationError": "generate", "Instance": "generate",
    "generate": "generate", "load_instances": "generate", "KB": "kb", "KBError": "kb", "load_kb": "kb",
    "STYLES": "render", "decode": "render", "rendering_robust_accuracy": "render", "robust_score": "render",
    "score_completion": "render", "Verdict": "score", "score_answer": "score", "Atom": "syntax",
    "Literal": "syntax", "Rule": "syntax", "RuleKind": "syntax", "Superiority": "syntax", "Theory": "syntax",
    "TheoryError": "syntax",
})
