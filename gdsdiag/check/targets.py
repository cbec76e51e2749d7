"""Per target, the route I/O there would take on this node (issue 47 goal 1): every mounted file
system cuFile could open a file on, and every endpoint cuobj.json names for cuObject.

Mounts go through check's own rules: the route is ``paths.file_route`` (the rules of
``check --path`` and of trace's why), the deciding fact is why.py's node chain (the same facts
trace and validate lead with). Which of the two decides — the node or the mount — is asked of the
rules themselves: were every direct route of the node there, would this mount take one? If not,
the mount decides (a tmpfs, a TCP NFS mount, ext4 on virtio); if so, the node's missing piece does.

Endpoints: check/endpoints.py.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..platform import mounts as mnt
from ..routes import Route
from .context import CheckContext
from .facts import NodeFacts
from .model import MountRoute
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
    if "rdma_dev_addr_list" in deciding:
        return "list this node's RDMA NIC addresses in cufile.json properties.rdma_dev_addr_list"
    if fstype in ("nfs", "nfs4") and "rpcrdma does not export" in deciding:
        return "install the GDS-enabled rpcrdma (DOCA/MLNX_OFED with --with-nfsrdma) and load nvidia-fs"
    if fstype in ("nfs", "nfs4"):
        return "mount with -o proto=rdma (port 20049) on a client whose rpcrdma registers with nvidia-fs"
    if "register_nvfs_dma_ops" in deciding:
        return f"install {fstype}'s GDS-enabled client (it registers with nvidia-fs) and load nvidia-fs"
    return "put data that should reach the GPU by P2P on an NVMe-backed ext4/xfs mount, NFS over RDMA or a GDS-enabled distributed file system"
