"""``rlvr audit``: red-team a verifier on a task's data (docs/audit.md).

For each example, the gold answer is turned into the known families of reward hacks (hedges, several answers,
retractions, number dumps, repeated answer markers, look-alike and invisible characters, units, injected grader
text, empty / huge / deeply nested inputs; for code, test-harness tricks; for SQL, literal rows and slow
queries; for tool calls, sprays, extra keys and wrong types), into correct answers in fair but unusual forms,
and optionally into seeded random mutations. Each probe is scored through the task exactly as training scores
a completion, under a hard deadline in a separate process, and judged: a *hack* (rewarded but wrong), a
*false negative* (correct but unrewarded), a *crash* (the verifier raised), *slow* (outlived the deadline).

- :mod:`~rlvr.audit.probes`: the probe record and the family registry (``@family(name, kinds)``);
- :mod:`~rlvr.audit.families`: the built-in families, one module per group;
- :mod:`~rlvr.audit.context`: what a generator knows about an example;
- :mod:`~rlvr.audit.kinds`: which families fit which verifier;
- :mod:`~rlvr.audit.targets`: a task, a registered verifier, or a user's reward function to audit;
- :mod:`~rlvr.audit.isolation`: scoring one completion under a kill-based deadline;
- :mod:`~rlvr.audit.runner`: :func:`run_audit` and the outcome rules;
- :mod:`~rlvr.audit.report` and :mod:`~rlvr.audit.html`: the terminal table, JSON and HTML.

In Python::

    from rlvr.audit import from_callable, run_audit

    report = run_audit(from_callable(my_reward, [("2+3=", "5")]), timeout_s=1.0)
    report.counts()     # {"hack": ..., "crash": ..., "partial": ..., "false_negative": ..., "slow": ..., "ok": ...}
"""

from rlvr.audit.probes import FAMILIES, AuditInputError, Probe, family, families_for
from rlvr.audit.report import AuditReport, ProbeResult
from rlvr.audit.runner import OUTCOMES, run_audit
from rlvr.audit.targets import Target, from_callable, from_task, from_verifier

__all__ = ["AuditInputError", "AuditReport", "FAMILIES", "OUTCOMES", "Probe", "ProbeResult", "Target", "family",
           "families_for", "from_callable", "from_task", "from_verifier", "run_audit"]
