"""Run a sweep: prepare one pattern file, run every (rw, mode, bs, threads) point, verify, measure
the route each point took and the ceilings it is held against."""

from __future__ import annotations

import itertools
import os
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, cast

from ..errors import GdsdiagError, UsageError
from ..routes import mix_json, mix_of
from . import files
from .engines import PointError, PointSpec, VerifyError, run_point, validate, verify_written, written_ranges
from .latency import summarize_hist

if TYPE_CHECKING:
    from ..schema import sweep as schema

GPU_MODES = ("bounce", "cufile", "cufile-async", "cufile-batch", "kvikio")
CUFILE_MODES = ("cufile", "cufile-async", "cufile-batch", "kvikio")
ALL_MODES = ("cufile", "cufile-async", "cufile-batch", "kvikio", "bounce", "host")
QUEUED_MODES = ("host", "bounce", "cufile-batch", "cufile-async")  # --iodepth N: N I/Os in flight per thread
ALL_RW = ("read", "write", "randread", "randwrite")


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


@dataclass
class PointRecord:
    mode: str
    rw: str
    bs: int
    threads: int
    summary: dict
    cpu_percent: float
    verified_bytes: int
    route: str
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
            "schema": "gdsdiag.sweep/1",
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


def _route_from_mix(delta: dict, mode: str) -> tuple[str, str | None]:
    routes = {k: v for k, v in delta.items() if v}
    if not routes:
        if mode == "kvikio":
            return (
                "KVIKIO_POSIX",
                "kvikio did not go through cuFile (its own POSIX path: cuFile handle registration failed?)",
            )
        return "UNKNOWN", "no cuFile statistics for this point"
    if len(routes) == 1:
        route = next(iter(routes))
    else:
        route = "MIXED(" + ",".join(f"{k}={v}" for k, v in sorted(routes.items())) + ")"
    warn = None
    if route == "COMPAT":
        warn = f"{mode} ran in cuFile compatibility mode (POSIX through host bounce buffers), not P2P"
    return route, warn


BATCH_COUNTERS = {
    "NVFS": ("batch_nvfs_submit_ops",),
    "P2PDMA": ("batch_p2p_submit_ops",),
    "COMPAT": ("batch_posix_enqueued_ops", "batch_aio_submit_ops", "batch_iouring_submit_ops"),
}


def _batch_routes(l1_before: dict, l1_after: dict) -> dict:
    """Batch I/O is not in the per-GPU level-3 counters; level 1 counts batch submissions by path
    (cufile.h 1.15: batch_nvfs/p2p/aio/iouring_submit_ops, batch_posix_enqueued_ops)."""
    out = {}
    for route, keys in BATCH_COUNTERS.items():
        n = sum(l1_after.get(k, {}).get("ok", 0) - l1_before.get(k, {}).get("ok", 0) for k in keys)
        if n:
            out[route] = n
    return out


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
        best = None
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
        uring = [m for m in cfg.modes if m in ("host", "bounce")]
        if uring and not have_uring():
            raise UsageError(
                f"--iodepth {cfg.iodepth} with {', '.join(uring)} needs io_uring (no linux/io_uring.h at build time)",
                "install the kernel headers (linux-libc-dev), or use --iodepth 1",
            )
    if cfg.compare_fio:
        from .fio import check_available

        check_available(cfg.modes)
    for rw, mode, bs, th in itertools.product(cfg.rws, cfg.modes, cfg.block_sizes, cfg.threads):
        validate(PointSpec(mode, rw, bs, th, cfg.seconds, cfg.total_bytes, cfg.verify, cfg.gpu, cfg.iodepth), cfg.size)


def _pool_note(cufile_mod) -> str:
    try:
        slabs = cufile_mod.driver.posix_pool_slabs()
        return " (posix pool now: " + ", ".join(f"{kb} KiB × {n}" for kb, n in slabs) + ")"
    except Exception:
        return ""


def run_sweep(cfg: SweepConfig, progress=None) -> SweepReport:
    validate_config(cfg)
    files.check_dir(cfg.directory)
    files.check_space(cfg.directory, cfg.size)
    gpu_modes = [m for m in cfg.modes if m in GPU_MODES]
    ceilings: dict = {}
    driver = None
    cufile_mod = None
    if gpu_modes:
        from .engines.gpu import cupy

        cupy()
        ceilings["pinned_copy"] = pinned_copy_gbps(cfg.gpu)
        if any(m in CUFILE_MODES for m in gpu_modes):
            from .. import cufile as cufile_mod

            probe = cufile_mod.probe_driver_open(timeout_s=60)
            if not probe["ok"]:
                raise GdsdiagError(
                    f"cuFile driver does not open: {probe.get('error')}",
                    "run 'gdsdiag check' for the cause, or drop --mode cufile,kvikio",
                )
            cufile_mod.stats.set_level(3)  # the per-GPU route counters need level 3 before open
            driver = cufile_mod.Driver().open()
            cufile_mod.stats.start()
    link = link_ceiling(cfg.directory, cfg.gpu) if gpu_modes else None
    if link:
        ceilings["link"] = link
    sf = files.SweepFile(cfg.directory, cfg.size)
    points: list[PointRecord] = []
    prepare_seconds = 0.0
    fio_runner = None
    try:
        if any(rw in ("read", "randread") for rw in cfg.rws):
            # reads need the pattern everywhere; a write-only sweep writes it as it goes
            if progress:
                progress.phase(f"writing the {cfg.size >> 20} MiB pattern file", cfg.size)
            prepare_seconds = sf.fill(progress=progress.advance if progress else None)
        if cfg.compare_fio:
            from .fio import FioRunner

            fio_runner = FioRunner(sf, cfg)
        host_results: dict = {}
        order = sorted(cfg.modes, key=lambda m: 0 if m == "host" else 1)  # host first: it is a ceiling of the others
        for rw, mode, bs, th in itertools.product(cfg.rws, order, cfg.block_sizes, cfg.threads):
            spec = PointSpec(mode, rw, bs, th, cfg.seconds, cfg.total_bytes, cfg.verify, cfg.gpu, cfg.iodepth)
            if progress:
                progress.point(spec)
            before = cufile_mod.path_mix() if (driver and mode in CUFILE_MODES) else None
            l1_before = cufile_mod.stats.level1() if (driver and mode == "cufile-batch") else None
            if fio_runner is not None:
                fio_runner.before(spec)
            nv0 = _nvfs_counters()
            try:
                res = run_point(spec, sf, progress.advance if progress else None)
            except VerifyError:
                raise
            except GdsdiagError as e:
                line = e.line()
                if cufile_mod is not None and mode in CUFILE_MODES and isinstance(e, PointError):
                    line += _pool_note(cufile_mod)
                points.append(PointRecord(mode, rw, bs, th, {}, 0.0, 0, "ERROR", error=line, iodepth=cfg.iodepth))
                if progress:
                    progress.done_point(None)
                continue
            summary = summarize_hist(
                res.hist, res.ops, res.nbytes, res.seconds, res.lat_min_ns, res.lat_max_ns, res.lat_sum_ns
            )
            if mode == "kvikio" and res.seconds:
                # kvikio's requests are threads × bs (split over its pool): count IOPS in bs
                # units like the other modes; latencies stay per request
                summary["iops"] = round(res.nbytes / bs / res.seconds, 1)
                summary["request_bytes"] = bs * th
            summary["max_gap_ms"] = round(res.max_gap_ns / 1e6, 3)
            rec = PointRecord(
                mode,
                rw,
                bs,
                th,
                summary,
                round(100.0 * res.cpu_seconds / res.seconds, 1) if res.seconds else 0.0,
                res.verified_bytes,
                "HOST" if mode == "host" else "DRAM_BOUNCE",
                iodepth=cfg.iodepth,
                loop=res.loop,
                verify_seconds=round(res.verify_seconds, 4),
            )
            if not spec.is_read and cfg.verify:
                inner_bs = bs * th if mode == "kvikio" else bs
                checked, bad, secs = verify_written(sf, written_ranges(res.written, inner_bs))
                if bad is not None:
                    raise VerifyError(
                        f"{mode} {rw}: data read back differs at data offset {bad}",
                        "the storage returned other bytes than were written",
                    )
                rec.verified_bytes = checked
                rec.verify_seconds = round(rec.verify_seconds + secs, 4)
            if before is not None:
                delta = cufile_mod.path_mix().minus(before)
                rec.route_detail = {"cufile_stats": delta.to_json()}
                routes = delta.routes()
                if l1_before is not None:
                    routes = _batch_routes(l1_before, cufile_mod.stats.level1())
                    rec.route_detail["cufile_batch_stats"] = routes
                rec.route, rec.route_warning = _route_from_mix(routes, mode)
                rec.route_mix = mix_json(mix_of(routes))  # the counts the label names, as Routes
            nv1 = _nvfs_counters()
            if nv0 and nv1 and None not in nv0.values() and None not in nv1.values():
                rec.route_detail["nvidia_fs"] = {k: nv1[k] - nv0[k] for k in nv0}
            ceil = {}
            if mode == "host":
                host_results[(rw, bs, th)] = rec.summary.get("gbps")
            elif host_results.get((rw, bs, th)):
                ceil["host_mode"] = host_results[(rw, bs, th)]
            if mode != "host":
                if "pinned_copy" in ceilings:
                    ceil["pinned_copy"] = ceilings["pinned_copy"]["h2d" if spec.is_read else "d2h"]
                if link:
                    ceil["link"] = link["gbps"]
            rec.ceilings = ceil
            if ceil and rec.summary.get("gbps"):
                rec.ratio = round(rec.summary["gbps"] / min(ceil.values()), 3)
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
    import platform

    machine: schema.Machine = {
        "hostname": platform.node(),
        "kernel": platform.release(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    return SweepReport(cfg, points, ceilings, sf.path, machine, prepare_seconds)
