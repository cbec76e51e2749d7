"""The sweep's engine table, what a piped sweep prints while it runs, --plot refused before any
work without matplotlib, the block device's counters, and --compare-fio's two kinds of fio jobs."""

import json
import os
import re
import shutil
import sys

import pytest
from sweep_cli import cli, sweep

from gdsdiag.routes import Route
from gdsdiag.sweep import blockstat
from gdsdiag.sweep.engines import ALL_MODES, ENGINES
from gdsdiag.sweep.engines.base import EngineDefaults, PointSpec, RouteSeen


def test_every_mode_is_one_engine_in_the_table():
    assert ALL_MODES == ("cufile", "cufile-async", "cufile-batch", "kvikio", "bounce", "host")
    for mode, e in ENGINES.items():
        assert e.mode == mode and isinstance(e, EngineDefaults)
        assert all(isinstance(getattr(e, f), bool) for f in ("gpu", "cufile", "queued", "uring", "ceiling"))
        spec = PointSpec(mode, "read", 4096, 2)
        assert e.written_unit(spec) in (4096, 8192)  # kvikio's requests are threads × bs
    # what the runner used to branch on, now each engine's own answer
    assert [m for m, e in ENGINES.items() if e.ceiling] == ["host"]
    assert [m for m, e in ENGINES.items() if not e.gpu] == ["host"]
    assert {m for m, e in ENGINES.items() if e.cufile} == {"cufile", "cufile-async", "cufile-batch", "kvikio"}
    assert {m for m, e in ENGINES.items() if e.queued} == {"host", "bounce", "cufile-batch", "cufile-async"}
    # each engine declares the route its mode takes by design (None: cuFile's counters decide), and
    # a point of it with nothing counted is a mix of that one route, never a label
    assert {m: e.route for m, e in ENGINES.items()} == {
        "cufile": None,
        "cufile-async": None,
        "cufile-batch": None,
        "kvikio": None,
        "bounce": Route.DRAM_BOUNCE,
        "host": Route.HOST,
    }
    assert ENGINES["host"].route_end(ENGINES["host"].route_start()) == RouteSeen({}, {}, None, Route.HOST)
    assert ENGINES["bounce"].route_end(None).shares() == {Route.DRAM_BOUNCE: 1.0}
    for mode, e in ENGINES.items():  # its design in words where the design decides the route
        assert bool(e.design_for(e.route or Route.UNKNOWN)) == (e.route is not None), mode
    # kvikio that counted no cuFile I/O took its own POSIX path: a bounce, said as kvikio's design
    seen = ENGINES["kvikio"].seen({"NVFS": 0, "COMPAT": 0}, {})
    assert seen.shares() == {Route.DRAM_BOUNCE: 1.0} and "kvikio did not go through cuFile" in seen.warning
    assert "POSIX path" in ENGINES["kvikio"].design_for(Route.DRAM_BOUNCE)
    assert ENGINES["cufile"].seen({}, {}).shares() == {Route.UNKNOWN: 1.0}
    mixed = ENGINES["cufile"].seen({"NVFS": 3, "COMPAT": 1, "DYNAMIC_ROUTING": 0}, {})
    assert mixed.mix == {Route.NVFS: 3, Route.COMPAT: 1} and "25% of its I/Os in cuFile compatibility" in mixed.warning


def test_the_runner_names_no_mode():
    # the per-mode decisions live in the engines (gdsdiag/sweep/engines/): the runner asks them
    here = os.path.dirname(os.path.abspath(__file__))
    src = open(os.path.join(here, "..", "gdsdiag", "sweep", "runner.py")).read()
    named = [m for m in ALL_MODES if re.search(rf"[\"']{re.escape(m)}[\"']", src)]
    assert named == []
    assert "importlib" not in src and "hasattr" not in src
    eng = open(os.path.join(here, "..", "gdsdiag", "sweep", "engines", "__init__.py")).read()
    assert "importlib" not in eng and "hasattr" not in eng


def test_a_piped_sweep_says_each_point_as_it_ends(tmp_path):
    # stderr is a pipe here: no progress bars, one line per point (and the pattern file's)
    r = sweep(tmp_path, "--size 4M --bs 4k --threads 1,2 --rw read --mode host --bytes 256k --no-verify")
    assert r.returncode == 0, r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("gdsdiag sweep [")]
    assert "writing the 4 MiB pattern file" in lines[0]
    points = [ln for ln in lines if " point " in ln]
    assert len(points) == 2
    assert "point 1/2 host read bs=4 KiB threads=1:" in points[0] and "GB/s" in points[0] and "IOPS" in points[0]
    assert "point 2/2 host read bs=4 KiB threads=2:" in points[1] and "(ETA 0:00)" in points[1]
    assert "mode" in r.stdout  # the table still goes to stdout


def test_plot_without_matplotlib_is_refused_before_any_work(tmp_path):
    # matplotlib is installed here; its absence is made with an import hook that refuses it
    # (the real part cannot be missing and present in one test environment)
    code = (
        "import sys, importlib.abc\n"
        "class NoMpl(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path, target=None):\n"
        "        if name == 'matplotlib' or name.startswith('matplotlib.'):\n"
        "            raise ImportError('no matplotlib here')\n"
        "sys.meta_path.insert(0, NoMpl())\n"
        "from gdsdiag.cli import main\n"
        "sys.argv = ['gdsdiag'] + sys.argv[1:]\n"
        "main()\n"
    )
    import subprocess

    png = tmp_path / "out.png"
    args = ["sweep", "--dir", str(tmp_path), "--size", "4M", "--bs", "4k", "--threads", "1", "--mode", "host"]
    r = subprocess.run(
        [sys.executable, "-c", code, *args, "--bytes", "256k", "--plot", str(png)], capture_output=True, text=True
    )
    assert r.returncode == 3, r.stderr
    assert "--plot needs matplotlib" in r.stderr
    # this environment's pip and what gdsdiag installs from, never a PyPI name gdsdiag does not have
    assert f"{sys.executable} -m pip install" in r.stderr and "[plot]" in r.stderr
    assert "'gdsdiag[plot]'" not in r.stderr
    assert "point" not in r.stderr and os.listdir(tmp_path) == []  # nothing ran, nothing written
    # arguments are checked first: a bad one is named before the missing tool
    r = subprocess.run(
        [sys.executable, "-c", code, *args, "--bytes", "8k", "--plot", str(png)], capture_output=True, text=True
    )
    assert r.returncode == 4 and "fewer than" in r.stderr


def test_block_device_counters_of_a_real_read(tmp_path):
    path = blockstat.stat_path(os.open(str(tmp_path), os.O_RDONLY))
    if path is None:
        pytest.skip(f"{tmp_path} has no block device (tmpfs?)")
    before = blockstat.read(path)
    assert before is not None and len(before) == 11
    # the arithmetic on known counters: 100 I/Os as 200 requests of 512 KiB, 0.5 s in queue over 1 s
    b = (10, 0, 100, 50, 0, 0, 0, 0, 0, 100, 1000)
    a = (210, 3, 100 + 200 * 1024, 450, 0, 0, 0, 0, 0, 900, 1500)
    d = blockstat.delta(b, a, 100, 1.0, True)
    assert d == {
        "requests": 200,
        "merges": 3,
        "requests_per_io": 2.0,
        "request_kib": 512.0,
        "queue_depth": 0.5,
        "busy_percent": 80.0,
        "request_ms": 2.0,
    }
    assert blockstat.delta(None, a, 100, 1.0, True) is None


def test_a_file_without_a_block_device_has_no_counters():
    if not os.path.isdir("/dev/shm"):
        pytest.skip("no /dev/shm")
    fd = os.open("/dev/shm", os.O_RDONLY)
    try:
        assert blockstat.stat_path(fd) is None
    finally:
        os.close(fd)


@pytest.mark.slow
def test_compare_fio_both_job_kinds_like_for_like(tmp_path):
    if not shutil.which("fio"):
        pytest.skip("fio is not installed (apt-get install fio)")
    scratch = tmp_path / "scratch"  # where fio's IOPS logs go while it runs (TMPDIR), removed after
    scratch.mkdir()
    r = sweep(
        tmp_path,
        "--size 16M --bs 4k --threads 2 --rw read --mode host --time 1s --no-verify --compare-fio --fio-jobs both --json",
        env={"TMPDIR": str(scratch)},
    )
    assert r.returncode in (0, 2), r.stderr
    doc = json.loads(r.stdout)
    assert doc["config"]["fio_jobs"] == "both"
    p = doc["points"][0]
    if p["error"]:
        pytest.skip(f"this shared disk stalled the point: {p['error']}")
    assert p["loop"]["buffers"] == "4 KiB pages"  # fio's layout under --compare-fio
    f = p["fio"]
    assert f["jobs"] == "process" and set(f["by_jobs"]) == {"process", "thread"}
    assert "--thread" not in f["by_jobs"]["process"]["command"] and "--thread" in f["by_jobs"]["thread"]["command"]
    for k in ("process", "thread"):
        one = f["by_jobs"][k]
        assert len(one["runs"]) == 2 and one["ratio"] == pytest.approx(p["summary"]["gbps"] / one["gbps"], rel=0.01)
    assert f["ratio"] == f["by_jobs"]["process"]["ratio"]
    same, differ = f["settings"]["same"], f["settings"]["differ"]
    assert "host buffers: 4 KiB pages" in same
    # forked jobs against the sweep's threads; and, measured, when the device saw other requests
    assert [d["setting"] for d in differ][0] == "workers"
    measured = ("device requests per I/O (measured)", "measurement window (measured)")
    assert all(d["setting"] in measured for d in differ[1:])
    # when each of fio's two jobs measured, from its IOPS logs: the window both ran, and the ratio
    # against fio's rate over it
    for k in ("process", "thread"):
        one = f["by_jobs"][k]
        for run in one["runs"]:
            w = run["windows"]
            assert w["interval_ms"] >= 15 and w["all_running_ms"] > 500 and 0.5 < w["while_all_ran"] < 2
            assert w["gbps_all_running"] == pytest.approx(run["gbps"] * w["while_all_ran"], rel=0.01)
        both = one["all_running"]
        assert both["ratio"] == pytest.approx(p["summary"]["gbps"] / both["gbps"], rel=0.01)
        assert "--write_iops_log=" in one["command"] and "--log_unix_epoch=1" in one["command"]
    assert os.listdir(scratch) == []  # fio's logs removed
    assert "÷fio proc" in r.stderr and "÷fio thr" in r.stderr and "fio like for like:" in r.stderr


def test_fio_jobs_is_checked_with_the_arguments(tmp_path):
    r = cli("sweep", "--dir", str(tmp_path), "--fio-jobs", "fibers", "--mode", "host")
    assert r.returncode != 0 and "fibers" in r.stderr and os.listdir(tmp_path) == []


def test_settings_name_what_differs_from_fio():
    from types import SimpleNamespace

    from gdsdiag.sweep.fio import _request_shape, settings

    host = PointSpec("host", "read", 1 << 20, 4, verify=False)
    st = settings(host, ("process", "thread"), {"buffers": "4 KiB pages"})
    assert "host buffers: 4 KiB pages" in st["same"] and "offsets: each job its own slice" in st["same"]
    assert [d["setting"] for d in st["differ"]] == ["workers"]
    st = settings(host, ("thread",), {"buffers": "2 MiB-aligned, MADV_HUGEPAGE"})  # GDSDIAG_SWEEP_BUFFERS=huge
    assert st["differ"] == [
        {"setting": "host buffers", "sweep": "2 MiB-aligned, MADV_HUGEPAGE", "fio": "4 KiB pages (malloc)"}
    ]
    batch = PointSpec("cufile-batch", "randread", 4096, 1)  # verify on
    names = [d["setting"] for d in settings(batch, ("process",), {"cufile_handles": "one per point"})["differ"]]
    assert names == [
        "workers",
        "cuFile file handle",
        "cuFile driver and bounce pool",
        "cuFile API",
        "cuFile statistics",
        "data check",
    ]
    # --workers process: like for like with fio's forked jobs, unlike its --thread runs
    cuf = PointSpec("cufile", "read", 1 << 20, 4, verify=False)
    st = settings(cuf, ("process", "thread"), {"workers": "process", "cufile_handles": "one per worker process"})
    assert "workers: a process each (fio's forked (default) runs)" in st["same"]
    assert "cuFile file handle: one per job" in st["same"]
    assert st["differ"] == [
        {"setting": "workers", "sweep": "a process each", "fio": "threads of one process (fio's --thread runs)"},
        {
            "setting": "cuFile driver and bounce pool",
            "sweep": "one per worker",
            "fio": "one for all workers (fio's --thread runs)",
        },
        {"setting": "cuFile statistics", "sweep": "level 3 (route counters)", "fio": "cufile.json's"},
    ]
    # the device's requests per I/O, measured on both sides: listed only when > 10 % apart
    rec = SimpleNamespace(route_detail={"block_device": {"requests_per_io": 2.01}})
    runs = {
        "process": {"runs": [{"block_device": {"requests_per_io": 1.008}}, {"block_device": {"requests_per_io": 2.0}}]}
    }
    assert _request_shape(rec, runs) == {
        "setting": "device requests per I/O (measured)",
        "sweep": "2.01",
        "fio": "1.008, 2",
    }
    rec.route_detail["block_device"]["requests_per_io"] = 1.5
    assert _request_shape(rec, runs) is None  # within 10 % of fio's mean (1.504)


def test_a_piped_error_line_carries_its_reason():
    import io
    from types import SimpleNamespace

    from gdsdiag.render.sweep_out import LineProgress

    out = io.StringIO()
    lp = LineProgress(out, 1, 1.0, None)
    lp.point(PointSpec("host", "read", 4096, 2))
    lp.done_point(
        SimpleNamespace(
            error="gdsdiag: error: host read bs=4 KiB threads=2: stall: worker 1 had no completion",
            summary={},
            fio=None,
        )
    )
    assert "point 1/1 host read bs=4 KiB threads=2: ERROR: host read bs=4 KiB threads=2: stall" in out.getvalue()
