"""``--compare-fio``: fio's equivalent job, run right after each point on the same file, and the ratio.

Like for like, point by point:
- the same open file: fio is given /proc/<pid>/fd/<fd>, the sweep's own descriptor (read points,
  with --readonly); write points go to a second file the sweep created and filled once, so fio
  never overwrites the pattern the sweep verifies and both overwrite allocated blocks;
- ``numjobs`` = threads, ``iodepth`` = --iodepth; fio's jobs as forked processes (fio's default,
  how users run it) and/or as threads of one process (``--thread``, as the sweep's workers):
  ``--fio-jobs match|process|thread|both``, each kind with its own ratio; the sweep's own workers are
  threads or, with ``--workers process``, a process each (``like_for_like`` names the fio kind that
  matches them). On one GPU without MPS, forked
  libcufile jobs are N CUDA contexts that the GPU time-slices (docs/benchmarks.md): the two kinds
  differ there by 8x at 4 KiB;
- sequential points: each job its own slice, as the sweep's workers (``offset_increment`` = slice,
  ``offset`` = the header); random points: each job over the whole data region, with replacement
  (``norandommap``) as the sweep draws offsets;
- engines: host ``psync`` (pread/pwrite, as the C loop) or ``io_uring`` at --iodepth > 1; cufile
  (and cufile-batch/-async at --iodepth 1: one request in flight, as fio's sync engine) fio's
  ``libcufile`` engine with ``cuda_io=cufile``; bounce ``libcufile`` with ``cuda_io=posix``
  (pread to host memory, then a copy to the GPU); other modes have no fio equivalent (said so);
- duration: the same --time (``time_based``), or --bytes split over the jobs (``io_size``);
- host buffers: fio's are 4 KiB pages (malloc); under --compare-fio the sweep's host buffers are
  4 KiB pages too, unless GDSDIAG_SWEEP_BUFFERS says otherwise (then the difference is listed);
- what still differs is listed per point (``settings``), never hidden;
- measurement window: the sweep's workers start their clock together once every one is ready;
  fio's jobs each start theirs after their own engine setup (fio_windows), so with numjobs > 1 fio
  also writes per-job IOPS logs (20 ms samples, into a work directory of ours); each run carries
  ``windows``, and the point ``all_running``: fio's rate over the window every job ran, the ratio
  against it, and the spread of the jobs' starts and ends; where that rate is more than 2 % off
  fio's reported one, the difference is listed as measured;
- order: fio runs before and after the point and the ratio is against the mean of the two. On
  the GPU machine (virtio disk) whichever ran second read 1 MiB blocks up to 1.5x faster (the
  hypervisor's cache warmed by the first run), so fio-after-only flattered fio.
fio does not verify data; the sweep does (outside its latencies), so a ratio < 1 with verification
on includes that cost — run with --no-verify for the pure comparison.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess

from .. import workdirs
from ..errors import UsageError
from . import blockstat, files, fio_windows
from .engines import engine
from .engines.base import FioJob

LOG_MS = 20  # fio's IOPS log interval (ms) for the jobs' windows: 150 samples a job in a 3 s point
LOG_DIR_PREFIX = "gdsdiag-fio-logs-"  # where fio writes them while it runs ($TMPDIR), removed after
WINDOW_OFF = 0.02  # fio's rate over the window all jobs ran this far off its reported one: listed


def fio_binary() -> str | None:
    """GDSDIAG_FIO when set (as root: only a program root owns, gdsdiag/envtrust.py), else fio on PATH."""
    env = os.environ.get("GDSDIAG_FIO")
    if env:
        from ..envtrust import program

        path = program("GDSDIAG_FIO", env)
    else:
        path = shutil.which("fio")
    return path if path and os.access(path, os.X_OK) else None


def check_available(modes: list[str]) -> None:
    if fio_binary() is None:
        raise UsageError("--compare-fio needs fio", "apt-get install fio (or set GDSDIAG_FIO=/path/to/fio)")


def has_libcufile(fio: str) -> bool:
    try:
        r = subprocess.run([fio, "--enghelp"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return False
    return "libcufile" in r.stdout


JOB_KINDS = ("process", "thread")
# the sweep's --workers and fio's job kinds share the words: like for like is the same word
WORKER_NAMES = {"thread": "threads of one process", "process": "a process each"}
FIO_RUNS = {"thread": "--thread", "process": "forked (default)"}


def kinds(fio_jobs: str, workers: str = "thread") -> tuple[str, ...]:
    """``--fio-jobs``: which of fio's job kinds run beside each point, in order (match: the kind of
    the sweep's own --workers, so the default ratio is like for like)."""
    if fio_jobs == "match":
        return (workers,)
    return JOB_KINDS if fio_jobs == "both" else (fio_jobs,)


def _job(spec) -> FioJob:
    """The mode's fio equivalent, as its engine declares it (engines/: ``Engine.fio``)."""
    job = engine(spec.mode).fio
    if job is None:
        raise ValueError(f"fio has no equivalent of {spec.mode}")  # FioRunner._skip says so first
    return job


def job_args(spec, path: str, size: int, header: int, gpu: int, readonly: bool, kind: str = "thread") -> list[str]:
    """fio's arguments for one sweep point (see the module text for each choice)."""
    bs, th = spec.bs, spec.threads
    args = [
        "--name=gdsdiag",
        f"--filename={path}",
        "--direct=1",
        f"--bs={bs}",
        f"--rw={spec.rw}",
        f"--numjobs={th}",
        f"--iodepth={spec.iodepth}",
        *(["--thread"] if kind == "thread" else []),
        "--group_reporting",
        "--output-format=json",
        f"--offset={header}",
    ]
    job = _job(spec)
    if job.cuda_io is None:
        args.append("--ioengine=" + ("io_uring" if spec.iodepth > 1 else "psync"))
    else:
        args += ["--ioengine=libcufile", f"--cuda_io={job.cuda_io}", f"--gpu_dev_ids={gpu}"]
    blocks = size // bs
    if spec.is_random:
        args += [f"--size={blocks * bs}", "--norandommap", "--randrepeat=0"]
    else:
        per = max(blocks // th, 1) * bs
        args += [f"--size={per}", f"--offset_increment={per}"]
    if spec.seconds:
        args += ["--time_based", f"--runtime={spec.seconds}s"]
    else:
        args.append(f"--io_size={max(spec.total_bytes // th // bs, 1) * bs}")
    if readonly:
        args.append("--readonly")
    return args


def parse(text: str, is_read: bool) -> dict:
    start = text.find("{")
    doc = json.loads(text[start:])
    job = doc["jobs"][0]
    side = job["read" if is_read else "write"]
    err = job.get("error", 0)
    out = {
        "iops": round(float(side["iops"]), 1),
        "gbps": round(float(side["bw_bytes"]) / 1e9, 4),
        "ios": int(side.get("total_ios", 0)),
        "runtime_ms": int(side.get("runtime", 0)),
        "version": doc.get("fio version"),
    }
    # fio's completion latency (clat: submit to completion, as the sweep's latencies) and CPU, so a
    # ratio below 1 can be told apart: slower I/Os, or time between I/Os (the loop's own cost)
    clat = side.get("clat_ns") or {}
    pct = clat.get("percentile") or {}
    us = lambda v: None if v is None else round(float(v) / 1000.0, 2)  # noqa: E731
    out["clat_us"] = {"mean": us(clat.get("mean")), "p50": us(pct.get("50.000000")), "p99": us(pct.get("99.000000"))}
    if "usr_cpu" in job:
        out["cpu_percent"] = round(float(job["usr_cpu"]) + float(job.get("sys_cpu", 0)), 1)
    if err:
        out["error"] = f"fio job error {err}"
    return out


class FioRunner:
    """fio's runs around each point: every kind of ``--fio-jobs`` before the point and again, in
    the reverse order, after it (process, thread, point, thread, process), each kind's ratio
    against the mean of its two runs."""

    def __init__(self, sf: files.SweepFile, cfg):
        self.sf, self.cfg = sf, cfg
        self.fio: str = fio_binary() or "fio"
        self.kinds = kinds(getattr(cfg, "fio_jobs", "match"), getattr(cfg, "workers", "thread"))
        self.cufile_ok: bool | None = None
        self.wfile: files.SweepFile | None = None
        self._first: dict[str, dict] = {}
        workdirs.remove_stale(LOG_DIR_PREFIX)  # fio's logs that a killed sweep left (once a sweep)

    def _write_target(self) -> files.SweepFile:
        if self.wfile is None:
            self.wfile = files.SweepFile(self.cfg.directory, self.sf.size)
            self.wfile.fill()
        return self.wfile

    def close(self) -> None:
        if self.wfile is not None:
            self.wfile.remove()
            self.wfile = None

    def _skip(self, spec) -> str | None:
        job = engine(spec.mode).fio
        if job is None:
            return f"fio has no equivalent of {spec.mode}"
        if job.cuda_io is not None and spec.iodepth > 1:
            return "fio's libcufile engine is synchronous (no iodepth)"
        if job.cuda_io is not None:
            if self.cufile_ok is None:
                self.cufile_ok = has_libcufile(self.fio)
            if not self.cufile_ok:
                return "this fio has no libcufile engine (build fio with --enable-libcufile)"
        return None

    def _run(self, spec, kind: str) -> dict:
        if spec.threads == 1:
            return self._run_logged(spec, kind, None)
        # fio's per-job logs in a work directory of our own (a killed sweep's: __init__ removes it)
        with workdirs.WorkDir(LOG_DIR_PREFIX) as logs:
            return self._run_logged(spec, kind, logs)

    def _run_logged(self, spec, kind: str, logs: str | None) -> dict:
        target = self.sf if spec.is_read else self._write_target()
        args = job_args(spec, target.proc_path, target.size, files.HEADER_SIZE, spec.gpu, spec.is_read, kind)
        if logs is not None:  # when each job measured (fio_windows)
            args += [f"--write_iops_log={logs}/job", f"--log_avg_msec={LOG_MS}", "--log_unix_epoch=1"]
        cmd = [self.fio, *args]
        budget = spec.seconds * 2 + 30 if spec.seconds else 600
        dev_path = blockstat.stat_path(target.fd)
        dev0 = blockstat.read(dev_path)
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=budget)
        except subprocess.TimeoutExpired:
            return {"error": f"fio did not finish in {budget:.0f} s", "command": _show(cmd)}
        except OSError as e:
            return {"error": f"fio could not run: {e.strerror}"}
        if r.returncode != 0 or "{" not in r.stdout:
            tail = (r.stderr or r.stdout).strip().splitlines()
            return {"error": f"fio exit {r.returncode}: {tail[-1] if tail else ''}"[:200], "command": _show(cmd)}
        try:
            out = parse(r.stdout, spec.is_read)
        except (ValueError, KeyError, IndexError) as e:
            return {"error": f"fio output not understood ({type(e).__name__})", "command": _show(cmd)}
        out["command"] = _show(cmd)
        dev = blockstat.delta(dev0, blockstat.read(dev_path), out["ios"], out["runtime_ms"] / 1000.0, spec.is_read)
        if dev is not None:
            out["block_device"] = dev
        if logs is not None:
            out["windows"] = _windows(logs, out)
        return out

    def before(self, spec) -> None:
        """fio's runs before the point (the first of two per kind)."""
        self._first = {} if self._skip(spec) else {k: self._run(spec, k) for k in self.kinds}

    def compare(self, spec, rec) -> dict:
        """fio's runs after the point, and each kind's ratio against the mean of its before and
        after. The first kind's figures are the record's own keys (as before there were kinds);
        with both kinds, ``by_jobs`` holds each one's."""
        why = self._skip(spec)
        if why:
            return {"error": why}
        after = {k: self._run(spec, k) for k in reversed(self.kinds)}
        first, self._first = self._first, {}
        per = {k: _combine([r for r in (first.get(k), after[k]) if r is not None], rec) for k in self.kinds}
        out = dict(per[self.kinds[0]])
        out["jobs"] = self.kinds[0]
        workers = (rec.loop or {}).get("workers", "thread")
        out["like_for_like"] = workers if workers in self.kinds else None  # the kind whose ratio is like for like
        if len(self.kinds) > 1:
            out["by_jobs"] = per
        out["settings"] = settings(spec, self.kinds, rec.loop)
        for shape in (_request_shape(rec, per), _window_shape(per)):
            if shape is not None:
                out["settings"]["differ"].append(shape)
        return out


def _windows(logs: str, out: dict) -> dict | None:
    """The run's per-job windows (fio_windows.job_windows) from the logs fio wrote into LOGS, with
    fio's rate while every job ran (its reported rate OUT times ``while_all_ran``); None when fio
    wrote none it could be told from."""
    per_job = []
    for path in sorted(glob.glob(os.path.join(logs, "job_iops.*.log"))):
        try:
            with open(path) as f:
                per_job.append(fio_windows.read_iops_log(f.read()))
        except OSError:
            return None
    w = fio_windows.job_windows(per_job)
    if w is not None:
        w["gbps_all_running"] = round(out["gbps"] * w["while_all_ran"], 4)
        w["iops_all_running"] = round(out["iops"] * w["while_all_ran"], 1)
    return w


def _combine(runs: list[dict], rec) -> dict:
    bad = next((r for r in runs if r.get("error")), None)
    if bad:
        return bad
    out = {
        "gbps": round(sum(r["gbps"] for r in runs) / len(runs), 4),
        "iops": round(sum(r["iops"] for r in runs) / len(runs), 1),
        "runs": [
            {
                "gbps": r["gbps"],
                "iops": r["iops"],
                "clat_us": r.get("clat_us"),
                "cpu_percent": r.get("cpu_percent"),
                "block_device": r.get("block_device"),
                **({"windows": r["windows"]} if "windows" in r else {}),
            }
            for r in runs
        ],
        "version": runs[-1].get("version"),
        "command": runs[-1]["command"],
    }
    mine = rec.summary.get("gbps")
    out["ratio"] = round(mine / out["gbps"], 3) if mine and out["gbps"] else None
    wins: list[dict] = [r["windows"] for r in runs if r.get("windows")]
    if wins and len(wins) == len(runs):
        gbps = sum(w["gbps_all_running"] for w in wins) / len(wins)
        out["all_running"] = {
            "gbps": round(gbps, 4),
            "iops": round(sum(w["iops_all_running"] for w in wins) / len(wins), 1),
            "ratio": round(mine / gbps, 3) if mine and gbps else None,
            "start_spread_ms": max(w["start_spread_ms"] for w in wins),
            "end_spread_ms": max(w["end_spread_ms"] for w in wins),
        }
    return out


def _window_shape(per: dict) -> dict | None:
    """fio's jobs measured over windows that did not coincide, enough to move its rate (more than
    WINDOW_OFF between its reported rate and its rate while every job ran), per kind."""
    seen = []
    for kind, one in per.items():
        both = one.get("all_running") if not one.get("error") else None
        if both and one.get("gbps") and abs(both["gbps"] / one["gbps"] - 1) > WINDOW_OFF:
            seen.append(
                f"{FIO_RUNS[kind]} runs: each job's clock after its own setup, starts up to "
                f"{both['start_spread_ms']} ms and ends up to {both['end_spread_ms']} ms apart; "
                f"{both['gbps'] / one['gbps']:.3f}x its reported rate while all ran"
            )
    if not seen:
        return None
    return {
        "setting": "measurement window (measured)",
        "sweep": "every worker at once (the clock starts when all are ready)",
        "fio": "; ".join(seen),
    }


def _request_shape(rec, per: dict) -> dict | None:
    """The requests the device saw per I/O, when they differ (by more than 10 %) between the point
    and fio's runs: e.g. a 1 MiB read into 4 KiB pages is one request or two, as the pages happen
    to be physically contiguous or not (more than the device's max_segments), in either program.
    Measured, not configured: the device's own counters, other I/O on it included."""
    mine = (rec.route_detail.get("block_device") or {}).get("requests_per_io")
    theirs: list[float] = []
    for one in per.values():
        for run in [] if one.get("error") else one.get("runs", []):
            t = (run.get("block_device") or {}).get("requests_per_io")
            if t:
                theirs.append(float(t))
    if not mine or not theirs:
        return None
    mean = sum(theirs) / len(theirs)
    if abs(mine - mean) <= 0.1 * mean:
        return None
    return {
        "setting": "device requests per I/O (measured)",
        "sweep": f"{mine:g}",
        "fio": ", ".join(f"{t:g}" for t in theirs),
    }


def settings(spec, job_kinds, loop: dict) -> dict:
    """What the point and fio's job share and what they do not, so a ratio is read as like for
    like or not: {"same": [...], "differ": [{"setting", "sweep", "fio"}]}."""
    same = ["file (the sweep's open file)", "bs", "rw", "numjobs = threads", "iodepth", "O_DIRECT", "duration"]
    same.append(
        "offsets: each job its own slice" if not spec.is_random else "offsets: uniform over the file, with replacement"
    )
    differ = []
    job = _job(spec)
    if job.host_buffers:
        if loop.get("buffers") == "4 KiB pages":
            same.append("host buffers: 4 KiB pages")
        else:
            differ.append({"setting": "host buffers", "sweep": loop.get("buffers"), "fio": "4 KiB pages (malloc)"})
    workers = loop.get("workers", "thread")
    mine = WORKER_NAMES[workers]
    for kind in job_kinds:
        if kind == workers:
            same.append(f"workers: {mine} (fio's {FIO_RUNS[kind]} runs)")
        else:
            differ.append(
                {"setting": "workers", "sweep": mine, "fio": f"{WORKER_NAMES[kind]} (fio's {FIO_RUNS[kind]} runs)"}
            )
    if job.cuda_io == "cufile":
        if workers == "process" or loop.get("cufile_handles") == "per thread":
            same.append("cuFile file handle: one per job")
        else:
            differ.append({"setting": "cuFile file handle", "sweep": "one per point", "fio": "one per job"})
        # in compatibility mode the bounce pool is libcufile's, one per process that opened the driver
        for kind in job_kinds:
            if kind != workers:
                pools = {"thread": "one for all workers", "process": "one per worker"}
                differ.append(
                    {
                        "setting": "cuFile driver and bounce pool",
                        "sweep": pools[workers],
                        "fio": f"{pools[kind]} (fio's {FIO_RUNS[kind]} runs)",
                    }
                )
        if job.api:
            differ.append({"setting": "cuFile API", "sweep": job.api, "fio": "cuFileRead/cuFileWrite"})
        differ.append({"setting": "cuFile statistics", "sweep": "level 3 (route counters)", "fio": "cufile.json's"})
    if job.buffer_memory:
        differ.append({"setting": "host buffer memory", "sweep": job.buffer_memory, "fio": "pageable"})
    if spec.verify:
        differ.append({"setting": "data check", "sweep": "every byte", "fio": "none"})
    return {"same": same, "differ": differ}


def _show(cmd: list[str]) -> str:
    return " ".join(cmd)
