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
    return ((d.fn.class_code or 0) >> 8 == 0x0207 or d.fn.vendor == 0x15B3
            or any(n.startswith(("mlx", "bnxt_re", "irdma", "rdma")) for n in d.names))


def dynamic_routing(topo: Topology, pairs: list[PairAnalysis]) -> list[dict]:
    by = {(p.a.bdf, p.b.bdf): p for p in pairs}
    gpus = sorted(topo.by_role(Role.GPU), key=lambda d: d.sort_key())
    out = []
    for nic in sorted((d for d in topo.by_role(Role.NIC) if is_rdma_nic(d)), key=lambda d: d.sort_key()):
        near = [g for g in gpus if by.get((g.bdf, nic.bdf)) and by[(g.bdf, nic.bdf)].smi in NEAR]
        for g in gpus:
            p = by.get((g.bdf, nic.bdf))
            if p is None or p.smi in NEAR:
                continue
            entry = {"nic": nic.bdf, "nic_label": nic.label, "gpu": g.bdf, "gpu_label": g.label,
                     "direct": p.label, "policy": None, "via_gpu": None, "via_label": None, "link": None}
            nv = [(h, by.get((g.bdf, h.bdf))) for h in near]
            over_nvlink = [(h, q) for h, q in nv if q is not None and q.nvlink is not None]
            if over_nvlink:
                h, q = max(over_nvlink, key=lambda x: x[1].nvlink.links)
                entry.update(policy="GPU_MEM_NVLINKS", via_gpu=h.bdf, via_label=h.label, link=q.nvlink.label)
            elif near:
                h = near[0]
                q = by.get((g.bdf, h.bdf))
                entry.update(policy="GPU_MEM", via_gpu=h.bdf, via_label=h.label, link=q.label if q else None)
            else:
                entry.update(policy="SYS_MEM")
            out.append(entry)
    return out


def describe(entry: dict) -> str:
    nic = entry["nic_label"] or entry["nic"]
    head = f"{entry['gpu_label']} ↔ {nic} is {entry['direct']} (crosses the root complex): "
    if entry["policy"] == "GPU_MEM_NVLINKS":
        return head + f"GPU_MEM_NVLINKS can bounce through {entry['via_label']} (shares a switch with {nic}, {entry['link']} to {entry['gpu_label']})"
    if entry["policy"] == "GPU_MEM":
        return head + f"GPU_MEM can bounce through {entry['via_label']} over PCIe ({entry['link']}); no NVLink between them"
    return head + "no GPU shares a switch with this NIC: only SYS_MEM (a host-memory bounce) or cross-root-port P2P"
