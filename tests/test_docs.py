"""The README's config reference matches the code (regenerate with `python -m rlvr.docs README.md`)."""

from pathlib import Path

from rlvr.docs import config_reference, readme_section

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_config_reference_is_current():
    assert readme_section(README.read_text()) == config_reference(), "run: python -m rlvr.docs README.md"


def test_readme_opens_with_two_commands():
    first = README.read_text().split("```")[1].strip().splitlines()
    assert first[0] == "bash" and len([ln for ln in first[1:] if ln.strip()]) == 2
