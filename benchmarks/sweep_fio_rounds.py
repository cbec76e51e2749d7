"""Ratios of `gdsdiag sweep --compare-fio --json` documents over repeated rounds, per point and per
tree: the median and the spread of each point's ratio to fio (fio's runs just before and after that
point, on the same file), so a noisy machine's rounds are read together (docs/benchmarks.md, "Sweep
against fio").

    python3 benchmarks/sweep_fio_rounds.py DIR [-v]

DIR holds TAG-rN.json files (TAG: the tree or setting, e.g. old-r1.json, new-r1.json); -v adds each
round's ratio, the sweep's and fio's p50 latency and the point's verify seconds. "in I/O": the
median share of a worker's time inside an I/O, the sweep's and fio's (``busy``), and "at fio's
latency" the median over rounds of their quotient: the ratio the sweep would reach if each of its
I/Os took as long as fio's did (its own cost between I/Os, without the disk's swings)."""

from __future__ import annotations

import glob
import json
import os
import statistics
import sys
from collections import defaultdict

RW_ORDER = ("read", "write", "randread", "randwrite")


def size(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n >> 10} KiB"


def collect(folder: str) -> dict:
    """{(mode, rw, bs, threads, workers): {tag: [point, ...]}} of the points fio ran beside."""
    rows: dict = defaultdict(lambda: defaultdict(list))
    for path in sorted(glob.glob(os.path.join(folder, "*.json"))):
        tag = os.path.basename(path).rsplit("-r", 1)[0]
        try:
            with open(path, encoding="utf-8") as f:
                doc = json.load(f)
        except (OSError, ValueError):
            continue  # a round cut short: no document
        workers = (doc.get("config") or {}).get("workers", "thread")
        for p in doc.get("points") or []:
            key = (p["mode"], p["rw"], p["bs"], p["threads"], workers)
            rows[key][tag].append(p)
    return rows


def busy(p: dict) -> tuple[float | None, float | None]:
    """The share of each worker's time spent inside an I/O, the sweep's and fio's (the mean of its
    runs): IOPS x mean latency / workers. What the loop adds between I/Os (generating, checking,
    its own bookkeeping) lowers it; a slower disk at that moment does not, so it separates the
    sweep's own cost from the shared disk's swings, which move the ratio by ±30 % here."""
    s = p.get("summary") or {}
    th = p["threads"] * p.get("iodepth", 1)
    mine = s["iops"] * s["lat_us"]["mean"] / 1e6 / th if s.get("iops") and s.get("lat_us") else None
    runs = [r for r in (p.get("fio") or {}).get("runs", []) if (r.get("clat_us") or {}).get("mean")]
    theirs = statistics.mean(r["iops"] * r["clat_us"]["mean"] / 1e6 / th for r in runs) if runs else None
    return mine, theirs


def ratio(p: dict) -> float | None:
    f = p.get("fio") or {}
    return None if p.get("error") or f.get("error") else f.get("ratio")


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__.strip().splitlines()[-3], file=sys.stderr)
        return 4
    verbose = "-v" in argv
    rows = collect(argv[0])
    tags = sorted({t for r in rows.values() for t in r})
    print("point | " + " | ".join(f"{t}: median ÷fio [min-max] rounds" for t in tags))
    for key in sorted(rows, key=lambda k: (k[0], RW_ORDER.index(k[1]) if k[1] in RW_ORDER else 9, k[2], k[3], k[4])):
        mode, rw, bs, th, workers = key
        cells = []
        for t in tags:
            pts = rows[key].get(t, [])
            rs = sorted(r for r in map(ratio, pts) if r is not None)
            if not rs:
                cells.append(f"{t}: - ({len(pts)} without a ratio)")
                continue
            cell = f"{t}: {statistics.median(rs):.3f} [{rs[0]:.2f}-{rs[-1]:.2f}] n={len(rs)}"
            b = [busy(p) for p in pts if ratio(p) is not None]
            both = [(x, y) for x, y in b if x is not None and y]
            if both:
                mine = statistics.median(x for x, _ in both)
                theirs = statistics.median(y for _, y in both)
                same_lat = statistics.median(x / y for x, y in both)
                cell += f", in I/O {mine:.1%} vs fio {theirs:.1%} (at fio's latency {same_lat:.3f})"
            if verbose:
                cell += (
                    " ("
                    + ", ".join(
                        f"{ratio(p)}: p50 {p['summary']['lat_us']['p50']} vs fio "
                        f"{[(r.get('clat_us') or {}).get('p50') for r in (p.get('fio') or {}).get('runs', [])]}, "
                        f"verify {p.get('verify_seconds')} s"
                        for p in pts
                        if ratio(p) is not None
                    )
                    + ")"
                )
            cells.append(cell)
        print(f"{mode} {rw} {size(bs)} x{th} {workers} | " + " | ".join(cells))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
