"""Terminal rendering of a check report (rich). Consumes CheckReport only."""

from __future__ import annotations

from rich.console import Console
from rich.text import Text

from ..bounded import clip
from ..routes import Route
from ..verdicts import Status, style

MOUNT_LINES = 30


def _line(console: Console, text: Text | str) -> None:
    """One line, never broken by the renderer: a terminal wraps it for the eye, a pipe keeps it whole
    (a fix such as ``options nvidia NVreg_RegistryDwords="…"`` is copied from here)."""
    console.print(text, soft_wrap=True, markup=False, highlight=False)


def render(console: Console, report, verbose: bool = False) -> None:
    _line(console, Text(f"gdsdiag check — {report.source}", style="bold"))
    width = max((len(r.id) for r in report.results), default=0) + 2
    for r in report.results:
        _line(
            console, Text(f"  {r.status.value:<9}", style=style(r.status)) + Text(f"{r.id:<{width}}{clip(r.summary)}")
        )
        if r.fix and r.fix != "—" and (r.status != Status.PASS or verbose or r.path is not None):
            _line(console, Text(f"  {'':<9}{'fix:':<{width}}{clip(r.fix, 2000)}"))  # whole enough to copy
    if verbose:
        for r in report.results:
            # whole lines like the rest (issue 46: piped, rich broke an evidence value mid-path)
            _line(console, Text(f"{r.id}: ", style="bold dim") + Text(clip(r.why or ""), style="dim"))
            for e in r.evidence:
                _line(console, Text(f"    {clip(e.source)}: {clip(e.value)}", style="dim"))
    v = report.verdict
    best = next((x for x in v.routes if x.is_p2p), v.routes[0] if v.routes else Route.NONE)
    _line(console, Text("GDS routes on this node: ", style="bold") + Text(v.summary, style=f"bold {style(best)}"))
    for reason in v.reasons:
        _line(console, f"  - {clip(reason)}")
    if report.mounts:
        _line(console, Text("Per mount, a cuFile read would take:", style="bold"))
        # a Kubernetes node mounts a tmpfs per pod volume and an overlay per container: the first
        # MOUNT_LINES here, every one in --json and with -v
        shown = report.mounts if verbose else report.mounts[:MOUNT_LINES]
        width = max(len(clip(m.mount_point)) for m in shown) + 2
        for m in shown:
            _line(
                console,
                Text(f"  {clip(m.mount_point):<{width}}")
                + Text(f"{m.route.value:<8}", style=f"bold {style(m.route)}")
                + Text(f"{m.fstype} {clip(m.source)} — {clip(m.deciding)}"),
            )
            if verbose:
                for reason in m.reasons:
                    _line(console, Text(f"  {'':<{width}}{'':<8}- {clip(reason)}", style="dim"))
            if m.fix and (verbose or (m.decided_by == "node" and v.routes)):  # (no route at all: said once above)
                _line(console, Text(f"  {'':<{width}}{'':<8}fix: {clip(m.fix, 2000)}"))
    if len(report.mounts) > MOUNT_LINES and not verbose:
        _line(
            console, Text(f"  … {len(report.mounts) - MOUNT_LINES} more mount(s): -v or --json lists every one", "dim")
        )
    _line(console, Text("cuObject endpoints: ", style="bold") + Text(clip(report.endpoints_source)))
    for e in report.endpoints:
        via = (
            f" ({e.interface}{', ' + ', '.join(e.rdma_devices) if e.rdma_devices else ''})"
            if e.interface
            else (f" ({', '.join(e.rdma_devices)})" if e.rdma_devices else "")
        )
        what = {"GPU": "RDMA into GPU memory", "host": "RDMA into host memory only"}.get(e.memory, e.memory)
        _line(
            console,
            Text(f"  {clip(e.endpoint)}{via}: GET/PUT ")
            + Text(f"{e.route.value}", style=f"bold {style(e.route)}")
            + Text(f" ({what}) — {clip(e.deciding)}"),
        )
        if e.fix:
            _line(console, Text(f"    fix: {clip(e.fix, 2000)}"))
    untraced = getattr(report, "untraced", [])
    if untraced:
        _line(
            console,
            Text("Paths host tracing cannot see (gdsdiag trace names them; validate --proof measures):", style="bold"),
        )
        for u in untraced:
            _line(
                console,
                Text(f"  {clip(u.target)}: ")
                + Text(u.route.value, style=f"bold {style(u.route)}")
                + Text(f" — {clip(u.deciding)}"),
            )
    for p in report.paths:
        pstyle = style(p.route)
        where = ", ".join(p.devices) or p.mount_point
        on = f"  ({p.fstype} on {where})" if p.fstype and where else f"  ({p.fstype})" if p.fstype else ""
        _line(
            console,
            Text(f"{p.path}: ", style="bold")
            + Text(f"cuFile I/O would take {p.route.value}", style=f"bold {pstyle}")
            + Text(on),
        )
        for reason in p.reasons:
            _line(console, f"  - {clip(reason)}")
    if report.problems:
        _line(
            console,
            Text(f"{len(report.problems)} file(s) could not be read" + ("" if verbose else " (-v lists them)"), "dim"),
        )
        if verbose:
            for p in report.problems:
                _line(console, Text(f"    {p}", style="dim"))
    if report.gdscheck is not None:
        bad = [d for d in report.gdscheck if not d["agree"]]
        _line(console, Text(f"gdscheck vs gdsdiag: {len(bad)} of {len(report.gdscheck)} items differ", style="bold"))
        width = max((len(clip(d["item"])) for d in report.gdscheck), default=0) + 2
        for d in report.gdscheck:
            word, colour = ("DIFFER", "red") if not d["agree"] else ("agree", "green")
            note = f" — {clip(d['note'])}" if d["note"] else ""
            _line(
                console,
                Text(f"  {word:<8}", style=colour)
                + Text(
                    f"{clip(d['item']):<{width}}gdscheck: {clip(d['gdscheck'])}; gdsdiag: {clip(d['gdsdiag'])}{note}"
                ),
            )
