"""The node-level checks. Each is a small function over a ``CheckContext`` returning
``CheckResult``s; docs/checks.md lists each one with the source of its rule."""

from __future__ import annotations

import re

from ..platform import kernel
from ..platform.kernel import NVFS_REGISTRATION_SYMBOLS
from ..routes import Route
from ..verdicts import Severity, Status
from .context import CheckContext
from .cuobj import check_cuobj
from .known_issues import KNOWN_ISSUE_CHECKS
from .model import CheckResult, Evidence, judged, plain
from .untraced import check_untraced

P2PDMA_MIN_OPEN_DRIVER = (565, 47)  # "Install OpenRM version 565.47 or above" (GDS support for NVMe, pre-installation)
P2PDMA_MIN_KERNEL = (6, 2)  # GDS troubleshooting guide §14.1
P2PDMA_GPUS = ("A100", "A40", "L4", "L40S", "H100", "H200", "B100", "B200", "B300")  # §14.2
V2_ABI_KERNEL = (6, 17)  # nvme v2 (blk_rq_dma_map_iter) ops, gds-nvidia-fs src/nvfs-dma.c


# where CUFILE_FORCE_COMPAT_MODE is read from: the environment check runs in (a trace's check child
# has the tracer's, not the traced program's)
FORCE_ENV_SOURCE = "environment of gdsdiag (CUFILE_FORCE_COMPAT_MODE)"


def _ev(source: str, value) -> Evidence:
    return Evidence(source, value)  # Evidence turns None, dicts and lists into plain text


def _skip(cid: str, title: str, reason: str, source: str, route: Route | None = None) -> CheckResult:
    return CheckResult(cid, title, Status.SKIP, reason, [_ev(source, reason)], route=route)


def check_driver(ctx: CheckContext) -> list[CheckResult]:
    d = ctx.driver
    if not d.present:
        return [
            CheckResult(
                "nvidia.driver",
                "NVIDIA kernel driver",
                Status.FAIL,
                "no NVIDIA driver loaded",
                [_ev("/proc/driver/nvidia/version", "missing")],
                "every cuFile route, compatibility mode included, needs the NVIDIA driver and a GPU",
                "install the NVIDIA open kernel module driver and reboot (or modprobe nvidia)",
            ),
            _skip("nvidia.gpus", "GPUs seen by the driver", "no NVIDIA driver", "/proc/driver/nvidia/gpus"),
        ]
    flavour = "open kernel module" if d.open_module else "proprietary kernel module"
    out = [
        CheckResult(
            "nvidia.driver",
            "NVIDIA kernel driver",
            Status.PASS,
            f"{d.version} ({flavour})",
            [_ev("/proc/driver/nvidia/version", d.version_line)],
        )
    ]
    gpus = d.gpus
    models = {bdf: info.get("Model", "?") for bdf, info in gpus.items()}
    if not gpus:
        out.append(
            CheckResult(
                "nvidia.gpus",
                "GPUs seen by the driver",
                Status.FAIL,
                "driver loaded but no GPU listed",
                [_ev("/proc/driver/nvidia/gpus/", "empty")],
                "cuFile needs a GPU",
                "check nvidia-smi and dmesg",
            )
        )
    else:
        out.append(
            CheckResult(
                "nvidia.gpus",
                "GPUs seen by the driver",
                Status.PASS,
                ", ".join(f"{m} ({b})" for b, m in sorted(models.items())),
                [_ev(f"/proc/driver/nvidia/gpus/{b}/information", f"Model: {m}") for b, m in sorted(models.items())],
            )
        )
    return out


def check_nvfs(ctx: CheckContext) -> list[CheckResult]:
    n = ctx.nvfs
    out = []
    ev = [_ev("/proc/modules", "nvidia_fs " + ("loaded" if n.loaded else "absent"))]
    if not n.loaded:
        out.append(
            CheckResult(
                "nvfs.loaded",
                "nvidia-fs kernel module",
                Status.FAIL,
                "nvidia-fs is not loaded",
                ev,
                "the nvidia-fs route (P2P DMA from GDS-aware NVMe/NFS/Lustre… drivers) needs nvidia_fs.ko",
                "install the nvidia-fs package matching the driver (or the GPU Operator's GDS container) and modprobe nvidia_fs",
                route=Route.NVFS,
            )
        )
        for cid, title, src in (
            ("nvfs.devices", "/dev/nvidia-fs* device nodes", "/dev/nvidia-fs*"),
            ("nvfs.stats", "nvidia-fs statistics", "/proc/driver/nvidia-fs/stats"),
            ("nvfs.modules", "storage drivers registered with nvidia-fs", "/proc/driver/nvidia-fs/modules"),
        ):
            out.append(_skip(cid, title, "nvidia-fs not loaded", src, Route.NVFS))
        return out
    # /proc/driver/nvidia-fs/version and /sys/module/nvidia_fs/version can both be missing (a
    # container without /sys/module, a partial capture) while the stats file names the driver.
    stats_ver = n.stats.driver_version if n.stats is not None else None
    ver = n.proc_version or n.module_version or stats_ver or "unknown"
    ev.append(_ev("/proc/driver/nvidia-fs/version", n.proc_version))
    if not n.proc_version and not n.module_version and stats_ver:
        ev.append(_ev("/proc/driver/nvidia-fs/stats", f"NVFS Driver(version: {stats_ver})"))
    out.append(
        CheckResult(
            "nvfs.loaded", "nvidia-fs kernel module", Status.PASS, f"loaded, version {ver}", ev, route=Route.NVFS
        )
    )
    if not n.devices:
        out.append(
            CheckResult(
                "nvfs.devices",
                "/dev/nvidia-fs* device nodes",
                Status.FAIL,
                "no /dev/nvidia-fs* nodes",
                [_ev("/dev", "no nvidia-fs* entries")],
                "libcufile opens /dev/nvidia-fs* to submit I/O; without them it falls back to compat",
                "in a container pass the devices through (--device /dev/nvidia-fs0 …); on a host reload nvidia_fs",
                route=Route.NVFS,
            )
        )
    else:
        out.append(
            CheckResult(
                "nvfs.devices",
                "/dev/nvidia-fs* device nodes",
                Status.PASS,
                f"{len(n.devices)} nodes",
                [_ev("/dev", " ".join(n.devices[:4]) + (" …" if len(n.devices) > 4 else ""))],
                route=Route.NVFS,
            )
        )
    rw, peer = n.params.get("rw_stats_enabled"), n.params.get("peer_stats_enabled")
    ev = [
        _ev("/sys/module/nvidia_fs/parameters/rw_stats_enabled", rw),
        _ev("/sys/module/nvidia_fs/parameters/peer_stats_enabled", peer),
    ]
    s = n.stats
    if s is not None:
        ev.append(
            _ev(
                "/proc/driver/nvidia-fs/stats",
                f"GDS {s.gds_version or '?'}, driver {s.driver_version or '?'}, IO stats "
                f"{_onoff(s.io_stats)}, peer stats {_onoff(s.peer_io_stats)}, "
                f"Reads: {plain(s.counters.get('Reads', {}))}; Writes: {plain(s.counters.get('Writes', {}))}",
            )
        )
    # The module parameter is the switch; the stats header ('IO stats: Enabled') reports the same
    # switch. When the parameter file is absent the header decides, so the two never disagree.
    if rw is not None:
        enabled, said_by = rw == "1", f"rw_stats_enabled={rw}"
    elif s is not None and s.io_stats is not None:
        enabled, said_by = s.io_stats, f"/proc/driver/nvidia-fs/stats: IO stats {_onoff(s.io_stats)}"
    else:
        enabled, said_by = None, ""
    if enabled is None:
        out.append(
            CheckResult(
                "nvfs.stats",
                "nvidia-fs statistics",
                Status.SKIP,
                "read/write counters: state unknown (no rw_stats_enabled parameter, no stats header)",
                ev,
            )
        )
    elif not enabled:
        out.append(
            CheckResult(
                "nvfs.stats",
                "nvidia-fs statistics",
                Status.INFO,
                f"read/write counters disabled ({said_by}): Reads/Writes show only errors",
                ev,
                "gdsdiag sweep and support cases use the nvidia-fs read/write counters to prove the nvidia-fs path ran",
                "echo 1 > /sys/module/nvidia_fs/parameters/rw_stats_enabled (and peer_stats_enabled for per-peer P2P counts)",
            )
        )
    else:
        out.append(
            CheckResult(
                "nvfs.stats", "nvidia-fs statistics", Status.PASS, f"read/write counters enabled ({said_by})", ev
            )
        )
    if n.modules is not None:
        real = {k: v for k, v in n.modules.items() if k != "wekafsio"}
        if real:
            out.append(
                CheckResult(
                    "nvfs.modules",
                    "storage drivers registered with nvidia-fs",
                    Status.PASS,
                    ", ".join(sorted(real)),
                    [_ev("/proc/driver/nvidia-fs/modules", n.modules)],
                    route=Route.NVFS,
                )
            )
        else:
            out.append(
                CheckResult(
                    "nvfs.modules",
                    "storage drivers registered with nvidia-fs",
                    Status.INFO,
                    "none registered now — nvidia-fs registers drivers only while a /dev/nvidia-fs* is open, "
                    "so an idle node shows none; the kallsyms check below is the evidence",
                    [_ev("/proc/driver/nvidia-fs/modules", n.modules or "(empty)")],
                    route=Route.NVFS,
                )
            )
    return out


def _onoff(v: bool | None) -> str:
    return "unknown" if v is None else "Enabled" if v else "Disabled"


def check_storage_symbols(ctx: CheckContext) -> list[CheckResult]:
    ks = ctx.kallsyms
    if not ks.readable:
        return [
            CheckResult(
                "storage.symbols",
                "GDS-aware storage drivers",
                Status.SKIP,
                "/proc/kallsyms unreadable",
                [_ev("/proc/kallsyms", "not readable")],
                "",
                "run as root",
                route=Route.NVFS,
            )
        ]
    found = {s: ks.symbols[s] for s in NVFS_REGISTRATION_SYMBOLS if ks.has(s)}
    ev = [_ev("/proc/kallsyms", f"{s} [{m or 'vmlinux'}]") for s, m in sorted(found.items())] or [
        _ev("/proc/kallsyms", "none of the nvidia-fs registration symbols")
    ]
    out = []
    if not found:
        out.append(
            CheckResult(
                "storage.symbols",
                "GDS-aware storage drivers",
                Status.FAIL,
                "no storage driver exports an nvidia-fs registration symbol",
                ev,
                "nvidia-fs reaches NVMe/NVMe-oF/NFS-RDMA/Lustre… only through drivers built with NVIDIA's "
                "patches (nvme_v1_register_nvfs_dma_ops and friends)",
                "install the GDS-enabled storage drivers (DOCA/MLNX_OFED with --with-nvmf --with-nfsrdma, or the "
                "vendor's GDS client) and reboot",
                route=Route.NVFS,
            )
        )
    else:
        drivers = sorted({NVFS_REGISTRATION_SYMBOLS[s][0] for s in found})
        out.append(
            CheckResult(
                "storage.symbols", "GDS-aware storage drivers", Status.PASS, ", ".join(drivers), ev, route=Route.NVFS
            )
        )
    ver = kernel.kernel_version_tuple(ctx.release)
    v1, v2 = "nvme_v1_register_nvfs_dma_ops" in found, "nvme_v2_register_nvfs_dma_ops" in found
    if ver and (v1 or v2):
        wanted = "v2" if ver >= V2_ABI_KERNEL else "v1"
        have = "v2" if v2 and not v1 else "v1" if v1 and not v2 else "v1+v2"
        if wanted not in have:
            out.append(
                CheckResult(
                    "storage.nvme_abi",
                    "nvme ↔ nvidia-fs registration ABI",
                    Status.WARN,
                    f"kernel {ctx.release} expects the nvme {wanted} ops but nvme exports {have}",
                    [_ev("/proc/sys/kernel/osrelease", ctx.release)] + ev,
                    "nvidia-fs looks up nvme_v1_* or nvme_v2_* as chosen at its build; a mismatch fails silently and "
                    "every NVMe I/O falls back to compat (NVIDIA/gds-nvidia-fs#87)",
                    "install nvme drivers and nvidia-fs built for the same ABI (DOCA ≥ 26.04 per #87)",
                    route=Route.NVFS,
                )
            )
    return out


def check_p2pdma(ctx: CheckContext) -> list[CheckResult]:
    out = []
    val = ctx.kconfig.value("CONFIG_PCI_P2PDMA")
    src = ctx.kconfig.source or "/boot/config-*, /proc/config.gz"
    if val is None:
        out.append(
            CheckResult(
                "p2pdma.config",
                "kernel built with PCI P2PDMA",
                Status.SKIP,
                "kernel config not found",
                [_ev(src, "missing")],
                "",
                "install the kernel config or enable CONFIG_IKCONFIG_PROC",
                route=Route.P2PDMA,
            )
        )
    elif val in ("y", "m"):
        out.append(
            CheckResult(
                "p2pdma.config",
                "kernel built with PCI P2PDMA",
                Status.PASS,
                f"CONFIG_PCI_P2PDMA={val}",
                [_ev(src, f"CONFIG_PCI_P2PDMA={val}")],
                route=Route.P2PDMA,
            )
        )
    else:
        out.append(
            CheckResult(
                "p2pdma.config",
                "kernel built with PCI P2PDMA",
                Status.FAIL,
                "CONFIG_PCI_P2PDMA is not set",
                [_ev(src, "# CONFIG_PCI_P2PDMA is not set")],
                "cuFile's P2PDMA route (use_pci_p2pdma) needs the kernel's PCI peer-to-peer DMA support",
                "use a distribution kernel ≥ 6.2 built with CONFIG_PCI_P2PDMA=y, or the nvidia-fs route",
                route=Route.P2PDMA,
            )
        )
    ver = kernel.kernel_version_tuple(ctx.release)
    if ver is None:
        out.append(
            CheckResult(
                "p2pdma.kernel",
                "kernel version for P2PDMA",
                Status.SKIP,
                "kernel release unknown",
                [_ev("/proc/sys/kernel/osrelease", "missing")],
                route=Route.P2PDMA,
            )
        )
    else:
        ok = ver >= P2PDMA_MIN_KERNEL
        out.append(
            judged(
                ok,
                "p2pdma.kernel",
                "kernel version for P2PDMA",
                f"{ctx.release} ({'≥' if ok else '<'} 6.2)",
                [_ev("/proc/sys/kernel/osrelease", ctx.release)],
                "user-space P2PDMA pages in O_DIRECT I/O arrived in Linux 6.2 (FOLL_PCI_P2PDMA)",
                "upgrade to a 6.2+ kernel",
                route=Route.P2PDMA,
            )
        )
    ks = ctx.kallsyms
    if ks.readable:
        have = [s for s in ("p2pdma_pgmap_ops", "pci_p2pdma_add_resource") if ks.has(s)]
        out.append(
            judged(
                have,
                "p2pdma.symbols",
                "P2PDMA symbols in the running kernel",
                ", ".join(have) if have else "p2pdma_pgmap_ops / pci_p2pdma_add_resource absent",
                [_ev("/proc/kallsyms", ", ".join(have) or "no p2pdma symbols")],
                "NVIDIA's troubleshooting guide §14.1 checks p2pdma_pgmap_ops; the NVIDIA UVM driver calls "
                "pci_p2pdma_add_resource to publish the GPU BAR",
                "boot a kernel with CONFIG_PCI_P2PDMA=y",
                route=Route.P2PDMA,
            )
        )
    d = ctx.driver
    if not d.present:
        for cid, title in (
            ("p2pdma.driver", "open driver ≥ 565.47 for P2PDMA"),
            ("p2pdma.registry", "driver registry keys for P2PDMA"),
            ("p2pdma.gpu", "GPU model supported for P2PDMA"),
        ):
            out.append(_skip(cid, title, "no NVIDIA driver", "/proc/driver/nvidia", Route.P2PDMA))
    if d.present:
        vt = d.version_tuple()
        ok = bool(d.open_module) and vt is not None and vt[:2] >= P2PDMA_MIN_OPEN_DRIVER
        out.append(
            judged(
                ok,
                "p2pdma.driver",
                "open driver ≥ 565.47 for P2PDMA",
                f"{d.version} {'open' if d.open_module else 'proprietary'}",
                [_ev("/proc/driver/nvidia/version", d.version_line)],
                "NVIDIA: 'Install OpenRM version 565.47 or above for PCI_P2PDMA support'",
                "install the open kernel module driver 565.47 or newer",
                route=Route.P2PDMA,
            )
        )
        rd = d.registry_dwords
        ok = rd.get("RMForceStaticBar1") == "1" and rd.get("RmForceDisableIomapWC") == "1"
        out.append(
            judged(
                ok,
                "p2pdma.registry",
                "driver registry keys for P2PDMA",
                "RMForceStaticBar1=1;RmForceDisableIomapWC=1 set"
                if ok
                else "RegistryDwords lacks RMForceStaticBar1=1;RmForceDisableIomapWC=1",
                [_ev("/proc/driver/nvidia/params", f'RegistryDwords: "{d.params.get("RegistryDwords", "")}"')],
                "the UVM driver only publishes the GPU BAR as P2PDMA memory with a static, non write-combined BAR1",
                'options nvidia NVreg_RegistryDwords="RMForceStaticBar1=1;RmForceDisableIomapWC=1;" in '
                "/etc/modprobe.d/, update the initramfs, reboot",
                route=Route.P2PDMA,
            )
        )
        models = [i.get("Model", "") for i in d.gpus.values()]
        okg = [m for m in models if any(re.search(rf"\b{g}\b", m) for g in P2PDMA_GPUS)]
        if models:
            out.append(
                judged(
                    okg,
                    "p2pdma.gpu",
                    "GPU model supported for P2PDMA",
                    ", ".join(models),
                    [_ev("/proc/driver/nvidia/gpus/*/information", ", ".join(models))],
                    "NVIDIA lists A100, A40, L4, L40S, H100, H200, B100, B200, B300 (troubleshooting §14.2)",
                    "use a listed data-center GPU for the P2PDMA route",
                    bad=Status.WARN,
                    route=Route.P2PDMA,
                )
            )
    mp = kernel.module_param(ctx.fs, "nvme_core", "multipath")
    if mp is not None:
        ok = mp.upper().startswith("N")
        out.append(
            judged(
                ok,
                "p2pdma.multipath",
                "NVMe native multipath off",
                f"nvme_core multipath={mp}",
                [_ev("/sys/module/nvme_core/parameters/multipath", mp)],
                "upstream NVMe multipath does not support PCI P2PDMA (troubleshooting §14.3)",
                "options nvme_core multipath=N in /etc/modprobe.d/nvme.conf, update the initramfs, reboot",
                route=Route.P2PDMA,
            )
        )
    return out


def check_rdma(ctx: CheckContext) -> list[CheckResult]:
    fs = ctx.fs
    devs = fs.listdir("/sys/class/infiniband")
    out = []
    if not devs:
        out.append(
            CheckResult(
                "rdma.devices",
                "RDMA devices",
                Status.INFO,
                "no RDMA devices",
                [_ev("/sys/class/infiniband", "empty")],
                "NFS over RDMA and the distributed file systems need RDMA NICs",
            )
        )
    else:
        ev = []
        for dv in devs:
            for port in fs.listdir(f"/sys/class/infiniband/{dv}/ports"):
                ll = fs.read_text(f"/sys/class/infiniband/{dv}/ports/{port}/link_layer")
                st = fs.read_text(f"/sys/class/infiniband/{dv}/ports/{port}/state")
                ev.append(_ev(f"/sys/class/infiniband/{dv}/ports/{port}", f"{plain(ll)}, {plain(st)}"))
        active = [e for e in ev if "ACTIVE" in e.value]
        out.append(
            judged(
                active,
                "rdma.devices",
                "RDMA devices",
                f"{len(devs)} device(s), {len(active)} active port(s)",
                ev,
                "",
                "bring a port up (cable, subnet manager, ip link)",
                bad=Status.WARN,
            )
        )
        peermem = "nvidia_peermem" in ctx.modules
        out.append(
            CheckResult(
                "rdma.peermem",
                "GPU memory registration for RDMA",
                Status.INFO,
                "nvidia_peermem loaded"
                if peermem
                else "nvidia_peermem not loaded (dma-buf is used with the open driver)",
                [_ev("/proc/modules", "nvidia_peermem " + ("loaded" if peermem else "absent"))],
            )
        )
    nfs = [m for m in ctx.mounts if m.fstype.startswith("nfs")]
    for m in nfs:
        proto = m.option("proto")
        ok = proto == "rdma"
        out.append(
            judged(
                ok,
                "rdma.nfs",
                f"NFS mount {m.mount_point}",
                f"proto={proto}",
                [_ev("/proc/self/mountinfo", f"{m.source} {m.mount_point} {','.join(m.super_options)}")],
                "GDS reaches NFS only over RDMA (rpcrdma with the nvfs registration); TCP mounts run in compat",
                "mount with -o proto=rdma,port=20049",
                bad=Status.WARN,
                route=Route.NVFS,
                path=m.mount_point,
            )
        )
    return out


def check_iommu_acs(ctx: CheckContext) -> list[CheckResult]:
    topo = ctx.topology
    mode = topo.iommu.mode
    ev = [_ev("/sys/kernel/iommu_groups, /proc/cmdline", "; ".join(topo.iommu.evidence))]
    status = {"off": Status.PASS, "passthrough": Status.PASS, "translated": Status.FAIL, "mixed": Status.FAIL}.get(
        mode, Status.INFO
    )
    out = [
        CheckResult(
            "platform.iommu",
            "IOMMU",
            status,
            mode,
            ev,
            "NVIDIA: 'iommu=off works the best … iommu=pt is supported … iommu=on is not guaranteed to be either "
            "functional or performant' (GDS support for NVMe)",
            "boot with iommu=pt or turn the IOMMU off" if status == Status.FAIL else "",
            route=Route.NVFS,
        )
    ]
    redirect = sorted({b for p in ctx.pairs for b in p.acs_redirect_bridges})
    unknown = sorted({b for p in ctx.pairs for b in p.acs_unknown_bridges})
    if redirect:
        out.append(
            CheckResult(
                "platform.acs",
                "ACS redirect on GPU paths",
                Status.FAIL,
                f"{len(redirect)} bridge(s) redirect peer traffic",
                [_ev(f"/sys/bus/pci/devices/{b}/config", "ACSCtl RR/CR/EC set") for b in redirect[:8]],
                "ACS forces P2P transactions up to the root complex (NVIDIA GDS best-practices guide §3.1)",
                "disable ACS redirect on these ports (BIOS, or setpci at boot)",
            )
        )
    elif unknown:
        out.append(
            CheckResult(
                "platform.acs",
                "ACS redirect on GPU paths",
                Status.SKIP,
                f"ACS unreadable on {len(unknown)} bridge(s)",
                [_ev("config space", "64 bytes readable without root")],
                "",
                "run as root",
            )
        )
    elif ctx.pairs:
        out.append(
            CheckResult(
                "platform.acs",
                "ACS redirect on GPU paths",
                Status.PASS,
                "no ACS redirect on any GPU pair path",
                [_ev("PCI config space", f"{len(ctx.pairs)} pairs checked")],
            )
        )
    return out


def check_cufile_json(ctx: CheckContext) -> list[CheckResult]:
    cfg = ctx.cufile
    out = []
    if cfg.path is None:
        return [
            CheckResult(
                "cufile.json",
                "cufile.json",
                Status.WARN,
                "no cufile.json found: libcufile runs on built-in defaults",
                [_ev(", ".join(cfg.searched), "absent")],
                "",
                "copy the CUDA toolkit's gds/cufile.json to /etc/cufile.json to control logging and routes",
            )
        ]
    if cfg.parse_error:
        return [
            CheckResult(
                "cufile.json",
                "cufile.json",
                Status.FAIL,
                cfg.parse_error,
                [_ev(cfg.path, "unparsable")],
                "libcufile refuses to start on a malformed file",
                "fix the JSON at the position given (comments // and /* */ are fine)",
            )
        ]
    fails = [i for i in cfg.issues if i.severity == Severity.FAIL]
    warns = [i for i in cfg.issues if i.severity == Severity.WARN]
    st = Status.FAIL if fails else Status.WARN if warns else Status.PASS
    out.append(
        CheckResult(
            "cufile.json",
            "cufile.json",
            st,
            f"{cfg.path} ({cfg.found_via}): {len(fails)} error(s), {len(warns)} warning(s)",
            [_ev(cfg.path, f"{i.severity}: {i.message}") for i in cfg.issues[:12]] or [_ev(cfg.path, "all keys valid")],
            "a wrong type or misspelt key silently leaves libcufile on its default",
            "correct the listed keys" if cfg.issues else "",
        )
    )
    g = cfg.get
    allow, force = g("properties.allow_compat_mode"), g("properties.force_compat_mode")
    env_force = ctx.env.get("CUFILE_FORCE_COMPAT_MODE", "")
    by_env = env_force.lower() in ("1", "true")
    if force is True or by_env:
        # (each source named as what it is: the variable alone was reported as the file's key)
        ev, by, fixes = [], [], []
        if force is True:
            ev.append(_ev(cfg.path, "properties.force_compat_mode: true"))
            by.append(f"properties.force_compat_mode in {cfg.path}")
            fixes.append("set properties.force_compat_mode to false")
        if by_env:
            ev.append(_ev(FORCE_ENV_SOURCE, f"CUFILE_FORCE_COMPAT_MODE={env_force}"))
            by.append(f"CUFILE_FORCE_COMPAT_MODE={env_force} in the environment")
            fixes.append("unset CUFILE_FORCE_COMPAT_MODE")
        out.append(
            CheckResult(
                "cufile.force_compat",
                "force_compat_mode",
                Status.WARN,
                f"every cuFile I/O is forced through compatibility mode ({' and '.join(by)})",
                ev,
                "nothing goes P2P whatever the platform supports",
                " and ".join(fixes),
            )
        )
    out.append(
        CheckResult(
            "cufile.allow_compat",
            "allow_compat_mode",
            Status.INFO,
            f"allow_compat_mode = {allow if allow is not None else 'unset (default true)'}",
            [_ev(cfg.path, f"properties.allow_compat_mode: {plain(allow)}")],
            "true: I/O silently falls back to POSIX when P2P is impossible; false: such I/O fails instead "
            "(useful to prove the P2P route in validation)",
        )
    )
    p2p_keys = [
        k
        for k in (
            "properties.use_pci_p2pdma",
            "block.nvme.use_pci_p2pdma",
            "block.nvmeof.use_pci_p2pdma",
            "block.raid.use_pci_p2pdma",
            "fs.nfs.use_pci_p2pdma",
        )
        if g(k) is True
    ]
    if p2p_keys:
        rd = ctx.driver.registry_dwords
        ready = rd.get("RMForceStaticBar1") == "1" and rd.get("RmForceDisableIomapWC") == "1"
        out.append(
            judged(
                ready,
                "cufile.p2pdma",
                "use_pci_p2pdma",
                f"{', '.join(p2p_keys)} true; driver registry keys {'set' if ready else 'missing'}",
                [
                    _ev(cfg.path, ", ".join(p2p_keys)),
                    _ev("/proc/driver/nvidia/params", ctx.driver.params.get("RegistryDwords", "")),
                ],
                "with use_pci_p2pdma true a P2PDMA failure is not retried through nvidia-fs (NVIDIA configuration guide)",
                "set the RegistryDwords keys (see p2pdma.registry) or turn use_pci_p2pdma off",
                route=Route.P2PDMA,
            )
        )
    addrs = g("properties.rdma_dev_addr_list") or []
    if addrs:
        local = _local_addresses(ctx)
        if local is None:
            out.append(
                CheckResult(
                    "cufile.rdma_addrs",
                    "rdma_dev_addr_list",
                    Status.SKIP,
                    f"{len(addrs)} address(es); local addresses unknown here",
                    [_ev(cfg.path, addrs)],
                )
            )
        else:
            missing = [a for a in addrs if a not in local]
            out.append(
                CheckResult(
                    "cufile.rdma_addrs",
                    "rdma_dev_addr_list",
                    Status.FAIL if missing else Status.PASS,
                    f"{len(missing)} of {len(addrs)} addresses are not on this node"
                    if missing
                    else "all addresses are local",
                    [_ev(cfg.path, addrs)],
                    "libcufile uses only the NICs named here for RDMA",
                    "list the IPs of this node's RDMA interfaces" if missing else "",
                )
            )
    if g("properties.rdma_dynamic_routing") is True:
        order = g("properties.rdma_dynamic_routing_order") or []
        st = Status.WARN if order[:1] == ["SYS_MEM"] else Status.INFO
        out.append(
            CheckResult(
                "cufile.dynamic_routing",
                "RDMA dynamic routing",
                st,
                f"on, order {', '.join(map(str, order)) or '(empty)'}",
                [_ev(cfg.path, f"rdma_dynamic_routing_order: {plain(order)}")],
                "with SYS_MEM first in the order, every cross-root-port I/O is staged through host memory (a DRAM bounce)",
                "put GPU_MEM_NVLINKS/GPU_MEM before SYS_MEM" if st == Status.WARN else "",
            )
        )
    if g("miscellaneous.enable_static_config") is True:
        out.append(_static_config(ctx, cfg.path, g("miscellaneous.static_config_filepath")))
    stats = g("profile.cufile_stats")
    out.append(
        CheckResult(
            "cufile.stats",
            "cuFile statistics level",
            Status.INFO,
            f"profile.cufile_stats = {stats if stats is not None else 'unset (0)'}",
            [_ev(cfg.path, f"profile.cufile_stats: {stats}")],
            "gds_stats needs ≥ 1 in the target process; gdsdiag's own runs raise it per process",
        )
    )
    level, logdir = g("logging.level"), g("logging.dir")
    out.append(
        CheckResult(
            "cufile.logging",
            "cuFile logging",
            Status.INFO if logdir else Status.WARN,
            f"level {level or 'ERROR'}, dir {logdir or 'unset: cufile.log lands in each process cwd'}",
            [_ev(cfg.path, f"logging: level={plain(level)}, dir={plain(logdir)}")],
            "",
            "" if logdir else "set logging.dir (or CUFILE_LOGFILE_PATH) so logs land in one known place",
        )
    )
    return out


def _static_config(ctx: CheckContext, cfg_path: str, fp) -> CheckResult:
    """GDS 1.20's optional static GPU hardware configuration (gdsdiag/static_config.py, the reader
    `gdsdiag cufile` reports it with). What libcufile does without a usable file is its own text
    (libcufile 1.20.0.107 strings, tests/fixtures/libcufile-strings/): "Static config file path not
    configured", "Cannot open static config file", then "Static config init failed; falling back to
    runtime probes for bar/p2pdma"."""
    from .. import static_config

    got = static_config.read(ctx.fs, ctx.cufile)
    ev = [_ev(cfg_path, f"miscellaneous.enable_static_config: true, static_config_filepath: {plain(fp)}")]
    if got.path:
        ev.append(_ev(got.path, f"present, {got.size} bytes" if got.present else "missing"))
    why = (
        "GDS 1.20: an optional static GPU hardware configuration caches BAR size and PCI P2PDMA support to "
        f"reduce initialisation time; libcufile then takes those facts from the file, not from the node ({static_config.SOURCE})"
    )
    return CheckResult("cufile.static_config", "static GPU config (GDS 1.20)", Status.INFO, got.summary(), ev, why)


def _local_addresses(ctx: CheckContext) -> set[str] | None:
    if not ctx.live:
        return None
    try:
        import psutil
    except ImportError:
        return None
    return {a.address.split("%")[0] for addrs in psutil.net_if_addrs().values() for a in addrs}


def check_libcufile(ctx: CheckContext) -> list[CheckResult]:
    info = ctx.libcufile
    if info is None:
        return [
            CheckResult(
                "libcufile",
                "libcufile",
                Status.SKIP,
                "not recorded in this snapshot",
                [_ev("gdsdiag snapshot", "no libcufile record")],
                "",
                "take the snapshot with gdsdiag ≥ 0.1 on the node",
            )
        ]
    if info.path is None:
        return [
            CheckResult(
                "libcufile",
                "libcufile",
                Status.FAIL,
                "libcufile not found",
                [_ev("wheel, CUDA_HOME, /usr/local/cuda*/lib64, ldconfig -p", "absent")],
                "every cuFile route goes through libcufile",
                "install the CUDA toolkit's libcufile, or gdsdiag's [cufile] extra (the nvidia-cufile wheel)",
            )
        ]
    out = [
        CheckResult(
            "libcufile",
            "libcufile",
            Status.PASS,
            f"{info.version or 'version ?'} at {info.path} (via {info.found_via})",
            [_ev(how, p) for how, p in info.candidates],
        )
    ]
    if info.probe_error:
        out.append(
            CheckResult(
                "libcufile.usdt",
                "USDT probes for gdsdiag trace",
                Status.WARN,
                info.probe_error,
                [_ev(info.path, "unreadable notes")],
            )
        )
    elif info.trace_probes_present:
        out.append(
            CheckResult(
                "libcufile.usdt",
                "USDT probes for gdsdiag trace",
                Status.PASS,
                f"{len(info.probes)} probes, incl. {', '.join(info.trace_probes_present)}",
                [_ev(f"{info.path} .note.stapsdt", f"{len(info.probes)} distinct provider:name")],
            )
        )
    else:
        out.append(
            CheckResult(
                "libcufile.usdt",
                "USDT probes for gdsdiag trace",
                Status.WARN,
                "no route-naming USDT probes (some aarch64 builds carry none)",
                [_ev(f"{info.path} .note.stapsdt", f"{len(info.probes)} probes")],
                "gdsdiag trace then falls back to uprobes + syscall/block tracepoints",
                "",
            )
        )
    return out


def check_container(ctx: CheckContext) -> list[CheckResult]:
    signs, weak = ctx.container_evidence()
    out = []
    udev_dir = ctx.fs.exists("/run/udev/data") or ctx.fs.exists("/run/udev/control")
    looked = "/run/.containerenv, /proc/1/environ container=, /proc/1/cgroup, /.dockerenv + overlay root"
    if signs:
        said = "inside a container (rests on: " + "; ".join(signs) + ")"
    elif weak:
        said = "not known to be a container: only " + "; ".join(weak)
    else:
        said = "not in a container (no sign in " + looked + ")"
    out.append(
        CheckResult(
            "platform.container",
            "container",
            Status.INFO,
            said,
            [_ev(s, "present") for s in signs + weak] or [_ev(looked, "no sign")],
        )
    )
    out.append(
        judged(
            udev_dir,
            "platform.udev",
            "udev database visible",
            "/run/udev present" if udev_dir else "/run/udev missing",
            [_ev("/run/udev", "present" if udev_dir else "absent")],
            "libcufile reads ID_FS_USAGE of the backing block device from the udev database; without it every "
            "cuFileHandleRegister fails with 5027 CU_FILE_HANDLE_NOT_REGISTERED ('udev property not found: ID_FS_USAGE')",
            "run udevd, or bind-mount the host's /run/udev read-only into the container",
        )
    )
    if not ctx.driver.present:
        out.append(_skip("platform.devnodes", "NVIDIA device nodes", "no NVIDIA driver", "/dev/nvidia*"))
    else:
        nodes = [d for d in ctx.fs.listdir("/dev") if re.match(r"^nvidia(\d+|ctl|-uvm)$", d)]
        ok = "nvidiactl" in nodes and any(re.match(r"^nvidia\d+$", d) for d in nodes)
        out.append(
            judged(
                ok,
                "platform.devnodes",
                "NVIDIA device nodes",
                " ".join(sorted(nodes)) or "none",
                [_ev("/dev", " ".join(sorted(nodes)) or "none")],
                "CUDA and cuFile open /dev/nvidiactl and /dev/nvidiaN",
                "pass the devices into the container (NVIDIA container toolkit)",
            )
        )
    return out


NODE_CHECKS = (
    check_driver,
    check_nvfs,
    check_storage_symbols,
    check_p2pdma,
    check_rdma,
    check_iommu_acs,
    check_cufile_json,
    check_cuobj,  # cuobj.json and the runtime cuFile shares with cuObject (cuobj.py)
    check_libcufile,
    check_container,
    *KNOWN_ISSUE_CHECKS,  # NVIDIA's Known Issues seen from the node (known_issues.py)
    check_untraced,  # paths host tracing cannot see: kernel-bypass NVMe, cuObject over RDMA (untraced.py)
)
