"""Medians over rounds of `gdsdiag sweep --compare-fio --json` documents: one row per point (the
sweep's workers, mode, rw, bs, threads, iodepth), the sweep's median GB/s and IOPS, and its ratio to
fio's forked jobs and to fio --thread — each round's ratio and the median; ``*`` marks the like-for-like
kind (process workers against forked fio, threads against --thread) — with the block device's time
per request for the sweep and for fio (the storage's own share), and last the like-for-like ratio
against fio's rate while all its jobs ran (``fio.all_running``: points with threads > 1).

    python3 benchmarks/sweep_goal_table.py r1-host.json r2-host.json ... [--goal 0.97]
"""

from __future__ import annotations

import json
import statistics
import sys
from collections import defaultdict


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    goal = 0.97
    if "--goal" in sys.argv:
        goal = float(sys.argv[sys.argv.index("--goal") + 1])
        args.remove(str(sys.argv[sys.argv.index("--goal") + 1]))
    rows: dict = defaultdict(
        lambda: {"gbps": [], "iops": [], "process": [], "thread": [], "dev": [], "fio_dev": [], "all": []}
    )
    for path in args:
        try:
            doc = json.load(open(path))
        except (OSError, ValueError) as e:
            print(f"{path}: not read ({e})")
            continue
        for p in doc["points"]:
            workers = doc["config"].get("workers", "thread")
            key = (workers, p["mode"], p["rw"], p["bs"], p["threads"], p["iodepth"])
            r = rows[key]
            if p["error"]:
                r.setdefault("errors", []).append(p["error"][:100])
                continue
            r["gbps"].append(p["summary"]["gbps"])
            r["iops"].append(p["summary"]["iops"])
            dev = p["route_detail"].get("block_device") or {}
            r["dev"].append(dev.get("request_ms"))
            f = p.get("fio") or {}
            by = f.get("by_jobs") or ({f["jobs"]: f} if f.get("jobs") else {})
            for kind, one in by.items():
                if one.get("ratio") is not None:
                    r[kind].append(one["ratio"])
                if kind == workers and (one.get("all_running") or {}).get("ratio") is not None:
                    r["all"].append(one["all_running"]["ratio"])  # fio while all its jobs ran (sweep/fio.py)
                for run in one.get("runs", []):
                    r["fio_dev"].append((run.get("block_device") or {}).get("request_ms"))
    worst = worst_all = None
    print(
        f"{'point':34s} {'GB/s':>7s} {'IOPS':>8s}  {'÷fio forked (rounds) median':36s} {'÷fio --thread (rounds) median':36s} dev ms/req sweep|fio  ÷fio* while all its jobs ran"
    )
    for (workers, mode, rw, bs, th, qd), r in sorted(rows.items()):
        name = f"{workers[:4]} {mode} {rw} {bs // 1024}k x{th}" + (f" qd{qd}" if qd > 1 else "")
        if not r["gbps"]:
            print(f"{name:34s} ERROR {r.get('errors')}")
            continue
        cells = []
        for kind in ("process", "thread"):
            v = r[kind]
            if not v:
                cells.append(f"{'-':36s}")
                continue
            med = statistics.median(v)
            worst = med if worst is None else min(worst, med)
            like = "*" if kind == workers else " "
            cells.append(f"{' '.join(f'{x:.2f}' for x in v):24s} {med:6.3f}{like}{'<' if med < goal else ' '}   ")
        d = [x for x in r["dev"] if x is not None]
        fd = [x for x in r["fio_dev"] if x is not None]
        devs = f"{statistics.median(d):.3f}|{statistics.median(fd):.3f}" if d and fd else "-"
        both = ""
        if r["all"]:
            m = statistics.median(r["all"])
            worst_all = m if worst_all is None else min(worst_all, m)
            both = f"  {' '.join(f'{x:.2f}' for x in r['all'])} {m:6.3f}{'<' if m < goal else ''}"
        print(
            f"{name:34s} {statistics.median(r['gbps']):7.3f} {statistics.median(r['iops']):8.0f}  {cells[0]} {cells[1]} {devs}"
            + both
            + (f"  errors: {r['errors']}" if r.get("errors") else "")
        )
    if worst is not None:
        print(f"lowest median ratio: {worst:.3f} (goal {goal}); * like for like, < below the goal")
    if worst_all is not None:
        print(f"lowest median like-for-like ratio against fio while all its jobs ran: {worst_all:.3f}")


if __name__ == "__main__":
    main()
