"""tests/workloads/gpu_pods_run.sh, the GPU machine's two-pod run (issue 48), dry here: DRY=1 skips
the CUDA copies (each loader says why in its ground truth) and everything else runs as on the GPU
machine — two pods in real cgroups named as kubelet and the runtimes name them, a kubelet-like pod
log tree, a `gdsdiag trace --json --pod NAME --namespace llm` per pod, the scorer. Then the scorer
must also fail: a ground truth that disagrees with the trace, and each trace scored as the other pod's.
Needs root, bcc and kernel headers (skips with the reason otherwise); the script removes its cgroups."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
from conftest import LIVE_MARKS, REPO

pytestmark = [*LIVE_MARKS, pytest.mark.slow]

SCRIPT = os.path.join(REPO, "tests", "workloads", "gpu_pods_run.sh")
SCORER = os.path.join(REPO, "tests", "workloads", "pods_score.py")


def _score(d: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, SCORER, d], capture_output=True, text=True, timeout=60)


def test_two_pods_dry_pass_and_the_scorer_can_fail(tmp_path):
    out = tmp_path / "out"
    env = {**os.environ, "DRY": "1", "PYTHON": sys.executable}
    r = subprocess.run(["bash", SCRIPT, str(out)], cwd=REPO, env=env, capture_output=True, text=True, timeout=560)
    log = (out / "run.log").read_text() if (out / "run.log").exists() else r.stdout + r.stderr
    score = (out / "score.txt").read_text()
    lines = score.splitlines()
    assert lines[-1] == "PASS", log
    assert len(lines) == 3 and all(ln.endswith("-- PASS") for ln in lines[:2]), score
    for ln in lines[:2]:  # the reason the CUDA part was skipped, and what was read and traced
        assert "dry run: no CUDA copy" in ln and "read 256 MiB, copied 0 MiB; traced 256 MiB (HOST 256 MiB)" in ln, ln
    raw = out / "k" / "e" / "e" / "p" / "raw"
    pods = json.loads((raw / "pods.json").read_text())["pods"]
    assert not any(os.path.exists(d) for p in pods for d in p["cgroups"]), "cgroups left behind"

    # the scorer fails where the trace and the ground truth disagree ...
    bad = tmp_path / "bad"
    shutil.copytree(raw, bad)
    truth = json.loads((bad / "truth-0.json").read_text())
    truth["bytes_read"] -= 4096
    (bad / "truth-0.json").write_text(json.dumps(truth))
    r = _score(str(bad))
    assert r.returncode == 1 and r.stdout.splitlines()[-1] == "FAIL (1 of 2 pods)", r.stdout
    assert "pod row bytes 268435456 != the 268431360 the loader read" in r.stdout
    # ... and where a trace is another pod's (the --pod filter would have failed)
    swapped = tmp_path / "swapped"
    shutil.copytree(raw, swapped)
    (swapped / "trace-0.jsonl").write_text((raw / "trace-1.jsonl").read_text())
    r = _score(str(swapped))
    assert r.returncode == 1 and "saw the other pod's loader" in r.stdout, r.stdout
    # ... and says so in one line where an input is missing
    (swapped / "trace-1.jsonl").unlink()
    r = _score(str(swapped))
    assert r.returncode == 3 and r.stderr.count("\n") == 1 and "cannot score" in r.stderr, r.stderr
