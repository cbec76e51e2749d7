"""``gdsdiag check``: parse options, render the report of gdsdiag.check.report, return it (cli.main exits with its code)."""

from __future__ import annotations

import click

from ._common import emit_json, json_option, node_options, paths_option


@click.command()
@node_options("Check")
@paths_option(
    "Also analyse this directory: filesystem, devices, a real O_DIRECT probe, the route cuFile would take (repeatable)."
)
@click.option("--gdscheck", "gdscheck_file", metavar="FILE", help="Compare with a saved 'gdscheck -p' output.")
@click.option("--libcufile", "libcufile_path", metavar="PATH", help="Use this libcufile instead of searching.")
@click.option("-v", "--verbose", is_flag=True, help="Show the evidence and the reason of every check.")
@json_option("gdsdiag.check/1")
def check(root, snapshot, paths, gdscheck_file, libcufile_path, verbose, as_json):
    """Which GDS routes this node can take (nvidia-fs P2P, PCI P2PDMA, compat only) and why, with evidence.

    1 means warnings, 2 failures."""
    from ..check.report import check as run_check

    report = run_check(root, snapshot, paths, gdscheck_file, libcufile_path)
    if as_json:
        from ..documents.check import document

        emit_json(document(report))
    else:
        from rich.console import Console

        from ..render.check_text import render

        render(Console(), report, verbose)
    return report
