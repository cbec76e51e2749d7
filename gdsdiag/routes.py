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


# A route mix: how many I/Os (or bytes) went by each route, as a sweep point's cuFile statistics
# count them. The one shape for it: a sweep point writes it as "route_mix" ({"NVFS": 3, "COMPAT": 1}),
# validate reads it back as it is (no label to parse).
RouteMix = dict[Route, int]

# Labels other vocabularies count by, onto Route: cuFile's statistics (level-3 n_dr_*: dynamic
# routing, bounced through a peer GPU), the sweep's kvikio-without-cuFile label, the tracer's
# kernel paths.
_LABELS = {
    "DYNAMIC_ROUTING": Route.PEER_GPU,
    "KVIKIO_POSIX": Route.DRAM_BOUNCE,  # kvikio's own POSIX path: host buffer + copy
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
