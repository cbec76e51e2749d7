#!/usr/bin/env python3
"""The trace classifier's cost per verdict, without probes: the Python half of 'gdsdiag trace'.

  python3 benchmarks/classify_verdicts.py [--ios 100000] [--rounds 5] [--tree DIR]

Two streams, each classified --rounds times (the least CPU time of a round reported):
  recordings  every tests/fixtures/trace/*.jsonl.gz recorded on the GPU machine (cuFile, kvikio,
              torch.load, CuPy: a few hundred verdicts among their events), classified as replay does
  host        --ios buffered 4 KiB pread64s of one file by a process that made no CUDA copy (what
              'trace --per-io' sends the consumer for benchmarks/trace_overhead.py's posix workload):
              one HOST verdict each, so the verdict's creation is a visible part of the cost
  bounce      --ios pread64s each followed by a host-to-device copy of its buffer (fio --cuda_io=posix,
              kvikio's POSIX path): DRAM_BOUNCE, direct
  staged      --ios pread64s each followed by a copy of its size from one pinned buffer (CuPy's
              asarray): DRAM_BOUNCE, staged one to one
  compat      --ios cuFileRead calls with libcufile's pread64 and USDT probe inside (compat mode)
and the --json line of every host verdict written the way 'gdsdiag trace --json' writes it (to
/dev/null). --tree runs another checkout's gdsdiag/ (e.g. an older commit, for a before/after pair)."""

import argparse
import contextlib
import glob
import os
import platform
import sys
import time

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def best(fn, rounds: int) -> float:
    """The least CPU time of the rounds: on a shared machine, waiting for a core is not counted."""
    times = []
    for _ in range(rounds):
        t = time.process_time()
        fn()
        times.append(time.process_time() - t)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ios", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--tree", default=HERE, help="the checkout whose gdsdiag/ is measured")
    a = ap.parse_args()
    sys.path.insert(0, os.path.abspath(a.tree))
    from rich.console import Console

    from gdsdiag.render.trace_out import LinePrinter
    from gdsdiag.trace.classify import classify
    from gdsdiag.trace.events import Event, read_record

    recs = [read_record(f) for f in sorted(glob.glob(os.path.join(HERE, "tests", "fixtures", "trace", "*.jsonl.gz")))]
    n_rec = sum(len(classify(ev, record_version=int(h.get("gdsdiag_trace_record", 1)))) for h, ev in recs)

    def recordings():
        for h, ev in recs:
            classify(ev, record_version=int(h.get("gdsdiag_trace_record", 1)))

    # pread64 sys_exit args: fd, buf, count, offset, flags, ret, latency ns (as the probes record them)
    host = [Event(0, 100, 100, "open", "openat", [7], "app", "/data/f.dat")] + [
        Event(
            1000 + i * 2000, 100, 100, "sys_exit", "pread64", [7, 0x7F0000000000, 4096, i * 4096, 0, 4096, 900], "app"
        )
        for i in range(a.ios)
    ]
    verdicts = classify(host)
    assert len(verdicts) == a.ios, len(verdicts)

    def pread(i, buf):
        return Event(1000 + i * 2000, 100, 100, "sys_exit", "pread64", [7, buf, 4096, i * 4096, 0, 4096, 900], "app")

    def copy(i, src):
        return Event(1500 + i * 2000, 100, 100, "api_enter", "cuMemcpy", [0x7E0000000000, src, 4096, 1], "app")

    bounce = host[:1] + [
        e
        for i in range(a.ios)
        for e in (pread(i, 0x7F0000000000 + (i % 64) * 4096), copy(i, 0x7F0000000000 + (i % 64) * 4096))
    ]
    staged = host[:1] + [e for i in range(a.ios) for e in (pread(i, 0x7F0000000000), copy(i, 0x7D0000000000))]
    compat = [
        Event(0, 100, 100, "open", "openat", [7], "app", "/data/f.dat"),
        Event(1, 100, 100, "handle", "cuFileHandleRegister", [0x5B, 7, 0], "app"),
    ]
    for i in range(a.ios):
        t = 1000 + i * 2000
        compat += [
            Event(t, 100, 100, "api_enter", "cuFileRead", [0x5B, 0x7E0000000000, 4096, i * 4096, 0], "app"),
            Event(t + 100, 100, 100, "sys_exit", "pread64", [7, 0x7F1000000000, 4096, i * 4096, 0, 4096, 900], "app"),
            Event(t + 110, 100, 100, "usdt", "cufio_core:cufio_px_read", [0, i * 4096, 4096, 0, 4096, 0], "app"),
            Event(t + 200, 100, 100, "api_exit", "cuFileRead", [4096], "app"),
        ]
    for name, stream in (("bounce", bounce), ("staged", staged), ("compat", compat)):
        vs = classify(stream)
        assert len(vs) == a.ios and {v["route"] for v in vs} == {"DRAM_BOUNCE" if name != "compat" else "COMPAT"}, (
            name,
            len(vs),
            {v["route"] for v in vs},
        )
    printer = LinePrinter(Console(file=open(os.devnull, "w")), as_json=True)

    def lines():
        with open(os.devnull, "w") as null, contextlib.redirect_stdout(null):
            for v in verdicts:
                printer(v)

    t_rec = best(recordings, a.rounds)
    t_host = best(lambda: classify(host), a.rounds)
    t_json = best(lines, a.rounds)
    print(f"python {platform.python_version()} on {platform.node()} ({os.cpu_count()} CPUs), tree {a.tree}")
    print(f"recordings: {len(recs)} files, {n_rec} verdicts, {t_rec * 1e3:.1f} ms (CPU, best of {a.rounds})")
    print(f"host: {a.ios} pread64 -> {a.ios} verdicts, {t_host * 1e3:.1f} ms, {t_host / a.ios * 1e6:.2f} µs/verdict")
    for name, stream in (("bounce", bounce), ("staged", staged), ("compat", compat)):
        t = best(lambda s=stream: classify(s), a.rounds)
        print(
            f"{name}: {a.ios} verdicts, {t * 1e3:.1f} ms, {t / a.ios * 1e6:.2f} µs/verdict, {a.ios / t:,.0f} verdicts/s"
        )
    print(f"json lines: {a.ios} verdicts, {t_json * 1e3:.1f} ms, {t_json / a.ios * 1e6:.2f} µs/line")


if __name__ == "__main__":
    main()
