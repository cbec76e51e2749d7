"""fio's per-job measurement windows from its IOPS logs (gdsdiag/sweep/fio_windows.py), on real
captures: fio 3.33's forked libcufile jobs on the GPU machine (their clocks start up to 96 ms apart,
each after its own CUDA setup) and two psync jobs on the CPU machine (together within 1 ms)."""

import glob
import json
import os

import pytest

from gdsdiag.sweep.fio_windows import job_windows, read_iops_log

HERE = os.path.dirname(__file__)
GPU = os.path.join(HERE, "fixtures", "gpu-machine", "fio-windows-2026-12-02")
CPU = os.path.join(HERE, "fixtures", "cpu-machine", "fio-windows-psync-4k-x2")


def logs(pattern: str) -> list:
    out = []
    for path in sorted(glob.glob(pattern)):
        with open(path) as f:
            out.append(read_iops_log(f.read()))
    return out


def reported(path: str) -> float:
    with open(path) as f:
        return sum(j["read"]["iops"] for j in json.load(f)["jobs"])


@pytest.mark.parametrize(
    "r, spread, factor",
    [(1, 32, 0.984), (2, 96, 0.942), (3, 60, 0.958)],
)
def test_forked_cufile_jobs_measured_over_windows_apart(r, spread, factor):
    w = job_windows(logs(os.path.join(GPU, f"r{r}_iops.*.log")))
    assert w is not None
    assert w["start_spread_ms"] == spread and w["interval_ms"] in (19, 20)
    assert w["while_all_ran"] == pytest.approx(factor, abs=0.001)
    # the sweep's process workers, run right after, against fio while all its jobs ran: like for like
    with open(os.path.join(GPU, f"r{r}-sweep.json")) as f:
        sweep = json.load(f)["points"][0]["summary"]["iops"]
    ratio = sweep / (reported(os.path.join(GPU, f"r{r}-fio.json")) * w["while_all_ran"])
    assert 0.98 <= ratio <= 1.01


def test_the_job_that_ran_alone_at_the_end_is_the_fastest():
    # round 2: job 3 started last (96 ms) and ended last (79 ms after the first to end)
    w = logs(os.path.join(GPU, "r2_iops.*.log"))
    with open(os.path.join(GPU, "r2-fio.json")) as f:
        iops = [j["read"]["iops"] for j in json.load(f)["jobs"]]
    last = max(range(4), key=lambda j: w[j][-1][0])
    assert last == max(range(4), key=lambda j: iops[j]) == 2


def test_jobs_that_start_together_measure_the_same_window():
    w = job_windows(logs(os.path.join(CPU, "j_iops.*.log")))
    assert w is not None and w["start_spread_ms"] <= 1 and w["end_spread_ms"] <= 25
    assert w["while_all_ran"] == pytest.approx(1.0, abs=0.01)


@pytest.mark.parametrize(
    "text",
    ["", "garbage\n", "12, x, 0\n", "1796170391878, 11365, 0, 0, 0\n", "1796170391878 11365\n1796170391898 11365\n"],
)
def test_too_little_to_tell_is_unknown(text):
    assert job_windows([read_iops_log(text), read_iops_log("5, 1\n25, 1\n")]) is None


def test_glued_and_odd_lines_are_skipped_not_misread():
    text = "100, 10, 0, 0, 0\nnot a line\n120, 20, 0, 0, 01796170391878, 5\n140, 30, 0, 0, 0\n"
    assert read_iops_log(text) == [(100, 10.0), (120, 20.0), (140, 30.0)]
    assert job_windows([[(100, 1.0), (100, 1.0)]]) is None  # no time between samples
