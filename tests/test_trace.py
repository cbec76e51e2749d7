"""gdsdiag trace: the classifier on recorded and constructed streams, and live probes on this kernel
(root + bcc; .ci/run installs python3-bpfcc and a 6.1 headers tree)."""

import json
import os
import subprocess
import sys

import pytest
from conftest import FIXTURES, GDSDIAG, live

from gdsdiag.routes import Route
from gdsdiag.trace.model.classify import classify
from gdsdiag.trace.model.events import Event
from gdsdiag.trace.model.tally import log2_hist, summarize
from gdsdiag.trace.recording import read_record

COMPAT, DRAM_BOUNCE, HOST, PEER_GPU, UNKNOWN = (
    Route.COMPAT,
    Route.DRAM_BOUNCE,
    Route.HOST,
    Route.PEER_GPU,
    Route.UNKNOWN,
)

MiB = 1 << 20
HERE = os.path.dirname(os.path.abspath(__file__))
WORKLOAD = os.path.join(HERE, "workloads", "posix_bounce.py")


def ev(ts_us, kind, name, args, tid=100, pid=100, path=None):
    return Event(int(ts_us * 1000), pid, tid, kind, name, list(args), "app", path)


def handle(ts, h=0x5B, fd=91, path="/data/f.dat"):
    return [ev(ts, "open", "openat", [fd], path=path), ev(ts + 1, "handle", "cuFileHandleRegister", [h, fd, 0])]


# --- compatibility mode, as the GPU machine showed it (../shared/research/captures/
#     h200-cufile-compat-usdt-syscalls.txt: offsets, sizes, threads and order of the real events) ---


def test_compat_read_with_chunks_on_worker_threads_is_folded_into_one_call():
    h = 0xABABABAB0000005B
    s = handle(0, h, 0x5B)
    # cuFileRead 32 MiB @64 MiB: four 8 MiB pread64 on four threads, then cufio_px_read on each
    s += [ev(2041534.3, "api_enter", "cuFileRead", [h, 0x7F35A6000000, 0x2000000, 0x4000000, 0], tid=439)]
    for t, off in ((439, 0x5800000), (468, 0x4000000), (470, 0x4800000), (471, 0x5000000)):
        s.append(
            ev(2041652.4, "sys_exit", "pread64", [0x5B, 0x7F35B8001000, 0x800000, off, 0, 0x800000, 6_000_000], tid=t)
        )
    for t, off, boff in (
        (439, 0x5800000, 0x1800000),
        (468, 0x4000000, 0),
        (470, 0x4800000, 0x800000),
        (471, 0x5000000, 0x1000000),
    ):
        s.append(
            ev(
                2048509.1 + (t - 439) * 100,
                "usdt",
                "cufio_core:cufio_px_read",
                [0, off, 0x800000, boff, 0x800000, 0],
                tid=t,
            )
        )
    s.append(ev(2061700.0, "api_exit", "cuFileRead", [0x2000000], tid=439))
    (v,) = classify(s)
    assert (v["api"], v["op"], v["offset"], v["size"], v["ret"]) == (
        "cuFileRead",
        "read",
        0x4000000,
        0x2000000,
        0x2000000,
    )
    assert v["route"] == COMPAT and v["confidence"] == "high" and v["path"] == "/data/f.dat"
    assert "usdt cufio_core:cufio_px_read ×4" in v["evidence"] and any(e.startswith("pread64") for e in v["evidence"])
    assert abs(v["latency_ns"] / 1e3 - (2061700.0 - 2041534.3)) < 1


def test_unaligned_compat_read_on_libcufiles_second_fd():
    h = 0x77
    s = handle(0, h, 0x5B)
    s += [
        ev(10, "api_enter", "cuFileRead", [h, 0x7F35A6000000, 0x100064, 0x3007, 0x1000]),
        ev(30, "sys_exit", "pread64", [0x5C, 0x1C60B000, 0x100064, 0x3007, 0, 0x100064, 900_000]),
        ev(1000, "usdt", "cufio_core:cufio_px_read", [0, 0x3007, 0x100064, 0x1000, 0x100064, 0]),
        ev(1050, "api_exit", "cuFileRead", [0x100064]),
    ]
    (v,) = classify(s)
    assert v["route"] == COMPAT and v["offset"] == 0x3007 and v["size"] == 0x100064 and v["confidence"] == "high"


# --- routes the project's machines cannot run: streams constructed from NVIDIA's sources ----------


def test_constructed_from_docs_nvidia_fs_p2p_read():
    """USDT cufio_gds_read (libcufile 1.15 notes: 7 args) + NVFS_IOCTL_READ = 0x40047402
    (gds-nvidia-fs src/nvfs-core.h, _IOW('t', 2, int)) inside the call; no pread on the file."""
    s = handle(0) + [
        ev(10, "api_enter", "cuFileRead", [0x5B, 0x7F0000000000, MiB, 0, 0]),
        ev(20, "sys_exit", "ioctl", [92, 0x7FFE0000, 0, 0, 0x40047402, 0, 300_000]),
        ev(310, "usdt", "cufio_core:cufio_gds_read", [0, 0, MiB, 0, MiB, 0]),
        ev(320, "api_exit", "cuFileRead", [MiB]),
    ]
    (v,) = classify(s)
    assert (v["route"], v["subtype"], v["confidence"]) == (Route.NVFS, "nvidia-fs", "high")
    assert "ioctl NVFS_IOCTL_READ" in v["evidence"]


def test_constructed_from_docs_nvidia_fs_without_usdt_uses_ioctl_and_kernel_returns():
    """aarch64 builds without USDT: the NVFS write ioctl alone is medium confidence; with the
    kretprobe of nvfs_get_dma returning 0 (a GPU BAR address handed to the peer, nvfs-core.c) high."""
    base = handle(0) + [
        ev(10, "api_enter", "cuFileWrite", [0x5B, 0x7F0000000000, MiB, 0, 0]),
        ev(20, "sys_exit", "ioctl", [92, 0x7FFE0000, 0, 0, 0x40047404, 0, 300_000]),
    ]
    (v,) = classify(base + [ev(400, "api_exit", "cuFileWrite", [MiB])])
    assert (v["route"], v["confidence"]) == (Route.NVFS, "medium")
    (v,) = classify(base + [ev(100, "kprobe", "nvfs_get_dma", [0]), ev(400, "api_exit", "cuFileWrite", [MiB])])
    assert (v["route"], v["subtype"], v["confidence"]) == (Route.NVFS, "nvidia-fs", "high")


def test_constructed_from_docs_pci_p2pdma():
    """Kernel P2PDMA: pci_p2pdma_map_segment returns PCI_P2PDMA_MAP_BUS_ADDR = 3 (enum in
    include/linux/pci-p2pdma.h, 6.2+)."""
    s = handle(0) + [
        ev(10, "api_enter", "cuFileRead", [0x5B, 0x7F0000000000, MiB, 0, 0]),
        ev(50, "kprobe", "pci_p2pdma_map_segment", [3]),
        ev(300, "api_exit", "cuFileRead", [MiB]),
    ]
    (v,) = classify(s)
    assert (v["route"], v["subtype"]) == (Route.P2PDMA, "pci-p2pdma")


def test_constructed_from_docs_dynamic_routing_through_a_peer_gpu():
    """cufio-dr provider probes fire when cuFile routes through another GPU (rdma_dynamic_routing,
    GDS configuration guide); the probe name is one of the 20 cufio-dr notes of libcufile 1.15."""
    s = handle(0) + [
        ev(10, "api_enter", "cuFileRead", [0x5B, 0x7F0000000000, MiB, 0, 0]),
        ev(50, "usdt", "cufio-dr:cufio-dr-412", [0]),
        ev(300, "api_exit", "cuFileRead", [MiB]),
    ]
    (v,) = classify(s)
    assert v["route"] == PEER_GPU


def test_constructed_from_docs_sys_mem_staging_by_the_application():
    """The application reads into host memory and copies to the GPU (LMCache's L1-DRAM path,
    kvikio's POSIX path): pread64 outside any cuFile call, then cuMemcpyHtoDAsync_v2 from that buffer."""
    s = [
        ev(0, "open", "openat", [7], path="/kv/cache.bin"),
        ev(10, "sys_exit", "pread64", [7, 0x7F1000000000, 4 * MiB, 8 * MiB, 0, 4 * MiB, 2_000_000]),
        ev(2100, "api_enter", "cuMemcpy", [0x7F2000000000, 0x7F1000000000, 4 * MiB, 1]),
    ]
    (v,) = classify(s)
    assert (v["route"], v["confidence"], v["size"], v["offset"], v["path"]) == (
        DRAM_BOUNCE,
        "high",
        4 * MiB,
        8 * MiB,
        "/kv/cache.bin",
    )
    assert any(
        x.startswith("CUDA copy host 0x7f1000000000 -> GPU 0x7f2000000000, 4194304 bytes") for x in v["evidence"]
    )
    # without the copy it is host I/O, not on the GPU data path
    (v,) = classify(s[:2])
    assert (v["route"], v["confidence"]) == (HOST, "medium") and "the process made no CUDA copy" in v["evidence"][-1]
    # a copy in the wrong direction is no evidence; one of another buffer, of another size, after the
    # read is a staged copy (a decoder's output, a tensor built from the bytes): the data-flow model
    # takes the process's oldest file bytes not yet copied, at low (no content check), and says it
    # inferred it
    other = ev(2100, "api_enter", "cuMemcpy", [0x7F2000000000, 0x7F3000000000, 2 * MiB, 1])
    wrong = ev(2100, "api_enter", "cuMemcpy", [0x7F1000000000, 0x7F2000000000, 4 * MiB, 2])
    (v,) = classify(s[:2] + [other])
    assert (v["route"], v["confidence"]) == (DRAM_BOUNCE, "low")
    assert "inferred from order" in v["evidence"][1] and "2097152 of its 4194304 bytes" in v["evidence"][2]
    assert [v["route"] for v in classify(s[:2] + [wrong])] == [HOST]
    # a small copy (kernel arguments, a scalar) never stands for file data
    tiny = ev(2100, "api_enter", "cuMemcpy", [0x7F2000000000, 0x7F3000000000, 512, 1])
    assert [v["route"] for v in classify(s[:2] + [tiny])] == [HOST]
    # nor does a copy before the read
    early = ev(5, "api_enter", "cuMemcpy", [0x7F2000000000, 0x7F3000000000, 4 * MiB, 1])
    assert [v["route"] for v in classify(s[:1] + [early] + s[1:2])] == [HOST]
    # staged through another host buffer of the same size (CuPy's asarray copies a NumPy array into
    # pinned memory first; seen on the GPU machine): paired by order, the first copy of that size
    # after the read with no other read of that size in between (low without a content check: order
    # and size are no proof —
    # a program that only sums its 4 MiB reads while it copies other 4 MiB buffers makes the same
    # events, held-out host-stats; the evidence says it was paired one to one) ...
    staged = ev(2100, "api_enter", "cuMemcpy", [0x7F2000000000, 0x7F3000000000, 4 * MiB, 1])
    (v,) = classify(s[:2] + [staged])
    assert (v["route"], v["confidence"]) == (DRAM_BOUNCE, "low")
    assert "one read, then one copy of exactly its size" in v["evidence"][-1]
    # ... read, copy, read, copy (cupy_load.py's shape): each read its own copy, both one to one ...
    read2 = ev(5000, "sys_exit", "pread64", [7, 0x7F1000800000, 4 * MiB, 0, 0, 4 * MiB, 2_000_000])
    staged2 = ev(7000, "api_enter", "cuMemcpy", [0x7F2000400000, 0x7F3000000000, 4 * MiB, 1])
    vs = classify(s[:2] + [staged, read2, staged2])
    assert [(v["route"], v["confidence"]) for v in vs] == [(DRAM_BOUNCE, "low")] * 2
    assert all("paired one to one" in v["evidence"][-1] for v in vs)
    assert ["0x7f2000000000" in vs[0]["evidence"][1], "0x7f2000400000" in vs[1]["evidence"][1]] == [True, True]
    # ... two reads of that size before one copy: the copy takes one read's bytes (the oldest, at
    # low: either could have fed it); the other, of the same file and older than the copy, may be
    # behind it too (a decode changes sizes: a CSV parsed into floats is copied in fewer bytes than
    # were read), so it is no host I/O at medium either: DRAM_BOUNCE, low, and the line says why
    read2.ts = 20
    vs = classify(s[:2] + [read2, staged])
    assert [(v["route"], v["confidence"]) for v in vs] == [(DRAM_BOUNCE, "low"), (DRAM_BOUNCE, "low")]
    assert "staged" in vs[0]["evidence"][1] and "one to one" not in " ".join(vs[0]["evidence"])
    assert "a decode changes sizes" in vs[1]["evidence"][-1]
    # a copy of part of the buffer (the application copies a slice) still ties the read to the GPU
    part = ev(2100, "api_enter", "cuMemcpy", [0x7F2000000000, 0x7F1000100000, MiB, 0])
    assert [v["route"] for v in classify(s[:2] + [part])] == [DRAM_BOUNCE]
    # a write: the device-to-host copy into its buffer comes before it
    w = [
        ev(0, "open", "openat", [8], path="/kv/out.bin"),
        ev(5, "api_enter", "cuMemcpy", [0x7F1000000000, 0x7F2000000000, MiB, 2]),
        ev(10, "sys_exit", "pwrite64", [8, 0x7F1000000000, MiB, 0, 0, MiB, 1000]),
    ]
    (v,) = classify(w)
    assert (v["route"], v["op"], v["confidence"]) == (DRAM_BOUNCE, "write", "high")


def test_async_and_batch_calls_collect_their_evidence_later():
    s = handle(0) + [
        ev(10, "api_enter", "cuFileReadAsync", [0x5B, 0x7F0000000000, 4 * MiB, 16 * MiB, 0, 0x1234]),
        ev(12, "api_exit", "cuFileReadAsync", [0]),
        ev(5000, "sys_exit", "pread64", [91, 0x7F35C0010000, 4 * MiB, 16 * MiB, 0, 4 * MiB, 900_000], tid=101),
        ev(5100, "usdt", "cufio_core:cufio_px_read", [0, 16 * MiB, 4 * MiB, 0, 4 * MiB, 0], tid=101),
    ]
    s += [
        ev(6000, "batch_req", "cuFileRead", [0x5B, 0x7F0000000000, 65536, i * 65536, i + 1, 0x99, i]) for i in range(2)
    ]
    s += [
        ev(6500 + i, "usdt", "cufio_core:cufio_px_read", [0, i * 65536, 65536, i * 65536, 65536, 0], tid=102)
        for i in range(2)
    ]
    vs = classify(s)
    assert [(v["api"], v["route"], v["offset"], v["size"]) for v in vs] == [
        ("cuFileReadAsync", COMPAT, 16 * MiB, 4 * MiB),
        ("cuFileBatchIO", COMPAT, 0, 65536),
        ("cuFileBatchIO", COMPAT, 65536, 65536),
    ]


def test_a_call_with_no_evidence_is_unknown_and_path_filter():
    s = handle(0) + [
        ev(10, "api_enter", "cuFileRead", [0x5B, 0x7F0000000000, MiB, 0, 0]),
        ev(300, "api_exit", "cuFileRead", [MiB]),
    ]
    (v,) = classify(s)
    assert v["route"] == UNKNOWN and v["confidence"] == "low"
    app = [
        ev(0, "open", "openat", [7], path="/other/x.bin"),
        ev(10, "sys_exit", "pread64", [7, 0, MiB, 0, 0, MiB, 1000]),
    ]
    assert classify(app, path_filter="/data") == [] and len(classify(app, path_filter="/other")) == 1
    # loader reads of shared libraries and small config reads are not data I/O
    noise = [
        ev(0, "open", "openat", [3], path="/lib/x86_64-linux-gnu/libc.so.6"),
        ev(1, "sys_exit", "pread64", [3, 0, 784, 64, 0, 784, 1000]),
        ev(2, "open", "openat", [4], path="/etc/cufile.json"),
        ev(3, "sys_exit", "pread64", [4, 0, 4096, 0, 0, 512, 100]),
    ]
    assert classify(noise) == []


def test_a_verdict_is_its_json_line():
    """The classifier's verdicts are gdsdiag/schema/trace.py's IoLine documents (one definition of
    the fields): 'trace --json' writes each as it is, its keys in the type's order."""
    import typing

    from gdsdiag.schema.trace import IoLine

    routes = set()
    for name in ("cufile", "cupy-load"):  # cuFile calls' verdicts (COMPAT), host I/O's (HOST, DRAM_BOUNCE)
        rec = os.path.join(FIXTURES, "trace", f"trace-h200-{name}.jsonl.gz")
        header, events = read_record(rec)
        vs = classify(events, record_version=int(header.get("gdsdiag_trace_record", 1)))
        routes |= {v["route"] for v in vs}
        assert vs and all(list(v) == list(typing.get_type_hints(IoLine)) and v["type"] == "io" for v in vs)
        r = subprocess.run([*GDSDIAG, "trace", "--replay", rec, "--json"], capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
        assert [x for x in r.stdout.splitlines() if x.startswith('{"type": "io"')] == [json.dumps(v) for v in vs]
    assert routes == {COMPAT, HOST, DRAM_BOUNCE}


def test_output_file_holds_what_stdout_would_and_is_never_overwritten(tmp_path):
    """-o FILE: the verdict lines and the summary go to a new 0600 file (text or --json), byte for
    byte what stdout gets without it; stdout then stays the traced program's. An existing file is
    refused in one line and left as it was."""
    rec = os.path.join(FIXTURES, "trace", "trace-h200-cupy-load.jsonl.gz")
    for fmt in (["--json"], []):
        plain = subprocess.run([*GDSDIAG, "trace", "--replay", rec, *fmt], capture_output=True, text=True, timeout=300)
        out = tmp_path / f"v{len(fmt)}.txt"
        r = subprocess.run(
            [*GDSDIAG, "trace", "--replay", rec, *fmt, "-o", str(out)], capture_output=True, text=True, timeout=300
        )
        assert plain.returncode == r.returncode == 0, r.stderr
        assert r.stdout == "" and out.read_text() == plain.stdout and "DRAM_BOUNCE" in plain.stdout
        assert os.stat(out).st_mode & 0o777 == 0o600
        r = subprocess.run([*GDSDIAG, "trace", "--replay", rec, *fmt, "-o", str(out)], capture_output=True, text=True)
        assert r.returncode == 3 and "exists" in r.stderr and "Traceback" not in r.stderr
        assert out.read_text() == plain.stdout
    # a usage error, or a trace that cannot start, leaves no empty file behind
    gone = tmp_path / "never.jsonl"
    r = subprocess.run(
        [*GDSDIAG, "trace", "--replay", str(tmp_path / "none.jsonl"), "-o", str(gone)], capture_output=True, text=True
    )
    assert r.returncode in (3, 4) and not gone.exists(), r.stderr
    r = subprocess.run([*GDSDIAG, "trace", "--replay", rec, "-o", ""], capture_output=True, text=True)
    assert r.returncode == 4 and "empty path" in r.stderr and r.stdout == ""
    # --ebpf -o: the program text to the file (no root or bcc needed to print it)
    prog = tmp_path / "prog.c"
    r = subprocess.run([*GDSDIAG, "trace", "--ebpf", "-o", str(prog)], capture_output=True, text=True)
    plain = subprocess.run([*GDSDIAG, "trace", "--ebpf"], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout == "" and prog.read_text() == plain.stdout and "BPF" in plain.stdout


def test_summary_histogram_and_percentiles():
    assert log2_hist([0.5, 1, 3, 900]) == [(0, 0, 1), (1, 1, 1), (2, 3, 1)] + [
        (1 << (b - 1), (1 << b) - 1, 0) for b in range(3, 10)
    ] + [(512, 1023, 1)]
    # each bucket holds [2^(b-1), 2^b) µs: a power of two opens its bucket, a nanosecond below it
    # closes the one before (the edges are found by bisection in the sorted latencies)
    edges = [0.0, 0.999, 1.0, 1.999, 2.0, 3.999, 4.0, 1023.999, 1024.0]
    assert log2_hist(edges) == [(0, 0, 2), (1, 1, 2), (2, 3, 2), (4, 7, 1)] + [
        (1 << (b - 1), (1 << b) - 1, 0) for b in range(4, 10)
    ] + [(512, 1023, 1), (1024, 2047, 1)]
    assert log2_hist([]) == []
    s = [ev(0, "open", "openat", [7], path="/d/f")] + [
        ev(10 + i, "sys_exit", "pread64", [7, 0, MiB, 0, 0, MiB, (i + 1) * 1000]) for i in range(100)
    ]
    summ = summarize(classify(s))
    assert summ[HOST]["count"] == 100 and summ[HOST]["bytes"] == 100 * MiB
    assert summ[HOST]["p50_us"] == 50.0 and summ[HOST]["p99_us"] == 99.0


def test_record_errors(tmp_path):
    from gdsdiag.errors import GdsdiagError

    bad = tmp_path / "x.jsonl"
    bad.write_text("hello\n")
    with pytest.raises(GdsdiagError, match="not a gdsdiag trace record"):
        read_record(str(bad))
    r = subprocess.run([sys.executable, "-m", "gdsdiag", "trace", "--replay", str(bad)], capture_output=True, text=True)
    assert r.returncode == 3 and "not a gdsdiag trace record" in r.stderr and "Traceback" not in r.stderr


# --- live, on this kernel ----------------------------------------------------------------------------


def _trace(tmp_path, *cmd):
    rec = tmp_path / "rec.jsonl"
    # in tmp_path: libcufile writes its cufile.log into the working directory
    env = {**os.environ, "PYTHONPATH": os.path.dirname(HERE) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    r = subprocess.run(
        [sys.executable, "-m", "gdsdiag", "trace", "--json", "--per-io", "--record", str(rec), "--", *cmd],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=str(tmp_path),
        env=env,
    )
    lines = [json.loads(x) for x in r.stdout.splitlines() if x.startswith("{")]
    return r, [x for x in lines if x["type"] == "io"], next(x for x in lines if x["type"] == "summary"), rec


@pytest.mark.slow
@live
def test_live_posix_workload_without_a_gpu_is_host_io(tmp_path):
    """O_DIRECT pwritev/preadv through a host buffer nobody copies to a GPU: HOST, not DRAM_BOUNCE."""
    r, ios, summ, rec = _trace(tmp_path, sys.executable, WORKLOAD, str(tmp_path))
    assert r.returncode == 0, r.stderr
    mine = [v for v in ios if v["path"] and v["path"].endswith("bounce.dat")]
    assert [(v["op"], v["offset"], v["size"]) for v in mine] == [("write", i * MiB, MiB) for i in range(4)] + [
        ("read", i * MiB, MiB) for i in range(4)
    ]
    assert all(v["route"] == "HOST" for v in mine)
    assert summ["lost_events"] == 0 and summ["traced_exit_code"] == 0
    assert any(p.startswith(("tracepoint raw_syscalls", "raw tracepoint sys_enter")) for p in summ["probes_attached"])
    # the recording re-analyses to the same verdicts anywhere
    r2 = subprocess.run(
        [sys.executable, "-m", "gdsdiag", "trace", "--replay", str(rec), "--json"], capture_output=True, text=True
    )
    again = [json.loads(x) for x in r2.stdout.splitlines() if '"type": "io"' in x]
    assert [(v["op"], v["offset"], v["size"], v["route"]) for v in again if v["path"].endswith("bounce.dat")] == [
        (v["op"], v["offset"], v["size"], v["route"]) for v in mine
    ]


@pytest.mark.slow
@live
def test_live_uprobes_and_usdt_fire_on_the_real_libcufile(tmp_path):
    pytest.importorskip("cffi")
    from gdsdiag.platform.libcufile import locate

    if locate().path is None:
        pytest.skip("no libcufile")
    code = "import gdsdiag.cufile as cf\ncf.version()\ntry:\n    cf.Driver().open()\nexcept cf.CuFileError as e:\n    print(e.name)\n"
    r, ios, summ, rec = _trace(tmp_path, sys.executable, "-c", code)
    assert r.returncode == 0, r.stderr
    header, events = read_record(str(rec))
    names = [(e.kind, e.name) for e in events]
    assert ("api_enter", "cuFileGetVersion") in names and ("api_exit", "cuFileGetVersion") in names
    opened = [e for e in events if e.kind == "api_exit" and e.name == "cuFileDriverOpen"]
    assert opened
    if os.path.exists("/dev/nvidiactl"):
        assert opened[0].args[0] == 0  # a GPU machine opens the driver
    else:
        assert opened[0].args[0] == 5033  # CU_FILE_NVFS_SETUP_ERROR without a GPU
        assert ("usdt", "cufio_core:cufio_core-1106") in names  # the USDT probe on the failing-open path
    assert any(a.startswith("usdt cufio_core:cufio_px_read") for a in header["probes_attached"])
    assert any(a.startswith("uprobes 11 cuFile API functions and ") for a in header["probes_attached"])


@pytest.mark.slow
@live
def test_kernel_probe_programs_load_through_the_verifier(probe_program):
    from gdsdiag.trace.probes.bpf import import_bcc, kprobes_text

    bcc = import_bcc()
    b = bcc.BPF(text=kprobes_text())
    for fn in (
        "kret_nvfs_blk_rq_map_sg",
        "kret_nvfs_dma_map_sg_attrs",
        "kret_nvfs_iter_start",
        "kret_nvfs_get_dma",
        "kret_pci_p2pdma_map_segment",
        "kprobe_nvfs_io_start_op",
    ):
        assert b.load_func(fn, bcc.BPF.KPROBE).fd >= 0
    b.cleanup()
    for fn in ("api_batch_submit_enter", "memcpy_2d", "memcpy_htod", "memcpy_dtoh", "memcpy_any", "api_read_enter"):
        assert probe_program.load_func(fn, bcc.BPF.KPROBE).fd >= 0


def test_not_root_and_missing_bcc_are_one_clear_line(monkeypatch):
    from gdsdiag.errors import GdsdiagError
    from gdsdiag.trace.probes import bpf

    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(GdsdiagError, match="needs root") as ei:
        bpf.preflight()
    assert "sudo" in ei.value.fix
    monkeypatch.setitem(sys.modules, "bcc", None)  # an import of bcc fails as if not installed
    monkeypatch.setattr(bpf.glob, "glob", lambda pattern: [])
    monkeypatch.setattr(bpf.os.path, "isdir", lambda p: False)
    with pytest.raises(GdsdiagError, match="bcc is not installed") as ei:
        bpf.import_bcc()
    assert "apt-get install python3-bpfcc" in ei.value.fix


# --- replays of real recordings from the GPU machine ------------------------------------------------


def test_replay_gpu_machine_cufile_workload_all_compat_with_exact_shapes():
    header, events = read_record(os.path.join(FIXTURES, "trace", "trace-h200-cufile.jsonl.gz"))
    assert "GPU machine" in header["source"]
    vs = classify(events)
    f = "/var/tmp/tw/gdsdiag-trace-workload.dat"
    assert [(v["api"], v["op"], v["offset"], v["size"]) for v in vs] == [
        ("cuFileWrite", "write", 0, 8 * MiB),
        ("cuFileRead", "read", 0, 8 * MiB),
        ("cuFileRead", "read", 0x3007, MiB + 100),
        ("cuFileWrite", "write", 64 * MiB, 32 * MiB),
        ("cuFileRead", "read", 64 * MiB, 32 * MiB),
    ] + [("cuFileBatchIO", "read", i * 65536, 65536) for i in range(8)] + [
        ("cuFileReadAsync", "read", 16 * MiB, 4 * MiB)
    ] + [("cuFileRead", "read", i * 4 * MiB, 4 * MiB) for i in range(4)]
    assert all(v["route"] == COMPAT and v["path"] == f for v in vs)
    sync = [v for v in vs if v["api"] in ("cuFileRead", "cuFileWrite")]
    assert all(v["confidence"] == "high" for v in sync)  # cufio_px_* USDT and pread64/pwrite64 both seen
    assert "usdt cufio_core:cufio_px_read ×4" in vs[4]["evidence"] and "pread64 fd 37 ×4" in vs[4]["evidence"]
    assert vs[2]["evidence"][0] == "pread64 fd 38"  # the unaligned read: libcufile's second fd
    assert {v["comm"] for v in vs[-4:]} == {"kvikio-0"}  # kvikio's pool thread, through cuFile
    assert all(v["evidence"] == ["io_submit"] for v in vs[5:13])  # compat batch I/O goes through Linux AIO


def test_replay_gpu_machine_application_staging_is_dram_bounce_with_cuda_copies():
    """A version-1 record (its preadv2/pwritev2 carry the iovec array's address, not the buffer's):
    the bounce I/O matches its CUDA copy by direction, size and time (medium); the sweep's own file
    preparation and verification touch no GPU buffer and are HOST."""
    header, events = read_record(os.path.join(FIXTURES, "trace", "trace-h200-bounce.jsonl.gz"))
    assert header["gdsdiag_trace_record"] == 1
    vs = [v for v in classify(events, record_version=1) if v["path"] and "gdsdiag-sweep-" in v["path"]]
    bounce = [(v["op"], v["size"], v["route"], v["confidence"]) for v in vs if v["size"] == MiB]
    # (the reads: staged by order, no content check in this recording: low)
    assert bounce == [("read", MiB, DRAM_BOUNCE, "low")] * 8 + [("write", MiB, DRAM_BOUNCE, "medium")] * 8
    assert all(any(e.startswith("CUDA copy") for e in v["evidence"]) for v in vs if v["size"] == MiB)
    prep = [v for v in vs if v["size"] == 8 * MiB]
    assert len(prep) == 9 and all(v["route"] == HOST for v in prep)
    assert not [
        v for v in classify(events, record_version=1) if v["route"] in (COMPAT, Route.NVFS, Route.P2PDMA, Route.RDMA)
    ]


def test_usdt_argument_specs_become_register_and_memory_reads():
    """The operand forms libcufile 1.15's route probes use (readelf -n of the wheel's library,
    e.g. cufio_px_read: '-4@72(%rbx) -8@48(%rbx) 8@40(%rbx) -8@56(%rbx) -8@%rax -4@96(%rbp)')."""
    from gdsdiag.trace.probes.usdt import Site, UnsupportedSpec, arg_reader, handler, layout

    assert arg_reader("-8@%rax", 0) == "    v[0] = (s64)ctx->ax;\n"
    assert arg_reader("-4@%r13d", 1) == "    v[1] = (s32)ctx->r13;\n"
    assert arg_reader("1@%al", 2) == "    v[2] = (u8)ctx->ax;\n"
    assert (
        arg_reader("8@40(%rbx)", 3)
        == "    { u64 t = 0; bpf_probe_read_user(&t, sizeof(t), (void *)(ctx->bx + (40))); v[3] = t; }\n"
    )
    assert "ctx->sp + (-16)" in arg_reader("-4@-16(%rsp)", 0)
    assert arg_reader("4@$5", 0) == "    v[0] = (u32)(5);\n"
    with pytest.raises(UnsupportedSpec):
        arg_reader("8@(%rax,%rbx,8)", 0)
    s = Site("cufio_core:cufio_px_read", 0x81A6D, "-4@72(%rbx) -8@48(%rbx) 8@40(%rbx) -8@56(%rbx) -8@%rax -4@96(%rbp)")
    assert layout(s, 3) == ("cufio_core:cufio_px_read", ("-4@72(%rbx)", "-8@48(%rbx)", "8@40(%rbx)"))
    assert layout(s, 0) == ("cufio_core:cufio_px_read", ())
    c = handler("usdt_0", 0, layout(s, 3)[1])
    assert (
        c.startswith("int usdt_0(struct pt_regs *ctx)")
        and "emit(ctx, EV_USDT, 0, v[0], v[1], v[2], v[3], v[4], v[5], 3)" in c
    )


def _gpu_fixture(name):
    header, events = read_record(os.path.join(FIXTURES, "trace", f"trace-h200-{name}.jsonl.gz"))
    assert "GPU machine" in header["source"] and header["gdsdiag_trace_record"] == 2
    return [
        (v["api"], v["op"], os.path.basename(v["path"]), v["offset"], v["size"], v["route"], v["confidence"])
        for v in classify(events, path_filter="/var/tmp/t9trace")
    ], classify(events, path_filter="/var/tmp/t9trace")


def test_replay_gpu_machine_cupy_loader_numpy_then_asarray():
    """tests/workloads/cupy_load.py on the H200: tofile (no GPU), fromfile + cupy.asarray (CuPy copies
    the NumPy buffer into pinned memory, then host-to-device: staged, each read paired with the first
    8 MiB copy after it, medium: inferred from order), asnumpy + tofile (device-to-host into the very
    buffer written: high)."""
    got, vs = _gpu_fixture("cupy-load")
    E = 8 * MiB
    assert got == [
        ("write", "write", "cupy-src.dat", 0, E, HOST, "medium"),
        ("read", "read", "cupy-src.dat", 0, E, DRAM_BOUNCE, "low"),
        ("write", "write", "cupy-out.dat", 0, E, DRAM_BOUNCE, "high"),
        ("read", "read", "cupy-out.dat", 0, E, DRAM_BOUNCE, "low"),
    ]
    assert "staged" in vs[1]["evidence"][1] and vs[2]["evidence"][-1].startswith("CUDA copy GPU ")
    # each read its own copy: the first to the cupy.asarray buffer, the second to the check's
    assert vs[1]["evidence"][1].split(" -> GPU ")[1][:14] != vs[3]["evidence"][1].split(" -> GPU ")[1][:14]


def test_replay_gpu_machine_kvikio_through_cufile_and_its_own_posix_path():
    got, _ = _gpu_fixture("kvikio-cufile")
    assert got == [("write", "write", "kvikio.dat", 0, 16 * MiB, HOST, "medium")] + [
        ("cuFileRead", "read", "kvikio.dat", i * 4 * MiB, 4 * MiB, COMPAT, "high") for i in range(4)
    ]
    # KVIKIO_COMPAT_MODE=ON: kvikio's pool thread preads 4 MiB tasks into one host bounce buffer.
    # This recording predates the cuMemcpyBatchAsync probe (kvikio's copy door): no copy in it, so
    # the reads are only tied to the file. tests/test_trace_doors.py replays one made with it.
    got, vs = _gpu_fixture("kvikio-posix")
    assert [g[:5] for g in got] == [("write", "write", "kvikio.dat", 0, 16 * MiB)] + [
        ("pread64", "read", "kvikio.dat", i * 4 * MiB, 4 * MiB) for i in range(4)
    ]
    assert {v["comm"] for v in vs[1:]} == {"kvikio-0"}


def test_cuda_copy_doors_by_name():
    """Which libcuda exports get which handler (names from libcuda.so.1's .dynsym on the GPU machine,
    tests/fixtures/gpu-machine/trace-real-apps-t9.txt)."""
    from gdsdiag.trace.probes.bpf import cuda_copy_handler as h

    assert [
        h(s)
        for s in (
            "cuMemcpyHtoD_v2",
            "cuMemcpyHtoDAsync_v2_ptsz",
            "cuMemcpyDtoH_v2_ptds",
            "cuMemcpyAsync_ptsz",
            "cuMemcpy",
            "cuMemcpy2DAsync_v2",
            "cuMemcpy2D_v2_ptds",
            "cuMemcpy2D",
            "cuMemcpyPeer",
            "cuMemcpy3D_v2",
            "cuMemcpy3DAsync_v2_ptsz",
            "cuMemcpyBatchAsync_v2",  # CUDA 13's name (cuda.h #define); what kvikio dlsyms
            "cuMemcpyBatchAsync_ptsz",
            "cuMemcpy3DBatchAsync_v2",
            "cuMemcpy3D",  # the legacy 32-bit-field layout
        )
    ] == [
        "memcpy_htod",
        "memcpy_htod",
        "memcpy_dtoh",
        "memcpy_any",
        "memcpy_any",
        "memcpy_2d",
        "memcpy_2d",
        None,
        None,
        "memcpy_3d",
        "memcpy_3d",
        "memcpy_batch",
        "memcpy_batch",
        None,
        None,
    ]
