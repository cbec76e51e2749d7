"""Per-path analysis: which filesystem and devices a directory lives on, a real O_DIRECT probe,
and the route a cuFile I/O there would take given the node's routes."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from ..platform import mounts as mnt
from ..routes import Route
from ..verdicts import Status
from .context import CheckContext
from .model import CheckResult, Evidence, PathVerdict, judged, plain

if TYPE_CHECKING:
    from ..schema import check as schema

# Filesystems cuFile runs through nvidia-fs when their storage driver is GDS-aware (nvidia-fs
# documentation "Key Features"; GDS release notes), keyed to the registration symbol needed.
_DFS_SYMBOL = {
    "lustre": "lustre_v1_register_nvfs_dma_ops",
    "beegfs": "beegfs_v1_register_nvfs_dma_ops",
    "gpfs": "ibm_scale_v1_register_nvfs_dma_ops",
}
_USERSPACE_RDMA_FS = ("wekafs",)


def analyse_path(ctx: CheckContext, path: str, routes: list[Route]) -> tuple[PathVerdict, list[CheckResult]]:
    results: list[CheckResult] = []
    reasons: list[str] = []
    real = os.path.realpath(path) if ctx.live else path
    if ctx.live and not os.path.isdir(real):
        r = CheckResult(
            "path.exists",
            f"path {path}",
            Status.FAIL,
            f"{path} is not a directory",
            [Evidence(path, "missing")],
            "",
            "pass an existing directory on the storage to test",
            path=path,
        )
        return PathVerdict(path, Route.NONE, [r.summary]), [r]
    m = mnt.mount_for(real, ctx.mounts)
    if m is None:
        r = CheckResult(
            "path.mount",
            f"mount of {path}",
            Status.FAIL,
            "no mount found",
            [Evidence("/proc/self/mountinfo", "no match")],
            path=path,
        )
        return PathVerdict(path, Route.NONE, [r.summary]), [r]
    opts = ",".join(m.options + m.super_options)
    results.append(
        CheckResult(
            "path.mount",
            f"mount of {path}",
            Status.INFO,
            f"{m.fstype} {m.source} on {m.mount_point}",
            [Evidence("/proc/self/mountinfo", f"{m.dev} {m.mount_point} {m.fstype} {m.source} {opts}")],
            path=path,
        )
    )
    chain = mnt.block_chain(ctx.fs, m.dev) if not m.dev.startswith("0:") else None
    devices, pcis = [], []
    if chain is not None:
        kinds = chain.kinds()
        leaves = chain.leaves()
        devices = [
            f"{n.name} ({n.kind}{', ' + n.controller if n.controller else ''}{', ' + n.pci if n.pci else ''})"
            for n in leaves
        ]
        pcis = [n.pci for n in leaves if n.pci]
        results.append(
            CheckResult(
                "path.devices",
                f"block devices under {path}",
                Status.INFO,
                f"{chain.name} → " + ", ".join(devices),
                [Evidence(f"/sys/dev/block/{m.dev}", plain(chain.to_json()))],
                path=path,
            )
        )
    else:
        kinds = set()
    # The O_DIRECT probe writes only a file it creates itself (O_EXCL|O_NOFOLLOW, one descriptor) and removes it.
    if ctx.live:
        probe = mnt.odirect_probe(real)
        results.append(
            judged(
                probe.ok,
                "path.odirect",
                f"O_DIRECT on {path}",
                probe.detail,
                [Evidence(f"{real}/gdsdiag-check-*.tmp", "created, written, read back, removed")],
                "cuFile registers O_DIRECT file descriptors; without O_DIRECT every I/O is buffered POSIX",
                "use a filesystem with O_DIRECT (ext4, xfs, NFS…)"
                if probe.errno_name == "EINVAL"
                else "run as a user who may write there, or choose a writable directory",
                path=path,
            )
        )
        odirect_ok = probe.ok
    else:
        odirect_ok = True
        results.append(
            CheckResult(
                "path.odirect",
                f"O_DIRECT on {path}",
                Status.SKIP,
                "not probed on a snapshot",
                [Evidence(path, "snapshot")],
                path=path,
            )
        )
    if chain is not None and m.fstype not in ("nfs", "nfs4"):
        usage = mnt.udev_fs_usage(ctx.fs, m.dev)
        ok = bool(usage)
        results.append(
            judged(
                ok,
                "path.udev",
                f"udev entry for {chain.name}",
                f"ID_FS_USAGE={usage}" if ok else f"no ID_FS_USAGE in /run/udev/data/b{m.dev}",
                [Evidence(f"/run/udev/data/b{m.dev}", "present" if usage is not None else "absent")],
                "libcufile looks up ID_FS_USAGE for the block device; without it cuFileHandleRegister fails with "
                "5027 CU_FILE_HANDLE_NOT_REGISTERED ('udev property not found: ID_FS_USAGE')",
                "run udevd (udevadm trigger) or bind-mount the host's /run/udev",
                path=path,
            )
        )
    levels = _md_levels(chain) if chain is not None else set()
    route, why = _denylisted(ctx, m, chain, routes, *_route(ctx, m, kinds, routes, odirect_ok, levels))
    reasons += why
    topo_rows: list[schema.PathTopology] = []
    if pcis:
        from ..topology.model import Role

        gpus = ctx.topology.by_role(Role.GPU)
        by = {(p.a.bdf, p.b.bdf): p for p in ctx.pairs}
        for g in gpus:
            for bdf in pcis:
                p = by.get((g.bdf, bdf))
                if p is None and bdf in ctx.topology.devices:
                    from ..topology.pairs import analyse_pair

                    p = analyse_pair(ctx.topology, g, ctx.topology.devices[bdf])
                if p is not None:
                    topo_rows.append(
                        {
                            "gpu": g.label,
                            "device": bdf,
                            "nvidia_smi": p.smi.value,
                            "p2p": p.verdict.value,
                            "p2pdma_map": p.p2pdma.value,
                        }
                    )
        if topo_rows:
            results.append(
                CheckResult(
                    "path.topology",
                    f"GPU ↔ storage placement for {path}",
                    Status.INFO,
                    "; ".join(f"{r['gpu']}↔{r['device']} {r['nvidia_smi']} {r['p2p']}" for r in topo_rows),
                    [Evidence("gdsdiag topology", plain(topo_rows[:4]))],
                    path=path,
                )
            )
    pv = PathVerdict(path, route, reasons, m.fstype, m.mount_point, devices, topo_rows)
    return pv, results


def file_route(ctx: CheckContext, path: str, routes: list[Route]) -> tuple[Route, list[str], str]:
    """The route a cuFile I/O of the file at PATH would take on this node (the rules analyse_path
    applies to a directory, without its O_DIRECT probe: nothing is written), the reasons, and its
    mount as one line ("ext4 /dev/vda1 on /"). For `trace`'s why: the same rules as `check`."""
    m = mnt.mount_for(path, ctx.mounts)
    if m is None:
        return Route.NONE, ["no mount found for it"], "unknown"
    chain = mnt.block_chain(ctx.fs, m.dev) if not m.dev.startswith("0:") else None
    kinds = chain.kinds() if chain is not None else set()
    devices = ", ".join(
        f"{n.name} ({n.kind}{', ' + n.controller if n.controller else ''})" for n in (chain.leaves() if chain else [])
    )
    levels = _md_levels(chain) if chain is not None else set()
    route, why = _denylisted(ctx, m, chain, routes, *_route(ctx, m, kinds, routes, True, levels))
    where = f"{m.fstype} {m.source} on {m.mount_point}" + (f" ({devices})" if devices else "")
    return route, why, where


DENYLIST = "cufile.json denylist."  # (how a reason from the denylist starts: check/why.py gives its fix)


def _denylisted(ctx, m, chain, routes: list[Route], route: Route, why: list[str]) -> tuple[Route, list[str]]:
    """The route after cufile.json's denylist: libcufile does not use GDS for a listed mount, file
    system or block device (NVIDIA's cufile.json template: "specify list of mount points to prevent
    IO using cuFile (e.g. ["/mnt/test"])", the same for "file-systems" (["lustre", "wekafs"]) and
    "block devices" (["/dev/nvme0n1"])), nor nvidia-fs for a listed vendor driver module ("to deny
    for nvidia-fs (e.g. ["nvme" , "nvme_rdma"])"). Where the mount would take a direct route the
    listing decides (the fallback, first); where it would not anyway, it is one more reason, after."""
    cfg = ctx.cufile
    leaves = chain.leaves() if chain is not None else []
    hits = []
    if m.mount_point in (cfg.get("denylist.mounts") or []):
        hits.append(f"{DENYLIST}mounts lists {m.mount_point}: cuFile does not use GDS for it")
    if m.fstype in (cfg.get("denylist.filesystems") or []):
        hits.append(f"{DENYLIST}filesystems lists {m.fstype}: cuFile does not use GDS for it")
    listed = set(cfg.get("denylist.devices") or [])
    for n in leaves:
        if n.name in listed or f"/dev/{n.name}" in listed:
            hits.append(f"{DENYLIST}devices lists /dev/{n.name}: cuFile does not use GDS for it")
    drivers = sorted({"nvme", "nvme_rdma"} & set(cfg.get("denylist.drivers") or []))
    if route == Route.NVFS and drivers and any(n.kind.startswith("nvme") for n in leaves):
        hits.append(f"{DENYLIST}drivers lists {drivers[0]}: nvidia-fs does not serve its namespaces")
    if not hits:
        return route, why
    if route in (Route.NVFS, Route.P2PDMA):
        return (Route.COMPAT if Route.COMPAT in routes else Route.NONE), hits + why
    return route, why + hits


# md RAID and PCI P2PDMA, per NVIDIA's current guidance: its gds-diag tool (NVIDIA/MagnumIO,
# gds-diag/checks/gds_report.py@13e31ef9520e, _raid0_p2pdma_architecture_check) treats RAID0 over
# NVMe as a P2PDMA route on NVIDIA Grace, or on Linux 7.1 or newer elsewhere, with
# block.raid.use_pci_p2pdma true ("and runtime testing confirms activation"); other RAID levels are
# not a direct GDS route. The kernel side is commit 02666132403a ("md: propagate BLK_FEAT_PCI_P2PDMA
# from member devices to RAID device", NVIDIA's Kiran Kumar Modukuri, 2026-05,
# https://git.zx2c4.com/laptop-kernel/commit/scripts/Makefile.thinlto?id=02666132403aec8fc5de315002894f713ef17dbc;
# it also passes raid1/raid10 through, parity RAID never). The older "GDS Support for NVMe Drives
# Using Linux PCI P2PDMA" (Release 615) still says RAID0 is not supported there.
MD_P2PDMA_LEVELS = {"raid0"}
MD_P2PDMA_KERNEL = (7, 1)
GRACE_CPU_PART = "0xd4f"  # Arm Neoverse V2, the NVIDIA Grace core (/proc/cpuinfo 'CPU part')


def _md_levels(node) -> set[str]:
    """The md levels ('raid0', ...) anywhere in a block chain."""
    out = {node.detail.strip()} if node.kind == "md" else set()
    for b in node.below:
        out |= _md_levels(b)
    return out


def _is_grace(ctx) -> bool:
    info = ctx.fs.read_text("/proc/cpuinfo") or ""
    return "CPU implementer\t: 0x41" in info and f"CPU part\t: {GRACE_CPU_PART}" in info


def _md_p2pdma(ctx, levels: set[str]) -> tuple[bool, str]:
    """(whether md may pass P2PDMA through here, why)."""
    from ..platform.kernel import kernel_version_tuple

    other = sorted(lv for lv in levels if lv not in MD_P2PDMA_LEVELS)
    if other:
        return False, (
            f"md {', '.join(other)}: NVIDIA documents only RAID0 over NVMe as a P2PDMA route (parity RAID can "
            "never pass it: the CPU computes parity)"
        )
    ver = kernel_version_tuple(ctx.release)
    grace = _is_grace(ctx)
    if ver is None and not grace:
        return False, "md RAID0: kernel version unknown, cannot tell whether md passes PCI P2PDMA through"
    if not grace and ver is not None and ver < MD_P2PDMA_KERNEL:
        return False, (
            f"md RAID0 on kernel {ver[0]}.{ver[1]}: RAID0 P2PDMA needs NVIDIA Grace or Linux "
            f"{MD_P2PDMA_KERNEL[0]}.{MD_P2PDMA_KERNEL[1]} or newer (NVIDIA gds-diag; kernel commit 02666132403a)"
        )
    where = "NVIDIA Grace" if grace else f"kernel {ver[0]}.{ver[1]}" if ver else "this node"
    return True, (
        f"md RAID0 on {where}: a P2PDMA route when block.raid.use_pci_p2pdma is true and every member supports "
        "P2PDMA (NVIDIA gds-diag: confirm by a run, e.g. gdsdiag trace; the older P2PDMA guide, Release 615, "
        "still lists RAID0 as unsupported)"
    )


# cufile.json's own say per file system, NVIDIA's "cuFile Compatibility Mode" page (API reference,
# docs.nvidia.com/gpudirect-storage/api-reference-guide/topics/cufile-compatibility.html): the keys
# that force compatibility mode for some I/O of a mount even where the mount has a direct route.
COMPAT_PAGE = "NVIDIA cuFile Compatibility Mode"
_RDMA_FS = ("nfs", "nfs4", "lustre", "beegfs", "gpfs", "wekafs")
_USERSPACE_RDMA = {"wekafs": "weka", "gpfs": "gpfs"}  # (libcufile's userspace RDMA: gdscheck's 'Userspace RDMA')


def _fs_key(fs_type: str) -> str:
    """The cufile.json fs.<name> section of a mount's file system type."""
    if fs_type.startswith("lustre"):
        return "lustre"
    return {"wekafs": "weka", "nfs4": "nfs"}.get(fs_type, fs_type)


def _config_keys(ctx, m, route: Route, why: list[str], fallback: Route) -> tuple[Route, list[str]]:
    """What cufile.json's per-file-system keys change of a mount's route (reads) and its writes. The
    notes on writes and small I/O are made where reads have a direct route (where all is compat
    already they say nothing new); WekaFS's are made always (its writes are compat by default)."""
    g = ctx.cufile.get
    fs_type, key = m.fstype, _fs_key(m.fstype)
    notes: list[str] = []
    if fs_type in _RDMA_FS or fs_type.startswith("lustre"):
        order = g("properties.rdma_dynamic_routing_order") or []
        if (
            route in (Route.NVFS, Route.P2PDMA)
            and g("properties.rdma_dynamic_routing") is True
            and order == ["SYS_MEM"]
        ):
            route = fallback
            notes.append(
                'properties.rdma_dynamic_routing_order is ["SYS_MEM"] alone: every I/O of a distributed file '
                f"system goes through compatibility mode ({COMPAT_PAGE})"
            )
        if g("properties.gds_rdma_write_support") is False and route in (Route.NVFS, Route.P2PDMA):
            notes.append(f"writes: compatibility mode (properties.gds_rdma_write_support false; {COMPAT_PAGE})")
    if fs_type in _USERSPACE_RDMA:
        addrs = (g("properties.rdma_dev_addr_list") or []) + (g(f"fs.{key}.rdma_dev_addr_list") or [])
        if not addrs:
            if route in (Route.NVFS, Route.P2PDMA):
                route = fallback
            notes.append(
                f"no properties.rdma_dev_addr_list (nor fs.{key}.rdma_dev_addr_list): cuFile's userspace RDMA "
                f"has no NIC to use, and {COMPAT_PAGE} lists WekaFS and IBM Spectrum Scale mounts without one as compat"
            )
    if fs_type == "wekafs" and g("fs.weka.rdma_write_support") is not True:
        said = "false" if g("fs.weka.rdma_write_support") is False else "unset, false by default"
        notes.append(f"writes: compatibility mode (fs.weka.rdma_write_support {said}; {COMPAT_PAGE})")
    if fs_type == "gpfs" and g("fs.gpfs.gds_write_support") is False and route in (Route.NVFS, Route.P2PDMA):
        notes.append("writes: compatibility mode (fs.gpfs.gds_write_support false)")
    if key in ("lustre", "beegfs", "scatefs"):
        kb = g(f"fs.{key}.posix_gds_min_kb")
        if isinstance(kb, int) and kb > 0 and route in (Route.NVFS, Route.P2PDMA):
            notes.append(
                f"I/O of up to {kb} KB: compatibility mode, even with allow_compat_mode false "
                f"(fs.{key}.posix_gds_min_kb; {COMPAT_PAGE})"
            )
    if g("fs.generic.posix_unaligned_writes") is True and route in (Route.NVFS, Route.P2PDMA):
        notes.append(
            f"writes not aligned to 4 KB: compatibility mode (fs.generic.posix_unaligned_writes; {COMPAT_PAGE})"
        )
    if notes and route == fallback and route not in (Route.NVFS, Route.P2PDMA) and why:
        # (a key that took the direct route away leads: it is what decided)
        lead = [n for n in notes if not n.startswith(("writes", "I/O of up to"))]
        return route, lead + why + [n for n in notes if n not in lead]
    return route, why + notes


def _route(
    ctx,
    m,
    kinds: set[str],
    routes: list[Route],
    odirect_ok: bool,
    md_levels: set[str] | None = None,
) -> tuple[Route, list[str]]:
    """The route of a cuFile read on mount M: the file system and its devices (``_route_fs``),
    then what cufile.json's per-file-system keys say of this mount (its denylist: ``_denylisted``)."""
    fallback = Route.COMPAT if Route.COMPAT in routes else Route.NONE
    route, why = _route_fs(ctx, m, kinds, routes, odirect_ok, md_levels)
    return _config_keys(ctx, m, route, why, fallback)


def _route_fs(
    ctx, m, kinds: set[str], routes: list[Route], odirect_ok: bool, md_levels: set[str] | None = None
) -> tuple[Route, list[str]]:
    allow = ctx.cufile.get("properties.allow_compat_mode")
    fallback = Route.COMPAT if Route.COMPAT in routes else Route.NONE
    why: list[str] = []
    fs_type = m.fstype
    if not odirect_ok:
        return fallback, ["no O_DIRECT on this filesystem: cuFile can only use buffered POSIX I/O"]
    ks = ctx.kallsyms
    if fs_type in ("ext4", "xfs"):
        if fs_type == "ext4" and (m.option("data") or "ordered") != "ordered":
            return fallback, [f"ext4 data={m.option('data')}: GDS supports ext4 only in ordered mode"]
        if kinds & {"dm"}:
            return fallback, ["device-mapper (LVM, dm-crypt) under the filesystem: cuFile uses compat"]
        if kinds & {"md"} and not kinds & {"nvme"}:
            return fallback, ["md RAID without NVMe members"]
        if "nvme" in kinds or "nvme-multipath" in kinds:
            if Route.NVFS in routes:
                why.append("NVMe namespace with a GDS-aware nvme driver and nvidia-fs loaded")
                return Route.NVFS, why
            md_ok, md_why = _md_p2pdma(ctx, md_levels or set()) if "md" in kinds else (True, "")
            if md_why:
                why.append(md_why)
            if Route.P2PDMA in routes and md_ok and "nvme-multipath" not in kinds:
                keys = ["properties.use_pci_p2pdma", "block.nvme.use_pci_p2pdma"]
                if "md" in kinds:
                    keys.append("block.raid.use_pci_p2pdma")
                wants = any(ctx.cufile.get(k) for k in keys)
                if wants:
                    what = "md RAID over NVMe" if "md" in kinds else "NVMe namespace"
                    return Route.P2PDMA, why + [f"{what}, kernel P2PDMA ready and use_pci_p2pdma set"]
                why.append("P2PDMA is ready but cufile.json does not set use_pci_p2pdma")
            if "nvme-multipath" in kinds:
                why.append("native NVMe multipath: not supported by PCI P2PDMA")
            why.append("NVMe without a direct route on this node")
            return fallback, why
        backing = ", ".join(sorted(kinds)) or "no block device"
        return fallback, [f"{fs_type} on {backing}: not an NVMe namespace, so no GDS-aware driver"]
    if fs_type in ("nfs", "nfs4"):
        proto = m.option("proto")
        if proto == "rdma" and ks.has("rpcrdma_register_nvfs_dma_ops") and Route.NVFS in routes:
            return Route.NVFS, ["NFS over RDMA with rpcrdma's nvidia-fs registration"]
        if proto == "rdma":
            # (the mount is right; what is missing is on the node: a proto=rdma mount told to mount
            # with proto=rdma was the misreading of NVIDIA's own capture, tests/fixtures/mounts)
            return fallback, [
                "NFS proto=rdma, but rpcrdma does not export rpcrdma_register_nvfs_dma_ops "
                "(not the GDS-enabled rpcrdma, or nvidia-fs is missing)"
            ]
        return fallback, [f"NFS proto={proto}: GDS needs proto=rdma and the GDS-enabled rpcrdma"]
    if fs_type in _DFS_SYMBOL or fs_type.startswith("lustre"):
        sym = _DFS_SYMBOL.get(fs_type, "lustre_v1_register_nvfs_dma_ops")
        if ks.has(sym) and Route.NVFS in routes:
            return Route.NVFS, [f"{fs_type} client registered with nvidia-fs ({sym})"]
        return fallback, [f"{fs_type}: its client does not export {sym} (or nvidia-fs is missing)"]
    if fs_type in _USERSPACE_RDMA_FS:
        return fallback if Route.COMPAT in routes else Route.NONE, [
            "WekaFS: cuFile's userspace RDMA route; gdsdiag cannot confirm it from the kernel — use gdsdiag trace"
        ]
    why.append(f"{fs_type}: not a filesystem cuFile can drive by P2P (overlay, tmpfs, fuse… run in compat)")
    if allow is False:
        why.append("allow_compat_mode is false: cuFile I/O here fails")
    return fallback, why
