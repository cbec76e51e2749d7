"""Link reader records into a ``Topology``: parents, bridge roles, physical switches, labels."""

from __future__ import annotations

from ..pci.config_space import PortType
from ..pci.records import CpuInfo, HostBridge, IommuInfo, PciFunction
from .model import BRIDGE_ROLES, Device, Role, Topology, role_from_class

BROADCOM = 0x1000

_PORT_ROLE = {
    PortType.ROOT_PORT: Role.ROOT_PORT,
    PortType.UPSTREAM: Role.SWITCH_UPSTREAM,
    PortType.DOWNSTREAM: Role.SWITCH_DOWNSTREAM,
}


def bcm_switch_gen(fn: PciFunction, level: int) -> int:
    """Broadcom PEX Gen4/Gen5 switches that present as two hierarchy levels (NCCL's getBcmGen,
    src/graph/topo.cc): vendor 0x1000, device 0xc010 + subsystem 0x1000:0xa0xx is Gen4; device
    0xc030 + subsystem 0x1000:(level<<12) is Gen5, level 0 the top and 1 the inner level."""
    v, d, sv, sd = fn.vendor, fn.device, fn.subsystem_vendor, fn.subsystem_device
    if v is None or d is None or sv is None or sd is None:
        return 0
    ident = v << 48 | d << 32 | sv << 16 | sd
    if ident & ~0xFFF == 0x1000C0101000A000:
        return 4
    if ident & ~0xFFF == (0x1000C03010000000 | level * 0x1000):
        return 5
    return 0


def build(
    functions: list[PciFunction],
    host_bridges: dict[str, HostBridge],
    iommu: IommuInfo,
    cpu: CpuInfo,
    names: dict[str, list[str]] | None = None,
    gpu_minors: dict[str, int] | None = None,
    models: dict[str, str] | None = None,
    source: str = "",
) -> Topology:
    devices: dict[str, Device] = {}
    for fn in sorted(functions, key=lambda f: f.bdf):
        role = role_from_class(fn.class_code, fn.vendor)
        if role is None:
            # no class code: the NVIDIA driver's own GPU list still says what it is
            role = Role.GPU if fn.nvidia_driver_gpu else Role.OTHER
        devices[fn.bdf] = Device(fn=fn, role=role)
    problems: list[str] = []
    for dev in devices.values():
        pb = dev.fn.parent_bdf
        if pb is None:
            continue
        parent = devices.get(pb)
        if parent is None:
            # The parent is on the device path but not listed (hidden or filtered by the kernel,
            # e.g. hwloc's 32intel64-2p8co2t+8ve tree): hang it under the nearest listed ancestor.
            up = next((devices[b] for b in dev.fn.upstream_bdfs[1:] if b in devices), None)
            where = (
                f"attached to {up.bdf}, the nearest listed ancestor" if up else "treated as attached to the host bridge"
            )
            problems.append(f"{dev.bdf}: parent {pb} not listed in /sys/bus/pci/devices; {where}")
            if up is None:
                dev.fn.parent_bdf = None
                continue
            parent = up
            dev.fn.parent_bdf = up.bdf
        dev.parent = parent
        parent.children.append(dev)
        if parent.role not in BRIDGE_ROLES:
            # A function with children is a bridge whatever its class code says.
            parent.role = Role.BRIDGE
    problems += _break_cycles(devices)
    for hb in {d.fn.host_bridge for d in devices.values()}:
        host_bridges.setdefault(hb, HostBridge(id=hb))
    _assign_bridge_roles(devices)
    _assign_switches(devices)
    _assign_labels(devices, names or {}, gpu_minors or {}, models or {})
    return Topology(devices=devices, host_bridges=host_bridges, iommu=iommu, cpu=cpu, source=source, problems=problems)


def _break_cycles(devices: dict[str, Device]) -> list[str]:
    """A parent chain that comes back on itself (crafted or corrupt input: a bridge whose secondary
    bus is an ancestor's bus, 01 -> 02 -> 01) made every walk up the tree loop forever. Each cycle
    is reported and cut above its lowest address, which is then treated as attached to the host bridge."""
    problems: list[str] = []
    done: set[str] = set()
    for dev in sorted(devices.values(), key=lambda d: d.bdf):
        path: list[Device] = []
        on_path: set[str] = set()
        d: Device | None = dev
        while d is not None and d.bdf not in done:
            if d.bdf in on_path:
                cycle = path[[x.bdf for x in path].index(d.bdf) :]
                cut = min(cycle, key=lambda x: x.bdf)
                problems.append(
                    "PCI hierarchy cycle "
                    + " -> ".join(x.bdf for x in cycle + [cycle[0]])
                    + f": the input is inconsistent; {cut.bdf} treated as attached to the host bridge"
                )
                if cut.parent is not None:  # (in a cycle every device has one)
                    cut.parent.children = [c for c in cut.parent.children if c is not cut]
                cut.parent, cut.fn.parent_bdf = None, None
                break
            path.append(d)
            on_path.add(d.bdf)
            d = d.parent
        done.update(on_path)
    return problems


def _assign_bridge_roles(devices: dict[str, Device]) -> None:
    # Config space says what a port is when we could read the PCIe capability; otherwise the
    # position decides: a bridge on the root bus is a root port, a bridge below a root port or a
    # downstream port is a switch's upstream port, and the bridges below that are its downstream ports.
    for dev in sorted(devices.values(), key=lambda d: len(d.ancestors())):
        if dev.role not in BRIDGE_ROLES:
            continue
        pt = dev.fn.port_type
        if pt in _PORT_ROLE:
            dev.role = _PORT_ROLE[pt]
            continue
        if pt in (PortType.PCIE_TO_PCI, PortType.PCI_TO_PCIE):
            dev.role = Role.BRIDGE
            continue
        p = dev.parent
        if p is None:
            # a bridge on a root bus is a root port; one whose upstream is missing from an lspci
            # excerpt is only known to be a bridge
            dev.role = Role.BRIDGE if dev.fn.placement_unknown else Role.ROOT_PORT
        elif p.role in (Role.ROOT_PORT, Role.SWITCH_DOWNSTREAM):
            dev.role = Role.SWITCH_UPSTREAM
        elif p.role == Role.SWITCH_UPSTREAM:
            dev.role = Role.SWITCH_DOWNSTREAM
        else:
            dev.role = Role.BRIDGE


def _assign_switches(devices: dict[str, Device]) -> None:
    for dev in sorted(devices.values(), key=lambda d: len(d.ancestors())):
        if dev.role == Role.SWITCH_UPSTREAM:
            dev.switch_id = dev.bdf
            # NCCL flattens Broadcom PEX Gen4/Gen5 parts whose inner level shows up as a second
            # switch below a downstream port: one physical switch, not two hops.
            above = dev.parent.parent if dev.parent and dev.parent.role == Role.SWITCH_DOWNSTREAM else None
            if above is not None and above.role == Role.SWITCH_UPSTREAM:
                gen = bcm_switch_gen(above.fn, 0)
                if gen and bcm_switch_gen(dev.fn, 1) == gen and dev.parent is not None:
                    dev.switch_id = above.switch_id
                    dev.parent.switch_id = above.switch_id
        elif dev.role == Role.SWITCH_DOWNSTREAM and dev.parent is not None:
            dev.switch_id = dev.switch_id or dev.parent.switch_id


def _assign_labels(
    devices: dict[str, Device], names: dict[str, list[str]], minors: dict[str, int], models: dict[str, str]
) -> None:
    gpus = sorted((d for d in devices.values() if d.role == Role.GPU), key=lambda d: d.bdf)
    # nvidia-smi numbers GPUs in PCI bus order; the driver's minor number is used when present
    # because that is what /dev/nvidiaN and the driver's own logs use.
    for i, g in enumerate(gpus):
        idx = minors.get(g.bdf, i)
        g.label = f"GPU{idx}"
        g.names.append(g.label)
        g.model = models.get(g.bdf) or g.fn.name
    for d in devices.values():
        extra = names.get(d.bdf, [])
        d.names.extend(n for n in extra if n not in d.names)
        if d.label is None:
            if d.role == Role.NVME:
                ctrl = [n for n in extra if n.startswith("nvme") and "n" not in n[4:]]
                d.label = ctrl[0] if ctrl else None
            elif d.role == Role.NIC:
                ib = [
                    n
                    for n in extra
                    if n.startswith(("mlx", "bnxt_re", "irdma", "rdma", "ib")) and not n.startswith("ibp")
                ]
                d.label = (ib or extra)[0] if ib or extra else None
            elif extra:
                d.label = extra[0]
        if d.model is None and d.fn.name:
            d.model = d.fn.name
