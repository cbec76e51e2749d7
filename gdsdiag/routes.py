"""The one route vocabulary: how bytes moved (or can move) between storage and GPU memory.

``check`` says which of these a node *can* take, ``trace`` labels each I/O with the one it *did*
take, ``sweep`` reports the one each point measured, and cuFile's statistics are mapped onto it.
A ``str`` enum, so JSON documents and comparisons with the plain names keep working.
"""

from __future__ import annotations

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
