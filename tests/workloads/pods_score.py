"""Scores tests/workloads/gpu_pods_run.sh: each pod's `gdsdiag trace --json --pod NAME --namespace NS`
against the ground truth its loader wrote (pod_cuda_loader.py). One line per pod, then PASS or FAIL
(exit 0 / 1; 3 where an input is missing or unreadable). Per pod:

- its trace saw its own loader and no process of the other pod (the --pod filter);
- the trace's row for the process and the summary's pod row carry the pod's namespace, name, UID,
  container name and ID as the fixture made them (tests/pods_fixture.py);
- the pod row's bytes are the bytes the loader read (the data file only: the trace's --path);
- its routes: the bytes the loader copied to the GPU are DRAM_BOUNCE (read into host memory, then
  copied: the only route a pread + cudaMemcpy loader can take), the rest HOST; a loader whose CUDA
  part was skipped (dry run) is HOST throughout;
- where the loader copied, the GPU's sum of the bytes equals the host's (every byte arrived).

    python3 pods_score.py DIR      # DIR/pods.json, DIR/truth-<i>.json, DIR/trace-<i>.jsonl
"""

from __future__ import annotations

import json
import os
import sys

MiB = 1 << 20


def _load(path: str):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def _trace(path: str) -> tuple[list[dict], dict | None]:
    ios, summary = [], None
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.startswith("{"):
                continue
            x = json.loads(line)
            if x.get("type") == "io":
                ios.append(x)
            elif x.get("type") == "summary":
                summary = x
    return ios, summary


def score_pod(i: int, pod: dict, others: list[dict], truth: dict, ios: list[dict], summary: dict | None) -> list[str]:
    """What is wrong with pod I's trace (empty: PASS)."""
    bad: list[str] = []
    if summary is None:
        return ["its trace wrote no summary (cut short?)"]
    pid = truth["pid"]
    other_pids = {o["pid"] for o in others if "pid" in o}
    seen = {r["pid"] for r in summary["processes"]} | {v["pid"] for v in ios}
    if pid not in seen:
        bad.append(f"the trace did not see its loader (pid {pid})")
    if seen & other_pids:
        bad.append(f"the trace saw the other pod's loader {sorted(seen & other_pids)} (--pod filter)")
    want = {
        "namespace": pod["ns"],
        "pod": pod["name"],
        "pod_uid": pod["uid"],
        "container": "loader",
        "container_id": pod["cid"],
    }
    rows = [r for r in summary["processes"] if r["pid"] == pid]
    if rows:
        got = {k: rows[0].get(k) for k in want}
        if got != want:
            bad.append(f"process row labels {got} != {want}")
    pods = [p for p in summary.get("pods", []) if p["pod_uid"] == pod["uid"]]
    if len(summary.get("pods", [])) != 1 or not pods:
        bad.append(f"pod rows {[p['pod_uid'] for p in summary.get('pods', [])]}: want only {pod['uid']}")
        return bad
    p = pods[0]
    if (p["namespace"], p["pod"]) != (pod["ns"], pod["name"]):
        bad.append(f"pod row names {p['namespace']}/{p['pod']}")
    if p["bytes"] != truth["bytes_read"]:
        bad.append(f"pod row bytes {p['bytes']} != the {truth['bytes_read']} the loader read")
    copied = truth["bytes_copied"]
    routes = p["routes"]
    bounce, host = routes.get("DRAM_BOUNCE", 0), routes.get("HOST", 0)
    others_r = {r: n for r, n in routes.items() if r not in ("DRAM_BOUNCE", "HOST") and n}
    if others_r:
        bad.append(f"routes a pread + copy loader cannot take: {others_r}")
    if bounce != copied or host != truth["bytes_read"] - copied:
        bad.append(f"DRAM_BOUNCE {bounce} / HOST {host}: want {copied} / {truth['bytes_read'] - copied}")
    if copied and truth.get("host_sum") is not None and truth["gpu_sum"] != truth["host_sum"]:
        bad.append(f"GPU sum {truth['gpu_sum']} != host sum {truth['host_sum']}: not every byte reached the GPU")
    return bad


def line(i: int, pod: dict, truth: dict, summary: dict | None, bad: list[str]) -> str:
    p = next((x for x in (summary or {}).get("pods", []) if x["pod_uid"] == pod["uid"]), None)
    traced = "no pod row"
    if p is not None:
        mix = ", ".join(f"{r} {n / MiB:.0f} MiB" for r, n in sorted(p["routes"].items(), key=lambda x: -x[1]))
        pc = p.get("page_cache") or {}
        hits = f", page cache {100 * pc['hit_share']:.0f} % hits" if pc.get("hit_share") is not None else ""
        traced = f"traced {p['bytes'] / MiB:.0f} MiB ({mix}){hits}"
    how = truth["backend"] + (f" [{truth['skipped']}]" if truth.get("skipped") else "")
    verdict = "PASS" if not bad else "FAIL: " + "; ".join(bad)
    return (
        f"pod {pod['ns']}/{pod['name']} ({how}): read {truth['bytes_read'] / MiB:.0f} MiB, "
        f"copied {truth['bytes_copied'] / MiB:.0f} MiB; {traced} -- {verdict}"
    )


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 3
    d = argv[0]
    try:
        pods = _load(os.path.join(d, "pods.json"))["pods"]
        truths = [_load(os.path.join(d, f"truth-{i}.json")) for i in range(len(pods))]
        traces = [_trace(os.path.join(d, f"trace-{i}.jsonl")) for i in range(len(pods))]
    except (OSError, ValueError, KeyError) as e:
        print(f"cannot score: {e} (did every step of gpu_pods_run.sh run? see its run.log)", file=sys.stderr)
        return 3
    for p, t in zip(pods, truths):
        p["pid"] = t["pid"]
    failed = 0
    for i, (pod, truth, (ios, summary)) in enumerate(zip(pods, truths, traces)):
        others = [q for j, q in enumerate(pods) if j != i]
        bad = score_pod(i, pod, others, truth, ios, summary)
        failed += bool(bad)
        print(line(i, pod, truth, summary, bad))
    print("PASS" if not failed else f"FAIL ({failed} of {len(pods)} pods)")
    return 0 if not failed else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
