#!/usr/bin/env python3
"""A real COMPAT (or DRAM_BOUNCE) per-I/O stream under the tracer: what it costs the tracer per
verdict, and whether it keeps up (issue 21), for one or more checkouts in the same run.

  sudo python3 benchmarks/trace_compat_rate.py [--calls 100000] [--bs 4096] [--rounds 2]
      [--kind compat|bounce] [--procs N] [--threads T] [--tree DIR ...]

The workload, --kind compat: gdsdiag's cffi bindings over the real libcufile (compat mode where
nvidia-fs is absent), --calls cuFileRead calls of --bs bytes back to back over a 64 MiB file;
--kind bounce: the application's own pread into host memory, then CuPy's copy of that buffer to the
GPU (what fio --cuda_io=posix and kvikio's POSIX path do: DRAM_BOUNCE). --procs N splits the calls
over N processes started together, --threads T over T threads of each (one thread cannot make 100k
calls a second; processes have a CUDA context each, which the GPU time-slices), each process
printing its own ground truth (calls, its loop's start and end, its own CPU seconds). Per round and
tree: the workload untraced, then under ``gdsdiag trace --json --per-io`` (stdout to a file).
Reported: the calls' rate both ways (traced/plain), the verdict lines for the file against the
calls, events lost, the tracer's own CPU per verdict — the CPU time of gdsdiag and everything it
waited for (os.wait4) less the workload's own, less what a trace of a 100-call run costs (start,
CUDA's doors, the end), per verdict beyond that run's — how busy that kept the tracer while the
calls ran, and ``verdicts_per_s``: the verdicts beyond the short run's over the wall time beyond
its (the workload's rate while the tracer keeps up; the tracer's own sustained rate once it falls
behind, as its trace then ends late). Needs root, bcc, CuPy, libcufile and a GPU."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

WORKLOAD = r"""
import json, os, resource, subprocess, sys, threading, time
path, calls, bs, truth = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
procs, kind, threads = int(sys.argv[5]), sys.argv[6], int(sys.argv[7])
if procs > 1:
    # the launcher: PROCS copies of this loop, each its own process (its own CUDA context and
    # libcufile), started together once all are ready; the stream is theirs summed
    import shutil
    d = truth + ".d"
    shutil.rmtree(d, ignore_errors=True)  # (a former run's ready and go files would start this one early)
    os.makedirs(d)
    kids = [subprocess.Popen([sys.executable, __file__, path, str(calls // procs), str(bs),
                              os.path.join(d, str(i)), "1", kind, str(threads), os.path.join(d, "go"), str(i)])
            for i in range(procs)]
    while sum(os.path.exists(os.path.join(d, f"{i}.ready")) for i in range(procs)) < procs:
        if any(k.poll() not in (None, 0) for k in kids):
            sys.exit("a workload process failed")
        time.sleep(0.005)
    open(os.path.join(d, "go"), "w").close()
    rc = [k.wait() for k in kids]
    own = [json.load(open(os.path.join(d, str(i)))) for i in range(procs)]
    t0, t1 = min(x["t0"] for x in own), max(x["t1"] for x in own)
    n = sum(x["calls"] for x in own)
    me = resource.getrusage(resource.RUSAGE_SELF)  # (the launcher's own, small: it is the tracer's otherwise)
    with open(truth, "w") as f:
        f.write(json.dumps({"calls": n, "seconds": t1 - t0, "rate": (n - procs * threads) / (t1 - t0),
                            "cpu_s": sum(x["cpu_s"] for x in own) + me.ru_utime + me.ru_stime,
                            "sys_s": sum(x["sys_s"] for x in own) + me.ru_stime,
                            "t0": t0, "t1": t1, "procs": procs}))
    sys.exit(max(rc))
import cupy as cp
go, index = (sys.argv[8], int(sys.argv[9])) if len(sys.argv) > 9 else (None, 0)
span = os.path.getsize(path) // bs
if kind == "compat":
    import contextlib
    import gdsdiag.cufile as cf
    held = contextlib.ExitStack()  # (open until the process ends, in this order: driver, file, buffers)
    held.enter_context(cf.Driver())
    fh = held.enter_context(cf.FileHandle(path, "r"))
    def make():  # one thread's call: its own registered GPU buffer, the file handle shared
        dev = cp.empty(bs, dtype=cp.uint8)
        held.enter_context(cf.BufferRegistration(dev))
        return lambda off: fh.read(dev, bs, off)
else:  # bounce: the application's own read into host memory, then its copy to the GPU (DRAM_BOUNCE)
    import numpy as np
    fd = os.open(path, os.O_RDONLY)
    def make():
        dev, host = cp.empty(bs, dtype=cp.uint8), np.empty(bs, dtype=np.uint8)
        def one(off):
            os.preadv(fd, [host], off)
            dev.set(host)
        return one
ones = [make() for _ in range(threads)]
for one in ones:
    one(0)
if go:
    open(truth + ".ready", "w").close()
    while not os.path.exists(go):
        time.sleep(0.001)
def loop(one, base, n):
    for i in range(n):
        one(((base + i) % span) * bs)
each = calls // threads
work = [threading.Thread(target=loop, args=(one, (index * threads + k) * 7919, each)) for k, one in enumerate(ones)]
r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.monotonic()
for w in work:
    w.start()
for w in work:
    w.join()
t1, r1 = time.monotonic(), resource.getrusage(resource.RUSAGE_SELF)
cpu = r1.ru_utime + r1.ru_stime
n = each * threads
with open(truth, "w") as f:  # (its own file: a traced program's stdout is shared with the trace's)
    f.write(json.dumps({"calls": n + threads, "seconds": t1 - t0, "rate": n / (t1 - t0), "cpu_s": cpu, "sys_s": r1.ru_stime,
                        "t0": t0, "t1": t1}))
"""


def run(cmd, env, cwd, out_path):
    with open(out_path, "w") as out:
        t = time.monotonic()
        p = subprocess.Popen(cmd, stdout=out, stderr=subprocess.PIPE, env=env, cwd=cwd)
        err = p.stderr.read().decode(errors="replace")
        _, status, ru = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        return p.returncode, err, ru.ru_utime + ru.ru_stime, time.monotonic() - t, ru.ru_stime


def traced(tree: str, env: dict, wcmd: list, path: str, out: str, truth: str):
    """(the workload's own line, verdict lines for PATH, the summary, the tracer's CPU s, wall s) of
    one traced run, or (None, stderr)."""
    tcmd = [sys.executable, "-m", "gdsdiag", "trace", "--json", "--per-io", "--"] + wcmd
    if os.path.exists(truth):
        os.unlink(truth)
    rc, err, cpu, wall, sys_s = run(tcmd, env, tree, out)
    lines = open(out).read().splitlines()
    if rc != 0 or not os.path.exists(truth):
        return None, err[-600:]
    with open(truth) as f:
        own = json.load(f)
    verdicts = sum(1 for x in lines if x.startswith('{"type": "io"') and f'"path": "{path}"' in x)
    summary = next((json.loads(x) for x in lines if x.startswith('{"type": "summary"')), {})
    # (the kernel's share of the tracer's CPU apart: reading the rings, its polls, writing the lines)
    return (own, verdicts, summary, cpu - own["cpu_s"], wall, sys_s - own.get("sys_s", 0)), ""


def libraries_cold(path: str) -> None:
    """The page cache dropped, then PATH (the workload's data) read back into it: the programs' and
    CUDA's libraries fault in under the trace, as on a program's first run after a boot or in a
    fresh container, while the data is cached as in every other round (--cold)."""
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")
    with open(path, "rb") as f:
        while f.read(8 << 20):
            pass


def one(tree: str, path: str, a, wl: str, tmp: str) -> dict:
    env = {**os.environ, "PYTHONPATH": tree + os.pathsep + os.environ.get("PYTHONPATH", "")}
    truth = os.path.join(tmp, "truth.json")
    shape = [str(a.procs), a.kind, str(a.threads)]
    wcmd = [sys.executable, wl, path, str(a.calls), str(a.bs), truth, *shape]
    if a.cold:
        libraries_cold(path)
    rc, err, _, _, _ = run(wcmd, env, tree, os.path.join(tmp, "plain.out"))
    if rc != 0:
        return {"failed": err[-600:]}
    with open(truth) as f:
        plain = json.load(f)
    # the tracer's start and end alone (attach, CUDA's doors, the summary): a run of 100 calls
    if a.cold:
        libraries_cold(path)
    short, err = traced(
        tree,
        env,
        [sys.executable, wl, path, str(100 * a.procs * a.threads), str(a.bs), truth, *shape],
        path,
        os.path.join(tmp, "short.out"),
        truth,
    )
    if a.cold:
        libraries_cold(path)
    res, err = traced(tree, env, wcmd, path, os.path.join(tmp, "traced.out"), truth)
    if res is None or short is None:
        return {"failed": err}
    own, verdicts, summary, tracer_cpu, wall, _ = res
    stream_cpu = tracer_cpu - short[3]
    return {
        "kind": a.kind,
        "cold": a.cold,
        "procs": a.procs,
        "threads": a.threads,
        "calls": own["calls"],
        "verdicts": verdicts,
        "events": summary.get("events"),  # (records the tracer took: two a compat call since the fold)
        "lost": summary.get("lost_events"),
        "ios_lost_in_kernel": summary.get("ios_lost_in_kernel"),
        "unclassified_at_stop": summary.get("unclassified_at_stop"),
        # the verdicts beyond the short run's over the wall time beyond its: the workload's rate while
        # the tracer keeps up, the tracer's own sustained rate once it falls behind (its trace ends late)
        "verdicts_per_s": round((verdicts - short[1]) / max(wall - short[4], 1e-3)),
        "plain_rate": round(plain["rate"]),
        "traced_rate": round(own["rate"]),
        "ratio": round(own["rate"] / plain["rate"], 3),
        "tracer_cpu_s": round(tracer_cpu, 2),
        "tracer_start_end_cpu_s": round(short[3], 2),
        "tracer_sys_s": round(res[5], 2),
        "tracer_start_end_sys_s": round(short[5], 2),
        # whose events the kernel dropped, and when the trace's phases ended (the summary's own)
        "lost_by_process": summary.get("lost_by_process"),
        "startup_s": summary.get("startup_s"),
        # the stream's own cost: the tracer's CPU less its start and end, per verdict beyond the short run's
        "tracer_us_per_verdict": round(stream_cpu / max(verdicts - short[1], 1) * 1e6, 2),
        "tracer_busy": round(stream_cpu / own["seconds"], 2),  # of one CPU, while the calls ran
        "wall_s": round(wall, 2),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=100_000)
    ap.add_argument("--bs", type=int, default=4096)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--tree", action="append", help="a checkout whose gdsdiag/ is measured (repeatable)")
    ap.add_argument("--dir", default="/var/tmp")
    ap.add_argument("--procs", type=int, default=1, help="workload processes reading at once (their calls summed)")
    ap.add_argument("--threads", type=int, default=1, help="threads of each workload process reading at once")
    ap.add_argument(
        "--kind",
        choices=("compat", "bounce"),
        default="compat",
        help="compat: cuFileRead (COMPAT without nvidia-fs); bounce: pread into host memory, then its copy to the GPU",
    )
    ap.add_argument(
        "--cold",
        action="store_true",
        help="drop the page cache before each run, the data file read back in: libraries fault in under the trace",
    )
    a = ap.parse_args()
    trees = [os.path.abspath(t) for t in (a.tree or [HERE])]
    tmp = tempfile.mkdtemp(prefix="gdsdiag-compat-rate-")
    path = os.path.join(a.dir, "gdsdiag-compat-rate.dat")
    if not os.path.exists(path):
        with open(path, "wb") as f:
            f.write(os.urandom(64 << 20))
    wl = os.path.join(tmp, "wl.py")
    with open(wl, "w") as f:
        f.write(WORKLOAD)
    for tree in trees:  # each tree's compiled-program cache filled first: a compile is no round's cost
        env = {**os.environ, "PYTHONPATH": tree + os.pathsep + os.environ.get("PYTHONPATH", "")}
        truth = os.path.join(tmp, "truth.json")
        warm = [sys.executable, wl, path, "10", str(a.bs), truth, "1", a.kind, "1"]
        traced(tree, env, warm, path, os.path.join(tmp, "warm.out"), truth)
    rounds = []
    for r in range(a.rounds):
        for tree in trees:
            res = {"round": r, "tree": tree, **one(tree, path, a, wl, tmp)}
            rounds.append(res)
            print(json.dumps(res), file=sys.stderr, flush=True)
    med = {}
    for tree in trees:
        ok = [x for x in rounds if x["tree"] == tree and "failed" not in x]
        if ok:
            med[tree] = {
                k: statistics.median(x[k] for x in ok)
                for k in (
                    "traced_rate",
                    "plain_rate",
                    "ratio",
                    "tracer_us_per_verdict",
                    "tracer_busy",
                    "verdicts_per_s",
                )
            }
    print(
        json.dumps(
            {
                "calls": a.calls,
                "bs": a.bs,
                "procs": a.procs,
                "threads": a.threads,
                "kind": a.kind,
                "rounds": rounds,
                "median": med,
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
