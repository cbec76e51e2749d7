"""gdsdiag report: one fleet table (and a PNG of GB/s per node) from many 'gdsdiag validate --json' reports."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from ..errors import EXIT_FAIL, EXIT_OK, EXIT_WARN, GdsdiagError, Outcome, refuse_existing
from ..extras import install_command
from ._common import emit_json, json_option

if TYPE_CHECKING:
    from ..schema.validate import ReportDoc


def write_png(rs, path: str) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise GdsdiagError("--png needs matplotlib", install_command("plot")) from None
    from ..validate.fleet import gbps_keys

    keys = gbps_keys(rs)
    if not keys:
        raise GdsdiagError("no report carries sweep figures", "run 'gdsdiag validate --quick' (or --full) on the nodes")
    fig, ax = plt.subplots(figsize=(max(6, 1.2 * len(rs) * max(1, len(keys)) / 2), 4.5))
    width = 0.8 / len(keys)
    for i, k in enumerate(keys):
        xs = [j + i * width for j in range(len(rs))]
        ax.bar(xs, [r["gbps"].get(k, 0.0) for r in rs], width, label=k)
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(rs))])
    ax.set_xticklabels([f"{r['node']}\n{r['verdict']}" for r in rs], fontsize=8)
    ax.set_ylabel("GB/s (best cuFile point)")
    ax.set_title("gdsdiag validate: GB/s per node")
    ax.legend(fontsize=8)
    fig.tight_layout()
    from ..outfile import write_new

    try:
        write_new(path, "--png", lambda f: fig.savefig(f, format="png", dpi=110))  # never overwrites
    finally:
        plt.close(fig)


@click.command("report")
@click.argument("reports", nargs=-1, required=True, metavar="REPORT.json...")
@click.option(
    "--png", "png_path", metavar="FILE.png", help="Also write a bar chart of GB/s per node (needs matplotlib)."
)
@json_option("gdsdiag.report/1")
def report(reports, png_path, as_json):
    """Merge 'gdsdiag validate --json' reports of many nodes: which nodes fail which rules, and their
    sweep figures side by side. The exit code is the worst node verdict's (0 pass, 1 warn, 2 fail)."""
    from ..validate.fleet import load_reports, rows, rule_matrix, worst

    if png_path:
        refuse_existing(png_path, "--png")
    docs = load_reports(list(reports))
    rs = rows(docs)
    matrix = rule_matrix(docs)
    if png_path:
        write_png(rs, png_path)
    w = worst(rs)
    if as_json:
        doc: ReportDoc = {
            "schema": "gdsdiag.report/1",
            "nodes": rs,
            "rules": matrix,
            "verdict": w,
        }
        emit_json(doc)
    else:
        from rich.console import Console
        from rich.table import Table

        console = Console()
        if not console.is_terminal:
            console = Console(width=160)
        from rich.markup import escape

        from ..bounded import clip, printable
        from ..validate.fleet import gbps_keys
        from ..verdicts import style

        def txt(v) -> str:
            # every value comes from a report file another node wrote: never markup ('[link=…]',
            # '[/]' in a hostname restyled the table or ended the run with MarkupError)
            return escape(printable(clip(str(v), 200)))

        keys = gbps_keys(rs)
        t = Table(title=f"gdsdiag fleet report — {len(rs)} node(s), worst {txt(w)}")
        for c in ["node", "verdict", "failed rules", "warnings"] + [f"{k} GB/s" for k in keys] + ["snapshot"]:
            t.add_column(c, overflow="fold")
        for r in rs:
            verdict = txt(r["verdict"]) + (f" ({txt(r['inconsistent'])})" if r["inconsistent"] else "")
            t.add_row(
                txt(r["node"]),
                f"[{style(r['verdict'])}]{verdict}[/]" if r["verdict"] in ("FAIL", "WARN", "PASS") else verdict,
                txt(", ".join(map(str, r["failed"]))) or "-",
                txt(", ".join(map(str, r["warned"]))) or "-",
                *[f"{r['gbps'][k]:.2f}" if k in r["gbps"] else "-" for k in keys],
                txt(r["snapshot_id"]),
            )
        console.print(t)
        if matrix:
            m = Table(title="rules not passing everywhere")
            for c in ("rule", "FAIL", "WARN", "PASS"):
                m.add_column(c, overflow="fold")
            for rule, v in sorted(matrix.items()):
                m.add_row(
                    txt(rule),
                    txt(", ".join(map(str, v.get("FAIL", [])))) or "-",
                    txt(", ".join(map(str, v.get("WARN", [])))) or "-",
                    str(len(v.get("PASS", []))),
                )
            console.print(m)
        if png_path:
            console.print(f"wrote {txt(png_path)}")
    return Outcome(EXIT_FAIL if w == "FAIL" else EXIT_WARN if w == "WARN" else EXIT_OK)
