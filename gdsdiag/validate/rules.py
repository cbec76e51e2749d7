"""Validation rules: each reads the gathered inputs and the policy and returns ONE verdict
(PASS / WARN / FAIL / SKIP) with its evidence and the fix. Pure: no I/O beyond what the inputs hold.

Rules are listed in cost order: static rules read files, measured rules need the sweep (and trace).
A fatal rule that fails makes the measurement pointless (no driver, no libcufile, no udev: every
cuFile registration would fail): the runner stops after the static stage unless --keep-going.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..check.model import Evidence
from ..cufile_json import RDMA_KEYS_1_19
from ..routes import Route, RouteMix, RouteShares, label_of, mix_of, point_shares
from ..topology.model import Role, Topology
from ..verdicts import Severity, Status
from .adapters import cufile_modes
from .policy import Policy, _size

if TYPE_CHECKING:
    from ..check.context import CheckContext
    from ..check.runner import CheckReport
    from ..schema import validate as schema
    from ..topology.pairs import LinkHop

STATIC, MEASURED = "static", "measured"


@dataclass
class Inputs:
    policy: Policy
    ctx: CheckContext
    mounts: list[dict]  # [{"path", "allowed"?, "min_gbps"?}]
    check: CheckReport | None = None
    topo: Topology | None = None  # read by the runner before any rule
    pairs: list = field(default_factory=list)
    sweeps: list[dict] = field(default_factory=list)  # [{"path", "gpu", "doc"}]
    sweep_note: str | None = None  # why there is no sweep
    sweep_errors: list[str] = field(default_factory=list)  # sweeps that failed on the node
    trace: dict | None = None  # {route: {"count", "bytes"}}
    trace_note: str | None = None
    trace_of_own_sweep: bool = False  # --full: the trace watched gdsdiag's own sweep
    inconsistent: list[str] = field(default_factory=list)  # where --sweep-results contradict themselves


@dataclass
class RuleResult:
    rule: str
    title: str
    status: Status
    summary: str
    evidence: list[Evidence] = field(default_factory=list)
    fix: str = ""
    source: str = ""
    stage: str = STATIC

    def to_json(self) -> schema.RuleResult:
        return {
            "rule": self.rule,
            "title": self.title,
            "status": self.status.value,
            "summary": self.summary,
            "evidence": [e.to_json() for e in self.evidence],
            "fix": self.fix,
            "source": self.source,
            "stage": self.stage,
        }


@dataclass
class Rule:
    id: str
    title: str
    stage: str
    fatal: bool
    source: str
    fn: Callable[[Inputs, Rule], tuple]

    def evaluate(self, inp: Inputs) -> RuleResult:
        status, summary, evidence, fix = self.fn(inp, self)
        return RuleResult(self.id, self.title, status, summary, evidence, fix, self.source, self.stage)


def _ev(src, val) -> Evidence:
    return Evidence(src, str(val))


def _vt(v) -> tuple[int, ...]:
    # ASCII digit runs of at most 9 (a version part), never Unicode digits or 5,000 of them
    return tuple(int(x) for x in re.findall(r"[0-9]{1,9}", str(v)[:200]))


def _action(action: str, bad: bool) -> Status:
    if not bad:
        return Status.PASS
    return {"fail": Status.FAIL, "warn": Status.WARN}.get(action, Status.SKIP)


# ---- inventory -------------------------------------------------------------------------------------


def _count(role: Role, key: str):
    def fn(inp: Inputs, rule: Rule):
        want = inp.policy.get(key)
        assert inp.topo is not None, "the runner reads the topology before the rules"
        devs = sorted(inp.topo.by_role(role), key=lambda d: d.sort_key())
        ev = [_ev("/sys/bus/pci/devices (class codes)", ", ".join(d.display() for d in devs) or "none")]
        if want is None:
            return Status.SKIP, f"{len(devs)} found; no expected count in the policy", ev, f"set {key} in the policy"
        ok = len(devs) == want
        return (
            Status.PASS if ok else Status.FAIL,
            f"{len(devs)} found, {want} expected",
            ev,
            ""
            if ok
            else "find the missing device: reseat, check 'dmesg' for AER / 'fallen off the bus', or fix the policy",
        )

    return fn


# ---- drivers ----------------------------------------------------------------------------------------


def r_nvidia(inp: Inputs, rule: Rule):
    d = inp.ctx.driver
    if not d.present:
        return (
            Status.FAIL,
            "NVIDIA kernel driver not loaded",
            [_ev("/proc/driver/nvidia/version", "absent")],
            "install and load the NVIDIA driver (nvidia.ko); nothing GPU-side works without it",
        )
    ev = [
        _ev("/proc/driver/nvidia/version", d.version_line or d.version),
        _ev("/proc/driver/nvidia/gpus", f"{len(d.gpus)} GPU(s)"),
    ]
    want = inp.policy.get("drivers.nvidia_min")
    if not d.gpus:
        return Status.FAIL, "driver loaded but it lists no GPU", ev, "check 'nvidia-smi' and dmesg for GPU init errors"
    if want is not None and _vt(d.version) < _vt(want):
        return Status.FAIL, f"driver {d.version} < {want}", ev, f"upgrade the NVIDIA driver to ≥ {want}"
    return Status.PASS, f"{d.version} ({'open' if d.open_module else 'proprietary'}), {len(d.gpus)} GPU(s)", ev, ""


def r_nvfs(inp: Inputs, rule: Rule):
    n = inp.ctx.nvfs
    required = inp.policy.get("drivers.nvidia_fs_required")
    ev = [_ev("/proc/modules", "nvidia_fs " + ("loaded" if n.loaded else "absent"))]
    if not n.loaded:
        if required:
            return (
                Status.FAIL,
                "nvidia-fs is not loaded (required by the policy)",
                ev,
                "install nvidia-fs for this driver (or the GPU Operator's GDS container) and modprobe nvidia_fs",
            )
        return Status.SKIP, "nvidia-fs not loaded; not required by the policy", ev, ""
    ver = n.module_version or n.proc_version
    ev.append(
        _ev("/sys/module/nvidia_fs/version, /proc/driver/nvidia-fs/version", f"{n.module_version} / {n.proc_version}")
    )
    want = inp.policy.get("drivers.nvidia_fs_min")
    if want is not None and ver and _vt(ver) < _vt(want):
        return Status.FAIL, f"nvidia-fs {ver} < {want}", ev, f"upgrade nvidia-fs to ≥ {want}"
    return Status.PASS, f"nvidia-fs {ver} loaded", ev, ""


def r_libcufile(inp: Inputs, rule: Rule):
    info = inp.ctx.libcufile
    if info is None:
        return (
            Status.SKIP,
            "libcufile not recorded in this snapshot",
            [_ev("gdsdiag snapshot", "no libcufile record")],
            "",
        )
    if info.path is None:
        return (
            Status.FAIL,
            "libcufile not found",
            [_ev("wheel, CUDA_HOME, /usr/local/cuda*/lib64, ldconfig -p", "absent")],
            "install libcufile: the CUDA toolkit's GDS package, or gdsdiag's [cufile] extra (the nvidia-cufile wheel)",
        )
    ev = [_ev(info.path, f"version {info.version or 'unknown'} (via {info.found_via})")]
    want = inp.policy.get("drivers.libcufile_min")
    if want is not None and not info.version:
        # (a library that names no version earns no PASS against a minimum: issue 42)
        return Status.WARN, f"libcufile version unknown (policy: ≥ {want})", ev, "install libcufile from nvidia-cufile"
    if want is not None and _vt(info.version) < _vt(want):
        return Status.FAIL, f"libcufile {info.version} < {want}", ev, f"install libcufile ≥ {want}"
    return Status.PASS, f"libcufile {info.version or 'version unknown'}", ev, ""


# ---- platform / PCIe ------------------------------------------------------------------------------


def r_iommu(inp: Inputs, rule: Rule):
    assert inp.topo is not None, "the runner reads the topology before the rules"
    io = inp.topo.iommu
    allowed = inp.policy.get("iommu.allowed")
    ev = [_ev("/sys/kernel/iommu_groups, /sys/class/iommu, /proc/cmdline", "; ".join(io.evidence) or io.mode)]
    if io.mode == "unknown":
        return Status.SKIP, "IOMMU mode unknown", ev, "run on the node (or a full snapshot)"
    ok = io.mode in allowed
    return (
        Status.PASS if ok else Status.FAIL,
        f"IOMMU {io.mode}" + ("" if ok else f" (allowed: {', '.join(allowed)})"),
        ev,
        "" if ok else "boot with iommu=pt (intel_iommu=on iommu=pt / amd_iommu=pt) or turn the IOMMU off",
    )


def _io_pairs(inp: Inputs):
    return [p for p in inp.pairs if p.b.role in (Role.NVME, Role.NIC)]


def r_acs(inp: Inputs, rule: Rule):
    pairs = _io_pairs(inp)
    if not pairs:
        return Status.SKIP, "no GPU↔NVMe/NIC path on this node", [_ev("PCI topology", "no pair")], ""
    redirect: dict[str, list[str]] = {}
    for p in pairs:
        for b in p.acs_redirect_bridges:
            redirect.setdefault(b, []).append(f"{p.a.display()}↔{p.b.display()}")
    unknown = sorted({b for p in pairs for b in p.acs_unknown_bridges})
    if redirect:
        ev = [
            _ev(f"/sys/bus/pci/devices/{b}/config (ACSCtl)", "RR/CR/EC set on the path " + ", ".join(v[:3]))
            for b, v in sorted(redirect.items())[:10]
        ]
        st = _action(inp.policy.get("pcie.acs_redirect"), True)
        return (
            st,
            f"ACS redirect on {len(redirect)} bridge(s) of GPU↔storage/NIC paths",
            ev,
            "disable ACS redirect on these ports (BIOS ACS option, or setpci ECAP_ACS+0x6.w=0 at boot)",
        )
    if unknown:
        return (
            Status.SKIP,
            f"ACS unreadable on {len(unknown)} bridge(s)",
            [_ev("PCI config space", "only 64 bytes readable: " + ", ".join(unknown[:6]))],
            "run as root (extended config space) to check ACS",
        )
    return (
        Status.PASS,
        f"no ACS redirect on {len(pairs)} GPU↔NVMe/NIC path(s)",
        [_ev("PCI config space (ACSCtl)", f"{len(pairs)} paths")],
        "",
    )


def r_downtrained(inp: Inputs, rule: Rule):
    pairs = _io_pairs(inp)
    if not pairs:
        return Status.SKIP, "no GPU↔NVMe/NIC path on this node", [_ev("PCI topology", "no pair")], ""
    bad: dict[str, tuple[LinkHop, str]] = {}
    idle: dict[str, tuple[LinkHop, str]] = {}
    for p in pairs:
        for h in p.hops:
            if not h.downtrained:
                continue
            full_width = h.link.width and h.link.max_width and h.link.width >= h.link.max_width
            (idle if h.idle_possible and full_width else bad)[h.bdf] = (h, f"{p.a.display()}↔{p.b.display()}")
    ev = [
        _ev(f"/sys/bus/pci/devices/{b}/current_link_*, max_link_*", f"{h.label}: {h.link.describe()} on {path}")
        for b, (h, path) in sorted(bad.items())[:10]
    ]
    ev += [
        _ev(
            f"/sys/bus/pci/devices/{b}/current_link_speed",
            f"{h.label}: {h.link.describe()} (GPU at idle lowers its speed: not counted)",
        )
        for b, (h, path) in sorted(idle.items())[:4]
    ]
    if bad:
        return (
            _action(inp.policy.get("pcie.downtrained"), True),
            f"{len(bad)} link(s) below their maximum on GPU↔storage/NIC paths",
            ev,
            "reseat the card, check the slot's lane wiring/riser and the BIOS link speed setting",
        )
    return (
        Status.PASS,
        f"all links at their maximum on {len(pairs)} path(s)",
        ev or [_ev("current_link_* vs max_link_*", "equal")],
        "",
    )


# ---- cufile.json ----------------------------------------------------------------------------------

IGNORED_MARKERS = ("is ignored by libcufile", "is the old name", "appears twice")
# Keys a libcufile older than the given version does not know (and so ignores): research notes
# cufile-kvikio.md §2.2 (dotted key strings in LIB15 vs LIB20, "1.17+" slab pools, "1.19/1.20-only").
KEY_MIN_VERSION = {"properties.gpu_bounce_buffer_slab_config": "1.17"}
for _k in RDMA_KEYS_1_19:  # the 1.19/1.20 RDMA keys cufile_json knows
    KEY_MIN_VERSION[f"properties.{_k}"] = "1.19"


def r_cufile_json(inp: Inputs, rule: Rule):
    cfg = inp.ctx.cufile
    if cfg.path is None:
        st = Status.FAIL if inp.policy.get("cufile.require_file") else Status.WARN
        return (
            st,
            "no cufile.json: libcufile runs on its built-in defaults",
            [_ev(", ".join(cfg.searched), "absent")],
            "install /etc/cufile.json (the CUDA toolkit's gds/cufile.json is the template)",
        )
    if cfg.parse_error:
        return Status.FAIL, cfg.parse_error, [_ev(cfg.path, "unparsable")], "fix the JSON at the position given"
    if cfg.found_via and "NOT read" in cfg.found_via:
        st = Status.FAIL if inp.policy.get("cufile.require_file") else Status.WARN
        return (
            st,
            f"only the toolkit template {cfg.path}: libcufile does not read it",
            [_ev(cfg.path, cfg.found_via)],
            f"copy {cfg.path} to /etc/cufile.json (or point CUFILE_ENV_PATH_JSON at it)",
        )
    fails = [i for i in cfg.issues if i.severity == Severity.FAIL]
    ev = [_ev(cfg.path, f"{i.key}: {i.message}") for i in fails[:12]] or [_ev(cfg.path, f"parsed ({cfg.found_via})")]
    return (
        Status.FAIL if fails else Status.PASS,
        f"{cfg.path}: {len(fails)} invalid value(s)",
        ev,
        "correct the listed keys (a wrong type leaves libcufile on its default)" if fails else "",
    )


def r_ignored_keys(inp: Inputs, rule: Rule):
    cfg = inp.ctx.cufile
    if cfg.path is None or cfg.parse_error or cfg.data is None:
        return Status.SKIP, "no readable cufile.json", [_ev("cufile.json", "absent or unparsable")], ""
    found = [(i.key, i.message) for i in cfg.issues if any(m in i.message for m in IGNORED_MARKERS)]
    info = inp.ctx.libcufile
    ver = info.version if info is not None and info.path else None
    for key, since in KEY_MIN_VERSION.items():
        if cfg.get(key) is not None and ver and _vt(ver) < _vt(since):
            found.append((key, f"'{key}' is read by libcufile ≥ {since}; the installed {ver} ignores it"))
    ev = [_ev(cfg.path, msg) for _, msg in found[:12]] or [
        _ev(cfg.path, "every key is read by libcufile " + (ver or "(version unknown)"))
    ]
    if not found:
        return (
            Status.PASS,
            "no ignored keys" + ("" if ver else " (installed libcufile version unknown: newer-key check skipped)"),
            ev,
            "",
        )
    return (
        _action(inp.policy.get("cufile.ignored_keys"), True),
        f"{len(found)} key(s) libcufile ignores",
        ev,
        "fix the spelling / use the current name, or install the libcufile that reads the key",
    )


DEFAULT_POOL = ([4, 1024, 16384], [128, 64, 64])  # libcufile defaults (gdscheck -p; research cufile-kvikio.md §2.2)


def r_compat_pool(inp: Inputs, rule: Rule):
    cfg = inp.ctx.cufile
    n = inp.policy.get("cufile.compat_pool.concurrent_ios")
    if n is None:
        return Status.SKIP, "no concurrent_ios in the policy", [], "set cufile.compat_pool.concurrent_ios"
    g = cfg.get if cfg.data is not None else (lambda k, d=None: d)
    if g("properties.allow_compat_mode") is False and g("properties.force_compat_mode") is not True:
        return (
            Status.SKIP,
            "allow_compat_mode is false: the compat pool is never used",
            [_ev(cfg.path, "allow_compat_mode: false")],
            "",
        )
    sizes, counts = g("properties.posix_pool_slab_size_kb"), g("properties.posix_pool_slab_count")
    src = cfg.path
    if not (isinstance(sizes, list) and isinstance(counts, list) and len(sizes) == len(counts) and sizes):
        sizes, counts = DEFAULT_POOL
        src = "libcufile defaults (no posix_pool_slab_* in cufile.json)"
    io_kb = _size(inp.policy.get("cufile.compat_pool.io_size"), "cufile.compat_pool.io_size") // 1024
    ev = [_ev(src, f"posix_pool_slab_size_kb {sizes}, posix_pool_slab_count {counts}")]
    fit = sorted((s, c) for s, c in zip(sizes, counts) if s >= io_kb)
    if not fit:
        return (
            Status.WARN,
            f"{io_kb} KiB I/Os are larger than the largest slab ({max(sizes)} KiB)",
            ev,
            f"add a slab class ≥ {io_kb} KiB to posix_pool_slab_size_kb",
        )
    s, c = fit[0]  # the slab class a request of this size is served from (the nixl hang: the 1 MiB class ran dry)
    ev.append(_ev("policy", f"{n} concurrent I/Os of {io_kb} KiB → the {s} KiB class holds {c} slabs"))
    if c < n:
        return (
            Status.FAIL,
            f"compat bounce pool: {c} × {s} KiB slabs for {n} concurrent {io_kb} KiB I/Os",
            ev,
            f"raise posix_pool_slab_count for the {s} KiB class to ≥ {n} in cufile.json (I/O beyond the pool waits, and can hang silently)",
        )
    return Status.PASS, f"{c} × {s} KiB slabs ≥ {n} concurrent I/Os", ev, ""


def r_udev(inp: Inputs, rule: Rule):
    fs = inp.ctx.fs
    have = fs.exists("/run/udev/data") or fs.exists("/run/udev/control")
    signs = inp.ctx.in_container()
    ev = [_ev("/run/udev", "present" if have else "absent")] + [_ev(s, "container sign") for s in signs]
    if have:
        return Status.PASS, "/run/udev visible" + (" (in a container)" if signs else ""), ev, ""
    st = Status.FAIL if inp.policy.get("container.require_udev") else Status.WARN
    return (
        st,
        "/run/udev missing" + (" in a container" if signs else "") + ": every cuFileHandleRegister fails",
        ev,
        "bind-mount the host's /run/udev read-only (docker -v /run/udev:/run/udev:ro; a hostPath volume in Kubernetes)",
    )


def r_routes(inp: Inputs, rule: Rule):
    if not inp.mounts:
        return Status.SKIP, "no mount to check (give --path DIR or policy mounts)", [], ""
    if inp.check is None or not inp.check.paths:
        return Status.SKIP, "path analysis unavailable", [], ""
    by_path = {m["path"]: m for m in inp.mounts}
    bad, ev = [], []
    for pv in inp.check.paths:
        allowed = inp.policy.allowed_routes(by_path.get(pv.path))
        ok = pv.route.value in allowed
        ev.append(
            _ev(
                f"{pv.path} ({pv.fstype or '?'} on {pv.mount_point or '?'})",
                f"route {pv.route.value}; allowed {', '.join(allowed)}; " + "; ".join(pv.reasons[:3]),
            )
        )
        if not ok:
            bad.append(f"{pv.path}: {pv.route.value}")
    if bad:
        return (
            Status.FAIL,
            "route not allowed: " + ", ".join(bad),
            ev,
            "make the direct route work (see 'gdsdiag check --path' for the missing prerequisite) or allow the route in the policy",
        )
    return Status.PASS, f"{len(inp.check.paths)} mount(s) on allowed routes", ev, ""


# ---- measured --------------------------------------------------------------------------------------


def _gpu_points(inp: Inputs):
    """Points of the cuFile modes: the sweep's host and bounce modes are reference measurements
    whose route is fixed by construction, not the node's GPU I/O path."""
    for s in inp.sweeps:
        for p in s["doc"].get("points") or []:
            if p.get("mode") in cufile_modes():
                yield s, p


def _bs_key(bs: int) -> str:
    for unit, shift in (("g", 30), ("m", 20), ("k", 10)):
        if bs >= 1 << shift and bs % (1 << shift) == 0:
            return f"{bs >> shift}{unit}"
    return str(bs)


def _thresholds(mapping: dict) -> dict:
    return {_size(k, "threshold"): v for k, v in (mapping or {}).items()}


def _no_sweep(inp: Inputs):
    return Status.SKIP, inp.sweep_note or "no sweep (run with --quick or --full, and --path)", [], ""


def r_min_gbps(inp: Inputs, rule: Rule):
    if inp.sweep_errors:
        return (
            Status.FAIL,
            f"{len(inp.sweep_errors)} sweep(s) could not run",
            [_ev("gdsdiag sweep", e) for e in inp.sweep_errors],
            "run 'gdsdiag check --path DIR' and 'gdsdiag cufile' for the cause",
        )
    if not inp.sweeps:
        return _no_sweep(inp)
    by_path = {m["path"]: m for m in inp.mounts}
    bad: list[str] = []
    ev: list[Evidence] = []
    n = 0
    for s, p in _gpu_points(inp):
        th = _thresholds((by_path.get(s["path"]) or {}).get("min_gbps", inp.policy.get("sweep.min_gbps")))
        label = f"{s.get('on') or 'GPU' + str(s['gpu'])} {s['path']} {p['mode']} {p['rw']} bs={_bs_key(p['bs'])} ×{p['threads']}"
        if p.get("error"):
            bad.append(label)
            ev.insert(0, _ev("sweep", f"{label}: failed: {p['error']}"))
            continue
        if p["bs"] not in th:
            continue
        n += 1
        g = (p.get("summary") or {}).get("gbps") or 0.0
        ok = g >= th[p["bs"]]
        _point(bad, ev, label, _ev("sweep", f"{label}: {g:.3f} GB/s (min {th[p['bs']]})"), failed=not ok)
    return _points_verdict(
        bool(n or bad),
        bad,
        ev,
        "min_gbps",
        "below the minimum GB/s",
        "see the route and link rules for the cause; compare with 'gdsdiag sweep'",
        f"{n} point(s) at or above the minimum GB/s",
    )


def r_max_p99(inp: Inputs, rule: Rule):
    if not inp.sweeps:
        return _no_sweep(inp)
    th = _thresholds(inp.policy.get("sweep.max_p99_us"))
    bad: list[str] = []
    ev: list[Evidence] = []
    n = 0
    for s, p in _gpu_points(inp):
        p99 = ((p.get("summary") or {}).get("lat_us") or {}).get("p99")
        if p["bs"] not in th or p99 is None or p.get("error"):
            continue
        n += 1
        label = f"{s.get('on') or 'GPU' + str(s['gpu'])} {s['path']} {p['mode']} {p['rw']} bs={_bs_key(p['bs'])} ×{p['threads']}"
        _point(bad, ev, label, _ev("sweep", f"{label}: p99 {p99:.0f} µs (max {th[p['bs']]})"), failed=p99 > th[p["bs"]])
    return _points_verdict(
        bool(n),
        bad,
        ev,
        "max_p99_us",
        "above the maximum p99",
        "look for queueing: compat pool size, device saturation, link",
        f"{n} point(s) within the p99 limit",
    )


def _point(bad: list[str], ev: list[Evidence], label: str, e: Evidence, failed: bool) -> None:
    """One swept point's evidence; the points that missed their threshold are listed first."""
    if failed:
        bad.append(label)
        ev.insert(0, e)
    else:
        ev.append(e)


def _points_verdict(checked: bool, bad: list[str], ev: list[Evidence], key: str, missed: str, fix: str, passed: str):
    """SKIP when no swept point had a ``sweep.<key>`` threshold, FAIL when some missed it, else PASS."""
    if not checked:
        return Status.SKIP, f"no swept block size has a {key} threshold", ev, f"add the block size to sweep.{key}"
    if bad:
        return Status.FAIL, f"{len(bad)} point(s) {missed}", ev, fix
    return Status.PASS, passed, ev, ""


def route_mix(sweeps: list[dict], only: Route | None = None) -> tuple[dict, list[Evidence]]:
    """Bytes moved per Route over the cuFile-mode points of the sweeps: each point's bytes split by
    its route mix (ops per route, as the sweep wrote it), else, in a document from before the mix
    was written, by its cuFile statistics, then its batch counters (what its MIXED label was made
    of), else by its route label.
    Evidence: the points that moved bytes by ``only`` (all points when None)."""
    mix: dict = {}
    ev = []
    for s in sweeps:
        for p in s["doc"].get("points") or []:
            if p.get("mode") not in cufile_modes() or p.get("error"):
                continue
            summ = p.get("summary") or {}
            nbytes = summ.get("bytes") or p.get("verified_bytes") or 0
            rd = p.get("route_detail") or {}
            stats = (rd.get("cufile_stats") or {}).get("routes")
            counts = p.get("route_mix") or (stats if stats and sum(stats.values()) else rd.get("cufile_batch_stats"))
            shares: RouteMix | RouteShares = (
                mix_of(counts)
                if counts and sum(counts.values())
                else point_shares(p.get("route")) or {Route.UNKNOWN: 1}
            )
            tot = sum(shares.values())
            if tot <= 0:
                continue  # counters that sum to nothing (or below): no route to share bytes between
            for r, v in shares.items():
                mix[r.value] = mix.get(r.value, 0) + nbytes * v / tot
            detail = f"cuFile stats {stats}" if stats else f"route {label_of(shares)}"
            if only is None or only in shares:
                ev.append(
                    _ev(
                        f"sweep {s['path']} {s.get('on') or 'GPU' + str(s['gpu'])}",
                        f"{p['mode']} {p['rw']} bs={_bs_key(p['bs'])} ×{p['threads']}: {detail}, {nbytes} B",
                    )
                )
    return mix, ev


def _share(inp: Inputs, route: Route, key: str):
    if not inp.sweeps and inp.trace is None:
        return _no_sweep(inp)
    limit = inp.policy.get(key)
    mix, ev = route_mix(inp.sweeps, route)
    worst, parts = 0.0, []
    total = sum(mix.values())
    if total:
        share = mix.get(route.value, 0) / total
        worst = max(worst, share)
        parts.append(
            f"sweep route mix {share:.1%} {route.value} ({mix.get(route.value, 0) / 1e9:.2f} of {total / 1e9:.2f} GB)"
        )
    if inp.trace is not None and route == Route.DRAM_BOUNCE and inp.trace_of_own_sweep:
        # the sweep writes its pattern file and verifies data with plain host I/O, which the tracer
        # rightly calls application I/O through host memory: not the GPU path being judged
        ev.append(
            _ev(
                "gdsdiag trace",
                "not counted here: the traced sweep's own pattern fill and verification are host I/O by design",
            )
        )
    elif inp.trace is not None:
        ttot = sum(v["bytes"] for v in inp.trace.values())
        if ttot:
            tshare = inp.trace.get(route.value, {}).get("bytes", 0) / ttot
            worst = max(worst, tshare)
            parts.append(
                f"gdsdiag trace {tshare:.1%} {route.value} ({inp.trace.get(route.value, {}).get('count', 0)} I/Os)"
            )
            ev.insert(
                0,
                _ev(
                    "gdsdiag trace",
                    ", ".join(f"{k}: {v['count']} I/Os, {v['bytes']} B" for k, v in sorted(inp.trace.items())),
                ),
            )
    elif inp.trace_note:
        ev.append(_ev("gdsdiag trace", f"not attached: {inp.trace_note}"))
    if not parts:
        return Status.SKIP, "no I/O measured", ev, ""
    summary = "; ".join(parts) + f" (allowed {limit:.0%})"
    if worst > limit:
        fix = (
            "make the direct route work (see the routes.per_mount and driver rules, 'gdsdiag check --path'), "
            "or allow compat in the policy (io.max_compat_share)"
            if route == Route.COMPAT
            else "use cuFile with registered GPU buffers instead of host staging, or allow it (io.max_bounce_share)"
        )
        return Status.FAIL, summary, ev[:16], fix
    return Status.PASS, summary, ev[:16], ""


def r_compat_share(inp, rule):
    return _share(inp, Route.COMPAT, "io.max_compat_share")


def r_bounce_share(inp, rule):
    return _share(inp, Route.DRAM_BOUNCE, "io.max_bounce_share")


DOC = "docs/validate.md"
RULES: tuple[Rule, ...] = (
    Rule(
        "drivers.nvidia",
        "NVIDIA driver and GPUs",
        STATIC,
        True,
        "/proc/driver/nvidia (open driver nv-procfs.c)",
        r_nvidia,
    ),
    Rule(
        "drivers.libcufile",
        "libcufile",
        STATIC,
        True,
        "cuFile API reference: every cuFile route goes through libcufile",
        r_libcufile,
    ),
    Rule(
        "container.udev",
        "udev database visible",
        STATIC,
        True,
        "kvikio#33/#283, LMCache#795: 'udev property not found: ID_FS_USAGE'",
        r_udev,
    ),
    Rule(
        "cufile.json",
        "cufile.json valid",
        STATIC,
        False,
        "NVIDIA GDS configuration guide §4.2.2; gdsdiag/cufile_json.py",
        r_cufile_json,
    ),
    Rule("inventory.gpus", "GPU count", STATIC, False, "PCI class 0x03 (NVIDIA)", _count(Role.GPU, "expect.gpus")),
    Rule("inventory.nics", "NIC count", STATIC, False, "PCI class 0x02", _count(Role.NIC, "expect.nics")),
    Rule("inventory.nvme", "NVMe count", STATIC, False, "PCI class 0x0108", _count(Role.NVME, "expect.nvme")),
    Rule("drivers.nvidia_fs", "nvidia-fs module", STATIC, False, "gds-nvidia-fs; #60 (2.25.6 P2P regression)", r_nvfs),
    Rule(
        "platform.iommu",
        "IOMMU off or passthrough",
        STATIC,
        False,
        "NVIDIA GDS installation guide (IOMMU); gds-nvidia-fs#57",
        r_iommu,
    ),
    Rule(
        "pcie.acs",
        "no ACS redirect on GPU↔storage/NIC paths",
        STATIC,
        False,
        "NVIDIA GDS best-practices guide (ACS); PCIe ACS capability",
        r_acs,
    ),
    Rule(
        "pcie.downtrained",
        "no downtrained link on GPU↔storage/NIC paths",
        STATIC,
        False,
        "PCIe Link Status vs Link Capabilities (sysfs current/max_link_*)",
        r_downtrained,
    ),
    Rule(
        "cufile.ignored_keys",
        "cufile.json keys libcufile ignores",
        STATIC,
        False,
        "libcufile key strings 1.15–1.20 (research cufile-kvikio.md §2.2)",
        r_ignored_keys,
    ),
    Rule(
        "cufile.compat_pool",
        "compat bounce pool large enough",
        STATIC,
        False,
        "ai-dynamo/nixl PR #2070 (compat hang when posix pool ran out)",
        r_compat_pool,
    ),
    Rule(
        "routes.per_mount",
        "route per mount allowed",
        STATIC,
        False,
        "gdsdiag check --path (route a cuFile I/O would take)",
        r_routes,
    ),
    Rule(
        "sweep.min_gbps", "minimum GB/s per GPU per mount", MEASURED, False, "gdsdiag sweep (verified I/O)", r_min_gbps
    ),
    Rule("sweep.max_p99", "maximum p99 latency", MEASURED, False, "gdsdiag sweep latency percentiles", r_max_p99),
    Rule(
        "io.compat_share",
        "compat I/O share",
        MEASURED,
        False,
        "cuFile statistics (level 3 per-GPU n_posix_*) and gdsdiag trace",
        r_compat_share,
    ),
    Rule(
        "io.bounce_share",
        "DRAM bounce I/O share",
        MEASURED,
        False,
        "kvikio POSIX fallback / gdsdiag trace DRAM_BOUNCE",
        r_bounce_share,
    ),
)
