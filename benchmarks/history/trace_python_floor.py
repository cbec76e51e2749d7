#!/usr/bin/env python3
"""The Python floor of 'gdsdiag trace --per-io' per verdict: what a COMPAT verdict costs before any
classification, beside the whole live path, on this machine (issue 21: how far Python alone can go).

  python3 benchmarks/history/trace_python_floor.py [--ios 50000] [--rounds 5]

The stream is --ios compat cuFileRead calls as the probes send them since record version 4 (two
records a call: the enter, and the exit with its pread64 and USDT hit folded in), packed as the
events ring holds them (benchmarks/classify_verdicts.py's packing). Measured, the least CPU time of
--rounds:
  decode  the probes' decoder alone (bpf.Probes._decode): per record
  floor   decode, then per call the verdict dict (classify.io_line), the summary's tally and the
          --json line (render/trace_out.io_json) written to /dev/null, with no classification: the
          verdict is built straight from the two records. What no Python classifier can go below.
The live path with the classifier is classify_verdicts.py's "live compat" row."""

import argparse
import os
import sys
import time
from types import SimpleNamespace

HERE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the checkout
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "benchmarks"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ios", type=int, default=50_000)
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    import classify_verdicts as cv

    from gdsdiag.render.trace_out import io_json
    from gdsdiag.routes import Route
    from gdsdiag.trace.gcpace import streaming
    from gdsdiag.trace.model.classify import io_line
    from gdsdiag.trace.model.events import Event
    from gdsdiag.trace.model.tally import RouteTally
    from gdsdiag.trace.probes.bpf import Probes

    n = a.ios
    stream = []
    for i in range(n):  # (pid, tid and time as large as a real trace's: no small-int objects)
        t = 1_000_000_000_000 + i * 2000
        stream += [
            Event(t, 123456, 123457, "api_enter", "cuFileRead", [0x5B, 0x7E0000000000, 4096, i * 4096, 0], "app"),
            Event(t + 200, 123456, 123457, "api_exit", "cuFileRead", [4096, 1, 7, 1, 1, 4096, 0], "app"),
        ]
    ring, _ = cv.packed(stream)

    def decode() -> list:
        if hasattr(Probes, "offline"):
            q = Probes.offline()
            q.usdt_names = cv.USDT_NAMES
            q._keep(ring, 2 * n)
            q._decode()
            return q._events
        p = SimpleNamespace(
            _raw=[(ring, 2 * n)], _raw_n=2 * n, _comms={}, _names={}, _events=[], usdt_names=cv.USDT_NAMES
        )
        Probes._decode(p)  # type: ignore[arg-type]
        return p._events

    def floor() -> None:
        evs = decode()
        tally = RouteTally()
        labels = ["pread64 fd 7", "usdt cufio_core:cufio_px_read"]
        with open(os.devnull, "w") as out:
            for i in range(1, len(evs), 2):
                e, x = evs[i - 1], evs[i]
                v = io_line(
                    e.ts, e.pid, e.tid, e.comm, e.name, "read", "/data/f.dat", e.args[3], e.args[2],
                    x.args[0], x.ts - e.ts, Route.COMPAT, None, "high", list(labels),
                )  # fmt: skip
                tally.add(v)
                out.write(io_json(v))

    def best(fn) -> float:
        times = []
        for _ in range(a.rounds):
            t = time.process_time()
            fn()
            times.append(time.process_time() - t)
        return min(times)

    with streaming():  # (the collector's pace a live trace sets)
        t_decode, t_floor = best(decode), best(floor)
    print(
        f"python {sys.version.split()[0]}: decode {t_decode / (2 * n) * 1e9:.0f} ns a record; "
        f"decode, verdict dict, tally and JSON line, no classification: {t_floor / n * 1e6:.2f} µs a verdict "
        f"({n / t_floor:,.0f} verdicts/s)"
    )


if __name__ == "__main__":
    main()
