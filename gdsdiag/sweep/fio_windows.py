"""When each of fio's jobs measured: from fio's per-job IOPS logs, how far apart the jobs' clocks
started and ended, and fio's rate over the window in which every job was running.

Why it matters: fio (3.33, backend.c) lets its jobs go together and only then has each set up its
engine (``td_io_init``: for the libcufile engine ``cuFileDriverOpen`` and ``cudaSetDevice``, a CUDA
context per forked job) and start its own clock (``td->start``). Jobs whose setup takes different
times measure over windows that do not coincide, and while one is still setting up or already done
the others run with fewer contending: on one GPU, where forked jobs' contexts are time-sliced, that
is faster. fio's reported rate (the sum of its jobs') then exceeds what the jobs did together —
on the GPU machine by 1–7 % at cuFile 4 KiB x 4 (docs/benchmarks.md). The sweep's workers start
their clock together once every one is ready, so the like-for-like figure is fio's over the window
all its jobs ran.

The logs come from ``--write_iops_log=P --log_avg_msec=MS --log_unix_epoch=1``: one file per job
(``P_iops.N.log``), lines ``time_ms, iops, direction, bs, offset`` where each sample is the mean
over the MS before its time. Pure analysis; the reader is tolerant (lines it cannot read are
skipped, a job with fewer than two samples makes the answer unknown: None)."""

from __future__ import annotations


def read_iops_log(text: str) -> list[tuple[int, float]]:
    """(time ms, IOPS) samples of one job's log, in file order; unreadable lines skipped."""
    out = []
    for line in text.splitlines():
        parts = line.split(",")
        if len(parts) < 2:
            continue
        try:
            out.append((int(parts[0]), float(parts[1])))
        except ValueError:
            continue
    return out


def job_windows(logs: list[list[tuple[int, float]]]) -> dict | None:
    """The jobs' windows from their samples (one list per job, all on one clock): their start and
    end spreads, the window every job ran, and ``while_all_ran``: the jobs' summed rate over that
    window (each job's mean over its samples wholly inside it) over their summed rate over their
    own logged spans. A ratio of the logs with the logs, because fio leaves the first ~0.1 s of a
    job out of its log (seen with fio 3.33: the log starts ~110 ms after the job's clock); the
    rate while all ran is then fio's reported rate times it. None when a job has fewer than two
    samples or the window holds no whole sample of some job (too short a run to say)."""
    if not logs or any(len(s) < 2 for s in logs):
        return None
    step = min(b[0] - a[0] for s in logs for a, b in zip(s, s[1:]))
    if step <= 0:
        return None
    starts = [s[0][0] - step for s in logs]  # a sample covers the STEP ms before its time
    ends = [s[-1][0] for s in logs]
    lo, hi = max(starts), min(ends)
    inside = [[v for t, v in s if t - step >= lo and t <= hi] for s in logs]
    own = sum(sum(v for _, v in s) / len(s) for s in logs)
    if not all(inside) or own <= 0:
        return None
    return {
        "interval_ms": step,
        "start_spread_ms": max(starts) - min(starts),
        "end_spread_ms": max(ends) - min(ends),
        "all_running_ms": hi - lo,
        "while_all_ran": round(sum(sum(v) / len(v) for v in inside) / own, 4),
    }
