"""``gdsdiag sweep --workers process``: each worker of a point in a process of its own (fio's default
forked jobs), on real files with O_DIRECT on this machine: the figures and the verification are the
thread workers' (bytes, I/Os, the written blocks), the processes are really there while a point
runs, none is left behind by Ctrl-C, SIGTERM or a killed sweep, and --compare-fio names fio's
forked runs as the like-for-like kind. The cuFile modes with process workers need a GPU:
tests/test_sweep_gpu.py."""

import json
import os
import shutil
import signal
import time

import psutil
import pytest
from sweep_cli import start_sweep, sweep

from gdsdiag.routes import Route, share_json
from gdsdiag.sweep.engines.base import RouteSeen
from gdsdiag.sweep.engines.processes import merge_routes
from gdsdiag.sweep.runner import SweepConfig, run_sweep


def test_process_workers_move_and_verify_the_same_bytes(tmp_path):
    cfg = SweepConfig(
        str(tmp_path),
        8 << 20,
        [4096, 65536],
        [1, 3],
        ["read", "write", "randread", "randwrite"],
        ["host"],
        seconds=None,
        total_bytes=1 << 20,
        workers="process",
    )
    rep = run_sweep(cfg)
    assert len(rep.points) == 16 and not any(p.error for p in rep.points)
    for p in rep.points:
        # --bytes is split over the workers up front: every process did its share, exactly
        assert p.route == {"HOST": 1.0} and p.summary["bytes"] == 1 << 20 and p.summary["ops"] == (1 << 20) // p.bs
        assert p.loop["workers"] == "process" and p.loop["kind"] == "c"
        if p.rw in ("read", "randread"):
            assert p.verified_bytes == 1 << 20  # every byte each process read was checked
        else:
            assert p.verified_bytes > 0  # the merged written-blocks bitmaps, read back
        assert p.summary["lat_us"]["p50"] > 0 and p.cpu_percent > 0
    assert rep.to_json()["config"]["workers"] == "process"
    assert os.listdir(tmp_path) == []


def _workers_of(pid: int) -> list[psutil.Process]:
    try:
        kids = psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    out = []
    for k in kids:
        try:
            if "gdsdiag.sweep.worker_process" in " ".join(k.cmdline()):
                out.append(k)
        except psutil.NoSuchProcess:
            pass
    return out


def _started(tmp_path, threads: int):
    p = start_sweep(
        tmp_path, f"--size 32M --bs 4k --threads {threads} --rw randread --mode host --time 60s --workers process", 0
    )
    deadline = time.time() + 30
    workers: list = []
    while time.time() < deadline and len(workers) < threads:
        time.sleep(0.1)
        workers = _workers_of(p.pid)
    time.sleep(1.0)  # into the timed point
    return p, workers


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_stopped_sweep_leaves_no_worker_process(tmp_path, sig):
    p, workers = _started(tmp_path, 3)
    assert len(workers) == 3, "one process per worker while the point runs"
    assert len({w.pid for w in workers}) == 3
    p.send_signal(sig)
    out, err = p.communicate(timeout=60)
    assert p.returncode in (130, 128 + sig), (p.returncode, err)
    gone, alive = psutil.wait_procs(workers, timeout=5)
    assert not alive, [w.pid for w in alive]
    assert os.listdir(tmp_path) == [] and "Traceback" not in err


def test_a_killed_sweep_takes_its_workers_along(tmp_path):
    p, workers = _started(tmp_path, 2)
    assert len(workers) == 2
    p.kill()  # no cleanup runs in the sweep: the workers die with it (PR_SET_PDEATHSIG)
    p.communicate(timeout=30)
    gone, alive = psutil.wait_procs(workers, timeout=10)
    assert not alive, [w.pid for w in alive]
    # (the data file stays, as after any SIGKILL; the next sweep removes it as a killed run's)


@pytest.mark.slow
def test_a_worker_stuck_in_one_io_is_killed_and_named(tmp_path):
    """A worker that neither completes I/Os nor answers the stop (an I/O that never returns: a dead
    NFS server, a hung device) is killed once the point's deadline and the grace have passed, and
    the point says which worker and for how long, instead of the sweep hanging. SIGSTOP makes a
    real worker process stop mid-point the way such an I/O stops it (no completion, no reply)."""
    p = start_sweep(
        tmp_path, "--size 32M --bs 4k --threads 2 --rw randread --mode host --time 2s --workers process --json", 0
    )
    workers: list = []
    try:
        deadline = time.time() + 30
        while time.time() < deadline and len(workers) < 2:
            time.sleep(0.1)
            workers = _workers_of(p.pid)
        assert len(workers) == 2
        stuck = workers[1]
        # into the timed point: its reads flowing (setup makes one warm-up read). Stopped during its
        # setup instead, the worker is waited for as a slow setup (SETUP_TIMEOUT_S), which a fixed
        # sleep here could not rule out on a loaded machine.
        deadline, last = time.time() + 60, stuck.io_counters().read_count
        while time.time() < deadline:
            time.sleep(0.2)
            now = stuck.io_counters().read_count
            if now - last >= 500:
                break
            last = now
        else:
            raise AssertionError("the worker never started its timed reads")
        stuck.suspend()  # SIGSTOP
        t0 = time.monotonic()
        out, err = p.communicate(timeout=90)
        took = time.monotonic() - t0
    except BaseException:  # (a failed wait above: nothing is left running for the tests after this one)
        p.kill()
        p.wait(10)
        for w in workers:
            try:
                w.kill()
            except psutil.NoSuchProcess:
                pass
        raise
    point = json.loads(out)["points"][0]
    assert point["route"] is None and point["summary"] == {}
    assert "stuck in one I/O: no completion for" in point["error"] and "(its process killed)" in point["error"]
    # the 2 s point, then the grace (10 s), then 5 s for the stop to be answered: killed, not waited on
    assert 12 < took < 40, took
    gone, alive = psutil.wait_procs(workers, timeout=10)
    assert not alive, [w.pid for w in alive]
    assert p.returncode in (0, 1, 2) and "Traceback" not in err
    assert os.listdir(tmp_path) == []


def test_kvikio_and_unknown_kinds_are_refused(tmp_path):
    r = sweep(tmp_path, "--mode kvikio --workers process")
    assert r.returncode == 4 and "--workers process is not for kvikio" in r.stderr
    r = sweep(tmp_path, "--mode host --workers fibers")
    assert r.returncode != 0 and "fibers" in r.stderr
    assert os.listdir(tmp_path) == []


def test_routes_of_the_processes_are_summed():
    C, N = Route.COMPAT, Route.NVFS
    a = RouteSeen(
        {C: 10},
        {"cufile_stats": {"reads": {"total": 10, "posix": 10}, "gpus": [{"uuid": "u", "n": 10}]}},
        "w",
    )
    b = RouteSeen(
        {C: 7},
        {"cufile_stats": {"reads": {"total": 7, "posix": 7}, "gpus": [{"uuid": "u", "n": 7}]}},
        "w",
    )
    m = merge_routes([a, b])
    assert m.mix == {C: 17} and m.shares() == {C: 1.0} and m.warning == "w"
    assert m.detail == {"cufile_stats": {"reads": {"total": 17, "posix": 17}, "gpus": [{"uuid": "u", "n": 17}]}}
    c = RouteSeen({N: 3}, {"cufile_stats": {"reads": {"total": 3, "posix": 0}, "gpus": [{"uuid": "u", "n": 3}]}}, None)
    m = merge_routes([a, c])
    # one mix over the route vocabulary, never a MIXED(...) label
    assert m.mix == {C: 10, N: 3} and share_json(m.mix) == {"COMPAT": 0.7692, "NVFS": 0.2308}
    host = merge_routes([RouteSeen({}, {}, None, Route.HOST), RouteSeen({}, {}, None, Route.HOST)])
    assert host.mix == {} and host.shares() == {Route.HOST: 1.0}
    # processes that counted nothing and disagree: nothing conclusive
    odd = merge_routes([RouteSeen({}, {}, None, Route.HOST), RouteSeen({}, {}, None, Route.DRAM_BOUNCE)])
    assert odd.shares() == {Route.UNKNOWN: 1.0}
    # as a worker process hands it over (JSON) and back
    assert RouteSeen.from_json(json.loads(json.dumps(m.to_json()))) == m


@pytest.mark.skipif(shutil.which("fio") is None, reason="needs fio (apt-get install fio)")
def test_compare_fio_names_the_forked_runs_like_for_like(tmp_path):
    r = sweep(
        tmp_path,
        "--size 16M --bs 4k --threads 2 --rw read --mode host --time 0.5s --no-verify --compare-fio --fio-jobs both "
        "--workers process --json",
    )
    assert r.returncode == 0, r.stderr
    (p,) = json.loads(r.stdout)["points"]
    f = p["fio"]
    assert f["like_for_like"] == "process" and p["loop"]["workers"] == "process"
    assert set(f["by_jobs"]) == {"process", "thread"} and all(v["ratio"] for v in f["by_jobs"].values())
    assert "workers: a process each (fio's forked (default) runs)" in f["settings"]["same"]
    assert [d["fio"] for d in f["settings"]["differ"] if d["setting"] == "workers"] == [
        "threads of one process (fio's --thread runs)"
    ]


def _has_gpu() -> bool:
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:
        return False


@pytest.mark.skipif(_has_gpu(), reason="needs a machine without a CUDA GPU (the worker's setup must fail)")
def test_a_worker_that_cannot_set_up_fails_its_point_with_the_cause(tmp_path):
    # bounce needs cupy and a GPU; here each worker process finds neither during its own setup (the
    # sweep's process never touched CUDA): the point is an error naming that, and no worker is left
    from gdsdiag.sweep import files
    from gdsdiag.sweep.engines import PointError, PointSpec, run_point

    sf = files.SweepFile(str(tmp_path), 8 << 20)
    try:
        sf.fill()
        with pytest.raises(PointError, match=r"worker 0 did not run: .*(cupy|CUDA|GPU)"):
            run_point(PointSpec("bounce", "read", 4096, 2, seconds=0.3, workers="process"), sf)
        assert not _workers_of(os.getpid())
        # the same file and sweep process still run a host point with process workers afterwards
        from gdsdiag.sweep.native import have_uring, load

        depth = 4 if load()[0] is not None and have_uring() else 1
        res = run_point(PointSpec("host", "read", 4096, 2, seconds=0.3, workers="process", iodepth=depth), sf)
        assert res.loop["workers"] == "process" and res.ops >= 16 and res.verified_bytes == res.nbytes
        if depth > 1:
            assert res.loop["engine"] == "c io_uring iodepth 4"
    finally:
        sf.remove()
