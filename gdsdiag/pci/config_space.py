"""Decode PCI configuration space bytes: the capability lists, the PCIe capability and ACS.

Pure functions over ``bytes``; callers read the bytes (sysfs ``config`` or an lspci hex dump).
Offsets and bit positions follow the PCI Express Base Specification as mirrored by the kernel's
``include/uapi/linux/pci_regs.h`` (PCI_EXP_*, PCI_ACS_*). Every walk is bounded and detects loops,
so a malformed or hostile dump yields ``None`` plus a reason, never an exception.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..schema import topology as schema

CAP_ID_PCIE = 0x10
EXT_CAP_ID_ACS = 0x000D
STD_CONFIG_SIZE = 256
EXT_CONFIG_SIZE = 4096


class PortType(str, Enum):
    """PCIe Capabilities register bits 7:4 (PCI_EXP_FLAGS_TYPE)."""

    ENDPOINT = "endpoint"
    LEGACY_ENDPOINT = "legacy_endpoint"
    ROOT_PORT = "root_port"
    UPSTREAM = "switch_upstream"
    DOWNSTREAM = "switch_downstream"
    PCIE_TO_PCI = "pcie_to_pci_bridge"
    PCI_TO_PCIE = "pci_to_pcie_bridge"
    RC_INTEGRATED = "rc_integrated_endpoint"
    RC_EVENT_COLLECTOR = "rc_event_collector"
    UNKNOWN = "unknown"


_PORT_TYPES = {
    0: PortType.ENDPOINT,
    1: PortType.LEGACY_ENDPOINT,
    4: PortType.ROOT_PORT,
    5: PortType.UPSTREAM,
    6: PortType.DOWNSTREAM,
    7: PortType.PCIE_TO_PCI,
    8: PortType.PCI_TO_PCIE,
    9: PortType.RC_INTEGRATED,
    10: PortType.RC_EVENT_COLLECTOR,
}

# Link speed encodings (PCI_EXP_LNKCAP_SLS_*): GT/s per lane.
LINK_SPEED_GTS = {1: 2.5, 2: 5.0, 3: 8.0, 4: 16.0, 5: 32.0, 6: 64.0}


def lane_gbytes_per_s(gts: float) -> float:
    """Usable bytes/s per lane after line encoding: 8b/10b up to 5 GT/s, 128b/130b for 8-32 GT/s,
    and FLIT mode (242/256) at 64 GT/s. hwloc uses the same encodings for its ``linkspeed``."""
    if gts <= 5.0:
        enc = 8 / 10
    elif gts <= 32.0:
        enc = 128 / 130
    else:
        enc = 242 / 256
    return gts * enc / 8


def gen_of(gts: float | None) -> int | None:
    for gen, speed in LINK_SPEED_GTS.items():
        if gts is not None and abs(speed - gts) < 0.01:
            return gen
    return None


@dataclass(frozen=True)
class AcsControl:
    """ACS control (or capability) bits; names as lspci prints them."""

    source_validation: bool = False  # SV  (SrcValid)
    translation_blocking: bool = False  # TB (TransBlk)
    request_redirect: bool = False  # RR  (ReqRedir)
    completion_redirect: bool = False  # CR (CmpltRedir)
    upstream_forwarding: bool = False  # UF (UpstreamFwd)
    egress_control: bool = False  # EC  (EgressCtrl)
    direct_translated: bool = False  # DT  (DirectTrans)

    @classmethod
    def from_bits(cls, v: int) -> AcsControl:
        # 128 possible values, immutable records: a large node decodes two per bridge
        v &= 0x7F
        known = _ACS_BY_BITS.get(v)
        if known is None or type(known) is not cls:
            known = _ACS_BY_BITS[v] = cls(*(bool(v >> i & 1) for i in range(7)))
        return known

    @property
    def redirects(self) -> bool:
        """The kernel's pci_bridge_has_acs_redir(): RR, CR or EC set forces peer traffic upstream."""
        return self.request_redirect or self.completion_redirect or self.egress_control

    def flags(self) -> str:
        names = ("SV", "TB", "RR", "CR", "UF", "EC", "DT")
        vals = (
            self.source_validation,
            self.translation_blocking,
            self.request_redirect,
            self.completion_redirect,
            self.upstream_forwarding,
            self.egress_control,
            self.direct_translated,
        )
        return " ".join(n + ("+" if v else "-") for n, v in zip(names, vals))

    def to_json(self) -> schema.AcsBits:
        return {
            "SV": self.source_validation,
            "TB": self.translation_blocking,
            "RR": self.request_redirect,
            "CR": self.completion_redirect,
            "UF": self.upstream_forwarding,
            "EC": self.egress_control,
            "DT": self.direct_translated,
        }


_ACS_BY_BITS: dict[int, AcsControl] = {}


@dataclass
class PcieCapability:
    version: int
    port_type: PortType
    max_payload_supported: int  # bytes
    max_payload: int  # bytes (DevCtl)
    max_read_request: int  # bytes (DevCtl)
    relaxed_ordering: bool  # DevCtl bit 4
    link_cap_speed_gts: float | None  # LnkCap max link speed
    link_cap_width: int | None
    link_speed_gts: float | None  # LnkSta negotiated
    link_width: int | None


@dataclass
class ConfigSpace:
    """What we decoded, plus why any part is missing."""

    vendor: int | None = None
    device: int | None = None
    class_code: int | None = None
    header_type: int | None = None
    secondary_bus: int | None = None
    pcie: PcieCapability | None = None
    acs_capability: AcsControl | None = None
    acs_control: AcsControl | None = None
    has_acs: bool | None = None  # None: unknown (extended space unreadable)
    capabilities: list[int] = field(default_factory=list)
    ext_capabilities: list[int] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


# little-endian, as config space is (PCI Local Bus Specification 6.1)
_U32 = struct.Struct("<I")
_ACS_REGS = struct.Struct("<HH")  # ACS Capability, ACS Control
_PCIE_REGS = struct.Struct("<HIHHIHH")


# Max_Payload_Size / Max_Read_Request_Size encodings 0-5: 128 << code bytes; 6 and 7 reserved
_PAYLOAD = (128, 256, 512, 1024, 2048, 4096, 0, 0)
_HEADER = struct.Struct("<HHxxH")  # Vendor ID, Device ID, (Command), Status


def decode(data: bytes) -> ConfigSpace:
    """Decode whatever ``data`` holds: 64 bytes (unprivileged sysfs read), 256 or 4096 bytes."""
    cs = ConfigSpace()
    if len(data) < 64:
        cs.problems.append(f"config space truncated ({len(data)} bytes, need at least 64)")
        return cs
    cs.vendor, cs.device, status = _HEADER.unpack_from(data)
    if cs.vendor == 0xFFFF:
        cs.problems.append("config space reads all-ones (device gone or not readable)")
        return cs
    cs.class_code = data[0x0B] << 16 | data[0x0A] << 8 | data[0x09]
    cs.header_type = data[0x0E] & 0x7F
    if cs.header_type == 1:
        cs.secondary_bus = data[0x19]
    if status & 0x10:
        _walk_standard(data, cs)
    if len(data) < EXT_CONFIG_SIZE:
        # Extended capabilities (ACS among them) live at 0x100+; sysfs hands unprivileged
        # readers only the first 64 bytes and lspci -xxx shows 256.
        cs.has_acs = None
        if cs.pcie is not None:
            cs.problems.append("ACS unknown: extended config space needs root")
        return cs
    _walk_extended(data, cs)
    return cs


# The two capability lists are walked with plain loops (no generator, no closures): a large node
# decodes 1,000+ config spaces per run. Each walk ends at a null pointer, or (with a problem noted)
# at a pointer out of range or a loop: config space comes from files anyone may edit.


def _ends(cs: ConfigSpace, ptr: int, seen: set[int], out_of_range: str | None, most: int, kind: str) -> bool:
    """True, with the problem noted, when a capability walk must end at ``ptr``: the pointer is out
    of range (``out_of_range`` says how) or the list loops; else ``ptr`` joins ``seen``."""
    if out_of_range:
        cs.problems.append(out_of_range)
        return True
    if ptr in seen or len(seen) >= most:
        cs.problems.append(f"{kind} list loops at {ptr:#x}")
        return True
    seen.add(ptr)
    return False


def _walk_standard(data: bytes, cs: ConfigSpace) -> None:
    size = len(data)
    limit = min(size, STD_CONFIG_SIZE)
    seen: set[int] = set()
    ptr = data[0x34] & 0xFC
    while ptr:
        why = None
        if ptr + 2 > limit and size < STD_CONFIG_SIZE:
            why = f"capability at {ptr:#x} beyond the {size} readable bytes"
        elif ptr < 0x40 or ptr + 2 > limit:
            why = f"capability pointer {ptr:#x} out of range"
        if _ends(cs, ptr, seen, why, 48, "capability"):
            return
        cap_id = data[ptr]
        cs.capabilities.append(cap_id)
        if cap_id == CAP_ID_PCIE:
            if ptr + 0x14 > limit:
                cs.problems.append("PCIe capability truncated")
            else:
                cs.pcie = _decode_pcie(data, ptr)
        ptr = data[ptr + 1] & 0xFC


def _decode_pcie(data: bytes, o: int) -> PcieCapability:
    # Flags, DevCap, DevCtl, DevSta, LnkCap, LnkCtl, LnkSta at offsets 2 to 0x13 of the capability
    flags, devcap, devctl, _, lnkcap, _, lnksta = _PCIE_REGS.unpack_from(data, o + 2)
    ptype = _PORT_TYPES.get(flags >> 4 & 0xF, PortType.UNKNOWN)
    has_link = ptype not in (PortType.RC_INTEGRATED, PortType.RC_EVENT_COLLECTOR)
    return PcieCapability(
        version=flags & 0xF,
        port_type=ptype,
        max_payload_supported=_PAYLOAD[devcap & 7],
        max_payload=_PAYLOAD[devctl >> 5 & 7],
        max_read_request=_PAYLOAD[devctl >> 12 & 7],
        relaxed_ordering=bool(devctl & 0x10),
        link_cap_speed_gts=LINK_SPEED_GTS.get(lnkcap & 0xF) if has_link else None,
        link_cap_width=(lnkcap >> 4 & 0x3F) or None if has_link else None,
        link_speed_gts=LINK_SPEED_GTS.get(lnksta & 0xF) if has_link else None,
        link_width=(lnksta >> 4 & 0x3F) or None if has_link else None,
    )


def _walk_extended(data: bytes, cs: ConfigSpace) -> None:
    cs.has_acs = False
    size = len(data)
    seen: set[int] = set()
    ptr = 0x100
    while ptr:
        why = f"extended capability pointer {ptr:#x} out of range" if ptr < 0x100 or ptr + 4 > size else None
        if _ends(cs, ptr, seen, why, 1024, "extended capability"):
            return
        header = _U32.unpack_from(data, ptr)[0]
        if header in (0, 0xFFFFFFFF):
            return
        cap_id = header & 0xFFFF
        cs.ext_capabilities.append(cap_id)
        if cap_id == EXT_CAP_ID_ACS:
            if ptr + 8 > size:
                cs.problems.append("ACS capability truncated")
            else:
                cs.has_acs = True
                cap, ctl = _ACS_REGS.unpack_from(data, ptr + 4)
                cs.acs_capability = AcsControl.from_bits(cap)
                cs.acs_control = AcsControl.from_bits(ctl)
        ptr = header >> 20 & 0xFFC
