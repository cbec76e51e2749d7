"""python3 -m tests.fuzz [--inputs N | --seconds S] [--only a,b] [--seed N] [--keep DIR] [--json FILE]

From the checkout this fuzzes the checkout's gdsdiag; against an installed one, run it from
elsewhere with the tests directory on the path: ``cd /tmp && PYTHONPATH=CHECKOUT/tests python3 -m
fuzz``. The first line printed names the gdsdiag that ran.

Long mode (the default: 10,000 inputs per target) before an issue about hostile input is
resolved; every target's counts are printed and, with --json, written. Exit 1 when any input
crashed, hung or needed more than 1 GiB."""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import asdict

from .runner import run
from .targets import TARGETS


def main() -> int:
    ap = argparse.ArgumentParser(prog="python3 -m tests.fuzz")
    ap.add_argument("--inputs", type=int, default=None, help="inputs per target (default 10000)")
    ap.add_argument("--seconds", type=float, default=None, help="seconds per target instead of a count")
    ap.add_argument("--only", default="", help="comma-separated target names")
    ap.add_argument("--seed", type=int, default=24)
    ap.add_argument("--timeout", type=float, default=10.0, help="seconds before an input counts as a hang")
    ap.add_argument("--keep", default=None, help="save the first input of each distinct problem here")
    ap.add_argument("--json", dest="json_path", default=None)
    ap.add_argument("--list", action="store_true")
    a = ap.parse_args()
    if a.list:
        print("\n".join(t.name for t in TARGETS))
        return 0
    import gdsdiag

    print(f"gdsdiag {gdsdiag.__version__} from {os.path.dirname(gdsdiag.__file__)}", flush=True)
    names = {n for n in a.only.split(",") if n}
    targets = [t for t in TARGETS if not names or t.name in names]
    per = a.inputs if a.inputs is not None or a.seconds is not None else 10_000
    res = run(targets, per, a.seconds, a.seed, a.timeout, a.keep)
    if a.json_path:
        with open(a.json_path, "w") as f:
            json.dump({k: asdict(v) for k, v in res.items()}, f, indent=2)
    bad = sum(c.crashes + c.hangs + c.over_1gib for c in res.values())
    print(f"total: {sum(c.inputs for c in res.values()):,} inputs, {bad} problems")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
