"""Verdicts backed by the bytes (issue 43): a staged copy is tied to a file only where its source's
fingerprint (what the probe reads of a copy's host memory, probes/cufile_trace.c copy_content) is the
file's own bytes at the offset proposed; order alone never gives more than low.

The streams are constructed (the CPU machine has no GPU to copy to) over real files on disk, which
the content check reads as the live trace does: each copy's fingerprint is made of the bytes the
program would copy. The negative controls are the shapes issue 43 names: the same size and rhythm
as the file reads, interleaved, in one process and across a worker, a buffer that once held the
file's bytes and was overwritten; none may give a byte DRAM_BOUNCE at medium or high."""

from __future__ import annotations

import os
import random
import time

import pytest

from gdsdiag.routes import Route
from gdsdiag.trace.filesample import LiveContentCheck
from gdsdiag.trace.model.classify import Classifier, classify
from gdsdiag.trace.model.content import SAMPLE_AT, answer_event, sample_hash
from gdsdiag.trace.model.events import Event

MiB = 1 << 20
CHUNK = 4 * MiB
BUF, PINNED = 0x7F1000000000, 0x7F3000000000


def fingerprint(b: bytes, flag: int = 0) -> int:
    """What the probe puts in a copy's a6 for a source holding B."""
    return (flag << 60) | (sample_hash(b[:32]) << 30) | sample_hash(b[SAMPLE_AT : SAMPLE_AT + 32])


class Stream:
    """Events stamped on the probes' clock (CLOCK_MONOTONIC), after the files were written: the
    content check compares a file's mtime with its read's time."""

    def __init__(self) -> None:
        self.t0 = time.monotonic_ns()
        self.events: list[Event] = []

    def ev(self, us: float, kind: str, name: str, args: list, pid: int = 100, path: str | None = None) -> None:
        self.events.append(Event(self.t0 + int(us * 1000), pid, pid, kind, name, list(args), "app", path))

    def open(self, us: float, fd: int, path: str, pid: int = 100) -> None:
        self.ev(us, "open", "openat", [fd], pid=pid, path=path)

    def read(self, us: float, fd: int, buf: int, size: int, off: int, pid: int = 100) -> None:
        self.ev(us, "sys_exit", "pread64", [fd, buf, size, off, 0, size, 1000], pid=pid)

    def copy(self, us: float, src: int, data: bytes, flag: int = 0, pid: int = 100) -> None:
        self.ev(
            us, "api_enter", "cuMemcpy", [0x7E0000000000, src, len(data), 1, 0, 0, fingerprint(data, flag)], pid=pid
        )

    def classify(self) -> list[dict]:
        c = Classifier()
        check = LiveContentCheck()
        c.use_content(check)
        for e in sorted(self.events, key=lambda e: e.ts):
            c.feed(e)
        c.flush()
        self.answers = check.take_answers()
        check.close()
        return c.drain()


@pytest.fixture
def data(tmp_path):
    """Two files of random bytes (8 chunks each) and the bytes of each."""
    rng = random.Random(43)
    out = {}
    for name in ("weights.bin", "other.bin"):
        b = rng.randbytes(8 * CHUNK)
        p = tmp_path / name
        p.write_bytes(b)
        out[name] = (str(p), b)
    return out


def _no_false_bounce(vs, path):
    mine = [v for v in vs if v["path"] == path]
    assert mine, "no verdict for the file"
    bad = [v for v in mine if v["route"] == Route.DRAM_BOUNCE and v["confidence"] in ("medium", "high")]
    assert not bad, bad[0]["evidence"]
    return mine


def test_a_staged_loader_is_high_by_content(data):
    """Read a chunk into a buffer, the CPU copies it into pinned memory, the pinned buffer goes to the
    GPU: every read DRAM_BOUNCE, high, its line saying the bytes were checked."""
    path, b = data["weights.bin"]
    s = Stream()
    s.open(0, 5, path)
    for i in range(8):
        s.read(10 + 100 * i, 5, BUF, CHUNK, i * CHUNK)
        s.copy(60 + 100 * i, PINNED, b[i * CHUNK : (i + 1) * CHUNK])
    vs = s.classify()
    assert [(v["route"], v["confidence"]) for v in vs] == [(Route.DRAM_BOUNCE, "high")] * 8
    assert all(f"at offset {i * CHUNK}" in " ".join(v["evidence"]) for i, v in enumerate(vs))
    assert all("checked by content" in " ".join(v["evidence"]) for v in vs)


def test_checksummed_file_beside_copies_of_other_data_is_never_dram_bounce(data):
    """Issue 43's false DRAM_BOUNCE: a file read in chunks only to checksum it, while buffers of the
    same size, made in memory, are copied to the GPU in the same loop. It was DRAM_BOUNCE medium,
    to_gpu_share 1.0. Now: not one byte on DRAM_BOUNCE; each read says copies followed that were
    not of its bytes."""
    path, _ = data["weights.bin"]
    rng = random.Random(7)
    s = Stream()
    s.open(0, 5, path)
    for i in range(8):
        s.read(10 + 100 * i, 5, BUF, CHUNK, i * CHUNK)
        s.copy(60 + 100 * i, PINNED, rng.randbytes(CHUNK))
    mine = _no_false_bounce(s.classify(), path)
    assert {v["route"] for v in mine} == {Route.UNKNOWN}
    assert all("not of these bytes" in " ".join(v["evidence"]) for v in mine)


def test_interleaved_checksum_and_staged_files_each_get_their_own_route(data):
    """Two files waiting at every copy: the copies carry weights.bin's bytes, other.bin is only
    read. Order could not tell which (low, 'not known'); content does: weights high, other HOST."""
    w, wb = data["weights.bin"]
    o, _ = data["other.bin"]
    s = Stream()
    s.open(0, 5, w)
    s.open(1, 6, o)
    for i in range(6):
        s.read(10 + 100 * i, 6, BUF + 0x1000000, CHUNK, i * CHUNK)  # (the checksum file first: oldest)
        s.read(20 + 100 * i, 5, BUF, CHUNK, i * CHUNK)
        s.copy(60 + 100 * i, PINNED, wb[i * CHUNK : (i + 1) * CHUNK])
    vs = s.classify()
    assert {(v["route"], v["confidence"]) for v in vs if v["path"] == w} == {(Route.DRAM_BOUNCE, "high")}
    assert {v["route"] for v in _no_false_bounce(vs, o)} == {Route.HOST}


def test_a_worker_pool_s_reads_copied_by_the_main_process(data):
    """A forked worker reads, the main process copies from shared memory: the job's bytes, high where
    the copy carries them; a second job shape copying other data leaves the worker's reads unbounced."""
    path, b = data["weights.bin"]
    for copies_file in (True, False):
        s = Stream()
        s.ev(0, "proc", "adopt", [1])
        s.ev(1, "proc", "fork", [100, 200])
        s.open(2, 5, path, pid=200)
        rng = random.Random(3)
        for i in range(4):
            s.read(10 + 100 * i, 5, BUF, CHUNK, i * CHUNK, pid=200)
            data_i = b[i * CHUNK : (i + 1) * CHUNK] if copies_file else rng.randbytes(CHUNK)
            s.copy(60 + 100 * i, PINNED, data_i, pid=100)
        vs = s.classify()
        if copies_file:
            assert {(v["route"], v["confidence"], v["pid"]) for v in vs} == {(Route.DRAM_BOUNCE, "high", 200)}
            assert all("another process of the same traced tree" in " ".join(v["evidence"]) for v in vs)
        else:
            _no_false_bounce(vs, path)


def test_a_buffer_overwritten_after_its_read_then_copied_is_not_the_files(data):
    """Read into B, the program writes other bytes into B, then copies B: the address says 'the
    read's buffer' (it was DRAM_BOUNCE high); the probe saw B no longer hold what the read put there
    (FLAG_CHANGED), and the file's bytes at that offset are not the copy's either."""
    path, _ = data["weights.bin"]
    rng = random.Random(5)
    s = Stream()
    s.open(0, 5, path)
    s.read(10, 5, BUF, CHUNK, 0)
    s.copy(60, BUF, rng.randbytes(CHUNK), flag=2)
    (v,) = _no_false_bounce(s.classify(), path)
    assert v["route"] == Route.UNKNOWN and "after other bytes were written into it" in " ".join(v["evidence"])


def test_the_probe_s_changed_flag_is_overruled_by_the_file_s_bytes(data):
    """FLAG_CHANGED compares with the last read into that address the probe saw: a shorter read in
    between (not kept) makes it say 'changed' of a buffer that holds the big read's bytes after all;
    the file's own bytes decide then."""
    path, b = data["weights.bin"]
    s = Stream()
    s.open(0, 5, path)
    s.read(10, 5, BUF, CHUNK, 0)
    s.copy(60, BUF, b[:CHUNK], flag=2)
    (v,) = s.classify()
    assert (v["route"], v["confidence"]) == (Route.DRAM_BOUNCE, "high")


def test_uniform_bytes_prove_nothing(tmp_path):
    """A file of zeros and a copy of zeros: the fingerprints match, but would for any zeros: inferred
    from order, low, never high."""
    p = tmp_path / "zeros.bin"
    p.write_bytes(bytes(2 * CHUNK))
    s = Stream()
    s.open(0, 5, str(p))
    s.read(10, 5, BUF, CHUNK, 0)
    s.copy(60, PINNED, bytes(CHUNK))
    (v,) = s.classify()
    assert (v["route"], v["confidence"]) == (Route.DRAM_BOUNCE, "low")
    assert "not checked by content" in " ".join(v["evidence"])


def test_a_file_written_after_its_read_is_not_compared(data):
    """The file's bytes now are not those the read put in memory: no comparison, order, low."""
    path, b = data["weights.bin"]
    s = Stream()
    s.open(0, 5, path)
    s.read(10, 5, BUF, CHUNK, 0)
    s.copy(60, PINNED, b[:CHUNK])
    time.sleep(0.01)
    os.utime(path)  # (its mtime now: after the read's time)
    (v,) = s.classify()
    assert (v["route"], v["confidence"]) == (Route.DRAM_BOUNCE, "low")
    assert "could not be compared" in " ".join(v["evidence"])


def test_a_copy_the_probe_could_not_read_is_inferred_from_order(data):
    path, _ = data["weights.bin"]
    s = Stream()
    s.open(0, 5, path)
    s.read(10, 5, BUF, CHUNK, 0)
    s.ev(60, "api_enter", "cuMemcpy", [0x7E0000000000, PINNED, CHUNK, 1, 0, 0, 0])
    (v,) = s.classify()
    assert (v["route"], v["confidence"]) == (Route.DRAM_BOUNCE, "low")
    assert "the probe could not read the copy's source" in " ".join(v["evidence"])


def test_a_replay_uses_the_checks_the_live_trace_made(data, tmp_path):
    """A replay cannot read the traced node's files: the recording carries each check's answer, and
    the replay of the negative control and of the loader gives the live verdicts, with the files
    gone."""
    w, wb = data["weights.bin"]
    o, _ = data["other.bin"]
    s = Stream()
    s.open(0, 5, w)
    s.open(1, 6, o)
    for i in range(4):
        s.read(10 + 100 * i, 6, BUF + 0x1000000, CHUNK, i * CHUNK)
        s.read(20 + 100 * i, 5, BUF, CHUNK, i * CHUNK)
        s.copy(60 + 100 * i, PINNED, wb[i * CHUNK : (i + 1) * CHUNK])
    live = s.classify()
    recorded = s.events + [answer_event(s.t0, p, off, fs) for p, off, fs in s.answers]
    os.unlink(w)
    os.unlink(o)
    replayed = classify(recorded)
    key = [(v["path"], v["offset"], v["route"], v["confidence"]) for v in live]
    assert [(v["path"], v["offset"], v["route"], v["confidence"]) for v in replayed] == key
    assert {(p, r) for p, _, r, _ in key} == {(w, Route.DRAM_BOUNCE), (o, Route.HOST)}
    # without the answers (a recording made before the checks): order, low, for the same stream
    assert {v["confidence"] for v in classify(s.events) if v["route"] == Route.DRAM_BOUNCE} == {"low"}


def test_a_copy_that_starts_inside_an_earlier_small_read_is_found_nearby(tmp_path):
    """np.load's shape (held-out npy-shards on the GPU machine, UNKNOWN before this): a .npy file's
    array starts 128 bytes in; Python's buffered reader reads the first 4096 bytes, then the rest
    straight into the array. The copy's first bytes are the file's at 128, where no read began: the
    trace looks for them near the reads and ties both reads to the copy, high."""
    rng = random.Random(11)
    body = rng.randbytes(3 * CHUNK)
    p = tmp_path / "emb0.npy"
    p.write_bytes(b"\x93NUMPY" + bytes(122) + body)
    s = Stream()
    s.open(0, 5, str(p))
    s.read(10, 5, BUF, 4096, 0)
    s.read(20, 5, BUF + 0x100000000, len(body) + 128 - 4096, 4096)
    s.copy(60, PINNED, body)
    vs = s.classify()
    assert [(v["offset"], v["route"], v["confidence"]) for v in vs] == [
        (0, Route.DRAM_BOUNCE, "high"),
        (4096, Route.DRAM_BOUNCE, "high"),
    ]
    assert "at offset 128" in " ".join(vs[0]["evidence"])


def test_a_decoded_file_read_in_small_pieces_is_unknown_to_its_last_byte(tmp_path):
    """A CSV read 4 KiB at a time, parsed, and its floats copied: the copy's bytes are the file's
    nowhere. Only the first reads are compared, but every read of the file that copy passed is
    UNKNOWN with it (held-out csv-numpy on the GPU machine: 16 UNKNOWN, 5,905 HOST before this)."""
    rng = random.Random(12)
    text = "\n".join(",".join(f"{rng.random():.6f}" for _ in range(8)) for _ in range(12000)).encode()
    p = tmp_path / "table.csv"
    p.write_bytes(text)
    s = Stream()
    s.open(0, 5, str(p))
    n = len(text) // 4096
    for i in range(n):
        s.read(10 + i, 5, BUF, 4096, i * 4096)
    s.copy(20 + n, PINNED, rng.randbytes(12000 * 8 * 4))
    vs = [v for v in s.classify() if v["path"] == str(p)]
    assert len(vs) == n and {v["route"] for v in vs} == {Route.UNKNOWN}
    assert all("decoded or converted them" in " ".join(v["evidence"]) for v in vs)


def test_a_worker_s_mapped_rows_gathered_and_copied_by_the_main_process(tmp_path):
    """A DataLoader over np.load(mmap_mode='r') (held-out dl-memmap on the H100: 100 % by order,
    then 4 KiB of 32 MiB once content checks took only the header's read): workers map the .npy,
    the main process copies a batch of rows from shared memory. The batch starts with the file's
    bytes at 128: those are taken from the worker's mapping (high), the rest of the batch from the
    file's other mapped bytes in order (low), none left HOST."""
    rng = random.Random(13)
    body = rng.randbytes(2 * CHUNK)
    p = tmp_path / "rows.npy"
    p.write_bytes(b"\x93NUMPY" + bytes(122) + body)
    s = Stream()
    s.ev(0, "proc", "adopt", [1])
    s.ev(1, "proc", "fork", [100, 200])
    s.open(2, 7, str(p), pid=200)
    s.ev(3, "fd", "mmap", [7, 0x7F5000000000, 128 + len(body), 0], pid=200)
    s.copy(50, PINNED, body[:CHUNK], pid=100)
    s.copy(90, PINNED, body[CHUNK:], pid=100)
    vs = [v for v in s.classify() if v["path"] == str(p)]
    assert {v["route"] for v in vs} == {Route.DRAM_BOUNCE}
    assert sum(v["size"] for v in vs) == len(body)
    assert any(v["confidence"] == "high" and "at offset 128" in " ".join(v["evidence"]) for v in vs)


GPU = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "trace", "content")


def _gpu_replay(name):
    import json

    from gdsdiag.trace.live import replay

    with open(os.path.join(GPU, name + ".truth")) as f:
        text = f.read().strip()
    truth = json.loads(text.split(" ", 1)[1] if text.startswith("GROUND_TRUTH") else text)
    got: list = []
    res = replay(os.path.join(GPU, name + ".rec.jsonl.gz"), None, got.append)
    return truth, got, res


def _bytes(got, path, route, confs=("high", "medium", "low")):
    return sum(v["size"] for v in got if v["path"] == path and v["route"] == route and v["confidence"] in confs)


def test_gpu_controls_replay_with_the_checks_the_live_trace_made():
    """The H100's run of content_controls.py through the real libcuda: staged, direct and the copied
    one of two interleaved files high; the checksum loop, the overwritten buffer and the summed file
    never DRAM_BOUNCE."""
    truth, got, _ = _gpu_replay("controls")
    for case in truth["cases"]:
        (v,) = [
            v
            for v in got
            if v["path"]
            and v["path"].endswith("/" + case["file"])
            and v["offset"] == case["offset"]
            and v["op"] == "read"
        ]
        if case["to_gpu"]:
            assert (v["route"], v["confidence"]) == (Route.DRAM_BOUNCE, "high"), case
        else:
            assert v["route"] != Route.DRAM_BOUNCE, case


@pytest.mark.parametrize("name", ["dl-memmap-cold", "tar-stream-cold", "npy-shards-cold"])
def test_gpu_loaders_whose_copies_carry_the_files_bytes(name):
    """Held-out loaders on the H100 whose copies hold file bytes at offsets no read began at (a
    worker's mapped rows, tar members, an .npy's array): every byte DRAM_BOUNCE, some of it high."""
    truth, got, _ = _gpu_replay(name)
    for path, t in truth["files"].items():
        assert _bytes(got, path, Route.DRAM_BOUNCE) >= t["to_gpu"], path
        assert _bytes(got, path, Route.DRAM_BOUNCE, ("high",)) > 0, path


@pytest.mark.parametrize("name", ["csv-numpy-cold", "zlib-decode-cold", "host-stats-cold"])
def test_gpu_decoders_and_the_checksum_control_are_never_dram_bounce(name):
    """A CSV parsed, zlib chunks inflated, a file only summed: no copy carries the files' bytes, and
    not one byte is DRAM_BOUNCE (the decoders were DRAM_BOUNCE by order, the control at medium)."""
    truth, got, res = _gpu_replay(name)
    for path in truth["files"]:
        assert _bytes(got, path, Route.DRAM_BOUNCE) == 0, path
        assert _bytes(got, path, Route.UNKNOWN) > 0, path
        # (the file's why names that reason, not the stock one of shared memory or a text file)
        (f,) = [f for f in res.files if f["path"] == path]
        assert "not of these bytes" in f["why"], f["why"]


def test_a_file_reached_through_a_link_is_not_read(data, tmp_path):
    """The trace reads files as root, by the path a traced program named. A directory on that path
    that is a link (which a user could retarget to a root-only file after the read) is refused:
    the bytes are not compared, and the copy is tied by order only, low (it was read and high)."""
    path, b = data["weights.bin"]
    link = tmp_path / "through"
    link.symlink_to(os.path.dirname(path))
    s = Stream()
    s.open(0, 5, str(link / "weights.bin"))
    s.read(10, 5, BUF, CHUNK, 0)
    s.copy(60, PINNED, b[:CHUNK])
    (v,) = s.classify()
    assert (v["route"], v["confidence"]) == (Route.DRAM_BOUNCE, "low")
    assert "could not be compared" in " ".join(v["evidence"])


@pytest.mark.parametrize("name", ["runai-uring-cold", "runai-libaio-cold", "runai-sync-cold", "fst-auto-cold"])
def test_gpu_pypi_loaders_with_their_own_engines(name):
    """PyPI loaders on the H100 (tests/workloads/loaders_heldout5.py): runai-model-streamer's io_uring,
    libaio and pread engines read 2 MiB chunks from 16 threads into one buffer and torch copies each
    tensor (up to 8 MiB, across four chunks) to the GPU at once; fastsafetensors falls back from GDS to
    its own O_DIRECT pread threads. Every tensor byte DRAM_BOUNCE: a copy over several reads' buffers
    takes each of them (it took the first alone: 33-59 %)."""
    truth, got, res = _gpu_replay(name)
    for path, t in truth["files"].items():
        # (runai's io_uring and libaio engines also read 512-byte sectors at tensor edges into small
        # buffers of their own, a few KiB a file, which get no line yet: docs/trace.md, Limits)
        assert _bytes(got, path, Route.DRAM_BOUNCE) >= t["to_gpu"] - 8192, path
        assert _bytes(got, path, Route.DRAM_BOUNCE, ("high",)) >= t["to_gpu"] // 2, path
        (f,) = [f for f in res.files if f["path"] == path]
        assert f["threads"] > 1 and "mmap" not in f["via_to_gpu"], f  # (mmap: the program's own check after)


def test_gpu_fastsafetensors_fallback_says_why_in_its_own_words():
    """fastsafetensors on a node without /dev/nvidia-fs0 warns on stderr and reads with its own
    threads: that warning is the decisive fact of each file's why, the unused libcufile beside it."""
    _, _, res = _gpu_replay("fst-auto-cold")
    rows = [f for f in res.files if f["path"].endswith(".safetensors")]
    assert len(rows) == 2
    for f in rows:
        first = f["why_chain"][0]
        assert (first["fact"], first["role"]) == ("the program said", "decisive"), f["why_chain"]
        assert "falling back to nogds copier" in first["value"]
        assert any(x["fact"] == "libcufile" for x in f["why_chain"])
        assert "libcufile loaded, not used for it" in f["mechanism"]


def test_gpu_streamer_control_whose_file_never_reaches_a_gpu():
    """runai-model-streamer reads a file whose tensors are only summed on the host while random
    tensors of the same sizes are copied to the GPU: not one byte of the file is DRAM_BOUNCE."""
    truth, got, _ = _gpu_replay("runai-hoststats-cold")
    for path in truth["files"]:
        assert _bytes(got, path, Route.DRAM_BOUNCE) == 0, path
