"""``gdsdiag topology``: parse options, render the report of gdsdiag.topology.report, return it (cli.main exits with its code)."""

from __future__ import annotations

import click

from .. import docout
from ._common import json_option, json_text, node_options, paused_gc


@click.command()
@node_options("Analyse")
@click.option(
    "--lspci",
    "lspci_files",
    multiple=True,
    metavar="FILE",
    help="Import 'lspci -vvv'/'-vvxxxx' and/or 'lspci -tv' text (repeatable).",
)
@click.option(
    "--numa",
    "numa_map",
    metavar="HB=N,...",
    help="NUMA node per host bridge for lspci imports, e.g. 0000:00=0,0000:80=1 or 0000:00-7f=0.",
)
@click.option("--cross-check", is_flag=True, help="Compare our labels with 'nvidia-smi topo -m'.")
@click.option(
    "--nvidia-smi", "smi_file", metavar="FILE", help="A saved 'nvidia-smi topo -m' output (implies --cross-check)."
)
@click.option("--tree", "only_tree", is_flag=True, help="Show the tree (with --matrix/--findings: those parts only).")
@click.option(
    "--matrix", "only_matrix", is_flag=True, help="Show the pair matrix (with --tree/--findings: those parts only)."
)
@click.option(
    "--findings",
    "only_findings",
    is_flag=True,
    help="Show the findings (shown by default only when no part is selected).",
)
@json_option("gdsdiag.topology/1")
def topology(
    root, snapshot, lspci_files, numa_map, cross_check, smi_file, only_tree, only_matrix, only_findings, as_json
):
    """The PCIe graph between GPUs, NVMe and NICs, and whether P2P DMA can work on each pair."""
    from ..topology.report import topology as run_topology

    with paused_gc():
        report = run_topology(root, snapshot, lspci_files, numa_map, cross_check, smi_file)
        if as_json:
            from ..documents.topology import document, document_text

            if docout.stream().isatty():  # a person: indented (commands/_common.json_text)
                parts = (report.topo, report.pairs, report.findings, report.cross_check, report.routing)
                text = json_text(document(*parts, cross_check_input=report.cross_check_input), pretty=True)
            else:  # a program: the same compact text emit_json writes, made faster (documents/topology)
                text = document_text(report)
    if as_json:
        docout.stream().write(text + "\n")
    else:
        from rich.console import Console

        from ..render.topology_text import render

        console = Console()
        if not console.is_terminal:
            console = Console(width=400)  # a pipe or a log: tables keep their columns, nothing wraps
        picked = only_tree or only_matrix or only_findings
        render(
            console,
            report.topo,
            report.pairs,
            report.findings,
            show_tree=only_tree or not picked,
            show_matrix=only_matrix or not picked,
            show_findings=only_findings or not picked,
            routing=report.routing,
        )
        if report.cross_check is not None:
            from ..render.topology_text import render_cross_check

            render_cross_check(console, report.cross_check, report.cross_check_input)
    return report
