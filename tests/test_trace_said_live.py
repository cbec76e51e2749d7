"""A loader's own words, end to end on this kernel: the real probes send what a traced program writes
to stderr (probes/cufile_trace.c stderr_enter), the trace keeps the lines about its data path and names
its fallback message as the decisive fact of the bytes it bounced (tests/workloads/said_fallback.py).

This machine has no GPU: the program copies through a libcuda.so.1 built here whose cuMemcpyHtoD_v2
does nothing (test_trace_content_live.py); the probes see the same calls and host memory."""

import json
import os
import shutil
import subprocess
import sys
import tempfile

from conftest import GDSDIAG, HERE, LIVE_MARKS
from test_trace_content_live import fake_cuda, fake_cuda_env  # noqa: F401  (fake_cuda: the stand-in libcuda fixture)

pytestmark = [*LIVE_MARKS]
WORKLOAD = os.path.join(HERE, "workloads", "said_fallback.py")
PY = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable


def _traced(lib: str, d: str, **env_extra: str):
    """The workload over a 4 MiB file in D under `trace --json --record`: (its path, the recording,
    the finished run)."""
    path = os.path.join(d, "weights.bin")
    with open(path, "wb") as f:
        f.write(os.urandom(4 << 20))
    rec = os.path.join(d, "run.rec.jsonl")
    r = subprocess.run(
        [*GDSDIAG, "trace", "--json", "--record", rec, "--", PY, WORKLOAD, lib, path],
        capture_output=True,
        text=True,
        timeout=300,
        env={**fake_cuda_env(lib), **env_extra},
    )
    assert r.returncode == 0, r.stderr
    return path, rec, r


def test_the_loaders_fallback_message_is_kept_and_decides_its_files_why(fake_cuda):  # noqa: F811
    d = os.path.realpath(tempfile.mkdtemp(prefix="gdsdiag-said-", dir="/var/tmp"))
    try:
        path, rec, r = _traced(fake_cuda, d)
        lines = [json.loads(x) for x in r.stdout.splitlines() if x.startswith("{")]
        truth = next(x for x in lines if x.get("type") == "truth")
        summary = next(x for x in lines if x.get("type") == "summary")
        proc = next(p for p in summary["processes"] if p.get("said"))
        # the warning alone: not the progress bar, not the result line
        assert len(proc["said"]) == 1 and truth["said"] in proc["said"][0], proc["said"]
        row = next(f for f in summary["files"] if f["path"] == path)
        assert row["routes"].get("DRAM_BOUNCE") == truth["bytes"], row["routes"]
        first = row["why_chain"][0]
        assert (first["fact"], first["role"]) == ("the program said", "decisive"), row["why_chain"]
        assert truth["said"] in first["value"] and first["source"].startswith("stderr of ")
        # its GB/s against what this node's hardware allows on its path, read as platform/ceiling.py
        # reads it here (this VM: a virtio disk with no PCIe link, no NVIDIA GPU: unknown, and why)
        from gdsdiag.platform import ceiling
        from gdsdiag.platform.fsroot import FsRoot

        assert row["ceiling"] == ceiling.for_path(FsRoot("/"), path, "one").to_json()
        if row["gbps"]:
            assert row["against_ceiling"] == ceiling.for_path(FsRoot("/"), path, "one").against(row["gbps"])
            assert any(f["fact"] == "GB/s against the path's ceiling" for f in row["why_chain"])
        # a replay of the recording says the same
        rp = subprocess.run([*GDSDIAG, "trace", "--replay", rec, "--json"], capture_output=True, text=True, timeout=120)
        assert rp.returncode == 0, rp.stderr
        again = next(json.loads(x) for x in rp.stdout.splitlines() if '"type": "summary"' in x)
        row2 = next(f for f in again["files"] if f["path"] == path)
        assert row2["why_chain"][0]["value"] == first["value"]
        assert row2["ceiling"] is None and row2["against_ceiling"] is None  # (the node is not a replay's)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_a_live_trace_without_the_nodes_facts_says_why_not_a_replay(fake_cuda):  # noqa: F811
    """The node's facts left out of a live trace (GDSDIAG_NODE_FACTS=0, as the benchmarks do; or a
    check that failed or did not answer) are named for that reason: "a replay" was said of every
    trace without them, a false statement about a trace that ran on the node. Its replay says
    "a replay"."""
    d = os.path.realpath(tempfile.mkdtemp(prefix="gdsdiag-said-", dir="/var/tmp"))
    try:
        path, rec, r = _traced(fake_cuda, d, GDSDIAG_NODE_FACTS="0")
        summary = next(json.loads(x) for x in r.stdout.splitlines() if '"type": "summary"' in x)
        row = next(f for f in summary["files"] if f["path"] == path)
        node = [f["value"] for f in row["why_chain"] if f["fact"] == "the node's GDS facts"]
        assert node and "GDSDIAG_NODE_FACTS=0" in node[0] and "replay" not in node[0], row["why_chain"]
        rp = subprocess.run([*GDSDIAG, "trace", "--replay", rec, "--json"], capture_output=True, text=True, timeout=120)
        assert rp.returncode == 0, rp.stderr
        again = next(json.loads(x) for x in rp.stdout.splitlines() if '"type": "summary"' in x)
        row2 = next(f for f in again["files"] if f["path"] == path)
        node2 = [f["value"] for f in row2["why_chain"] if f["fact"] == "the node's GDS facts"]
        assert node2 and "a replay" in node2[0], row2["why_chain"]
    finally:
        shutil.rmtree(d, ignore_errors=True)
