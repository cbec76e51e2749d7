"""Terminal rendering of a topology: tree, pair matrix (laid out like ``nvidia-smi topo -m``),
cuFile dynamic-routing notes, findings.

Output is meant to be pasted into a support case: the matrix uses nvidia-smi's column names (GPU0…,
NIC0…, plus NVMe0…) with a legend that maps each to its device, the legend is a list, and findings are
printed as lines with ``soft_wrap`` so a fix is never broken inside by the renderer (a terminal wraps
it visually; a pipe gets it whole)."""

from __future__ import annotations

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from ..bounded import clip
from ..topology.cross_check import summary
from ..topology.findings import Finding
from ..topology.model import Device, Role, Topology
from ..topology.pairs import P2pVerdict, PairAnalysis
from ..verdicts import Severity, style

_SHOWN = (Role.GPU, Role.NVME, Role.NIC, Role.NVSWITCH)
# A mark as well as a colour, so the verdict survives a pipe, a log file or a colour-blind reader.
_VERDICT_MARK = {
    P2pVerdict.NVLINK: "",
    P2pVerdict.P2P: "",
    P2pVerdict.VIA_HOST: "~",
    P2pVerdict.NO: "!",
    P2pVerdict.UNKNOWN: "?",
}
LEGEND = [
    "X    = Self",
    "SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes",
    "NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node",
    "PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)",
    "PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)",
    "PIX  = Connection traversing at most a single PCIe bridge",
    "NV#  = Connection traversing a bonded set of # NVLinks (GPU peer traffic goes over NVLink)",
    "?    = not known from this input: NODE or SYS (NUMA placement unknown: lspci imports take --numa), "
    "any level (where a device attaches is not in the input), or two GPUs with no NVLink source",
    "mark after a PCIe level: none = P2P below a common bridge, ~ = P2P through the root complex, "
    "! = no P2P, ? = unknown (see --json 'reasons' or docs/topology.md)",
]
MATRIX_LEGEND = "Legend:\n" + "\n".join("  " + x for x in LEGEND)  # kept for callers of the old name


def _interesting(d: Device) -> bool:
    """Show bridges only when something we care about sits below them."""
    if d.role in _SHOWN or (d.role == Role.OTHER and d.names):  # (named: a disk, e.g. virtio's vda)
        return True
    return any(_interesting(c) for c in d.children)


def _node_text(topo: Topology, d: Device) -> Text:
    t = Text()
    if d.label:
        t.append(f"{clip(d.label, 80)} ", style="bold")
    t.append(d.bdf, style="cyan")
    role = {
        Role.ROOT_PORT: "root port",
        Role.SWITCH_UPSTREAM: "switch upstream",
        Role.SWITCH_DOWNSTREAM: "switch downstream",
    }.get(d.role, d.role.value)
    if d.role == Role.OTHER and d.names:
        role = "disk (no GDS path: not NVMe)"  # (virtio-blk, SATA/SAS: named so the disk of / is seen)
    t.append(f" {role}")
    if d.model:
        t.append(f" {clip(d.model, 80)}", style="dim")
    link = d.fn.link
    if link.speed_gts and link.width:  # (link.known)
        below = (link.max_speed_gts and link.speed_gts < link.max_speed_gts) or (
            link.max_width and link.width < link.max_width
        )
        t.append(f"  {link.describe()}", style="red" if below else "green")
    if d.is_bridge:
        acs = d.fn.acs_control
        if acs is not None:
            t.append(f"  ACS {acs.flags()}", style="red" if acs.redirects else "dim")
        elif not d.fn.acs_known:
            t.append("  ACS unknown", style="dim")
    if d.fn.iommu_group is not None:
        gtype = topo.iommu.group_type_of(d.fn.iommu_group)
        t.append(f"  iommu {d.fn.iommu_group}" + (f" ({gtype})" if gtype else ""), style="dim")
    if d.fn.gpu_numa_node is not None:
        t.append(f"  memory = NUMA node {d.fn.gpu_numa_node}", style="magenta")
    if d.role == Role.GPU and topo.nvlink is not None and d.bdf in topo.nvlink.gpus:
        g = topo.nvlink.gpus[d.bdf]
        t.append(
            f"  NVLink {g.links_active} active"
            + (f" ({g.to_nvswitch} to NVSwitch)" if g.to_nvswitch else "")
            + (f", {g.links_inactive} down" if g.links_inactive else ""),
            style="green" if not g.links_inactive else "yellow",
        )
    others = [n for n in d.names if n != d.label]
    if others:
        t.append(f"  [{clip(', '.join(others[:4]), 120)}]", style="magenta")
    return t


def tree(topo: Topology) -> Tree:
    root = Tree(Text(f"PCIe topology of {clip(topo.source)}  (IOMMU: {topo.iommu.mode})", style="bold"))
    for hb in sorted(topo.host_bridges.values(), key=lambda h: h.id):
        tops = [d for d in topo.roots(hb.id) if _interesting(d)]
        if not tops:
            continue
        numa = f"NUMA {hb.numa_node}" if hb.numa_node is not None else "NUMA ?"
        if all(d.fn.placement_unknown for d in tops):
            # an lspci excerpt's bus whose upstream is missing: not known to be a host bridge
            node = root.add(Text(f"bus {hb.id} (upstream not in the input)  {numa}", style="bold blue"))
        else:
            node = root.add(Text(f"host bridge {hb.id}  {numa}", style="bold blue"))
        for d in tops:
            _add(topo, node, d)
    return root


def _add(topo: Topology, parent: Tree, d: Device) -> None:
    branch = parent.add(_node_text(topo, d))
    for c in sorted(d.children, key=lambda x: x.bdf):
        if _interesting(c):
            _add(topo, branch, c)


def columns(topo: Topology) -> list[tuple[str, Device]]:
    """(column name, device): GPUs by label, then NIC0… and NVMe0… in device order, as
    nvidia-smi names its NIC columns."""
    gpus = sorted(topo.by_role(Role.GPU), key=Device.sort_key)
    nics = sorted(topo.by_role(Role.NIC), key=lambda d: d.bdf)
    nvmes = sorted(topo.by_role(Role.NVME), key=lambda d: d.bdf)
    return (
        [(g.label or g.bdf, g) for g in gpus]
        + [(f"NIC{i}", d) for i, d in enumerate(nics)]
        + [(f"NVMe{i}", d) for i, d in enumerate(nvmes)]
    )


def _ranges(cpus: set[int]) -> str:
    out: list[str] = []
    run: list[int] = []
    for c in sorted(cpus):
        if run and c == run[-1] + 1:
            run.append(c)
            continue
        if run:
            out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
        run = [c]
    if run:
        out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
    return ",".join(out)


def affinity(topo: Topology, d: Device) -> tuple[str, str, str | None]:
    """(CPU affinity, NUMA affinity, GPU NUMA ID) as nvidia-smi prints them."""
    numa = topo.numa_of(d)
    cpus = topo.cpu.node_cpus.get(numa) if numa is not None else None
    gpu_node = d.fn.gpu_numa_node
    return (
        _ranges(cpus) if cpus else "?" if numa is None else "-",
        str(numa) if numa is not None else "?",
        str(gpu_node) if gpu_node is not None else None,
    )


def matrix(topo: Topology, pairs: list[PairAnalysis], width: int = 200) -> list[Table]:
    """GPU rows × (GPU, NIC, NVMe) columns plus CPU/NUMA affinity, split into several tables of
    columns when it would not fit ``width`` (a 16-NVMe node is wider than any terminal) rather than
    squeezing every cell into an ellipsis."""
    cols = columns(topo)
    gpus = [d for _, d in cols if d.role == Role.GPU]
    idx = {(p.a.bdf, p.b.bdf): p for p in pairs}
    aff = {g.bdf: affinity(topo, g) for g in gpus}
    gpu_numa = any(a[2] is not None for a in aff.values())
    head_w = max([len(n) for n, d in cols if d.role == Role.GPU] + [4])
    aff_w = max([len(a[0]) for a in aff.values()] + [12]) + 2 + 15 + (13 if gpu_numa else 0)
    widths = [max(len(n), 5) + 2 for n, _ in cols]
    chunks: list[list[int]] = [[]]
    used = head_w + 2 + aff_w
    for i, w in enumerate(widths):
        if chunks[-1] and used + w > width:
            chunks.append([])
            used = head_w + 2 + aff_w
        chunks[-1].append(i)
        used += w
    tables = []
    for n, chunk in enumerate(chunks):
        title = "pair matrix" + (f" ({n + 1}/{len(chunks)})" if len(chunks) > 1 else "")
        t = Table(title=title, box=box.SIMPLE_HEAD, padding=(0, 1, 0, 0), pad_edge=False)
        t.add_column("", no_wrap=True, min_width=head_w)
        for i in chunk:
            t.add_column(Text(cols[i][0]), no_wrap=True, min_width=widths[i] - 2)  # (a NIC's name is the node's)
        t.add_column("CPU Affinity", no_wrap=True)
        t.add_column("NUMA Affinity", no_wrap=True)
        if gpu_numa:
            t.add_column("GPU NUMA ID", no_wrap=True)
        for g in gpus:
            row = [Text(g.label or g.bdf, style="bold")]
            for i in chunk:
                c = cols[i][1]
                p = idx.get((g.bdf, c.bdf))
                if c is g:
                    row.append(Text(" X"))
                elif p is None:
                    row.append(Text("-"))
                else:
                    mark = "" if p.nvlink else _VERDICT_MARK[p.verdict]
                    cell = "?" if p.nvlink_unknown else p.label + mark
                    row.append(Text(cell, style=style(p.verdict)))
            cpu, numa, gnode = aff[g.bdf]
            row += [Text(cpu), Text(numa)] + ([Text(gnode or "N/A")] if gpu_numa else [])
            t.add_row(*row)
        tables.append(t)
    return tables


def device_legend(topo: Topology) -> list[str]:
    out = []
    for name, d in columns(topo):
        if d.role == Role.GPU:
            continue
        label = d.label if d.label and d.label != name else None
        out.append(f"{name}: {label + ' ' if label else ''}({d.bdf})" + (f" {d.model}" if d.model else ""))
    return out


def _print_list(console: Console, title: str, lines: list[str]) -> None:
    console.print(Text(title, style="bold"))
    for ln in lines:
        console.print("  " + ln, markup=False, highlight=False, soft_wrap=True)


def findings_list(console: Console, findings: list[Finding]) -> None:
    console.print(Text(f"findings ({len(findings)})", style="bold"))
    for f in findings:
        word = f.severity.value.upper()
        console.print(
            Text(f"  {word} ", style=f"bold {style(f.severity)}") + Text(f"{f.id}: {clip(f.title)}"), soft_wrap=True
        )
        console.print(
            f"       evidence: {clip(f.evidence)}", markup=False, highlight=False, soft_wrap=True, style="dim"
        )
        console.print(f"       fix: {f.fix}", markup=False, highlight=False, soft_wrap=True)


def render(
    console: Console,
    topo: Topology,
    pairs,
    findings,
    show_tree=True,
    show_matrix=True,
    show_findings=True,
    routing: list[dict] | None = None,
) -> None:
    if show_tree:
        console.print(tree(topo))
    if show_matrix:
        if topo.by_role(Role.GPU):
            for t in matrix(topo, pairs, console.width):
                console.print(t)
            legend = device_legend(topo)
            if legend:
                _print_list(console, "Devices:", legend)
            _print_list(console, "Legend:", LEGEND)
            if topo.nvlink is None or not topo.nvlink.pairs:
                why = topo.nvlink_note or (f"{topo.nvlink.source}: no NVLink between GPUs" if topo.nvlink else "")
                if len(topo.by_role(Role.GPU)) > 1 and why:
                    _print_list(console, "NVLink:", [why])
            if routing:
                from ..topology.routing import describe

                _print_list(
                    console,
                    "cuFile dynamic routing (cufile.json rdma_dynamic_routing):",
                    [describe(e) for e in routing],
                )
        else:
            console.print("no NVIDIA GPU found: no pair matrix", style="yellow")
    if show_findings:
        if findings:
            findings_list(console, findings)
        else:
            console.print("no findings", style="green")
    else:
        hidden_note(console, findings)


def hidden_note(console: Console, findings) -> None:
    """A view without the findings (--tree, --matrix) still says which warnings and failures set the
    exit code, so an exit 1 or 2 is never unexplained."""
    counts = [
        (sum(1 for f in findings if f.severity == sev), word)
        for sev, word in ((Severity.FAIL, "failure"), (Severity.WARN, "warning"))
    ]
    said = [f"{n} {word}{'s' if n > 1 else ''}" for n, word in counts if n]
    if said:
        ids = ", ".join(f.id for f in findings if f.severity in (Severity.FAIL, Severity.WARN))
        console.print(
            f"findings not shown: {' and '.join(said)} ({clip(ids)}; --findings lists them)",
            style="yellow",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )


MAX_CELL_LINES = 200  # cells the text output names one by one (a pasted matrix can hold 50,000)


def render_cross_check(console, results: list[dict], meta: dict | None = None) -> None:
    """A summary line, then one line per cell that is not an agreement (differs / not compared),
    then every line or cell of the text that was not read. A text that is not this node's gets
    one line saying why instead of a line per cell."""
    meta = meta or {}
    if not results:
        console.print("cross-check: nvidia-smi lists no GPU pair or NIC to compare", style="yellow")
    else:
        compared = sum(1 for r in results if r["agree"] is not None) + sum(
            1 for r in meta.get("numa") or [] if r["agree"] is not None
        )
        shown = [r for r in results if r["agree"] is not True]
        colour = "red" if any(r["agree"] is False for r in results) else "yellow" if shown else "green"
        console.print(Text(summary(results), style=f"bold {colour}"))
        if not compared:
            console.print(
                Text("cross-check: nothing was compared, no cell and no NUMA node (exit 3)", style="bold red")
            )
        if meta.get("other_node"):
            console.print(
                "  the nvidia-smi text is not this node's (or not this view of it): "
                + "; ".join(meta["other_node"])
                + " — run 'nvidia-smi topo -m' on this node, outside any job or container that hides GPUs",
                markup=False,
                highlight=False,
                soft_wrap=True,
            )
            shown = [r for r in shown if not str(r.get("note", "")).startswith("not compared: the text is not")]
        for r in shown[:MAX_CELL_LINES]:
            word = "differs" if r["agree"] is False else "not compared"
            line = (
                f"  {r['row']}/{r['column']}: nvidia-smi {r['nvidia_smi']}, gdsdiag {r.get('gdsdiag') or '-'} — {word}"
            )
            note = r.get("note", "")
            if note and not note.startswith("not compared"):
                line += f" ({note})"
            elif note:
                line += note[len("not compared") :]
            console.print(line, markup=False, highlight=False, soft_wrap=True)
        if len(shown) > MAX_CELL_LINES:
            console.print(f"  ... {len(shown) - MAX_CELL_LINES} more cells (--json lists every one)", markup=False)
    numa = meta.get("numa") or []
    differ = [r for r in numa if r["agree"] is False]
    if numa:
        same = sum(1 for r in numa if r["agree"] is True)
        console.print(
            f"NUMA affinity of {len(numa)} GPU rows: {same} agree, {len(differ)} disagree"
            + (f", {len(numa) - same - len(differ)} not compared" if len(numa) - same - len(differ) else ""),
            markup=False,
            highlight=False,
            style="red" if differ else None,
        )
        for r in differ:
            console.print(
                f"  {r['row']}: nvidia-smi NUMA {r['nvidia_smi']}, gdsdiag {r['gdsdiag']} — differs", markup=False
            )
    if meta.get("split_glued"):
        console.print(
            f"  nvidia-smi glued {len(meta['split_glued'])} pairs of fields with no space between them; read apart: "
            + ", ".join(meta["split_glued"][:6])
            + (" ..." if len(meta["split_glued"]) > 6 else ""),
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
    for u in meta.get("unread", []):
        console.print(f"  not read: {u}", markup=False, highlight=False, soft_wrap=True, style="yellow")
