"""The subcommands that live in modules of their own, mounted on the ``rlvr`` app (:mod:`rlvr.cli.commands`)."""

from __future__ import annotations

import typer

__all__ = ["mount_subcommands"]


def mount_subcommands(app: typer.Typer) -> None:
    from rlvr.cli.audit import audit
    from rlvr.cli.compare import compare
    from rlvr.cli.data import app as data_app, merge
    from rlvr.cli.defab import app as defab_app
    from rlvr.cli.geosym import app as geosym_app
    from rlvr.cli.plan import plan
    from rlvr.cli.table import table

    app.add_typer(defab_app, name="defab", help="DeFAb: defeasible-logic engine and abduction instances")
    app.add_typer(geosym_app, name="geosym", help="GeoSym: geometry problems with diagrams and exact symbolic answers")
    app.add_typer(data_app, name="data", help="data pipeline: dedup, benchmark-overlap removal, label re-verification")
    app.command("compare")(compare)
    app.command("merge")(merge)
    app.command("plan")(plan)
    app.command("audit")(audit)
    app.command("table")(table)
