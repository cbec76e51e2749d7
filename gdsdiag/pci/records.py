"""PCI records as readers find them: one function's facts (ids, link, config space, ACS), host
bridges, IOMMU state and CPU/NUMA facts. The bottom layer: the sysfs reader (platform/), the
text importers and the topology builder all produce or consume these, and this package imports
nothing from above it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, cast

from .config_space import AcsControl, ConfigSpace, PortType, gen_of, lane_gbytes_per_s

if TYPE_CHECKING:
    from ..schema import topology as schema


@dataclass
class Link:
    speed_gts: float | None = None
    width: int | None = None
    max_speed_gts: float | None = None
    max_width: int | None = None

    @property
    def gbytes_per_s(self) -> float | None:
        if not self.speed_gts or not self.width:
            return None
        return lane_gbytes_per_s(self.speed_gts) * self.width

    @staticmethod
    def _fmt(speed: float | None, width: int | None) -> str:
        gen = gen_of(speed)
        s = f"Gen{gen}" if gen else (f"{speed:g}GT/s" if speed else "?")
        return f"{s} x{width}" if width else f"{s} x?"

    def describe(self) -> str:
        cur = self._fmt(self.speed_gts, self.width)
        if self.max_speed_gts or self.max_width:
            return f"{cur} (max {self._fmt(self.max_speed_gts, self.max_width)})"
        return cur

    @property
    def known(self) -> bool:
        return bool(self.speed_gts and self.width)

    def to_json(self) -> schema.Link:
        # the four fields, then the bandwidth they give (tests/test_json_schema.py checks the keys)
        gbps = self.gbytes_per_s
        return cast("schema.Link", {**self.__dict__, "gbytes_per_s": round(gbps, 3) if gbps else None})


@dataclass
class PciFunction:
    """Facts about one PCI function as a reader found them; no interpretation yet."""

    bdf: str  # 0000:01:00.0 (VMD and some virtual hosts: 10000:00:04.0)
    host_bridge: str  # 0000:00  (domain:root bus) as in pci0000:00
    parent_bdf: str | None  # upstream bridge function, None when on the root bus
    # every PCI address above this one on its canonical sysfs path, nearest first: when the parent
    # itself is not listed in /sys/bus/pci/devices the builder hangs the function under the
    # nearest ancestor that is, as hwloc does
    upstream_bdfs: list[str] = field(default_factory=list)
    class_code: int | None = None
    vendor: int | None = None
    device: int | None = None
    subsystem_vendor: int | None = None
    subsystem_device: int | None = None
    revision: int | None = None
    driver: str | None = None
    numa_node: int | None = None  # None: unknown / -1
    numa_source: str | None = None  # numa_node | local_cpulist | local_cpus | lspci
    gpu_numa_node: int | None = None  # the NUMA node that IS this GPU's memory (Grace Hopper, POWER9+V100)
    link: Link = field(default_factory=Link)
    iommu_group: str | None = None
    config: ConfigSpace | None = None
    config_size: int | None = None
    acs_text: AcsControl | None = None  # from lspci 'ACSCtl:' when no extended hex dump
    port_type_text: PortType | None = None  # from lspci 'Express ... Root Port'
    secondary_bus: int | None = None
    acs_absent: bool = False  # lspci listed the extended capabilities and ACS was not one
    # an lspci excerpt without a tree left this function without its upstream bridge and nothing
    # shows its bus is a root bus: where it attaches (root port? switch port?) is not known
    placement_unknown: bool = False
    name: str | None = None  # lspci's device name text, when imported
    # the NVIDIA driver lists it under /proc/driver/nvidia/gpus: a GPU, whether or not the tree kept
    # its class file (hwloc's 2019 POWER9 tree has none)
    nvidia_driver_gpu: bool = False
    source: str = ""

    @property
    def domain(self) -> str:
        return self.bdf.split(":")[0]

    @property
    def bus(self) -> int:
        return int(self.bdf.split(":")[1], 16)

    @property
    def port_type(self) -> PortType | None:
        if self.config and self.config.pcie:
            return self.config.pcie.port_type
        return self.port_type_text

    @property
    def acs_control(self) -> AcsControl | None:
        if self.config and self.config.acs_control is not None:
            return self.config.acs_control
        return self.acs_text

    @property
    def acs_known(self) -> bool:
        """True when we know whether ACS is there and what it is set to."""
        if self.acs_text is not None or self.acs_absent:
            return True
        return bool(self.config and self.config.has_acs is not None)


@dataclass
class HostBridge:
    id: str  # 0000:00
    numa_node: int | None = None
    vendor: int | None = None  # of function 00.0 on the root bus, for p2pdma's whitelist
    device: int | None = None
    vendor_name: str | None = None  # lspci text import: "Advanced Micro Devices"


@dataclass
class IommuInfo:
    mode: str = "unknown"  # off | passthrough | translated | mixed | unknown
    units: list[str] = field(default_factory=list)  # /sys/class/iommu entries
    group_types: dict[str, str] = field(default_factory=dict)  # group -> identity/DMA/DMA-FQ
    group_members: dict[str, list[str]] = field(default_factory=dict)
    cmdline: dict[str, str] = field(default_factory=dict)  # relevant kernel parameters
    evidence: list[str] = field(default_factory=list)

    def group_type_of(self, group: str | None) -> str | None:
        return self.group_types.get(group) if group is not None else None


def bus_of(bdf: str) -> str:
    """'10000:00:04.0' -> '10000:00' (domain:bus, whatever the domain's width)."""
    return bdf.rsplit(":", 1)[0]


@dataclass
class CpuInfo:
    vendor: str | None = None  # AuthenticAMD / GenuineIntel / ...
    family: int | None = None
    model_name: str | None = None
    numa_nodes: list[int] = field(default_factory=list)  # every node in /sys/devices/system/node
    node_cpus: dict[int, set[int]] = field(default_factory=dict)  # node -> its CPUs (empty: memory only)
    gpu_memory_nodes: dict[int, str] = field(default_factory=dict)  # node -> GPU bdf whose memory it is

    @property
    def cpu_nodes(self) -> list[int]:
        """Nodes with CPUs. Without per-node cpulists (old captures) every node counts."""
        if not self.node_cpus:
            return [n for n in self.numa_nodes if n not in self.gpu_memory_nodes]
        return sorted(n for n, cpus in self.node_cpus.items() if cpus and n not in self.gpu_memory_nodes)

    @property
    def memory_only_nodes(self) -> list[int]:
        return sorted(n for n in self.numa_nodes if n not in self.cpu_nodes)
