"""The README's config reference matches the code (regenerate with `python -m rlvr.cli.docs README.md`)."""

from pathlib import Path

from rlvr.cli.docs import config_reference, readme_section

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_config_reference_is_current():
    assert readme_section(README.read_text()) == config_reference(), "run: python -m rlvr.cli.docs README.md"


def test_readme_opens_with_two_commands():
    first = README.read_text().split("```")[1].strip().splitlines()
    assert first[0] == "bash" and len([ln for ln in first[1:] if ln.strip()]) == 2


def test_methods_table_has_a_row_per_component_and_recipe():
    """docs/methods.md names every registered component and every recipe in a table row."""
    import rlvr.config  # noqa: F401  (registers everything)
    from rlvr.algorithms.kl_schedules import KL_SCHEDULES
    from rlvr.algorithms.registry import (ADVANTAGE_TRANSFORMS, ADVANTAGES, AGGREGATIONS, CLIP_RULES, CORRECTIONS,
                                         GROUP_FILTERS, KL_ESTIMATORS, MASK_TRANSFORMS, OBJECTIVES, REWARD_SHAPERS,
                                         REWARD_TRANSFORMS)
    from rlvr.optim import OPTIMIZERS
    from rlvr.recipes import recipe_names
    from rlvr.sampling import ALLOCATORS, SAMPLERS

    text = (README.parent / "docs" / "methods.md").read_text()
    rows = [line.split("|")[1] for line in text.splitlines() if line.startswith("| ")]  # first cells
    missing = []
    for reg in (ADVANTAGES, ADVANTAGE_TRANSFORMS, REWARD_TRANSFORMS, OBJECTIVES, CLIP_RULES, CORRECTIONS,
                AGGREGATIONS, KL_ESTIMATORS, KL_SCHEDULES, OPTIMIZERS, SAMPLERS, ALLOCATORS, REWARD_SHAPERS,
                MASK_TRANSFORMS, GROUP_FILTERS):
        missing += [f"{reg.kind} {n}" for n in reg.names() if not any(f"`{n}`" in r for r in rows)]
    missing += [f"recipe {n}" for n in recipe_names() if not any(f"`{n}`" in r for r in rows)]
    assert not missing, f"docs/methods.md lacks rows for: {missing}"
