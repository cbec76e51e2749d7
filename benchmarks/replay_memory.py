"""Peak memory and wall time of `gdsdiag trace --replay` on a generated recording, for each tree.

    python3 benchmarks/replay_memory.py --ios 990000 --tree /tmp/old --tree .

The recording has the GPU machine's bounce shape (tests/test_trace_replay_stream.py): a 4 KiB pread
of a cached file, then a host-to-device cuMemcpy of its buffer, two events per I/O. Each tree's
gdsdiag runs as its own process (`python3 -m gdsdiag` from that tree); the peak RSS is that
process's own (wait4), not the largest of this script's children."""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
import time


def write_recording(path: str, ios: int) -> None:
    header = {"gdsdiag_trace_record": 3, "kernel": "generated", "probes_attached": [], "probes_not_attached": []}
    with gzip.open(path, "wt", compresslevel=1) as f:
        f.write(json.dumps(header) + "\n")
        ts, buf = 1_000_000_000, 0x7F0000000000
        f.write(json.dumps([ts, 700, 700, "open", "openat", [5, 0, 0, 1, 1, -100, 1], "python3", "/data/w.bin"]) + "\n")
        for i in range(ios):
            ts += 2000
            f.write(
                json.dumps(
                    [ts, 700, 700, "sys_exit", "pread64", [5, buf, 4096, i * 4096, 4096, 4096, 900], "python3", None]
                )
                + "\n"
            )
            ts += 1000
            f.write(
                json.dumps(
                    [ts, 700, 700, "api_enter", "cuMemcpy", [0x7F8000000000 + i * 4096, buf, 4096, 1], "python3", None]
                )
                + "\n"
            )


def run(tree: str, rec: str) -> dict:
    t0 = time.monotonic()
    with open(os.devnull, "w") as out:
        p = subprocess.Popen(
            [sys.executable, "-m", "gdsdiag", "trace", "--replay", rec, "--json"], cwd=tree, stdout=out
        )
        _, status, usage = os.wait4(p.pid, 0)
    return {
        "tree": tree,
        "rc": os.waitstatus_to_exitcode(status),
        "wall_s": round(time.monotonic() - t0, 2),
        "peak_rss_mb": round(usage.ru_maxrss / 1024, 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ios", type=int, default=990_000)
    ap.add_argument("--tree", action="append", default=[])
    ap.add_argument("--rounds", type=int, default=1)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        rec = os.path.join(d, "rec.jsonl.gz")
        write_recording(rec, a.ios)
        rows = [run(t, rec) for _ in range(a.rounds) for t in (a.tree or ["."])]
    print(json.dumps({"ios": a.ios, "events": 2 * a.ios + 1, "load": os.getloadavg()[0], "runs": rows}, indent=1))


if __name__ == "__main__":
    main()
