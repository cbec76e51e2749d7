#!/usr/bin/env python3
"""Time the whole `gdsdiag check` process on this node (live root), best of N, with the conditions
it ran under (benchmarks/conditions.py). Goal (issue 11): < 0.5 s.

    python3 benchmarks/check_live.py [--runs 10] [--args "check --json"] [--code CHECKOUT]
"""

import argparse
import json
import os
import resource
import shlex
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from conditions import child_env, describe, load  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--args", default="check", help="the gdsdiag command line to time (default: check)")
    ap.add_argument(
        "--code",
        default=os.path.join(HERE, ".."),
        help="the gdsdiag checkout to time (default: this one); another commit's tree, for before/after figures",
    )
    args = ap.parse_args()
    cond = describe()
    with tempfile.TemporaryDirectory() as pycache, tempfile.TemporaryDirectory() as cwd:
        env = child_env(pycache)
        env["PYTHONPATH"] = os.path.abspath(args.code)  # the checkout under test, whatever the cwd
        argv = [sys.executable, "-m", "gdsdiag", *shlex.split(args.args)]
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=cwd)  # warm-up
        walls, cpus = [], []
        for _ in range(args.runs):
            t0, r0 = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
            rc = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=cwd).returncode
            r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            walls.append(time.perf_counter() - t0)
            cpus.append(r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime)
    walls.sort()
    print(
        json.dumps(
            {
                "command": "gdsdiag " + args.args,
                "code": os.path.abspath(args.code),
                "exit_code": rc,
                "best_s": round(walls[0], 3),
                "median_s": round(walls[len(walls) // 2], 3),
                "best_cpu_s": round(min(cpus), 3),
                "goal_s": 0.5,
                **cond,
                "load_average_after": load(),
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
