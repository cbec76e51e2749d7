"""Real per-I/O streams recorded on the GPU machine (H100, libcufile 1.15 in compat mode,
2026-12-06; tests/fixtures/gpu-machine/stream-profile-2026-12-06{,b}/README.md) and replayed by the
installed command: every call the workload itself counted comes back once, on its route, for its file.

- DRAM_BOUNCE: the application's own preadv of 4 KiB into host memory, then CuPy's copy of that
  buffer to the GPU (what fio --cuda_io=posix and kvikio's POSIX path do), 50,001 times from one
  thread, and 100,016 times from 4 processes x 4 threads;
- COMPAT: 50,001 cuFileRead calls of 4 KiB through gdsdiag's cffi bindings (no nvidia-fs: libcufile's
  compatibility mode reads with pread64).

The counts are the workload's own ground truth, printed by it into the run's log (call2-run.log's
"calls"), not written here."""

from __future__ import annotations

import collections
import json
import os
import re
import subprocess

import pytest
from conftest import FIXTURES, GDSDIAG

RUN = os.path.join(FIXTURES, "gpu-machine", "stream-profile-2026-12-06")
RUN_B = os.path.join(FIXTURES, "gpu-machine", "stream-profile-2026-12-06b")
DATA = "/var/tmp/gdsdiag-compat-rate.dat"  # (benchmarks/history/gpu_stream_profile.sh's file)


def _truth(kind: str) -> int:
    """The calls the workload made in the recorded run, as its own line in the run's log says."""
    with open(
        os.path.join(RUN_B, "callA-4x4-run.log") if kind == "bounce-4x4" else os.path.join(RUN, "call2-run.log")
    ) as f:
        log = f.read()
    m = re.search(rf"2\. {kind}: the stream recorded(?:, \d+ calls)?\n== \S+ +rc=0 (\{{.*?\}}) verdicts", log)
    assert m, f"no ground-truth line for {kind} in call2-run.log"
    return json.loads(m.group(1))["calls"]


@pytest.mark.parametrize(
    "kind, route", [("bounce", "DRAM_BOUNCE"), ("compat", "COMPAT"), ("bounce-4x4", "DRAM_BOUNCE")]
)
def test_a_real_gpu_stream_replays_every_call_once_on_its_route(kind, route):
    out = subprocess.run(
        [
            *GDSDIAG,
            "trace",
            "--replay",
            os.path.join(RUN_B if "4x4" in kind else RUN, f"rec-{kind}.jsonl.gz"),
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    lines = [json.loads(x) for x in out.stdout.splitlines()]
    ios = [x for x in lines if x.get("type") == "io"]
    data = collections.Counter((x["route"], x["confidence"], x["size"]) for x in ios if x["path"] == DATA)
    calls = _truth(kind)
    assert data == {(route, "high", 4096): calls}, data
    summary = next(x for x in lines if x.get("type") == "summary")
    assert summary["lost_events"] == 0
    # everything else is the program's own start-up (its configuration files): never the data's route
    assert all(x["route"] == "HOST" for x in ios if x["path"] != DATA)
