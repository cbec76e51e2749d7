#!/usr/bin/env python3
"""The trace's live path per COMPAT verdict at the live loop's own pace: whole calls paired or decoded.

  python3 benchmarks/trace_poll_pace.py [--calls 30000] [--rate 22000] [--poll-ms 1] [--rounds 2]

benchmarks/classify_verdicts.py hands the probes' poll 16k records at a time with every record older
than the reorder cut. Under load the live loop (gdsdiag/trace/live.py) polls about every millisecond,
and the records of the last 50 ms are not old enough yet: a cost paid per poll does not show there
(the pairing's first version re-split those records on every poll: 42 µs a verdict on the GPU
machine, docs/benchmarks.md). Here --calls cuFileRead calls of one thread, --rate a second, are
packed as the events ring holds them (enter, and the exit with its fold) and handed to
bpf.Probes.offline's poll --poll-ms of their own time at a time, the probes' clock at the last
record's time; then what take() in live.py does: the pairs fed, the events fed, advance, drain, the
summary's tally and the --json line of every verdict (to /dev/null). Reported: CPU µs a verdict,
paired (GDSDIAG_WHOLE_CALLS on, the default) and decoded, alternately, --rounds times each; the first
paired run pays numpy's import (~0.1 s), so read the later ones."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


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
    from gdsdiag.trace.bpf import REC_STRIDE, Probes
    from gdsdiag.trace.classify import Classifier
    from gdsdiag.trace.events import Event
    from gdsdiag.trace.tally import RouteTally

    gap = int(1e9 / a.rate)
    stream = [
        Event(0, 100, 100, "open", "openat", [7], "app", "/data/f.dat"),
        Event(1, 100, 100, "handle", "cuFileHandleRegister", [0x5B, 7, 0], "app"),
    ]
    for i in range(a.calls):
        t = 1_000_000_000 + i * gap
        stream += [
            Event(t, 100, 100, "api_enter", "cuFileRead", [0x5B, 0x7E0000000000, 4096, i * 4096, 0], "app"),
            Event(t + gap // 2, 100, 100, "api_exit", "cuFileRead", [4096, 1, 7, 1, 1, 4096, 0], "app"),
        ]
    ring, side = cv.packed(stream)
    printer = LinePrinter(Console(file=open(os.devnull, "w")), as_json=True)
    per_poll = max(1, int(a.rate * a.poll_ms / 1000)) * 2 * REC_STRIDE

    def run(whole: bool) -> int:
        clf, tally, probes = Classifier(), RouteTally(), Probes.offline()
        probes.usdt_names = cv.USDT_NAMES
        if whole:
            probes.pair_whole_calls(clf.whole_gate)
        for e in side:
            clf.feed(e)
        now = [0]
        probes.clock = lambda: now[0]

        def take(final: bool = False) -> None:
            evs = probes.poll(0, final)
            left = clf.feed_whole(probes.take_whole())
            for e in sorted(evs + left, key=lambda e: e.ts) if left else evs:
                clf.feed(e)
            clf.advance(0 if final else probes.complete_ns)
            for v in clf.drain():
                tally.add(v)
                printer(v)

        with open(os.devnull, "w") as null, contextlib.redirect_stdout(null):
            for at in range(0, len(ring), per_poll):
                part = ring[at : at + per_poll]
                now[0] = int.from_bytes(part[len(part) - REC_STRIDE + 8 : len(part) - REC_STRIDE + 16], "little")
                probes._keep(part, len(part) // REC_STRIDE)
                take()
            take(final=True)
            clf.flush()
            for v in clf.drain():
                tally.add(v)
                printer(v)
        return tally.ios

    import platform

    print(f"python {platform.python_version()}, {a.calls} calls at {a.rate:,.0f}/s, a poll every {a.poll_ms} ms")
    for _ in range(a.rounds):
        for whole in (True, False):
            t = time.process_time()
            n = run(whole)
            dt = time.process_time() - t
            assert n == a.calls, (n, a.calls)
            print(f"{'paired ' if whole else 'decoded'}: {dt / n * 1e6:.2f} µs a verdict ({n / dt:,.0f}/s)")


if __name__ == "__main__":
    main()
