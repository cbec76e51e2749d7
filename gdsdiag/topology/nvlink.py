"""NVLink and NVSwitch in the model: per GPU pair the number of links and their state, labelled
``NV#`` as ``nvidia-smi topo -m`` labels it ("a bonded set of # NVLinks").

Sources, best first (each reader fills the same ``NvLinkInfo``):
- NVML through nvidia-ml-py on a live node (gdsdiag/platform/nvlink_nvml.py): per link its state,
  the remote end's type (GPU, NVSwitch, IBM NPU) and PCI address, and the driver's P2P-over-NVLink
  status per pair.
- ``nvidia-smi topo -m`` text: a saved one (``--nvidia-smi FILE``) or one in a snapshot; gives the
  ``NV#`` cell per GPU pair and nothing about state (a cell exists only for trained links).
The driver exposes no NVLink state in sysfs or /proc/driver/nvidia (checked on the GPU machine,
docs/topology.md), so a plain sysfs capture has none.
"""

from __future__ import annotations

from ..pci.nvlink import NvLinkGpu, NvLinkInfo, NvLinkPair
from .model import Role


def from_smi_matrix(topo, matrix, source: str) -> NvLinkInfo | None:
    """NV# cells of a parsed ``nvidia-smi topo -m`` (importers.nvidia_smi.SmiMatrix), placed on our
    GPUs by their index label (GPU0 ... as nvidia-smi numbers them). None when the text has no NV#."""
    gpus = {d.label: d for d in topo.by_role(Role.GPU)}
    info = NvLinkInfo(source=source)
    for (row, col), cell in matrix.cells.items():
        if not (row.startswith("GPU") and col.startswith("GPU") and cell.startswith("NV")):
            continue
        try:
            n = int(cell[2:])
        except ValueError:
            info.problems.append(f"nvidia-smi cell {row}/{col} '{cell}' is not NV<number>")
            continue
        a, b = gpus.get(row), gpus.get(col)
        if a is None or b is None:
            info.problems.append(f"nvidia-smi {row}/{col} {cell}: no {row if a is None else col} in this topology")
            continue
        info.add(NvLinkPair(a.bdf, b.bdf, n, source=source))
    return info if info.pairs or info.problems else None


def apply_link_status(topo, info: NvLinkInfo, gpus: list[dict], source: str) -> None:
    """Per-GPU link states from 'nvidia-smi nvlink -s' (importers.nvidia_smi.parse_nvlink_status),
    placed on our GPUs by index label."""
    ours = {d.label: d for d in topo.by_role(Role.GPU)}
    for g in gpus:
        d = ours.get(f"GPU{g['index']}")
        if d is None:
            info.problems.append(f"{source}: GPU {g['index']} is not in this topology")
            down = sum(1 for v in g["links"].values() if v is None)
            if down:
                # judged from the text alone (a forum paste, no node to place it on): still a warning
                topo.nvlink_unplaced.append(
                    f"GPU {g['index']} ({g['name']}) in {source}: {down} NVLink(s) inactive, "
                    f"{len(g['links']) - down} active"
                )
            continue
        speeds = g["links"].values()
        entry = info.gpus.setdefault(d.bdf, NvLinkGpu(d.bdf))
        entry.links_active = sum(1 for v in speeds if v is not None)
        entry.links_inactive = sum(1 for v in speeds if v is None)
