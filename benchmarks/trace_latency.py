#!/usr/bin/env python3
"""Verdict latency of a live trace: how long after an I/O's evidence is complete its verdict line
reaches the reader, per route (issue 21: p99 <= 0.5 s for every route).

  sudo python3 benchmarks/trace_latency.py [--routes host,host-copying,bounce,compat] [--n 100] [--gap-ms 20]
                                           [--tail 4] [--tree DIR]

Each route runs ``gdsdiag trace --json --per-io -- python3 WORKLOAD`` once, the workload doing N
1 MiB I/Os GAP ms apart and then staying quiet for --tail seconds (no I/O: the last verdicts must not
wait for an event or the exit), and a thread stamps every stdout line with CLOCK_MONOTONIC as it
arrives. The I/O line carries the probes' timestamp (``ts``, the same clock) and ``latency_ns``, so
the I/O ends at ``ts + latency_ns`` (the syscall's or cuFile call's end). Its evidence is complete:
for DRAM_BOUNCE at the CUDA copy the evidence names (``+X ms after it``) when that is later; for HOST
when no copy may take its bytes any more: the data-flow window after the read (dataflow.WINDOW_NS,
3 s, in a job that has made a CUDA copy; FIRST_COPY_WINDOW_NS, 30 s, before one), or the traced
program's exit (it writes CLOCK_MONOTONIC as it ends) if that comes first. Both lags are reported:
``p50_s``/``p99_s`` from the evidence being complete (the goal's measure), ``from_io_end``.

- host: preads of a cached file, no CUDA (HOST; sent per I/O with --per-io): complete at the exit;
- host-copying: one CUDA copy of a scratch buffer first, then preads into a buffer never copied
  (HOST in a job that copies: complete 3 s after each read, while the program still runs; needs
  CuPy and a GPU);
- bounce: a pread into a host buffer, then cudaMemcpy of that buffer to the GPU (DRAM_BOUNCE;
  needs CuPy and a GPU);
- compat: cuFileRead through gdsdiag.cufile (COMPAT where nvidia-fs is absent; needs CuPy, libcufile
  and a GPU).
Routes whose workload cannot run here are reported as skipped with the reason."""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

WORKLOAD = r"""
import os, sys, time
route, path, n, gap = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]) / 1000
tail, stamp = float(sys.argv[5]), sys.argv[6]
MiB = 1 << 20
if route == "host":
    fd = os.open(path, os.O_RDONLY)
    buf = bytearray(MiB)
    for i in range(n):
        os.preadv(fd, [buf], (i % 16) * MiB)
        time.sleep(gap)
elif route == "host-copying":
    import cupy as cp, numpy as np
    fd = os.open(path, os.O_RDONLY)
    scratch, host = np.zeros(MiB, dtype=np.uint8), np.empty(MiB, dtype=np.uint8)
    dev = cp.empty(MiB, dtype=cp.uint8)
    cp.cuda.runtime.memcpy(dev.data.ptr, scratch.ctypes.data, MiB, 1)  # the job copies: 3 s window
    for i in range(n):
        os.preadv(fd, [host], (i % 16) * MiB)
        time.sleep(gap)
elif route == "bounce":
    import cupy as cp, numpy as np
    fd = os.open(path, os.O_RDONLY)
    host = np.empty(MiB, dtype=np.uint8)
    dev = cp.empty(MiB, dtype=cp.uint8)
    for i in range(n):
        os.preadv(fd, [host], (i % 16) * MiB)
        cp.cuda.runtime.memcpy(dev.data.ptr, host.ctypes.data, MiB, 1)  # cudaMemcpyHostToDevice
        time.sleep(gap)
else:
    import cupy as cp
    import gdsdiag.cufile as cf
    dev = cp.empty(MiB, dtype=cp.uint8)
    with cf.Driver(), cf.FileHandle(path, "r") as fh, cf.BufferRegistration(dev):
        for i in range(n):
            fh.read(dev, MiB, (i % 16) * MiB)
            time.sleep(gap)
time.sleep(tail)  # quiet: no I/O, no event
open(stamp, "w").write(repr(time.monotonic_ns()))
"""
ROUTE_OF = {"host": "HOST", "host-copying": "HOST", "bounce": "DRAM_BOUNCE", "compat": "COMPAT"}
AFTER = re.compile(r"\+([\d.]+) ms after it")


def needs(route: str) -> str | None:
    """Why this route's workload cannot run here, or None."""
    if route == "host":
        return None
    try:
        import cupy  # noqa: F401

        cupy.cuda.runtime.getDeviceCount()
    except Exception as e:  # (no CuPy, no driver, no GPU: the reason is reported)
        return f"needs CuPy and a GPU: {type(e).__name__}: {e}"
    return None


def measure(tree: str, route: str, path: str, n: int, gap_ms: float, wl: str, tail_s: float) -> dict:
    env = {**os.environ, "PYTHONPATH": tree + os.pathsep + HERE + os.pathsep + os.environ.get("PYTHONPATH", "")}
    env.pop("PYTHONUNBUFFERED", None)  # (gdsdiag's stdout buffered as a user's pipe has it)
    sys.path.insert(0, tree)
    from gdsdiag.trace.model.dataflow import FIRST_COPY_WINDOW_NS, WINDOW_NS

    window = WINDOW_NS if route == "host-copying" else FIRST_COPY_WINDOW_NS
    stamp = wl + ".exited"
    cmd = [sys.executable, "-m", "gdsdiag", "trace", "--json", "--per-io", "--", sys.executable, wl]
    cmd += [route, path, str(n), str(gap_ms), str(tail_s), stamp]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=tree)
    got: list[tuple[int, str]] = []

    def reader() -> None:
        for line in p.stdout:
            got.append((time.monotonic_ns(), line.decode(errors="replace")))

    t = threading.Thread(target=reader, daemon=True)
    t.start()
    err = p.stderr.read().decode(errors="replace")
    p.wait(300)
    t.join(10)
    want = ROUTE_OF[route]
    try:
        with open(stamp) as f:
            exited = int(f.read())
    except (OSError, ValueError):
        exited = None
    lags, from_end, routes = [], [], {}
    summary = None
    for t_line, line in got:
        if line.startswith('{"type": "summary"'):
            summary = json.loads(line)
            continue
        if not line.startswith('{"type": "io"'):
            continue
        v = json.loads(line)
        if v.get("path") != path:
            continue
        routes[v["route"]] = routes.get(v["route"], 0) + 1
        if v["route"] != want:
            continue
        end = v["ts"] + (v.get("latency_ns") or 0)
        done = end
        for ev in v.get("evidence", []):
            m = AFTER.search(ev)
            if m:
                done = max(done, v["ts"] + int(float(m.group(1)) * 1e6))
        if want == "HOST":  # no copy may take its bytes after the window, or after the program's end
            done = min(end + window, exited) if exited else end + window
        lags.append((t_line - done) / 1e9)
        from_end.append((t_line - end) / 1e9)
    lags.sort()
    from_end.sort()
    out = {"route": want, "verdicts": len(lags), "routes_seen": routes, "rc": p.returncode}
    if lags:
        out.update(
            {
                "p50_s": round(statistics.median(lags), 3),
                "p99_s": round(lags[min(len(lags) - 1, int(0.99 * len(lags)))], 3),
                "max_s": round(lags[-1], 3),
                "min_s": round(lags[0], 3),
                "from_io_end": {
                    "p50_s": round(statistics.median(from_end), 3),
                    "p99_s": round(from_end[min(len(from_end) - 1, int(0.99 * len(from_end)))], 3),
                },
            }
        )
    else:
        out["stderr_tail"] = err[-400:]
    if summary:
        out["lost_events"] = summary.get("lost_events")
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--routes", default="host,host-copying,bounce,compat")
    ap.add_argument("--n", type=int, default=100)
    ap.add_argument("--gap-ms", type=float, default=20)
    ap.add_argument("--tree", default=HERE)
    ap.add_argument("--dir", default="/var/tmp")
    ap.add_argument("--tail", type=float, default=4.0, help="seconds the workload stays quiet after its I/O")
    a = ap.parse_args()
    tree = os.path.abspath(a.tree)
    res: dict = {"machine": f"{os.uname().nodename} {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}"}
    res.update({"tree": tree, "n": a.n, "gap_ms": a.gap_ms, "tail_s": a.tail, "routes": []})
    with tempfile.TemporaryDirectory(dir=a.dir) as d:
        path = os.path.join(d, "lat.dat")
        with open(path, "wb") as f:
            f.write(os.urandom(16 << 20))
        wl = os.path.join(d, "wl.py")
        with open(wl, "w") as f:
            f.write(WORKLOAD)
        for route in a.routes.split(","):
            why = needs(route)
            if why:
                res["routes"].append({"route": ROUTE_OF[route], "skipped": why})
                continue
            res["routes"].append(measure(tree, route, path, a.n, a.gap_ms, wl, a.tail))
            print(json.dumps(res["routes"][-1]), file=sys.stderr, flush=True)
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
