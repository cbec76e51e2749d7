"""Sizes, durations and byte counts, read from users and written for them: one reading of '4k',
'16MiB', '500ms', '3s' for every command and one way of writing a byte count (``human_bytes``).
Pure functions, no gdsdiag imports: every layer may use them."""

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


_UNITS = (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10))
_SHORT = {"TiB": "T", "GiB": "G", "MiB": "M", "KiB": "k"}


def human_bytes(
    n: float,
    digits: int | None = None,
    *,
    sep: str = "",
    short: bool = False,
    span: tuple[str, str] = ("GiB", "KiB"),
    word: str = "",
    group: bool = False,
) -> str:
    """``n`` bytes in binary units from ``span[0]`` down to ``span[1]``.

    ``digits`` None: exact, in the largest unit that divides ``n`` ('4k', '16MiB', '1536k'), else the
    plain number. ``digits`` d: the largest unit ``n`` reaches, d decimals ('1.5 GiB'); below the
    smallest unit the whole number. ``sep`` goes between number and unit, ``short`` writes k/M/G/T
    for KiB/MiB/GiB/TiB (what ``parse_size`` reads back), ``word`` names the unit of a plain number
    ('bytes', 'B'), ``group`` puts thousands separators in the number."""
    names = [u for u, _ in _UNITS]
    units = _UNITS[names.index(span[0]) : names.index(span[1]) + 1]
    g = "," if group else ""
    for unit, mult in units:
        name = _SHORT[unit] if short else unit
        if digits is None and n >= mult and n % mult == 0:
            return f"{int(n) // mult}{sep}{name}"
        if digits is not None and n >= mult:
            return f"{n / mult:{g}.{digits}f}{sep}{name}"
    plain = f"{n:{g}.0f}" if group or isinstance(n, float) else str(n)
    return f"{plain}{sep}{word}" if word else plain


def human_size(n: int) -> str:
    """A block or file size as the options take it: '4k', '1M', '16G', or the plain number."""
    return human_bytes(n, short=True)


def size_text(n: float | None) -> str:
    """A byte count for people, one notation for every table and summary: binary units, 3
    significant digits, no trailing zeros ('4 KiB', '1.5 MiB', '85.4 MiB', '512 B'). Raw bytes are
    for JSON. None: '?'."""
    if n is None:
        return "?"
    for unit, mult in _UNITS:
        if abs(n) >= mult:
            return f"{_three_digits(n / mult)} {unit}"
    return f"{int(n)} B"


def _three_digits(x: float) -> str:
    """3 significant digits, trailing zeros dropped ('1.50' -> '1.5', '4.00' -> '4'); whole numbers
    from 100 up ('1023')."""
    decimals = 0 if abs(x) >= 99.95 else 1 if abs(x) >= 9.995 else 2
    text = f"{x:.{decimals}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text
