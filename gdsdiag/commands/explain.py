"""``gdsdiag explain FILE...``: the click command; reading and matching live in gdsdiag.explain."""

from __future__ import annotations

import click

from ._common import emit_json, json_option

KINDS = ("cufile-log", "gdsio", "gdscheck", "nvfs-stats", "gds-stats", "dmesg")


@click.command()
@click.argument("files", nargs=-1, required=True, metavar="FILE...")
@click.option("--kind", type=click.Choice(KINDS), help="Treat every FILE as this kind instead of detecting it.")
@click.option("-v", "--verbose", is_flag=True, help="Explain informational lines too and list every unknown line.")
@json_option("gdsdiag.explain/2")
def explain(files, kind, verbose, as_json):
    """What the lines of a cufile.log, gdsio or gdscheck -p output, /proc/driver/nvidia-fs/stats or
    a dmesg excerpt mean, their likely cause and fix, with the source of each explanation.
    Repeated messages are folded (count, pids, first/last time). FILE may be '-' for stdin.
    1 means warnings or error lines it does not know, 2 error lines."""
    from ..documents.explain import document
    from ..explain import explain_paths

    report = explain_paths(list(files), kind)
    if as_json:
        emit_json(document(report))
    else:
        from ..render.explain_text import lines

        for ln in lines(report, verbose):
            click.echo(ln)
    return report
