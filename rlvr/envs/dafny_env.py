"""Dafny programs against a fixed specification, verified turn by turn (``dafny``): the multi-turn
setting of Tan 2026, arXiv:2605.30914.

**The episode.** ``example.meta["spec"]`` is the task's Dafny specification: its declarations *with* a
body (functions, predicates, datatypes, classes, helper lemmas) are fixed and must appear in the program
exactly as given; its methods, functions, lemmas and predicates *without* a body are the ones to implement:
their header (signature, ``requires``, ``ensures``, ``modifies``, ``reads``, ``decreases``) must appear
exactly as given, at the top level, directly followed by a body. Each policy turn is one whole program: the
last fenced ```dafny block (else the last fenced block, else the whole turn). The prompt states the task, so
``reset`` returns "".

**Each turn** is first checked for specification hacking (the filters we reconstructed from Tan 2026; comments and
whitespace never matter, so the comparison is token by token) and every violation is named: a spec declaration
missing, changed (a weakened, removed or added ``ensures``/``requires``, a changed signature, an added modifier) or
declared twice (shadowing); an ``assume``; an attribute off the allow list (``{:verify false}``, ``{:axiom}``,
``{:extern}``, ``{:termination false}``, ``{:autoReq}``... only ``allowed_attributes`` pass); ``decreases *`` (a
method that may not terminate satisfies any postcondition); ``include``; modules (unless ``allow_modules``). A
program that passes runs ``dafny /compile:0 /noCheating:1 /timeLimit:N`` (Dafny 2.3) inside the sandbox
(:mod:`rlvr.sandbox`, no network, wall-clock and memory limits); ``/noCheating:1`` turns any assumption left
(bodyless lemmas, functions or ``forall`` statements that would act as axioms) into an error, reported as a
violation too.

**Rewards.** A turn whose program keeps the specification and verifies (no error, no time-out, at least
one verified item) has reward 1 and ends the episode; every other turn has reward 0 and its observation
says why: the violations, or Dafny's diagnostics (trimmed: execution traces and prover noise dropped, each
error followed by its source line, at most ``max_observation_chars``). ``info`` carries ``verified``,
``violations``, ``reason``, ``dafny_s`` and ``turns``.

**Failures.** A verifier run past ``wall_s`` is an observation (the policy can simplify its proof; keep
``wall_s`` under the driver's ``step_timeout_s``, 30 s by default, which would end the episode instead). A
sandbox that cannot start ends the episode with reward 0 and ``info["reason"]``. Building the environment
without Dafny raises a RuntimeError saying how to install it (``apt-get install -y dafny``).
"""

from __future__ import annotations

import os
import re
import shutil
import time
from functools import lru_cache
from typing import TYPE_CHECKING

from pydantic import Field

from rlvr.core.types import Example
from rlvr.envs.base import ENVIRONMENTS, Step
from rlvr.registry import Params

if TYPE_CHECKING:
    from rlvr.sandbox import Sandbox

__all__ = ["DafnyEnv", "DafnyParams", "spec_violations", "extract_dafny", "find_dafny", "dafny_available"]

_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)```", re.S)
_W = r"[A-Za-z0-9_'?]"  # Dafny identifier characters
_KINDS = ("method", "function", "predicate", "lemma", "colemma", "copredicate", "datatype", "codatatype",
          "type", "newtype", "class", "trait", "iterator", "const", "constructor")
_CALLABLE = {"method", "function", "predicate", "lemma", "colemma", "copredicate"}
_MODIFIERS = {"ghost", "static", "protected", "twostate", "least", "greatest", "inductive", "abstract"}
_MOD_BEFORE = re.compile(rf"(?<!{_W})(?:{'|'.join(sorted(_MODIFIERS))}) ?$")
_CLAUSES = re.compile(r"(?<![A-Za-z0-9_'?])(requires|ensures|modifies|reads|decreases)(?![A-Za-z0-9_'?])")
_NOISE = re.compile(r"^Prover error: .*unknown parameter 'model_compress'|^Legal parameters are:|^Execution trace:")


class DafnyParams(Params):
    time_limit_s: int = Field(10, gt=0, description="Dafny's /timeLimit: seconds per verified procedure")
    wall_s: float = Field(25.0, gt=0, description="the whole verifier run at most (sandbox wall clock; keep it "
                                                  "under rollout.multiturn.step_timeout_s)")
    memory_mb: int = Field(2048, gt=0, description="memory of the verifier run (mono and z3 together)")
    max_program_chars: int = Field(40_000, gt=0, description="a longer program is refused unverified")
    max_observation_chars: int = Field(2000, gt=0, description="diagnostics are cut to this many characters")
    allowed_attributes: tuple[str, ...] = Field(("trigger", "induction", "fuel", "opaque"),
                                                description="{:name} attributes a program may use")
    allow_modules: bool = Field(False, description="allow module / import / refines (off: a module could "
                                                   "shadow the specification's names)")


# ---- reading Dafny text -------------------------------------------------------------------------------------
def extract_dafny(text: str) -> str:
    """The last ```dafny block, else the last fenced block, else the whole text."""
    blocks = _FENCE.findall(text)
    tagged = [body for lang, body in blocks if lang.lower() in ("dafny", "dfy")]
    return (tagged or [body for _, body in blocks] or [text])[-1]


def _strip_comments(src: str) -> str:
    """``//`` and (nested) ``/* */`` comments removed; string and char literals kept."""
    out, i, n = [], 0, len(src)
    while i < n:
        c, two = src[i], src[i:i + 2]
        if two == "//":
            while i < n and src[i] != "\n":
                i += 1
        elif two == "/*":
            depth, i = 1, i + 2
            while i < n and depth:
                depth += src[i:i + 2] == "/*"
                depth -= src[i:i + 2] == "*/"
                i += 2 if src[i:i + 2] in ("/*", "*/") else 1
            out.append(" ")
        elif c == '"' or (c == "'" and not (out and re.match(_W, out[-1]))):
            j = _literal_end(src, i)
            out.append(src[i:j])
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _literal_end(s: str, i: int) -> int:
    """The index after the string / char literal starting at ``s[i]``."""
    q, j = s[i], i + 1
    while j < len(s) and s[j] != q:
        j += 2 if s[j] == "\\" else 1
    return min(j + 1, len(s))


def normalize(src: str) -> str:
    """Comments removed, whitespace collapsed, and kept only between two identifier characters."""
    s = re.sub(r"\s+", " ", _strip_comments(src)).strip()
    return re.sub(rf"(?<!{_W}) | (?!{_W})", "", s)


def _depths(s: str) -> list[int]:
    """The brace depth before each character (literals skipped)."""
    out, d, i = [0] * (len(s) + 1), 0, 0
    while i < len(s):
        if s[i] == '"' or (s[i] == "'" and not (i and re.match(_W, s[i - 1]))):
            j = _literal_end(s, i)
            out[i:j] = [d] * (j - i)
            i = j
            continue
        out[i] = d
        d += {"{": 1, "}": -1}.get(s[i], 0)
        i += 1
    out[len(s)] = d
    return out


def _mask(s: str) -> str:
    """String and char literals blanked, so keywords inside them are not seen."""
    return re.sub(r'"(?:\\.|[^"\\])*"|(?<![A-Za-z0-9_\'?])\'(?:\\.|[^\'\\])\'', lambda m: '""', s)


def _decls(norm: str) -> list[tuple[str, str, str]]:
    """Top-level declarations of normalised text: ``(kind, name, text)``."""
    depth, starts = _depths(norm), []
    for m in re.finditer(rf"(?<!{_W})({'|'.join(_KINDS)})(?!{_W})", norm):
        prev = norm[:m.start()].rstrip().rsplit(" ", 1)[-1]
        if depth[m.start()] == 0 and not (m.group(1) == "method" and prev.endswith(("function", "predicate"))):
            start = m.start()
            while (mod := _MOD_BEFORE.search(norm[:start])) is not None:  # the modifiers in front, too
                start = mod.start()
            starts.append((start, m))
    out = []
    for k, (start, m) in enumerate(starts):
        end = starts[k + 1][0] if k + 1 < len(starts) else len(norm)
        text = norm[start:end].strip()
        name = re.match(rf"(?:method )?(?:\{{:[^{{}}]*\}} ?)*({_W}+)", norm[m.end():].lstrip())
        out.append((m.group(1), name.group(1) if name else "", text))
    return out


def _has_body(text: str) -> bool:
    """A declaration ends in a body: a final ``{...}`` that is neither an attribute nor a set display."""
    if not text.endswith("}"):
        return False
    depth, i = 0, len(text) - 1
    while i >= 0:
        depth += {"}": 1, "{": -1}.get(text[i], 0)
        if depth == 0:
            break
        i -= 1
    before = text[:i].rstrip()[-1:]
    return text[i:i + 2] != "{:" and bool(before) and (re.match(_W, before) is not None or before in ")]}>")


# ---- the specification-hacking filters ----------------------------------------------------------------------
def spec_violations(spec: str, program: str, allowed_attributes: tuple[str, ...] = DafnyParams().allowed_attributes,
                    allow_modules: bool = False) -> list[str]:
    """Every way ``program`` departs from ``spec`` or reaches for an escape hatch ([] when none)."""
    prog, out = normalize(program), []
    depth, rest = _depths(prog), list(prog)  # rest: the program less the spec's own text, scanned for hatches
    for kind, name, text in _decls(normalize(spec)):
        fixed = kind not in _CALLABLE or _has_body(text)
        hits = [m.start() for m in re.finditer(re.escape(text), prog)]
        ok = [h for h in hits if depth[h] == 0 and (fixed or prog[h + len(text):h + len(text) + 1] == "{"
                                                   and prog[h + len(text):h + len(text) + 2] != "{:")]
        declared = len(re.findall(rf"(?<!{_W})(?:{'|'.join(_KINDS)}) ?(?:method )?(?:\{{:[^{{}}]*\}} ?)*"
                                  rf"{re.escape(name)}(?!{_W})", _mask(prog))) if name else 1
        before = [m.group(1) for h in ok if (m := re.search(rf"({_W}+) ?$", prog[:h]))]
        if any(b in _MODIFIERS for b in before):
            out.append(f"{kind} {name}: a modifier was added to its declaration ({'/'.join(sorted(set(before)))})")
        elif len(ok) != 1 or declared != 1:
            out.append(_why_changed(kind, name, text, prog, fixed, hits, len(ok), declared))
        for h in ok[:1]:
            rest[h:h + len(text)] = " " * len(text)
    code = _mask("".join(rest))
    for attr in sorted(set(re.findall(rf"\{{:\s*({_W}+)", code)) - set(allowed_attributes)):
        out.append(f"attribute {{:{attr}}} is not allowed (allowed: {', '.join(allowed_attributes) or 'none'})")
    banned = [("assume", "an assume statement (an unchecked assumption)"),
              (r"decreases ?\*", "decreases * (a method that may not terminate satisfies any postcondition)"),
              ("include", "an include directive (the program must be self-contained)")]
    if not allow_modules:
        banned += [(r"module|import|refines", "modules, imports and refinement (they can shadow the spec)")]
    for pattern, why in banned:
        if re.search(rf"(?<!{_W})(?:{pattern})(?!{_W})", code):
            out.append(why)
    return out


def _why_changed(kind: str, name: str, text: str, prog: str, fixed: bool, hits: list[int], found: int,
                 declared: int) -> str:
    if declared > 1 or found > 1:
        return f"{kind} {name} is declared more than once (the specification's names may not be shadowed)"
    m = re.search(rf"(?<!{_W}){kind} ?(?:\{{:[^{{}}]*\}} ?)*{re.escape(name)}(?!{_W})", prog) if name else None
    if m is None:
        return f"{kind} {name} from the specification is missing"
    if fixed:
        return f"{kind} {name}: its definition was changed (it must be kept exactly as given)"
    if hits and all(_depths(prog)[h] > 0 for h in hits):
        return f"{kind} {name} must be declared at the top level, as in the specification"
    if hits:
        after = prog[hits[0] + len(text):].lstrip()
        if _CLAUSES.match(after):
            return f"{kind} {name}: a {_CLAUSES.match(after).group(1)} clause was added to its specification"
        if not after or re.match(rf"(?:{'|'.join(_KINDS + tuple(_MODIFIERS))})(?!{_W})", after):
            return f"{kind} {name} has no body (it must be implemented)"
        return f"{kind} {name}: its last clause was changed (extended with {after.split('{', 1)[0][:60]!r})"
    (sig, given), (got_sig, got) = _clauses(text), _clauses(prog[m.start():])
    if got_sig != sig:
        return f"{kind} {name}: its signature was changed"
    missing, extra = [c for c in given if c not in got], [c for c in got if c not in given]
    if missing:
        return f"{kind} {name}: {missing[0].split(' ', 1)[0]} clause removed or weakened: {missing[0]}"
    if extra:
        return f"{kind} {name}: a clause was added to its specification: {extra[0]}"
    return f"{kind} {name}: its specification was changed (it must be kept exactly as given)"


def _clauses(text: str) -> tuple[str, list[str]]:
    """A header's signature and its clauses (up to the body, heuristically)."""
    body = re.search(r"\{(?!:)", text[text.find("("):]) if "(" in text else None
    head = text[: text.find("(") + body.start()] if body else text
    parts = _CLAUSES.split(head)
    return parts[0], [f"{kw} {expr.strip()}" for kw, expr in zip(parts[1::2], parts[2::2])]


# ---- running Dafny ------------------------------------------------------------------------------------------
@lru_cache(maxsize=1)
def find_dafny() -> tuple[str, str]:
    """``(mono, Dafny.exe)`` of an installed Dafny 2.x (Debian's package), both under /usr (the sandbox sees
    only /usr); RuntimeError saying how to install it otherwise."""
    how = "install it with `apt-get install -y dafny` (Debian's Dafny 2.3, with mono and z3)"
    exe, wrapper = "/usr/lib/dafny/Dafny.exe", shutil.which("dafny")
    if wrapper and not os.path.exists(exe):
        with open(wrapper, errors="replace") as f:
            found = re.search(r"(\S+/Dafny\.exe)", f.read(4096))
        exe = found.group(1) if found else exe
    mono = next((os.path.realpath(p) for p in ("/usr/bin/cli", "/usr/bin/mono") if os.path.exists(p)), None)
    if not os.path.exists(exe) or mono is None:
        raise RuntimeError(f"the dafny environment needs Dafny, which is not installed: {how}")
    if not (exe.startswith("/usr/") and mono.startswith("/usr/") and shutil.which("z3")):
        raise RuntimeError(f"Dafny must live under /usr with z3 on PATH for the sandbox to run it: {how}")
    return mono, exe


def dafny_available() -> bool:
    try:
        find_dafny()
        return True
    except RuntimeError:
        return False


_DRIVER = """import os, sys
box = os.path.dirname(os.path.abspath(__file__))
env = {"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/tmp"), "LANG": "C.UTF-8",
       "MONO_CFG_DIR": os.path.join(box, "etc"), "MONO_CONFIG": os.path.join(box, "etc", "mono", "config")}
mono, exe, limit = sys.argv[1:4]
os.execve(mono, [mono, exe, "/compile:0", "/nologo", "/noCheating:1", "/timeLimit:" + limit,
                 os.path.join(box, "program.dfy")], env)
"""


@lru_cache(maxsize=1)
def _mono_files() -> tuple[tuple[str, str], ...]:
    """Mono's config (its dll map), shipped into the sandbox: /etc is not mounted there."""
    want = {"etc/mono/config": "/etc/mono/config", "etc/mono/4.5/machine.config": "/etc/mono/4.5/machine.config"}
    out = []
    for box, host in want.items():
        if os.path.exists(host):
            with open(host) as f:
                out.append((box, f.read()))
    return tuple(out)


def trim_diagnostics(out: str, program: str, limit: int) -> str:
    """Dafny's report without traces and prover noise, each error followed by its source line, cut at ``limit``."""
    lines, keep, skip = program.splitlines(), [], False
    for line in out.replace("\r\n", "\n").splitlines():
        if _NOISE.match(line):
            skip = True
            continue
        if skip and (line.startswith(" ") or not line.strip()):
            continue
        skip = False
        line = re.sub(r"\S*/program\.dfy", "program.dfy", line).replace("Impl$$_module.__default.", "")
        keep.append(line)
        m = re.match(r"program\.dfy\((\d+),\d+\): Error", line)
        if m and 0 < int(m.group(1)) <= len(lines):
            keep.append("    | " + lines[int(m.group(1)) - 1].strip()[:200])
    text = "\n".join(k for k in keep if k.strip())
    return text if len(text) <= limit else text[: limit - 20] + "\n[... diagnostics cut]"


class DafnyEnv:
    """One episode: Dafny programs for ``meta["spec"]``, verified until one holds (see the module doc)."""

    def __init__(self, p: DafnyParams, sandbox: Sandbox | None = None):
        self.p, self.sandbox = p, sandbox
        self.mono, self.exe = find_dafny()
        self.spec, self.turns = "", 0

    def reset(self, example: Example, seed: int) -> str:
        self.spec, self.turns = str(example.meta.get("spec") or ""), 0
        if not self.spec.strip():
            raise ValueError("dafny example without meta['spec']")
        return ""

    def step(self, action: str) -> Step:
        self.turns += 1
        program = extract_dafny(action)
        info = {"turns": self.turns, "verified": False, "violations": [], "dafny_s": 0.0}
        if not program.strip() or len(program) > self.p.max_program_chars:
            why = "no Dafny program in the turn" if not program.strip() else "the program is too long"
            return Step(f"{why}: answer with one ```dafny block holding the whole program.", 0.0, False,
                        {**info, "reason": why})
        bad = spec_violations(self.spec, program, self.p.allowed_attributes, self.p.allow_modules)
        if bad:
            return Step("The program does not keep the specification:\n" + "\n".join(f"- {b}" for b in bad),
                        0.0, False, {**info, "violations": bad, "reason": bad[0]})
        return self._verify(program, info)

    def _verify(self, program: str, info: dict) -> Step:
        from rlvr.sandbox import Limits, MiB, Program, default_sandbox

        limits = Limits(wall_s=self.p.wall_s, cpu_s=int(self.p.wall_s) + 1, memory_bytes=self.p.memory_mb * MiB,
                        address_space_bytes=max(4096, 2 * self.p.memory_mb) * MiB, max_procs=128,
                        scratch_bytes=64 * MiB)
        files = {"program.dfy": program, **dict(_mono_files())}
        t0 = time.perf_counter()
        res = (self.sandbox or default_sandbox()).run(
            Program(_DRIVER, files=files, argv=(self.mono, self.exe, str(self.p.time_limit_s))), limits)
        info["dafny_s"] = round(time.perf_counter() - t0, 3)
        if res.killed_reason == "setup_failed":
            why = "sandbox failed to start: " + res.stderr.decode("utf-8", "replace")[-300:]
            return Step("", 0.0, True, {**info, "reason": why})
        out = (res.stdout + b"\n" + res.stderr).decode("utf-8", "replace")
        if res.killed_reason is not None:
            why = f"the verifier was stopped ({res.killed_reason}) after {res.wall_s:.0f} s"
            return Step(why + ": simplify the program or its proof.", 0.0, False, {**info, "reason": why})
        summary = re.search(r"finished with (\d+) verified, (\d+) errors?(?:, (\d+) time outs?)?", out)
        axiom = re.search(r"Error: (a \w+ (?:statement )?with an ensures clause must have a body.*)", out)
        if axiom:
            info["violations"] = [f"bodyless declaration (it would act as an axiom): {axiom.group(1)}"]
        ok = (res.exit_code == 0 and summary is not None and int(summary.group(1)) > 0
              and summary.group(2) == "0" and not summary.group(3))
        if ok:
            return Step("Verified.", 1.0, True, {**info, "verified": True, "reason": "verified"})
        diag = trim_diagnostics(out, program, self.p.max_observation_chars)
        why = info["violations"][0] if info["violations"] else (diag.splitlines() or ["dafny failed"])[0]
        return Step("Dafny did not verify the program:\n" + (diag or f"exit status {res.exit_code}"), 0.0, False,
                    {**info, "reason": why})


@ENVIRONMENTS.register("dafny", DafnyParams)
def _dafny(p: DafnyParams) -> DafnyEnv:
    """Dafny programs for a fixed specification: spec-hacking filters, then the verifier; 1 when it verifies."""
    return DafnyEnv(p)
