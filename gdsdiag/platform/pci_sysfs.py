"""Read PCI functions, IOMMU state, CPU facts and user-facing names from a sysfs/procfs tree.

Every function takes an ``FsRoot`` so a live node and a captured tree read the same way.
The hierarchy comes from the canonical device path, as NCCL's ``getPciPath`` and hwloc do:
``/sys/devices/pci0000:00/0000:00:01.1/0000:01:00.0`` means host bridge 0000:00 → 00:01.1 → 01:00.0.
"""

from __future__ import annotations

import re

from ..pci.config_space import decode
from ..pci.records import CpuInfo, HostBridge, IommuInfo, Link, PciFunction, bus_of
from .fsroot import AttrDir, FsRoot

# PCI domains are 16 bits on most hosts but Linux allows 32: Intel VMD puts its NVMe at
# 10000:xx:xx.x and so do some ARM and virtual hosts (hwloc's 2pa-pcidomain32bits tree).
BDF_RE = re.compile(r"^([0-9a-f]{4,8}):([0-9a-f]{2}):([0-9a-f]{2})\.([0-7])$")
HOST_RE = re.compile(r"^pci([0-9a-f]{4,8}):([0-9a-f]{2})$")
LOOKS_LIKE_BDF_RE = re.compile(r"^[0-9a-fA-F]+:[0-9a-fA-F]+:[0-9a-fA-F]+\.[0-9a-fA-F]+$")
# BDF_RE and HOST_RE as whole components of a path ("/" or the end on either side)
PATH_BDF_RE = re.compile(r"(?<![^/])([0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7])(?![^/])")
PATH_HOST_RE = re.compile(r"(?<![^/])pci([0-9a-f]{4,8}):([0-9a-f]{2})(?![^/])")
SPEED_RE = re.compile(r"(?<![0-9.])([0-9.]+)\s*GT/s")  # (a run is tried from its start only: linear)
NVIDIA = 0x10DE


def parse_link_speed(text: str | None) -> float | None:
    """'16.0 GT/s PCIe' / '2.5 GT/s' → 16.0; 'Unknown' or garbage → None."""
    if not text:
        return None
    m = SPEED_RE.search(text)
    try:
        return float(m.group(1)) if m else None
    except ValueError:
        return None


def parse_cpulist(text: str | None) -> set[int] | None:
    """'0-3,8,10-11' -> {0,1,2,3,8,10,11}; '' -> set(); garbage, or CPUs beyond bounded.MAX_CPUS
    (a 200-byte '0-4000000000' once took 23 GiB) -> None."""
    from ..bounded import MAX_CPUS, parse_ranges

    if text is None:
        return None
    got = parse_ranges(text.strip(), MAX_CPUS)
    return None if got is None else set(got)


def parse_cpumask(text: str | None) -> set[int] | None:
    """'0000,00000000,0000ffff' (32-bit words, most significant first) -> {0..15}; None for
    garbage or a mask wider than bounded.MAX_CPUS (read a digit at a time: linear)."""
    from ..bounded import MAX_CPUS, parse_hexmask

    if text is None:
        return None
    return parse_hexmask(text, MAX_CPUS)


def node_of_cpus(cpus: set[int] | None, node_cpus: dict[int, set[int]]) -> int | None:
    """The one CPU node whose CPUs the set touches; None when it spans several (no locality) or none."""
    if not cpus:
        return None
    hit = [n for n, c in node_cpus.items() if c and c & cpus]
    return hit[0] if len(hit) == 1 else None


def read_functions(
    fs: FsRoot, node_cpus: dict[int, set[int]] | None = None, nvidia_bdfs: set[str] | None = None
) -> tuple[list[PciFunction], dict[str, HostBridge]]:
    """``node_cpus`` (node -> CPUs) places functions without a numa_node file by their
    local_cpulist/local_cpus, as hwloc does; ``nvidia_bdfs`` (the driver's /proc list) names GPUs
    whose trees lack the vendor file."""
    functions: list[PciFunction] = []
    bridges: dict[str, HostBridge] = {}
    for name in fs.listdir("/sys/bus/pci/devices"):
        if not BDF_RE.match(name):
            if LOOKS_LIKE_BDF_RE.match(name):
                fs.problems.append(f"/sys/bus/pci/devices/{name}: not a PCI address gdsdiag can read; left out")
            continue
        try:
            real, attrs = fs.link_attrs(f"/sys/bus/pci/devices/{name}")
        except OSError as e:
            fs.problems.append(f"/sys/bus/pci/devices/{name}: {e}")
            continue
        with attrs:
            fn = _place(fs, attrs, name, real, node_cpus, nvidia_bdfs)
        if fn is None:
            continue
        functions.append(fn)
        if fn.host_bridge not in bridges:
            bridges[fn.host_bridge] = HostBridge(id=fn.host_bridge)
    flat = [f.bdf for f in functions if f.placement_unknown]
    if flat:
        fs.problems.append(
            f"{len(flat)} entries of /sys/bus/pci/devices ({', '.join(flat[:4])}{', ...' if len(flat) > 4 else ''}) "
            "are directories, not links into /sys/devices: where they attach (bridge, host bridge) is not known"
        )
    # The host bridge's identity for the kernel's p2pdma whitelist is function 00.0 on its root bus
    # (none where the bus is not known to be a root bus).
    by_bdf = {f.bdf: f for f in functions}
    nodes_of: dict[str, set[int]] = {hb: set() for hb in bridges}
    for f in functions:
        if f.numa_node is not None:
            nodes_of[f.host_bridge].add(f.numa_node)
    for hb in bridges.values():
        f0 = by_bdf.get(f"{hb.id}:00.0")
        if f0 is not None and not f0.placement_unknown:
            hb.vendor, hb.device = f0.vendor, f0.device
        nodes = nodes_of[hb.id]
        if len(nodes) == 1:
            hb.numa_node = nodes.pop()
        elif len(nodes) > 1:
            fs.problems.append(f"host bridge {hb.id}: functions report several NUMA nodes {sorted(nodes)}")
    return functions, bridges


def _place(
    fs: FsRoot,
    attrs: AttrDir,
    name: str,
    real: str,
    node_cpus: dict[int, set[int]] | None,
    nvidia_bdfs: set[str] | None,
) -> PciFunction | None:
    """The function at canonical path ``real``, placed under its host bridge; None (and a
    problem) when the path does not name it."""
    # every path component that is a whole PCI address / host bridge name, in one pass each
    chain = PATH_BDF_RE.findall(real)
    hosts = PATH_HOST_RE.findall(real)
    if not chain or chain[-1] != name:
        fs.problems.append(f"{name}: device path {real} does not end in its own address")
        return None
    if hosts:
        hb = "%s:%s" % hosts[-1]
    else:
        # Virtual buses (e.g. VMD, Hyper-V) have no pciDDDD:BB component: use the top function's bus.
        hb = bus_of(chain[0])
    fn = _read_attrs(attrs, real, name, hb, chain[-2] if len(chain) > 1 else None)
    fn.upstream_bdfs = list(reversed(chain[:-1]))
    if not real.startswith("/sys/devices/"):
        # The kernel makes every /sys/bus/pci/devices entry a link into /sys/devices, and that path is
        # all there is to say which bridge and host bridge a function is under. A plain directory
        # (hwloc's hand-trimmed nvidiagpunumanodes trees) says nothing: the bus above is not known to
        # be a root bus (two POWER9 GPUs at 0004:05 and 0004:06 sit below one PHB, root bus 0004:00).
        fn.placement_unknown = True
    if fn.numa_node is None and node_cpus:
        for attr, parse in (("local_cpulist", parse_cpulist), ("local_cpus", parse_cpumask)):
            node = node_of_cpus(parse(attrs.read_text(attr)), node_cpus)
            if node is not None:
                fn.numa_node, fn.numa_source = node, attr
                break
    if nvidia_bdfs and name in nvidia_bdfs:
        # the NVIDIA driver lists it under /proc/driver/nvidia/gpus: an NVIDIA GPU
        fn.nvidia_driver_gpu = True
        if fn.vendor is None:
            fn.vendor = NVIDIA
    return fn


def _nonneg(v: int | None) -> int | None:
    return None if v is None or v < 0 else v


def parse_pci_uevent(text: str | None) -> tuple[int, int, int, int, int] | None:
    """(class, vendor, device, subsystem vendor, subsystem device) from a PCI function's ``uevent``
    file, or None when it lacks any of them (then the five attribute files are read).

    One file instead of five, and the same values: the kernel prints ``PCI_CLASS=%04X``,
    ``PCI_ID=%04X:%04X`` and ``PCI_SUBSYS_ID=%04X:%04X`` from pdev->class, ->vendor, ->device,
    ->subsystem_vendor and ->subsystem_device (pci_uevent(), drivers/pci/pci-driver.c), the very
    fields the ``class``/``vendor``/``device``/``subsystem_*`` attributes print (pci_config_attr(),
    drivers/pci/pci-sysfs.c) -- after quirks, and for SR-IOV virtual functions, whose config header
    reads 0xffff, the same as the files. Every capture with both (the hwloc trees, the snapshots)
    agrees on every function (tests/test_pci_uevent.py)."""
    if not text:
        return None
    m = _UEVENT_IDS_RE.search(text)
    if m is not None and text.count("PCI_") == _UEVENT_PCI_KEYS:
        # the kernel's own layout: the three lines in a row, and no second copy of any of them
        cls, ven, dev, sven, sdev = m.groups()
        return _checked_ids((int(cls, 16), int(ven, 16), int(dev, 16), int(sven, 16), int(sdev, 16)))
    cls = ident = subsys = None
    for line in text.splitlines():
        key, _, val = line.partition("=")
        if key == "PCI_CLASS":
            cls = val
        elif key == "PCI_ID":
            ident = val
        elif key == "PCI_SUBSYS_ID":
            subsys = val
    if cls is None or ident is None or subsys is None:
        return None
    ven, _, dev = ident.partition(":")
    sven, _, sdev = subsys.partition(":")
    try:
        out = (int(cls, 16), int(ven, 16), int(dev, 16), int(sven, 16), int(sdev, 16))
    except ValueError:
        return None
    return _checked_ids(out)


# pci_uevent() (drivers/pci/pci-driver.c) prints PCI_CLASS, PCI_ID and PCI_SUBSYS_ID one after
# the other, then PCI_SLOT_NAME; MODALIAS holds no "PCI_". Four "PCI_" in all.
_UEVENT_IDS_RE = re.compile(
    r"^PCI_CLASS=([0-9A-F]{1,8})\nPCI_ID=([0-9A-F]{1,8}):([0-9A-F]{1,8})\n"
    r"PCI_SUBSYS_ID=([0-9A-F]{1,8}):([0-9A-F]{1,8})$",
    re.M,
)
_UEVENT_PCI_KEYS = 4


def _checked_ids(out: tuple[int, int, int, int, int]) -> tuple[int, int, int, int, int] | None:
    # anything the attribute files could not have printed (a hand-edited tree) reads them instead
    if out[0] > 0xFFFFFF or max(out[1:]) > 0xFFFF or min(out) < 0:
        return None
    return out


def _read_attrs(d: AttrDir, path: str, bdf: str, hb: str, parent: str | None) -> PciFunction:
    fn = PciFunction(bdf=bdf, host_bridge=hb, parent_bdf=parent, source=path)
    ids = parse_pci_uevent(d.read_text("uevent"))
    if ids is not None:
        fn.class_code, fn.vendor, fn.device, fn.subsystem_vendor, fn.subsystem_device = ids
    else:
        fn.class_code = d.read_int("class", 16)
        fn.vendor = d.read_int("vendor", 16)
        fn.device = d.read_int("device", 16)
        fn.subsystem_vendor = d.read_int("subsystem_vendor", 16)
        fn.subsystem_device = d.read_int("subsystem_device", 16)
    fn.driver = d.readlink_name("driver")
    fn.numa_node = _nonneg(d.read_int("numa_node"))
    fn.numa_source = "numa_node" if fn.numa_node is not None else None
    fn.iommu_group = d.readlink_name("iommu_group")
    raw = d.read_bytes("config", note=True, limit=4096)
    pcie = None
    if raw is not None:
        fn.config_size = len(raw)
        fn.config = decode(raw)
        if len(raw) > 8:
            # the kernel's `revision` attribute prints this byte as it read it at enumeration;
            # taken from here, it saves a file per function (nothing reports it today)
            fn.revision = raw[8]
        pcie = fn.config.pcie
    if pcie is not None and pcie.link_speed_gts is not None and pcie.link_cap_speed_gts is not None:
        # current_link_speed/width print this capability's LnkSta and max_link_speed/width its
        # LnkCap (drivers/pci/pci-sysfs.c); with the capability in hand (root, or a full config
        # in a tree) the four files say nothing more, and skipping them is a third of the reads.
        fn.link = Link(pcie.link_speed_gts, pcie.link_width, pcie.link_cap_speed_gts, pcie.link_cap_width)
    else:
        fn.link = Link(
            speed_gts=parse_link_speed(d.read_text("current_link_speed")),
            width=_nonneg(d.read_int("current_link_width")) or None,
            max_speed_gts=parse_link_speed(d.read_text("max_link_speed")),
            max_width=_nonneg(d.read_int("max_link_width")) or None,
        )
        # Old kernels (and hwloc's 2013 snapshots) lack current_link_* files: use LnkSta/LnkCap.
        if pcie is not None:
            if fn.link.speed_gts is None:
                fn.link.speed_gts, fn.link.width = pcie.link_speed_gts, pcie.link_width
            if fn.link.max_speed_gts is None:
                fn.link.max_speed_gts, fn.link.max_width = pcie.link_cap_speed_gts, pcie.link_cap_width
    if fn.config is not None and fn.config.secondary_bus is not None:
        fn.secondary_bus = fn.config.secondary_bus
    return fn


# --- IOMMU -----------------------------------------------------------------------------------

_CMDLINE_KEYS = ("intel_iommu", "amd_iommu", "iommu", "iommu.passthrough", "iommu.strict")


def read_iommu(fs: FsRoot) -> IommuInfo:
    info = IommuInfo()
    info.units = fs.listdir("/sys/class/iommu")
    cmdline = fs.read_text("/proc/cmdline") or ""
    for tok in cmdline.split():
        key, _, val = tok.partition("=")
        if key in _CMDLINE_KEYS:
            info.cmdline[key] = val
    for group in fs.listdir("/sys/kernel/iommu_groups"):
        gtype = fs.read_text(f"/sys/kernel/iommu_groups/{group}/type")
        if gtype:
            info.group_types[group] = gtype
        info.group_members[group] = fs.listdir(f"/sys/kernel/iommu_groups/{group}/devices")
    info.mode, info.evidence = classify_iommu(info)
    return info


def classify_iommu(info: IommuInfo) -> tuple[str, list[str]]:
    """off / passthrough / translated / mixed, from group types first, then the command line."""
    ev: list[str] = []
    types = set(info.group_types.values())
    if info.cmdline:
        ev.append("/proc/cmdline: " + " ".join(f"{k}={v}" for k, v in info.cmdline.items()))
    if types:
        ev.append(f"/sys/kernel/iommu_groups/*/type: {', '.join(sorted(types))}")
        translated = {t for t in types if t.startswith("DMA")}
        if translated and types - translated - {"blocked"}:
            return "mixed", ev
        if translated:
            return "translated", ev
        if types <= {"identity"}:
            return "passthrough", ev
        return "unknown", ev
    if info.group_members:
        ev.append("iommu groups exist but expose no type file (kernel < 5.11)")
        pt = info.cmdline.get("iommu") == "pt" or info.cmdline.get("iommu.passthrough") in ("1", "on", "y")
        return ("passthrough" if pt else "unknown"), ev
    if info.units:
        ev.append(f"/sys/class/iommu: {', '.join(info.units)} but no groups")
        return "unknown", ev
    ev.append("no /sys/class/iommu units and no /sys/kernel/iommu_groups")
    return "off", ev


# --- CPU / NUMA --------------------------------------------------------------------------------


def read_cpu(fs: FsRoot) -> CpuInfo:
    cpu = CpuInfo()
    text = fs.read_text("/proc/cpuinfo") or ""
    for line in text.splitlines():
        key, _, val = line.partition(":")
        key, val = key.strip(), val.strip()
        if key == "vendor_id" and cpu.vendor is None:
            cpu.vendor = val
        elif key == "cpu family" and cpu.family is None:
            from ..bounded import ascii_int

            cpu.family = ascii_int(val, 1 << 16)
        elif key == "model name" and cpu.model_name is None:
            cpu.model_name = val
        if cpu.vendor and cpu.family is not None and cpu.model_name:
            break
    for n in fs.listdir("/sys/devices/system/node"):
        m = re.match(r"^node([0-9]{1,5})$", n)  # ASCII, bounded: a node number, not 5,000 digits
        if m:
            node = int(m.group(1))
            cpu.numa_nodes.append(node)
            cpus = parse_cpulist(fs.read_text(f"/sys/devices/system/node/{n}/cpulist"))
            if cpus is not None:
                cpu.node_cpus[node] = cpus
    cpu.numa_nodes.sort()
    cpu.gpu_memory_nodes = read_gpu_memory_nodes(fs)
    return cpu


def read_gpu_memory_nodes(fs: FsRoot) -> dict[int, str]:
    """node -> GPU bdf, from /proc/driver/nvidia/gpus/<bdf>/numa_status ('Node: 255'): the NUMA
    node that is the GPU's own memory on coherent platforms (POWER9 + V100, Grace Hopper, GB200)."""
    out: dict[int, str] = {}
    for bdf in fs.listdir("/proc/driver/nvidia/gpus"):
        m = re.search(
            r"^Node:[ \t]*([0-9]{1,5})\b", fs.read_text(f"/proc/driver/nvidia/gpus/{bdf}/numa_status") or "", re.M
        )
        if m:
            out[int(m.group(1))] = bdf.lower()
    return out


# --- names users know -------------------------------------------------------------------------


def owner_bdf(fs: FsRoot, link: str) -> str | None:
    """The PCI function a class device (or a block device) belongs to: the last PCI address on
    its canonical path. virtio and some drivers hang the class device below a child of the
    function (.../0000:00:03.0/virtio2)."""
    try:
        return last_bdf(fs.resolve(link))
    except OSError:
        return None


def last_bdf(path: str) -> str | None:
    bdfs = [c for c in path.split("/") if BDF_RE.match(c)]
    return bdfs[-1] if bdfs else None


def read_names(fs: FsRoot) -> dict[str, list[str]]:
    """bdf → names: nvme controllers and namespaces, netdevs, RDMA devices, NVIDIA minors."""
    names: dict[str, list[str]] = {}

    def add(cls_dir: str, pattern: str | None = None) -> dict[str, list[str]]:
        found: dict[str, list[str]] = {}
        for n in fs.listdir(cls_dir):
            if pattern and not re.match(pattern, n):
                continue
            bdf = owner_bdf(fs, f"{cls_dir}/{n}/device")
            if bdf:
                found.setdefault(bdf, []).append(n)
        return found

    for bdf, ctrls in add("/sys/class/nvme", r"^nvme\d+$").items():
        for c in ctrls:
            names.setdefault(bdf, []).append(c)
            nss = [n for n in fs.listdir(f"/sys/class/nvme/{c}") if re.match(rf"^{c}(c\d+)?n\d+$", n)]
            names[bdf].extend(nss)
    # Kernels before /sys/class/nvme (3.x; hwloc's 32em64t-2n8c+1mic tree) hang the namespace's block
    # device straight under the PCI function: /sys/class/block/nvme0n1 is then the only name. On newer
    # kernels the same namespace is already listed above (or, multipathed, is under no function).
    # The entry's own path places it (as hwloc does), not its 'device' link: in that tree the link was
    # copied from another machine and names 0000:01:00.0, a function the tree does not have.
    for n in fs.listdir("/sys/class/block"):
        if re.match(r"^nvme\d+n\d+$", n):
            owner = owner_bdf(fs, f"/sys/class/block/{n}")
            if owner and n not in names.get(owner, []):
                names.setdefault(owner, []).append(n)
        elif re.match(r"^(vd|sd|xvd|hd)[a-z]+$", n):
            # a whole disk of another storage function (virtio-blk, SATA/SAS): the disk that holds /
            # on a VM (vda on the GPU machine) was left out of the tree (issue 46)
            owner = owner_bdf(fs, f"/sys/class/block/{n}")
            if owner and n not in names.get(owner, []):
                names.setdefault(owner, []).append(n)
    for cls in ("/sys/class/infiniband", "/sys/class/net"):
        for bdf, ns in add(cls).items():
            names.setdefault(bdf, []).extend(ns)
    return names


def _gpu_information(fs: FsRoot, pattern: str) -> dict[str, str]:
    """bdf → the first group of ``pattern`` in /proc/driver/nvidia/gpus/<bdf>/information."""
    out: dict[str, str] = {}
    for bdf in fs.listdir("/proc/driver/nvidia/gpus"):
        m = re.search(pattern, fs.read_text(f"/proc/driver/nvidia/gpus/{bdf}/information") or "")
        if m:
            out[bdf.lower()] = m.group(1).strip()
    return out


def read_nvidia_minors(fs: FsRoot) -> dict[str, int]:
    """bdf → 'Device Minor' from /proc/driver/nvidia/gpus/<bdf>/information."""
    return {b: int(v) for b, v in _gpu_information(fs, r"Device Minor:\s*([0-9]{1,9})\b").items() if BDF_RE.match(b)}


def read_nvidia_models(fs: FsRoot) -> dict[str, str]:
    return _gpu_information(fs, r"Model:\s*(.+)")
