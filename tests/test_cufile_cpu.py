"""The cuFile bindings on a machine without a GPU: the real libcufile from the nvidia-cufile wheel
loads, answers version/parameter calls, and fails driver open with a named, readable error."""

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("cffi")
import gdsdiag.cufile as cf  # noqa: E402
from gdsdiag.cufile import errors  # noqa: E402
from gdsdiag.cufile._lib import candidates  # noqa: E402

pytestmark = pytest.mark.skipif(
    not candidates(), reason="no libcufile found: pip install '.[test]' installs the nvidia-cufile wheel"
)

HAS_GPU = os.path.exists("/dev/nvidiactl")


def _child(code, cwd, env=None):
    e = dict(os.environ)
    e.pop("CUFILE_LOGFILE_PATH", None)
    e.update(env or {})
    e["PYTHONPATH"] = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.pathsep + e.get("PYTHONPATH", "")
    r = subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=60, env=e)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_loads_the_wheel_library_and_reports_version():
    L = cf.load()
    assert L.version >= 1150 and "wheel" in L.found_via and os.path.exists(L.path)
    assert L.stats_types[0] == ("CUfileStatsLevel1_v1190_t" if L.version >= 1190 else "CUfileStatsLevel1_t")


@pytest.mark.skipif(HAS_GPU, reason="a GPU is present: driver open would succeed")
def test_driver_open_fails_by_name_in_a_child_and_never_litters_cwd(tmp_path):
    res = cf.probe_driver_open(timeout_s=30)
    assert res["ok"] is False and res["hung"] is False
    assert res["name"] == "CU_FILE_NVFS_SETUP_ERROR" and res["code"] == 5033
    assert "NVFS driver initialization error" in res["error"]
    assert "libcuda.so.1" in res["log_tail"]  # cufile.log says why
    # libcufile's default is cufile.log in the cwd: the bindings redirect it
    out = _child(
        "import json, gdsdiag.cufile as cf\n"
        "try:\n    cf.Driver().open()\nexcept cf.CuFileError as e:\n"
        "    print(json.dumps({'cls': type(e).__name__, 'log': cf.load().log_path}))",
        cwd=str(tmp_path),
        env={"GDSDIAG_LOG_DIR": str(tmp_path / "logs")},
    )
    assert out["cls"] == "NvfsSetupError"
    assert os.listdir(tmp_path) == ["logs"] and os.path.exists(out["log"])


def test_parameters_by_name_round_trip_before_open(tmp_path):
    out = _child(
        "import json, gdsdiag.cufile as cf\n"
        "cf.set_parameter('PROPERTIES_MAX_DIRECT_IO_SIZE_KB', 8192)\n"
        "cf.set_parameter('CUFILE_PARAM_FORCE_COMPAT_MODE', True)\n"
        "p = cf.all_parameters()\n"
        "print(json.dumps({'dio': cf.get_parameter('PROPERTIES_MAX_DIRECT_IO_SIZE_KB'),"
        " 'force': cf.get_parameter('FORCE_COMPAT_MODE'), 'n': len(p), 'range': cf.parameter_range('PROPERTIES_IO_BATCHSIZE')}))",
        cwd=str(tmp_path),
    )
    assert out == {"dio": 8192, "force": True, "n": 27, "range": [1, 256]}
    with pytest.raises(ValueError, match="unknown parameter"):
        cf.get_parameter("NO_SUCH_PARAM")


def test_named_errors_and_ssize_decoding():
    assert errors.ERRORS["CU_FILE_HANDLE_NOT_REGISTERED"].__name__ == "HandleNotRegisteredError"
    assert errors.ERRORS["CU_FILE_DIO_NOT_SET"].code == 5020
    with pytest.raises(errors.ERRORS["CU_FILE_HANDLE_NOT_REGISTERED"], match=r"file descriptor is not registered"):
        errors.check_ssize("cuFileRead", -5027)
    with pytest.raises(cf.CuFileOSError, match="EBADF"):
        errors.check_ssize("cuFileRead", -1, 9)
    with pytest.raises(cf.CuFileOSError, match="EIO"):
        errors.check_ssize("cuFileWrite", -5)
    assert errors.check_ssize("cuFileRead", 4096) == 4096
    e = errors.error_for("cuFileBufRegister", 5011, 100)
    assert "CU_FILE_CUDA_DRIVER_ERROR" in str(e) and "CUDA_ERROR_NO_DEVICE (100)" in str(e)
    assert len(errors.ERRORS) == 48  # 5001..5050 without 5021 and 5032


def test_stats_start_without_driver_is_a_named_error():
    cf.stats.set_level(3)
    assert cf.stats.get_level() == 3
    with pytest.raises(errors.ERRORS["CU_FILE_DRIVER_NOT_INITIALIZED"]):
        cf.stats.start()


class _FakeGpuArray:
    """Stands in for a GPU array on a machine without one: only the __cuda_array_interface__
    protocol is exercised (no memory is touched)."""

    def __init__(self, shape, typestr, strides=None, ptr=0x7F0000000000):
        self.__cuda_array_interface__ = {
            "shape": shape,
            "typestr": typestr,
            "data": (ptr, False),
            "strides": strides,
            "version": 3,
        }


def test_device_pointer_protocol():
    assert cf.device_pointer(_FakeGpuArray((1024, 4), "<f4")) == (0x7F0000000000, 16384)
    assert cf.device_pointer(_FakeGpuArray((8,), "|u1", strides=(1,))) == (0x7F0000000000, 8)
    with pytest.raises(ValueError, match="non-contiguous"):
        cf.device_pointer(_FakeGpuArray((8, 8), "<f4", strides=(64, 8)))
    with pytest.raises(TypeError):
        cf.device_pointer(b"host bytes")
    assert cf.device_pointer(12345) == (12345, None)


@pytest.mark.skipif(HAS_GPU, reason="a GPU is present: registration can succeed")
def test_file_handle_registration_without_driver_fails_cleanly(tmp_path):
    p = tmp_path / "f.dat"
    p.write_bytes(b"\0" * 4096)
    fh = cf.FileHandle(str(p), "r")
    assert fh.direct is True
    with pytest.raises(cf.CuFileError):
        fh.register()
    assert fh.fd == -1  # the fd it opened was closed on failure
    with pytest.raises(errors.ERRORS["CU_FILE_HANDLE_NOT_REGISTERED"]):
        fh.read(0x1000, 4096)


def test_driver_open_is_not_called_where_it_would_spin():
    """libcufile >= 1.16 spins in cuFileDriverOpen without libcuda.so.1 (measured: 1.16.1.26 to
    1.20.0.107, gdsdiag/cufile/probe.py); 1.15 fails at once. The child decides by version."""
    from gdsdiag.cufile import probe

    assert probe._would_spin(1150) == ""
    try:
        import ctypes

        ctypes.CDLL("libcuda.so.1")
        pytest.skip("libcuda.so.1 loads here: driver open would not spin")
    except OSError:
        pass
    assert "cuFileDriverOpen not called: libcuda.so.1 cannot be loaded" in probe._would_spin(1160)
    assert "libcufile 1.20 spins" in probe._would_spin(1200)


_WHEELS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), ".whl")


@pytest.mark.skipif(HAS_GPU, reason="a GPU is present: driver open would succeed")
@pytest.mark.parametrize("ver", ["1.16.1.26", "1.20.0.107"])
def test_cufile_command_answers_at_once_with_a_spinning_release(ver, tmp_path):
    """'gdsdiag cufile' with a release that spins answers in seconds, not after the 30 s timeout.
    Needs the wheel in .whl/ (git-ignored; benchmarks/gpu_cufile_matrix.sh says how to fetch it)."""
    import glob
    import time
    import zipfile

    from conftest import GDSDIAG

    wheels = glob.glob(os.path.join(_WHEELS, f"nvidia_cufile-{ver}-*.whl"))
    if not wheels:
        pytest.skip(f"no nvidia-cufile {ver} wheel in .whl/")
    zipfile.ZipFile(wheels[0]).extractall(tmp_path)
    (lib,) = glob.glob(str(tmp_path / "nvidia" / "*" / "lib" / "libcufile.so.0"))
    t = time.monotonic()
    r = subprocess.run(
        [*GDSDIAG, "cufile", "--json", "--libcufile", lib],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "GDSDIAG_LOG_DIR": str(tmp_path / "logs")},
    )
    took = time.monotonic() - t
    doc = json.loads(r.stdout)
    assert took < 10 and r.returncode == 2, (took, r.stderr)
    assert doc["version"] == int(ver.split(".")[0]) * 1000 + int(ver.split(".")[1]) * 10
    assert doc["driver_open"]["name"] == "NOT_CALLED" and doc["driver_open"]["hung"] is False
