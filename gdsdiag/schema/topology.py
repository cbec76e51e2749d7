"""``gdsdiag.topology/1`` (docs/json.md)."""

from __future__ import annotations

from typing import TypedDict


class Cpu(TypedDict):
    vendor: str | None
    family: int | None
    model: str | None
    numa_nodes: list[int]
    cpu_nodes: list[int]
    memory_only_nodes: list[int]
    gpu_memory_nodes: dict[str, str]


class Iommu(TypedDict):
    mode: str
    units: list[str]
    cmdline: dict[str, str]
    group_types: dict[str, str]
    evidence: list[str]


class HostBridge(TypedDict):
    id: str
    numa_node: int | None
    vendor: str | None
    device: str | None


class Link(TypedDict):
    speed_gts: float | None
    width: int | None
    max_speed_gts: float | None
    max_width: int | None
    gbytes_per_s: float | None


class AcsBits(TypedDict):
    SV: bool
    TB: bool
    RR: bool
    CR: bool
    UF: bool
    EC: bool
    DT: bool


class Acs(TypedDict):
    control: AcsBits
    redirect: bool


class Pcie(TypedDict):
    max_payload: int
    max_read_request: int
    relaxed_ordering: bool


Device = TypedDict(
    "Device",
    {
        "bdf": str,
        "host_bridge": str,
        "parent": "str | None",
        "role": str,
        "label": "str | None",
        "names": "list[str]",
        "model": "str | None",
        "class": "str | None",  # a keyword: hence the functional form
        "vendor": "str | None",
        "device": "str | None",
        "subsystem_vendor": "str | None",
        "subsystem_device": "str | None",
        "driver": "str | None",
        "numa_node": "int | None",
        "numa_source": "str | None",
        "gpu_numa_node": "int | None",
        "iommu_group": "str | None",
        "port_type": "str | None",
        "switch": "str | None",
        "link": Link,
        "acs": "Acs | None",
        "acs_known": bool,
        "config_bytes": "int | None",
        "pcie": "Pcie | None",
        "problems": "list[str]",
    },
)


class NvLink(TypedDict):
    links: int
    label: str
    via_nvswitch: bool
    p2p_ok: bool | None
    source: str


class NvLinkPair(NvLink):
    a: str
    b: str


class NvLinkGpu(TypedDict):
    bdf: str
    links_active: int
    links_inactive: int
    to_nvswitch: int
    remote_types: dict[str, int]
    version: int | None


class NvLinkInfo(TypedDict):
    source: str
    pairs: list[NvLinkPair]
    gpus: list[NvLinkGpu]
    problems: list[str]


class NoNvLink(TypedDict):
    """``nvlink`` when no NVLink source was available."""

    source: None
    note: str


class Hop(Link):
    bdf: str
    device: str
    below_max: bool


class Pair(TypedDict):
    a: str
    a_label: str | None
    b: str
    b_label: str | None
    b_role: str
    nvidia_smi: str
    pcie: str
    nccl: str
    nvlink: NvLink | None
    path: list[str]
    narrowest_link: Hop | None
    below_max_links: list[Hop]
    acs_redirect_bridges: list[str]
    acs_unknown_bridges: list[str]
    p2pdma_map: str
    p2p: str
    reasons: list[str]


class _Route(TypedDict):
    nic: str
    gpu: str
    direct: str
    policy: str
    via_gpu: str | None
    link: str | None


class DynamicRoute(_Route, total=False):
    nic_label: str | None
    gpu_label: str | None
    via_label: str | None


class Finding(TypedDict):
    id: str
    severity: str
    title: str
    evidence: str
    fix: str


class _Cell(TypedDict):
    row: str
    column: str
    nvidia_smi: str | None  # None: nvidia-smi's row could not be read (cross_check_input.unread says why)
    gdsdiag: str | None
    agree: bool | None


class CrossCheckCell(_Cell, total=False):
    a: str | None
    b: str | None
    note: str


class _NumaRow(TypedDict):
    row: str
    nvidia_smi: int | None
    gdsdiag: int | None
    agree: bool | None


class NumaRow(_NumaRow, total=False):
    note: str


class CrossCheckInput(TypedDict):
    unread: list[str]  # every line or cell of the nvidia-smi text not read, with its line number
    split_glued: list[str]  # fields nvidia-smi printed with no space between them, read apart
    other_node: list[str]  # why the text is not this node's (then no cell is compared)
    numa: list[NumaRow]  # per GPU row: nvidia-smi's NUMA Affinity (CPU node) against gdsdiag's
    compared: int
    not_compared: int


class _TopologyDoc(TypedDict):
    schema: str
    source: str
    cpu: Cpu
    iommu: Iommu
    host_bridges: list[HostBridge]
    devices: list[Device]
    nvlink: NvLinkInfo | NoNvLink
    pairs: list[Pair]
    dynamic_routing: list[DynamicRoute]
    findings: list[Finding]


class TopologyDoc(_TopologyDoc, total=False):
    cross_check: list[CrossCheckCell]  # only with --cross-check / --nvidia-smi
    cross_check_input: CrossCheckInput  # with cross_check
