#!/usr/bin/env python3
"""Fork-following under load: a parent starts N short-lived children at RATE per second, each
writes 4 KiB at its own offset of a file it opens and exits; gdsdiag trace must report N writes from
N distinct processes, and lose nothing.

  sudo python3 benchmarks/trace_forks.py [--n 2000] [--rate 1000]"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORKLOAD = r"""
import os, sys, time
path, n, rate = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
t0 = time.perf_counter()
for i in range(n):
    pid = os.fork()
    if pid == 0:
        fd = os.open(path, os.O_WRONLY)
        os.pwrite(fd, b"f" * 4096, i * 4096)
        os._exit(0)
    os.waitpid(pid, 0)
    delay = t0 + (i + 1) / rate - time.perf_counter()
    if delay > 0:
        time.sleep(delay)
print(n / (time.perf_counter() - t0))
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--rate", type=float, default=1000)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(dir="/var/tmp") as d:
        path = os.path.join(d, "forks.dat")
        with open(path, "wb") as f:
            f.truncate(a.n * 4096)
        wl = os.path.join(d, "wl.py")
        with open(wl, "w") as f:
            f.write(WORKLOAD)
        env = {**os.environ, "PYTHONPATH": HERE + os.pathsep + os.environ.get("PYTHONPATH", "")}
        r = subprocess.run(
            [
                sys.executable,
                "-m",
                "gdsdiag",
                "trace",
                "--json",
                "--path",
                d,
                "--",
                "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable,
                wl,
                path,
                str(a.n),
                str(a.rate),
            ],
            capture_output=True,
            text=True,
            env=env,
        )
        lines = r.stdout.splitlines()
        ios = [json.loads(x) for x in lines if x.startswith('{"type": "io"')]
        summ = json.loads(next(x for x in reversed(lines) if x.startswith('{"type": "summary"')))
        rate = next(float(x) for x in lines if not x.startswith("{"))
        mine = [v for v in ios if v["path"] == path]
        print(
            json.dumps(
                {
                    "children": a.n,
                    "achieved_starts_per_s": round(rate),
                    "writes_reported": len(mine),
                    "distinct_pids": len({v["pid"] for v in mine}),
                    "offsets_exact": sorted(v["offset"] for v in mine) == [i * 4096 for i in range(a.n)],
                    "lost_events": summ["lost_events"],
                    "events": summ["events"],
                },
                indent=1,
            )
        )


if __name__ == "__main__":
    main()
