"""Findings: each problem in the topology once, with its evidence and the fix."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

from ..verdicts import Severity
from .model import Role, Topology
from .pairs import P2pDmaMap, PairAnalysis, SmiLevel

if TYPE_CHECKING:
    from ..schema import topology as schema


VIRTIO_VENDOR = 0x1AF4  # Red Hat, Inc.: the virtio PCI devices (VIRTIO spec 1.2, 4.1.2)


@dataclass
class Finding:
    id: str
    severity: Severity
    title: str
    evidence: str
    fix: str

    def to_json(self) -> schema.Finding:
        # the fields are the document's keys (tests/test_json_schema.py checks them against the type)
        return cast("schema.Finding", dict(self.__dict__))


def find(topo: Topology, pairs: list[PairAnalysis]) -> list[Finding]:
    out: list[Finding] = []
    # ACS redirect on bridges that carry GPU peer traffic.
    redirect = sorted({b for p in pairs for b in p.acs_redirect_bridges})
    if redirect:
        out.append(
            Finding(
                "acs-redirect",
                Severity.FAIL,
                f"ACS redirect enabled on {len(redirect)} bridge(s) between GPUs and their peers",
                "ACSCtl RR/CR/EC set on " + ", ".join(redirect),
                "disable ACS redirect on these ports (BIOS 'ACS' option, or setpci at boot as NVIDIA's "
                "GDS best-practices guide shows); P2P otherwise detours through the root complex",
            )
        )
    # A bare 'grep ACSCtl' paste: no device named, so no pair; the settings are still a finding
    for grep in topo.acs_grep:
        where = f"{grep['path']}: {grep['lines']} ACSCtl lines, settings " + ", ".join(grep["settings"])
        if grep["unreadable"]:
            where += f"; {grep['unreadable']} lines without all seven flags (not read)"
        if grep.get("headless"):
            # ACSCtl lines above the first device header of a -vvv excerpt: the ports they belong to
            # are cut off, so only a redirect says anything (no redirect says nothing about the rest)
            if grep["redirect"]:
                out.append(
                    Finding(
                        "acs-unnamed-redirect",
                        Severity.WARN,
                        f"ACS redirect on {grep['redirect']} port(s) whose device header the excerpt cut off",
                        where + " (above the first device header)",
                        "find the port in the full 'sudo lspci -vvv'; if it lies between GPUs and their NVMe/NIC, "
                        "disable ACS redirect on it (BIOS 'ACS' option or setpci at boot)",
                    )
                )
            continue
        if grep["redirect"]:
            out.append(
                Finding(
                    "acs-grep-redirect",
                    Severity.WARN,
                    f"ACS redirect on {grep['redirect']} of {grep['lines']} ACS-capable ports (which ports: unknown, "
                    "the grep names no device)",
                    where,
                    "if these ports lie between GPUs and their NVMe/NIC, disable ACS redirect on them (BIOS 'ACS' "
                    "option or setpci at boot); send 'lspci -tv' and the full 'sudo lspci -vvv' to place them",
                )
            )
        else:
            out.append(
                Finding(
                    "acs-grep-clear",
                    Severity.INFO if grep["lines"] and not grep["unreadable"] else Severity.WARN,
                    f"no ACS redirect on any of the {grep['lines']} ACS-capable ports"
                    if not grep["unreadable"]
                    else f"no ACS redirect on the {grep['lines'] - grep['unreadable']} ports read; {grep['unreadable']} unread",
                    where,
                    "nothing to do for ACS; send 'lspci -tv' for the rest of the topology",
                )
            )
    unknown = sorted({b for p in pairs for b in p.acs_unknown_bridges})
    if unknown:
        listed = ", ".join(unknown[:8]) + (" …" if len(unknown) > 8 else "")
        if topo.origin == "lspci":
            # a text someone sent: running anything as root here does not help, the sender must
            out.append(
                Finding(
                    "acs-unknown",
                    Severity.INFO,
                    f"ACS state unknown on {len(unknown)} bridge(s)",
                    "the lspci text has no ACSCtl line for: " + listed,
                    "ask the sender for 'sudo lspci -vvv' (ACSCtl is printed only when lspci runs as root), or "
                    "'sudo lspci -vvv | grep ACSCtl' to pass with --lspci next to the tree",
                )
            )
        else:
            out.append(
                Finding(
                    "acs-unknown",
                    Severity.INFO,
                    f"ACS state unknown on {len(unknown)} bridge(s)",
                    "config space beyond 64 bytes unreadable: " + listed,
                    "run gdsdiag as root (or capture a snapshot as root) to read extended config space",
                )
            )
    if topo.iommu.mode in ("translated", "mixed"):
        out.append(
            Finding(
                "iommu-translating",
                Severity.FAIL,
                f"IOMMU is {topo.iommu.mode}: DMA goes through address translation",
                "; ".join(topo.iommu.evidence),
                "boot with iommu=pt (or amd_iommu=off / intel_iommu=off) for nvidia-fs P2P, as NVIDIA's GDS "
                "installation guide requires",
            )
        )
    # Links below their maximum (each link once).
    seen: set[str] = set()
    for p in pairs:
        for h in p.hops:
            if h.downtrained and h.bdf not in seen:
                seen.add(h.bdf)
                note = (
                    " GPUs lower link speed at idle; recheck under load before acting."
                    if h.idle_possible and h.link.width and h.link.max_width and h.link.width >= h.link.max_width
                    else ""
                )
                out.append(
                    Finding(
                        f"link-below-max:{h.bdf}",
                        Severity.WARN if not note else Severity.INFO,
                        f"{h.label} link runs at {h.link.describe()}",
                        f"{h.bdf} current_link_* vs max_link_*",
                        "reseat the card or check the slot's lane wiring and BIOS link-speed setting." + note,
                    )
                )
    # Placement: GPU with no storage/NIC under the same switch.
    storage_pairs: dict[int, list[PairAnalysis]] = {}  # GPU (by id) -> its pairs with NVMe and NICs
    for p in pairs:
        if p.b.role in (Role.NVME, Role.NIC):
            storage_pairs.setdefault(id(p.a), []).append(p)
    for gpu in topo.by_role(Role.GPU):
        mine = storage_pairs.get(id(gpu), [])
        if mine and not any(p.smi in (SmiLevel.PIX, SmiLevel.PXB) for p in mine):
            best = min(mine, key=lambda p: list(SmiLevel).index(p.smi))
            out.append(
                Finding(
                    f"placement:{gpu.bdf}",
                    Severity.INFO,
                    f"{gpu.display()} shares no PCIe switch with any NVMe or NIC (best: {best.smi.value} to {best.b.display()})",
                    ", ".join(f"{p.b.label or p.b.bdf} {p.smi.value}" for p in mine[:6])
                    + (" …" if len(mine) > 6 else ""),
                    "for GDS P2P at full rate put the GPU and its storage/NIC under one switch; "
                    "across root ports traffic is bounded by the root complex",
                )
            )
    # GPU pairs joined by NVLink do not use PCI P2PDMA between them: no warning for those. Nor for
    # paravirtual (virtio) devices: a virtio NIC or disk does no peer DMA of any kind, so the kernel
    # refusing P2PDMA to it changes nothing (every VM has one; issue 22: a warning, exit 1, on each)
    not_supported = [
        p
        for p in pairs
        if p.p2pdma == P2pDmaMap.NOT_SUPPORTED
        and p.nvlink is None
        and not p.nvlink_unknown  # two GPUs that NVLink may join: PCI P2PDMA may never be asked for
        and VIRTIO_VENDOR not in (p.a.fn.vendor, p.b.fn.vendor)
    ]
    if not_supported:
        out.append(
            Finding(
                "p2pdma-not-supported",
                Severity.WARN,
                f"{len(not_supported)} pair(s) the kernel's P2PDMA would refuse (NOT_SUPPORTED)",
                ", ".join(f"{p.a.display()}↔{p.b.display()}" for p in not_supported[:6]),
                "the PCI P2PDMA route (cufile.json use_pci_p2pdma) cannot work for these pairs; the nvidia-fs route"
                " may still carry them (it maps GPU memory through the NVIDIA driver, not the kernel's P2PDMA):"
                " 'gdsdiag check' says whether this node has it",
            )
        )
    # NVLink links down: peer traffic between those GPUs runs on fewer links (or falls back to PCIe)
    if topo.nvlink is not None:
        for bdf, g in sorted(topo.nvlink.gpus.items()):
            if g.links_inactive:
                dev = topo.devices.get(bdf)
                # Links to peer GPUs (not an NVSwitch) the matrix names: when they add up to the
                # active links, every peer the board wires is reached and the inactive links join
                # nothing -- unused by design on boards that leave some unwired -- so no repair
                # is claimed, only the fact (issue 22: "needs servicing" on such a box)
                to_peers = sum(p.links for p in topo.nvlink.pairs.values() if bdf in (p.a, p.b) and not p.via_nvswitch)
                by_design = bool(to_peers) and to_peers == g.links_active
                title = (
                    f"{dev.display() if dev else bdf}: {g.links_inactive} NVLink(s) inactive, {g.links_active} active"
                )
                if by_design:
                    out.append(
                        Finding(
                            f"nvlink-inactive:{bdf}",
                            Severity.INFO,
                            title + f" (the matrix's NV# cells to peer GPUs account for all {g.links_active} active)",
                            topo.nvlink.source,
                            "nothing, if the board does not wire those links; if it does ('nvidia-smi nvlink -c' lists "
                            "each link's capabilities), check 'nvidia-smi nvlink -e' error counters",
                        )
                    )
                    continue
                out.append(
                    Finding(
                        f"nvlink-inactive:{bdf}",
                        Severity.WARN,
                        title,
                        topo.nvlink.source,
                        "check 'nvidia-smi nvlink -e' error counters and the fabric manager (NVSwitch systems); a link "
                        "that stays down after a reset needs the GPU/baseboard serviced",
                    )
                )
        for i, text in enumerate(topo.nvlink_unplaced):
            out.append(
                Finding(
                    f"nvlink-inactive:text{i}",
                    Severity.WARN,
                    text,
                    topo.nvlink.source,
                    "check 'nvidia-smi nvlink -e' error counters and the fabric manager (NVSwitch systems); a link "
                    "that stays down after a reset needs the GPU/baseboard serviced",
                )
            )
        for prob in topo.nvlink.problems:
            out.append(Finding("read-problem", Severity.INFO, prob, topo.nvlink.source, "check the capture"))
    for note in topo.notes:
        out.append(Finding("input-used", Severity.INFO, note, topo.source, "nothing to do"))
    for prob in topo.problems:
        out.append(Finding("read-problem", Severity.INFO, prob, topo.source, "check the capture or run as root"))
    return out
