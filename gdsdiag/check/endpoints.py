"""Per cuObject endpoint, the route a GET/PUT through it would take on this node (issue 47 goal 1).

cuObject moves a GET or PUT by RDMA between the server and a buffer the client
registered, in GPU memory or in host memory (NVIDIA cuObjClient API: "Support for system memory,
CUDA managed memory, and CUDA device memory"; GPU memory is registered through the peer-memory
type properties.rdma_peer_type, "nvidia_peermem" by default, or "dmabuf", which "requires platform
support for DMA-BUF"; CUFILE_DMABUF_ENABLE — CUOBJ_DMABUF_ENABLE in GDS 1.20 — "is applied after
the JSON configuration"). What the node shows decides: the endpoint is an address or device of
this node with an RDMA device, a port up, and a way to register GPU memory.
"""

from __future__ import annotations

import ipaddress

from ..platform import netaddr
from ..routes import Route
from .context import CheckContext
from .model import EndpointRoute


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
