"""A gdsdiag.sweep/1 document rebuilt from the GPU machine's real sweep CSV
(fixtures/gpu-machine/sweep-h200.csv: H200 VM, virtio ext4, libcufile 1.15.1.6 in compat mode).
The CSV carries every field the sweep JSON's points have that kv/validate read (mode, rw, bs,
threads, GB/s, IOPS, latency percentiles, route, error); nothing is added."""

import csv
import os

HERE = os.path.dirname(os.path.abspath(__file__))
SWEEP_CSV = os.path.join(HERE, "fixtures", "gpu-machine", "sweep-h200.csv")


def _num(v):
    return None if v in ("", None) else float(v)


def h200_sweep_doc() -> dict:
    with open(SWEEP_CSV) as f:
        rows = list(csv.DictReader(line for line in f if not line.startswith("#")))
    points = []
    for r in rows:
        points.append(
            {
                "mode": r["mode"],
                "rw": r["rw"],
                "bs": int(r["bs"]),
                "threads": int(r["threads"]),
                "summary": {
                    "gbps": _num(r["gbps"]),
                    "iops": _num(r["iops"]),
                    "lat_us": {
                        "p50": _num(r["p50_us"]),
                        "p90": _num(r["p90_us"]),
                        "p99": _num(r["p99_us"]),
                        "p99.9": _num(r["p99.9_us"]),
                    },
                },
                "cpu_percent": _num(r["cpu_percent"]),
                "route": r["route"],
                "verified_bytes": int(r["verified_bytes"] or 0),
                "ratio": _num(r["ratio"]),
                "error": r["error"] or None,
                "route_detail": {},
                "ceilings": {},
            }
        )
    return {
        "schema": "gdsdiag.sweep/1",
        "machine": {"hostname": "h200-vm"},
        "config": {"dir": "/var/tmp/sw", "gpu": 0, "modes": sorted({p["mode"] for p in points})},
        "ceilings": {},
        "points": points,
    }
