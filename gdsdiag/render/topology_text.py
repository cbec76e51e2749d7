"""Terminal rendering of a topology: tree, pair matrix, findings (rich)."""
from __future__ import annotations

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from ..bounded import clip
from ..topology.findings import Finding
from ..topology.model import Device, Role, Topology
from ..topology.pairs import PairAnalysis, P2pVerdict

_SHOWN = (Role.GPU, Role.NVME, Role.NIC, Role.NVSWITCH)
_VERDICT_STYLE = {P2pVerdict.P2P: "green", P2pVerdict.VIA_HOST: "yellow", P2pVerdict.NO: "red",
                  P2pVerdict.UNKNOWN: "dim"}
# A mark as well as a colour, so the verdict survives a pipe, a log file or a colour-blind reader.
_VERDICT_MARK = {P2pVerdict.P2P: "", P2pVerdict.VIA_HOST: "~", P2pVerdict.NO: "!", P2pVerdict.UNKNOWN: "?"}
MATRIX_LEGEND = ("cells: nvidia-smi level (PIX PXB PHB NODE SYS) + P2P verdict: "
                 "no mark = P2P below a common bridge, ~ = via the root complex, ! = no P2P, ? = unknown; "
                 "see --json 'reasons' or docs/topology.md")


def _short(d: Device) -> str:
    if d.label:
        return d.label
    return d.bdf[5:] if d.bdf.startswith("0000:") else d.bdf


def _interesting(d: Device) -> bool:
    """Show bridges only when something we care about sits below them."""
    if d.role in _SHOWN:
        return True
    return any(_interesting(c) for c in d.children)


def _node_text(topo: Topology, d: Device) -> Text:
    t = Text()
    if d.label:
        t.append(f"{clip(d.label, 80)} ", style="bold")
    t.append(d.bdf, style="cyan")
    role = {Role.ROOT_PORT: "root port", Role.SWITCH_UPSTREAM: "switch upstream",
            Role.SWITCH_DOWNSTREAM: "switch downstream"}.get(d.role, d.role.value)
    t.append(f" {role}")
    if d.model:
        t.append(f" {clip(d.model, 80)}", style="dim")
    link = d.fn.link
    if link.known:
        below = (link.max_speed_gts and link.speed_gts < link.max_speed_gts) or \
                (link.max_width and link.width < link.max_width)
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
        node = root.add(Text(f"host bridge {hb.id}  {numa}", style="bold blue"))
        for d in tops:
            _add(topo, node, d)
    return root


def _add(topo: Topology, parent: Tree, d: Device) -> None:
    branch = parent.add(_node_text(topo, d))
    for c in sorted(d.children, key=lambda x: x.bdf):
        if _interesting(c):
            _add(topo, branch, c)


def matrix(topo: Topology, pairs: list[PairAnalysis], width: int = 200) -> list[Table]:
    """The GPU rows × (GPU, NVMe, NIC) columns matrix, split into several tables of columns when
    it would not fit ``width`` (a 16-NVMe node is wider than any terminal), rather than squeezing
    every cell into an ellipsis."""
    gpus = sorted(topo.by_role(Role.GPU), key=Device.sort_key)
    cols = gpus + sorted(topo.by_role(Role.NVME, Role.NIC), key=Device.sort_key)
    idx = {(p.a.bdf, p.b.bdf): p for p in pairs}
    head_w = max([len(_short(g)) for g in gpus] + [3])
    widths = [max(len(_short(c)), 5) + 2 for c in cols]   # text + right padding + rich's slack
    chunks: list[list[int]] = [[]]
    used = head_w + 2 + 6
    for i, w in enumerate(widths):
        if chunks[-1] and used + w > width:
            chunks.append([])
            used = head_w + 2 + 6
        chunks[-1].append(i)
        used += w
    tables = []
    for n, chunk in enumerate(chunks):
        title = "pair matrix" + (f" ({n + 1}/{len(chunks)})" if len(chunks) > 1 else "")
        t = Table(title=title, box=box.SIMPLE_HEAD, padding=(0, 1, 0, 0), pad_edge=False)
        t.add_column("", no_wrap=True, min_width=head_w)
        for i in chunk:
            t.add_column(_short(cols[i]), no_wrap=True, min_width=widths[i] - 2)
        t.add_column("NUMA", no_wrap=True, min_width=4)
        for g in gpus:
            row = [Text(_short(g), style="bold")]
            for i in chunk:
                c = cols[i]
                p = idx.get((g.bdf, c.bdf))
                if c is g:
                    row.append(Text(" X"))
                elif p is None:
                    row.append(Text("-"))
                else:
                    row.append(Text(p.smi.value + _VERDICT_MARK[p.verdict], style=_VERDICT_STYLE[p.verdict]))
            numa = topo.numa_of(g)
            row.append(str(numa) if numa is not None else "?")
            t.add_row(*row)
        tables.append(t)
    return tables


def findings_table(findings: list[Finding]) -> Table:
    t = Table(title="findings", show_lines=True)
    for col in ("severity", "finding", "evidence", "fix"):
        t.add_column(col, overflow="fold")
    style = {"fail": "red", "warn": "yellow", "info": "cyan"}
    for f in findings:
        t.add_row(Text(f.severity, style=style.get(f.severity, "")), clip(f.title), clip(f.evidence), clip(f.fix))
    return t


def render(console: Console, topo: Topology, pairs, findings, show_tree=True, show_matrix=True) -> None:
    if show_tree:
        console.print(tree(topo))
    if show_matrix:
        if topo.by_role(Role.GPU):
            for t in matrix(topo, pairs, console.width):
                console.print(t)
            console.print(MATRIX_LEGEND, style="dim")
        else:
            console.print("no NVIDIA GPU found: no pair matrix", style="yellow")
    if findings:
        console.print(findings_table(findings))
    else:
        console.print("no findings", style="green")
