"""``gdsdiag.sweep/2`` (docs/json.md). A point is ``PointRecord``'s fields in order
(sweep/runner.py ``to_json``), typed as ``Point``; its ``route_detail`` and ``fio`` objects stay
open (``dict[str, object]``): their keys depend on the mode and on what the node has."""

from __future__ import annotations

from typing import TypedDict

from .check import WhyFact

SCHEMA = "gdsdiag.sweep/2"
# what the readers of a sweep document (validate --sweep-results, kv --sweep) take: /1 wrote a
# point's route as a label ("COMPAT", "MIXED(NVFS=3,COMPAT=1)", "ERROR"), /2 as a mix
# (routes.point_shares reads both)
READABLE = ("gdsdiag.sweep/1", SCHEMA)


class Machine(TypedDict):
    hostname: str
    kernel: str
    cpus: int | None
    python: str
    date: str


class Config(TypedDict):
    dir: str
    size: int
    bs: list[int]
    threads: list[int]
    rw: list[str]
    modes: list[str]
    gpu: int
    seconds: float | None
    bytes: int | None
    verify: bool
    iodepth: int
    compare_fio: bool
    fio_jobs: (
        str | None
    )  # --compare-fio: "match" (the kind of --workers, the default), "process", "thread" or "both"; else null
    workers: str  # --workers: "thread" (threads of the sweep's process) or "process" (one process each)


# "p99.9" is not an identifier: the functional form
LatencyUs = TypedDict(
    "LatencyUs",
    {
        "p50": float | None,
        "p90": float | None,
        "p99": float | None,
        "p99.9": float | None,
        "min": float | None,
        "max": float | None,
        "mean": float | None,
    },
)


class Summary(TypedDict, total=False):
    """A point's figures (sweep/latency.py ``summarize_hist``); ``{}`` on an ERROR point."""

    ops: int
    bytes: int
    seconds: float
    gbps: float | None
    iops: float | None
    lat_us: LatencyUs
    max_gap_ms: float
    request_bytes: int  # kvikio only: threads x bs, what one request asks for


class Loop(TypedDict, total=False):
    """Which I/O loop ran the point (sweep/engines/base.py); ``{}`` on an ERROR point."""

    kind: str  # "c" | "python"
    engine: str  # "c psync", "c io_uring iodepth 32", "c cufile", ... or "python"
    buffers: str  # "2 MiB-aligned, MADV_HUGEPAGE" | "4 KiB pages"
    workers: str  # "thread" | "process": what ran the point's workers (--workers)
    cufile_handles: str  # cuFile modes only: "one per point" | "per thread" | "one per worker process"
    async_buffers: str  # cufile-async only: "based" | "separate" | "shared" (GDSDIAG_SWEEP_ASYNC_BUFFERS)
    why: str  # python loops only: why the C loop could not run
    check: str  # host psync reads of 64 KiB+ with verification: "overlapped" (block k checked while k+1 is read)


class Point(TypedDict):
    mode: str
    rw: str
    bs: int
    threads: int
    summary: Summary
    cpu_percent: float
    verified_bytes: int
    route: dict[str, float] | None  # share of its I/Os per route ({"COMPAT": 1.0}); null: an ERROR point
    route_detail: dict[str, object]  # cufile_stats, cufile_batch_stats, nvidia_fs: when measured
    route_warning: str | None
    ceilings: dict[str, float]  # host_mode, pinned_copy, link: GB/s this point is compared with
    ratio: float | None  # GB/s / the lowest ceiling
    error: str | None
    iodepth: int
    loop: Loop
    verify_seconds: float
    fio: dict[str, object] | None  # --compare-fio only
    route_mix: dict[str, int]  # I/Os per route as cuFile's counters saw them ({} when not measured)
    why_chain: list[WhyFact]  # why this route: the decisive fact first (sweep/why.py, issue 45)
    fix: str  # the one change that would move the bytes, "none needed", or "none …: <reason>"


class SweepDoc(TypedDict):
    schema: str
    machine: Machine
    config: Config
    prepare_seconds: float
    ceilings: dict[str, object]
    points: list[Point]
