"""Run a sweep: prepare one pattern file, run every (rw, mode, bs, threads) point, verify, measure
the route each point took and the ceilings it is held against."""

from __future__ import annotations

import itertools
import os
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, cast

from ..errors import GdsdiagError, UsageError
from ..routes import dominant, mix_json, point_shares, share_json
from . import blockstat, files
from .engines import (
    ALL_MODES,
    ENGINES,
    PointError,
    PointSpec,
    VerifyError,
    engine,
    run_point,
    validate,
    verify_written,
    written_ranges,
)
from .latency import summarize_hist

if TYPE_CHECKING:
    from ..schema import sweep as schema

# derived from the engines' own flags (engines/__init__.py ENGINES), for readers outside the sweep
CUFILE_MODES = tuple(m for m, e in ENGINES.items() if e.cufile)
QUEUED_MODES = tuple(m for m, e in ENGINES.items() if e.queued)  # --iodepth N: N I/Os in flight per thread
ALL_RW = ("read", "write", "randread", "randwrite")
WORKER_KINDS = ("thread", "process")  # --workers


@dataclass
class SweepConfig:
    directory: str
    size: int
    block_sizes: list[int]
    threads: list[int]
    rws: list[str]
    modes: list[str]
    gpu: int = 0
    seconds: float | None = 10.0
    total_bytes: int | None = None
    verify: bool = True
    iodepth: int = 1
    compare_fio: bool = False
    fio_jobs: str = "match"  # --compare-fio: fio's jobs of the workers' kind, forked processes, threads, or both
    workers: str = "thread"  # a point's workers: threads of this process, or a process each (fio's default)

    @property
    def buffers(self) -> str:
        """The host buffers' layout: the sweep's huge pages, or fio's 4 KiB pages under
        --compare-fio (like for like); GDSDIAG_SWEEP_BUFFERS overrides either."""
        return files.buffer_kind("pages" if self.compare_fio else "huge")

    def spec(self, mode: str, rw: str, bs: int, threads: int) -> PointSpec:
        return PointSpec(
            mode,
            rw,
            bs,
            threads,
            self.seconds,
            self.total_bytes,
            self.verify,
            self.gpu,
            self.iodepth,
            buffers=self.buffers,
            workers=self.workers,
        )


@dataclass
class PointRecord:
    mode: str
    rw: str
    bs: int
    threads: int
    summary: dict
    cpu_percent: float
    verified_bytes: int
    route: dict[str, float] | None  # share of the point's I/Os per Route (routes.share_json); None: ERROR
    route_detail: dict = field(default_factory=dict)
    route_warning: str | None = None
    ceilings: dict = field(default_factory=dict)
    ratio: float | None = None
    error: str | None = None
    iodepth: int = 1
    loop: dict = field(default_factory=dict)  # {"kind": "c"|"python", "engine": ..., "why": ...}
    verify_seconds: float = 0.0  # generating/checking data (not in the latencies)
    fio: dict | None = None  # --compare-fio: fio's figures and the ratio
    route_mix: dict[str, int] = field(default_factory=dict)  # I/Os per Route (routes.mix_json); {} unmeasured
    why_chain: list[dict] = field(default_factory=list)  # sweep/why.py: facts, decisive first (issue 45)
    fix: str = ""  # the one change that would move the bytes, "none needed", or "none …: <reason>"

    def to_json(self) -> schema.Point:
        # the fields, in their order, are the document's keys, as they always were: Point types
        # them (tests/test_json_schema.py checks a real sweep and docs/json.md against it)
        return cast("schema.Point", dict(self.__dict__))


@dataclass
class SweepReport:
    config: SweepConfig
    points: list[PointRecord]
    ceilings: dict
    file_path: str
    machine: schema.Machine
    prepare_seconds: float = 0.0

    def to_json(self) -> schema.SweepDoc:
        c = self.config
        return {
            "schema": "gdsdiag.sweep/2",
            "machine": self.machine,
            "config": {
                "dir": c.directory,
                "size": c.size,
                "bs": c.block_sizes,
                "threads": c.threads,
                "rw": c.rws,
                "modes": c.modes,
                "gpu": c.gpu,
                "seconds": c.seconds,
                "bytes": c.total_bytes,
                "verify": c.verify,
                "iodepth": c.iodepth,
                "compare_fio": c.compare_fio,
                "fio_jobs": c.fio_jobs if c.compare_fio else None,
                "workers": c.workers,
            },
            "prepare_seconds": round(self.prepare_seconds, 3),
            "ceilings": self.ceilings,
            "points": [p.to_json() for p in self.points],
        }


def _nvfs_counters() -> dict | None:
    from ..platform.fsroot import FsRoot
    from ..platform.nvfs_proc import parse_stats

    text = FsRoot("/").read_text("/proc/driver/nvidia-fs/stats")
    if text is None:
        return None
    s = parse_stats(text)
    return {"reads": s.counters.get("Reads", {}).get("n"), "writes": s.counters.get("Writes", {}).get("n")}


def pinned_copy_gbps(gpu: int, nbytes: int = 256 << 20, repeats: int = 3) -> dict:
    """Pinned host ↔ GPU copy bandwidth measured now (the PCIe ceiling a bounce path cannot beat)."""
    import cupy as cp

    cp.cuda.Device(gpu).use()
    import numpy as np

    mem = cp.cuda.alloc_pinned_memory(nbytes)
    host = np.frombuffer(mem, dtype=np.uint8, count=nbytes)
    dev = cp.empty(nbytes, dtype=cp.uint8)
    out = {}
    for name, fn in (("h2d", lambda s: dev.set(host, stream=s)), ("d2h", lambda s: dev.get(out=host, stream=s))):
        best = 0.0
        s = cp.cuda.Stream(non_blocking=True)
        for _ in range(repeats):
            s.synchronize()
            t = time.perf_counter()
            fn(s)
            s.synchronize()
            best = max(best, nbytes / (time.perf_counter() - t) / 1e9)
        out[name] = round(best, 2)
    return out


def link_ceiling(directory: str, gpu: int) -> dict | None:
    """The narrowest PCIe link between the GPU and the device holding ``directory``."""
    try:
        from ..check.context import CheckContext
        from ..platform import mounts
        from ..platform.fsroot import FsRoot
        from ..topology.model import Role
        from ..topology.pairs import analyse_pair

        ctx = CheckContext(FsRoot("/"))
        m = mounts.mount_for(os.path.realpath(directory), ctx.mounts)
        chain = mounts.block_chain(ctx.fs, m.dev) if m and not m.dev.startswith("0:") else None
        pcis = [n.pci for n in chain.leaves() if n.pci] if chain else []
        gpus = sorted(ctx.topology.by_role(Role.GPU), key=lambda d: d.sort_key())
        if not pcis or gpu >= len(gpus):
            return None
        best: dict | None = None
        for bdf in pcis:
            dev = ctx.topology.devices.get(bdf)
            if dev is None:
                continue
            p = analyse_pair(ctx.topology, gpus[gpu], dev)
            if p.narrowest and p.narrowest.link.gbytes_per_s:
                g = p.narrowest.link.gbytes_per_s
                if best is None or g < best["gbps"]:
                    best = {
                        "gbps": round(g, 2),
                        "link": p.narrowest.link.describe(),
                        "at": p.narrowest.bdf,
                        "pair": f"{gpus[gpu].label}↔{bdf}",
                        "nvidia_smi": p.smi.value,
                    }
        return best
    except Exception:  # the ceiling is context, never a reason to fail a sweep
        return None


def validate_config(cfg: SweepConfig) -> None:
    """Every argument checked before any file is written or any library loaded (exit 4)."""
    for m in cfg.modes:
        if m not in ALL_MODES:
            raise UsageError(f"unknown mode {m!r}", f"use any of {', '.join(ALL_MODES)}")
    for rw in cfg.rws:
        if rw not in ALL_RW:
            raise UsageError(f"unknown --rw {rw!r}", f"use any of {', '.join(ALL_RW)}")
    if not (cfg.modes and cfg.rws and cfg.block_sizes and cfg.threads):
        raise UsageError(
            "nothing to run: --mode, --rw, --bs and --threads each need a value", "see gdsdiag sweep --help"
        )
    if cfg.size <= 0 or cfg.size % 4096:
        raise UsageError(f"--size {cfg.size} is not a positive multiple of 4 KiB", "use e.g. --size 1G")
    if cfg.total_bytes is not None and cfg.total_bytes <= 0:
        raise UsageError(f"--bytes {cfg.total_bytes}: must be more than 0", "use e.g. --bytes 1G")
    if cfg.fio_jobs not in ("match", "process", "thread", "both"):
        raise UsageError(f"unknown --fio-jobs {cfg.fio_jobs!r}", "use match, process, thread or both")
    if cfg.workers not in WORKER_KINDS:
        raise UsageError(f"unknown --workers {cfg.workers!r}", "use thread or process")
    if cfg.workers == "process":
        single = [m for m in cfg.modes if not ENGINES[m].processes]
        if single:
            raise UsageError(
                f"--workers process is not for {', '.join(single)} (one worker whose own thread pool does the I/O)",
                "run it with --workers thread, in a sweep of its own",
            )
    if cfg.iodepth > 1:
        slow = [m for m in cfg.modes if m not in QUEUED_MODES]
        if slow:
            raise UsageError(
                f"--iodepth {cfg.iodepth} is for {', '.join(QUEUED_MODES)}; not for {', '.join(slow)}",
                "use --mode cufile-batch or cufile-async for cuFile with requests in flight, or --iodepth 1",
            )
        from .native import have_uring, load

        lib, why = load()
        if lib is None:
            raise UsageError(
                f"--iodepth {cfg.iodepth} needs the compiled I/O loop ({why})",
                "install gcc (apt-get install gcc), or use --iodepth 1",
            )
        uring = [m for m in cfg.modes if ENGINES[m].uring]
        if uring and not have_uring():
            raise UsageError(
                f"--iodepth {cfg.iodepth} with {', '.join(uring)} needs io_uring (no linux/io_uring.h at build time)",
                "install the kernel headers (linux-libc-dev), or use --iodepth 1",
            )
    if cfg.compare_fio:
        from .fio import check_available

        check_available(cfg.modes)
    for rw, mode, bs, th in itertools.product(cfg.rws, cfg.modes, cfg.block_sizes, cfg.threads):
        validate(cfg.spec(mode, rw, bs, th), cfg.size)


def run_sweep(cfg: SweepConfig, progress=None) -> SweepReport:
    validate_config(cfg)
    files.check_dir(cfg.directory)
    files.check_space(cfg.directory, cfg.size)
    used = [engine(m) for m in cfg.modes]
    ceilings: dict = {}
    driver = None
    if any(e.gpu for e in used):
        from .engines.gpu import cupy

        cupy()
        ceilings["pinned_copy"] = pinned_copy_gbps(cfg.gpu)
        if any(e.cufile for e in used):
            from .engines.cufile import open_driver, probe_driver

            if cfg.workers == "thread":
                driver = open_driver()
            else:
                # process workers open their own driver each (as fio's forked jobs); this process
                # does no cuFile I/O then, and a driver here would hold one more bounce pool
                probe_driver()
    link = link_ceiling(cfg.directory, cfg.gpu) if any(e.gpu for e in used) else None
    if link:
        ceilings["link"] = link
    sf = files.SweepFile(cfg.directory, cfg.size)
    points: list[PointRecord] = []
    prepare_seconds = 0.0
    fio_runner = None
    dev_path = blockstat.stat_path(sf.fd)
    try:
        if any(rw in ("read", "randread") for rw in cfg.rws):
            # reads need the pattern everywhere; a write-only sweep writes it as it goes
            if progress:
                progress.phase(f"writing the {cfg.size >> 20} MiB pattern file", cfg.size)
            prepare_seconds = sf.fill(progress=progress.advance if progress else None)
        if cfg.compare_fio:
            from .fio import FioRunner

            fio_runner = FioRunner(sf, cfg)
        ceiling_results: dict = {}
        order = sorted(cfg.modes, key=lambda m: 0 if engine(m).ceiling else 1)  # a ceiling runs first
        for rw, mode, bs, th in itertools.product(cfg.rws, order, cfg.block_sizes, cfg.threads):
            eng = engine(mode)
            spec = cfg.spec(mode, rw, bs, th)
            if progress:
                progress.point(spec)
            rec = _point(cfg, eng, spec, sf, fio_runner, dev_path, progress)
            if rec.error is None:
                _hold_against_ceilings(rec, eng, spec, ceilings, link, ceiling_results)
                if fio_runner is not None:
                    rec.fio = fio_runner.compare(spec, rec)
            points.append(rec)
            if progress:
                progress.done_point(rec)
    finally:
        if fio_runner is not None:
            fio_runner.close()
        sf.remove()
        if driver is not None:
            # no cuFileStatsStop: it crashed libcufile 1.15 (segfault) after batch and stream I/O in one
            # process on the GPU machine; closing the driver ends the statistics anyway
            driver.close()
    add_whys(points, cfg.directory)
    import platform

    machine: schema.Machine = {
        "hostname": platform.node(),
        "kernel": platform.release(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    return SweepReport(cfg, points, ceilings, sf.path, machine, prepare_seconds)


def _node_facts():
    """`check`'s facts of this node (check/facts.py: its own rules), for the points' why; None
    where they cannot be read (the why then says the node's side is not known)."""
    from ..check.context import CheckContext
    from ..check.facts import NodeFacts
    from ..platform.roots import node_root

    try:
        with node_root("/") as fs:
            return NodeFacts.collect(CheckContext(fs, env=dict(os.environ)))
    except (OSError, ValueError, GdsdiagError):
        return None


def add_whys(points: list[PointRecord], directory: str, node_facts=_node_facts) -> None:
    """Every point's why_chain and fix; the node is read once, and only where a point's route was
    not P2P or host I/O (those need no node fact)."""
    from .why import needs_node, point_why

    node = None
    if any(needs_node(p.route, p.route_mix, p.error) for p in points):
        node = node_facts()
    for p in points:
        design = engine(p.mode).design_for(dominant(point_shares(p.route) or {})) if p.error is None else ""
        facts, p.fix = point_why(p.mode, p.route, p.route_mix, p.error, node, directory, design)
        p.why_chain = [f.to_json() for f in facts]


def _point(cfg: SweepConfig, eng, spec: PointSpec, sf, fio_runner, dev_path, progress) -> PointRecord:
    """One point: fio before it (--compare-fio), the point, its route and device counters, and the
    read-back of what it wrote. An ERROR point is a record with its reason, never a number."""
    route0 = eng.route_start() if cfg.workers == "thread" else None  # (process workers: their own)
    if fio_runner is not None:
        fio_runner.before(spec)
    nv0 = _nvfs_counters()
    dev0 = blockstat.read(dev_path)
    try:
        res = run_point(spec, sf, progress.advance if progress else None)
    except VerifyError:
        raise
    except GdsdiagError as e:
        line = e.line() + (eng.error_note() if isinstance(e, PointError) else "")
        return PointRecord(spec.mode, spec.rw, spec.bs, spec.threads, {}, 0.0, 0, None, error=line, iodepth=cfg.iodepth)
    summary = summarize_hist(res.hist, res.ops, res.nbytes, res.seconds, res.lat_min_ns, res.lat_max_ns, res.lat_sum_ns)
    eng.summarize(summary, spec, res)
    summary["max_gap_ms"] = round(res.max_gap_ns / 1e6, 3)
    # process workers counted their own route (each its own libcufile); threads this process's
    seen = res.route if res.route is not None else eng.route_end(route0)
    rec = PointRecord(
        spec.mode,
        spec.rw,
        spec.bs,
        spec.threads,
        summary,
        round(100.0 * res.cpu_seconds / res.seconds, 1) if res.seconds else 0.0,
        res.verified_bytes,
        share_json(seen.shares()),
        route_detail=seen.detail,
        route_warning=seen.warning,
        iodepth=cfg.iodepth,
        loop=res.loop,
        route_mix=mix_json(seen.mix),
        verify_seconds=round(res.verify_seconds, 4),
    )
    if not spec.is_read and cfg.verify:
        checked, bad, secs = verify_written(sf, written_ranges(res.written, eng.written_unit(spec)))
        if bad is not None:
            raise VerifyError(
                f"{spec.mode} {spec.rw}: data read back differs at data offset {bad}",
                "the storage returned other bytes than were written",
            )
        rec.verified_bytes = checked
        rec.verify_seconds = round(rec.verify_seconds + secs, 4)
    dev = blockstat.delta(dev0, blockstat.read(dev_path), res.ops, res.seconds, spec.is_read)
    if dev is not None:
        rec.route_detail["block_device"] = dev
    nv1 = _nvfs_counters()
    if nv0 and nv1 and None not in nv0.values() and None not in nv1.values():
        rec.route_detail["nvidia_fs"] = {k: nv1[k] - nv0[k] for k in nv0}
    return rec


def _hold_against_ceilings(rec: PointRecord, eng, spec: PointSpec, ceilings: dict, link, ceiling_results: dict) -> None:
    """``ceilings`` and ``ratio``: GB/s against the ceiling mode's same point (host, which runs
    first), the pinned host↔GPU copy and the PCIe link."""
    key = (spec.rw, spec.bs, spec.threads)
    ceil = {}
    if eng.ceiling:
        ceiling_results[key] = rec.summary.get("gbps")
    elif ceiling_results.get(key):
        ceil["host_mode"] = ceiling_results[key]
    if eng.gpu:
        if "pinned_copy" in ceilings:
            ceil["pinned_copy"] = ceilings["pinned_copy"]["h2d" if spec.is_read else "d2h"]
        if link:
            ceil["link"] = link["gbps"]
    rec.ceilings = ceil
    if ceil and rec.summary.get("gbps"):
        rec.ratio = round(rec.summary["gbps"] / min(ceil.values()), 3)
