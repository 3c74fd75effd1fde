"""The README's config reference matches the code (regenerate with `python -m rlvr.cli.docs README.md`), the
methods table names every component, and nothing cites a design document that is not in the repository."""

import re
import subprocess
from pathlib import Path

from rlvr.cli.docs import config_reference, readme_section

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_config_reference_is_current():
    assert readme_section(README.read_text()) == config_reference(), "run: python -m rlvr.cli.docs README.md"


def test_readme_opens_with_two_commands():
    first = README.read_text().split("```")[1].strip().splitlines()
    assert first[0] == "bash" and len([ln for ln in first[1:] if ln.strip()]) == 2


# documented elsewhere: docs/environments.md, docs/engines.md, the README's task and verifier sections
ELSEWHERE = {"environment", "rollout engine", "task", "verifier"}


def test_methods_table_has_a_row_per_component_and_recipe():
    """docs/methods.md names every registered component (every registry but ELSEWHERE's, including one
    added later) and every recipe in a table row."""
    import rlvr.config.run  # noqa: F401  (creates every registry)
    from rlvr.config.recipes import recipe_names
    from rlvr.registry import REGISTRIES
    from rlvr.registry_index import HOMES

    text = (README.parent / "docs" / "methods.md").read_text()
    rows = [line.split("|")[1] for line in text.splitlines() if line.startswith("| ")]  # first cells
    missing = []
    kinds = set(HOMES)
    assert {"loss term", "policy objective", "advantage estimator", "prompt sampler"} <= kinds
    for kind in sorted(kinds - ELSEWHERE):
        reg = REGISTRIES[kind]
        missing += [f"{reg.kind} {n}" for n in reg.names()
                    if n != "plain" and not any(f"`{n}`" in r for r in rows)]  # plain: no strategy
    missing += [f"recipe {n}" for n in recipe_names() if not any(f"`{n}`" in r for r in rows)]
    assert not missing, f"docs/methods.md lacks rows for: {missing}"


# Design documents that live outside the repository must never be cited from it: a reader cannot follow
# "<doc> H7" or "<doc>.md §5.2". Cite the paper (arXiv id, section) and the repository's own docs instead
# (docs/methods.md, docs/verifiers.md, docs/data.md). The patterns are built from pieces so that this file
# does not match itself.
_METHODS, _VERIFIERS = "METH" + "ODS", "VERIF" + "IERS"
OUTSIDE_CITATIONS = [
    (re.compile(rf"\b{_METHODS}-(?:objectives|rollout)"), "a methods design document"),
    (re.compile(rf"\b{_METHODS}(?:\.md|\s+(?:PART\s+)?[A-I]\d{{0,2}}\b|\s+(?:file|doc|oracles?)\b)"),
     "a methods design document section"),
    (re.compile(rf"\b{_VERIFIERS}(?:\.md|\s+§?\d+(?:\.\d+)*)"), "the verifiers design document"),
    (re.compile(r"\bseed" + r" list\b|\babstract" + r" #\d+", re.IGNORECASE), "the outside list of abstracts"),
    (re.compile(r"\bmethods" + r" file\b", re.IGNORECASE), "a methods design document"),
]
CHECKED = ("rlvr/", "tests/", "benchmarks/", "docs/", "README.md")


def _checked_files() -> list[Path]:
    """Tracked files (and new, not ignored ones) under CHECKED; without git, every file under them."""
    root = README.parent
    try:
        out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z", "--", *CHECKED],
                             cwd=root, capture_output=True, check=True).stdout.decode()
        paths = sorted({root / p for p in out.split("\0") if p})
    except (OSError, subprocess.CalledProcessError):
        paths = sorted(p for c in CHECKED for p in ([root / c] if c.endswith(".md") else (root / c).rglob("*"))
                       if "__pycache__" not in p.parts)
    return [p for p in paths if p.is_file()]


def test_no_citations_of_design_documents_outside_the_repository():
    """Every file under CHECKED is free of OUTSIDE_CITATIONS; a failure names file:line and the citation."""
    found = []
    for path in _checked_files():
        data = path.read_bytes()
        if b"\0" in data:
            continue  # binary
        text = data.decode("utf-8", errors="replace")
        for pattern, what in OUTSIDE_CITATIONS:
            for m in pattern.finditer(text):  # whole text: a citation may break across a line end
                line = text.count("\n", 0, m.start()) + 1
                found.append(f"{path.relative_to(README.parent)}:{line}: {' '.join(m.group(0).split())!r} cites {what}")
    assert not found, "cite the paper and docs/methods.md or docs/verifiers.md instead:\n" + "\n".join(sorted(found))
