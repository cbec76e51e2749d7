"""The garbage collector's pace while a trace streams events (live and --replay).

A trace makes several container objects per event (the Event and its argument list, the verdict
dict and its evidence list, the data-flow records) and keeps a large heap alive: bcc, rich and the
modules from start-up, up to 65,536 held reads per process. With CPython's default thresholds
(700, 10, 10) the collector ran every ~200 events and its older generations walked that heap over
and over: on the dev VM half of the ring decoder's 2.2 µs per record was the collector, and the
whole per-verdict path (decode, classify, tally, JSON line) was 1.3–1.5x slower than with larger
thresholds (benchmarks/classify_verdicts.py, "live" rows). So while events stream: what is alive
at the start is frozen (never walked again: it lives as long as the process anyway) and the
youngest generation is collected every 10,000 allocations instead of 700. Collection still
happens (reference cycles are freed); only its pace changes. Both are undone at the end."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

STREAM_THRESHOLD = (10_000, 10, 10)


@contextlib.contextmanager
def streaming() -> Iterator[None]:
    old = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(*STREAM_THRESHOLD)
    try:
        yield
    finally:
        gc.set_threshold(*old)
        gc.unfreeze()
