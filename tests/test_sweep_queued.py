"""The C loop's queued cuFile engines (cufile-batch, cufile-async: --iodepth N requests in flight per
worker) on a machine without a GPU. libcufile and libcuda cannot run here, so their batch/stream
calls and copies come from a mock, tests/csrc/fake_cufile.c (built here with cc): "device" memory
is host memory and each request is a real pread/pwrite on a real sweep file, done when the loop
waits for it. The loop, its slots, offsets, verification and error paths are the real csrc/ioloop.c;
the real libraries run it in tests/test_sweep_gpu.py on the GPU machine."""

import ctypes
import mmap
import os
import shutil
import subprocess

import pytest

from gdsdiag.sweep import files, native
from gdsdiag.sweep.engines import verify_written, written_ranges

lib, why = native.load()
pytestmark = pytest.mark.skipif(lib is None or shutil.which("cc") is None, reason=f"no compiled I/O loop ({why})")
HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture(scope="module")
def fake(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("fake") / "fake_cufile.so")
    subprocess.run(
        ["cc", "-O2", "-shared", "-fPIC", "-o", out, os.path.join(HERE, "csrc", "fake_cufile.c")], check=True
    )
    return ctypes.CDLL(out)


@pytest.fixture
def sweep_file(tmp_path):
    sf = files.SweepFile(str(tmp_path), 8 << 20)
    sf.fill()
    yield sf
    sf.remove()


def _addr(fake, name):
    return ctypes.cast(getattr(fake, name), ctypes.c_void_p).value


def run_job(fake, sf, engine, *, write=False, depth=8, bs=4096, ops=300, verify=True, random=False, own_bufs=False):
    """One worker's point through gd_run with the mock's function pointers; (job, written bitmap)."""
    import numpy as np

    f = native.ffi()
    for name in ("fake_submits", "fake_max_busy", "fake_busy_now"):
        ctypes.c_long.in_dll(fake, name).value = 0
    # the "device" buffer is page-aligned host memory here (the mock's pread/pwrite is O_DIRECT)
    LAST["gpu"] = mm = mmap.mmap(-1, bs * depth)
    gpu = ctypes.c_char.from_buffer(mm)
    scratch = ctypes.c_char.from_buffer(mmap.mmap(-1, bs))
    queues = [ctypes.create_string_buffer(256) for _ in range(depth)]  # struct fake_queue each
    fd = ctypes.c_int(sf.fd)
    blocks = sf.size // bs
    written = np.zeros((blocks + 7) // 8, dtype=np.uint8)
    keep = [gpu, scratch, queues, fd]
    j = f.new("struct gd_job *")
    j.engine = engine
    j.is_write, j.verify, j.iodepth, j.random = int(write), int(verify), depth, int(random)
    j.fd, j.bs, j.data_base = sf.fd, bs, files.HEADER_SIZE
    j.slice_start, j.slice_blocks, j.file_blocks = 0, blocks, blocks
    j.seed, j.rng, j.max_ops = sf.seed, 12345, ops
    j.gpu_buf = ctypes.addressof(gpu)
    j.scratch = f.cast("char *", ctypes.addressof(scratch))
    j.cufile_handle = f.cast("void *", ctypes.addressof(fd))
    qarr = f.new("void *[]", [f.cast("void *", ctypes.addressof(q)) for q in queues])
    j.queues = qarr
    j.cf_batch_submit = f.cast("void *", _addr(fake, "fake_submit"))
    j.cf_batch_status = f.cast("void *", _addr(fake, "fake_status"))
    j.cf_async_io = f.cast("void *", _addr(fake, "fake_write_async" if write else "fake_read_async"))
    j.cu_stream_sync = f.cast("void *", _addr(fake, "fake_stream_sync"))
    j.cu_stream_query = f.cast("void *", _addr(fake, "fake_stream_query"))
    j.cu_htod = f.cast("void *", _addr(fake, "fake_htod"))
    j.cu_dtoh = f.cast("void *", _addr(fake, "fake_dtoh"))
    if own_bufs:  # cufile-async's slot_buf: a buffer per slot, named with offset 0
        slots = [ctypes.c_char.from_buffer(mmap.mmap(-1, bs)) for _ in range(depth)]
        slot_buf = f.new("uint64_t[]", [ctypes.addressof(b) for b in slots])
        j.slot_buf = slot_buf
        keep += [slots, slot_buf]
    hist = f.new("uint64_t[]", lib.GD_HIST_N)
    stop = f.new("int *")
    wc = f.from_buffer(written)
    j.hist, j.stop, j.written = hist, stop, f.cast("uint8_t *", wc)
    lib.gd_run(j)
    keep.append((qarr, hist, stop))
    f.release(wc)
    return j, written


LAST: dict = {}  # the last run_job's shared "device" buffer
ENGINES = {"batch": "GD_ENGINE_CUFILE_BATCH", "stream": "GD_ENGINE_CUFILE_STREAM"}


@pytest.mark.parametrize("api", ["batch", "stream"])
@pytest.mark.parametrize("rw", ["read", "randread"])
def test_reads_keep_iodepth_in_flight_and_check_every_byte(fake, sweep_file, api, rw):
    j, _ = run_job(fake, sweep_file, getattr(lib, ENGINES[api]), random=rw == "randread")
    assert j.err_kind == 0, (j.err_kind, j.err)
    assert j.ops == 300 and j.bytes == 300 * 4096 and j.verified_bytes == 300 * 4096
    assert ctypes.c_long.in_dll(fake, "fake_submits").value == 300
    # fio's iodepth: the queue was kept full (8 requests outstanding), never more
    assert ctypes.c_long.in_dll(fake, "fake_max_busy").value == 8
    assert ctypes.c_long.in_dll(fake, "fake_busy_now").value == 0  # nothing left in flight


@pytest.mark.parametrize("write", [False, True])
def test_stream_slots_in_their_own_buffers(fake, sweep_file, tmp_path, write):
    # GDSDIAG_SWEEP_ASYNC_BUFFERS=based|separate: each request names its own buffer (offset 0);
    # the data read is checked there, and what is written comes from there
    sf = sweep_file
    if write:
        os.makedirs(tmp_path / "w")
        sf = files.SweepFile(str(tmp_path / "w"), 8 << 20)
        os.ftruncate(sf.fd, files.HEADER_SIZE + sf.size)
    j, written = run_job(fake, sf, lib.GD_ENGINE_CUFILE_STREAM, write=write, own_bufs=True)
    assert j.err_kind == 0 and j.ops == 300
    assert LAST["gpu"][:] == bytes(len(LAST["gpu"]))  # the shared buffer was never used
    if write:
        ranges = written_ranges(written, 4096)
        checked, bad, _ = verify_written(sf, ranges)
        sf.remove()
        assert bad is None and checked == 300 * 4096
    else:
        assert j.verified_bytes == 300 * 4096


@pytest.mark.parametrize("api", ["batch", "stream"])
def test_writes_put_the_pattern_on_disk(fake, tmp_path, api):
    sf = files.SweepFile(str(tmp_path), 8 << 20)
    os.ftruncate(sf.fd, files.HEADER_SIZE + sf.size)
    # a fresh file of zeros, so only what the loop wrote can pass the check
    j, written = run_job(fake, sf, getattr(lib, ENGINES[api]), write=True, depth=4, bs=8192, ops=200)
    assert j.err_kind == 0 and j.ops == 200
    ranges = written_ranges(written, 8192)
    assert sum(n for _, n in ranges) == 200 * 8192
    checked, bad, _ = verify_written(sf, ranges)
    sf.remove()
    assert bad is None and checked == 200 * 8192


@pytest.mark.parametrize("api", ["batch", "stream"])
def test_a_wrong_byte_is_a_mismatch_with_its_offset(fake, sweep_file, api):
    sf = sweep_file
    bad = 5 * 4096 + 123
    with open(sf.path, "r+b") as fh:
        fh.seek(files.HEADER_SIZE + bad)
        b = fh.read(1)
        fh.seek(files.HEADER_SIZE + bad)
        fh.write(bytes([b[0] ^ 0xFF]))
    j, _ = run_job(fake, sf, getattr(lib, ENGINES[api]))
    assert j.err_kind == lib.GD_ERR_MISMATCH and j.err_offset == bad
    # one flipped byte: the word is no pattern word of this file, and the report says so
    from types import SimpleNamespace

    from gdsdiag.sweep.engines.base import PointSpec, mismatch_origin

    spec = PointSpec("cufile-batch", "read", 4096, 1, iodepth=8)
    said = mismatch_origin(
        spec,
        SimpleNamespace(err=j.err, err_offset=j.err_offset, err_ret=j.err_ret, err_aux=j.err_aux, seed=sf.seed),
        sf.size,
    )
    assert said.startswith("; the word there is 0x") and "no part of this file's data" in said


@pytest.mark.parametrize("api", ["batch", "stream"])
def test_a_mismatch_says_whose_bytes_were_there(fake, sweep_file, api):
    """A request that reports success without its data leaves the slot's previous block in the
    buffer; the loop keeps the word found and the slot's previous I/O, and the report names it."""
    from types import SimpleNamespace

    from gdsdiag.sweep.engines.base import PointSpec, mismatch_origin

    sf = sweep_file
    lose = 40 * 4096  # sequential, depth 8: slot 0 reads blocks 0, 8, 16, ... so 40 follows 32
    ctypes.c_long.in_dll(fake, "fake_lose_at").value = files.HEADER_SIZE + lose
    try:
        j, _ = run_job(fake, sf, getattr(lib, ENGINES[api]))
    finally:
        ctypes.c_long.in_dll(fake, "fake_lose_at").value = -1
    # the first differing byte of the block's first word (blocks' patterns can share low bytes)
    assert j.err_kind == lib.GD_ERR_MISMATCH and lose <= j.err_offset < lose + 8
    assert j.err == 1 and j.err_aux == 32 * 4096  # slot 0, and what it read before
    spec = PointSpec("cufile-" + ("batch" if api == "batch" else "async"), "read", 4096, 1, iodepth=8)
    said = mismatch_origin(
        spec,
        SimpleNamespace(err=j.err, err_offset=j.err_offset, err_ret=j.err_ret, err_aux=j.err_aux, seed=sf.seed),
        sf.size,
    )
    assert "holds the block at data offset 131072 (-8 blocks), which slot 0 read before" in said


@pytest.mark.parametrize("api", ["batch", "stream"])
def test_a_failed_request_stops_the_worker_and_is_named(fake, sweep_file, api):
    ctypes.c_long.in_dll(fake, "fake_fail_at").value = files.HEADER_SIZE + 20 * 4096
    try:
        j, _ = run_job(fake, sweep_file, getattr(lib, ENGINES[api]))
    finally:
        ctypes.c_long.in_dll(fake, "fake_fail_at").value = -1
    assert j.err_kind == lib.GD_ERR_IO and j.err_offset == 20 * 4096
    assert 20 <= j.ops < 300  # the loop stopped and drained: nothing is left in flight
    assert ctypes.c_long.in_dll(fake, "fake_busy_now").value == 0


def test_layouts_match_the_cffi_declarations():
    # csrc/ioloop.c declares cuFile's batch structs itself (no CUDA headers at build time)
    import cffi

    from gdsdiag.cufile._lib import cdef_text

    cf = cffi.FFI()
    cf.cdef(cdef_text())  # the declarations gdsdiag.cufile uses, as installed
    assert lib.gd_sizeof_cufile(0) == cf.sizeof("CUfileIOParams_t") == 64
    assert lib.gd_sizeof_cufile(1) == cf.sizeof("CUfileIOEvents_t") == 24
    assert lib.gd_sizeof_cufile(2) == cf.sizeof("CUfileError_t") == 8
