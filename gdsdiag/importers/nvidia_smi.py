"""Parse ``nvidia-smi topo -m`` and compare its labels with ours (``--cross-check``).

Formats seen in real captures (../shared/corpus/nvidia-smi-topo/ and our GPU machine): TAB-separated
(piped) or space-aligned (terminal); ANSI underline on the header; ``NV#`` cells; a ``NIC Legend``
mapping NICk to mlx5_N or netdev names; old headers naming mlx5_N directly with no legend; an optional
``GPU NUMA ID`` column; NIC rows with empty affinity cells.
"""
from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass, field

from ..errors import GdsdiagError
from ..topology.model import Role, Topology

ANSI_RE = re.compile(r"\x1b\[[0-9;]*m")
LEVELS = {"X", "PIX", "PXB", "PHB", "NODE", "SYS", "SOC"}
AFFINITY_HEADERS = ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")


@dataclass
class SmiMatrix:
    columns: list[str]
    cells: dict[tuple[str, str], str] = field(default_factory=dict)
    cpu_affinity: dict[str, str] = field(default_factory=dict)
    numa: dict[str, int | None] = field(default_factory=dict)
    nic_legend: dict[str, str] = field(default_factory=dict)

    def device_name(self, col: str) -> str:
        return self.nic_legend.get(col, col)


def parse(text: str) -> SmiMatrix:
    lines = [ANSI_RE.sub("", ln).rstrip("\n") for ln in text.splitlines()]
    header_i = next((i for i, ln in enumerate(lines) if re.match(r"^\s+GPU0\b", ln)), None)
    if header_i is None:
        raise GdsdiagError("no 'nvidia-smi topo -m' matrix found (header starting with GPU0)",
                           "pass the output of 'nvidia-smi topo -m' unchanged")
    header = [t for t in re.split(r"\t|\s{2,}", lines[header_i].strip()) if t]
    devs = [t for t in header if t not in AFFINITY_HEADERS]
    aff = [t for t in header if t in AFFINITY_HEADERS]
    m = SmiMatrix(columns=devs)
    for ln in lines[header_i + 1:]:
        if not ln.strip():
            if m.cells:
                break
            continue
        toks = ln.split()
        row, cells = toks[0], toks[1:]
        if row not in devs:
            break
        for col, val in zip(devs, cells[:len(devs)]):
            m.cells[(row, col)] = val
        rest = cells[len(devs):]
        if rest and "CPU Affinity" in aff:
            m.cpu_affinity[row] = rest[0]
        if len(rest) > 1 and "NUMA Affinity" in aff:
            m.numa[row] = int(rest[1]) if rest[1].isdigit() else None
    for ln in lines:
        mm = re.match(r"^\s*(NIC\d+):\s*(\S+)\s*$", ln)
        if mm:
            m.nic_legend[mm.group(1)] = mm.group(2)
    if not m.cells:
        raise GdsdiagError("the nvidia-smi matrix has no rows", "pass the whole 'nvidia-smi topo -m' output")
    return m


def read_smi_text(path: str | None) -> str:
    if path:
        from ..bounded import read_user_text       # regular files under a stated size only
        return read_user_text(path, "nvidia-smi output")
    exe = shutil.which("nvidia-smi")
    if exe is None:
        raise GdsdiagError("nvidia-smi not found for --cross-check",
                           "install the NVIDIA driver utilities or pass a saved output with --nvidia-smi FILE")
    try:
        out = subprocess.run([exe, "topo", "-m"], capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        raise GdsdiagError("nvidia-smi topo -m timed out after 60 s", "check the driver with nvidia-smi") from None
    if out.returncode != 0:
        raise GdsdiagError(f"nvidia-smi topo -m failed: {out.stderr.strip()[:200]}", "check the driver with nvidia-smi")
    return out.stdout


def _match_devices(topo: Topology, m: SmiMatrix) -> dict[str, object]:
    """nvidia-smi column → our Device. GPUs by index label; NICs by legend name (mlx5_N or
    netdev), else by order among RDMA-capable NICs (nvidia-smi lists Mellanox/NVIDIA NICs in
    device order)."""
    ours: dict[str, object] = {}
    gpus = {d.label: d for d in topo.by_role(Role.GPU)}
    nics = sorted(topo.by_role(Role.NIC), key=lambda d: d.bdf)
    by_name = {n: d for d in nics for n in d.names}
    rdma = [d for d in nics if d.fn.vendor == 0x15B3 or any(n.startswith("mlx5") for n in d.names)]
    nic_cols = [c for c in m.columns if not c.startswith("GPU")]
    for col in m.columns:
        if col.startswith("GPU"):
            if col in gpus:
                ours[col] = gpus[col]
            continue
        name = m.device_name(col)
        if name in by_name:
            ours[col] = by_name[name]
        else:
            i = nic_cols.index(col)
            pool = rdma or nics
            if i < len(pool) and len(pool) == len(nic_cols):
                ours[col] = pool[i]
    return ours


def cross_check(topo: Topology, pairs, text: str) -> list[dict]:
    m = parse(text)
    ours = _match_devices(topo, m)
    by_pair = {(p.a.bdf, p.b.bdf): p for p in pairs}
    out = []
    for (row, col), theirs in m.cells.items():
        if row == col or not row.startswith("GPU") or theirs == "X":
            continue
        a, b = ours.get(row), ours.get(col)
        entry = {"row": row, "column": col, "nvidia_smi": theirs}
        if a is None or b is None:
            entry.update(gdsdiag=None, agree=False, note="device not found in our topology")
        elif theirs.startswith("NV"):
            entry.update(gdsdiag=None, agree=True, note="NVLink: PCIe label not compared")
        else:
            p = by_pair.get((a.bdf, b.bdf))
            mine = p.smi.value if p else None
            entry.update(gdsdiag=mine, agree=mine == theirs, a=a.bdf, b=b.bdf)
        out.append(entry)
    return out


def render_cross_check(console, results: list[dict]) -> None:
    from rich.table import Table
    bad = [r for r in results if not r["agree"]]
    if not results:
        console.print("cross-check: nvidia-smi lists no GPU pair or NIC to compare", style="yellow")
        return
    if not bad:
        console.print(f"cross-check: all {len(results)} cells agree with nvidia-smi", style="green")
        return
    t = Table(title=f"cross-check: {len(bad)} of {len(results)} cells disagree with nvidia-smi")
    for c in ("row", "column", "nvidia-smi", "gdsdiag", "note"):
        t.add_column(c)
    for r in bad:
        t.add_row(r["row"], r["column"], r["nvidia_smi"], str(r.get("gdsdiag")), r.get("note", ""))
    console.print(t)
