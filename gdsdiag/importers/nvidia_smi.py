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
    numa: dict[str, int | None] = field(default_factory=dict)  # the CPU node (first listed)
    numa_affinity: dict[str, list[int]] = field(default_factory=dict)  # every node listed: '0,3-9,11-17'
    gpu_numa_id: dict[str, int | None] = field(default_factory=dict)  # the node that is the GPU's memory
    nic_legend: dict[str, str] = field(default_factory=dict)

    def device_name(self, col: str) -> str:
        return self.nic_legend.get(col, col)


def parse(text: str) -> SmiMatrix:
    lines = [ANSI_RE.sub("", ln).rstrip("\n") for ln in text.splitlines()]
    header_i = next((i for i, ln in enumerate(lines) if re.match(r"^\s+GPU0\b", ln)), None)
    if header_i is None:
        raise GdsdiagError(
            "no 'nvidia-smi topo -m' matrix found (header starting with GPU0)",
            "pass the output of 'nvidia-smi topo -m' unchanged",
        )
    header = [t for t in re.split(r"\t|\s{2,}", lines[header_i].strip()) if t]
    devs = [t for t in header if t not in AFFINITY_HEADERS]
    aff = [t for t in header if t in AFFINITY_HEADERS]
    m = SmiMatrix(columns=devs)
    for ln in lines[header_i + 1 :]:
        if not ln.strip():
            if m.cells:
                break
            continue
        toks = ln.split()
        row, cells = toks[0], toks[1:]
        if row not in devs:
            break
        for col, val in zip(devs, cells[: len(devs)]):
            m.cells[(row, col)] = val
        # Affinity cells in header order; empty cells vanish in split(), which keeps the order
        # (a NIC row has none; 'N/A' stands in for an unknown one)
        rest = dict(zip(aff, cells[len(devs) :]))
        if "CPU Affinity" in rest:
            m.cpu_affinity[row] = rest["CPU Affinity"]
        if "NUMA Affinity" in rest:
            nodes = _nodelist(rest["NUMA Affinity"])
            m.numa_affinity[row] = nodes
            # Grace Hopper/Blackwell list the CPU node first, then memory-only nodes: '0,3-9,11-17'
            m.numa[row] = nodes[0] if nodes else None
        if "GPU NUMA ID" in rest:
            v = rest["GPU NUMA ID"]
            from ..bounded import MAX_NODES, ascii_int

            m.gpu_numa_id[row] = ascii_int(v, MAX_NODES)  # isdigit() is true for '²' (issue 24)
    for ln in lines:
        mm = re.match(r"^\s*(NIC\d+):\s*(\S+)\s*$", ln)
        if mm:
            m.nic_legend[mm.group(1)] = mm.group(2)
    if not m.cells:
        raise GdsdiagError("the nvidia-smi matrix has no rows", "pass the whole 'nvidia-smi topo -m' output")
    return m


def parse_nvlink_status(text: str) -> list[dict]:
    """'nvidia-smi nvlink -s' -> [{"index": 3, "name": ..., "uuid": ..., "links": {0: 25.781, 3: None}}]
    (None: '<inactive>'). Lines it does not know (elisions, other commands) are skipped."""
    out: list[dict] = []
    for raw in text.splitlines():
        ln = ANSI_RE.sub("", raw).strip()
        m = re.match(r"^GPU (\d+): (.+?)(?: \(UUID: ([^)]*)\))?$", ln)
        if m:
            out.append({"index": int(m.group(1)), "name": m.group(2), "uuid": m.group(3), "links": {}})
            continue
        m = re.match(r"^Link (\d+): (?:([0-9.]+) GB/s|<inactive>)", ln)
        if m and out:
            out[-1]["links"][int(m.group(1))] = float(m.group(2)) if m.group(2) else None
    return out


def _nodelist(text: str) -> list[int]:
    """'0,3-9,11-17' -> [0, 3, 4, ..., 17]; 'N/A' -> []. Order kept: the first is the CPU node.
    Bounded (issue 24: a 60-byte '0-4000000000' took 23.6 GiB): nodes below bounded.MAX_NODES."""
    from ..bounded import MAX_NODES, parse_ranges

    return parse_ranges(text, MAX_NODES) or []


def read_smi_text(path: str | None) -> str:
    if path:
        from ..bounded import read_user_text  # regular files under a stated size only

        return read_user_text(path, "nvidia-smi output")
    exe = shutil.which("nvidia-smi")
    if exe is None:
        raise GdsdiagError(
            "nvidia-smi not found for --cross-check",
            "install the NVIDIA driver utilities or pass a saved output with --nvidia-smi FILE",
        )
    try:
        out = subprocess.run([exe, "topo", "-m"], capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        raise GdsdiagError("nvidia-smi topo -m timed out after 60 s", "check the driver with nvidia-smi") from None
    if out.returncode != 0:
        raise GdsdiagError(f"nvidia-smi topo -m failed: {out.stderr.strip()[:200]}", "check the driver with nvidia-smi")
    return out.stdout


def _match_devices(topo: Topology, m: SmiMatrix) -> tuple[dict[str, object], dict[str, str]]:
    """(nvidia-smi column -> our Device, column -> how it was matched or why not). GPUs by index
    label; NICs by name (the NIC Legend's mlx5_N or netdev, or the header's own name). Only when our
    topology carries no NIC names at all (lspci text) are NICs matched by order among Mellanox
    functions, and each such match says so."""
    ours: dict[str, object] = {}
    how: dict[str, str] = {}
    gpus = {d.label: d for d in topo.by_role(Role.GPU)}
    nics = sorted(topo.by_role(Role.NIC), key=lambda d: d.bdf)
    by_name = {n: d for d in nics for n in d.names}
    mellanox = [d for d in nics if d.fn.vendor == 0x15B3]
    nic_cols = [c for c in m.columns if not c.startswith("GPU")]
    nameless = not by_name
    for col in m.columns:
        if col.startswith("GPU"):
            if col in gpus:
                ours[col], how[col] = gpus[col], "GPU index"
            else:
                how[col] = f"no {col} in our topology"
            continue
        name = m.device_name(col)
        if name in by_name:
            ours[col], how[col] = by_name[name], f"name {name}"
        elif nameless and len(mellanox) == len(nic_cols):
            ours[col] = mellanox[nic_cols.index(col)]
            how[col] = f"order among Mellanox functions (the input carries no NIC names; nvidia-smi calls it {name})"
        else:
            how[col] = f"no NIC named {name} in our topology"
    return ours, how


def cross_check(topo: Topology, pairs, text: str, text_source: str | None = None) -> list[dict]:
    """One entry per GPU-row cell: ``agree`` True/False when compared, None when not compared
    (with the reason in ``note``): a cell not compared is never counted as agreeing."""
    m = parse(text)
    ours, how = _match_devices(topo, m)
    by_pair = {(p.a.bdf, p.b.bdf): p for p in pairs}
    out = []
    for (row, col), theirs in m.cells.items():
        if row == col or not row.startswith("GPU") or theirs == "X":
            continue
        a, b = ours.get(row), ours.get(col)
        entry: dict[str, object] = {"row": row, "column": col, "nvidia_smi": theirs}
        if a is None or b is None:
            entry.update(gdsdiag=None, agree=None, note="not compared: " + (how[row] if a is None else how[col]))
            out.append(entry)
            continue
        entry.update(a=a.bdf, b=b.bdf)
        p = by_pair.get((a.bdf, b.bdf))
        if p is None:
            entry.update(gdsdiag=None, agree=None, note="not compared: gdsdiag analyses no such pair")
        elif theirs.startswith("NV"):
            if p.nvlink is None:
                why = topo.nvlink_note or "no NVLink data for this pair"
                entry.update(
                    gdsdiag=p.label, agree=None, note=f"not compared: NVLink cell, gdsdiag has no NVLink data ({why})"
                )
            elif text_source is not None and p.nvlink.source == text_source:
                entry.update(
                    gdsdiag=p.label,
                    agree=None,
                    note="not compared: gdsdiag's NVLink data is this same nvidia-smi text (no NVML, no other capture)",
                )
            else:
                entry.update(gdsdiag=p.label, agree=p.label == theirs, note=f"NVLink from {p.nvlink.source}")
        else:
            entry.update(gdsdiag=p.label, agree=p.label == theirs)
        if "order among" in how.get(col, ""):
            prev = str(entry.get("note") or "")
            entry["note"] = (prev + "; " if prev else "") + "matched by " + how[col]
        out.append(entry)
    return out


def summary(results: list[dict]) -> str:
    agree = sum(1 for r in results if r["agree"] is True)
    bad = sum(1 for r in results if r["agree"] is False)
    skipped = sum(1 for r in results if r["agree"] is None)
    parts = [f"{agree} agree", f"{bad} disagree"] + ([f"{skipped} not compared"] if skipped else [])
    return f"cross-check with nvidia-smi, {len(results)} cells: " + ", ".join(parts)


def render_cross_check(console, results: list[dict]) -> None:
    """A summary line, then one line per cell that is not an agreement (differs / not compared)."""
    from rich.text import Text

    if not results:
        console.print("cross-check: nvidia-smi lists no GPU pair or NIC to compare", style="yellow")
        return
    shown = [r for r in results if r["agree"] is not True]
    style = "red" if any(r["agree"] is False for r in results) else "yellow" if shown else "green"
    console.print(Text(summary(results), style=f"bold {style}"))
    for r in shown:
        word = "differs" if r["agree"] is False else "not compared"
        line = f"  {r['row']}/{r['column']}: nvidia-smi {r['nvidia_smi']}, gdsdiag {r.get('gdsdiag') or '-'} — {word}"
        note = r.get("note", "")
        if note and not note.startswith("not compared"):
            line += f" ({note})"
        elif note:
            line += note[len("not compared") :]
        console.print(line, markup=False, highlight=False, soft_wrap=True)
