"""NVIDIA's GDS Known Issues that decide a route and can be seen from the node, one check each.
Every rule quotes its line of NVIDIA's page (docs/checks.md keeps the quotes); a fact that
cannot be read makes the rule SKIP, never guess."""

from __future__ import annotations

import re

from ..platform import osinfo
from ..routes import Route
from ..verdicts import Status
from .context import CheckContext
from .model import CheckResult, Evidence

KNOWN_ISSUES = (
    "NVIDIA GDS release notes, Known Issues (docs.nvidia.com/gpudirect-storage/release-notes/known-issues.html)"
)
NVFS_BAD = "2.25.6"  # "Using nvidia-fs version 2.25.6 may cause cuFile APIs to fail when using GDS P2P mode"


def _p2pdma_relevant(ctx: CheckContext) -> tuple[bool, Evidence]:
    """The P2PDMA known issues matter only where the kernel can do P2PDMA at all. An unknown
    kernel config counts as relevant: the rule is then judged on what else is known."""
    val = ctx.kconfig.value("CONFIG_PCI_P2PDMA")
    src = ctx.kconfig.source or "/boot/config-*, /proc/config.gz"
    if val is None:
        return True, Evidence(src, "missing")
    return val in ("y", "m"), Evidence(src, f"CONFIG_PCI_P2PDMA={val}")


def _not_relevant(cid: str, title: str, ev: Evidence) -> CheckResult:
    return CheckResult(cid, title, Status.INFO, "not relevant: the kernel has no PCI P2PDMA", [ev], route=Route.P2PDMA)


def check_kaslr(ctx: CheckContext) -> list[CheckResult]:
    cid, title = "known.kaslr", "KASLR with NVMe P2PDMA (x86_64)"
    relevant, kev = _p2pdma_relevant(ctx)
    if not relevant:
        return [_not_relevant(cid, title, kev)]
    arch, arch_src = ctx.arch
    on, why = _kaslr_state(ctx)
    ev = [kev, Evidence(arch_src, arch or "unknown"), Evidence("/proc/cmdline, kernel config", why)]
    if arch is not None and arch != "x86_64":
        return [CheckResult(cid, title, Status.PASS, f"{arch}: the known issue is x86_64 only", ev, route=Route.P2PDMA)]
    if on is None or arch is None:
        unknown = "architecture" if arch is None else "KASLR state"
        return [CheckResult(cid, title, Status.SKIP, f"{unknown} unknown ({why})", ev, route=Route.P2PDMA)]
    if not on:
        return [CheckResult(cid, title, Status.PASS, f"KASLR off ({why})", ev, route=Route.P2PDMA)]
    return [
        CheckResult(
            cid,
            title,
            Status.WARN,
            "KASLR is on: NVMe P2PDMA can fail on x86_64",
            ev,
            f"{KNOWN_ISSUES}: 'NVME P2PDMA can fail on x86_64 platforms when KASLR is enabled in the linux kernel. "
            "The feature can be disabled by specifying the nokaslr kernel parameter.' (nokaslr gives up kernel "
            "address randomisation: a security trade-off)",
            "add nokaslr to the kernel command line (GRUB_CMDLINE_LINUX in /etc/default/grub, then update-grub "
            "or grub2-mkconfig -o /boot/grub2/grub.cfg) and reboot; or use the nvidia-fs route",
            route=Route.P2PDMA,
        )
    ]


def _kaslr_state(ctx: CheckContext) -> tuple[bool | None, str]:
    return osinfo.kaslr(ctx.cmdline, ctx.kconfig)


def check_rhel95(ctx: CheckContext) -> list[CheckResult]:
    cid, title = "known.rhel95", "NVMe P2PDMA on RHEL 9.5 (x86_64)"
    relevant, kev = _p2pdma_relevant(ctx)
    if not relevant:
        return [_not_relevant(cid, title, kev)]
    osr = ctx.os_release
    if osr.source is None:
        return [
            CheckResult(
                cid,
                title,
                Status.SKIP,
                "distribution unknown: no /etc/os-release",
                [Evidence("/etc/os-release, /usr/lib/os-release", "missing"), kev],
                route=Route.P2PDMA,
            )
        ]
    arch, arch_src = ctx.arch
    ev = [
        Evidence(osr.source, f"ID={osr.id or ''} VERSION_ID={osr.version_id or ''} ID_LIKE={' '.join(osr.id_like)}"),
        Evidence(arch_src, arch or "unknown"),
        kev,
    ]
    is95 = osr.version_id == "9.5"
    if not is95 or (arch is not None and arch != "x86_64"):
        return [
            CheckResult(cid, title, Status.PASS, f"{osr.pretty} ({arch or 'arch unknown'})", ev, route=Route.P2PDMA)
        ]
    why = f"{KNOWN_ISSUES}: 'NVME P2PDMA mode is currently not supported on RHEL 9.5 for x86.'"
    if osr.id != "rhel":
        if "rhel" in osr.id_like:
            # NVIDIA names RHEL only; a rebuild of the same release shares its kernel but is not named
            return [
                CheckResult(
                    cid,
                    title,
                    Status.INFO,
                    f"{osr.pretty}: a RHEL 9.5 rebuild — NVIDIA's known issue names RHEL 9.5 only",
                    ev,
                    why,
                    route=Route.P2PDMA,
                )
            ]
        return [CheckResult(cid, title, Status.PASS, f"{osr.pretty}", ev, route=Route.P2PDMA)]
    if arch is None:
        return [
            CheckResult(cid, title, Status.SKIP, f"{osr.pretty}, architecture unknown", ev, why, route=Route.P2PDMA)
        ]
    return [
        CheckResult(
            cid,
            title,
            Status.WARN,
            f"{osr.pretty} on x86_64: NVIDIA does not support NVMe P2PDMA here",
            ev,
            why,
            "use the nvidia-fs route (nvidia-fs + GDS-enabled nvme from DOCA/MLNX_OFED), or a RHEL release "
            "NVIDIA supports for P2PDMA",
            route=Route.P2PDMA,
        )
    ]


def check_b200_persistenced(ctx: CheckContext) -> list[CheckResult]:
    cid, title = "known.b200_persistenced", "nvidia-persistenced on B200 with NVMe P2PDMA"
    models = sorted({i.get("Model", "") for i in ctx.driver.gpus.values()})
    b200 = [m for m in models if re.search(r"\bB200\b", m)]
    if not b200:
        return []  # the issue is B200's alone: nothing to say elsewhere
    relevant, kev = _p2pdma_relevant(ctx)
    if not relevant:
        return [_not_relevant(cid, title, kev)]
    p = ctx.persistenced
    ev = [Evidence("/proc/driver/nvidia/gpus/*/information", ", ".join(b200)), kev] + [
        Evidence("nvidia-persistenced", e) for e in p.evidence
    ]
    if p.running is None:
        return [CheckResult(cid, title, Status.SKIP, "nvidia-persistenced state unknown", ev, route=Route.P2PDMA)]
    if p.running:
        return [CheckResult(cid, title, Status.PASS, "nvidia-persistenced running", ev, route=Route.P2PDMA)]
    return [
        CheckResult(
            cid,
            title,
            Status.WARN,
            "nvidia-persistenced is not running: NVMe P2PDMA slows driver initialisation on B200",
            ev,
            f"{KNOWN_ISSUES}: 'Without nvidia-persistenced enabled, NVME P2PDMA can increase the time taken to "
            "start the driver initialization for B200 platforms.'",
            "systemctl enable --now nvidia-persistenced",
            route=Route.P2PDMA,
        )
    ]


def nvfs_full_version(ctx: CheckContext) -> tuple[str | None, str]:
    """The nvidia-fs version with its patch level, and where it was read. /proc/driver/nvidia-fs/version
    gives only major.minor ('version: 2.25'), so the module's own version and the stats header
    ('NVFS Driver(version: 2.25.7)') come first."""
    n = ctx.nvfs
    if n.module_version:
        return n.module_version.strip(), "/sys/module/nvidia_fs/version"
    if n.stats is not None and n.stats.driver_version:
        return n.stats.driver_version, "/proc/driver/nvidia-fs/stats"
    if n.proc_version:
        return n.proc_version, "/proc/driver/nvidia-fs/version"
    return None, "/sys/module/nvidia_fs/version, /proc/driver/nvidia-fs/{stats,version}"


def check_nvfs_2256(ctx: CheckContext) -> list[CheckResult]:
    cid, title = "known.nvfs_2256", "nvidia-fs 2.25.6 P2P regression"
    if not ctx.nvfs.loaded:
        return []  # nvfs.loaded already says the module is absent
    ver, src = nvfs_full_version(ctx)
    ev = [Evidence(src, ver or "missing")]
    if ver is None:
        return [CheckResult(cid, title, Status.SKIP, "nvidia-fs version unknown", ev, route=Route.NVFS)]
    if ver.count(".") < 2:
        if ver == NVFS_BAD.rsplit(".", 1)[0]:
            return [
                CheckResult(
                    cid,
                    title,
                    Status.SKIP,
                    f"version {ver} has no patch level: 2.25.6 cannot be told from 2.25.7",
                    ev,
                    route=Route.NVFS,
                )
            ]
        return [CheckResult(cid, title, Status.PASS, f"nvidia-fs {ver}", ev, route=Route.NVFS)]
    if ver != NVFS_BAD:
        return [CheckResult(cid, title, Status.PASS, f"nvidia-fs {ver}", ev, route=Route.NVFS)]
    return [
        CheckResult(
            cid,
            title,
            Status.WARN,
            "nvidia-fs 2.25.6: cuFile APIs may fail in GDS P2P mode",
            ev,
            f"{KNOWN_ISSUES}: 'Using nvidia-fs version 2.25.6 may cause cuFile APIs to fail when using GDS P2P "
            "mode with the nvidia-fs kernel driver. We recommend using nvidia-fs version 2.25.7 or newer'",
            "install nvidia-fs 2.25.7 or newer (github.com/NVIDIA/gds-nvidia-fs releases) and reload nvidia_fs",
            route=Route.NVFS,
        )
    ]


KNOWN_ISSUE_CHECKS = (check_kaslr, check_rhel95, check_b200_persistenced, check_nvfs_2256)
