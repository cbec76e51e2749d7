"""``topology --cross-check``: nvidia-smi's ``topo -m`` labels compared cell by cell with the
pairs gdsdiag derives (``importers/nvidia_smi.py`` reads the text)."""

from __future__ import annotations

import re

from ..importers.nvidia_smi import CPULIST_RE, SmiMatrix, parse
from .model import Device, Role, Topology


def _match_devices(topo: Topology, m: SmiMatrix) -> tuple[dict[str, Device], dict[str, str]]:
    """(nvidia-smi column -> our Device, column -> how it was matched or why not). GPUs by index
    label; NICs by name (the NIC Legend's mlx5_N or netdev, or the header's own name). Only when our
    topology carries no NIC names at all (lspci text) are NICs matched by order among Mellanox
    functions, and each such match says so."""
    ours: dict[str, Device] = {}
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
    return cross_check_report(topo, pairs, text, text_source)[0]


def other_node(topo: Topology, m: SmiMatrix) -> list[str]:
    """Why the text cannot be this node's (or this view's: a Slurm job or a container that sees a
    subset of the GPUs numbers them from 0 again, so GPU indices no longer name the same cards).
    Empty when nothing says so."""
    why: list[str] = []
    ours = topo.by_role(Role.GPU)
    theirs = [c for c in m.columns if c.startswith("GPU")]
    if ours and len(theirs) != len(ours):
        why.append(f"it lists {len(theirs)} GPUs, this node has {len(ours)}")
    cpus = set().union(*topo.cpu.node_cpus.values()) if topo.cpu.node_cpus else set()
    if cpus:
        listed: set[int] = set()
        for v in m.cpu_affinity.values():
            if v != "N/A":
                if CPULIST_RE.match(v):  # only its largest number: '0-4000000000' is never expanded
                    listed.add(max(int(x) for x in re.split(r"[-,]", v)))
        if listed and max(listed) > max(cpus):
            why.append(f"its CPU affinity names CPU {max(listed)}, this node's last CPU is {max(cpus)}")
    named = {n for d in topo.by_role(Role.NIC) for n in d.names}
    legend = set(m.nic_legend.values())
    if named and legend and not (named & legend):
        why.append(f"none of its NICs ({', '.join(sorted(legend)[:4])}...) is on this node")
    # (NUMA nodes that differ are not taken as another node: firmware's numa_node can be wrong, and
    # an lspci import's --numa is the user's; they are compared per GPU row, cross_check_input.numa)
    return why


def cross_check_report(topo: Topology, pairs, text: str, text_source: str | None = None) -> tuple[list[dict], dict]:
    """(cells, input): the cells of ``cross_check`` and what the text held that was not compared:
    ``unread`` (lines and cells named), ``split_glued`` (glued fields read apart), ``other_node``
    (why the text is not this node's: then no cell is compared), ``compared`` / ``not_compared``."""
    m = parse(text)
    ours, how = _match_devices(topo, m)
    foreign = other_node(topo, m)
    by_pair = {(p.a.bdf, p.b.bdf): p for p in pairs}
    out: list[dict] = []
    for row in dict.fromkeys(m.rows_unread):  # (a row repeated 5,000 times is one row's cells)
        if row.startswith("GPU"):
            for col in m.columns:
                if col != row:
                    out.append(
                        {
                            "row": row,
                            "column": col,
                            "nvidia_smi": None,
                            "gdsdiag": None,
                            "agree": None,
                            "note": "not compared: nvidia-smi's row could not be read (see cross_check_input.unread)",
                        }
                    )
    for (row, col), theirs in m.cells.items():
        if row == col or not row.startswith("GPU") or theirs == "X":
            continue
        a, b = ours.get(row), ours.get(col)
        entry: dict[str, object] = {"row": row, "column": col, "nvidia_smi": theirs}
        if foreign:
            entry.update(
                gdsdiag=None, agree=None, note="not compared: the text is not this node's: " + "; ".join(foreign)
            )
            out.append(entry)
            continue
        if theirs == "?":
            entry.update(gdsdiag=None, agree=None, note="not compared: nvidia-smi's cell is of no known kind")
            out.append(entry)
            continue
        if a is None or b is None:
            side = row if a is None else col  # (a row whose name the header lacks has no 'how')
            entry.update(
                gdsdiag=None, agree=None, note="not compared: " + how.get(side, f"no {side} column in the header")
            )
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
        elif p.label == "?":
            entry.update(
                gdsdiag="?",
                agree=None,
                note="not compared: gdsdiag cannot tell NODE from SYS here (a host bridge's NUMA node is unknown; "
                "lspci imports take --numa)",
            )
        else:
            entry.update(gdsdiag=p.label, agree=p.label == theirs)
        if "order among" in how.get(col, ""):
            prev = str(entry.get("note") or "")
            entry["note"] = (prev + "; " if prev else "") + "matched by " + how[col]
        out.append(entry)
    meta = {
        "unread": m.unread,
        "split_glued": m.split_glued,
        "other_node": foreign,
        "numa": [] if foreign else _numa_rows(topo, m, ours),
        "compared": sum(1 for e in out if e["agree"] is not None),
        "not_compared": sum(1 for e in out if e["agree"] is None),
    }
    return out, meta


def _numa_rows(topo: Topology, m: SmiMatrix, ours: dict[str, Device]) -> list[dict]:
    """Per GPU row: nvidia-smi's NUMA Affinity (its CPU node, the first listed) against the NUMA
    node gdsdiag reads for that GPU; agree None when either side does not say."""
    out = []
    for row in [c for c in m.columns if c.startswith("GPU")]:
        if row not in m.numa:
            continue
        dev = ours.get(row)
        theirs = m.numa[row]
        mine = topo.numa_of(dev) if dev is not None else None
        entry: dict = {"row": row, "nvidia_smi": theirs, "gdsdiag": mine}
        if theirs is None or mine is None:
            entry.update(
                agree=None,
                note="not compared: " + ("nvidia-smi says N/A" if theirs is None else "gdsdiag does not know"),
            )
        else:
            entry["agree"] = theirs == mine
        out.append(entry)
    return out


def summary(results: list[dict]) -> str:
    agree = sum(1 for r in results if r["agree"] is True)
    bad = sum(1 for r in results if r["agree"] is False)
    skipped = sum(1 for r in results if r["agree"] is None)
    parts = [f"{agree} agree", f"{bad} disagree"] + ([f"{skipped} not compared"] if skipped else [])
    return f"cross-check with nvidia-smi, {len(results)} cells: " + ", ".join(parts)
