#!/usr/bin/env python3
"""Exact totals under load (issue 43 goal 5): 4 KiB page-cache reads as fast as they go, under
'gdsdiag trace --json', with the machine otherwise busy; the trace's totals against the program's own.

  sudo python3 benchmarks/trace_exact.py [--reads 3000000] [--threads 1] [--burners 2]
      [--mode pread|read] [--cuda] [--per-io] [--tree LABEL=DIR ...] [--rounds 1]

The program (benchmarks/exact_reader.c, built here) prints its own count of reads and bytes. Each
round runs it untraced, then traced by each --tree (a gdsdiag checkout: old and new code in the same
run, default this one), and reports its reads/s both ways, and what the trace's summary holds for
its file and its process (ios, bytes) and how many of its reads are unaccounted there (not in its
file's row). --cuda makes it load libcufile first, so the trace sends its reads one by one (the
per-I/O path, which can overflow); --burners N busy-loop processes keep the CPUs otherwise busy."""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def build(tmp):
    exe = os.path.join(tmp, "exact_reader")
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        raise SystemExit("trace_exact: no C compiler (cc/gcc) to build benchmarks/exact_reader.c")
    subprocess.run(
        [cc, "-O2", "-pthread", "-o", exe, os.path.join(HERE, "benchmarks", "exact_reader.c"), "-ldl"], check=True
    )
    return exe


def truth(stderr):
    for line in stderr.splitlines():
        if line.startswith('{"truth_reads"'):
            return json.loads(line)
    raise SystemExit(f"trace_exact: the reader printed no count: {stderr[-500:]}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reads", type=int, default=3_000_000)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--burners", type=int, default=2)
    ap.add_argument("--mode", choices=["pread", "read"], default="pread")
    ap.add_argument("--cuda", action="store_true", help="the reader loads libcufile first (per-I/O records)")
    ap.add_argument("--per-io", action="store_true")
    ap.add_argument("--tree", action="append", default=[], help="LABEL=DIR: a gdsdiag checkout to trace with")
    ap.add_argument("--rounds", type=int, default=1)
    a = ap.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("trace_exact: needs root (gdsdiag trace)")
    trees = [t.split("=", 1) for t in a.tree] or [["this", HERE]]
    lib = ""
    if a.cuda:
        sys.path.insert(0, HERE)
        from gdsdiag.platform.libcufile import locate

        lib = locate().path or ""
        if not lib:
            raise SystemExit("trace_exact: --cuda: no libcufile here")
    tmp = tempfile.mkdtemp(prefix="trace-exact-", dir="/var/tmp")
    burners = []
    try:
        exe = build(tmp)
        data = os.path.join(tmp, "data.bin")
        with open(data, "wb") as f:
            f.write(os.urandom(64 << 20))
        with open(data, "rb") as f:
            while f.read(1 << 20):  # (cached)
                pass
        args = [data, str(a.reads), str(a.threads), a.mode, lib]
        burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(a.burners)]
        for rnd in range(a.rounds):
            t = truth(subprocess.run([exe, *args], capture_output=True, text=True).stderr)
            print(json.dumps({"round": rnd, "run": "untraced", "reads_per_s": t["reads_per_s"]}), flush=True)
            for label, tree in trees:
                out = os.path.join(tmp, f"trace-{rnd}-{label}.json")
                env = {**os.environ, "PYTHONPATH": tree}
                cmd = [sys.executable, "-m", "gdsdiag", "trace", "--json", "-o", out]
                r = subprocess.run(
                    cmd + (["--per-io"] if a.per_io else []) + ["--", exe, *args],
                    capture_output=True,
                    text=True,
                    env=env,
                    cwd=tmp,
                )
                t = truth(r.stderr)
                s = json.loads(open(out).read().splitlines()[-1])
                f = next((x for x in s["files"] if x["path"] == data), {"ios": 0, "bytes": 0})
                p = next((x for x in s["processes"] if x["comm"] == "exact_reader"), {"ios": 0})
                print(
                    json.dumps(
                        {
                            "round": rnd,
                            "run": f"traced {label}",
                            "reads_per_s": t["reads_per_s"],
                            "truth_reads": t["truth_reads"],
                            "truth_bytes": t["truth_bytes"],
                            "file_ios": f["ios"],
                            "file_bytes": f["bytes"],
                            "process_ios": p["ios"],
                            "unaccounted_reads": t["truth_reads"] - f["ios"],
                            "file_lost_in_kernel": f.get("lost_in_kernel"),
                            "ios_lost_in_kernel": s["ios_lost_in_kernel"],
                            "lost_events": s["lost_events"],
                            "end_s": s["startup_s"].get("end_s"),
                            "exit": r.returncode,
                        }
                    ),
                    flush=True,
                )
                os.unlink(out)
    finally:
        for b in burners:
            b.kill()
            b.wait()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
