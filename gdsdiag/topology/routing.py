"""What NVLink means for cuFile's dynamic routing: for each RDMA NIC and each GPU that reaches it only
across the root complex, which GPU could serve as the bounce.

The rule is cufile.json's own (the template shipped with GDS, e.g. /etc/cufile.json on the GPU
machine): "In platforms where IO transfer to a GPU will cause cross RootPort PCIe transfers, enabling
[properties.rdma_dynamic_routing] might help improve overall BW provided there exists a GPU(s) with
Root Port common to that of the storage NIC(s)", with the policies of rdma_dynamic_routing_order:
GPU_MEM_NVLINKS "use GPU memory with NVLink to transfer data between GPUs", GPU_MEM "use GPU memory
with PCIe", SYS_MEM "use system memory with PCIe", P2P "use P2P PCIe ... between NIC and GPU"
(NVIDIA GPUDirect Storage Overview Guide §1.2.6 Dynamic Routing).

'Root port common to the NIC' is read as: the pair shares a PCIe bridge (nvidia-smi PIX or PXB).
"""

from __future__ import annotations

from .model import Role, Topology
from .pairs import PairAnalysis, SmiLevel

NEAR = (SmiLevel.PIX, SmiLevel.PXB)


def is_rdma_nic(d) -> bool:
    """An RDMA-capable NIC: InfiniBand class, a Mellanox/NVIDIA ConnectX function, or one with an RDMA
    device name (/sys/class/infiniband). A virtio or plain Ethernet NIC carries no GDS RDMA."""
    return (
        (d.fn.class_code or 0) >> 8 == 0x0207
        or d.fn.vendor == 0x15B3
        or any(n.startswith(("mlx", "bnxt_re", "irdma", "rdma")) for n in d.names)
    )


def plan(gpus: list[str], nics: list[str], level, nvlink) -> list[dict]:
    """The decision itself, over names: ``level(gpu, nic)`` is the nvidia-smi PCIe level (str or
    None), ``nvlink(gpu, other_gpu)`` the NV# label or None. One entry per (NIC, GPU) pair that
    crosses the root complex."""
    near_levels = {lv.value for lv in NEAR}
    out = []
    for nic in nics:
        near = [g for g in gpus if level(g, nic) in near_levels]
        for g in gpus:
            lv = level(g, nic)
            if lv is None or lv in near_levels:
                continue
            entry = {"nic": nic, "gpu": g, "direct": lv, "policy": "SYS_MEM", "via_gpu": None, "link": None}
            linked = [(h, nvlink(g, h)) for h in near if nvlink(g, h)]
            if linked:
                h, lab = max(linked, key=lambda x: int(x[1][2:]) if x[1][2:].isdigit() else 0)
                entry.update(policy="GPU_MEM_NVLINKS", via_gpu=h, link=lab)
            elif near:
                entry.update(policy="GPU_MEM", via_gpu=near[0])
            out.append(entry)
    return out


def dynamic_routing(topo: Topology, pairs: list[PairAnalysis]) -> list[dict]:
    by = {(p.a.bdf, p.b.bdf): p for p in pairs}
    gpus = sorted(topo.by_role(Role.GPU), key=lambda d: d.sort_key())
    nics = sorted((d for d in topo.by_role(Role.NIC) if is_rdma_nic(d)), key=lambda d: d.sort_key())
    dev = {d.bdf: d for d in gpus + nics}

    def level(g, n):
        p = by.get((g, n))
        return p.smi.value if p else None

    def nvlink(g, h):
        p = by.get((g, h))
        return p.nvlink.label if p and p.nvlink else None

    out = plan([g.bdf for g in gpus], [n.bdf for n in nics], level, nvlink)
    for e in out:
        e["nic_label"], e["gpu_label"] = dev[e["nic"]].label, dev[e["gpu"]].label
        e["via_label"] = dev[e["via_gpu"]].label if e["via_gpu"] else None
        if e["policy"] == "GPU_MEM":
            q = by.get((e["gpu"], e["via_gpu"]))
            e["link"] = q.label if q else None
    return out


def describe(entry: dict) -> str:
    nic = entry.get("nic_label") or entry["nic"]
    gpu = entry.get("gpu_label") or entry["gpu"]
    via = entry.get("via_label") or entry.get("via_gpu")
    head = f"{gpu} ↔ {nic} is {entry['direct']} (crosses the root complex): "
    if entry["policy"] == "GPU_MEM_NVLINKS":
        return head + f"GPU_MEM_NVLINKS can bounce through {via} (shares a switch with {nic}, {entry['link']} to {gpu})"
    if entry["policy"] == "GPU_MEM":
        return head + f"GPU_MEM can bounce through {via} over PCIe ({entry['link'] or '?'}); no NVLink between them"
    return head + "no GPU shares a switch with this NIC: only SYS_MEM (a host-memory bounce) or cross-root-port P2P"
