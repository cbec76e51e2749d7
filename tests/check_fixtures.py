"""Node trees for what the project's machines lack, built on the GPU machine's real snapshot with
the files that would differ replaced. Each value below names its source.

- nvidia-fs loaded: /proc/modules line in the kernel's format (name size refcount deps state addr
  taint, as in the GPU machine's own /proc/modules for nvidia); stats text = the real capture
  corpus/nvfs-stats/stelline-gds1.14-nvfs2.25.7-after-gdsio-write.txt (driver 2.25.7, GDS 1.14.0.31);
  /proc/driver/nvidia-fs/version "version: 2.25" (format "%s: %u.%u", gds-nvidia-fs src/nvfs-proc.c);
  /dev/nvidia-fs0..15 (max_devices default 16, src/nvfs-core.c); modules "wekafsio: 1" (the static
  entry that is all an idle node shows, gds-nvidia-fs issue #87).
- GDS-aware nvme: the kallsyms line of the nvme module's export, in the GPU machine's kallsyms line
  format ("<addr> t <name>\t[<module>]"), symbol name from gds-nvidia-fs src/nvfs-dma.c modules_list.
- P2PDMA-ready: CONFIG_PCI_P2PDMA=y, p2pdma_pgmap_ops / pci_p2pdma_add_resource in kallsyms (NVIDIA
  troubleshooting guide §14.1), RegistryDwords "RMForceStaticBar1=1;RmForceDisableIomapWC=1;" in the
  params line format of the real file (§14.3), nvme_core multipath=N.
- IOMMU translating: iommu group type "DMA-FQ" (kernel Documentation/ABI/testing/sysfs-kernel-iommu_groups).
"""

import gzip
import os
import re
import shutil
import tarfile

HERE = os.path.dirname(os.path.abspath(__file__))
H200 = os.path.join(HERE, "fixtures", "snapshots", "h200-vm-2026-11-29.tar.gz")
NVFS_STATS = os.path.join(HERE, "fixtures", "corpus", "nvfs-stats", "stelline-gds1.14-nvfs2.25.7-after-gdsio-write.txt")


def unpack_h200(dest: str) -> str:
    """The committed GPU-machine snapshot (our own, trusted file) unpacked as a tree to edit."""
    return unpack(H200, dest)


def unpack(archive: str, dest: str) -> str:
    """A committed tree (our own, trusted file) unpacked to edit. Links to absolute paths and
    proc/self are left out: they point at the host. tarfile's extraction filters do not exist on
    Debian 12's Python 3.11.2, so members are chosen here instead."""
    kw = {"filter": "fully_trusted"} if hasattr(tarfile, "fully_trusted_filter") else {}
    with tarfile.open(archive) as t:
        members = [
            m for m in t.getmembers() if not (m.issym() and (m.linkname.startswith("/") or m.name == "proc/self"))
        ]
        t.extractall(dest, members=members, **kw)
    return dest


def _write(root, path, text, mode="w"):
    p = os.path.join(root, path.lstrip("/"))
    os.makedirs(os.path.dirname(p), exist_ok=True)
    with open(p, mode) as f:
        f.write(text)


def _append(root, path, text):
    p = os.path.join(root, path.lstrip("/"))
    os.makedirs(os.path.dirname(p), exist_ok=True)
    with open(p, "a") as f:
        f.write(text)


def _corpus_body(path):
    with open(path) as f:
        return "".join(f.readlines()[3:])  # drop the three provenance lines


def add_device_nodes(root):
    for n in ("nvidiactl", "nvidia0", "nvidia-uvm"):
        _write(root, f"/dev/{n}", "")


def add_udev(root, dev="254:0"):
    _write(root, f"/run/udev/data/b{dev}", "E:ID_FS_USAGE=filesystem\nE:ID_FS_TYPE=ext4\n")


def add_nvidia_fs(root, rw_stats="0"):
    _append(root, "/proc/modules", "nvidia_fs 262144 0 - Live 0xffffffffc0a00000 (OE)\n")
    _write(root, "/sys/module/nvidia_fs/version", "2.25.7\n")
    _write(root, "/sys/module/nvidia_fs/initstate", "live\n")
    for p, v in (("rw_stats_enabled", rw_stats), ("peer_stats_enabled", "0"), ("max_devices", "16")):
        _write(root, f"/sys/module/nvidia_fs/parameters/{p}", v + "\n")
    _write(root, "/proc/driver/nvidia-fs/version", "version: 2.25\n")
    _write(root, "/proc/driver/nvidia-fs/devcount", "16\n")
    _write(root, "/proc/driver/nvidia-fs/modules", "wekafsio: 1\n")
    _write(root, "/proc/driver/nvidia-fs/stats", _corpus_body(NVFS_STATS))
    for i in range(16):
        _write(root, f"/dev/nvidia-fs{i}", "")


def add_kallsyms(root, *symbols):
    lines = ["0000000000000000 A gdsdiag_filtered_kallsyms\n"]
    for sym, mod in symbols:
        lines.append(f"ffffffffc0b00000 t {sym}\t[{mod}]\n" if mod else f"ffffffff81a00000 T {sym}\n")
    _write(root, "/proc/kallsyms", "".join(lines))


def set_p2pdma_ready(root):
    cfg = os.path.join(root, "proc/config.gz")
    text = gzip.decompress(open(cfg, "rb").read()).decode()
    text = text.replace("# CONFIG_PCI_P2PDMA is not set", "CONFIG_PCI_P2PDMA=y")
    with open(cfg, "wb") as f:
        f.write(gzip.compress(text.encode()))
    params = os.path.join(root, "proc/driver/nvidia/params")
    text = (
        open(params)
        .read()
        .replace('RegistryDwords: ""', 'RegistryDwords: "RMForceStaticBar1=1;RmForceDisableIomapWC=1;"')
    )
    with open(params, "w") as f:
        f.write(text)
    _write(root, "/sys/module/nvme_core/parameters/multipath", "N\n")


def set_iommu_translating(root, bdf="0000:00:06.0"):
    g = os.path.join(root, "sys/kernel/iommu_groups/7")
    os.makedirs(os.path.join(g, "devices"), exist_ok=True)
    _write(root, "/sys/kernel/iommu_groups/7/type", "DMA-FQ\n")
    dev = os.path.realpath(os.path.join(root, f"sys/bus/pci/devices/{bdf}"))
    link = os.path.join(dev, "iommu_group")
    if os.path.lexists(link):
        os.unlink(link)
    os.symlink(os.path.relpath(g, dev), link)


def set_cufile(root, text):
    _write(root, "/etc/cufile.json", text)


def copy_tree(src, dst):
    shutil.copytree(src, dst, symlinks=True)
    return dst


_SPEED_CODE = {2.5: 1, 5.0: 2, 8.0: 3, 16.0: 4, 32.0: 5, 64.0: 6}  # PCI_EXP_LNKSTA_CLS encodings


def set_link(root, bdf="0000:00:06.0", speed_gts=None, width=None):
    """A link that trained below its maximum, as the kernel shows it: the current_link_speed /
    current_link_width attributes print the PCIe capability's LnkSta register (drivers/pci/pci-sysfs.c
    current_link_speed_show), so both the attribute and LnkSta in the config file change."""
    dev = os.path.realpath(os.path.join(root, f"sys/bus/pci/devices/{bdf}"))
    if speed_gts is not None:
        _write(dev, "current_link_speed", f"{speed_gts:.1f} GT/s PCIe\n")
    if width is not None:
        _write(dev, "current_link_width", f"{width}\n")
    with open(os.path.join(dev, "config"), "rb") as f:
        cfg = bytearray(f.read())
    ptr = cfg[0x34] & 0xFC
    while ptr and cfg[ptr] != 0x10:  # walk the capability list to the PCI Express capability
        ptr = cfg[ptr + 1] & 0xFC
    assert ptr, f"{bdf}: no PCIe capability in its config file"
    sta = cfg[ptr + 0x12] | cfg[ptr + 0x13] << 8
    if speed_gts is not None:
        sta = sta & ~0xF | _SPEED_CODE[speed_gts]
    if width is not None:
        sta = sta & ~0x3F0 | width << 4
    cfg[ptr + 0x12], cfg[ptr + 0x13] = sta & 0xFF, sta >> 8
    with open(os.path.join(dev, "config"), "wb") as f:
        f.write(cfg)


UNTRACED = os.path.join(HERE, "fixtures", "untraced")
# "BDF (VVVV DDDD): nvme -> DRIVER", SPDK scripts/setup.sh's line for a function it rebinds
_SETUP_SH_LINE = re.compile(
    r"^([0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]) \(([0-9a-f]{4}) ([0-9a-f]{4})\): (\S+) -> (\S+)$"
)
# "BB:DD.F CCCC: VVVV:DDDD (rev RR)", `lspci -n`, and the driver the capture binds it to next
_LSPCI_N_LINE = re.compile(r"^\s*([0-9a-f]{2}:[0-9a-f]{2}\.[0-7]) 0108: ([0-9a-f]{4}):([0-9a-f]{4})", re.M)


def add_pci_function(root, bdf, class_code, vendor, device, driver):
    """A PCI function as sysfs shows it: /sys/devices/pciDDDD:BB/<bdf> with class, vendor, device and
    its driver link, and the /sys/bus/pci/devices/<bdf> link to it. Where it sits (a root-bus function
    of its own host bridge) is not from a capture: the rules that use this read only class and driver."""
    host = bdf[:7]
    dev = os.path.join(root, "sys", "devices", f"pci{host}", bdf)
    os.makedirs(dev, exist_ok=True)
    for attr, value in (("class", f"0x{class_code:06x}"), ("vendor", f"0x{vendor:04x}"), ("device", f"0x{device:04x}")):
        _write(root, f"/sys/devices/pci{host}/{bdf}/{attr}", value + "\n")
    drivers = os.path.join(root, "sys", "bus", "pci", "drivers", driver)
    os.makedirs(drivers, exist_ok=True)
    os.symlink(os.path.relpath(drivers, dev), os.path.join(dev, "driver"))
    bus = os.path.join(root, "sys", "bus", "pci", "devices")
    os.makedirs(bus, exist_ok=True)
    os.symlink(os.path.relpath(dev, bus), os.path.join(bus, bdf))


def add_bypassed_nvme(root):
    """The NVMe functions of tests/fixtures/untraced's captures, bound as the captures bind them:
    SPDK setup.sh's "nvme -> uio_pci_generic" lines (spdk/spdk#1887; setup.sh rebinds only class
    0x010802) and ssd-gpu-dma's SSD (`lspci -n` class 0108, 8086:f1a8, bound to vfio-pci; PR #23).
    Returns the BDFs added."""
    added = []
    with open(os.path.join(UNTRACED, "spdk-1887-setup-sh.txt")) as f:
        for line in f:
            m = _SETUP_SH_LINE.match(line.strip())
            if m and m.group(4) == "nvme":
                add_pci_function(root, m.group(1), 0x010802, int(m.group(2), 16), int(m.group(3), 16), m.group(5))
                added.append(m.group(1))
    with open(os.path.join(UNTRACED, "ssd-gpu-dma-23-vfio.txt")) as f:
        text = f.read()
    m = _LSPCI_N_LINE.search(text)
    assert m and "/sys/bus/pci/drivers/vfio-pci/new_id" in text
    bdf = f"0000:{m.group(1)}"
    add_pci_function(root, bdf, 0x010802, int(m.group(2), 16), int(m.group(3), 16), "vfio-pci")
    added.append(bdf)
    return added


# "NVMe BDF VVVV DDDD NUMA DRIVER …", SPDK `scripts/setup.sh status`'s row of an NVMe function
_STATUS_ROW = re.compile(
    r"^NVMe\s+([0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7])\s+([0-9a-f]{4})\s+([0-9a-f]{4})\s+\S+\s+(\S+)"
)


def add_kernel_nvme(root):
    """The NVMe functions of spdk/spdk#1691's `setup.sh status` on the kernel's nvme driver (the
    table's Driver column), those whose address the tree does not hold already (0000:00:06.0 is the GPU
    machine's GPU). Returns the BDFs added."""
    added = []
    with open(os.path.join(UNTRACED, "spdk-1691-setup-sh-status.txt")) as f:
        for line in f:
            m = _STATUS_ROW.match(line)
            if m and not os.path.lexists(os.path.join(root, "sys", "bus", "pci", "devices", m.group(1))):
                add_pci_function(root, m.group(1), 0x010802, int(m.group(2), 16), int(m.group(3), 16), m.group(4))
                added.append(m.group(1))
    return added
