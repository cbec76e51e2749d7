"""gdsdiag sweep on this machine (--mode host on a real filesystem), its data safety, verification
and cleanup, and the latency math."""

import json
import os
import signal
import subprocess

import pytest
from sweep_cli import start_sweep, sweep

from gdsdiag.errors import GdsdiagError
from gdsdiag.sweep import files, pattern
from gdsdiag.sweep.engines import PointSpec, VerifyError, run_point
from gdsdiag.sweep.latency import summarize
from gdsdiag.sweep.runner import SweepConfig, run_sweep
from gdsdiag.units import parse_duration, parse_size, percentile


def test_percentiles_on_known_latencies():
    v = list(range(1, 101))  # 1..100
    assert percentile(v, 50) == 50 and percentile(v, 90) == 90 and percentile(v, 99) == 99
    assert percentile(v, 99.9) == 100 and percentile(v, 100) == 100 and percentile(v, 0) == 1
    assert percentile([7], 99.9) == 7 and percentile([], 50) is None
    s = summarize([1000, 2000, 3000, 4000], 4 * 4096, 2.0)
    assert s["iops"] == 2.0 and s["gbps"] == round(16384 / 2 / 1e9, 4)
    assert s["lat_us"] == {"p50": 2.0, "p90": 4.0, "p99": 4.0, "p99.9": 4.0, "max": 4.0, "mean": 2.5}


def test_size_and_duration_parsing():
    assert parse_size("4k") == 4096 and parse_size("16M") == 16 << 20 and parse_size("4G") == 4 << 30
    assert parse_size("1MiB") == 1 << 20 and parse_size("512") == 512
    assert parse_duration("10s") == 10 and parse_duration("250ms") == 0.25
    with pytest.raises(ValueError, match="not a size"):
        parse_size("lots")


def test_host_mode_end_to_end(tmp_path):
    cfg = SweepConfig(
        str(tmp_path),
        8 << 20,
        [4096, 65536],
        [1, 2],
        ["read", "write", "randread", "randwrite"],
        ["host"],
        seconds=None,
        total_bytes=1 << 20,
    )
    rep = run_sweep(cfg)
    assert len(rep.points) == 16 and not any(p.error for p in rep.points)
    for p in rep.points:
        assert p.route == {"HOST": 1.0} and p.route_mix == {} and p.summary["bytes"] == 1 << 20
        assert p.summary["ops"] == (1 << 20) // p.bs
        assert p.verified_bytes > 0
        if p.rw in ("read", "randread"):
            assert p.verified_bytes == 1 << 20  # every byte read was checked
        assert p.summary["lat_us"]["p50"] > 0 and p.summary["gbps"] > 0
    assert os.listdir(tmp_path) == []  # the sweep file is gone


def test_cli_json_csv_and_refusals(tmp_path):
    out = tmp_path / "res.csv"
    r = sweep(
        str(tmp_path), "--size 4M --bs 4k --threads 1 --rw randread --mode host --bytes 256k --json --csv", str(out)
    )
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["schema"] == "gdsdiag.sweep/2" and doc["points"][0]["verified_bytes"] == 262144
    assert out.read_text().startswith("mode,rw,bs,threads,gbps")
    header, row = out.read_text().splitlines()[:2]
    assert header.endswith(",error,workers") and row.endswith(",thread")  # the worker kind, last
    before = out.read_bytes()
    r = sweep(str(tmp_path), "--size 4M --bs 4k --threads 1 --mode host --csv", str(out))
    assert r.returncode == 3 and "exists" in r.stderr and out.read_bytes() == before
    r = sweep(str(tmp_path / "nope"), "--mode host")
    assert r.returncode == 4 and "is not a directory" in r.stderr and "Traceback" not in r.stderr
    r = sweep(str(tmp_path), "--mode host --bs lots")
    assert r.returncode == 4 and "not a size" in r.stderr
    assert sorted(os.listdir(tmp_path)) == ["res.csv"]


def test_never_touches_existing_files(tmp_path):
    victim = tmp_path / f"gdsdiag-sweep-{os.getpid()}-00000000.dat"
    victim.write_bytes(b"user data")
    other = tmp_path / "model.safetensors"
    other.write_bytes(b"weights")
    run_sweep(
        SweepConfig(
            str(tmp_path), 4 << 20, [4096], [1], ["write", "read"], ["host"], seconds=None, total_bytes=64 << 10
        )
    )
    assert victim.read_bytes() == b"user data" and other.read_bytes() == b"weights"
    assert sorted(os.listdir(tmp_path)) == sorted([victim.name, other.name])
    assert not files.is_sweep_file(str(victim))


@pytest.mark.parametrize("where", ["first", "middle", "last"])
@pytest.mark.parametrize("how", ["overlapped", "inline"])
def test_a_wrong_byte_is_found_with_the_check_overlapped_or_inline(tmp_path, monkeypatch, where, how):
    """Issue 46 item 5: a 64 KiB+ psync read is checked on a helper thread while the next block is
    read (csrc/ioloop.c, run_sync_pipelined). It checks every byte as the inline check does: one
    flipped byte in the first, a middle or the last block (the last is checked only at the end)
    fails the point with its offset, and a file read right is counted verified to the byte."""
    from gdsdiag.sweep.engines import host

    if how == "inline":
        monkeypatch.setenv("GDSDIAG_SWEEP_VERIFY", "inline")
    spec = PointSpec("host", "read", 65536, 1, total_bytes=1 << 20)
    assert host.overlapped_check(spec) == (how == "overlapped")
    sf = files.SweepFile(str(tmp_path), 1 << 20)
    try:
        sf.fill()
        good = run_point(spec, sf)
        assert good.loop["kind"] == "c" and good.loop.get("check") == ("overlapped" if how == "overlapped" else None)
        assert good.verified_bytes == good.nbytes == 1 << 20 and good.verify_seconds > 0
        bad = files.HEADER_SIZE + {"first": 5, "middle": 300_001, "last": (1 << 20) - 3}[where]
        with open(sf.path, "r+b") as f:
            f.seek(bad)
            b = f.read(1)
            f.seek(bad)
            f.write(bytes([b[0] ^ 0x01]))  # one bit
        with pytest.raises(VerifyError, match=f"data mismatch at file offset {bad} "):
            run_point(spec, sf)
    finally:
        sf.remove()


@pytest.mark.parametrize("rw", ["write", "randwrite"])
def test_a_write_point_writes_the_pattern_of_every_block(tmp_path, rw):
    """Issue 46 goal 5: the pattern a write sends is generated by the C loop's gd_fill (built for
    AVX2 beside the baseline, the CPU choosing at load time). Every block on disk afterwards holds
    its own offset's pattern, byte for byte, as numpy computes it here (not the sweep's own check),
    and the point's read-back verifies exactly what it wrote. Writes generate in the worker."""
    from gdsdiag.sweep import engines
    from gdsdiag.sweep.engines import host

    bs, size = 65536, 2 << 20
    spec = PointSpec("host", rw, bs, 2, total_bytes=4 << 20)
    assert not host.overlapped_check(spec)
    sf = files.SweepFile(str(tmp_path), size)
    try:
        with open(sf.path, "r+b") as f:  # zeros where nothing was written: no pattern by accident
            f.truncate(files.HEADER_SIZE + size)
        res = run_point(spec, sf)
        assert res.loop["kind"] == "c" and res.nbytes == 4 << 20 and res.verify_seconds > 0
        ranges = engines.written_ranges(res.written, bs)
        written = sum(n for _, n in ranges)
        assert written == size if rw == "write" else 0 < written <= size
        checked, bad, _ = engines.verify_written(sf, ranges)
        assert (checked, bad) == (written, None)
        want = bytearray(bs)
        with open(sf.path, "rb") as f:
            for start, length in ranges:
                for off in range(start, start + length, bs):
                    f.seek(files.HEADER_SIZE + off)
                    pattern.host_fill(want, off, sf.seed)
                    assert f.read(bs) == bytes(want), off
    finally:
        sf.remove()


def test_the_pattern_loops_agree_with_numpy_at_every_alignment():
    """gd_fill and gd_check (csrc/ioloop.c; their AVX2 build on this CPU) against pattern.py's numpy
    definition: lengths that are not a multiple of the vector width, offsets far into a large file,
    and one flipped bit at each end found at its byte."""
    from gdsdiag.sweep import native

    lib, why = native.load()
    if lib is None:
        pytest.skip(f"no C loop: {why}")
    ffi = native.ffi()
    seed = 0x1234_5678_9ABC_DEF1
    for n in (8, 24, 4096, 65536 + 40):
        for off in (0, 8 * 3, (3 << 40) + 4096):
            buf = ffi.new("char[]", n)
            lib.gd_fill(buf, n, off, seed)
            want = bytearray(n)
            pattern.host_fill(want, off, seed)
            assert ffi.buffer(buf, n)[:] == bytes(want), (n, off)
            assert lib.gd_check(buf, n, off, seed) == -1
            for at in (0, n - 1):
                buf[at] = bytes([want[at] ^ 0x10])
                assert lib.gd_check(buf, n, off, seed) == off + at, (n, off, at)
                buf[at] = bytes([want[at]])


def test_a_short_read_fails_the_point_not_as_a_data_mismatch(tmp_path):
    # the sweep's own file loses its tail between write and read: an I/O failure of that point
    # (the runner records it and goes on), not the "data differs" verdict that ends a sweep
    sf = files.SweepFile(str(tmp_path), 1 << 20)
    try:
        sf.fill()
        os.truncate(sf.path, files.HEADER_SIZE + (1 << 19))
        with pytest.raises(GdsdiagError) as ei:
            run_point(PointSpec("host", "read", 65536, 1, total_bytes=1 << 20), sf)
        assert not isinstance(ei.value, VerifyError)
        assert "short read at data offset" in ei.value.line() and "gdsdiag check" in ei.value.line()
    finally:
        sf.remove()
    assert os.listdir(tmp_path) == []


def test_a_corrupted_byte_fails_the_read_with_its_offset(tmp_path):
    sf = files.SweepFile(str(tmp_path), 1 << 20)
    try:
        sf.fill()
        assert files.is_sweep_file(sf.path)
        bad = files.HEADER_SIZE + 300_001
        with open(sf.path, "r+b") as f:  # the sweep's own file, between write and read
            f.seek(bad)
            b = f.read(1)
            f.seek(bad)
            f.write(bytes([b[0] ^ 0x40]))
        with pytest.raises(VerifyError, match=f"data mismatch at file offset {bad} "):
            run_point(PointSpec("host", "read", 65536, 1, total_bytes=1 << 20), sf)
    finally:
        sf.remove()
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupt_removes_the_sweep_file(tmp_path, sig):
    p = start_sweep(
        tmp_path, "--size 32M --bs 4k --threads 2 --rw randread --mode host --time 60s", settle=1.0
    )  # into the timed point
    assert any(n.startswith("gdsdiag-sweep-") for n in os.listdir(tmp_path))
    p.send_signal(sig)
    out, err = p.communicate(timeout=30)
    assert p.returncode in (130, 128 + sig), (p.returncode, err)
    assert os.listdir(tmp_path) == []
    assert "Traceback" not in err


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting ramfs needs root")
def test_filesystem_without_odirect_gets_a_clear_message(tmp_path):
    where = tmp_path / "ramfs"
    where.mkdir()
    if subprocess.run(["mount", "-t", "ramfs", "none", str(where)]).returncode != 0:
        pytest.skip("cannot mount ramfs here")
    try:
        r = sweep(str(where), "--size 4M --bs 4k --threads 1 --mode host --bytes 64k")
        assert r.returncode == 3
        assert "refuses O_DIRECT" in r.stderr and "page-cache numbers would be a mirage" in r.stderr
        assert os.listdir(where) == []
    finally:
        subprocess.run(["umount", str(where)])


def test_gpu_modes_without_a_gpu_say_so(tmp_path):
    try:
        import cupy  # noqa: F401

        pytest.skip("cupy is installed: the GPU path is tested on the GPU machine")
    except ImportError:
        pass
    r = sweep(str(tmp_path), "--size 4M --bs 4k --threads 1 --mode bounce --bytes 64k")
    assert r.returncode == 3 and "needs cupy and a CUDA GPU" in r.stderr
    assert os.listdir(tmp_path) == []


def test_pattern_gpu_and_host_agree_on_host():
    import mmap

    b = mmap.mmap(-1, 4096)
    with memoryview(b) as v:
        pattern.host_fill(v, 8192, 5)
        assert pattern.host_first_mismatch(v, 8192, 5) is None
        bad = pattern.host_first_mismatch(v, 4096, 5)  # read as if from another offset
        assert 4096 <= bad < 4104  # the very first word differs
    b.close()


def test_plot_writes_a_png_and_never_overwrites(tmp_path):
    pytest.importorskip("matplotlib", reason="--plot needs matplotlib (installed by the [test] extra)")
    png = tmp_path / "sweep.png"
    r = sweep(
        str(tmp_path), "--size 4M --bs 4k,64k --threads 1 --rw read,write --mode host --bytes 1m --plot", str(png)
    )
    assert r.returncode == 0, r.stderr
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
    r = sweep(str(tmp_path), "--size 4M --bs 4k --threads 1 --mode host --plot", str(png))
    assert r.returncode == 3 and "exists" in r.stderr and png.read_bytes() == data
    assert sorted(os.listdir(tmp_path)) == ["sweep.png"]


def test_plot_draws_every_thread_count_and_starts_at_zero(tmp_path, monkeypatch):
    """Issue 46: a 1- and 4-thread sweep drew its 4-thread line alone, and the GB/s axis did not
    start at 0. The renderer is fed a report of that shape; matplotlib's own Axes records what
    it drew."""
    pytest.importorskip("matplotlib", reason="--plot needs matplotlib (installed by the [test] extra)")
    from types import SimpleNamespace as NS

    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.axes import Axes

    from gdsdiag.render.sweep_out import write_plot

    drawn, limits = [], []
    real_plot, real_ylim = Axes.plot, Axes.set_ylim
    monkeypatch.setattr(Axes, "plot", lambda self, *a, **k: drawn.append(k.get("label")) or real_plot(self, *a, **k))
    monkeypatch.setattr(Axes, "set_ylim", lambda self, *a, **k: limits.append(k) or real_ylim(self, *a, **k))
    pts = [
        NS(mode="host", rw="read", error=None, threads=th, bs=bs, summary={"gbps": 1.0 + th + bs / 65536}, route="HOST")
        for th in (1, 4)
        for bs in (4096, 65536)
    ]
    report = NS(
        config=NS(modes=["host"], block_sizes=[4096, 65536], directory=str(tmp_path)),
        points=pts,
        ceilings={},
        machine={"hostname": "vm", "date": "2026-12-07"},
    )
    write_plot(report, str(tmp_path / "p.png"))
    assert sorted(drawn) == ["host read (1 thr) [HOST]", "host read (4 thr) [HOST]"]
    assert sum(x.get("bottom") == 0 for x in limits) == 2  # (each panel; matplotlib calls it too)
