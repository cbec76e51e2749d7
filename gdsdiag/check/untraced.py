"""Routes host tracing cannot see (issue 47 goal 4): paths a program's storage bytes can take on this
node without a system call, a file system or the kernel block layer that `gdsdiag trace` watches.

- An NVMe controller's PCI function bound to a kernel-bypass driver. SPDK's scripts/setup.sh
  unbinds every NVMe function (PCI class 0x010802: SPDK_PCI_CLASS_NVME, include/spdk/pci_ids.h)
  that has no active mount from the kernel's ``nvme`` driver and binds it to ``vfio-pci``, or to
  ``uio_pci_generic`` without an IOMMU (its own output: "0000:65:00.0 (8086 4140): nvme ->
  uio_pci_generic", spdk/spdk#1887), or DPDK's ``igb_uio``; user-space NVMe drivers that read
  straight into GPU memory (enfiskutensykkel/ssd-gpu-dma, which binds the SSD to vfio-pci) do the
  same. The device then has no block device: its reads are NVMe commands a process writes into
  mapped queues, so no probe of the tracer fires. A function passed to a VM through vfio-pci is
  read by the guest: invisible here too. What memory the reads land in is the program's choice
  (hugepages, or GPU memory): the route is not known from the node (UNKNOWN).
- cuObject over RDMA: a GET or PUT moves its bytes between the object server and a registered
  buffer by the NIC (user-space verbs), not through a file (check/endpoints.py endpoint_routes
  decides each endpoint's route; this reuses it).
- io_uring reads into GPU memory through a registered dma-buf: no node-visible signal exists (no
  kernel config or sysfs file says a program uses it), so nothing is claimed (docs/checks.md).

Readers take the check context's root (sysfs of a live node or of a snapshot); this module only
decides, once, for `check`'s results, its ``--json`` key ``untraced`` and the trace's why.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..platform import netaddr
from ..routes import Route
from ..verdicts import Status
from .context import CheckContext
from .endpoints import endpoint_routes
from .model import INVISIBLE, CheckResult, Evidence

if TYPE_CHECKING:
    from ..schema import check as schema

NVME_CLASS = 0x010802  # mass storage / non-volatile memory / NVM Express (PCI code and ID assignment spec)
# driver name (the basename of /sys/bus/pci/devices/<bdf>/driver) -> what binds it
BYPASS_DRIVERS = {
    "vfio-pci": "VFIO: a user-space driver (SPDK, ssd-gpu-dma…) or a VM it is passed through to",
    "uio_pci_generic": "UIO: a user-space driver (SPDK's setup.sh without an IOMMU)",
    "igb_uio": "DPDK's igb_uio: a user-space driver",
}
NVME_ID, CUOBJ_ID = "untraced.nvme_bypass", "untraced.cuobject_rdma"  # (both under UNTRACED_PREFIX)
SPDK_SOURCE = (
    "SPDK scripts/setup.sh binds NVMe functions (class 0x010802) to vfio-pci or uio_pci_generic for its "
    "user-space driver (its output: '0000:65:00.0 (8086 4140): nvme -> uio_pci_generic', spdk/spdk#1887); "
    "the device then has no block device, and the trace's probes are system "
    "calls, the page cache and the block layer, none of which such I/O passes"
)
CUOBJ_SOURCE = (
    "NVIDIA cuObjClient API: a GET/PUT is an RDMA transfer between the server and a buffer the client "
    "registered (GPU or system memory); no file and no block I/O on this node"
)


@dataclass
class UntracedPath:
    """A path a program's storage bytes can take here that the host tracer cannot see."""

    kind: str  # nvme_bypass | cuobject_rdma
    target: str  # the PCI function, or the cuObject endpoint
    route: Route  # UNKNOWN for a bypassed NVMe function (the program picks the memory); the endpoint's
    deciding: str
    evidence: list[Evidence] = field(default_factory=list)

    def to_json(self) -> schema.UntracedPath:
        return {
            "kind": self.kind,
            "target": self.target,
            "route": self.route.value,
            "deciding": self.deciding,
            "evidence": [e.to_json() for e in self.evidence],
        }


def nvme_bypass(ctx: CheckContext) -> tuple[list[UntracedPath], dict[str, int]]:
    """The NVMe functions bound to a kernel-bypass driver, and every NVMe function's driver counted
    ("none" for a function bound to no driver)."""
    from ..topology.model import Role

    out = []
    drivers: dict[str, int] = {}
    for d in sorted(ctx.topology.by_role(Role.NVME), key=lambda d: d.bdf):
        drv = d.fn.driver
        drivers[drv or "none"] = drivers.get(drv or "none", 0) + 1
        if drv not in BYPASS_DRIVERS:
            continue
        base = f"/sys/bus/pci/devices/{d.bdf}"
        ids = f"{d.fn.vendor or 0:04x}:{d.fn.device or 0:04x}"
        out.append(
            UntracedPath(
                "nvme_bypass",
                d.bdf,
                Route.UNKNOWN,
                f"NVMe {d.bdf} ({ids}) on {drv}, not the kernel nvme driver ({BYPASS_DRIVERS[drv]})",
                [Evidence(f"{base}/driver", drv), Evidence(f"{base}/class", f"0x{d.fn.class_code or 0:06x}")],
            )
        )
    return out, drivers


def cuobject_rdma(ctx: CheckContext, endpoints=None) -> list[UntracedPath]:
    """The cuObject endpoints of cuobj.json with a working RDMA path (ENDPOINTS: endpoint_routes'
    answer where the caller has it)."""
    if endpoints is None:
        endpoints = endpoint_routes(ctx)[0]
    out = []
    for e in endpoints:
        if e.route not in (Route.RDMA, Route.DRAM_BOUNCE):
            continue
        ev = [Evidence(ctx.cuobj.path or "cuobj.json", f"properties.rdma_dev_addr_list: {e.endpoint}")]
        for d in e.rdma_devices[:4]:
            ev.append(
                Evidence(f"/sys/class/infiniband/{d}/ports/*/state", "; ".join(netaddr.active_ports(ctx.fs, d)[1]))
            )
        into = "GPU memory" if e.route == Route.RDMA else "host memory, then copied"
        out.append(
            UntracedPath(
                "cuobject_rdma",
                e.endpoint,
                e.route,
                f"cuObject endpoint {e.endpoint} ({', '.join(e.rdma_devices)}): GET/PUT by RDMA into {into}",
                ev,
            )
        )
    return out


def untraced_paths(ctx: CheckContext, endpoints=None) -> list[UntracedPath]:
    return nvme_bypass(ctx)[0] + cuobject_rdma(ctx, endpoints)


def check_untraced(ctx: CheckContext) -> list[CheckResult]:
    """One result per kind: the paths as evidence. INFO where one exists (a fact of the node, not a
    fault: the trace's why names it), PASS where the NVMe functions are all the kernel's."""
    out = []
    bypassed, drivers = nvme_bypass(ctx)
    title = "NVMe controllers on a kernel-bypass driver"
    if bypassed:
        out.append(
            CheckResult(
                NVME_ID,
                title,
                Status.INFO,
                f"{len(bypassed)} NVMe controller(s) off the kernel's nvme driver ("
                + ", ".join(f"{p.target} {e.value}" for p in bypassed[:8] for e in p.evidence[:1])
                + (", …" if len(bypassed) > 8 else "")
                + f"): their I/O is {INVISIBLE}",
                [e for p in bypassed for e in p.evidence][:32],
                SPDK_SOURCE,
                "none needed for the node; to trace a program's I/O on it, bind it back to nvme "
                "(SPDK: scripts/setup.sh reset)",
            )
        )
    elif drivers:
        seen = ", ".join(f"{k}: {v}" for k, v in sorted(drivers.items()))
        out.append(
            CheckResult(
                NVME_ID,
                title,
                Status.PASS,
                f"no NVMe controller on a kernel-bypass driver (drivers bound: {seen})",
                [Evidence("/sys/bus/pci/devices/*/driver of class 0x010802", seen)],
            )
        )
    rdma = cuobject_rdma(ctx)
    if rdma:
        out.append(
            CheckResult(
                CUOBJ_ID,
                "cuObject over RDMA",
                Status.INFO,
                f"{len(rdma)} cuObject endpoint(s) with an RDMA path ("
                + ", ".join(f"{p.target} {p.route.value}" for p in rdma[:8])
                + (", …" if len(rdma) > 8 else "")
                + f"): their transfers are {INVISIBLE}",
                [e for p in rdma for e in p.evidence][:32],
                CUOBJ_SOURCE,
            )
        )
    return out
