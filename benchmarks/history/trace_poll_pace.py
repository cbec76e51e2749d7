#!/usr/bin/env python3
"""The trace's live path per COMPAT verdict at the live loop's own pace: whole calls paired or decoded.

  python3 benchmarks/history/trace_poll_pace.py [--calls 30000] [--rate 22000] [--poll-ms 1] [--rounds 2]

benchmarks/classify_verdicts.py hands the probes' poll 16k records at a time with every record older
than the reorder cut. Under load the live loop (gdsdiag/trace/live.py) polls about every millisecond,
and the records of the last 50 ms are not old enough yet: a cost paid per poll does not show there
(the pairing's first version re-split those records on every poll: 42 µs a verdict on the GPU
machine, docs/benchmarks-history.md). Here --calls cuFileRead calls of one thread, --rate a second, are
packed as the events ring holds them (enter, and the exit with its fold) and handed to
bpf.Probes.offline's poll --poll-ms of their own time at a time, the probes' clock at the last
record's time, by classify_verdicts.live: what take() in live.py does, the pairs fed, the events fed,
advance to the poll's complete time, drain, the summary's tally and the --json line of every verdict
(to /dev/null). Reported: CPU µs a verdict,
paired (GDSDIAG_WHOLE_CALLS on, the default) and decoded, alternately, --rounds times each; the first
paired run pays numpy's import (~0.1 s), so read the later ones."""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time

HERE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the checkout


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=30_000)
    ap.add_argument("--rate", type=float, default=22_000, help="calls a second (the records' own times)")
    ap.add_argument("--poll-ms", type=float, default=1.0, help="the stream's time a poll takes")
    ap.add_argument("--rounds", type=int, default=2)
    a = ap.parse_args()
    sys.path.insert(0, HERE)
    sys.path.insert(0, os.path.join(HERE, "benchmarks"))
    import classify_verdicts as cv
    from rich.console import Console

    from gdsdiag.render.trace_out import LinePrinter

    compat, _ = cv.compat_streams(a.calls, int(1e9 / a.rate))
    ring, side = cv.packed(compat)
    printer = LinePrinter(Console(file=open(os.devnull, "w")), as_json=True)
    per_poll = max(1, int(a.rate * a.poll_ms / 1000)) * 2  # (two records a call)
    print(f"python {platform.python_version()}, {a.calls} calls at {a.rate:,.0f}/s, a poll every {a.poll_ms} ms")
    for _ in range(a.rounds):
        for whole in (True, False):
            t = time.process_time()
            n = cv.live(ring, side, printer, whole, per_poll)
            dt = time.process_time() - t
            assert n == a.calls, (n, a.calls)
            print(f"{'paired ' if whole else 'decoded'}: {dt / n * 1e6:.2f} µs a verdict ({n / dt:,.0f}/s)")


if __name__ == "__main__":
    main()
