"""Run the checks, decide which routes the node can take, and reduce everything to an exit code."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..errors import EXIT_FAIL, EXIT_OK, EXIT_WARN, GdsdiagError, UsageError
from ..routes import Route
from ..verdicts import Status
from .checks import NODE_CHECKS
from .context import CheckContext
from .model import CheckResult, EndpointRoute, Evidence, MountRoute, NodeVerdict, PathVerdict
from .paths import analyse_path
from .untraced import UntracedPath

if TYPE_CHECKING:
    from ..schema import check as schema


@dataclass
class CheckReport:
    results: list[CheckResult]
    verdict: NodeVerdict
    paths: list[PathVerdict] = field(default_factory=list)
    mounts: list[MountRoute] = field(default_factory=list)  # every mounted file system's route
    endpoints: list[EndpointRoute] = field(default_factory=list)  # cuobj.json's endpoints' routes
    endpoints_source: str = ""  # where the endpoints came from, or why there are none
    untraced: list[UntracedPath] = field(default_factory=list)  # paths host tracing cannot see (untraced.py)
    gdscheck: list[schema.GdscheckRow] | None = None
    source: str = "/"
    problems: list[str] = field(default_factory=list)  # files the readers could not read, and why
    leave_heap = True  # a large node's results: the OS frees them at exit (errors.Report)

    @property
    def exit_code(self) -> int:
        st = {r.status for r in self.results}
        if Status.FAIL in st:
            return EXIT_FAIL
        if Status.WARN in st or any(not d["agree"] for d in self.gdscheck or []):
            return EXIT_WARN
        return EXIT_OK


def _ok(results: list[CheckResult], route: Route) -> tuple[bool, list[str]]:
    missing = [f"{r.id}: {r.summary}" for r in results if r.route == route and r.status == Status.FAIL]
    return not missing, missing


def decide(ctx: CheckContext, results: list[CheckResult]) -> NodeVerdict:
    reasons: list[str] = []
    by_id = {r.id: r for r in results}
    base_ok = all(by_id.get(i) is not None and by_id[i].status == Status.PASS for i in ("nvidia.driver", "nvidia.gpus"))
    if not base_ok:
        reasons.append("no usable NVIDIA driver/GPU: no cuFile route at all")
        return NodeVerdict([], "none", reasons)
    routes: list[Route] = []
    nvfs_ok, nvfs_missing = _ok(results, Route.NVFS)
    if nvfs_ok and by_id.get("nvfs.loaded") and by_id["nvfs.loaded"].status == Status.PASS:
        routes.append(Route.NVFS)
    else:
        reasons.append("NVFS route unavailable: " + "; ".join(nvfs_missing))
    p2p_ok, p2p_missing = _ok(results, Route.P2PDMA)
    if p2p_ok and by_id.get("p2pdma.config") and by_id["p2pdma.config"].status == Status.PASS:
        routes.append(Route.P2PDMA)
    else:
        reasons.append("P2PDMA route unavailable: " + "; ".join(p2p_missing or ["kernel config unknown"]))
    lib = by_id.get("libcufile")
    allow = ctx.cufile.get("properties.allow_compat_mode")
    if lib is not None and lib.status == Status.FAIL:
        reasons.append("libcufile not found: no cuFile I/O")
        return NodeVerdict([], "none", reasons)
    forced = ctx.cufile.get("properties.force_compat_mode") is True
    if forced:
        reasons.append("force_compat_mode: direct routes disabled by cufile.json")
        routes = []
    env_force = ctx.env.get("CUFILE_FORCE_COMPAT_MODE", "")
    if env_force.lower() in ("1", "true"):
        # (NVIDIA's troubleshooting guide: it "overrides cufile.json settings and forces I/O to go
        # through compatible mode"; read from the environment check runs in)
        reasons.append(f"CUFILE_FORCE_COMPAT_MODE={env_force} in the environment: direct routes disabled")
        routes, forced = [], True
    if allow is not False or forced:
        routes.append(Route.COMPAT)
    else:
        reasons.append("allow_compat_mode is false: I/O without a direct route fails")
    return NodeVerdict(routes, _summary(routes), reasons)


def _summary(routes: list[Route]) -> str:
    direct = [r.value for r in routes if r != Route.COMPAT]
    if direct:
        return " + ".join(direct) + (" (compat fallback allowed)" if Route.COMPAT in routes else "")
    return "COMPAT only" if Route.COMPAT in routes else "none"


# The newest nvidia-fs release known (2.30, Sept 2026: ../shared/research/anchors-2026-12-07.md).
# A snapshot naming a later one is not believed without more (a live node's kernel is: it is there).
NEWEST_NVFS = (2, 30)


def nvfs_doubt(ctx: CheckContext, results: list[CheckResult]) -> str | None:
    """Why a snapshot's nvidia-fs evidence does not fit together (None: it does). Issue 42: a
    snapshot with no NVMe device and nvidia-fs 99.99.99 was told "GDS routes on this node: NVFS".
    The NVFS route needs a release that exists and something nvidia-fs can reach: an NVMe
    device, a storage driver exporting its registration symbol, or one registered with it."""
    import re

    n = ctx.nvfs
    ver = n.module_version or n.proc_version or (n.stats.driver_version if n.stats is not None else None)
    parts = tuple(int(x) for x in re.findall(r"[0-9]{1,9}", str(ver or "")[:100])[:2])
    if ver and (len(parts) < 2 or not (1, 0) <= parts <= NEWEST_NVFS):
        newest = ".".join(map(str, NEWEST_NVFS))
        return f"nvidia-fs version {str(ver)[:40]} is no known release (newest known: {newest})"
    from ..platform.kernel import NVFS_REGISTRATION_SYMBOLS
    from ..topology.model import Role

    if ctx.topology.by_role(Role.NVME):
        return None
    registered = any(r.id == "nvfs.modules" and r.status == Status.PASS for r in results)
    ks = ctx.kallsyms
    beyond_nvme = ks.readable and any(ks.has(s) for s, (kind, _) in NVFS_REGISTRATION_SYMBOLS.items() if kind != "NVMe")
    if not registered and not beyond_nvme:
        return (
            "nvidia-fs is loaded but the snapshot has no NVMe device, and no other storage driver "
            "(NVMe-oF, NFS/RDMA, Lustre…) registers with it"
        )
    return None


def _unclaim_nvfs(verdict: NodeVerdict, doubt: str) -> None:
    verdict.routes = [r for r in verdict.routes if r != Route.NVFS]
    verdict.reasons.append(f"NVFS route not claimed: inconsistent input: {doubt}")
    verdict.summary = _summary(verdict.routes) + " (NVFS not claimed: inconsistent input)"


def run(ctx: CheckContext, paths: Sequence[str] = (), gdscheck_text: str | None = None) -> CheckReport:
    for p in paths:
        if ctx.live and not os.path.isdir(p):
            # a wrong argument, not a finding about the node: one line with cause and fix, exit 4,
            # before any check runs
            why = "does not exist" if not os.path.lexists(p) else "is not a directory"
            raise UsageError(f"--path {p} {why}", "pass an existing directory on the storage to test")
    results: list[CheckResult] = []
    for check in NODE_CHECKS:
        results += check(ctx)
    verdict = decide(ctx, results)
    doubt = None if ctx.live else nvfs_doubt(ctx, results)
    if doubt and Route.NVFS in verdict.routes:
        _unclaim_nvfs(verdict, doubt)
        results.append(
            CheckResult(
                "snapshot.consistency",
                "The snapshot agrees with itself",
                Status.WARN,
                f"inconsistent input: {doubt}",
                [Evidence(ctx.fs.root, doubt)],
                why="a snapshot is a file from another node: a route is claimed only from evidence that fits "
                "together (docs/security.md)",
                fix="re-create the snapshot with 'gdsdiag snapshot -o FILE' on the node, or run check there",
                route=Route.NVFS,
            )
        )
    direct = [r for r in verdict.routes if r in (Route.NVFS, Route.P2PDMA)]
    # A missing prerequisite of a route the node does not need is not a failure of the node when
    # another direct route works: say so instead of failing the run.
    if direct:
        for r in results:
            if r.route in (Route.NVFS, Route.P2PDMA) and r.route not in direct and r.status == Status.FAIL:
                r.status = Status.INFO
                r.summary += f" (not needed: {', '.join(x.value for x in direct)} route available)"
    # What an archive root refused (links out of it, members over a limit) is named, not dropped.
    archived = [x for x in ctx.fs.problems if "archive" in x]
    if not ctx.live and archived:
        results.append(
            CheckResult(
                "snapshot.integrity",
                "Snapshot contents",
                Status.WARN,
                f"{len(archived)} entries of the snapshot were not followed",
                [Evidence(ctx.fs.root, x) for x in archived[:50]],
                why="gdsdiag reads a snapshot inside the archive only (docs/security.md)",
                fix="re-create the snapshot with 'gdsdiag snapshot -o FILE' on the node",
            )
        )
    report = CheckReport(results, verdict, source=ctx.fs.root)
    for p in paths:
        pv, pres = analyse_path(ctx, p, verdict.routes)
        report.paths.append(pv)
        report.results += pres
    if gdscheck_text is not None:
        from ..importers.gdscheck import compare, parse

        g = parse(gdscheck_text)
        if not g.recognised:
            raise GdsdiagError(
                "the --gdscheck file is not 'gdscheck -p' output (no GDS release, driver, GPU or platform line found)",
                "pass the unchanged output of '/usr/local/cuda/gds/tools/gdscheck -p'",
            )
        report.gdscheck = compare(g, report)
    report.problems = list(dict.fromkeys(ctx.fs.problems))  # every reader used this one root
    return report
