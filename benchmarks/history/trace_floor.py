#!/usr/bin/env python3
"""The floor under any syscall tracer on this kernel: what two empty raw_syscalls programs add to a
4 KiB cached pread, beside what gdsdiag's probes add (counted in the kernel, no per-I/O event).

  sudo python3 benchmarks/history/trace_floor.py [--rounds 3] [--ops 300000]

Per round, in this order: the workload (benchmarks/trace_prog_cost.py's: one thread of 4 KiB
buffered preads of a cached 64 MiB file, its own user+system CPU per pread) untraced; with two
empty raw tracepoint programs on sys_enter/sys_exit (the dispatch alone: the syscall's slow path
and the programs' call); with gdsdiag's probes attached to it (``Probes``, the reader polling).
bpf_stats stays as it is (off by default: its clock reads would be counted). Prints one JSON
document with every round and the medians."""

import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the checkout
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "benchmarks"))

EMPTY = "RAW_TRACEPOINT_PROBE(sys_enter) { return 0; }\nRAW_TRACEPOINT_PROBE(sys_exit) { return 0; }\n"


def workload(path: str, ops: int, probes=None) -> float:
    from trace_prog_cost import WORKLOAD

    p = subprocess.Popen(
        [sys.executable, "-c", WORKLOAD, path, str(ops), ""], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    if probes is not None:
        probes.add_pid(p.pid)
    p.stdin.write("g")
    p.stdin.flush()
    while probes is not None and p.poll() is None:
        probes.poll(50)
    return float(p.communicate()[0])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--ops", type=int, default=300_000)
    ap.add_argument("--dir", default="/var/tmp")
    a = ap.parse_args()
    from gdsdiag.trace.probes.bpf import Probes, import_bcc

    BPF = import_bcc().BPF
    path = os.path.join(a.dir, "gdsdiag-trace-floor.dat")
    if not os.path.exists(path):
        with open(path, "wb") as f:
            f.write(os.urandom(64 << 20))
    workload(path, a.ops // 4)  # (the file in the page cache)
    rounds = []
    for _ in range(a.rounds):
        r = {"untraced_ns": workload(path, a.ops)}
        b = BPF(text=EMPTY)
        r["empty_raw_tp_ns"] = workload(path, a.ops)
        b.cleanup()
        pr = Probes([], [], trace_all=False, want_kprobes=False, preattach=False, per_io=False)
        try:
            r["gdsdiag_ns"] = workload(path, a.ops, pr)
        finally:
            pr.close()
        rounds.append({k: round(v, 1) for k, v in r.items()})
        print(json.dumps(rounds[-1]), file=sys.stderr, flush=True)
    med = {k: round(statistics.median(x[k] for x in rounds), 1) for k in rounds[0]}
    med["floor_added_ns"] = round(med["empty_raw_tp_ns"] - med["untraced_ns"], 1)
    med["gdsdiag_added_ns"] = round(med["gdsdiag_ns"] - med["untraced_ns"], 1)
    med["gdsdiag_above_floor_ns"] = round(med["gdsdiag_ns"] - med["empty_raw_tp_ns"], 1)
    print(
        json.dumps(
            {
                "machine": f"{os.uname().nodename} {os.cpu_count()} CPUs {os.uname().release}",
                "ops": a.ops,
                "rounds": rounds,
                "median": med,
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
