"""The garbage collector's pace while a trace streams events (live and --replay).

A trace makes several container objects per event (the Event and its argument list, the verdict
dict and its evidence list, the data-flow records) and keeps a large heap alive: bcc, rich and the
modules from start-up, up to 65,536 held reads per process. With CPython's default thresholds
(700, 10, 10) the collector ran every ~200 events and its older generations walked that heap over
and over: on the dev VM half of the ring decoder's 2.2 µs per record was the collector, and the
whole per-verdict path (decode, classify, tally, JSON line) was 1.3–1.5x slower than with larger
thresholds (benchmarks/classify_verdicts.py, "live" rows). So while events stream: what is alive
at the start is frozen (never walked again: it lives as long as the process anyway) and the
youngest generation is collected every 10,000 allocations instead of 700. The middle generation is
collected every 100 of those instead of 10: what survives a young collection is mostly a verdict
on its way out or a read held for a copy for up to a few seconds, and most of it dies before
about a million allocations (a second or two of a fast stream) but not before a hundred thousand:
walked again at the shorter pace, it cost 0.3-0.9 µs a verdict on the dev VM (the collector's own
time in benchmarks/classify_verdicts.py's live streams: host reads 1.0 -> 0.4, the recorded 4 x 4
bounce stream 1.0-1.2 -> 0.6-0.8; COMPAT unchanged at 0.2). Collection still happens (reference
cycles are freed); only its pace changes. Both are undone at the end (the freeze only where the
caller had frozen nothing itself)."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

STREAM_THRESHOLD = (10_000, 100, 10)
# (Python 3.12 starts with a few hundred objects frozen, the interpreter's own: a caller has frozen
# objects of its own where the count is neither that nor 0, which an unfreeze leaves)
_FROZEN_AT_LOAD = gc.get_freeze_count()


@contextlib.contextmanager
def streaming() -> Iterator[None]:
    old = gc.get_threshold()
    # (unfreeze releases every frozen object, not only ours: where the caller had frozen its own,
    # e.g. before forking workers, ours stay frozen with them rather than theirs thawed)
    ours = gc.get_freeze_count() in (0, _FROZEN_AT_LOAD)
    gc.freeze()
    gc.set_threshold(*STREAM_THRESHOLD)
    try:
        yield
    finally:
        gc.set_threshold(*old)
        if ours:
            gc.unfreeze()
