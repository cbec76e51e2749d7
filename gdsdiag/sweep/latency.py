"""Latency percentiles and throughput figures (pure functions, tested on known inputs)."""

from __future__ import annotations

import math

from ..units import percentile


def summarize(latencies_ns, nbytes: int, seconds: float) -> dict:
    lat = sorted(latencies_ns)
    ops = len(lat)
    us = lambda v: None if v is None else round(v / 1000.0, 2)  # noqa: E731
    return {
        "ops": ops,
        "bytes": nbytes,
        "seconds": round(seconds, 4),
        "gbps": round(nbytes / seconds / 1e9, 4) if seconds > 0 else None,
        "iops": round(ops / seconds, 1) if seconds > 0 else None,
        "lat_us": {
            "p50": us(percentile(lat, 50)),
            "p90": us(percentile(lat, 90)),
            "p99": us(percentile(lat, 99)),
            "p99.9": us(percentile(lat, 99.9)),
            "max": us(lat[-1] if lat else None),
            "mean": us(sum(lat) / ops if ops else None),
        },
    }


def bucket_value(i: int) -> float:
    """The latency (ns) a histogram bucket of csrc/ioloop.c stands for: exact below 128 ns, then
    the middle of its 1/64-of-a-power-of-two range (at most 0.8 % off)."""
    if i < 128:
        return float(i)
    msb = i // 64 + 5
    sub = i % 64
    width = 1 << (msb - 6)
    return float(((64 + sub) << (msb - 6)) + width / 2)


def hist_percentile(hist, q: float) -> float | None:
    """Nearest-rank percentile of a bucket histogram (as ``percentile`` on the sorted values)."""
    total = int(sum(int(c) for c in hist)) if not hasattr(hist, "sum") else int(hist.sum())
    if total == 0:
        return None
    rank = max(math.ceil(q / 100.0 * total), 1)
    seen = 0
    nz = hist.nonzero()[0] if hasattr(hist, "nonzero") else [i for i, c in enumerate(hist) if c]
    for i in nz:
        seen += int(hist[i])
        if seen >= rank:
            return bucket_value(int(i))
    return bucket_value(int(nz[-1]))


def summarize_hist(
    hist, ops: int, nbytes: int, seconds: float, lat_min_ns: int, lat_max_ns: int, lat_sum_ns: int
) -> dict:
    """``summarize`` for the C loop's histogram: min, max and mean are exact, percentiles are
    bucket values (≤ 0.8 % off, as fio's clat percentiles are bucketed too)."""
    us = lambda v: None if v is None else round(v / 1000.0, 2)  # noqa: E731
    return {
        "ops": ops,
        "bytes": nbytes,
        "seconds": round(seconds, 4),
        "gbps": round(nbytes / seconds / 1e9, 4) if seconds > 0 and ops else None,
        "iops": round(ops / seconds, 1) if seconds > 0 and ops else None,
        "lat_us": {
            "p50": us(hist_percentile(hist, 50)),
            "p90": us(hist_percentile(hist, 90)),
            "p99": us(hist_percentile(hist, 99)),
            "p99.9": us(hist_percentile(hist, 99.9)),
            "min": us(lat_min_ns if ops else None),
            "max": us(lat_max_ns if ops else None),
            "mean": us(lat_sum_ns / ops if ops else None),
        },
    }
