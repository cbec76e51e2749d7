"""Terminal rendering of a check report (rich). Consumes CheckReport only."""

from __future__ import annotations

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..bounded import clip
from ..check.model import Status

_STYLE = {Status.PASS: "green", Status.WARN: "yellow", Status.FAIL: "red", Status.SKIP: "dim", Status.INFO: "cyan"}


def render(console: Console, report, verbose: bool = False) -> None:
    from rich.markup import escape

    # every cell is a Text, never markup: summaries and fixes quote cufile.json keys, mount paths
    # and hostnames (issue 24: a '[/]' or '[link=…]' from a node's data was obeyed)
    t = Table(title=f"gdsdiag check — {escape(str(report.source))}", box=box.SIMPLE_HEAD, show_lines=False)
    t.add_column("status", no_wrap=True)
    t.add_column("check", no_wrap=True)
    t.add_column("result", overflow="fold")
    t.add_column("fix", overflow="fold")
    for r in report.results:
        if r.status == Status.PASS and not verbose and r.path is None:
            t.add_row(Text(r.status.value, style=_STYLE[r.status]), Text(r.id), Text(clip(r.summary)), "")
            continue
        t.add_row(
            Text(r.status.value, style=_STYLE[r.status]), Text(r.id), Text(clip(r.summary)), Text(clip(r.fix, 2000))
        )  # a fix stays whole enough to copy
    console.print(t)
    if verbose:
        for r in report.results:
            console.print(Text(f"{r.id}: ", style="bold") + Text(clip(r.why or "")), style="dim")
            for e in r.evidence:
                console.print(f"    {clip(e.source)}: {clip(e.value)}", style="dim", markup=False)
    v = report.verdict
    style = "green" if any(x.value in ("NVFS", "P2PDMA") for x in v.routes) else "yellow" if v.routes else "red"
    console.print(Text("GDS routes on this node: ", style="bold") + Text(v.summary, style=f"bold {style}"))
    for reason in v.reasons:
        console.print(f"  - {clip(reason)}", markup=False)
    for p in report.paths:
        pstyle = {"NVFS": "green", "P2PDMA": "green", "COMPAT": "yellow", "NONE": "red"}[p.route.value]
        where = ", ".join(p.devices) or p.mount_point
        on = f"  ({p.fstype} on {where})" if p.fstype and where else f"  ({p.fstype})" if p.fstype else ""
        console.print(
            Text(f"{p.path}: ", style="bold")
            + Text(f"cuFile I/O would take {p.route.value}", style=f"bold {pstyle}")
            + Text(on)
        )
        for reason in p.reasons:
            console.print(f"  - {clip(reason)}", markup=False)
    if report.problems:
        console.print(
            f"{len(report.problems)} file(s) could not be read" + ("" if verbose else " (-v lists them)"),
            style="dim",
            markup=False,
        )
        if verbose:
            for p in report.problems:
                console.print(f"    {p}", style="dim", markup=False)
    if report.gdscheck is not None:
        bad = [d for d in report.gdscheck if not d["agree"]]
        ct = Table(title=f"gdscheck vs gdsdiag: {len(bad)} of {len(report.gdscheck)} items differ", box=box.SIMPLE_HEAD)
        for c in ("item", "gdscheck", "gdsdiag", "note"):
            ct.add_column(c, overflow="fold")
        for d in report.gdscheck:
            ct.add_row(
                Text(clip(d["item"]), style="red" if not d["agree"] else ""),
                Text(clip(d["gdscheck"])),
                Text(clip(d["gdsdiag"])),
                Text(clip(d["note"])),
            )
        console.print(ct)
