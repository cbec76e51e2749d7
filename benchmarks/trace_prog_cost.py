#!/usr/bin/env python3
"""What the trace's probes add to each syscall of a traced process, per checkout, measured in the
kernel: the BPF programs' own run time (kernel.bpf_stats_enabled: run_time_ns / run_cnt of each
program, from its fdinfo) and the workload's CPU per syscall with and without the probes.

  sudo python3 benchmarks/trace_prog_cost.py [--ops 300000] [--rounds 3] [--per-io] [--cuda]
      [--variant LABEL=TREE[,VAR=VALUE...] ...]

Each round runs, per variant and in a fresh process: the workload (4 KiB buffered preads of a
cached file, one thread) untraced, then the probes attached as a trace of it would have them
(``Probes``, the pid registered before it starts), the workload again, the rings drained meanwhile.
The CPU figure is the workload's own user+system time per pread (the programs run inside its
syscalls); the program figures are the kernel's, so other sessions on a shared machine move them
less than a wall-clock rate. bpf_stats is switched on for the run and back to what it was.
Prints one JSON document: per round and variant, and the medians."""

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

WORKLOAD = r"""
import ctypes, os, resource, sys
path, ops, cuda = sys.argv[1], int(sys.argv[2]), sys.argv[3]
if cuda:
    try:
        lib = ctypes.CDLL(cuda)
        if "libcuda" in os.path.basename(cuda):
            lib.cuInit(0)
    except OSError:
        pass
os.read(0, 1)  # the gate: probes attached
fd = os.open(path, os.O_RDONLY)
n = os.fstat(fd).st_size // 4096
pread = os.pread
c = resource.getrusage(resource.RUSAGE_SELF)
for i in range(ops):
    pread(fd, 4096, (i % n) * 4096)
d = resource.getrusage(resource.RUSAGE_SELF)
print((d.ru_utime + d.ru_stime - c.ru_utime - c.ru_stime) / ops * 1e9)
"""

CHILD = r"""
import json, os, subprocess, sys, time
from gdsdiag.trace.probes.bpf import Probes
path, ops, per_io, cuda, wl = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1", sys.argv[4], sys.argv[5]

def workload(probes):
    p = subprocess.Popen([sys.executable, "-c", wl, path, str(ops), cuda], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    if probes is not None:
        probes.add_pid(p.pid)
    p.stdin.write("g"); p.stdin.flush()
    events = 0
    while probes is not None and p.poll() is None:
        events += len(probes.poll(50))
    out = p.communicate()[0]
    if probes is not None:
        events += len(probes.poll(0, final=True))
    return float(out), events

base, _ = workload(None)
pr = Probes([], [], trace_all=False, want_kprobes=False, preattach=False, per_io=per_io)
def stats():
    out = {}
    for name, f in pr.b.funcs.items():
        name = name.decode() if isinstance(name, bytes) else name
        if "sys_e" not in name:
            continue
        kv = {}
        with open(f"/proc/self/fdinfo/{f.fd}") as fh:
            for line in fh:
                k, _, v = line.partition(":")
                kv[k.strip()] = v.strip()
        out[name] = (int(kv.get("run_time_ns", 0)), int(kv.get("run_cnt", 0)))
    return out
s0 = stats()
traced, events = workload(pr)
s1 = stats()
progs = {k: {"runs": s1[k][1] - s0[k][1], "ns_per_run": round((s1[k][0] - s0[k][0]) / max(s1[k][1] - s0[k][1], 1), 1)} for k in s1}
print(json.dumps({"untraced_cpu_ns": round(base, 1), "traced_cpu_ns": round(traced, 1), "events": events, "lost": pr.lost,
                  "prog_ns_per_op": round(sum((s1[k][0] - s0[k][0]) for k in s1) / ops, 1), "progs": progs,
                  "counted": sum(int(e.args[2]) for e in pr.counted_host_io())}))
pr.close()
"""


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def run_rounds(a, variants, path, cuda, rounds):
    for k in range(a.rounds):
        # (each round starts with the next variant: none is always the one a timeout cuts)
        for label, tree, env in variants[k % len(variants) :] + variants[: k % len(variants)]:
            r = subprocess.run(
                [sys.executable, "-c", CHILD, path, str(a.ops), "1" if a.per_io else "0", cuda, WORKLOAD],
                cwd=tree,
                env={**os.environ, **env, "PYTHONPATH": tree + os.pathsep + os.environ.get("PYTHONPATH", "")},
                capture_output=True,
                text=True,
                timeout=300,
            )
            line = next((x for x in r.stdout.splitlines() if x.startswith("{")), None)
            rounds.append({"variant": label, **(json.loads(line) if line else {"failed": r.stderr[-400:]})})
            print(json.dumps(rounds[-1]), file=sys.stderr)


def parse_variant(spec):
    label, _, rest = spec.partition("=")
    tree, *pairs = rest.split(",")
    return label, os.path.abspath(tree or HERE), dict(p.split("=", 1) for p in pairs)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ops", type=int, default=300_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--per-io", action="store_true")
    ap.add_argument("--cuda", action="store_true", help="the workload loads a CUDA library (trace_overhead.py --cuda)")
    ap.add_argument("--variant", action="append", default=[])
    ap.add_argument("--dir", default="/var/tmp")
    a = ap.parse_args()
    variants = [parse_variant(v) for v in a.variant] or [("new", HERE, {})]
    cuda = ""
    if a.cuda:
        sys.path.insert(0, HERE)
        from trace_overhead import cuda_library  # noqa: E402 - (benchmarks/ is not a package)

        cuda = cuda_library()
    with open("/proc/sys/kernel/bpf_stats_enabled") as f:
        was = f.read().strip()
    rounds = []
    try:
        with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
            f.write("1")
        with tempfile.TemporaryDirectory(dir=a.dir) as d:
            path = os.path.join(d, "bench.dat")
            with open(path, "wb") as f:
                f.write(os.urandom(64 << 20))
            for _label, tree, env in variants:  # warm-up: fills each variant's compiled-program cache
                subprocess.run(
                    [sys.executable, "-c", CHILD, path, "1000", "0", cuda, WORKLOAD],
                    cwd=tree,
                    env={**os.environ, **env, "PYTHONPATH": tree + os.pathsep + os.environ.get("PYTHONPATH", "")},
                    capture_output=True,
                    timeout=300,
                )
            signal.signal(signal.SIGTERM, _interrupt)  # (under `timeout`: report what was measured)
            try:
                run_rounds(a, variants, path, cuda, rounds)
            except KeyboardInterrupt:
                rounds.append({"variant": None, "stopped": "SIGTERM before the rounds were done"})
    finally:
        with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
            f.write(was)
    med = {}
    for label, _, _ in variants:
        rs = [x for x in rounds if x["variant"] == label and "traced_cpu_ns" in x]
        if rs:
            med[label] = {
                "untraced_cpu_ns": statistics.median(x["untraced_cpu_ns"] for x in rs),
                "traced_cpu_ns": statistics.median(x["traced_cpu_ns"] for x in rs),
                "added_cpu_ns": statistics.median(x["traced_cpu_ns"] - x["untraced_cpu_ns"] for x in rs),
                "prog_ns_per_op": statistics.median(x["prog_ns_per_op"] for x in rs),
                "cpu_ratio": round(statistics.median(x["untraced_cpu_ns"] / x["traced_cpu_ns"] for x in rs), 3),
            }
    print(
        json.dumps(
            {
                "machine": f"{os.uname().nodename} {os.cpu_count()} CPUs, kernel {os.uname().release}, load "
                f"{os.getloadavg()[0]:.2f}",
                "ops": a.ops,
                "per_io": a.per_io,
                "cuda": cuda or None,
                "variants": {k: {"tree": t, "env": e} for k, t, e in variants},
                "median": med,
                "rounds": rounds,
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
