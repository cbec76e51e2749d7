"""The cuFile bindings on a real GPU (the project's H200 machine: libcufile 1.15 in compatibility
mode, no nvidia-fs). Skips with the reason where there is no GPU, no cupy, or no udev entry.

Run there:  source .device/env.sh; gds_udev_entry /tmp; python3 -m pytest -q tests/test_cufile_gpu.py
"""

import os
import zlib

import pytest

cp = pytest.importorskip("cupy", reason="needs cupy and a GPU (pip install gdsdiag[cu13])")
pytest.importorskip("cffi")
import gdsdiag.cufile as cf  # noqa: E402
from gdsdiag.cufile import errors  # noqa: E402
from gdsdiag.platform import mounts  # noqa: E402
from gdsdiag.platform.fsroot import FsRoot  # noqa: E402

try:
    HAS_GPU = cp.cuda.runtime.getDeviceCount() > 0
except Exception:  # cupy without a driver raises CUDARuntimeError
    HAS_GPU = False
pytestmark = pytest.mark.skipif(not HAS_GPU, reason="no CUDA GPU")

MiB = 1 << 20


def _udev_ok(path):
    dev = os.stat(path).st_dev
    return bool(mounts.udev_fs_usage(FsRoot("/"), f"{os.major(dev)}:{os.minor(dev)}"))


@pytest.fixture(scope="module")
def drv():
    probe = cf.probe_driver_open(timeout_s=60)
    if not probe["ok"]:
        pytest.skip(f"cuFileDriverOpen fails here: {probe.get('error')}")
    cf.stats.set_level(3)  # before open: the level-3 per-GPU counters tell the route
    d = cf.Driver().open()
    cf.stats.start()
    yield d
    d.close()


@pytest.fixture
def workdir(tmp_path):
    if not _udev_ok(tmp_path):
        pytest.skip(
            "no udev ID_FS_USAGE entry for this filesystem: cuFileHandleRegister would fail with 5027 "
            "(run gds_udev_entry, see tests/test_cufile_gpu.py::test_register_without_udev_entry_is_5027)"
        )
    return tmp_path


def _random(nbytes, seed):
    rs = cp.random.RandomState(seed)
    return rs.randint(0, 256, size=nbytes, dtype=cp.uint8)


def test_register_without_udev_entry_is_5027(tmp_path, drv):
    if _udev_ok(tmp_path):
        pytest.skip("udev entry present: this test runs before gds_udev_entry")
    p = tmp_path / "f.dat"
    p.write_bytes(b"\0" * 4096)
    with pytest.raises(errors.ERRORS["CU_FILE_HANDLE_NOT_REGISTERED"]) as ei:
        cf.FileHandle(str(p), "r").register()
    assert "udev" in str(ei.value)


def test_driver_properties_in_compat_mode(drv):
    p = drv.properties()
    assert p.nvfs_loaded is False and (p.nvfs_major, p.nvfs_minor) == (0, 0)
    assert p.compat_allowed and "CU_FILE_ALLOW_COMPAT_MODE" in p.control_flags
    assert p.max_direct_io_size_kb > 0 and p.max_batch_io_size > 0
    assert drv.use_count() >= 0
    assert drv.bar_size_kb(0) > 0
    assert cf.get_parameter("PROPERTIES_ALLOW_COMPAT_MODE") is True


@pytest.mark.parametrize("registered", [True, False], ids=["registered", "unregistered"])
@pytest.mark.parametrize("direct", [True, False], ids=["odirect", "buffered"])
def test_64mib_roundtrip(drv, workdir, registered, direct):
    n = 64 * MiB
    src = _random(n, 1)
    dst = cp.zeros(n, dtype=cp.uint8)
    path = str(workdir / "rt.dat")
    with cf.FileHandle(path, "w+", direct=direct) as fh:
        assert fh.direct is direct
        if registered:
            with cf.BufferRegistration(src), cf.BufferRegistration(dst):
                assert fh.write(src, n, 0) == n
                assert fh.read(dst, n, 0) == n
        else:
            assert fh.write(src, n, 0) == n
            assert fh.read(dst, n, 0) == n
    cp.cuda.Device().synchronize()
    assert bool((src == dst).all())
    with open(path, "rb") as f:  # the file holds exactly what the GPU held
        assert zlib.crc32(f.read()) == zlib.crc32(cp.asnumpy(src).tobytes())


def test_unaligned_sizes_and_offsets(drv, workdir):
    n = MiB + 100
    src = _random(n + 0x1000, 2)
    dst = cp.zeros(n + 0x1000, dtype=cp.uint8)
    path = str(workdir / "un.dat")
    with cf.FileHandle(path, "w+") as fh:
        assert fh.write(src, n, file_offset=0x3007, buf_offset=0x1000) == n
        assert fh.read(dst, n, file_offset=0x3007, buf_offset=0x1000) == n
    assert bool((src[0x1000 : 0x1000 + n] == dst[0x1000 : 0x1000 + n]).all())
    with open(path, "rb") as f:
        f.seek(0x3007)
        assert f.read(n) == cp.asnumpy(src[0x1000 : 0x1000 + n]).tobytes()


def test_batch_of_64(drv, workdir):
    k, size = 64, 64 * 1024
    src = _random(k * size, 3)
    dst = cp.zeros(k * size, dtype=cp.uint8)
    with cf.FileHandle(str(workdir / "b.dat"), "w+") as fh, cf.Batch(k) as b:
        b.submit([cf.IoRequest(fh, "write", src, size, i * size, i * size, cookie=i + 1) for i in range(k)])
        ev = b.wait(k)
        assert sorted(e.cookie for e in ev) == list(range(1, k + 1))
        assert all(e.status == "COMPLETE" and e.ret == size for e in ev)
        b.submit([cf.IoRequest(fh, "read", dst, size, i * size, i * size, cookie=1000 + i) for i in range(k)])
        ev = b.wait(k)
        assert all(e.status == "COMPLETE" and e.ret == size for e in ev)
    assert bool((src == dst).all())


def test_stream_async(drv, workdir):
    n = 8 * MiB
    src = _random(n, 4)
    dst = cp.zeros(n, dtype=cp.uint8)
    stream = cp.cuda.Stream(non_blocking=True)
    with cf.FileHandle(str(workdir / "s.dat"), "w+") as fh, cf.StreamRegistration(stream):
        w = fh.write_async(src, n, 0, 0, stream)
        stream.synchronize()
        assert w.result == n
        r = fh.read_async(dst, n, 0, 0, stream)
        stream.synchronize()
        assert r.result == n
    assert bool((src == dst).all())


def test_stats_show_compat_only(drv, workdir):
    before = cf.path_mix()
    n = 4 * MiB
    buf = _random(n, 5)
    with cf.FileHandle(str(workdir / "st.dat"), "w+") as fh:
        fh.write(buf, n, 0)
        for _ in range(3):
            fh.read(buf, n, 0)
    mix = cf.path_mix().minus(before)
    r, w = mix.total("reads"), mix.total("writes")
    assert r["posix"] >= 3 and r["nvfs"] == 0 and r["p2p"] == 0
    assert w["posix"] >= 1 and w["nvfs"] == 0 and w["p2p"] == 0
    assert mix.routes()["COMPAT"] >= 4 and mix.routes()["NVFS"] == 0
    l1 = cf.stats.level1()
    assert l1["read_ops"]["ok"] >= 3 and l1["read_bytes"] >= 3 * n


def test_error_paths(drv, workdir):
    path = str(workdir / "e.dat")
    with open(path, "wb") as f:
        f.write(b"\0" * MiB)
    with pytest.raises(cf.CuFileError) as ei:  # a closed/bad descriptor
        cf.FileHandle(fd=99999).register()
    assert ei.value.name.startswith("CU_FILE_") or ei.value.name == "ERRNO"
    fh = cf.FileHandle(path, "r").register()
    fh.deregister()
    buf = cp.zeros(MiB, dtype=cp.uint8)
    with pytest.raises(errors.ERRORS["CU_FILE_HANDLE_NOT_REGISTERED"]):
        fh.read(buf, MiB)
    small = cp.zeros(4096, dtype=cp.uint8)
    with cf.FileHandle(path, "r") as fh2, cf.BufferRegistration(small):
        with pytest.raises(cf.CuFileError) as ei:  # 1 MiB into a 4 KiB registered buffer
            fh2.read(small, MiB, 0)
    assert ei.value.code != 0
    L = cf.load()  # deregistering memory never registered
    with pytest.raises(errors.ERRORS["CU_FILE_MEMORY_NOT_REGISTERED"]):
        errors.check("cuFileBufDeregister", L.lib.cuFileBufDeregister(L.ffi.cast("void *", small.data.ptr)))


def test_same_bytes_as_kvikio(drv, workdir):
    kvikio = pytest.importorskip("kvikio")
    n = 16 * MiB
    src = _random(n, 6)
    path = str(workdir / "kv.dat")
    with cf.FileHandle(path, "w+") as fh:
        assert fh.write(src, n, 0) == n
    via_kvikio = cp.zeros(n, dtype=cp.uint8)
    with kvikio.CuFile(path, "r") as f:
        assert f.read(via_kvikio) == n
    via_ours = cp.zeros(n, dtype=cp.uint8)
    with cf.FileHandle(path, "r") as fh:
        assert fh.read(via_ours, n, 0) == n
    assert bool((via_kvikio == src).all()) and bool((via_ours == via_kvikio).all())
