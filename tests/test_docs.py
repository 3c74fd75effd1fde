"""The README's config reference matches the code (regenerate with `python -m rlvr.cli.docs README.md`)."""

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
