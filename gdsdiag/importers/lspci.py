"""Import the lspci text customers send: ``lspci -tv`` trees and ``lspci -vvv`` / ``-vvxxx`` /
``-vvvxxxx`` device blocks, into the same ``PciFunction`` records the sysfs reader makes.

With a hex dump, config space is decoded exactly (``config_space.decode``); a 256-byte dump has no
extended capabilities, so ACS then comes from the ``ACSCtl:`` line. Without a dump the text lines
(``LnkCap``, ``LnkSta``, ``ACSCtl``, the Express port type, ``NUMA node``) are used. Roles of
``-tv``-only devices come from their names, which is stated in each record's ``source``.
"""

from __future__ import annotations

import os
import re

from ..errors import GdsdiagError
from ..pci.config_space import AcsControl, PortType, decode
from ..pci.records import Link, PciFunction, bus_of

HEADER_RE = re.compile(r"^(?:([0-9a-fA-F]{4,8}):)?([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-7])\s+(.*?):\s+(.*)$")
HEX_RE = re.compile(r"^([0-9a-f]{2,3}):((?:\s[0-9a-f]{2}){1,16})\s*$")
# A root is the first thing on its line after tree drawing ('-[0000:00]-+-', ' +-[0000:20]-+-'); a
# bridge's bus range may carry the domain too in old lspci ('09.0-[0000:01]--'), which must not be
# taken for a root.
TREE_ROOT_RE = re.compile(r"^[ |+\\-]*\[([0-9a-f]{4,8}):([0-9a-f]{2})\]")
TREE_DEV_RE = re.compile(r"(?<=-)([0-9a-f]{2})\.([0-7])(?:-\[(?:[0-9a-f]{4,8}:)?([0-9a-f]{2})(?:-[0-9a-f]{2})?\])?")
ACS_NAMES = ("SrcValid", "TransBlk", "ReqRedir", "CmpltRedir", "UpstreamFwd", "EgressCtrl", "DirectTrans")

CLASS_NAMES = {
    "Host bridge": 0x060000,
    "PCI bridge": 0x060400,
    "VGA compatible controller": 0x030000,
    "3D controller": 0x030200,
    "Non-Volatile memory controller": 0x010802,
    "Ethernet controller": 0x020000,
    "Infiniband controller": 0x020700,
    "Network controller": 0x028000,
    "Bridge": 0x068000,
    "System peripheral": 0x088000,
}
VENDOR_NAMES = {
    "NVIDIA Corporation": 0x10DE,
    "Mellanox Technologies": 0x15B3,
    "Advanced Micro Devices": 0x1022,
    "Intel Corporation": 0x8086,
    "PLX Technology": 0x10B5,
    "Broadcom / LSI": 0x1000,
    "Samsung Electronics": 0x144D,
}
PORT_TEXT = {
    "Root Port": PortType.ROOT_PORT,
    "Upstream Port": PortType.UPSTREAM,
    "Downstream Port": PortType.DOWNSTREAM,
    "Endpoint": PortType.ENDPOINT,
    "Legacy Endpoint": PortType.LEGACY_ENDPOINT,
    "Root Complex Integrated Endpoint": PortType.RC_INTEGRATED,
}


def parse_acsctl(line: str) -> AcsControl | None:
    """'ACSCtl: SrcValid+ TransBlk- ReqRedir+ ...' → AcsControl; None unless all 7 flags present."""
    vals = []
    for name in ACS_NAMES:
        m = re.search(rf"\b{name}([+-])", line)
        if not m:
            return None
        vals.append(m.group(1) == "+")
    return AcsControl(*vals)


def dedent_paste(text: str) -> str:
    """The text without the indent a paste put in front of every line (a forum quote, a markdown
    list, ' 1a:00.0 3D controller: ...'): the whitespace all non-blank lines share is removed, so
    lspci's own column-0 headers and tree roots are at column 0 again. '#' lines (a capture's
    header) are left out of the count and kept as they are."""
    lines = text.splitlines()
    body = [ln for ln in lines if ln.strip() and not ln.startswith("#")]
    if not body:
        return text
    common = os.path.commonprefix([ln[: len(ln) - len(ln.lstrip())] for ln in body])
    if not common:
        return text
    return "\n".join(ln if ln.startswith("#") or not ln.strip() else ln[len(common) :] for ln in lines) + "\n"


def headless_acsctl_lines(text: str) -> list[AcsControl | None]:
    """The 'ACSCtl:' lines above the first device header of a '-vvv' excerpt: ports whose
    settings are known but whose address the excerpt cut off."""
    head: list[str] = []
    for raw in text.splitlines():
        if HEADER_RE.match(raw.rstrip()) and not raw.startswith((" ", "\t")):
            break
        head.append(raw)
    return acsctl_lines("\n".join(head))


def acsctl_lines(text: str) -> list[AcsControl | None]:
    """Every 'ACSCtl:' line of a text (e.g. 'lspci -vvv | grep ACSCtl')."""
    return [parse_acsctl(ln) for ln in text.splitlines() if "ACSCtl:" in ln]


def _speed(text: str) -> float | None:
    # a rate as lspci prints one (2.5, 5, 8 … 128): 'Speed 2.5.5GT/s' or 5,000 digits is unknown,
    # not a crash (issue 42)
    m = re.search(r"Speed\s+([0-9]{1,3}(?:\.[0-9]{1,3})?)GT/s", text)
    return float(m.group(1)) if m else None


def _width(text: str) -> int | None:
    # at most 2 ASCII digits (x1 … x32): 'Width x<5000 digits>' is unknown (it crashed int())
    m = re.search(r"Width\s+x([0-9]{1,2})(?![0-9])", text)
    return int(m.group(1)) if m else None


def _vendor_from_name(name: str) -> int | None:
    # case-insensitive: pci.ids spelled NVIDIA "nVidia Corporation" for years and old lspci
    # builds still print it
    low = name.lower()[:40]
    for k, v in VENDOR_NAMES.items():
        if k.lower() in low:
            return v
    return None


def parse_vvv(text: str) -> dict[str, PciFunction]:
    """Device blocks of 'lspci -vvv' (with or without hex dumps), keyed by full BDF."""
    out: dict[str, PciFunction] = {}
    cur: PciFunction | None = None
    hexbytes: dict[int, int] = {}
    saw_ext = False

    def finish():
        if cur is None:
            return
        # lspci run as root lists extended capabilities ('[100 v1] ...'): if ACS is not among
        # them the port has none, which is a known answer, not an unknown one.
        if saw_ext and cur.acs_text is None:
            cur.acs_absent = True
        if hexbytes:
            size = max(hexbytes) + 1
            data = bytes(hexbytes.get(i, 0) for i in range(size))
            cfg = decode(data)
            cur.config, cur.config_size = cfg, size
            cur.vendor, cur.device, cur.class_code = cfg.vendor, cfg.device, cfg.class_code
            if len(data) >= 0x30:
                cur.subsystem_vendor = data[0x2C] | data[0x2D] << 8
                cur.subsystem_device = data[0x2E] | data[0x2F] << 8
                cur.revision = data[8]
            if cfg.secondary_bus is not None:
                cur.secondary_bus = cfg.secondary_bus
            if cfg.pcie is not None:
                cur.link = Link(
                    cfg.pcie.link_speed_gts, cfg.pcie.link_width, cfg.pcie.link_cap_speed_gts, cfg.pcie.link_cap_width
                )

    for raw in text.splitlines():
        line = raw.rstrip()
        h = HEADER_RE.match(line)
        if h and not raw.startswith((" ", "\t")):
            finish()
            dom = (h.group(1) or "0000").lower()
            bdf = f"{dom}:{h.group(2).lower()}:{h.group(3).lower()}.{h.group(4)}"
            cls_name, name = h.group(5), h.group(6)
            name = re.sub(r"(?<!\s)\s*\((?:rev [0-9a-f]+|prog-if [^)]*\)?)\)", "", name).strip() or name
            cur = PciFunction(bdf=bdf, host_bridge="", parent_bdf=None, name=name, source="lspci -vvv")
            cls_name_clean = re.sub(r"(?<!\s)\s*\[[0-9a-f]{4}\]$", "", cls_name)
            mcls = re.search(r"\[([0-9a-f]{4})\]$", cls_name)
            cur.class_code = (int(mcls.group(1), 16) << 8) if mcls else CLASS_NAMES.get(cls_name_clean)
            mprog = re.search(r"prog-if ([0-9a-f]{2})", h.group(6))
            if cur.class_code is not None and mprog and not mcls:
                cur.class_code = (cur.class_code & ~0xFF) | int(mprog.group(1), 16)
            mid = re.search(r"\[([0-9a-f]{4}):([0-9a-f]{4})\]", name)
            if mid:
                cur.vendor, cur.device = int(mid.group(1), 16), int(mid.group(2), 16)
            else:
                cur.vendor = _vendor_from_name(name)
            hexbytes = {}
            saw_ext = False
            out[bdf] = cur
            continue
        if cur is None:
            continue
        s = line.strip()
        hx = HEX_RE.match(line)
        if hx:
            base = int(hx.group(1), 16)
            for i, b in enumerate(hx.group(2).split()):
                hexbytes[base + i] = int(b, 16)
        elif s.startswith("Bus: primary="):
            m = re.search(r"secondary=([0-9a-f]{2})", s)
            if m:
                cur.secondary_bus = int(m.group(1), 16)
        if re.match(r"Capabilities: \[[0-9a-f]{3} v\d+\]", s):
            saw_ext = True
        if s.startswith("Capabilities:") and " Express " in s:
            for k, v in PORT_TEXT.items():
                if re.search(rf"\) {k}\b", s):
                    cur.port_type_text = v
        elif s.startswith("LnkCap:"):
            cur.link.max_speed_gts, cur.link.max_width = _speed(s), _width(s)
        elif s.startswith("LnkSta:"):
            cur.link.speed_gts, cur.link.width = _speed(s), _width(s)
        elif s.startswith("ACSCtl:"):
            cur.acs_text = parse_acsctl(s)
        elif s.startswith("NUMA node:"):
            try:
                cur.numa_node = int(s.split(":", 1)[1])
            except ValueError:
                pass
        elif s.startswith("Kernel driver in use:"):
            cur.driver = s.split(":", 1)[1].strip()
    finish()
    return out


def parse_tree(text: str) -> list[PciFunction]:
    """'lspci -t[v]' ASCII tree → functions with parents. Children of a bridge start at the column
    where the first of them appears on the bridge's own line; later siblings share that column."""
    out: list[PciFunction] = []
    col_parent: dict[int, tuple[str, str, str | None]] = {}  # column -> (domain, bus, parent bdf)
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        root = TREE_ROOT_RE.search(line)
        if root:
            dom, bus = root.group(1), root.group(2)
            nxt = TREE_DEV_RE.search(line, root.end())
            if nxt:
                col_parent[nxt.start()] = (dom, bus, None)
                # lspci prints a root line from column 0; leading blanks on it are the paste's (a
                # markdown block, a prompt's indent): its children may sit that much further left
                lead = len(line) - len(line.lstrip(" "))
                if lead:
                    col_parent.setdefault(nxt.start() - lead, (dom, bus, None))
        pos = root.end() if root else 0
        while True:
            m = TREE_DEV_RE.search(line, pos)
            if not m:
                break
            ctx = col_parent.get(m.start())
            if ctx is None:
                raise GdsdiagError(
                    f"cannot place lspci tree entry at column {m.start()}: {line.strip()[:60]}",
                    "pass the output of 'lspci -tv' unchanged (no re-wrapping)",
                )
            dom, bus, parent = ctx
            bdf = f"{dom}:{bus}:{m.group(1)}.{m.group(2)}"
            name_m = re.match(r"\s{2}(\S.*)$", line[m.end() :])
            fn = PciFunction(
                bdf=bdf,
                host_bridge="",
                parent_bdf=parent,
                name=name_m.group(1).strip() if name_m else None,
                source="lspci -tv",
            )
            out.append(fn)
            if m.group(3):
                fn.secondary_bus = int(m.group(3), 16)
                nxt = TREE_DEV_RE.search(line, m.end())
                if nxt and line[m.end() : nxt.start()].strip("-+\\| ") == "":
                    col_parent[nxt.start()] = (dom, m.group(3), bdf)
                    pos = nxt.start()
                    continue
                break
            break
    return out


def _role_class_from_name(name: str | None) -> tuple[int | None, int | None]:
    """(class code, vendor) for a '-tv' name. Only the roles the analysis needs are inferred."""
    if not name:
        return None, None
    vendor = _vendor_from_name(name)
    low = name.lower()
    if vendor == 0x10DE:
        # an lspci whose pci.ids is older than the hardware prints 'NVIDIA Corporation Device 22a3': the
        # NVSwitch device ids (pci.ids: 1ac2 V100 gen1, 1af1 'GA100 [A100 NVSwitch]', 22a3 'GH100 [H100
        # NVSwitch]') are bridges, not GPUs (pplx-garden#2: four 'Device 22a3' were counted as GPUs)
        if "nvswitch" in low or re.search(r"\bdevice (1ac2|1af1|22a3)\b", low):
            return 0x068000, vendor
        if "ethernet" in low:
            return 0x020000, vendor  # nForce chipsets' own NIC ("CK804 Ethernet Controller")
        # NVIDIA also made chipsets (nForce/CK804/MCP): their memory controller, SMBus, IDE, SATA, ISA
        # and PCI bridge functions are not GPUs
        if not re.search(
            r"audio|usb|ucsi|bridge|serial|smbus|memory controller|\bide\b|sata|\bisa\b|\blpc\b"
            r"|coprocessor|nforce|\bmcp\d*\b",
            low,
        ):
            return 0x030200, vendor
        return 0x040300 if "audio" in low else 0x0C0000, vendor
    # A PCI function named as an SSD is an NVMe controller: SATA/SAS SSDs are not PCI functions (they sit
    # behind an AHCI/SAS controller). pci.ids names many without the word NVMe ("Intel Corporation SSD
    # 660P Series", "Silicon Motion SM2263EN/SM2263XT SSD Controller", "... Solid State Drive").
    if any(k in low for k in ("nvme", "non-volatile", " ssd", "solid state drive")) and "raid" not in low:
        # 'HighPoint SSD7540 ... NVMe RAID Controller' is the carrier's RAID function, not an NVMe controller
        return 0x010802, vendor
    if vendor == 0x15B3 or "connectx" in low or "ethernet" in low or "infiniband" in low:
        return 0x020000, vendor
    return None, vendor


# What a line of each kind of lspci text may be, beyond what the parsers take: a line matching
# none is named in the topology's problems (issue 22: an importer never drops a line in silence).
# (user@host: and the prompt's end matched by classes that cannot overlap: linear on any line)
_PROMPT_RE = re.compile(r"^\s*(?:[^\s@]+@[^\s:~]+[:~][^$#]*)?[$#]\s*(?:sudo\s+)?lspci\b|^\s*(?:sudo\s+)?lspci\s+-")
_MAX_NAMED = 20


def unread_lines(path: str, text: str, kind: str) -> list[str]:
    """'PATH: line N not read: ...' for each line of ``text`` that no parser of its kind takes:
    tree: neither a root nor a device entry nor a connector-only line; vvv: a non-indented line
    that is not a device header (indented lines belong to the block above them); grep: a line
    without 'ACSCtl:'. The first _MAX_NAMED are named, then a count."""
    out: list[str] = []
    seen_header = False
    for n, raw in enumerate(text.splitlines(), 1):
        s = raw.strip()
        if not s or raw.startswith("#") or _PROMPT_RE.match(raw):
            continue
        if kind == "vvv" and not seen_header:
            seen_header = bool(HEADER_RE.match(raw.rstrip())) and not raw.startswith((" ", "\t"))
        if kind == "vvv" and not seen_header and raw.startswith((" ", "\t")):
            # indented lines before the first device header belong to a device the excerpt cut off
            out.append(f"{path}: line {n} not read (before the first device header): {s[:120]!r}")
            continue
        if kind == "tree":
            ok = bool(TREE_ROOT_RE.search(raw) or TREE_DEV_RE.search(raw) or not s.strip("-+\\| `"))
        elif kind == "vvv":
            # indented lines belong to the block above; '-x' hex dump rows ('00: b5 13 ...') too
            ok = raw.startswith((" ", "\t")) or bool(HEADER_RE.match(raw.rstrip()) or HEX_RE.match(raw.rstrip()))
        elif kind == "grep":
            ok = "ACSCtl:" in raw
        else:
            ok = False
        if not ok:
            out.append(f"{path}: line {n} not read: {s[:120]!r}")
    if len(out) > _MAX_NAMED:
        out = out[:_MAX_NAMED] + [f"{path}: {len(out) - _MAX_NAMED} more lines not read"]
    return out


def _on_root_bus(f: PciFunction) -> bool:
    """What in lspci text shows a function's bus is a root bus: bus 00, a host bridge function
    (class 06 00), a root port or root-complex endpoint (PCIe capability), or a name that says so."""
    if f.bus == 0 or (f.class_code is not None and f.class_code >> 8 == 0x0600):
        return True
    if f.port_type in (PortType.ROOT_PORT, PortType.RC_INTEGRATED, PortType.RC_EVENT_COLLECTOR):
        return True
    return bool(f.name and re.search(r"Root (?:Port|Complex)", f.name))


def merge_functions(tree_fns: list[PciFunction], details: dict[str, PciFunction]) -> list[PciFunction]:
    """The ``-tv`` tree's functions with the ``-vvv`` blocks' detail laid over them (roles of tree-only
    functions inferred from their names); each function's parent and host bridge set."""
    if tree_fns:
        fns = []
        for t in tree_fns:
            d = details.get(t.bdf)
            if d is not None:
                d.parent_bdf, d.name = t.parent_bdf, d.name or t.name
                fns.append(d)
            else:
                t.class_code, t.vendor = _role_class_from_name(t.name)
                if t.secondary_bus is not None:
                    t.class_code = 0x060400
                t.source = "lspci -tv (role inferred from the device name)"
                fns.append(t)
    else:
        fns = list(details.values())
        by_sec = {(f.domain, f.secondary_bus): f for f in fns if f.secondary_bus is not None}
        roots = {(f.domain, f.bus) for f in fns if _on_root_bus(f)}
        for f in fns:
            parent = by_sec.get((f.domain, f.bus))
            f.parent_bdf = parent.bdf if parent is not None and parent is not f else None
            # without a tree, a function whose upstream bridge is not in the text sits on its own
            # bus only if something says that bus is a root bus; otherwise its place is unknown
            f.placement_unknown = f.parent_bdf is None and (f.domain, f.bus) not in roots
    by_bdf = {f.bdf: f for f in fns}
    for f in fns:
        top = f
        seen = set()
        while top.parent_bdf and top.parent_bdf in by_bdf and top.bdf not in seen:
            seen.add(top.bdf)
            top = by_bdf[top.parent_bdf]
        f.host_bridge = bus_of(top.bdf)
    return fns
