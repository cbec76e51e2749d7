"""Build an HGX-class sysfs tree (binary config space included) from a real capture.

Source of every value: ``corpus/lstopo/nvidia-dgx2h-16xv100-pex9781-hwloc-xml.txt`` — hwloc's XML
export of an NVIDIA DGX-2H (open-mpi/hwloc tests/hwloc/xml/nvidiaDGX2.xml @3b37b024): bus ids,
vendor/device/subsystem ids, revisions, class codes, the bridge nesting (Skylake-E root ports 8086:2030
→ PLX PEX9781/9797 → PEX9781 → GPUs), each host bridge's package (NUMA node) and ``pci_link_speed``.
What the XML does not carry, and where it comes from here:
- gen × width: hwloc stores GB/s only. 15.753846 GB/s is 8 GT/s x16 (the only PCIe ≤ Gen3 fit; PEX9781
  and V100 are Gen3 parts); 3.938462 is 8 GT/s x4; 1.0 is written as 2.5 GT/s x4 (2.5 x4 and 5 x2 give
  the same figure; nothing below depends on the choice).
- port types: root port for 8086:2030 (Intel's "Sky Lake-E PCI Express Root Port A"), then upstream /
  downstream by position below it, as in every PCIe switch.
- ACS: ``acs_redirect=False`` writes the ACS capability with control 0 (kernel without an IOMMU does
  not enable ACS); ``acs_redirect=True`` writes SV|RR|CR|UF, what Linux's pci_std_enable_acs() sets on
  every ACS-capable port once an IOMMU driver requests ACS, and what the PLX PEX8749 capture
  (corpus/lspci-vvv/arm-n1sdp-...) shows; then iommu groups are of type DMA.
- /proc/cpuinfo: vendor GenuineIntel, family 6, model 85 from the XML's CPU info.
"""

import os
import re
import struct
import xml.etree.ElementTree as ET

XML = os.path.join(
    os.path.dirname(__file__), "fixtures", "corpus", "lstopo", "nvidia-dgx2h-16xv100-pex9781-hwloc-xml.txt"
)

_SPEED = {15.753846: (3, 16), 3.938462: (3, 4), 1.0: (1, 4)}


def _config(vendor, device, svendor, sdevice, rev, cls, prog, is_bridge, sec_bus, port_type, link, acs):
    b = bytearray(4096)
    struct.pack_into("<HHHH", b, 0, vendor, device, 0x0406, 0x0010)
    b[8], b[9], b[0x0A], b[0x0B] = rev, prog, cls & 0xFF, cls >> 8
    b[0x0E] = 1 if is_bridge else 0
    if is_bridge:
        b[0x19] = sec_bus
    else:
        struct.pack_into("<HH", b, 0x2C, svendor, sdevice)
    b[0x34] = 0x68
    b[0x68], b[0x69] = 0x10, 0x00
    struct.pack_into("<H", b, 0x6A, port_type << 4 | 2)
    gen, width = link
    struct.pack_into("<I", b, 0x74, gen | width << 4)
    struct.pack_into("<H", b, 0x7A, gen | width << 4)
    if acs is not None:
        struct.pack_into("<I", b, 0x100, 0x000D | 1 << 16)
        struct.pack_into("<HH", b, 0x104, 0x5F, acs)
    return bytes(b)


def build_dgx2h(dest: str, acs_redirect: bool = False) -> dict:
    with open(XML) as f:
        text = "".join(f.readlines()[3:])  # the corpus adds three '#' provenance lines
    root = ET.fromstring(text[text.index("<topology") :] if "<!DOCTYPE" in text else text)
    devs_dir = os.path.join(dest, "sys/bus/pci/devices")
    os.makedirs(devs_dir)
    made = {}

    def emit(obj, path, parent_busid, numa, parent_type):
        busid = obj.get("pci_busid")
        m = re.match(
            r"^([0-9a-f]{4}) \[([0-9a-f]{4}):([0-9a-f]{4})\] \[([0-9a-f]{4}):([0-9a-f]{4})\] ([0-9a-f]{2}) ([0-9a-f]{2})",
            obj.get("pci_type"),
        )
        cls, ven, dev, sven, sdev, rev, prog = (int(x, 16) for x in m.groups())
        is_bridge = obj.get("type") == "Bridge"
        speed = round(float(obj.get("pci_link_speed")), 6)
        link = _SPEED.get(speed, (1, 1))
        if is_bridge:
            port_type = 4 if ven == 0x8086 else (6 if parent_type == 5 else 5)
        else:
            port_type = 0
        sec = int(re.match(r"^[0-9a-f]{4}:\[([0-9a-f]{2})", obj.get("bridge_pci")).group(1), 16) if is_bridge else 0
        acs = None
        if is_bridge and port_type in (4, 6):
            acs = 0b0011101 if acs_redirect else 0
        d = os.path.join(path, busid)
        os.makedirs(d)
        files = {
            "class": f"0x{cls:04x}{prog:02x}",
            "vendor": f"0x{ven:04x}",
            "device": f"0x{dev:04x}",
            "subsystem_vendor": f"0x{sven:04x}",
            "subsystem_device": f"0x{sdev:04x}",
            "revision": f"0x{rev:02x}",
            "numa_node": str(numa),
            "current_link_speed": f"{[2.5, 5.0, 8.0][link[0] - 1]} GT/s PCIe",
            "current_link_width": str(link[1]),
        }
        for k, v in files.items():
            with open(os.path.join(d, k), "w") as f:
                f.write(v + "\n")
        with open(os.path.join(d, "config"), "wb") as f:
            f.write(_config(ven, dev, sven, sdev, rev, cls, prog, is_bridge, sec, port_type, link, acs))
        rel = os.path.relpath(d, devs_dir)
        os.symlink(rel, os.path.join(devs_dir, busid))
        made[busid] = {"parent": parent_busid, "numa": numa, "class": cls, "vendor": ven, "device": dev}
        for child in obj.findall("object"):
            if child.get("pci_busid"):
                emit(child, d, busid, numa, port_type)

    for pkg in root.iter("object"):
        if pkg.get("type") != "Package":
            continue
        numa = int(pkg.find("object[@type='NUMANode']").get("os_index"))
        for hb in pkg.findall("object[@type='Bridge']"):
            rng = re.match(r"^([0-9a-f]{4}):\[([0-9a-f]{2})", hb.get("bridge_pci"))
            base = os.path.join(dest, f"sys/devices/pci{rng.group(1)}:{rng.group(2)}")
            os.makedirs(base, exist_ok=True)
            for child in hb.findall("object"):
                if child.get("pci_busid"):
                    emit(child, base, None, numa, None)
    os.makedirs(os.path.join(dest, "proc"))
    with open(os.path.join(dest, "proc/cpuinfo"), "w") as f:
        f.write(
            "processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 85\n"
            "model name\t: Intel(R) Xeon(R) Platinum 8174 CPU @ 3.10GHz\n"
        )
    for n in (0, 1):
        os.makedirs(os.path.join(dest, f"sys/devices/system/node/node{n}"))
    if acs_redirect:
        os.makedirs(os.path.join(dest, "sys/class/iommu/dmar0"))
        for i, busid in enumerate(sorted(made)):
            g = os.path.join(dest, f"sys/kernel/iommu_groups/{i}")
            os.makedirs(os.path.join(g, "devices"))
            with open(os.path.join(g, "type"), "w") as f:
                f.write("DMA\n")
            dev_path = os.path.realpath(os.path.join(devs_dir, busid))
            os.symlink(os.path.relpath(g, dev_path), os.path.join(dev_path, "iommu_group"))
        with open(os.path.join(dest, "proc/cmdline"), "w") as f:
            f.write("intel_iommu=on\n")
    return made
