"""Run one benchmark command and append one JSON line: its label, its output (JSON when it printed
JSON), wall time, the block device's own counters over the run, and optionally a look at its
processes part-way through (threads per process, and the GPU's list of compute processes).

    python3 benchmarks/history/sweep_diag_run.py OUT.jsonl LABEL [--dev vda] [--sample-at 1.0] -- CMD...
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time


def devstat(dev: str) -> list[int] | None:
    try:
        with open(f"/sys/block/{dev}/stat") as f:
            return [int(v) for v in f.read().split()[:11]]
    except OSError:
        return None


def descendants(pid: int) -> list[int]:
    kids: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        kids.setdefault(ppid, []).append(int(name))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(kids.get(p, []))
    return out


def sample(pid: int) -> dict:
    procs = []
    for p in descendants(pid):
        try:
            with open(f"/proc/{p}/comm") as f:
                comm = f.read().strip()
            threads = len(os.listdir(f"/proc/{p}/task"))
            with open(f"/proc/{p}/status") as f:
                ctx = {
                    k: int(v) for k, v in (ln.split(":") for ln in f if ln.startswith(("voluntary", "nonvoluntary")))
                }
        except OSError:
            continue
        procs.append({"pid": p, "comm": comm, "threads": threads, **ctx})
    smi = None
    try:
        r = subprocess.run(
            ["nvidia-smi", "--query-compute-apps=pid,process_name,used_memory", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=10,
        )
        smi = r.stdout.strip().splitlines()
    except (OSError, subprocess.SubprocessError):
        pass
    return {"processes": procs, "gpu_compute_apps": smi}


def main() -> None:
    argv = sys.argv[1:]
    if "--" not in argv:
        sys.exit("usage: sweep_diag_run.py OUT.jsonl LABEL [--dev vda] [--sample-at S] -- CMD...")
    cut = argv.index("--")
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("label")
    ap.add_argument("--dev", default="vda")
    ap.add_argument("--sample-at", type=float, default=None)
    a = ap.parse_args(argv[:cut])
    cmd = argv[cut + 1 :]
    d0 = devstat(a.dev)
    t0 = time.time()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen = None
    if a.sample_at is not None:
        try:
            p.wait(a.sample_at)
        except subprocess.TimeoutExpired:
            seen = sample(p.pid)
    out, err = p.communicate()
    wall = time.time() - t0
    d1 = devstat(a.dev)
    rec: dict = {
        "label": a.label,
        "cmd": " ".join(cmd),
        "rc": p.returncode,
        "wall_s": round(wall, 3),
        "t": round(t0, 3),
    }
    if d0 and d1:
        d = [b - x for x, b in zip(d0, d1)]
        rec["dev"] = {"reads": d[0], "read_sectors": d[2], "read_ms": d[3], "io_ticks_ms": d[9], "queue_ms": d[10]}
    try:
        start = out.find("{")
        rec["out"] = json.loads(out[start:]) if start >= 0 else out[-2000:]
    except ValueError:
        rec["out"] = [json.loads(ln) for ln in out.splitlines() if ln.startswith("{")] or out[-2000:]
    if err.strip():
        rec["stderr"] = err[-3000:]
    if seen is not None:
        rec["sample"] = seen
    with open(a.out, "a") as f:
        f.write(json.dumps(rec) + "\n")
    summary = rec.get("out")
    if isinstance(summary, dict) and isinstance(summary.get("jobs"), list):
        js = summary["jobs"]
        side = "read"
        brief = [round(j[side]["iops"]) for j in js]
        print(f"{a.label}: fio iops per job {brief} sum {sum(brief)}")
    elif isinstance(summary, dict):
        print(f"{a.label}: {json.dumps(summary)[:300]}")
    else:
        print(f"{a.label}: rc {p.returncode} {str(summary)[:300]}")


if __name__ == "__main__":
    main()
