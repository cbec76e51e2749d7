"""A third held-out set of real GPU loaders, written without looking at how `gdsdiag trace` decides
(beside loaders.py, loaders_heldout.py and loaders_heldout2.py, none of whose programs it repeats): each
prints its own ground truth for tests/workloads/score_loaders.py.

    python3 tests/workloads/loaders_heldout3.py prepare DIR       # untraced: writes DIR/ho3/*
    python3 tests/workloads/loaders.py evict|warm DIR/ho3         # untraced: cold or warm page cache
    gdsdiag trace --json -o RUN.jsonl -- python3 tests/workloads/loaders_heldout3.py LOADER DIR

LOADER is one of:
  csv-numpy      a numeric CSV (a header line, then 8 float columns) parsed by numpy.loadtxt from an
                 opened file, then torch.from_numpy(...).cuda()
  jsonl-tokens   a JSONL file of pre-tokenized records {"input_ids": [...]} iterated line by line and
                 parsed by json.loads, the ids gathered into one int32 NumPy array, then cupy.asarray
  pickle-dict    pickle.load (protocol 5, arrays in-band) of a dict of NumPy arrays from an opened file,
                 then each array torch.from_numpy(...).cuda()
  torch-load-zip torch.load of a default (zip) torch.save checkpoint with map_location="cpu", mmap=False,
                 weights_only=True (torch reads every storage into its own CPU memory), then .cuda()
                 per tensor
  npy-shards     np.load (no mmap_mode: the whole array read) of 4 .npy float16 shards, each
                 cupy.asarray, then cupy.concatenate on the GPU
  tar-stream     a WebDataset-style .tar of 512 samples (a 64 KiB .bin and a small ASCII .cls each) read
                 in stream mode (tarfile "r|", extractfile().read()), 32 samples at a time stacked into
                 a NumPy batch and copied to the GPU with their parsed labels (torch)
  host-stats     CUDA busy copying host data made in memory (np.random, from no file) to the GPU while a
                 file is read chunk by chunk into a reused NumPy buffer and only reduced on the CPU
                 (sum, sum of squares): the file never reaches a GPU
  pinned-streams 2 threads, each reading its own file with readinto into 2 pinned torch buffers in turn
                 (double-buffered) and copying each chunk non_blocking on its own CUDA stream, an event
                 guarding each buffer's reuse
  gzip-jax       gzip.open(file object).read() of a gzip-compressed raw float32 file, np.frombuffer,
                 then jax.device_put
  osread-loop    os.open + os.read(1 MiB) loop (unpositioned reads) of file A, each chunk np.frombuffer
                 then torch .cuda(); then file B read by the same loop only for a CRC on the host

Each prints one line `GROUND_TRUTH {json}` as the earlier sets do: for each file, "to_gpu" is the bytes
of the file on the expected "route" (DRAM_BOUNCE: file bytes that reached a GPU through host memory;
HOST: file bytes that never reached a GPU), computed from what the program itself read or copied.

How the bytes are counted (the conventions of loaders.py, loaders_heldout.py and loaders_heldout2.py):
  - a format's own metadata that never reaches a GPU is left out: the CSV's header line (column names),
    the pickle opcodes, dict keys and array descriptions (only the arrays' data counts), the zip records
    and data.pkl of the torch checkpoint (only the tensors' storages count), the .npy headers, the tar
    headers, padding and end blocks (only the members' contents count), the gzip header and trailer;
  - encoded or compressed data counts as the file bytes that held it, as zlib-decode counts its
    compressed chunks: csv-numpy counts the CSV's data lines (digits, signs, commas and newlines: the
    text the floats were parsed from; each parsed float reached the GPU); jsonl-tokens counts every line
    of the file (its keys, brackets and commas are the encoding of the ids, interleaved with them in every
    record; each record's ids reached the GPU); tar-stream counts each .cls member's bytes (its ASCII
    label was parsed into the label that reached the GPU); gzip-jax counts the deflate stream (the file
    less the gzip header and the 8-byte trailer), not the inflated size;
  - raw files read whole count all their bytes; HOST files count the bytes the program read.
"""

from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from heldout import main, paths, written  # noqa: E402
from heldout import truth as _truth  # noqa: E402

MiB = 1 << 20
KiB = 1 << 10


def _p(d: str) -> dict:
    return paths(
        d,
        "ho3",
        {
            "csv": "table.csv",
            "jsonl": "tokens.jsonl",
            "pkl": "arrays.pkl",
            "pt": "state.pt",
            "npy": "emb",
            "tar": "shard-000000.tar",
            "stats": "stats.f32",
            "pin0": "pin0.bin",
            "pin1": "pin1.bin",
            "gz": "field.f32.gz",
            "osa": "chunks.bin",
            "osb": "verify.bin",
        },
    )


CSV_ROWS, CSV_COLS = 320_000, 8  # about 23 MiB of text
JSONL_BYTES = 20 * MiB  # records are written until the file holds at least this much
NPY_SHARDS, NPY_SHAPE = 4, (4096, 1536)  # float16: 12 MiB each
TAR_SAMPLES, TAR_SAMPLE, TAR_BATCH = 512, 64 * KiB, 32
STATS_CHUNK = 4 * MiB
PIN_CHUNK = 4 * MiB
GZ_FLOATS = 12 * MiB  # float32: 48 MiB inflated
OS_CHUNK = MiB


def _prep_text(d: str, rng) -> None:
    import numpy as np

    p = _p(d)
    a = rng.standard_normal((CSV_ROWS, CSV_COLS), dtype=np.float32)
    with open(p["csv"], "w") as f:
        f.write(",".join(f"feature_{i}" for i in range(CSV_COLS)) + "\n")
        np.savetxt(f, a, fmt="%.6f", delimiter=",")
    with open(p["jsonl"], "w") as f:
        n, i = 0, 0
        while n < JSONL_BYTES:
            ids = rng.integers(0, 50257, int(rng.integers(128, 1024))).tolist()
            line = json.dumps({"input_ids": ids}, separators=(",", ":")) + "\n"
            f.write(line)
            n += len(line)
            i += 1


def _prep_binary(d: str, rng) -> None:
    import gzip
    import pickle

    import numpy as np

    p = _p(d)
    arrays = {
        "features": rng.standard_normal((4096, 2048), dtype=np.float32),  # 32 MiB
        "targets": rng.standard_normal((4096, 1024)).astype(np.float16),  # 8 MiB
        "index": rng.integers(0, 1 << 40, 1 << 20, dtype=np.int64),  # 8 MiB
    }
    with open(p["pkl"], "wb") as f:
        pickle.dump(arrays, f, protocol=5)
    os.makedirs(p["npy"], exist_ok=True)
    for i in range(NPY_SHARDS):
        np.save(os.path.join(p["npy"], f"emb{i}.npy"), rng.standard_normal(NPY_SHAPE).astype(np.float16))
    for k, n in (("stats", 48), ("pin0", 32), ("pin1", 24), ("osa", 32), ("osb", 24)):
        rng.standard_normal(n * MiB // 4, dtype=np.float32).tofile(p[k])
    # a measured field quantized to steps of 1/64: deflate shrinks it by a third or so
    z = np.round(rng.standard_normal(GZ_FLOATS, dtype=np.float32) * 64) / 64
    with open(p["gz"], "wb") as f, gzip.GzipFile(filename="", mode="wb", fileobj=f, compresslevel=1, mtime=0) as g:
        g.write(z.tobytes())


def _prep_tar(d: str, rng) -> None:
    import io
    import tarfile

    import numpy as np

    with tarfile.open(_p(d)["tar"], "w", format=tarfile.USTAR_FORMAT) as tf:
        for i in range(TAR_SAMPLES):
            for ext, data in (
                ("bin", rng.integers(0, 256, TAR_SAMPLE, dtype=np.uint8).tobytes()),
                ("cls", f"{int(rng.integers(0, 1000))}\n".encode()),
            ):
                ti = tarfile.TarInfo(f"sample{i:06d}.{ext}")
                ti.size, ti.mtime, ti.mode = len(data), 0, 0o644
                tf.addfile(ti, io.BytesIO(data))


def _prep_torch(d: str, rng) -> None:
    import numpy as np
    import torch

    sd = {"embed.weight": torch.from_numpy(rng.standard_normal((8192, 512), dtype=np.float32))}  # 16 MiB
    for i in range(4):
        sd[f"blocks.{i}.fc1.weight"] = torch.from_numpy(rng.standard_normal((2048, 512), dtype=np.float32)).to(
            torch.bfloat16
        )
        sd[f"blocks.{i}.fc1.bias"] = torch.zeros(2048, dtype=torch.bfloat16)
        sd[f"blocks.{i}.fc2.weight"] = torch.from_numpy(rng.standard_normal((512, 2048), dtype=np.float32)).to(
            torch.bfloat16
        )
        sd[f"blocks.{i}.norm.weight"] = torch.ones(512)
        sd[f"blocks.{i}.norm.running_mean"] = torch.zeros(512)
        sd[f"blocks.{i}.norm.num_batches_tracked"] = torch.tensor(1000, dtype=torch.int64)
    sd = {k: v.clone().contiguous() for k, v in sd.items()}  # each its own, exact storage
    torch.save(sd, _p(d)["pt"])  # the default: a zip file (torch >= 1.6)


def prepare(d: str) -> None:
    import numpy as np

    p = _p(d)
    top = os.path.dirname(p["csv"])
    os.makedirs(top, exist_ok=True)
    rng = np.random.default_rng(31)
    _prep_torch(d, rng)  # (first: without torch, nothing else is written)
    _prep_text(d, rng)
    _prep_binary(d, rng)
    _prep_tar(d, rng)
    written(top, d)


def csv_numpy(d: str) -> None:
    import numpy as np
    import torch

    path = _p(d)["csv"]
    with open(path, "rb") as f:
        header = f.readline()  # the column names: never parsed into a value
        a = np.loadtxt(f, delimiter=",", dtype=np.float32)
        end = f.tell()
    assert end == os.path.getsize(path), f"loadtxt stopped at {end}"
    g = torch.from_numpy(a).cuda()
    torch.cuda.synchronize()
    assert g.is_cuda and g.shape == (CSV_ROWS, CSV_COLS)
    # every data line was parsed and its floats reached the GPU: the text after the header line
    _truth(
        "csv-numpy",
        {path: (end - len(header), "DRAM_BOUNCE")},
        {"rows": int(a.shape[0]), "header_bytes": len(header), "decoded_bytes_to_gpu": g.numel() * 4},
    )


def jsonl_tokens(d: str) -> None:
    import cupy
    import numpy as np

    path = _p(d)["jsonl"]
    ids: list[int] = []
    lens: list[int] = []
    read = 0
    with open(path, "rb") as f:
        for line in f:
            read += len(line)
            rec = json.loads(line)
            ids.extend(rec["input_ids"])
            lens.append(len(rec["input_ids"]))
    toks = np.array(ids, dtype=np.int32)
    offsets = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    g = cupy.asarray(toks)
    go = cupy.asarray(offsets)
    cupy.cuda.runtime.deviceSynchronize()
    assert int(go[-1]) == g.size
    assert read == os.path.getsize(path)
    # every record's ids reached the GPU: the whole line counts (its keys and brackets encode them)
    _truth(
        "jsonl-tokens",
        {path: (read, "DRAM_BOUNCE")},
        {"records": len(lens), "tokens": int(g.size), "decoded_bytes_to_gpu": int(g.nbytes + go.nbytes)},
    )


def pickle_dict(d: str) -> None:
    import pickle

    import torch

    path = _p(d)["pkl"]
    with open(path, "rb") as f:
        arrays = pickle.load(f)
        end = f.tell()
    assert end == os.path.getsize(path)
    on_gpu, n = {}, 0
    for k, a in arrays.items():
        on_gpu[k] = torch.from_numpy(a).cuda()
        n += a.nbytes
    torch.cuda.synchronize()
    assert sum(g.numel() * g.element_size() for g in on_gpu.values()) == n
    # the arrays' data reached the GPU; the pickle's opcodes, keys and dtype/shape descriptions did not
    _truth("pickle-dict", {path: (n, "DRAM_BOUNCE")}, {"arrays": len(on_gpu), "pickle_overhead": end - n})


def torch_load_zip(d: str) -> None:
    import zipfile

    import torch

    path = _p(d)["pt"]
    assert zipfile.is_zipfile(path), "expected torch.save's default (zip) format"
    sd = torch.load(path, map_location="cpu", mmap=False, weights_only=True)
    storages = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in sd.values()}
    on_gpu, n = {}, 0
    for k, t in sd.items():
        on_gpu[k] = t.cuda()
        n += t.numel() * t.element_size()
    torch.cuda.synchronize()
    assert all(g.is_cuda for g in on_gpu.values())
    assert n == sum(storages.values()), "every storage is one whole tensor"
    # the storages (the zip's data/N records) reached the GPU; data.pkl, the other records and the zip
    # headers did not
    _truth("torch-load-zip", {path: (n, "DRAM_BOUNCE")}, {"tensors": len(on_gpu), "storages": len(storages)})


def npy_shards(d: str) -> None:
    import cupy
    import numpy as np

    top = _p(d)["npy"]
    shards = sorted(os.path.join(top, n) for n in os.listdir(top) if n.endswith(".npy"))
    parts, per = [], {}
    for s in shards:
        a = np.load(s)  # read whole into memory
        assert isinstance(a, np.ndarray) and not isinstance(a, np.memmap)
        parts.append(cupy.asarray(a))
        per[s] = (a.nbytes, "DRAM_BOUNCE")  # the array, not the .npy header
    g = cupy.concatenate(parts)
    cupy.cuda.runtime.deviceSynchronize()
    assert g.nbytes == sum(n for n, _ in per.values())
    _truth("npy-shards", per, {"shards": len(shards), "shape": list(g.shape), "dtype": str(g.dtype)})


def tar_stream(d: str) -> None:
    import tarfile

    import numpy as np
    import torch

    path = _p(d)["tar"]
    torch.zeros(1, device="cuda")  # the model would be on the GPU before the data comes
    samples: dict[str, dict] = {}
    batch_x, batch_y = [], []
    n = 0
    batches = 0
    on_gpu = 0

    def flush():
        nonlocal batches, on_gpu
        x = torch.from_numpy(np.stack(batch_x)).cuda()
        y = torch.tensor(batch_y, dtype=torch.int64).cuda()
        on_gpu += x.numel() + y.numel() * 8
        batches += 1
        batch_x.clear()
        batch_y.clear()

    with open(path, "rb") as f, tarfile.open(fileobj=f, mode="r|") as tf:
        for m in tf:
            if not m.isfile():
                continue
            data = tf.extractfile(m).read()
            key, ext = m.name.rsplit(".", 1)
            s = samples.setdefault(key, {})
            s[ext] = data
            if len(s) == 2:  # a sample is whole: its .bin and its .cls
                del samples[key]
                batch_x.append(np.frombuffer(s["bin"], dtype=np.uint8))
                batch_y.append(int(s["cls"]))
                n += len(s["bin"]) + len(s["cls"])
                if len(batch_x) == TAR_BATCH:
                    flush()
    if batch_x:
        flush()
    torch.cuda.synchronize()
    assert not samples, f"incomplete samples: {list(samples)[:3]}"
    # the members' contents reached the GPU (the .cls text parsed into the labels); not the tar
    # headers, padding or end blocks
    _truth("tar-stream", {path: (n, "DRAM_BOUNCE")}, {"batches": batches, "bytes_to_gpu": on_gpu})


def host_stats(d: str) -> None:
    import numpy as np
    import torch

    path = _p(d)["stats"]
    rng = np.random.default_rng(5)
    torch.zeros(1, device="cuda")
    buf = np.empty(STATS_CHUNK // 4, dtype=np.float32)  # reused for every chunk of the file
    mv = memoryview(buf).cast("B")
    s = ss = 0.0
    read = h2d = 0
    acc = torch.zeros(STATS_CHUNK // 4, device="cuda")
    with open(path, "rb", buffering=0) as f:
        while True:
            k = f.readinto(mv)
            if not k:
                break
            x = buf[: k // 4]
            s += float(x.sum(dtype=np.float64))  # on the host only
            ss += float(np.dot(x, x))
            read += k
            noise = rng.standard_normal(STATS_CHUNK // 4, dtype=np.float32)  # made here, from no file
            g = torch.from_numpy(noise).cuda()  # a pageable host-to-GPU copy of the same size
            acc += g
            h2d += noise.nbytes
    torch.cuda.synchronize()
    n = read // 4
    _truth(
        "host-stats",
        {path: (read, "HOST")},
        {"mean": s / n, "std": (ss / n - (s / n) ** 2) ** 0.5, "h2d_bytes_not_from_files": h2d},
    )


def pinned_streams(d: str) -> None:
    import threading

    import torch

    p = _p(d)
    paths = [p["pin0"], p["pin1"]]
    torch.cuda.init()
    dests = [torch.empty(os.path.getsize(q), dtype=torch.uint8, device="cuda") for q in paths]
    torch.cuda.synchronize()
    moved = dict.fromkeys(paths, 0)
    heads = dict.fromkeys(paths, b"")
    errors: list[BaseException] = []

    def reader(i: int) -> None:
        try:
            path, dest = paths[i], dests[i]
            stream = torch.cuda.Stream()
            bufs = [torch.empty(PIN_CHUNK, dtype=torch.uint8, pin_memory=True) for _ in range(2)]
            views = [memoryview(b.numpy()) for b in bufs]
            events = [None, None]
            off, j = 0, 0
            with open(path, "rb", buffering=0) as f:
                while True:
                    if events[j] is not None:
                        events[j].synchronize()  # this buffer's last copy is done: it may be refilled
                    k = f.readinto(views[j])
                    if not k:
                        break
                    if not off:
                        heads[path] = bytes(views[j][:16])
                    with torch.cuda.stream(stream):
                        dest[off : off + k].copy_(bufs[j][:k], non_blocking=True)
                        ev = torch.cuda.Event()
                        ev.record(stream)
                    events[j] = ev
                    off += k
                    j ^= 1
            stream.synchronize()
            moved[path] = off
        except BaseException as e:  # (re-raised in the main thread)
            errors.append(e)

    threads = [threading.Thread(target=reader, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    torch.cuda.synchronize()
    assert all(moved[q] == os.path.getsize(q) for q in paths), moved
    for q, g in zip(paths, dests):  # the GPU holds what each reader read (its first bytes, kept on the host)
        assert bytes(g[:16].cpu().tolist()) == heads[q]
    _truth("pinned-streams", {q: (moved[q], "DRAM_BOUNCE") for q in paths}, {"threads": 2, "chunk": PIN_CHUNK})


def _gzip_header_len(h: bytes) -> int:
    """The length of the gzip member header at the start of H (RFC 1952)."""
    assert h[:2] == b"\x1f\x8b" and h[2] == 8, "not a deflate gzip member"
    flg, n = h[3], 10
    if flg & 4:  # FEXTRA
        n += 2 + int.from_bytes(h[n : n + 2], "little")
    for bit in (8, 16):  # FNAME, FCOMMENT: zero-terminated
        if flg & bit:
            n = h.index(b"\x00", n) + 1
    if flg & 2:  # FHCRC
        n += 2
    assert n <= len(h), "the gzip header is longer than the bytes peeked"
    return n


def gzip_jax(d: str) -> None:
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    import gzip

    import jax
    import numpy as np

    path = _p(d)["gz"]
    dev = jax.devices("gpu")[0]
    with open(path, "rb") as raw:
        head = raw.peek(512)[:512]  # (from the reader's own buffer: the bytes gzip then reads, no extra I/O)
        with gzip.open(raw, "rb") as gz:
            data = gz.read()
        end = raw.tell()
    assert end == os.path.getsize(path), f"one gzip member expected; stopped at {end}"
    a = np.frombuffer(data, dtype=np.float32)
    g = jax.device_put(a, dev)
    g.block_until_ready()
    assert all(x.platform == "gpu" for x in g.devices())
    stream = end - _gzip_header_len(head) - 8
    # the whole deflate stream reached the GPU, inflated; not the gzip header nor the CRC32/ISIZE trailer
    _truth("gzip-jax", {path: (stream, "DRAM_BOUNCE")}, {"inflated_bytes_to_gpu": a.nbytes, "device": str(dev)})


def osread_loop(d: str) -> None:
    import warnings
    import zlib

    import numpy as np
    import torch

    warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
    p = _p(d)
    parts, moved = [], 0
    fd = os.open(p["osa"], os.O_RDONLY)
    try:
        while True:
            b = os.read(fd, OS_CHUNK)
            if not b:
                break
            g = torch.from_numpy(np.frombuffer(b, dtype=np.uint8)).cuda()
            parts.append(g)
            moved += len(b)
    finally:
        os.close(fd)
    whole = torch.cat(parts)
    torch.cuda.synchronize()
    assert whole.is_cuda and whole.numel() == moved
    crc, checked = 0, 0
    fd = os.open(p["osb"], os.O_RDONLY)
    try:
        while True:
            b = os.read(fd, OS_CHUNK)
            if not b:
                break
            crc = zlib.crc32(b, crc)  # on the host only
            checked += len(b)
    finally:
        os.close(fd)
    _truth(
        "osread-loop",
        {p["osa"]: (moved, "DRAM_BOUNCE"), p["osb"]: (checked, "HOST")},
        {"chunks": len(parts), "crc32": crc},
    )


LOADERS = {
    "csv-numpy": csv_numpy,
    "jsonl-tokens": jsonl_tokens,
    "pickle-dict": pickle_dict,
    "torch-load-zip": torch_load_zip,
    "npy-shards": npy_shards,
    "tar-stream": tar_stream,
    "host-stats": host_stats,
    "pinned-streams": pinned_streams,
    "gzip-jax": gzip_jax,
    "osread-loop": osread_loop,
}


if __name__ == "__main__":
    sys.exit(main(sys.argv, __doc__ or "", prepare, LOADERS))
