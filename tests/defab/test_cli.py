"""The `defab derive` sub-command, mounted as rlvr/cli/commands.py mounts it."""

import typer
from typer.testing import CliRunner

from rlvr.cli.defab import app as defab_app

from .test_engine import TWEETY

root = typer.Typer()
root.add_typer(defab_app, name="defab")


@root.callback()
def _root() -> None:
    """Stand-in for the main rlvr app."""


def test_derive_prints_grouped_sorted_literals(tmp_path):
    f = tmp_path / "tweety.dl"
    f.write_text(TWEETY)
    res = CliRunner().invoke(root, ["defab", "derive", str(f)])
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert lines[0] == "+Δ (definitely provable): 4"
    assert lines[1:5] == ["  bird(opus)", "  bird(robin)", "  bird(tweety)", "  penguin(opus)"]
    assert lines[5] == "+∂ (defeasibly provable): 7"
    assert lines[6:] == sorted(lines[6:]) and "  ~flies(opus)" in lines[6:]


def test_derive_reports_errors_with_exit_code_2(tmp_path):
    f = tmp_path / "bad.dl"
    f.write_text("p.\nr1: a => \n")
    res = CliRunner().invoke(root, ["defab", "derive", str(f)])
    assert res.exit_code == 2 and "line 2" in res.output
    res = CliRunner().invoke(root, ["defab", "derive", str(tmp_path / "missing.dl")])
    assert res.exit_code == 2 and "cannot read" in res.output
    res = CliRunner().invoke(root, ["defab", "derive", str(f), "--variant", "nope"])
    assert res.exit_code == 2 and "unknown variant" in res.output


def test_derive_variant_and_grounding_options(tmp_path):
    f = tmp_path / "loop.dl"
    f.write_text("bird(a).\nr1: bird(X) => flies(X).\nr2: p(X) => p(X).\nd1: p(X) ~> ~flies(X).\n")
    full = CliRunner().invoke(root, ["defab", "derive", str(f)])
    rel = CliRunner().invoke(root, ["defab", "derive", str(f), "--grounding", "relevant", "--variant", "defab"])
    assert "flies(a)" not in full.output and "  flies(a)" in rel.output
