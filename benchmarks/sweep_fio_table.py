"""Print the gdsdiag-vs-fio rows of `gdsdiag sweep --compare-fio --json` documents (files or stdin)."""

import json
import sys


def rows(doc, label):
    for p in doc["points"]:
        f = p.get("fio") or {}
        head = f"{label:8s} {p['rw']:9s} bs={p['bs']:>8} thr={p['threads']:>2} qd={p['iodepth']:>2}"
        if p["error"] or f.get("error"):
            yield f"{head}: {p['error'] or f['error']}"
            continue
        s = p["summary"]
        yield (
            f"{head}: gdsdiag {s['iops']:>9.0f} IOPS {s['gbps']:6.3f} GB/s | fio {f['iops']:>9.0f} IOPS {f['gbps']:6.3f} GB/s "
            f"(before/after {[r['gbps'] for r in f.get('runs', [])]}) | x{f['ratio']:.3f}"
        )


if __name__ == "__main__":
    label = sys.argv[1]
    paths = sys.argv[2:] or ["-"]
    for path in paths:
        doc = json.load(sys.stdin if path == "-" else open(path))
        for line in rows(doc, label):
            print(line)
