"""Evidence about the bytes, end to end on this kernel: the real probes read each copy's host source
and each read's buffer (probes/cufile_trace.c, copy_content), the live trace compares them with the
file's own bytes (content.py), on a real program that prints its own ground truth.

This machine has no GPU. The program copies through a libcuda.so.1 built here whose cuMemcpyHtoD_v2
does nothing: the probes see the same call, arguments and host memory as with the real driver (on
the GPU machine the same program runs against the real one: tests/workloads/content_controls.py).
Its cases are issue 43's negative controls beside a staged and a direct loader."""

import json
import os
import shutil
import subprocess
import sys

import pytest
from conftest import GDSDIAG, HERE, LIVE_MARKS

pytestmark = [*LIVE_MARKS, pytest.mark.slow]
WORKLOAD = os.path.join(HERE, "workloads", "content_controls.py")
PY = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable

FAKE_CUDA_C = r"""
#include <stddef.h>
int cuInit(unsigned flags) { return 100; }  /* CUDA_ERROR_NO_DEVICE: no driver to ask */
int cuMemcpyHtoD_v2(unsigned long long dst, const void *src, size_t n) { return 0; }
"""


@pytest.fixture
def fake_cuda(tmp_path):
    if shutil.which("gcc") is None:
        pytest.skip("needs gcc to build the stand-in libcuda.so.1")
    d = tmp_path / "cuda"
    d.mkdir()
    (d / "fake.c").write_text(FAKE_CUDA_C)
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(d / "libcuda.so.1"), str(d / "fake.c")], check=True)
    return str(d / "libcuda.so.1")


def fake_cuda_env(fake_cuda: str) -> dict:
    """The environment a traced program copies through the stand-in in: its directory first on the
    library path, what the path had after it (the GPU machine's kit puts libbcc there)."""
    ld = os.environ.get("LD_LIBRARY_PATH")
    env = {**os.environ, "LD_LIBRARY_PATH": os.path.dirname(fake_cuda) + (os.pathsep + ld if ld else "")}
    env.pop("PYTHONUNBUFFERED", None)
    return env


def test_negative_controls_and_loaders_under_the_real_probes(fake_cuda):
    d = os.path.realpath(__import__("tempfile").mkdtemp(prefix="gdsdiag-content-", dir="/var/tmp"))
    try:
        # (probed before it starts; what the path had stays after it: the GPU machine's kit puts libbcc there)
        env = fake_cuda_env(fake_cuda)
        r = subprocess.run(
            [*GDSDIAG, "trace", "--json", "--per-io", "--", PY, WORKLOAD, fake_cuda, d],
            capture_output=True,
            text=True,
            timeout=400,
            env=env,
        )
        assert r.returncode == 0, r.stderr
        lines = [json.loads(x) for x in r.stdout.splitlines() if x.startswith("{")]
        truth = next(x for x in lines if x.get("type") == "truth")
        ios = [x for x in lines if x.get("type") == "io" and x.get("path") and x["path"].startswith(d + "/")]
        got = {}
        for v in ios:
            if v["op"] == "read" and v["size"] >= 1 << 20:
                got[(os.path.basename(v["path"]), v["offset"])] = (v["route"], v["confidence"], v["evidence"])
        for case in truth["cases"]:
            key = (case["file"], case["offset"])
            assert key in got, f"{case['name']}: no verdict for {key}; got {sorted(got)}"
            route, conf, ev = got[key]
            text = " ".join(ev)
            if case["to_gpu"]:
                assert (route, conf) == ("DRAM_BOUNCE", "high"), (case["name"], route, conf, text)
            else:
                # never a false DRAM_BOUNCE at medium or high: HOST, or UNKNOWN with the reason
                assert route in ("HOST", "UNKNOWN") or conf == "low", (case["name"], route, conf, text)
                assert route != "DRAM_BOUNCE", (case["name"], route, conf, text)
            if case["name"] == "staged":
                assert "checked by content" in text
    finally:
        shutil.rmtree(d, ignore_errors=True)
