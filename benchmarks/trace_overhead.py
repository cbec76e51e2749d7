#!/usr/bin/env python3
"""Throughput of a workload with and without 'gdsdiag trace', in the same run, alternating.

  sudo python3 benchmarks/trace_overhead.py posix  [--bs 4096] [--ops 400000] [--rounds 3] [--per-io] [--rate N]
  sudo python3 benchmarks/trace_overhead.py cufile [--ops 50000]  [--rounds 3]   # 4 KiB cuFileRead (GPU machine)

posix: buffered pread64 of --bs bytes from a cached 64 MiB file in one thread, as fast as it goes
(or paced at --rate ops/s). By default the trace counts that host I/O in the kernel (the process
has no CUDA library); --per-io sends every I/O to the Python consumer, which is what a process with
CUDA loaded costs. Reported per round: ops/s untraced and traced, their ratio, the tracer's CPU per
event and per I/O (traced run's CPU minus the workload alone minus the tracer's fixed cost on
/bin/true), events and lost events, and whether every I/O was accounted for (per I/O lines plus
kernel counters). Goals (issue 9): <= 3 % at 50k ops/s on the GPU machine, <= 10 % on the 2-vCPU dev
VM, 0 lost at 100k events/s."""

import argparse
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORKLOAD = r"""
import os, resource, sys, time
mode, path, ops = sys.argv[1], sys.argv[2], int(sys.argv[3])
bs, rate = int(sys.argv[4]), float(sys.argv[5])
if mode == "posix":
    cuda = os.environ.get("WL_CUDA")
    if cuda:
        # a process with a CUDA library loaded: the trace sends its I/O one by one (a copy may follow)
        import ctypes
        try:
            lib = ctypes.CDLL(cuda)
            if "libcuda" in os.path.basename(cuda):
                lib.cuInit(0)
        except OSError:
            pass  # (its open is what the trace keys on; a libcufile without libcuda loads no further)
    fd = os.open(path, os.O_RDONLY)
    size = os.fstat(fd).st_size
    n = size // bs
    pread = os.pread
    _c = resource.getrusage(resource.RUSAGE_SELF)
    cpu0 = _c.ru_utime + _c.ru_stime
    t = time.perf_counter()
    if rate > 0:
        # paced: a batch of 100 reads, then wait for the schedule (busy-wait: sleeps are too coarse)
        per = 100 / rate
        nxt = t
        i = 0
        while i < ops:
            for _ in range(100):
                pread(fd, bs, (i % n) * bs)
                i += 1
            nxt += per
            while time.perf_counter() < nxt:
                pass
    else:
        for i in range(ops):
            pread(fd, bs, (i % n) * bs)
    dt = time.perf_counter() - t
else:
    import cupy as cp, gdsdiag.cufile as cf
    buf = cp.zeros(4096, dtype=cp.uint8)
    with cf.Driver(), cf.FileHandle(path, "r") as fh, cf.BufferRegistration(buf):
        size = os.path.getsize(path)
        _c = resource.getrusage(resource.RUSAGE_SELF)
        cpu0 = _c.ru_utime + _c.ru_stime
        t = time.perf_counter()
        for i in range(ops):
            fh.read(buf, 4096, (i * 4096) % size)
        dt = time.perf_counter() - t
# the rate goes to a file of its own: under the trace, stdout is shared with the tracer's JSON lines;
# with the CPU time the loop took (user + system: the probes run in its syscalls), which other
# sessions on a shared machine do not change the way they change the wall rate
cpu = resource.getrusage(resource.RUSAGE_SELF)
with open(sys.argv[6], "w") as f:
    f.write(f"{ops / dt} {(cpu.ru_utime + cpu.ru_stime - cpu0) / ops * 1e9}\n")
print(ops / dt)
"""


def _child_cpu():
    import resource

    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def parse_variant(spec):
    """LABEL=TREE[,VAR=VALUE...] -> (label, tree, env)."""
    label, _, rest = spec.partition("=")
    tree, *pairs = rest.split(",")
    env = dict(p.split("=", 1) for p in pairs)
    return label, os.path.abspath(tree or HERE), env


def cuda_library():
    """What the --cuda workload loads: the driver where there is one, else a libcufile copy."""
    for p in ("/usr/lib/x86_64-linux-gnu/libcuda.so.1", "/usr/lib64/libcuda.so.1"):
        if os.path.exists(p):
            return p
    if os.environ.get("CUDA_LIB"):
        return os.environ["CUDA_LIB"]
    sys.path.insert(0, HERE)
    from gdsdiag.platform.libcufile import locate

    path = locate().path
    if not path:
        raise SystemExit("--cuda: no libcuda.so.1 and no libcufile here (set CUDA_LIB=PATH)")
    return path


def run(cmd, tree=HERE, extra_env=None):
    """(result, stdout lines); run.cpu holds the CPU seconds the command and its descendants used."""
    env = {**os.environ, **(extra_env or {}), "PYTHONPATH": tree + os.pathsep + os.environ.get("PYTHONPATH", "")}
    c = _child_cpu()
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tree)
    run.cpu = _child_cpu() - c
    lines = [ln for ln in r.stdout.splitlines() if ln.strip()]
    if not lines:
        raise SystemExit(f"workload failed: {r.stderr.strip()[-400:]}")
    return r, lines


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def accounted(summ, path, ios):
    """I/Os on the benchmark file in the trace: per-I/O lines plus the kernel's counters."""
    n = sum(1 for v in ios if v.get("path") == path)
    return n + sum(r["count"] for r in summ.get("host_io_counted", []) if r["path"] == path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["posix", "cufile"])
    ap.add_argument("--ops", type=int, default=None)
    ap.add_argument("--bs", type=int, default=65536, help="pread size (posix)")
    ap.add_argument("--rate", type=float, default=0, help="pace the workload at this many ops/s (posix)")
    ap.add_argument("--per-io", action="store_true", help="trace with --per-io (every I/O to Python)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--dir", default="/var/tmp")
    ap.add_argument(
        "--cuda",
        action="store_true",
        help="the workload loads a CUDA library first (libcuda.so.1 and cuInit where it exists, else the "
        "libcufile gdsdiag finds or $CUDA_LIB): its I/O is sent one by one, as for any CUDA process",
    )
    ap.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="LABEL=TREE[,VAR=VALUE...]",
        help="trace with this tree and environment (repeatable; each round runs untraced, then every "
        "variant in turn, so old and new share the machine's state); default: this tree as is",
    )
    ap.add_argument(
        "--cpus",
        metavar="W,T",
        help="pin the workload to CPU W and the tracer to CPU T (taskset), untraced runs too: on a "
        "shared VM the spread between rounds is otherwise larger than the effect measured",
    )
    a = ap.parse_args()
    if a.cpus and (len(a.cpus.split(",")) != 2 or not shutil.which("taskset")):
        raise SystemExit("--cpus takes two CPU numbers, W,T, and needs taskset (util-linux)")
    ops = a.ops or (400_000 if a.mode == "posix" else 50_000)
    flags = ["--per-io"] if a.per_io else []
    variants = [parse_variant(v) for v in a.variant] or [("new", HERE, {})]
    if a.cuda:
        os.environ["WL_CUDA"] = cuda_library()
    with tempfile.TemporaryDirectory(dir=a.dir) as d:
        path = os.path.join(d, "bench.dat")
        with open(path, "wb") as f:
            f.write(os.urandom(64 << 20))
        wl = os.path.join(d, "wl.py")
        with open(wl, "w") as f:
            f.write(WORKLOAD)
        res_path = os.path.join(d, "rate.txt")
        wcmd = [sys.executable, wl, a.mode, path, str(ops), str(a.bs), str(a.rate), res_path]
        if a.cpus:
            wcmd = ["taskset", "-c", a.cpus.split(",")[0], *wcmd]

        def rate_of_run():
            try:
                with open(res_path) as f:
                    rate, cpu_ns = map(float, f.read().split())
                    rate_of_run.cpu_ns = cpu_ns
                    return rate
            except (OSError, ValueError):
                return None
            finally:
                if os.path.exists(res_path):
                    os.unlink(res_path)

        rounds = []
        fixed = {}
        # under `timeout` (the GPU scripts): a TERM ends the rounds, and what was measured is printed
        signal.signal(signal.SIGTERM, _interrupt)
        try:
            measure(a, variants, flags, wcmd, path, ops, rate_of_run, rounds, fixed)
        except KeyboardInterrupt:
            rounds.append({"stopped": "SIGTERM or Ctrl-C before the rounds were done"})
        report(a, variants, ops, rounds, fixed)


def measure(a, variants, flags, wcmd, path, ops, rate_of_run, rounds, fixed):
    tracer = ["taskset", "-c", a.cpus.split(",")[1]] if a.cpus else []  # (its child re-pins to W)
    for label, tree, env in variants:
        # the tracer's fixed cost (compile, attach, a trivial program), per variant (also fills
        # its compiled-program cache)
        run([*tracer, sys.executable, "-m", "gdsdiag", "trace", "--json", *flags, "--", "/bin/true"], tree, env)
        fixed[label] = run.cpu
    for k in range(a.rounds):
        r, out = run(wcmd)
        base, base_cpu = rate_of_run(), run.cpu
        base_ns = rate_of_run.cpu_ns
        # (each round starts with the next variant: none is always the one a timeout cuts)
        for label, tree, env in variants[k % len(variants) :] + variants[: k % len(variants)]:
            t0 = time.monotonic()
            r, out = run([*tracer, sys.executable, "-m", "gdsdiag", "trace", "--json", *flags, "--", *wcmd], tree, env)
            wall = time.monotonic() - t0
            traced_cpu = run.cpu
            rate = rate_of_run()
            summ = next((json.loads(x) for x in reversed(out) if x.startswith('{"type": "summary"')), None)
            if rate is None or summ is None:  # the traced run failed: say how, keep the other rounds
                rounds.append({"variant": label, "failed": f"rc {r.returncode}: {r.stderr.strip()[-300:]}"})
                continue
            # (the workload prints its own line into the same pipe: where it lands inside one of the
            # trace's writes it tears that JSON line, which is counted, not parsed)
            ios, torn = [], 0
            for x in out:
                if x.startswith('{"type": "io"'):
                    try:
                        ios.append(json.loads(x))
                    except ValueError:
                        torn += 1
            extra = traced_cpu - base_cpu - fixed[label]
            events = summ["events"]
            rounds.append(
                {
                    "variant": label,
                    "untraced_ops_s": round(base),
                    "traced_ops_s": round(rate),
                    "ratio": round(rate / base, 3),
                    # the workload's own CPU per op, untraced / traced: what the probes add to
                    # each syscall, whatever else the machine runs
                    "cpu_ns_per_op": [round(base_ns), round(rate_of_run.cpu_ns)],
                    "cpu_ratio": round(base_ns / rate_of_run.cpu_ns, 3),
                    "events": events,
                    "events_per_s": round(events / (ops / rate)) if rate else None,
                    "lost_events": summ["lost_events"],
                    "ios_accounted": accounted(summ, path, ios),
                    "torn_lines": torn,
                    "counted_in_kernel": summ.get("ios_counted_in_kernel", 0),
                    "tracer_cpu_s": round(extra, 2),
                    "tracer_cpu_us_per_event": round(extra / max(events, 1) * 1e6, 2),
                    "tracer_cpu_us_per_io": round(extra / ops * 1e6, 3),
                    "traced_wall_s": round(wall, 1),
                    "startup_s": summ.get("startup_s"),
                }
            )
            print(json.dumps(rounds[-1]), file=sys.stderr, flush=True)


def report(a, variants, ops, rounds, fixed):
    medians = {}
    for label, _, _ in variants:
        ratios = sorted(x["ratio"] for x in rounds if x.get("variant") == label and "ratio" in x) or [0.0]
        cr = sorted(x["cpu_ratio"] for x in rounds if x.get("variant") == label and "cpu_ratio" in x) or [0.0]
        medians[label] = {
            "median_cpu_ratio": cr[len(cr) // 2],
            "median_ratio": ratios[len(ratios) // 2],
            "median_loss_pct": round(100 * (1 - ratios[len(ratios) // 2]), 2),
            "lost_events": [x.get("lost_events") for x in rounds if x.get("variant") == label],
        }
    print(
        json.dumps(
            {
                "machine": f"{platform.node()} {os.cpu_count()} CPUs, kernel {platform.release()}, "
                f"Python {platform.python_version()}, load {os.getloadavg()[0]:.2f}",
                "mode": a.mode,
                "bs": a.bs,
                "ops": ops,
                "rate_asked": a.rate or None,
                "per_io": a.per_io,
                "cuda_loaded": os.environ.get("WL_CUDA"),
                "cpus": dict(zip(("workload", "tracer"), map(int, a.cpus.split(",")))) if a.cpus else None,
                "variants": {label: {"tree": tree, "env": env} for label, tree, env in variants},
                "tracer_fixed_cpu_s": {k: round(v, 2) for k, v in fixed.items()},
                "median": medians,
                "median_loss_pct": next(iter(medians.values()))["median_loss_pct"],
                "rounds": rounds,
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
