"""A local sandbox for model-written code: bubblewrap + launcher + rlimits + cgroups + seccomp.

Usage::

    from rlvr.sandbox import Limits, Program, default_sandbox
    res = default_sandbox().run(Program("print(input())", stdin=b"hi\\n"), Limits(wall_s=5))
    res.stdout, res.exit_code, res.killed_reason, res.protections.active()

See ``api.py`` for the contract, ``runner.py`` for supervision, ``bwrap.py`` for the namespace layout,
``launcher.py`` for what happens inside before the program starts, ``cgroups.py``, ``uids.py``, ``seccomp.py``.
``judge.py`` is the code verifier's in-sandbox test harness.
"""

from rlvr.sandbox.api import MiB, Limits, Program, Protections, Sandbox, SandboxResult
from rlvr.sandbox.runner import LocalSandbox, default_sandbox

__all__ = ["Limits", "LocalSandbox", "MiB", "Program", "Protections", "Sandbox", "SandboxResult",
           "default_sandbox"]
