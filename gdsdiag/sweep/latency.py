"""Latency percentiles and throughput figures (pure functions, tested on known inputs)."""
from __future__ import annotations

import math


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
    us = lambda v: None if v is None else round(v / 1000.0, 2)   # noqa: E731
    return {
        "ops": ops, "bytes": nbytes, "seconds": round(seconds, 4),
        "gbps": round(nbytes / seconds / 1e9, 4) if seconds > 0 else None,
        "iops": round(ops / seconds, 1) if seconds > 0 else None,
        "lat_us": {"p50": us(percentile(lat, 50)), "p90": us(percentile(lat, 90)), "p99": us(percentile(lat, 99)),
                   "p99.9": us(percentile(lat, 99.9)), "max": us(lat[-1] if lat else None),
                   "mean": us(sum(lat) / ops if ops else None)},
    }


def parse_size(text: str) -> int:
    """'4k' '64K' '1m' '16MiB' '4G' '4096' -> bytes (binary units)."""
    t = text.strip().lower()
    for suffix in ("ib", "b"):
        if t.endswith(suffix) and len(t) > len(suffix) and t[-len(suffix) - 1] in "kmgt":
            t = t[:-len(suffix)]
            break
    mult = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
    try:
        if t and t[-1] in mult:
            return int(float(t[:-1]) * mult[t[-1]])
        return int(t)
    except ValueError:
        raise ValueError(f"not a size: {text!r} (use e.g. 4k, 1m, 4G)") from None


def parse_duration(text: str) -> float:
    t = text.strip().lower()
    for suf, mult in (("ms", 0.001), ("s", 1), ("m", 60)):
        if t.endswith(suf):
            return float(t[:-len(suf)]) * mult
    return float(t)


def human_size(n: int) -> str:
    for unit, mult in (("G", 1 << 30), ("M", 1 << 20), ("k", 1 << 10)):
        if n >= mult and n % mult == 0:
            return f"{n // mult}{unit}"
    return str(n)
