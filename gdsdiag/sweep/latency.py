"""Latency percentiles and throughput figures (pure functions, tested on known inputs)."""

from __future__ import annotations

import math
import re


def percentile(sorted_values, q: float) -> float | None:
    """Nearest-rank percentile (q in 0..100) of an ascending sequence; None when empty.
    Nearest rank is what fio reports for clat percentiles: the smallest value with at least q % of
    samples at or below it."""
    n = len(sorted_values)
    if n == 0:
        return None
    if q <= 0:
        return float(sorted_values[0])
    rank = math.ceil(q / 100.0 * n)
    return float(sorted_values[min(max(rank, 1), n) - 1])


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


# Sizes and durations are read as ASCII decimals of bounded length and range: float() accepts
# 'inf', 'nan', '1e400', '1_0' and Unicode digits, and int() '²' and 4,300-digit strings (issue 24:
# 'sweep --time infs' crashed a worker thread; a size of 'nanG' reached int(nan)).
_DECIMAL = re.compile(r"-?[0-9]{1,15}(?:\.[0-9]{1,9})?")  # a sign, for the caller's "more than 0" message
MAX_SIZE = 1 << 50  # 1 PiB: larger than any file or block a sweep makes
MAX_SECONDS = 7 * 86400.0  # a week per point


def parse_size(text: str) -> int:
    """'4k' '64K' '1m' '16MiB' '4G' '4096' '1.5g' -> bytes (binary units), 1 B .. 1 PiB."""
    if not isinstance(text, str) or len(text) > 40:
        raise ValueError(f"not a size: {str(text)[:40]!r} (use e.g. 4k, 1m, 4G)")
    t = text.strip().lower()
    for suffix in ("ib", "b"):
        if t.endswith(suffix) and len(t) > len(suffix) and t[-len(suffix) - 1] in "kmgt":
            t = t[: -len(suffix)]
            break
    mult = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
    m = 1
    if t and t[-1] in mult:
        t, m = t[:-1], mult[t[-1]]
    if not _DECIMAL.fullmatch(t) or t.startswith("-") or ("." in t and m == 1):
        raise ValueError(f"not a size: {text!r} (use e.g. 4k, 1m, 4G)")
    n = int(float(t) * m) if "." in t else int(t) * m
    if n > MAX_SIZE:
        raise ValueError(f"size out of range: {text!r} (at most 1 PiB)")
    return n  # 0 is the caller's to refuse, with its own words ("a multiple of 4 KiB")


def parse_duration(text: str) -> float:
    """'10s' '500ms' '2m' '1.5' -> seconds, finite and at most a week either way (one at or below 0
    is the caller's to refuse, with its own words)."""
    if not isinstance(text, str) or len(text) > 40:
        raise ValueError(f"not a duration: {str(text)[:40]!r} (use e.g. 10s, 500ms, 2m)")
    t = text.strip().lower()
    mult = 1.0
    for suf, m in (("ms", 0.001), ("s", 1.0), ("m", 60.0)):
        if t.endswith(suf):
            t, mult = t[: -len(suf)], m
            break
    if not _DECIMAL.fullmatch(t):
        raise ValueError(f"not a duration: {text!r} (use e.g. 10s, 500ms, 2m)")
    v = float(t) * mult
    if abs(v) > MAX_SECONDS:
        raise ValueError(f"duration out of range: {text!r} (at most 7 days)")
    return v


def human_size(n: int) -> str:
    for unit, mult in (("G", 1 << 30), ("M", 1 << 20), ("k", 1 << 10)):
        if n >= mult and n % mult == 0:
            return f"{n // mult}{unit}"
    return str(n)
