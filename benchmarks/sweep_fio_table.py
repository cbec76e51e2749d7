"""Print the gdsdiag-vs-fio rows of `gdsdiag sweep --compare-fio --json` documents (files or stdin)."""

import json
import sys


def rows(doc, label):
    for p in doc["points"]:
        f = p.get("fio") or {}
        head = f"{label:8s} {p['mode']:12s} {p['rw']:9s} bs={p['bs']:>8} thr={p['threads']:>2} qd={p['iodepth']:>2}"
        if p["error"]:
            yield f"{head}: {p['error']}"
            continue
        s = p["summary"]
        if not f or f.get("error"):
            why = f.get("error") if f else "no fio run"
            yield f"{head}: gdsdiag {s['iops']:>9.0f} IOPS {s['gbps']:6.3f} GB/s p50 {s['lat_us']['p50']} us | fio: {why}"
            continue
        by = f.get("by_jobs") or {f.get("jobs", "thread"): f}  # documents before --fio-jobs: --thread runs
        for kind, one in by.items():
            if one.get("error"):
                yield f"{head}: fio {kind}: {one['error']}"
                continue
            yield (
                f"{head}: gdsdiag {s['iops']:>9.0f} IOPS {s['gbps']:6.3f} GB/s | fio {kind} {one['iops']:>9.0f} IOPS "
                f"{one['gbps']:6.3f} GB/s (before/after {[r['gbps'] for r in one.get('runs', [])]}) | x{one['ratio']:.3f}"
                f" | p50 {s['lat_us']['p50']} us vs fio clat p50 {[(r.get('clat_us') or {}).get('p50') for r in one.get('runs', [])]}"
            )


if __name__ == "__main__":
    label = sys.argv[1]
    paths = sys.argv[2:] or ["-"]
    for path in paths:
        doc = json.load(sys.stdin if path == "-" else open(path))
        for line in rows(doc, label):
            print(line)
