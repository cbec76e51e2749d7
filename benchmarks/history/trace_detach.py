#!/usr/bin/env python3
"""How long detaching the trace's probes takes, per checkout, in a fresh process each time.

  sudo python3 benchmarks/history/trace_detach.py [--rounds 3] [--tree DIR ...] [--fire]

For each --tree (default: this checkout; e.g. the code before the change: git worktree add /tmp/old
445cc82) it attaches the probes as a trace of this process would (the libcufile the bindings find,
libcuda where installed; compiled program from the cache after a warm-up), then times
``Probes.close()``; with this checkout also with ``GDSDIAG_UPROBE_MULTI=0`` (perf-event uprobes).
--fire calls cuFileGetVersion/cuFileDriverOpen first, so the uprobes have run (their release then
has more to wait for). Prints one JSON line per run and the medians."""

import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the checkout


def pythonpath(tree: str) -> str:
    """TREE first, then what the environment had (the GPU machine's kit puts bcc there)."""
    return os.pathsep.join(x for x in (tree, os.environ.get("PYTHONPATH", "")) if x)


CHILD = r"""
import ctypes, json, os, sys, time
from gdsdiag.platform.libcufile import locate
from gdsdiag.trace.probes.bpf import Probes
lib = locate().path
t = time.monotonic()
p = Probes([lib] if lib else [], [os.getpid()], trace_all=False)
setup = time.monotonic() - t
b = p.b
n = {"uprobe_multi_links": len(p._um.links) if getattr(p, "_um", None) else 0,
     "perf_uprobes": len(b.uprobe_fds), "tracepoints": len(b.tracepoint_fds)}
if sys.argv[1] == "1" and lib:
    cf = ctypes.CDLL(lib); v = ctypes.c_int(); cf.cuFileGetVersion(ctypes.byref(v)); cf.cuFileDriverOpen()
t = time.monotonic()
p.close()
print(json.dumps({**n, "setup_s": round(setup, 3), "close_s": round(time.monotonic() - t, 3)}))
"""


def run(tree: str, fire: bool, env: dict) -> dict:
    r = subprocess.run(
        [sys.executable, "-c", CHILD, "1" if fire else "0"],
        capture_output=True,
        text=True,
        cwd=tree,
        env={**os.environ, "PYTHONPATH": pythonpath(tree), **env},
        timeout=300,
    )
    line = next((x for x in r.stdout.splitlines() if x.startswith("{")), None)
    if line is None:
        raise SystemExit(f"{tree}: {r.stderr.strip()[-400:]}")
    return json.loads(line)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--tree", action="append")
    ap.add_argument("--fire", action="store_true")
    a = ap.parse_args()
    cases = []
    for tree in [os.path.abspath(t) for t in (a.tree or [HERE])]:
        cases.append((tree, {}))
        if os.path.exists(os.path.join(tree, "gdsdiag", "trace", "uprobemulti.py")):
            cases.append((tree, {"GDSDIAG_UPROBE_MULTI": "0"}))
    out = {"machine": os.uname().nodename, "kernel": os.uname().release, "nproc": os.cpu_count(), "cases": []}
    for tree, env in cases:
        run(tree, a.fire, env)  # warm-up: the compiled-program cache
        rs = [run(tree, a.fire, env) for _ in range(a.rounds)]
        for r in rs:
            print(json.dumps({"tree": tree, **env, **r}), file=sys.stderr)
        med = {k: statistics.median(r[k] for r in rs) for k in ("setup_s", "close_s")}
        out["cases"].append(
            {"tree": tree, "env": env, **{k: rs[0][k] for k in rs[0] if k.endswith(("s", "links"))}, **med}
        )
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
