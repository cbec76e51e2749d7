"""The one route vocabulary: how bytes moved (or can move) between storage and GPU memory.

``check`` says which of these a node *can* take, ``trace`` labels each I/O with the one it *did*
take, ``sweep`` reports the one each point measured, and cuFile's statistics are mapped onto it.
A ``str`` enum, so JSON documents and comparisons with the plain names keep working.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum


class Route(str, Enum):
    NVFS = "NVFS"  # P2P DMA set up by nvidia-fs with a GDS-aware storage driver
    P2PDMA = "P2PDMA"  # P2P DMA through the kernel's PCI P2PDMA (cufile.json use_pci_p2pdma)
    RDMA = "RDMA"  # P2P DMA by an RDMA NIC into GPU memory (NFS/RDMA, distributed filesystems)
    PEER_GPU = "PEER_GPU"  # cuFile dynamic routing: bounced through a GPU nearer the storage
    COMPAT = "COMPAT"  # cuFile compatibility mode: POSIX I/O through libcufile's host bounce buffers
    DRAM_BOUNCE = "DRAM_BOUNCE"  # the application's own host-memory I/O whose bytes are copied to/from a GPU
    HOST = "HOST"  # file I/O of host memory that never reaches a GPU: not on the GPU data path
    UNKNOWN = "UNKNOWN"  # nothing conclusive was seen
    NONE = "NONE"  # no route works (cuFile I/O cannot run)

    def __str__(self) -> str:
        return self.value

    @property
    def is_p2p(self) -> bool:
        """Direct DMA between storage (or NIC) and GPU memory, no host copy."""
        return self in (Route.NVFS, Route.P2PDMA, Route.RDMA)

    @property
    def via_host_memory(self) -> bool:
        """The bytes crossed host DRAM on their way to or from the GPU."""
        return self in (Route.COMPAT, Route.DRAM_BOUNCE)


class Confidence(str, Enum):
    """How sure a route verdict is: a trace io line's "confidence" (docs/json.md), high | medium | low.
    Decided by the two rule tables (trace/evidence.py: ROUTE_RULES for cuFile calls, HOST_RULES for
    the I/O outside cuFile). A ``str`` enum, as Route, so the JSON and comparisons with the words hold."""

    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"

    def __str__(self) -> str:
        return self.value


# A route mix: how many I/Os (or bytes) went by each route, as a sweep point's cuFile statistics
# count them. A sweep point writes the counts as "route_mix" ({"NVFS": 3, "COMPAT": 1}) and its
# route as the shares of the same mix ("route": {"NVFS": 0.75, "COMPAT": 0.25}: ``share_json``).
RouteMix = dict[Route, int]
# The same as shares of the whole (they sum to 1): a sweep point's route (docs/json.md).
RouteShares = dict[Route, float]

# Labels other vocabularies count by, onto Route: cuFile's statistics (level-3 n_dr_*: dynamic
# routing, bounced through a peer GPU), the tracer's kernel paths.
_LABELS = {
    "DYNAMIC_ROUTING": Route.PEER_GPU,
    "nvidia-fs": Route.NVFS,
    "pci-p2pdma": Route.P2PDMA,
    "rdma": Route.RDMA,
}


def route_of(label: str) -> Route:
    """The Route a label names: a Route's own name, or one of the labels above; UNKNOWN else."""
    if label in Route.__members__:
        return Route[label]
    return _LABELS.get(label, Route.UNKNOWN)


def mix_of(counts: Mapping[str, int]) -> RouteMix:
    """Counters by label ({'NVFS': 3, 'DYNAMIC_ROUTING': 1, 'COMPAT': 0}) as a route mix: labels
    mapped onto Route and summed, routes that counted nothing left out."""
    mix: RouteMix = {}
    for label, n in counts.items():
        if n:
            r = route_of(label)
            mix[r] = mix.get(r, 0) + int(n)
    return mix


def mix_json(mix: RouteMix) -> dict[str, int]:
    """A route mix as JSON: route names in name order."""
    return {r.value: n for r, n in sorted(mix.items(), key=lambda kv: kv[0].value)}


def shares(mix: RouteMix | RouteShares) -> RouteShares:
    """A mix as shares of its total, largest first (name order among equals); {} for an empty mix."""
    total = sum(mix.values())
    if total <= 0:
        return {}
    return {r: n / total for r, n in sorted(mix.items(), key=lambda kv: (-kv[1], kv[0].value)) if n > 0}


def share_json(mix: RouteMix | RouteShares) -> dict[str, float]:
    """A mix as a sweep point's "route": route name -> share of its I/Os, 4 decimals, largest first."""
    return {r.value: round(s, 4) for r, s in shares(mix).items()}


def label_of(mix: RouteMix | RouteShares) -> str:
    """The mix in a few characters for a table: its route alone ("COMPAT"), or each route with its
    share, largest first ("COMPAT 97% NVFS 3%"); "" for an empty mix (an ERROR point)."""
    sh = shares(mix)
    if len(sh) == 1:
        return next(iter(sh)).value
    return " ".join(f"{r.value} {s:.0%}" for r, s in sh.items())


def dominant(mix: RouteMix | RouteShares) -> Route:
    """The route most of the mix went by (UNKNOWN for an empty mix)."""
    sh = shares(mix)
    return next(iter(sh)) if sh else Route.UNKNOWN


# gdsdiag.sweep/1 wrote a point's route as a label: a Route's name, ERROR, KVIKIO_POSIX (kvikio's
# own POSIX path, no cuFile I/O counted: a host buffer and a copy) or MIXED(...), whose counts are
# its "route_mix" (the label is never parsed back: without counts, MIXED(...) is UNKNOWN)
_V1_LABELS = {"KVIKIO_POSIX": Route.DRAM_BOUNCE}


def point_shares(route: object, route_mix: object = None) -> RouteShares | None:
    """A sweep point's route as shares, from either form a document holds: gdsdiag.sweep/2's
    ``{"COMPAT": 1.0}``, or /1's label with its "route_mix" counts where it wrote them; None for
    an ERROR point (no route) and for a value that is neither."""
    if isinstance(route, dict):
        got: RouteShares = {}
        for k, v in route.items():
            if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0:
                r = route_of(str(k))
                got[r] = got.get(r, 0.0) + float(v)
        return shares(got) or None
    if not isinstance(route, str) or route in ("", "ERROR"):
        return None
    if isinstance(route_mix, dict):
        counts = {k: v for k, v in route_mix.items() if isinstance(v, int) and not isinstance(v, bool)}
        if sum(counts.values()) > 0:
            return shares(mix_of(counts))
    return {_V1_LABELS.get(route) or route_of(route): 1.0}


def point_label(route: object, route_mix: object = None) -> str | None:
    """A sweep point's route (either form, ``point_shares``) as its one-cell label; None for an
    ERROR point."""
    sh = point_shares(route, route_mix)
    return label_of(sh) if sh else None
