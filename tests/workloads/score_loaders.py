"""Score `gdsdiag trace --json` output against the GROUND_TRUTH line a loader of loaders.py printed.

    python3 tests/workloads/score_loaders.py RUN.jsonl...            # the live trace's own verdicts
    python3 tests/workloads/score_loaders.py --replay RUN.jsonl...   # replay RUN.rec.jsonl.gz with this tree
    python3 tests/workloads/score_loaders.py --replay tests/fixtures/trace/loaders/*.truth   # the committed ones

One row per (run, file): the bytes the program moved to the GPU from that file (its truth), the bytes the
trace put on each route for that file (its io lines and the summary's rows of I/O counted in the kernel), the share on the expected route (capped at 100 %), whether the
file's bytes were counted at most once (sum of its I/O sizes <= its size), and the confidences seen.
Exit 1 when any row is below 100 % or counts a byte twice.
"""

from __future__ import annotations

import collections
import json
import os
import subprocess
import sys


def _lines(text: str):
    for line in text.splitlines():
        if line.startswith("GROUND_TRUTH "):
            yield "truth", json.loads(line.split(" ", 1)[1])
        elif line.startswith("{"):
            try:
                v = json.loads(line)
            except ValueError:
                continue
            yield v.get("type"), v


def score(run: str, replay: bool) -> list[dict]:
    text = open(run).read()
    truth = next((v for k, v in _lines(text) if k == "truth"), None)
    if truth is None:
        return [{"run": os.path.basename(run), "file": "-", "error": "no GROUND_TRUTH line (the loader failed?)"}]
    base = run.rsplit(".", 1)[0]  # RUN.jsonl (a live trace's output) or RUN.truth (the loader's line alone)
    if replay:
        rec = base + ".rec.jsonl.gz"
        text = subprocess.run(
            [sys.executable, "-m", "gdsdiag", "trace", "--replay", rec, "--json"], capture_output=True, text=True
        ).stdout
    ios = [v for k, v in _lines(text) if k == "io"]
    summary = next((v for k, v in _lines(text) if k == "summary"), {})
    rows = []
    for path, t in truth["files"].items():
        mine = [v for v in ios if v.get("path") == path]
        by_route: dict[str, int] = collections.Counter()
        for v in mine:
            by_route[v["route"]] += max(v["size"], 0)
        # the I/O the kernel counted (processes without CUDA: no io line each, no offsets), by route
        counted_rows = [r for r in summary.get("host_io_counted", []) if r.get("path") == path]
        for r in counted_rows:
            by_route[r["route"]] += r["bytes"]
        # bytes counted once: the union of the I/Os' file ranges (a range the program really read twice,
        # a footer or a header, is two I/Os but one set of the file's bytes)
        spans = sorted((v["offset"], v["offset"] + max(v["size"], 0)) for v in mine if v["offset"] >= 0)
        counted, end = sum(max(v["size"], 0) for v in mine if v["offset"] < 0), -1
        for lo, hi in spans:
            if hi > end:
                counted += hi - max(lo, end)
                end = hi
        want = t["to_gpu"]
        good = by_route.get(t["route"], 0)
        rows.append(
            {
                "run": os.path.basename(base),
                "file": os.path.basename(path),
                "expected": t["route"],
                "truth_bytes": want,
                "seen": dict(by_route),
                "share": min(1.0, good / want) if want else 1.0,
                "counted_once": counted <= t["size"],
                "confidence": dict(
                    collections.Counter(v["confidence"] for v in mine)
                    + collections.Counter({"counted in the kernel": sum(r["count"] for r in counted_rows)})
                ),
                "evidence": (mine[0]["evidence"] if mine else []),
            }
        )
    return rows


def main(argv: list[str]) -> int:
    replay = "--replay" in argv
    runs = [a for a in argv if not a.startswith("--")]
    bad = 0
    agg: dict[str, list] = collections.defaultdict(lambda: [0, 0, True, collections.Counter(), set()])
    for run in runs:
        for r in score(run, replay):
            if "error" in r:
                print(f"{r['run']:<18} {r['error']}")
                bad += 1
                continue
            a = agg[r["run"]]
            a[0] += r["truth_bytes"]
            a[1] += int(r["share"] * r["truth_bytes"])
            a[2] = a[2] and r["counted_once"]
            a[3].update(r["confidence"])
            a[4].add(r["expected"])  # (the routes its files' truths name: HOST for bytes that never reached a GPU)
            if r["share"] < 1.0 or not r["counted_once"]:
                bad += 1
                print(
                    f"   {r['run']:<16} {r['file']:<24} want {r['expected']} {r['truth_bytes']} seen {r['seen']} "
                    f"once={r['counted_once']} conf={r['confidence']} e.g. {r['evidence'][:3]}"
                )
    print(
        f"{'workload':<18} {'expected':<12} {'truth bytes':>12} {'right':>7} {'once':>5}  confidence of its I/O lines"
    )
    for run, (want, good, once, conf, routes) in agg.items():
        c = ", ".join(f"{k} {n}" for k, n in sorted(conf.items()))
        expected = "+".join(sorted(routes))
        print(
            f"{run:<18} {expected:<12} {want:>12} {100 * good / max(want, 1):>6.1f}% {'yes' if once else 'NO':>5}  {c}"
        )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
