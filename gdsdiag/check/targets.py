"""Per target, the route I/O there would take on this node (issue 47 goal 1): every mounted file
system cuFile could open a file on, and every endpoint cuobj.json names for cuObject.

Mounts go through check's own rules: the route is ``paths.file_route`` (the rules of
``check --path`` and of trace's why), the deciding fact is why.py's node chain (the same facts
trace and validate lead with). Which of the two decides — the node or the mount — is asked of the
rules themselves: were every direct route of the node there, would this mount take one? If not,
the mount decides (a tmpfs, a TCP NFS mount, ext4 on virtio); if so, the node's missing piece does.

Endpoints: cuObject moves a GET or PUT by RDMA between the server and a buffer the client
registered, in GPU memory or in host memory (NVIDIA cuObjClient API: "Support for system memory,
CUDA managed memory, and CUDA device memory"; GPU memory is registered through the peer-memory
type properties.rdma_peer_type, "nvidia_peermem" by default, or "dmabuf", which "requires platform
support for DMA-BUF"; CUFILE_DMABUF_ENABLE — CUOBJ_DMABUF_ENABLE in GDS 1.20 — "is applied after
the JSON configuration"). What the node shows decides: the endpoint is an address or device of
this node with an RDMA device, a port up, and a way to register GPU memory.
"""

from __future__ import annotations

import ipaddress
from typing import TYPE_CHECKING

from ..platform import mounts as mnt
from ..platform import netaddr
from ..routes import Route
from .context import CheckContext
from .facts import NodeFacts
from .model import EndpointRoute, MountRoute
from .paths import file_route
from .why import _explaining, _node_chain

if TYPE_CHECKING:
    from .model import CheckResult, NodeVerdict

# Kernel file systems that hold no files a program reads as data (and devtmpfs: device nodes).
PSEUDO_FS = frozenset(
    (
        "proc sysfs devtmpfs devpts cgroup cgroup2 tracefs debugfs securityfs pstore bpf configfs fusectl "
        "mqueue hugetlbfs autofs binfmt_misc rpc_pipefs nsfs efivarfs selinuxfs fuse.gvfsd-fuse"
    ).split()
)
DIRECT = (Route.NVFS, Route.P2PDMA)


def visible_mounts(ctx: CheckContext) -> list[mnt.Mount]:
    """Mounts a program can open files on: not a kernel pseudo file system nor under /proc or /sys
    (cgroup v1's tmpfs parent), and the last one mounted on its point (an earlier mount there is
    hidden: mountinfo is in mount order)."""
    last: dict[str, mnt.Mount] = {}
    for m in ctx.mounts:
        last.pop(m.mount_point, None)  # (whatever is mounted over a point hides what was there)
        if m.fstype in PSEUDO_FS or m.mount_point.startswith(("/proc/", "/sys/")):
            continue
        last[m.mount_point] = m
    return list(last.values())


def mount_routes(ctx: CheckContext, verdict: NodeVerdict, results: list[CheckResult]) -> list[MountRoute]:
    node = NodeFacts.from_results(verdict, results, ctx)
    out = []
    for m in visible_mounts(ctx):
        route, reasons, where = file_route(ctx, m.mount_point, verdict.routes)
        facts, fix, _ = _node_chain(node, m.mount_point)
        own = [r for r in reasons if "without a direct route" not in r]
        by = "mount"
        if route in DIRECT:
            deciding = reasons[0] if reasons else f"{route.value} on this node"
            fix = ""
        else:
            # would this mount take a direct route were the node's direct routes all there? If not,
            # the mount (or cufile.json's say on it) decides; if so, the node's missing piece does.
            # A node with no cuFile route at all (no driver, no libcufile) decides for every mount.
            would = file_route(ctx, m.mount_point, [*DIRECT, Route.COMPAT])[0]
            if verdict.routes and would not in DIRECT and own:
                deciding = own[0]
                fix = _mount_fix(m.fstype, deciding)
            else:
                by = "node"
                i = _explaining(facts)
                lead = facts[i] if i is not None else None
                deciding = f"{lead.fact}: {lead.value} ({lead.source})" if lead else verdict.summary
                if not verdict.routes and not lead:
                    deciding = "; ".join(verdict.reasons[:1]) or verdict.summary
                fix = fix or ""
        out.append(MountRoute(m.mount_point, m.fstype, m.source, where, route, deciding, reasons, fix or "", by))
    return out


def _mount_fix(fstype: str, deciding: str) -> str:
    if "denylist" in deciding:
        return "remove it from cufile.json's denylist if GDS should serve it"
    if fstype in ("nfs", "nfs4"):
        return "mount with -o proto=rdma (port 20049) on a client whose rpcrdma registers with nvidia-fs"
    return "put data that should reach the GPU by P2P on an NVMe-backed ext4/xfs mount, NFS over RDMA or a GDS-enabled distributed file system"


def endpoint_routes(ctx: CheckContext) -> tuple[list[EndpointRoute], str]:
    """Each endpoint of cuobj.json's rdma_dev_addr_list, with the route a cuObject GET/PUT through
    it would take; and a line on where the list came from (or why there is none)."""
    c = ctx.cuobj
    props = (c.data or {}).get("properties") if isinstance(c.data, dict) else None
    props = props if isinstance(props, dict) else {}
    addrs = props.get("rdma_dev_addr_list")
    if c.path is None:
        return [], "no cuobj.json in effect: it names no endpoint"
    if not isinstance(addrs, list) or not addrs:
        return [], f"{c.path} names no endpoint (properties.rdma_dev_addr_list unset or empty)"
    peer, peer_from = _peer_type(ctx, props)
    local = netaddr.read_local_addresses(ctx.fs)
    gpu_ok, gpu_why = _gpu_memory(ctx, peer, peer_from)
    out = []
    for a in addrs[:64]:
        out.append(_endpoint(ctx, str(a)[:200], local, gpu_ok, gpu_why))
    return out, f"{len(addrs)} endpoint(s) in {c.path} (properties.rdma_dev_addr_list)"


def _peer_type(ctx: CheckContext, props: dict) -> tuple[str, str]:
    """(peer-memory type, where it was set): the environment after the JSON, as NVIDIA says."""
    env = dict(ctx.cuobj.overrides) | dict(ctx.cuobj.fallbacks)
    for k in ("CUOBJ_DMABUF_ENABLE", "CUFILE_DMABUF_ENABLE"):
        v = env.get(k)
        if v is not None:
            return ("dmabuf" if v.strip().upper() == "TRUE" else "nvidia_peermem"), f"{k}={v}"
    v = props.get("rdma_peer_type")
    if isinstance(v, str) and v:
        return v, f"{ctx.cuobj.path} properties.rdma_peer_type"
    return "nvidia_peermem", "rdma_peer_type unset (nvidia_peermem by default)"


def _gpu_memory(ctx: CheckContext, peer: str, peer_from: str) -> tuple[bool, str]:
    """Whether an RDMA NIC can register this node's GPU memory for cuObject, and why."""
    if not ctx.driver.present:
        return False, "no NVIDIA driver (/proc/driver/nvidia/version): no GPU memory to register"
    if peer == "nvidia_peermem":
        if "nvidia_peermem" in ctx.modules:
            return True, f"nvidia_peermem loaded ({peer_from})"
        return False, f"nvidia_peermem not loaded (/proc/modules; {peer_from})"
    if peer == "dmabuf":
        dmabuf = ctx.kconfig.value("CONFIG_DMA_SHARED_BUFFER")
        if dmabuf == "n":
            return False, f"kernel without CONFIG_DMA_SHARED_BUFFER ({peer_from})"
        if ctx.driver.open_module is False:
            return (
                False,
                f"the proprietary NVIDIA kernel module exports no dma-buf for RDMA; the open one does ({peer_from})",
            )
        if dmabuf is None or ctx.driver.open_module is None:
            return True, f"dmabuf requested ({peer_from}); platform support not confirmed from the node"
        return True, f"dmabuf: kernel CONFIG_DMA_SHARED_BUFFER and the open NVIDIA kernel module ({peer_from})"
    return False, f"rdma_peer_type {peer!r} is neither 'dmabuf' nor 'nvidia_peermem' ({peer_from})"


def _endpoint(
    ctx: CheckContext, entry: str, local: netaddr.LocalAddresses, gpu_ok: bool, gpu_why: str
) -> EndpointRoute:
    fs = ctx.fs
    iface = None
    devices: list[str] = []
    try:
        ip = str(ipaddress.ip_address(entry.split("%")[0]))
    except ValueError:
        ip = None
    if ip is not None:
        if not local.readable:
            return EndpointRoute(
                entry, None, [], Route.UNKNOWN, "unknown", "this root has no /proc/net: its addresses are not known", ""
            )
        if ip not in local.by_address:
            return EndpointRoute(
                entry,
                None,
                [],
                Route.NONE,
                "none",
                f"{entry} is not an address of this node (/proc/net)",
                "list this node's RDMA interface addresses in rdma_dev_addr_list",
            )
        iface = local.by_address[ip] or None
        devices = netaddr.rdma_devices_of(fs, iface) if iface else []
    elif fs.exists(f"/sys/class/infiniband/{entry}"):
        devices = [entry]
    elif fs.exists(f"/sys/class/net/{entry}"):
        iface = entry
        devices = netaddr.rdma_devices_of(fs, entry)
    else:
        return EndpointRoute(
            entry,
            None,
            [],
            Route.NONE,
            "none",
            f"no device or interface {entry} on this node (/sys/class/infiniband, /sys/class/net)",
            "name an RDMA device or interface of this node",
        )
    if not devices:
        return EndpointRoute(
            entry,
            iface,
            [],
            Route.NONE,
            "none",
            f"{iface or entry} has no RDMA device (/sys/class/infiniband)",
            "use an RDMA-capable NIC's address (ConnectX, RoCE or InfiniBand)",
        )
    ports = [(d, *netaddr.active_ports(fs, d)) for d in devices]
    if not any(active for _, active, _ in ports):
        seen = "; ".join(f"{d} {', '.join(s) or 'no ports'}" for d, _, s in ports)
        return EndpointRoute(
            entry,
            iface,
            devices,
            Route.NONE,
            "none",
            f"no active port ({seen})",
            "bring a port up (cable, subnet manager, ip link)",
        )
    if gpu_ok:
        return EndpointRoute(entry, iface, devices, Route.RDMA, "GPU", gpu_why, "")
    return EndpointRoute(
        entry,
        iface,
        devices,
        Route.DRAM_BOUNCE,
        "host",
        f"GPU memory cannot be registered: {gpu_why}",
        'modprobe nvidia_peermem, or set properties.rdma_peer_type to "dmabuf" in cuobj.json where the platform supports DMA-BUF',
    )
