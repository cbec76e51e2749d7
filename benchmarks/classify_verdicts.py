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
  compat      --ios cuFileRead calls with libcufile's pread64 and USDT probe inside (compat mode), as the
              probes send them since record version 4: two records, the pread64 and USDT hit folded
              into the call's exit record (probes/cufile_trace.c api_fold_t)
  compat4     the same calls sent four records each, as up to record version 3 (and for libcufile's
              worker threads still): enter, pread64, USDT hit, exit
and the --json line of every host verdict written the way 'gdsdiag trace --json' writes it (to
/dev/null). Then the live consumer's whole per-event path for bounce, staged and compat ("live"):
the stream packed as the events ring holds it (struct event_t records, bpf.REC_STRUCT; its opens and
handle registrations, which come by other rings, as events), decoded by the probes' own decoder
(bpf.Probes._decode, DECODE_MAX records a poll, sorted as poll sorts them), fed to the classifier and
the counted-I/O reader, then per poll advance, drain, the summary's tally and the --json line of
each verdict: what 'gdsdiag trace --json' does per event once the bytes are out of the ring; and
the same for real DRAM_BOUNCE streams recorded on the GPU machine ("live recorded bounce": one
thread, and 4 processes x 4 threads).
--tree runs another checkout's gdsdiag/ (e.g. an older commit, for a before/after pair).
benchmarks/trace_compat_rate.py measures a real stream under the tracer on the GPU machine; run in
the same call, the two agree (2026-12-02: 24.2 µs a COMPAT verdict here, 23.7 / 28.2 µs there; an
earlier "twofold" compared two machine starts: docs/benchmarks-history.md, "How far Python alone can go")."""

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
    ap.add_argument(
        "--bounce-recording",
        action="append",
        help="a DRAM_BOUNCE stream recorded with 'trace --record' (preadv2 + cuMemcpy pairs) for the "
        "'live recorded bounce' line; repeatable (default: the committed recordings, REAL_BOUNCES)",
    )
    a = ap.parse_args()
    sys.path.insert(0, os.path.abspath(a.tree))
    from rich.console import Console

    from gdsdiag.render.trace_out import LinePrinter
    from gdsdiag.trace.model.classify import classify
    from gdsdiag.trace.model.events import Event
    from gdsdiag.trace.recording import read_record

    if os.path.abspath(sys.modules["gdsdiag"].__file__ or "") != os.path.join(
        os.path.abspath(a.tree), "gdsdiag", "__init__.py"
    ):
        sys.exit(f"gdsdiag came from {sys.modules['gdsdiag'].__file__}, not from --tree {a.tree}")

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
    compat, compat4 = compat_streams(a.ios)
    streams = (("bounce", bounce), ("staged", staged), ("compat", compat), ("compat4", compat4))
    for name, stream in streams:
        vs = classify(stream)
        assert len(vs) == a.ios and {v["route"] for v in vs} == {"COMPAT" if "compat" in name else "DRAM_BOUNCE"}, (
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
    for name, stream in streams:
        t = best(lambda s=stream: classify(s), a.rounds)
        print(
            f"{name}: {a.ios} verdicts, {t * 1e3:.1f} ms, {t / a.ios * 1e6:.2f} µs/verdict, {a.ios / t:,.0f} verdicts/s"
        )
    print(f"json lines: {a.ios} verdicts, {t_json * 1e3:.1f} ms, {t_json / a.ios * 1e6:.2f} µs/line")
    from gdsdiag.trace.probes.bpf import Probes

    paired = hasattr(Probes, "pair_whole_calls")
    for name, stream in streams:
        ring, side = packed(stream)
        for whole in (False, True) if paired and name.startswith("compat") else (paired,):
            got = live(ring, side, printer, whole)
            assert got == a.ios, (name, got)
            t = best(lambda r=ring, s=side, w=whole: live(r, s, printer, w), a.rounds)
            how = (
                "whole calls paired in bulk"
                if whole and name.startswith("compat")
                else "bounce pairs taken in bulk"
                if whole and name == "bounce"
                else "decode"
            )
            print(
                f"live {name}{' (paired)' if whole and name.startswith('compat') else ''}: {len(stream)} events -> "
                f"{a.ios} verdicts, {t * 1e3:.1f} ms, {t / a.ios * 1e6:.2f} µs/verdict, {a.ios / t:,.0f} verdicts/s "
                f"({how}, classify, tally, json line)"
            )
    if paired:
        for path in a.bounce_recording or REAL_BOUNCES:
            recorded_bounce(printer, a.rounds, path)


REAL_BOUNCE = os.path.join(HERE, "tests", "fixtures", "gpu-machine", "stream-profile-2026-12-06", "rec-bounce.jsonl.gz")
# (and 100,016 pairs from 4 processes x 4 threads, each process's start-up reads waiting for a copy
# through all of it: the data-flow model keeps every pair of them, benchmarks/history/gpu_stream_profile.sh)
REAL_BOUNCES = [
    REAL_BOUNCE,
    os.path.join(HERE, "tests", "fixtures", "gpu-machine", "stream-profile-2026-12-06b", "rec-bounce-4x4.jsonl.gz"),
]


def recorded_bounce(printer, rounds: int, path: str = REAL_BOUNCE) -> None:
    """A real DRAM_BOUNCE stream through the live path: e.g. the 50,001 preadv2 + CuPy copy pairs
    recorded on the GPU machine (REAL_BOUNCE; trace_compat_rate.py --kind bounce). Unlike the
    synthetic one, its process read a few other files first (OpenSSL's config at Python's start),
    which wait for a copy through the whole stream: its pairs then go into the data-flow model as
    well. Its pairs come as the ring holds them; each process's events before its first pair
    (process start, opens: a stream of several processes starts them one after another) are fed
    first."""
    from gdsdiag.trace.recording import read_record

    _, evs = read_record(path)
    pair = (("sys_exit", "preadv2"), ("api_enter", "cuMemcpy"))
    in_ring = [e for e in evs if (e.kind, e.name) in pair]
    first: dict[int, int] = {}
    for e in in_ring:
        first.setdefault(e.pid, e.ts)
    before = [e for e in evs if e.ts < first.get(e.pid, 1 << 64) and (e.kind, e.name) not in pair]
    ring, _ = packed(in_ring)
    n = len(in_ring) // 2
    got = live(ring, before, printer)
    t = best(lambda: live(ring, before, printer), rounds)
    print(
        f"live recorded bounce: {len(in_ring)} events -> {got} verdicts ({n} pairs, {len(first)} processes), "
        f"{t * 1e3:.1f} ms, {t / n * 1e6:.2f} µs/verdict, {n / t:,.0f} verdicts/s (the GPU machine's stream, "
        f"{os.path.basename(path)})"
    )


def compat_streams(n: int, gap: int = 2000) -> tuple[list, list]:
    """N cuFileRead calls of 4 KiB by one thread, GAP ns apart, as the probes send them: (folded: the
    call's pread64 and USDT hit in its exit record, record version 4; four records a call, as up to
    version 3 and for libcufile's workers). A --tree from before the folding gets four records both."""
    from gdsdiag.trace.model.events import Event

    compat4 = [
        Event(0, 100, 100, "open", "openat", [7], "app", "/data/f.dat"),
        Event(1, 100, 100, "handle", "cuFileHandleRegister", [0x5B, 7, 0], "app"),
    ]
    compat = list(compat4)
    try:
        from gdsdiag.trace.model.evidence import USDT_FOLDED  # noqa: F401  (record version 4)

        folded = [4096, 1, 7, 1, 1, 4096, 0]  # pread64 (SYS_PREAD64 1) on fd 7, px_read (index 0), 4096 bytes
    except ImportError:  # a --tree from before the folding: its probes sent four records a call
        folded = None
    for i in range(n):
        t = 1000 + i * gap
        enter = Event(t, 100, 100, "api_enter", "cuFileRead", [0x5B, 0x7E0000000000, 4096, i * 4096, 0], "app")
        compat4 += [
            enter,
            Event(t + 100, 100, 100, "sys_exit", "pread64", [7, 0x7F1000000000, 4096, i * 4096, 0, 4096, 900], "app"),
            Event(t + 110, 100, 100, "usdt", "cufio_core:cufio_px_read", [0, i * 4096, 4096, 0, 4096, 0], "app"),
            Event(t + 200, 100, 100, "api_exit", "cuFileRead", [4096], "app"),
        ]
        if folded is not None:
            compat += [enter, Event(t + 200, 100, 100, "api_exit", "cuFileRead", folded, "app")]
    return (compat if folded is not None else compat4), compat4


def packed(stream):
    """(the events-ring records of STREAM as one bytes object, the events that come by other rings)."""
    from gdsdiag.trace.model.events import API_NAMES, KINDS, SYS_NAMES
    from gdsdiag.trace.probes.bpf import REC_STRUCT

    kind_id = {k: i for i, k in KINDS.items()}
    name_id = {("sys_exit", n): i for i, n in SYS_NAMES.items()}
    for kind in ("api_enter", "api_exit"):
        name_id.update({(kind, n): i for i, n in API_NAMES.items()})
    name_id[("usdt", "cufio_core:cufio_px_read")] = 0  # (USDT_NAMES below)
    recs, side = [], []
    for e in stream:
        if e.kind in ("open", "handle"):
            side.append(e)
            continue
        args = (list(e.args) + [0] * 7)[:7]
        if e.kind == "usdt":
            args[6] = len(e.args)  # (the probe's argument count rides in a6)
        comm = e.comm.encode()
        recs.append(REC_STRUCT.pack(e.ts, e.pid, e.tid, kind_id[e.kind], name_id[(e.kind, e.name)], *args, comm))
    return b"".join(recs), side


USDT_NAMES = {0: "cufio_core:cufio_px_read"}


def live(ring: bytes, side, printer, whole: bool = True, per_poll: int = 0) -> int:
    """The live loop's work per poll on RING (trace() in gdsdiag/trace/live.py): the verdicts made,
    under the collector's pace the trace sets (gdsdiag/trace/gcpace.py; a --tree from before it
    runs at the default pace, as it did). WHOLE: whole calls paired in bulk; PER_POLL: records a
    poll takes, the probes' clock at the last one's time and the classifier advanced to the poll's
    complete time, as the live loop does (0: 16k a poll, every record older than the reorder cut,
    advanced to the events' own time)."""
    try:
        from gdsdiag.trace.gcpace import streaming
    except ImportError:
        streaming = contextlib.nullcontext
    with streaming():
        return _live(ring, side, printer, whole, per_poll)


def _live(ring: bytes, side, printer, whole: bool, per_poll: int) -> int:
    from gdsdiag.trace.model.classify import Classifier
    from gdsdiag.trace.model.counted import CountedIo
    from gdsdiag.trace.model.tally import RouteTally
    from gdsdiag.trace.probes.bpf import REC_STRIDE, Probes

    clf, counter, tally = Classifier(), CountedIo(), RouteTally()
    if hasattr(Probes, "offline"):  # the probes' own poll: reorder hold, decoder, whole calls
        probes = Probes.offline()
        probes.usdt_names = USDT_NAMES
        clock = [1 << 62]  # (PER_POLL: the last record's time; else every record is old)
        probes.clock = lambda: clock[0]
        if whole:
            probes.pair_whole_calls(clf.whole_gate)
    else:  # (a --tree from before Probes.offline: its decoder alone, sorted as its poll sorts)
        from types import SimpleNamespace

        probes = SimpleNamespace(_raw=[], _raw_n=0, _comms={}, _names={}, _events=[], usdt_names=USDT_NAMES)
    step = (per_poll or Probes.DECODE_MAX) * REC_STRIDE
    with open(os.devnull, "w") as null, contextlib.redirect_stdout(null):
        for e in side:
            clf.feed(e)
            counter.feed(e)
        for at in range(0, len(ring), step):
            part = ring[at : at + step]
            if hasattr(probes, "poll"):
                if per_poll:
                    clock[0] = int.from_bytes(part[len(part) - REC_STRIDE + 8 : len(part) - REC_STRIDE + 16], "little")
                probes._keep(part, len(part) // REC_STRIDE)
                evs = probes.poll(0)
                left = clf.feed_whole(probes.take_whole(), probes.take_bounce()) if whole else None
                if left:
                    evs = sorted(evs + left, key=lambda e: e.ts)
            else:
                probes._raw, probes._raw_n = [(part, len(part) // REC_STRIDE)], len(part) // REC_STRIDE
                Probes._decode(probes)  # type: ignore[arg-type]
                evs, probes._events = probes._events, []
                evs.sort(key=lambda e: e.ts)
            for e in evs:
                clf.feed(e)
                counter.feed(e)
            clf.advance(probes.complete_ns if per_poll else 0)
            hand_out(clf.drain(), tally, printer)
        if hasattr(probes, "poll"):
            evs = probes.poll(0, final=True)
            left = clf.feed_whole(probes.take_whole(), probes.take_bounce()) if whole else None
            for e in sorted(evs + left, key=lambda e: e.ts) if left else evs:
                clf.feed(e)
        clf.flush()
        hand_out(clf.drain(), tally, printer)
    return tally.ios


def hand_out(vs: list, tally, printer) -> None:
    """A poll's verdicts to the tally and the printer as the live loop hands them out: together
    where the tree's tally and printer take lists (add_all, many), else one by one."""
    if hasattr(tally, "add_all") and hasattr(printer, "many"):
        tally.add_all(vs)
        printer.many(vs)
        return
    for v in vs:
        tally.add(v)
        printer(v)


if __name__ == "__main__":
    main()
