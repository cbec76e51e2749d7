"""The topology data model: raw PCI function facts, roles, and the analysed tree.

Readers (sysfs, lspci text) produce ``PciFunction`` records and ``HostBridge`` records; the
builder links them into a ``Topology``; pure analysis (pairs, findings) reads the ``Topology``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import Enum

from ..pci.nvlink import NvLinkInfo
from ..pci.records import CpuInfo, HostBridge, IommuInfo, PciFunction

NVIDIA = 0x10DE
MELLANOX = 0x15B3


class Role(str, Enum):
    GPU = "gpu"
    NVME = "nvme"
    NIC = "nic"
    NVSWITCH = "nvswitch"
    ROOT_PORT = "root_port"
    SWITCH_UPSTREAM = "switch_upstream"
    SWITCH_DOWNSTREAM = "switch_downstream"
    BRIDGE = "bridge"  # any other bridge (PCI-PCI, PCIe-to-PCI)
    HOST_BRIDGE_FN = "host_bridge_function"  # class 0x0600 function (e.g. 00.0 of a root bus)
    OTHER = "other"


BRIDGE_ROLES = (Role.ROOT_PORT, Role.SWITCH_UPSTREAM, Role.SWITCH_DOWNSTREAM, Role.BRIDGE)


def role_from_class(class_code: int | None, vendor: int | None) -> Role | None:
    """Endpoint roles from the 24-bit class code; bridges are decided structurally later."""
    if class_code is None:
        return None
    base_sub = class_code >> 8
    if vendor == NVIDIA and base_sub in (0x0300, 0x0302):
        return Role.GPU
    if vendor == NVIDIA and base_sub == 0x0680:
        return Role.NVSWITCH
    if class_code == 0x010802:
        return Role.NVME
    # Ethernet, InfiniBand network controllers, and InfiniBand serial bus controllers (0c06: QLogic/Intel
    # True Scale HCAs, qib0 in hwloc's 40intel64-2g2n4c+pci tree; lspci calls the class 'InfiniBand')
    if base_sub in (0x0200, 0x0207, 0x0C06):
        return Role.NIC
    if base_sub == 0x0280 and vendor == MELLANOX:
        # 'Network controller: other': ConnectX-3 (15b3:1003) in VPI mode, an RDMA NIC (mlx4_0 and ib0
        # in hwloc's 32em64t trees). Only Mellanox's: Wi-Fi cards use this class too.
        return Role.NIC
    if base_sub == 0x0600:
        return Role.HOST_BRIDGE_FN
    if base_sub == 0x0604:
        return Role.BRIDGE
    return Role.OTHER


@dataclass
class Device:
    """A PCI function placed in the tree, with its role and the names users know it by."""

    fn: PciFunction
    role: Role
    parent: Device | None = None
    children: list[Device] = field(default_factory=list)
    names: list[str] = field(default_factory=list)  # GPU0, nvme0, mlx5_0, eth0 ...
    label: str | None = None  # short display label, e.g. GPU0
    switch_id: str | None = None  # physical switch (USP bdf) for switch ports
    model: str | None = None

    @property
    def bdf(self) -> str:
        return self.fn.bdf

    @property
    def is_bridge(self) -> bool:
        return self.role in BRIDGE_ROLES

    def ancestors(self) -> list[Device]:
        """Upstream bridges, nearest first. Cached: the tree is fixed once built, and the pair
        analysis asks for the same chains thousands of times on a large node."""
        cached = self.__dict__.get("_ancestors")
        if cached is not None:
            return cached
        out = []
        p = self.parent
        while p is not None:
            out.append(p)
            p = p.parent
        self.__dict__["_ancestors"] = out
        return out

    def sort_key(self) -> tuple:
        """GPU2 before GPU10; then NVMe, NICs by label (nvme2 before nvme10), then by address."""
        order = {Role.GPU: 0, Role.NVME: 1, Role.NIC: 2}.get(self.role, 3)
        m = re.match(r"^(\D*)(\d+)$", self.label or "")
        return (order, 0 if m else 1, m.group(1) if m else "", int(m.group(2)) if m else 0, self.bdf)

    def display(self) -> str:
        return f"{self.label} ({self.bdf})" if self.label else self.bdf


@dataclass
class Topology:
    devices: dict[str, Device]
    host_bridges: dict[str, HostBridge]
    iommu: IommuInfo
    cpu: CpuInfo
    source: str
    problems: list[str] = field(default_factory=list)
    nvlink: NvLinkInfo | None = None  # topology.nvlink; None: no NVLink source was available
    nvlink_note: str = ""  # why there is no NVLink data (shown, never silent)
    origin: str = "sysfs"  # sysfs (live, snapshot, any root) | lspci (a text someone sent)
    notes: list[str] = field(default_factory=list)  # how an input was used (not a problem), e.g. an ACSCtl grep applied
    # 'lspci -vvv | grep ACSCtl' pastes given with no tree or device blocks: per file, the lines and
    # how many redirect (the grep names no device, so nothing can be placed; the settings are judged)
    acs_grep: list[dict] = field(default_factory=list)
    # 'nvidia-smi nvlink -s' GPUs with links down that are not on this topology (the text alone)
    nvlink_unplaced: list[str] = field(default_factory=list)

    def by_role(self, *roles: Role) -> list[Device]:
        return [d for d in self.devices.values() if d.role in roles]

    def roots(self, hb: str) -> list[Device]:
        return [d for d in self.devices.values() if d.parent is None and d.fn.host_bridge == hb]

    def numa_of(self, dev: Device) -> int | None:
        hb = self.host_bridges.get(dev.fn.host_bridge)
        if hb is not None and hb.numa_node is not None:
            return hb.numa_node
        return dev.fn.numa_node
