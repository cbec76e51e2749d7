"""Pure analysis of a device pair: the labels nvidia-smi and NCCL would give, the path, its
narrowest link, and whether P2P DMA can work there — with reasons.

Sources of each rule:
- nvidia-smi levels: the ``nvidia-smi topo -m`` legend (PIX: at most a single PCIe bridge; PXB:
  multiple bridges without the host bridge; PHB: a host bridge; NODE: between host bridges of one
  NUMA node; SYS: across the SMP interconnect), NVML ``nvmlGpuTopologyLevel_t``.
- NCCL levels: ``src/graph/paths.cc`` (a PCI→PCI hop is PXB, a hop touching a CPU node is PHB,
  CPU→CPU is SYS; NCCL has no NODE) over the tree of ``src/graph/xml.cc`` where only switch
  upstream ports become PCI nodes.
- P2PDMA map type: Linux ``drivers/pci/p2pdma.c`` ``calc_map_type_and_dist``: a common upstream
  bridge with no ACS redirect (RR|CR|EC) on either side gives BUS_ADDR; otherwise the traffic goes
  through the host bridge, allowed only when ``cpu_supports_p2pdma`` (AMD family ≥ 0x17) or both host
  bridges are in ``pci_p2pdma_whitelist``; else NOT_SUPPORTED.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING

from ..jsontext import compact as _compact
from ..jsontext import optional as _json_opt
from ..jsontext import string as _json_str
from ..jsontext import strings as _json_strs
from ..pci.nvlink import NvLinkPair
from ..pci.records import Link
from .model import Device, Role, Topology

if TYPE_CHECKING:
    from ..schema import topology as schema


class SmiLevel(str, Enum):
    PIX = "PIX"
    PXB = "PXB"
    PHB = "PHB"
    NODE = "NODE"
    SYS = "SYS"
    # Across host bridges whose NUMA nodes are not both known (an lspci import without --numa):
    # NODE or SYS, and the input cannot tell which (issue 22: never state NODE without support)
    UNKNOWN = "?"


class NcclLevel(str, Enum):
    PIX = "PIX"
    PXB = "PXB"
    PHB = "PHB"
    SYS = "SYS"
    # PHB or SYS (or, where placement is unknown, PIX or PXB too): the input cannot tell, as for SmiLevel
    UNKNOWN = "?"


class P2pDmaMap(str, Enum):
    BUS_ADDR = "BUS_ADDR"
    THRU_HOST_BRIDGE = "THRU_HOST_BRIDGE"
    NOT_SUPPORTED = "NOT_SUPPORTED"
    UNKNOWN = "UNKNOWN"


class P2pVerdict(str, Enum):
    NVLINK = "P2P_NVLINK"  # GPU peers joined by NVLink (directly or through NVSwitch): PCIe not used
    P2P = "P2P"  # peer traffic stays below a common switch / bridge
    VIA_HOST = "P2P_VIA_HOST"  # P2P possible but routed through the root complex
    NO = "NO_P2P"
    UNKNOWN = "UNKNOWN"


# Linux drivers/pci/p2pdma.c pci_p2pdma_whitelist: (vendor, device) -> requires same host bridge.
P2PDMA_HOST_WHITELIST = {
    (0x8086, 0x3C00): True,
    (0x8086, 0x3C01): True,  # Xeon E5 / Core i7
    (0x8086, 0x2F00): True,
    (0x8086, 0x2F01): True,  # Xeon E7 v3 / E5 v3
    (0x8086, 0x2030): False,
    (0x8086, 0x2031): False,
    (0x8086, 0x2032): False,
    (0x8086, 0x2033): False,
    (0x8086, 0x2020): False,  # Skylake-E
    (0x8086, 0x09A2): False,  # Ice Lake-SP
}
AMD_VENDOR = 0x1022


@dataclass
class LinkHop:
    bdf: str
    label: str
    link: Link
    downtrained: bool
    idle_possible: bool  # a GPU link can drop speed at idle (ASPM/power saving)
    gbps: float | None = None  # link.gbytes_per_s when the hop was made (the tree is fixed by then)

    def to_json(self) -> schema.Hop:
        # a hop stands in many pairs: build its document once, hand out copies
        doc = self.__dict__.get("_json")
        if doc is None:
            built: schema.Hop = {
                "bdf": self.bdf,
                "device": self.label,
                **self.link.to_json(),
                "below_max": self.downtrained,
            }
            doc = self.__dict__["_json"] = built
        return doc.copy()

    def json_text(self) -> str:
        """``to_json()`` as compact JSON text, encoded once: a hop stands in many pairs."""
        text = self.__dict__.get("_json_text")
        if text is None:
            text = self.__dict__["_json_text"] = _compact(self.to_json())
        return text


def _narrower(best: LinkHop | None, h: LinkHop | None) -> LinkHop | None:
    """The narrower of two hops with a known bandwidth; the first on a tie (as min() over the path)."""
    if h is None or not h.gbps:
        return best
    if best is None or h.gbps < best.gbps:  # type: ignore[operator]
        return h
    return best


@dataclass
class PairAnalysis:
    a: Device
    b: Device
    smi: SmiLevel
    nccl: NcclLevel
    path: list[str]
    hops: list[LinkHop]
    narrowest: LinkHop | None
    acs_redirect_bridges: list[str]
    acs_unknown_bridges: list[str]
    p2pdma: P2pDmaMap
    verdict: P2pVerdict
    reasons: list[str] = field(default_factory=list)
    nvlink: NvLinkPair | None = None
    # two GPUs whose PCIe path allows no P2P, with no NVLink source to say whether NVLink joins
    # them: the verdict is UNKNOWN and the matrix cell '?' (what nvidia-smi prints is not known)
    nvlink_unknown: bool = False
    # what the pair took from the bridges between its devices (shared with every pair below the
    # same two parents): json_text encodes that part once for all of them
    mid: _Between | None = field(default=None, repr=False, compare=False)

    @property
    def label(self) -> str:
        """What nvidia-smi topo -m prints for the pair: NV# over NVLink, else the PCIe level."""
        return self.nvlink.label if self.nvlink else self.smi.value

    def to_json(self) -> schema.Pair:
        # ``_value_`` is the member's value as a plain attribute: ``.value`` goes through enum's
        # descriptor, ~30k times for the 4,720 pairs of a large node (a tenth of the document time)
        smi = self.smi._value_
        return {
            "a": self.a.bdf,
            "a_label": self.a.label,
            "b": self.b.bdf,
            "b_label": self.b.label,
            "b_role": self.b.role._value_,
            "nvidia_smi": self.nvlink.label if self.nvlink else smi,
            "pcie": smi,
            "nccl": self.nccl._value_,
            "nvlink": self.nvlink.to_json() if self.nvlink else None,
            "path": self.path,
            "narrowest_link": self.narrowest.to_json() if self.narrowest else None,
            "below_max_links": [h.to_json() for h in self.hops if h.downtrained],
            "acs_redirect_bridges": self.acs_redirect_bridges,
            "acs_unknown_bridges": self.acs_unknown_bridges,
            "p2pdma_map": self.p2pdma._value_,
            "p2p": self.verdict._value_,
            "reasons": self.reasons,
        }

    def json_text(self) -> str:
        """``_compact(self.to_json())``, byte for byte, put together from pieces encoded once: each
        device's address and labels, each hop, and what the pair shares with every pair below the
        same two parents (``mid``). A large node's 4,720 pairs are three quarters of its 4 MB
        topology document, and encoding their dicts was a fifth of ``topology --json``'s time
        (docs/benchmarks-history.md). ``to_json`` stays the definition of the record;
        tests/test_topology_json_text.py checks the two agree on every tree the tests read."""
        nv = self.nvlink
        smi, pcie_nccl, path_mid, acs_p2pdma = _shared_json(self)
        return "".join(
            (
                '{"a":',
                _json_bdf(self.a),
                ',"a_label":',
                _json_opt(self.a.label),
                _json_as_b(self.b),
                ',"nvidia_smi":',
                _json_str(nv.label) if nv else smi,
                pcie_nccl,
                ',"nvlink":',
                _compact(nv.to_json()) if nv else "null",
                ',"path":[',
                _json_bdf(self.a),
                path_mid,
                ",",
                _json_bdf(self.b),
                '],"narrowest_link":',
                self.narrowest.json_text() if self.narrowest else "null",
                ',"below_max_links":[',
                ",".join(h.json_text() for h in self.hops if h.downtrained),
                "]",
                acs_p2pdma,
                ',"p2p":',
                _json_str(self.verdict._value_),
                ',"reasons":',
                _json_strs(self.reasons) if self.reasons else "[]",
                "}",
            )
        )


def _json_bdf(d: Device) -> str:
    text = d.__dict__.get("_json_bdf")
    if text is None:
        text = d.__dict__["_json_bdf"] = _json_str(d.bdf)
    return text


def _json_as_b(d: Device) -> str:
    """The pair's b, b_label and b_role members for device ``d``, encoded once per device."""
    text = d.__dict__.get("_json_as_b")
    if text is None:
        text = d.__dict__["_json_as_b"] = (
            f',"b":{_json_bdf(d)},"b_label":{_json_opt(d.label)},"b_role":{_json_str(d.role._value_)}'
        )
    return text


def _shared_json(p: PairAnalysis) -> tuple[str, str, str, str]:
    """The members a pair takes from its ``mid``, encoded once per mid: the PCIe level, the
    pcie/nccl members, the path between the two devices (each element with its leading comma) and
    the ACS lists with the P2PDMA map."""
    cached = p.mid.__dict__.get("_json") if p.mid is not None else None
    if cached is not None:
        return cached
    smi = _json_str(p.smi._value_)
    text = (
        smi,
        f',"pcie":{smi},"nccl":{_json_str(p.nccl._value_)}',
        "".join("," + _json_str(x) for x in p.path[1:-1]),
        f',"acs_redirect_bridges":{_json_strs(p.acs_redirect_bridges)}'
        f',"acs_unknown_bridges":{_json_strs(p.acs_unknown_bridges)}'
        f',"p2pdma_map":{_json_str(p.p2pdma._value_)}',
    )
    if p.mid is not None:
        p.mid.__dict__["_json"] = text
    return text


def _split_at_common(a: Device, b: Device) -> tuple[list[Device], Device | None, list[Device]]:
    """(bridges above a below the common one, the common bridge or None, same for b)."""
    up_a = a.ancestors()
    up_b = b.ancestors()
    set_b = {id(x) for x in up_b}
    for i, x in enumerate(up_a):
        if id(x) in set_b:
            j = next(k for k, y in enumerate(up_b) if y is x)
            return up_a[:i], x, up_b[:j]
    return up_a, None, up_b


def _units(bridges: list[Device]) -> set[str]:
    """Physical bridge units: all ports of one switch count once (Broadcom two-level flattened)."""
    return {d.switch_id or d.bdf for d in bridges}


def _nccl_nodes(chain: list[Device]) -> list[str]:
    """NCCL keeps one PCI node per switch (its upstream port; two levels up per step)."""
    out: list[str] = []
    for d in chain:
        if d.switch_id and (not out or out[-1] != d.switch_id):
            out.append(d.switch_id)
    return out


def _device_nccl_nodes(d: Device) -> list[str]:
    # cached: the tree is fixed, and the pair analysis asks for each endpoint's list many times
    nodes = d.__dict__.get("_nccl_nodes")
    if nodes is None:
        nodes = d.__dict__["_nccl_nodes"] = _nccl_nodes(d.ancestors())
    return nodes


def _acs_facts(d: Device) -> tuple[bool, bool, bool]:
    """(a bridge, ACS redirects peer traffic, ACS state unknown) for a device on a pair's path, read
    once per device: a large node's pair analysis visits each bridge thousands of times."""
    facts = d.__dict__.get("_acs_facts")
    if facts is None:
        acs = d.fn.acs_control
        facts = d.__dict__["_acs_facts"] = (d.is_bridge, acs is not None and acs.redirects, not d.fn.acs_known)
    return facts


def _hop(d: Device) -> LinkHop | None:
    if "_hop" not in d.__dict__:
        d.__dict__["_hop"] = _compute_hop(d)
    return d.__dict__["_hop"]


def _compute_hop(d: Device) -> LinkHop | None:
    """The link above ``d``. Endpoints and switch upstream ports report their own upstream link;
    root and downstream ports report the link below them, which their child already reported."""
    if d.role in (Role.ROOT_PORT, Role.SWITCH_DOWNSTREAM):
        return None
    if d.parent is None and not d.fn.link.known:
        return None  # root-complex integrated: no link to report
    link = d.fn.link
    limit_speed = [s for s in (link.max_speed_gts, d.parent.fn.link.max_speed_gts if d.parent else None) if s]
    limit_width = [w for w in (link.max_width, d.parent.fn.link.max_width if d.parent else None) if w]
    down = False
    if link.speed_gts and link.width:  # (link.known)
        if limit_speed and link.speed_gts < min(limit_speed) - 0.01:
            down = True
        if limit_width and link.width < min(limit_width):
            down = True
    return LinkHop(
        bdf=d.bdf,
        label=d.label or d.role.value,
        link=link,
        downtrained=down,
        idle_possible=d.role == Role.GPU,
        gbps=link.gbytes_per_s,
    )


@dataclass
class _Between:
    """What a pair's analysis takes from the bridges between its two devices: the same for every
    pair whose devices hang below the same two parents (on a large node 4,720 pairs share a few
    hundred of these), so ``analyse_all`` computes it once per parent pair."""

    up_a: list[Device]
    up_b: list[Device]
    smi: SmiLevel
    nccl: NcclLevel
    mid_path: list[str]
    mid_hops: list[LinkHop]
    mid_narrowest: LinkHop | None
    redirect: list[str]
    unknown: list[str]
    p2pdma: P2pDmaMap
    reasons: list[str]  # NUMA and p2pdma reasons, in the order analyse_pair gives them


def _placement_unknown(d: Device) -> bool:
    top = d.ancestors()[-1] if d.ancestors() else d
    return top.fn.placement_unknown


def _top_label(d: Device, hb: str) -> str:
    # an lspci excerpt's bus whose upstream is missing is not known to be a host bridge
    return f"bus {hb} (upstream unknown)" if _placement_unknown(d) else f"host-bridge {hb}"


def _between(topo: Topology, a: Device, b: Device) -> _Between:
    up_a, common, up_b = _split_at_common(a, b)
    reasons: list[str] = []
    hb_a, hb_b = a.fn.host_bridge, b.fn.host_bridge
    numa_a, numa_b = topo.numa_of(a), topo.numa_of(b)

    # --- labels ---
    if common is not None:
        smi = SmiLevel.PIX if len(_units(up_a + [common] + up_b)) <= 1 else SmiLevel.PXB
    elif (_placement_unknown(a) or _placement_unknown(b)) and a.fn.domain == b.fn.domain:
        # (in different PCI domains they share no bridge and no host bridge whatever is above them:
        # NUMA decides NODE or SYS below, as for any two host bridges)
        smi = SmiLevel.UNKNOWN
        reasons.append(
            "where a device attaches is not known (an lspci excerpt without its upstream bridge and "
            "'lspci -tv', or a sysfs tree whose /sys/bus/pci/devices entries are not links): the path "
            "between the two cannot be told"
        )
    elif hb_a == hb_b:
        smi = SmiLevel.PHB
    elif numa_a is not None and numa_b is not None and numa_a != numa_b:
        smi = SmiLevel.SYS
    elif numa_a is None or numa_b is None:
        smi = SmiLevel.UNKNOWN
        reasons.append(
            "NUMA node of a host bridge unknown: NODE or SYS, the input cannot tell (lspci imports: give --numa)"
        )
    else:
        smi = SmiLevel.NODE
    na, nb = _device_nccl_nodes(a), _device_nccl_nodes(b)
    shared = [s for s in na if s in nb]
    if shared:
        first = shared[0]
        nodes_on_path = na.index(first) + nb.index(first) + 1
        nccl = NcclLevel.PIX if nodes_on_path == 1 else NcclLevel.PXB
    elif smi == SmiLevel.SYS:
        nccl = NcclLevel.SYS
    elif smi == SmiLevel.UNKNOWN:
        # no shared bridge known and nvidia-smi's level unknown: PHB would be as unsupported as NODE
        nccl = NcclLevel.UNKNOWN
    else:
        nccl = NcclLevel.PHB

    # --- path between the two devices ---
    path = [d.fn.bdf for d in up_a]
    if common is not None:
        path.append(common.fn.bdf)
    else:
        path.append(_top_label(a, hb_a))
        if hb_b != hb_a:
            if smi == SmiLevel.SYS:
                path += [f"NUMA{numa_a}", f"NUMA{numa_b}"]
            path.append(_top_label(b, hb_b))
    path += [d.fn.bdf for d in reversed(up_b)]
    mid_hops = [h for h in (_hop(d) for d in up_a + up_b) if h is not None]
    mid_narrowest = None
    for h in mid_hops:
        mid_narrowest = _narrower(mid_narrowest, h)

    # --- ACS on the bridges the kernel checks (p2pdma.c walks both sides up to the common one) ---
    # the bridges on either side, then the common one whatever its kind
    redirect: list[str] = []
    unknown: list[str] = []
    for d in up_a + up_b + ([common] if common is not None else []):
        is_bridge, redirects, acs_unknown = _acs_facts(d)
        if is_bridge or d is common:
            if redirects:
                redirect.append(d.fn.bdf)
            if acs_unknown:
                unknown.append(d.fn.bdf)
    p2pdma = _p2pdma_map(topo, a, b, common, redirect, unknown, reasons)
    return _Between(up_a, up_b, smi, nccl, path, mid_hops, mid_narrowest, redirect, unknown, p2pdma, reasons)


def _endpoint(topo: Topology, d: Device) -> tuple[tuple, LinkHop | None, bool]:
    """What a pair reads of one of its devices, gathered once per device: the key of everything
    _between reads of it (its ancestors via the parent, host bridge, NUMA node), its own link hop,
    and whether an IOMMU translates for it."""
    facts = d.__dict__.get("_endpoint")
    if facts is None:
        key = (id(d.parent), d.fn.host_bridge, topo.numa_of(d))
        facts = d.__dict__["_endpoint"] = (key, _hop(d), _translating_type(topo, d) is not None)
    return facts


def analyse_pair(topo: Topology, a: Device, b: Device, memo: dict[tuple, _Between] | None = None) -> PairAnalysis:
    key_a, hop_a, translated_a = _endpoint(topo, a)
    key_b, hop_b, translated_b = _endpoint(topo, b)
    if memo is None:
        mid = _between(topo, a, b)
    else:
        hit = memo.get((key_a, key_b))
        mid = hit if hit is not None else memo.setdefault((key_a, key_b), _between(topo, a, b))
    # the bridge lists are shared by every pair below the same two parents: read-only
    smi, redirect, unknown, p2pdma = mid.smi, mid.redirect, mid.unknown, mid.p2pdma
    path = [a.fn.bdf, *mid.mid_path, b.fn.bdf]
    hops = [h for h in (hop_a, *mid.mid_hops, hop_b) if h is not None]
    narrowest = _narrower(_narrower(_narrower(None, hop_a), mid.mid_narrowest), hop_b)

    if translated_a or translated_b:
        reasons = list(mid.reasons)
        verdict = _verdict(topo, a, b, smi, p2pdma, redirect, unknown, reasons)
    else:
        # without an IOMMU translating for either device the verdict and its reasons depend only
        # on what the pair shares with every pair below the same two parents
        shared = mid.__dict__.get("_verdict")
        if shared is None:
            shared_reasons = list(mid.reasons)
            shared = mid.__dict__["_verdict"] = (
                _verdict(topo, a, b, smi, p2pdma, redirect, unknown, shared_reasons),
                shared_reasons,
            )
        verdict, reasons = shared[0], list(shared[1])
    nv = topo.nvlink.between(a.bdf, b.bdf) if topo.nvlink is not None else None
    if (
        nv is None
        and verdict == P2pVerdict.NO
        and a.role == Role.GPU
        and b.role == Role.GPU
        and _nvlink_unknown(topo, a, b)
    ):
        # No NVLink source at all (a snapshot without NVML or nvidia-smi text, an lspci import):
        # GPUs joined by NVLink (every SXM board) send peer traffic over it, whatever the PCIe
        # path allows, so "no P2P" between two GPUs is not known here (issue 22: NVLinked H200s
        # showed PHB!). A storage or NIC pair through either GPU keeps its PCIe verdict.
        reasons.insert(
            0,
            (
                "no NVLink source (" + (topo.nvlink_note or "none read") + ")"
                if topo.nvlink is None
                else f"{topo.nvlink.source}: NVLinks active, but to which peer is not said"
            )
            + f": if NVLink joins these GPUs their peer traffic takes it, so the PCIe verdict ({verdict.value}) "
            "does not decide GPU P2P",
        )
        verdict = P2pVerdict.UNKNOWN
        nvlink_unknown = True
    else:
        nvlink_unknown = False
    if nv is not None and nv.p2p_ok is not False:
        # CUDA peer copies between these GPUs take NVLink; the PCIe verdict above stays in the
        # reasons (it still decides a storage or NIC path through either GPU).
        reasons.insert(
            0,
            f"{nv.label}: {nv.links} NVLink(s){' through NVSwitch' if nv.via_nvswitch else ''} "
            f"({nv.source}); GPU peer traffic does not use the PCIe path ({smi.value}, {verdict.value})",
        )
        verdict = P2pVerdict.NVLINK
    elif nv is not None:
        reasons.append(f"{nv.label} present but NVML reports P2P over NVLink not OK")
    return PairAnalysis(
        a=a,
        b=b,
        smi=smi,
        nccl=mid.nccl,
        path=path,
        hops=hops,
        narrowest=narrowest,
        acs_redirect_bridges=redirect,
        acs_unknown_bridges=unknown,
        p2pdma=p2pdma,
        verdict=verdict,
        reasons=reasons,
        nvlink=nv,
        nvlink_unknown=nvlink_unknown,
        mid=mid,
    )


def _nvlink_unknown(topo: Topology, a: Device, b: Device) -> bool:
    """Whether nothing says if NVLink joins ``a`` and ``b``: no NVLink source at all, or one that
    has link states but no pairs ('nvidia-smi nvlink -s' alone) while either GPU has active links
    (to the other, or to an NVSwitch: the text does not say)."""
    info = topo.nvlink
    if info is None:
        return True
    if info.pairs:
        return False
    return any(g.links_active for bdf, g in info.gpus.items() if bdf in (a.bdf, b.bdf))


def host_bridge_allows(topo: Topology, hb_a: str, hb_b: str) -> bool | None:
    """Would p2pdma.c let traffic cross these host bridges? None when we cannot tell."""
    cpu = topo.cpu
    if cpu.vendor == "AuthenticAMD" and cpu.family is not None:
        return cpu.family >= 0x17
    if cpu.vendor == "HygonGenuine":
        return True
    bridges = [topo.host_bridges.get(hb_a), topo.host_bridges.get(hb_b)]
    if cpu.vendor is None and all(
        h is not None and (h.vendor == AMD_VENDOR or (h.vendor_name or "").startswith("Advanced Micro Devices"))
        for h in bridges
    ):
        # lspci imports carry no /proc/cpuinfo; an AMD host bridge implies an AMD CPU. Zen (0x17)
        # and later have PCIe host bridges with this layout; earlier AMD parts predate GPUDirect.
        return True
    # an unknown device id (lspci -tv names the vendor but gives no id) is unknown, not "not listed"
    ids = [(h.vendor, h.device) for h in bridges if h is not None and h.vendor is not None and h.device is not None]
    if len(ids) != len(bridges):
        return None
    entries = [P2PDMA_HOST_WHITELIST.get(i) for i in ids]
    if any(e is None for e in entries):
        return False
    if hb_a == hb_b:
        return True
    return not any(entries)


def _p2pdma_map(topo, a, b, common, redirect, unknown, reasons) -> P2pDmaMap:
    if common is not None and not redirect and not unknown:
        return P2pDmaMap.BUS_ADDR
    if common is not None and redirect:
        reasons.append(f"ACS redirect (RR/CR/EC) on {', '.join(redirect)} forces peer traffic up to the root complex")
    allowed = host_bridge_allows(topo, a.fn.host_bridge, b.fn.host_bridge)
    if common is not None and unknown and not redirect:
        reasons.append(
            f"ACS unknown on {', '.join(unknown)} (extended config space needs root): "
            "BUS_ADDR if ACS is off, else through the host bridge"
        )
        return P2pDmaMap.UNKNOWN
    if allowed is None:
        reasons.append("host bridge identity unknown: cannot apply the kernel's P2PDMA whitelist")
        return P2pDmaMap.UNKNOWN
    if not allowed:
        reasons.append("the host bridge is not on the kernel's P2PDMA whitelist (AMD Zen or listed Intel root ports)")
        return P2pDmaMap.NOT_SUPPORTED
    return P2pDmaMap.THRU_HOST_BRIDGE


def _translating_type(topo: Topology, d: Device) -> str | None:
    """The type of ``d``'s IOMMU group (DMA, DMA-FQ) when the IOMMU translates for it, else None."""
    t = topo.iommu.group_type_of(d.fn.iommu_group)
    return t if t and t.startswith("DMA") else None


def _verdict(topo, a, b, smi, p2pdma, redirect, unknown, reasons) -> P2pVerdict:
    translated = [f"{d.bdf} ({t})" for d in (a, b) if (t := _translating_type(topo, d))]
    no = False
    if translated:
        reasons.append("IOMMU translating for " + ", ".join(translated) + ": nvidia-fs P2P needs IOMMU off or iommu=pt")
        no = True
    elif topo.iommu.mode in ("translated", "mixed"):
        reasons.append(f"IOMMU mode {topo.iommu.mode}: check the groups of these devices")
    if smi == SmiLevel.SYS:
        reasons.append("crosses the inter-socket link: P2P bandwidth is limited by the SMP interconnect")
    elif smi in (SmiLevel.NODE, SmiLevel.PHB) and p2pdma == P2pDmaMap.THRU_HOST_BRIDGE:
        reasons.append(f"traffic crosses the root complex ({smi.value})")
    if p2pdma == P2pDmaMap.NOT_SUPPORTED:
        no = True
    if no:
        return P2pVerdict.NO
    if p2pdma == P2pDmaMap.UNKNOWN:
        return P2pVerdict.UNKNOWN
    if p2pdma == P2pDmaMap.BUS_ADDR:
        return P2pVerdict.P2P
    return P2pVerdict.VIA_HOST


MAX_PAIRS = 65_536  # GPU x (NVMe, NIC, GPU) pairs analysed at most: 72 GPUs x 900 devices. A
# 253 KB lspci text naming 1,000 GPUs and 1,000 NVMe needed > 3 GiB for its 2 M pairs (issue 24).


def analyse_all(topo: Topology) -> list[PairAnalysis]:
    gpus = sorted(topo.by_role(Role.GPU), key=Device.sort_key)
    others = sorted(topo.by_role(Role.NVME, Role.NIC), key=Device.sort_key)
    n = len(gpus) * (len(others) + max(len(gpus) - 1, 0))
    if n > MAX_PAIRS:
        from ..errors import GdsdiagError

        raise GdsdiagError(
            f"{len(gpus)} GPUs and {len(others)} NVMe/NIC devices make {n} pairs, more than the "
            f"{MAX_PAIRS} gdsdiag analyses (no node has that many: is this several nodes' text in one?)",
            "give one node's topology (one lspci, one sysfs tree or snapshot)",
        )
    out = []
    memo: dict[tuple, _Between] = {}
    for g in gpus:
        for o in others + [x for x in gpus if x is not g]:
            out.append(analyse_pair(topo, g, o, memo))
    return out
