"""A sweep point never lies, bad arguments never start work, and the sweep's file is the only one
it writes: argument checks (exit 4, nothing created), points judged as errors (too few I/Os, a
worker that did not run, a stall), the C loop and the Python loop agreeing, io_uring depth, the
sweep's descriptor kept across a symlink swap, ENOSPC named, Ctrl-C without BufferError."""

import errno
import json
import os
import signal
import subprocess

import pytest
from sweep_cli import start_sweep, sweep

from gdsdiag.errors import EXIT_USAGE, GdsdiagError
from gdsdiag.sweep import files, native
from gdsdiag.sweep.engines import PointError, PointSpec, run_point, written_ranges
from gdsdiag.sweep.engines.base import PointResult, judge
from gdsdiag.sweep.latency import bucket_value, hist_percentile
from gdsdiag.sweep.runner import SweepConfig, run_sweep
from gdsdiag.units import percentile


@pytest.mark.parametrize(
    "args,words",
    [
        (["--threads", "0"], "at least one thread"),
        (["--threads", "-3"], "at least one thread"),
        (["--threads", "x"], "not a list of whole numbers"),
        (["--time", "-5s"], "more than 0 s"),
        (["--time", "soon"], "not a duration"),
        (["--bs", "0"], "multiple of 4 KiB"),
        (["--bs", "6k"], "multiple of 4 KiB"),
        (["--bs", "1m", "--threads", "8", "--size", "4M"], "smaller than threads × iodepth × bs"),
        (["--bytes", "8k"], "fewer than max(16, threads) blocks"),
        (["--iodepth", "0"], "needs at least 1"),
        (["--mode", "nope"], "unknown mode"),
        (["--rw", "sideways"], "unknown --rw"),
    ],
)
def test_bad_arguments_exit_4_before_any_work(tmp_path, args, words):
    base = {"--size": "16M", "--bs": "4k", "--threads": "1", "--mode": "host", "--rw": "read", "--time": "1s"}
    for i in range(0, len(args), 2):
        base[args[i]] = args[i + 1]
    r = sweep(str(tmp_path), "", *[x for kv in base.items() for x in kv])
    assert r.returncode == EXIT_USAGE, (r.returncode, r.stderr)
    assert words in r.stderr and len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("mode", ["cufile", "kvikio"])
def test_iodepth_is_refused_for_modes_without_a_queue(tmp_path, mode):
    # cufile is fio's sync libcufile engine; the queued cuFile modes are cufile-batch/-async
    r = sweep(str(tmp_path), "--size 16M --bs 4k --mode", mode, "--iodepth", "8")
    assert r.returncode == EXIT_USAGE and f"not for {mode}" in r.stderr and "cufile-batch or cufile-async" in r.stderr
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("mode", ["cufile-batch", "cufile-async"])
def test_iodepth_is_accepted_for_queued_cufile_modes(tmp_path, mode):
    # accepted by the argument check; without a GPU the mode itself then says what it needs
    r = sweep(str(tmp_path), "--size 16M --bs 4k --mode", mode, "--iodepth", "8")
    assert "--iodepth" not in r.stderr, r.stderr
    assert os.listdir(tmp_path) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting tmpfs needs root")
def test_full_disk_refused_before_writing_and_enospc_named(tmp_path):
    where = tmp_path / "small"
    where.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(where)]).returncode != 0:
        pytest.skip("cannot mount tmpfs here")
    try:
        r = sweep(str(where), "--size 64M --bs 4k --threads 1 --mode host --time 1s")
        assert r.returncode == EXIT_USAGE and "GiB free; the sweep file needs" in r.stderr
        assert os.listdir(where) == []
        # a real ENOSPC from this filesystem, as the sweep names it
        try:
            with open(where / "fill", "wb") as f:
                while True:
                    f.write(b"\0" * (1 << 20))
                    f.flush()
        except OSError as e:
            assert e.errno == errno.ENOSPC
            line = files.io_error(e, "writing", str(where / "x")).line()
            assert "no space left" in line and "(ENOSPC)" in line
        os.unlink(where / "fill")
    finally:
        subprocess.run(["umount", str(where)])


def test_too_few_ios_is_an_error_not_a_number(tmp_path):
    # 1 ms per point at 1 MiB: a handful of I/Os at most — reported as ERROR with the reason, exit 2
    r = sweep(str(tmp_path), "--size 64M --bs 1m --threads 1 --rw read --mode host --time 1ms --json")
    assert r.returncode == 2, r.stderr
    p = json.loads(r.stdout)["points"][0]
    assert p["route"] is None and "fewer than 16" in p["error"] and "not a measurement" in p["error"]
    assert p["summary"] == {}
    assert os.listdir(tmp_path) == []


def _real_point(tmp_path, **kw):
    sf = files.SweepFile(str(tmp_path), 4 << 20)
    sf.fill()
    return sf


def test_stall_and_idle_worker_are_errors(tmp_path):
    # a real point's result, then judged with one worker's longest wait raised past max(1 s, 10 × p99)
    # and with one worker that did no I/O (the conditions the GPU machine produced)
    sf = _real_point(tmp_path)
    try:
        spec = PointSpec("host", "read", 4096, 2, total_bytes=256 << 10)
        from gdsdiag.sweep.engines import ENGINES, base, host

        res = base.run_workers(ENGINES["host"], spec, sf)
        assert res.ops == 64 and res.workers[0]["ops"] == 32 and res.workers[1]["ops"] == 32
        point = base.Point(spec, sf)
        ws = [host.Worker(point, i) for i in range(2)]
        for w in ws:
            w.job.ops = 32
        stalled = PointResult(hist=res.hist, ops=64, nbytes=res.nbytes, seconds=res.seconds, max_gap_ns=3_000_000_000)
        ws[1].job.max_gap_ns = 3_000_000_000
        with pytest.raises(PointError, match=r"stall: worker 1 had no completion for 3.00 s"):
            judge(spec, stalled, ws)
        ws[1].job.max_gap_ns = 0
        ws[0].job.ops = 0
        with pytest.raises(PointError, match="worker 0 completed no I/O"):
            judge(spec, PointResult(hist=res.hist, ops=64, seconds=1.0), ws)
        cspec = PointSpec("cufile", "read", 4096, 2)
        with pytest.raises(PointError) as ei:
            judge(cspec, PointResult(hist=res.hist, ops=64, seconds=1.0), ws)
        assert "posix_pool_slab_count" in ei.value.fix
        for w in ws:
            w.release()
    finally:
        sf.remove()


def test_histogram_percentiles_within_a_bucket():
    import numpy as np

    from gdsdiag.sweep.engines.base import bucket

    rng = np.random.default_rng(1)
    lat = sorted(int(x) for x in rng.lognormal(11, 1, 5000))  # ~60 µs, wide spread
    hist = np.zeros(4096, dtype=np.uint64)
    for v in lat:
        hist[bucket(v)] += 1
    for q in (50, 90, 99, 99.9):
        exact, got = percentile(lat, q), hist_percentile(hist, q)
        assert abs(got - exact) / exact < 0.016, (q, exact, got)
    assert bucket_value(bucket(100)) == 100.0 and hist_percentile(np.zeros(4096, dtype=np.uint64), 50) is None


def test_c_loop_and_python_loop_agree(tmp_path):
    lib, why = native.load()
    if lib is None:
        pytest.skip(f"the C loop cannot be built here: {why}")
    docs = {}
    for name, env in (("c", {}), ("python", {"GDSDIAG_PYTHON_LOOP": "1"})):
        r = sweep(
            str(tmp_path),
            "--size 8M --bs 4k,64k --threads 1,2 --rw read,randwrite --mode host --bytes 1m --json",
            env=env,
        )
        assert r.returncode == 0, r.stderr
        docs[name] = json.loads(r.stdout)
    assert (
        "python loop"
        in sweep(
            str(tmp_path),
            "--size 8M --bs 4k --threads 1 --rw read --mode host --bytes 64k",
            env={"GDSDIAG_PYTHON_LOOP": "1"},
        ).stdout
    )
    for pc, pp in zip(docs["c"]["points"], docs["python"]["points"]):
        assert pc["loop"]["kind"] == "c" and pp["loop"] == {
            "kind": "python",
            "engine": "python",
            "why": "GDSDIAG_PYTHON_LOOP is set",
            "buffers": "2 MiB-aligned, MADV_HUGEPAGE",
            "workers": "thread",  # (added in issue 27: --workers)
        }
        assert pc["summary"]["ops"] == pp["summary"]["ops"] == (1 << 20) // pc["bs"]
        if pc["rw"] == "read":
            assert pc["verified_bytes"] == pp["verified_bytes"] == 1 << 20
        else:  # random writes revisit blocks: the distinct blocks written are read back
            assert 0 < pc["verified_bytes"] <= 1 << 20 and pc["verified_bytes"] % pc["bs"] == 0
        # (verify_seconds is rounded to 0.1 ms: checking 1 MiB can take less, so 0.0 is a real reading;
        # verified_bytes above is what shows the check ran)
        assert pc["verify_seconds"] >= 0 and pc["summary"]["lat_us"]["p50"] > 0
    assert os.listdir(tmp_path) == []


def test_iodepth_uses_io_uring_and_verifies(tmp_path):
    if not native.have_uring():
        pytest.skip("no compiled io_uring loop here")
    cfg = SweepConfig(
        str(tmp_path),
        16 << 20,
        [4096, 1 << 20],
        [2],
        ["read", "randread", "write", "randwrite"],
        ["host"],
        seconds=None,
        total_bytes=16 << 20,
        iodepth=8,
    )
    rep = run_sweep(cfg)
    for p in rep.points:
        assert p.error is None, p.error
        assert p.loop["engine"] == "c io_uring iodepth 8" and p.summary["bytes"] == 16 << 20
        assert p.verified_bytes >= 16 << 20 if p.rw in ("read", "randread") else p.verified_bytes > 0
    assert os.listdir(tmp_path) == []


def test_io_uring_catches_a_flipped_byte(tmp_path):
    if not native.have_uring():
        pytest.skip("no compiled io_uring loop here")
    from gdsdiag.sweep.engines import VerifyError

    sf = files.SweepFile(str(tmp_path), 1 << 20)
    try:
        sf.fill()
        bad = files.HEADER_SIZE + 700_001
        with open(sf.path, "r+b") as f:
            f.seek(bad)
            b = f.read(1)
            f.seek(bad)
            f.write(bytes([b[0] ^ 2]))
        with pytest.raises(VerifyError, match=f"file offset {bad} "):
            run_point(PointSpec("host", "read", 65536, 1, total_bytes=1 << 20, iodepth=4), sf)
    finally:
        sf.remove()


def test_a_file_swapped_for_a_symlink_is_never_written_through(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"precious" * 1000)
    sf = files.SweepFile(str(tmp_path), 1 << 20)
    try:
        sf.fill()
        ident = sf.ident
        os.rename(sf.path, tmp_path / "moved.dat")  # an attacker swaps the name for a link
        os.symlink(victim, sf.path)
        run_point(PointSpec("host", "write", 4096, 2, total_bytes=1 << 20), sf)
        assert victim.read_bytes() == b"precious" * 1000
        st = os.stat(tmp_path / "moved.dat")
        assert (st.st_dev, st.st_ino) == ident  # the writes went to the sweep's own inode
    finally:
        sf.remove()
    assert (
        os.path.islink(sf.path) and victim.read_bytes() == b"precious" * 1000
    )  # cleanup never follows or removes the link
    os.unlink(sf.path)
    os.unlink(tmp_path / "moved.dat")


def test_creating_never_follows_a_planted_link(tmp_path, monkeypatch):
    victim = tmp_path / "victim"
    victim.write_bytes(b"x")
    import secrets

    monkeypatch.setattr(secrets, "token_hex", lambda n: "00000000")
    os.symlink(victim, tmp_path / f"gdsdiag-sweep-{os.getpid()}-00000000.dat")
    with pytest.raises(GdsdiagError, match="free sweep file name"):
        files.SweepFile(str(tmp_path), 1 << 20)
    assert victim.read_bytes() == b"x"


def test_written_ranges_merge():
    import numpy as np

    bm = np.zeros(2, dtype=np.uint8)
    for b in (0, 1, 2, 5, 9):
        bm[b >> 3] |= 1 << (b & 7)
    assert written_ranges(bm, 4096) == [(0, 3 * 4096), (5 * 4096, 4096), (9 * 4096, 4096)]


def test_interrupt_leaves_no_file_and_no_buffer_error(tmp_path):
    p = start_sweep(
        tmp_path, "--size 64M --bs 4k --threads 2 --rw randwrite --mode host --time 60s", settle=1.5
    )  # into the timed point
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=30)
    assert p.returncode == 130, err
    assert "BufferError" not in err and "Traceback" not in err
    assert os.listdir(tmp_path) == []


def test_signal_handlers_are_restored_after_a_sweep(tmp_path):
    from click.testing import CliRunner

    from gdsdiag.commands.sweep import sweep

    before = (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM))
    r = CliRunner().invoke(
        sweep,
        [
            "--dir",
            str(tmp_path),
            "--size",
            "4M",
            "--bs",
            "4k",
            "--threads",
            "1",
            "--rw",
            "read",
            "--mode",
            "host",
            "--bytes",
            "64k",
        ],
    )
    assert r.exit_code == 0, r.output
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before


def test_progress_shows_rate_and_eta():
    import io

    from rich.console import Console

    from gdsdiag.render.sweep_out import SweepProgress, _eta_text

    con = Console(file=io.StringIO(), force_terminal=True, width=200)
    prog = SweepProgress(con, 4, 2.0, None)
    assert prog.eta(0.0) is None  # nothing started: unknown, not 0
    prog.point(PointSpec("host", "read", 4096, 1))
    now = prog.point_t0
    assert prog.eta(now + 0.5) == pytest.approx(2.5 + 3 * 3.0)  # before any point ends: --time + 1 s each
    prog.walls = [4.0]
    prog.point_t0 = now
    assert prog.eta(now + 1.0) == pytest.approx(3.0 + 2 * 4.0)  # measured: 4 s per point
    assert _eta_text(3725) == "1:02:05" and _eta_text(65) == "1:05"


def test_io_buffers_are_huge_page_aligned_unless_asked(monkeypatch):
    import ctypes

    b = files.IoBuffer(1 << 20)
    addr = ctypes.addressof(ctypes.c_char.from_buffer(b.mem)) + b.offset
    assert addr % (2 << 20) == 0 and len(b.view) == 1 << 20
    b.close()
    monkeypatch.setenv("GDSDIAG_SWEEP_BUFFERS", "pages")
    b = files.IoBuffer(1 << 20)
    assert b.offset == 0 and not b.huge
    b.close()


@pytest.mark.slow
def test_compare_fio_runs_fio_around_each_point(tmp_path):
    import shutil

    if not shutil.which("fio"):
        pytest.skip("fio is not installed (apt-get install fio)")
    r = sweep(
        str(tmp_path),
        "--size 16M --bs 4k --threads 2 --rw read,randwrite --mode host --time 1s --no-verify --compare-fio --json",
    )
    assert r.returncode in (0, 2), r.stderr  # 2 only if this shared disk stalled a point (said why)
    for p in json.loads(r.stdout)["points"]:
        if p["error"]:
            assert "stall" in p["error"] or "fewer than" in p["error"]
            continue
        f = p["fio"]
        assert "error" not in f, f
        assert len(f["runs"]) == 2 and f["ratio"] == pytest.approx(p["summary"]["gbps"] / f["gbps"], rel=0.01)
        for run in f["runs"]:  # fio's clat and CPU beside the sweep's own latencies, for a profile of a miss
            assert run["clat_us"]["p50"] > 0 and run["clat_us"]["p99"] >= run["clat_us"]["p50"]
            assert run["cpu_percent"] >= 0
        # like for like by default: the sweep's thread workers against fio's --thread jobs
        # (--workers process against fio's default forked jobs; --fio-jobs process/both for those)
        assert f["jobs"] == "thread" and "--thread" in f["command"] and f["like_for_like"] == "thread"
        assert "--numjobs=2" in f["command"] and "--ioengine=psync" in f["command"]
        assert "/proc/" in f["command"] and "/fd/" in f["command"]  # the sweep's own open file
        if p["rw"] == "read":
            assert "--offset_increment=" in f["command"] and "--readonly" in f["command"]
        else:
            assert "--norandommap" in f["command"] and "--readonly" not in f["command"]
    assert os.listdir(tmp_path) == []  # fio's write target was the sweep's second file, removed


def test_compare_fio_without_fio_is_a_usage_error(tmp_path):
    r = sweep(
        str(tmp_path),
        "--size 16M --bs 4k --threads 1 --rw read --mode host --time 1s --compare-fio",
        env={"GDSDIAG_FIO": str(tmp_path / "no-fio"), "PATH": "/nonexistent"},
    )
    assert r.returncode == EXIT_USAGE and "--compare-fio needs fio" in r.stderr
    assert os.listdir(tmp_path) == []
