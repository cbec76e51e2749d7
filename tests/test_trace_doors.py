"""CUDA copies through every door and the paths of every I/O: replays of recordings made on the GPU
machine (H200) with the probes of this branch, constructed streams for the path fallbacks, and the
library search that lets probes be live before a traced program maps libcufile or libcuda."""

import json
import os
import shutil
import subprocess
import sys

import pytest
from conftest import FIXTURES, bcc_unavailable

from gdsdiag.routes import Route
from gdsdiag.trace.model.classify import classify
from gdsdiag.trace.model.events import Event
from gdsdiag.trace.probes.libfind import candidate_libraries
from gdsdiag.trace.recording import read_record

MiB = 1 << 20


def _replay(name):
    header, events = read_record(os.path.join(FIXTURES, "trace", f"trace-h200-{name}.jsonl.gz"))
    assert "GPU machine" in header["source"] and header["gdsdiag_trace_record"] == 2
    return events, classify(events, path_filter="/var/tmp/t9trace")


def test_kvikio_posix_path_copies_through_cuMemcpyBatchAsync():
    """KVIKIO_COMPAT_MODE=ON (kvikio-cu13 26.10): its pool thread preads 4 MiB tasks into a pinned
    bounce buffer and copies each to the GPU with cuMemcpyBatchAsync_v2 (libkvikio dlsyms that name:
    cpp/src/shim/cuda.cpp, cudaAPI::cuda_memcpy_async). Every read is DRAM_BOUNCE, high, the copy its
    evidence; the 16 MiB write of os.urandom bytes is host I/O."""
    events, vs = _replay("kvikio-posix-batch")
    got = [
        (v["api"], v["op"], os.path.basename(v["path"]), v["offset"], v["size"], v["route"], v["confidence"])
        for v in vs
    ]
    assert got == [("write", "write", "kvikio.dat", 0, 16 * MiB, Route.HOST, "medium")] + [
        ("pread64", "read", "kvikio.dat", i * 4 * MiB, 4 * MiB, Route.DRAM_BOUNCE, "high") for i in range(4)
    ]
    copies = [e for e in events if e.kind == "api_enter" and e.name == "cuMemcpy"]
    # the batch handler's events: unified addresses (direction tag 0), one copy per batch of one
    assert copies and all(c.args[3] == 0 and c.args[4] == 1 and c.args[5] == 0 for c in copies)
    for v in vs[1:]:
        host = int(v["evidence"][0].split("into host memory ")[1], 16)
        assert (
            v["evidence"][-1].startswith(f"CUDA copy host {host:#x} -> GPU ") and "4194304 bytes" in v["evidence"][-1]
        )


def test_torch_save_and_load_of_a_gpu_tensor():
    """tests/workloads/torch_load.py: torch.save of a 16 MiB CUDA tensor (device-to-host copy, then one
    writev of the zip header and the tensor's bytes) and torch.load(map_location="cuda") (a read of
    the storage record into host memory, then host-to-device from that buffer). The small reads of
    the zip directory never reach the GPU: host I/O."""
    _, vs = _replay("torch-load")
    big = [v for v in vs if v["size"] >= MiB]
    assert [(v["api"], v["op"], v["route"], v["confidence"]) for v in big] == [
        ("writev", "write", Route.DRAM_BOUNCE, "medium"),
        ("read", "read", Route.DRAM_BOUNCE, "high"),
    ]
    assert "one of its 2 iovecs" in big[0]["evidence"][-1] and "16777216 bytes" in big[0]["evidence"][-1]
    assert big[1]["evidence"][-1].startswith("CUDA copy host ") and "16777216 bytes" in big[1]["evidence"][-1]
    assert {(v["route"], v["size"] <= 4096) for v in vs if v["size"] < MiB} == {(Route.HOST, True)}


def test_torch_load_mmap_pages_faulted_in_by_the_copy():
    """torch.load(mmap=True, map_location="cuda") after the file's pages were written back and dropped:
    the host-to-device copy reads the mapping, and the page-cache fills it causes follow the copy's
    start. The bytes the copy took from the mapping are one DRAM_BOUNCE line, high (the copy's host
    range is the mapping's), with how many of them the device filled and how many were cached."""
    _, vs = _replay("torch-load-mmap")
    mm = [v for v in vs if v["api"] == "mmap"]
    assert [(v["offset"], v["size"], v["route"], v["confidence"]) for v in mm] == [
        (704, 16 * MiB, Route.DRAM_BOUNCE, "high")
    ]
    assert "16691200 bytes filled from the device during the trace, 86016 from the page cache" in mm[0]["evidence"]


def ev(ts_us, kind, name, args, pid=100, path=None):
    return Event(int(ts_us * 1000), pid, pid, kind, name, list(args), "fio", path)


def test_handle_path_from_proc_when_the_open_was_not_seen():
    """The descriptor was opened before the trace (or its open event lost): the reader's /proc look-up
    of the fd, carried on the registration event, names the file; the traced table still wins."""
    s = [
        ev(1, "handle", "cuFileHandleRegister", [0x5B, 40, 0], path="/var/tmp/t9trace/r.0.0"),
        ev(10, "api_enter", "cuFileRead", [0x5B, 0x7F00000000, 131072, 0, 0]),
        ev(20, "usdt", "cufio_core:cufio_px_read", [0, 0, 131072, 0, 131072, 0]),
        ev(30, "api_exit", "cuFileRead", [131072]),
    ]
    (v,) = classify(s)
    assert (v["path"], v["route"], v["confidence"]) == ("/var/tmp/t9trace/r.0.0", Route.COMPAT, "medium")
    traced = [ev(0, "open", "openat", [40], path="/data/traced.dat")]
    (v,) = classify(traced + s)
    assert v["path"] == "/data/traced.dat"


def test_cufile_read_named_by_the_file_its_pread_reads_when_the_registration_was_lost():
    """fio's forked job on the GPU machine lost its cuFileHandleRegister event under load: the pread64
    libcufile issues inside the call, on a descriptor whose open was traced, names the file."""
    s = [
        ev(0, "open", "openat", [41], path="/var/tmp/t9trace/r.1.0"),
        ev(10, "api_enter", "cuFileRead", [0x77, 0x7F00000000, 131072, 131072, 0]),
        ev(12, "sys_exit", "pread64", [41, 0x7F10000000, 131072, 131072, 0, 131072, 400]),
        ev(13, "usdt", "cufio_core:cufio_px_read", [0, 131072, 131072, 0, 131072, 0]),
        ev(30, "api_exit", "cuFileRead", [131072]),
    ]
    (v,) = classify(s)
    assert (v["path"], v["offset"], v["route"], v["confidence"]) == (
        "/var/tmp/t9trace/r.1.0",
        131072,
        Route.COMPAT,
        "high",
    )
    assert "pread64 fd 41" in v["evidence"]


def test_library_search_finds_copies_a_program_would_load(tmp_path):
    """LD_LIBRARY_PATH, an interpreter's nvidia/*/lib and the CUDA directories are searched; one path
    per file (a symlink to the same file is one candidate); other libraries are not candidates."""
    from gdsdiag.platform.libcufile import locate

    real = locate().path
    vend = tmp_path / "vendored"
    vend.mkdir()
    if real:
        shutil.copy(real, vend / "libcufile.so.0")
    else:  # the search goes by name and file identity only; a real ELF is not needed for it
        (vend / "libcufile.so.0").write_bytes(b"\x7fELF")
    os.symlink("libcufile.so.0", vend / "libcufile.so")
    (vend / "libcufile_rdma.so.1").write_bytes(b"\x7fELF")
    venv = tmp_path / "venv"
    lib = venv / "lib" / "python3.12" / "site-packages" / "nvidia" / "cu13" / "lib"
    lib.mkdir(parents=True)
    (lib / "libcufile.so.0").write_bytes(b"\x7fELF another copy")
    (venv / "bin").mkdir()
    (venv / "bin" / "python3").write_text("")
    (venv / "bin" / "python3").chmod(0o755)
    env = {"LD_LIBRARY_PATH": str(vend), "PATH": str(venv / "bin")}
    got = candidate_libraries([str(venv / "bin" / "python3"), "x.py"], env)
    mine = [os.path.realpath(p) for p in got if p.startswith(str(tmp_path))]
    assert sorted(mine) == sorted([str(vend / "libcufile.so.0"), str(lib / "libcufile.so.0")])
    # by name on PATH as well
    got2 = candidate_libraries(["python3", "x.py"], env)
    assert str(lib / "libcufile.so.0") in got2


LATE_USER = r"""
import ctypes, sys
lib = ctypes.CDLL("libcufile.so.0")  # by name: the dynamic linker finds the copy on LD_LIBRARY_PATH
v = ctypes.c_int(0)
lib.cuFileGetVersion.restype = ctypes.c_uint64
print("version", lib.cuFileGetVersion(ctypes.byref(v)) & 0xffffffff, v.value, flush=True)
"""


def _late_dlopen_trace(tmp_path, extra_args):
    from gdsdiag.platform.libcufile import locate

    wheel = locate().path
    if wheel is None:
        pytest.skip("no libcufile here (the nvidia-cufile wheel)")
    vend = tmp_path / "vendored"
    vend.mkdir(exist_ok=True)
    shutil.copy(wheel, vend / "libcufile.so.0")  # another file (inode) than any the tracer knows
    user = tmp_path / "late.py"
    user.write_text(LATE_USER)
    rec = tmp_path / "rec.jsonl"
    py = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    # the vendored copy first; what is already there stays (the GPU machine's kit finds libbcc and
    # the tracer's own packages through these two)
    keep = {k: os.environ[k] for k in ("LD_LIBRARY_PATH", "PYTHONPATH") if os.environ.get(k)}
    env = {
        **os.environ,
        "LD_LIBRARY_PATH": ":".join([str(vend), *keep.get("LD_LIBRARY_PATH", "").split(":")]).rstrip(":"),
        "PYTHONPATH": ":".join([here, *keep.get("PYTHONPATH", "").split(":")]).rstrip(":"),
    }
    r = subprocess.run(
        [sys.executable, "-m", "gdsdiag", "trace", "--json", "--record", str(rec), *extra_args, "--", py, str(user)],
        capture_output=True,
        text=True,
        timeout=400,
        cwd=str(tmp_path),
        env=env,
    )
    assert r.returncode == 0, r.stderr
    summ = next(
        x for x in (json.loads(s) for s in r.stdout.splitlines() if s.startswith("{")) if x["type"] == "summary"
    )
    _, events = read_record(str(rec))
    calls = [e for e in events if e.kind == "api_enter" and e.name == "cuFileGetVersion"]
    return summ, calls, str(vend / "libcufile.so.0")


@pytest.mark.slow
@pytest.mark.live
@pytest.mark.skipif(bcc_unavailable() is not None, reason=str(bcc_unavailable()))
def test_a_copy_loaded_late_is_probed_before_its_first_call(tmp_path):
    """A program that dlopens a libcufile found on LD_LIBRARY_PATH and calls it at once: the copy was
    probed before the program started (uprobes by inode apply to later mappings), so its first call
    is seen; the summary names the copy."""
    summ, calls, vend = _late_dlopen_trace(tmp_path, [])
    libs = {os.path.realpath(x["path"]) for x in summ["libraries"] if x["kind"] == "libcufile"}
    assert os.path.realpath(vend) in libs
    assert len(calls) == 1


def test_every_host_copy_door_libcuda_exports_gets_a_handler():
    """The cuMemcpy* exports of the GPU machine's libcuda (driver 580, CUDA 13; listed there by
    gpu_trace_run.sh): every door with a host side is probed, those without one are not."""
    from gdsdiag.trace.probes.bpf import cuda_copy_handler

    path = os.path.join(FIXTURES, "gpu-machine", "h9l-2026-11-30", "run1-libcuda-memcpy-exports.txt")
    names = [line.split()[0] for line in open(path) if line.startswith("cuMemcpy")]
    assert len(names) > 60
    probed = {n for n in names if cuda_copy_handler(n)}
    # no host side; and (not probed, docs/trace.md Limits) the 3D batch form, whose operands are
    # arrays of CUDA_MEMCPY3D_BATCH_OP structs
    no_host_side = ("AtoA", "AtoD", "DtoA", "DtoD", "Peer", "3DBatch")
    legacy = {"cuMemcpy2D", "cuMemcpy2DAsync", "cuMemcpy2DUnaligned", "cuMemcpy3D", "cuMemcpy3DAsync"}
    for n in names:
        want = not any(k in n for k in no_host_side) and n not in legacy and "AtoH" not in n and "HtoA" not in n
        assert (n in probed) == want, n
    assert {"cuMemcpyBatchAsync_v2", "cuMemcpy3DAsync_v2_ptsz", "cuMemcpyHtoDAsync_v2"} <= probed


def test_iovec_rule_needs_the_direction_and_a_size_that_fits():
    """writev of a header and a tensor: only the first iovec's base is traced. A device-to-host copy
    that fits in the I/O's bytes is taken at medium; one larger than the I/O, or host-to-device, not."""
    base = [
        ev(0, "open", "openat", [45], path="/m/model.pt"),
        ev(30, "sys_exit", "writev", [45, 0x48125360, 2, -1, 0, 16 * MiB + 704, 9000]),
    ]
    d2h = ev(5, "api_enter", "cuMemcpy", [0x7F24A0656040, 0x7F2498800000, 16 * MiB, 2])
    (v,) = classify(base[:1] + [d2h] + base[1:])
    assert (v["route"], v["confidence"]) == (Route.DRAM_BOUNCE, "medium") and "one of its 2 iovecs" in v["evidence"][-1]
    big = ev(5, "api_enter", "cuMemcpy", [0x7F24A0656040, 0x7F2498800000, 32 * MiB, 2])
    h2d = ev(5, "api_enter", "cuMemcpy", [0x7F2498800000, 0x7F24A0656040, 16 * MiB, 1])
    for c in (big, h2d):
        (v,) = classify(base[:1] + [c] + base[1:])
        assert v["route"] == Route.HOST
    # a single-iovec writev has its one buffer traced: a smaller copy of other memory is no evidence
    one = [base[0], d2h, ev(30, "sys_exit", "writev", [45, 0x48125360, 1, -1, 0, 32 * MiB, 9000])]
    (v,) = classify(one)
    assert v["route"] == Route.HOST


def test_mmap_fill_pairs_with_an_earlier_copy_only_of_its_mapping():
    """A copy that started before the page fills pairs with them only when its host range covers the
    mapped pages (the copy faulted them in); a copy of other memory does not."""
    s = [
        ev(0, "open", "openat", [46, 0, 0, 1, 77], path="/m/model.pt"),
        ev(1, "fd", "mmap", [46, 0x7F4158E00000, 16 * MiB, 0]),
        ev(20, "pages", "page_cache_fill", [1, 77, 21, 1]),
        ev(21, "pages", "page_cache_fill", [1, 77, 22, 2]),
    ]
    mine = ev(10, "api_enter", "cuMemcpy", [0x7F4156000000, 0x7F4158E002C0, 16 * MiB, 1])
    other = ev(10, "api_enter", "cuMemcpy", [0x7F4156000000, 0x7F0000000000, 16 * MiB, 1])
    (v,) = classify(s + [mine])
    assert (v["api"], v["offset"], v["size"], v["route"], v["confidence"]) == (
        "mmap",
        0x2C0,
        16 * MiB - 0x2C0,
        Route.DRAM_BOUNCE,
        "high",
    )
    assert "12288 bytes filled from the device during the trace" in v["evidence"][1]
    # a copy of other host memory after the file was mapped: staged through host memory (a loader
    # that makes a tensor of the mapped bytes first), inferred: low (no content check), and the
    # evidence says so
    (v,) = classify(s + [other])
    assert (v["route"], v["confidence"], v["size"]) == (Route.DRAM_BOUNCE, "low", 16 * MiB)
    assert "inferred from order" in v["evidence"][-1]
    # in the other direction it is not the file's bytes: the fills stay host I/O
    back = ev(10, "api_enter", "cuMemcpy", [0x7F0000000000, 0x7F4156000000, 16 * MiB, 2])
    assert [(v["route"], v["size"]) for v in classify(s + [back])] == [(Route.HOST, 3 * 4096)]
