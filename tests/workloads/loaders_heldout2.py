"""A second held-out set of real GPU loaders, written without looking at how `gdsdiag trace` decides
(beside loaders.py and loaders_heldout.py, none of whose programs it repeats): each prints its own
ground truth for tests/workloads/score_loaders.py.

    python3 tests/workloads/loaders_heldout2.py prepare DIR       # untraced: writes DIR/ho2/*
    python3 tests/workloads/loaders.py evict|warm DIR/ho2         # untraced: cold or warm page cache
    gdsdiag trace --json -o RUN.jsonl -- python3 tests/workloads/loaders_heldout2.py LOADER DIR

LOADER is one of:
  h5-slices      h5py contiguous float32 dataset (no filters) read 4 MiB of rows at a time with
                 Dataset.read_direct into one reused NumPy buffer, each slice to the GPU by cupy.asarray
  h5-gzip        h5py chunked dataset (shuffle + gzip) read whole (HDF5 inflates each chunk in its own
                 buffers), then torch.from_numpy(...).cuda()
  pq-torch       pyarrow.parquet.read_table of an UNCOMPRESSED file (no dictionary, plain pages,
                 non-nullable columns, 4 row groups), each column .to_numpy() then torch .cuda()
  torch-fromfile torch.from_file(shared=False) of a raw float32 file (torch maps it itself), then .to("cuda")
  hf-bert        transformers AutoModel.from_pretrained of a small BertModel saved by save_pretrained
                 (model.safetensors), loaded on the CPU, then model.to("cuda")
  dl-files       torch DataLoader, 2 forked workers, 256 sample files of 256 KiB each read whole by
                 open().read() in the workers, no pin_memory: the main process copies each batch (pageable)
  readinto-threads  a ThreadPoolExecutor of 4 threads, each with its own file object and its own 1 MiB
                 bytearray: seek + readinto (plain read) of a chunk, torch.frombuffer(...).cuda() of it
  host-only      CUDA up and busy (matmuls), one file hashed by hashlib.file_digest and another read into a
                 pinned (page-locked) torch buffer and only CRC-checked on the host: neither reaches a GPU
  jax-npz        np.load of an uncompressed .npz (zip, stored members), jax.device_put of each array
  mmap-slices    mmap.mmap of a raw file, np.frombuffer views of 4 MiB slices, each
                 torch.from_numpy(view).to("cuda", non_blocking=False)

Each prints one line `GROUND_TRUTH {json}` as loaders_heldout.py does: for each file, "to_gpu" is the
bytes of the file on the expected "route" (DRAM_BOUNCE: file bytes that reached a GPU through host
memory; HOST: file bytes that never reached a GPU), computed from what the program itself read or copied.

How the bytes are counted (the conventions of loaders.py and loaders_heldout.py):
  - a format's own metadata that never reaches a GPU is left out, as st-loadfile (safetensors header),
    torch-mmap (zip records, pickle) and dl-memmap (.npy header) leave it out: the HDF5 superblock,
    object headers and chunk B-tree, the Parquet footer and magic, the zip local/central records and the
    .npy headers inside the .npz, the safetensors header (and config.json is not listed at all);
  - compressed or encoded data counts as the file bytes that held it, as zlib-decode counts its
    compressed chunks (not the inflated size, not the index): h5-gzip counts the stored (compressed)
    size of every chunk (H5Dget_chunk_info), pq-torch counts each column chunk's total_compressed_size
    (= its uncompressed size here: the pages, page headers included, a few bytes per page);
  - raw files read whole count all their bytes.
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
        "ho2",
        {
            "h5c": "contig.h5",
            "h5z": "gzip.h5",
            "pq": "plain.parquet",
            "ff": "fromfile.f32",
            "hf": "bert",
            "dl": "samples",
            "thr": "threads.bin",
            "hash": "hashed.bin",
            "pin": "pinned.bin",
            "npz": "arrays.npz",
            "mm": "slices.f32",
        },
    )


H5C_SHAPE = (8192, 2048)  # float32: 64 MiB
H5C_ROWS = 512  # rows per slice: 4 MiB
H5Z_SHAPE = (16384, 1024)  # float32: 64 MiB decoded
H5Z_CHUNK = (256, 1024)  # 1 MiB decoded per chunk
PQ_ROWS = 2 << 20  # 2 Mi rows of (f32, f32, i64, f64): 48 MiB of values
DL_FILES, DL_SIZE = 256, 256 * KiB
THR_CHUNK = MiB
MM_SLICE = 4 * MiB


def _prep_raw(d: str, rng) -> None:
    import numpy as np

    p = _p(d)
    for k, n in (("ff", 48), ("thr", 64), ("hash", 48), ("pin", 32), ("mm", 64)):
        rng.standard_normal(n * MiB // 4, dtype=np.float32).tofile(p[k])
    os.makedirs(p["dl"], exist_ok=True)
    for i in range(DL_FILES):
        rng.integers(0, 256, DL_SIZE, dtype=np.uint8).tofile(os.path.join(p["dl"], f"img{i:04d}.raw"))


def _prep_h5(d: str, rng) -> None:
    import h5py
    import numpy as np

    p = _p(d)
    with h5py.File(p["h5c"], "w") as h:
        h.create_dataset("x", data=rng.standard_normal(H5C_SHAPE, dtype=np.float32))  # contiguous, no filter
    # quantized measurements (steps of 1/256): shuffle + gzip halves them or so
    z = np.round(rng.standard_normal(H5Z_SHAPE, dtype=np.float32) * 256) / 256
    with h5py.File(p["h5z"], "w") as h:
        h.create_dataset("x", data=z, chunks=H5Z_CHUNK, compression="gzip", compression_opts=4, shuffle=True)


def _prep_pq(d: str, rng) -> None:
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    cols = {
        "a": rng.standard_normal(PQ_ROWS, dtype=np.float32),
        "b": rng.standard_normal(PQ_ROWS, dtype=np.float32),
        "c": rng.integers(0, 1 << 40, PQ_ROWS, dtype=np.int64),
        "d": rng.standard_normal(PQ_ROWS),
    }
    schema = pa.schema([pa.field(k, pa.from_numpy_dtype(v.dtype), nullable=False) for k, v in cols.items()])
    table = pa.table(cols, schema=schema)
    pq.write_table(
        table,
        _p(d)["pq"],
        compression="none",
        use_dictionary=False,
        row_group_size=PQ_ROWS // 4,
        write_statistics=False,
    )


def _prep_npz(d: str, rng) -> None:
    import numpy as np

    np.savez(_p(d)["npz"], **{f"layer{i}": rng.standard_normal((768, 2048), dtype=np.float32) for i in range(8)})


def _prep_hf(d: str) -> None:
    import torch
    from transformers import BertConfig, BertModel

    cfg = BertConfig(
        vocab_size=30522,
        hidden_size=256,
        num_hidden_layers=4,
        num_attention_heads=4,
        intermediate_size=1024,
        max_position_embeddings=512,
    )
    torch.manual_seed(0)
    hf = _p(d)["hf"]
    BertModel(cfg).save_pretrained(hf)  # safetensors: the default since transformers 4.35, the only format in 5
    if not _shards(hf):
        raise SystemExit(f"prepare: save_pretrained wrote no .safetensors in {hf}: {os.listdir(hf)}")


def prepare(d: str) -> None:
    import numpy as np

    p = _p(d)
    os.makedirs(os.path.dirname(p["h5c"]), exist_ok=True)
    rng = np.random.default_rng(23)
    _prep_raw(d, rng)
    _prep_h5(d, rng)
    _prep_pq(d, rng)
    _prep_npz(d, rng)
    _prep_hf(d)
    written(os.path.dirname(p["h5c"]), d)


def _shards(hf: str) -> list[str]:
    return sorted(os.path.join(hf, n) for n in os.listdir(hf) if n.endswith(".safetensors"))


def h5_slices(d: str) -> None:
    import cupy
    import h5py
    import numpy as np

    path = _p(d)["h5c"]
    parts, n = [], 0
    with h5py.File(path, "r") as h:
        ds = h["x"]
        assert ds.chunks is None and ds.compression is None, "the dataset must be contiguous, unfiltered"
        rows, cols = ds.shape
        buf = np.empty((H5C_ROWS, cols), dtype=ds.dtype)  # one host buffer, reused for every slice
        for r in range(0, rows, H5C_ROWS):
            k = min(H5C_ROWS, rows - r)
            ds.read_direct(buf, source_sel=np.s_[r : r + k], dest_sel=np.s_[0:k])
            g = cupy.asarray(buf[:k])  # a synchronous copy: buf is free again on return
            parts.append(g)
            n += buf[:k].nbytes
    cupy.cuda.runtime.deviceSynchronize()
    assert sum(g.nbytes for g in parts) == n
    # the dataset's rows reached the GPU; HDF5's own metadata (superblock, object header) did not
    _truth("h5-slices", {path: (n, "DRAM_BOUNCE")}, {"slices": len(parts), "bytes_to_gpu": n})


def h5_gzip(d: str) -> None:
    import h5py
    import torch

    path = _p(d)["h5z"]
    with h5py.File(path, "r") as h:
        ds = h["x"]
        assert ds.compression == "gzip" and ds.chunks is not None
        a = ds[...]
        sid = ds.id
        nchunks = sid.get_num_chunks()
        stored = sum(sid.get_chunk_info(i).size for i in range(nchunks))
    g = torch.from_numpy(a).cuda()
    torch.cuda.synchronize()
    assert g.is_cuda and g.numel() == a.size
    # every chunk was read and its inflated content reached the GPU: count the chunks' stored
    # (compressed) bytes, not the B-tree or other HDF5 metadata (zlib-decode's convention)
    _truth(
        "h5-gzip",
        {path: (stored, "DRAM_BOUNCE")},
        {"chunks": nchunks, "decoded_bytes_to_gpu": g.numel() * g.element_size()},
    )


def pq_torch(d: str) -> None:
    import pyarrow.parquet as pq
    import torch

    path = _p(d)["pq"]
    t = pq.read_table(path)  # its own I/O threads; the file is uncompressed
    decoded = 0
    on_gpu = []
    for name in t.column_names:
        g = torch.from_numpy(t.column(name).to_numpy()).cuda()
        decoded += g.numel() * g.element_size()
        on_gpu.append(g)
    torch.cuda.synchronize()
    assert all(g.is_cuda for g in on_gpu)
    md = pq.ParquetFile(path).metadata  # (after the load: a second read of the footer only)
    assert md.row_group(0).column(0).compression == "UNCOMPRESSED"
    read_cols = set(t.column_names)
    chunks = sum(
        md.row_group(r).column(c).total_compressed_size
        for r in range(md.num_row_groups)
        for c in range(md.num_columns)
        if md.row_group(r).column(c).path_in_schema in read_cols
    )
    # every column chunk (its pages) reached the GPU; the footer and the magic did not
    _truth(
        "pq-torch",
        {path: (chunks, "DRAM_BOUNCE")},
        {"decoded_bytes_to_gpu": decoded, "columns": t.num_columns, "row_groups": md.num_row_groups},
    )


def torch_fromfile(d: str) -> None:
    import torch

    path = _p(d)["ff"]
    size = os.path.getsize(path)
    t = torch.from_file(path, shared=False, size=size // 4, dtype=torch.float32)  # torch maps the file
    g = t.to("cuda")
    torch.cuda.synchronize()
    n = g.numel() * g.element_size()
    _truth("torch-fromfile", {path: (n, "DRAM_BOUNCE")}, {"bytes_to_gpu": n})


def _st_ranges(path: str) -> dict:
    """{tensor name: bytes} from the safetensors header (8-byte length, JSON, then the data)."""
    with open(path, "rb") as f:
        hlen = int.from_bytes(f.read(8), "little")
        hdr = json.loads(f.read(hlen))
    return {k: v["data_offsets"][1] - v["data_offsets"][0] for k, v in hdr.items() if k != "__metadata__"}


def hf_bert(d: str) -> None:
    import torch
    from transformers import AutoModel

    hf = _p(d)["hf"]
    model = AutoModel.from_pretrained(hf)  # on the CPU
    model = model.to("cuda")
    torch.cuda.synchronize()
    sd = model.state_dict()
    assert all(p.is_cuda for p in model.parameters())
    per, file_tensors, loaded = {}, 0, 0
    for s in _shards(hf):  # (read after the load: the headers only)
        ranges = _st_ranges(s)
        file_tensors += len(ranges)
        mine = [k for k in ranges if k in sd and sd[k].is_cuda]
        loaded += len(mine)
        # the file's tensors that became the model's (now GPU) tensors; not the header
        per[s] = (sum(ranges[k] for k in mine), "DRAM_BOUNCE")
    _truth(
        "hf-bert",
        per,
        {
            "file_tensors": file_tensors,
            "loaded_tensors": loaded,
            "param_bytes": sum(p.numel() * p.element_size() for p in model.parameters()),
            "dtype": str(next(model.parameters()).dtype),
        },
    )


class _Files:
    def __init__(self, top: str):
        self.files = sorted(os.path.join(top, n) for n in os.listdir(top))

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, i: int):
        import torch

        with open(self.files[i], "rb") as f:  # in the worker
            raw = f.read()
        return i, torch.frombuffer(bytearray(raw), dtype=torch.uint8)


def dl_files(d: str) -> None:
    import torch
    from torch.utils.data import DataLoader

    ds = _Files(_p(d)["dl"])
    torch.cuda.init()
    torch.zeros(1, device="cuda")  # the model would be on the GPU before the data comes
    loader = DataLoader(ds, batch_size=16, shuffle=True, num_workers=2, pin_memory=False)
    per = dict.fromkeys(ds.files, 0)
    for idx, batch in loader:
        g = batch.to("cuda")  # pageable: no pin_memory
        for j, i in enumerate(idx.tolist()):
            per[ds.files[i]] += g[j].numel() * g.element_size()
    torch.cuda.synchronize()
    _truth(
        "dl-files",
        {f: (n, "DRAM_BOUNCE") for f, n in per.items()},
        {"bytes_to_gpu": sum(per.values()), "workers": 2, "main_pid": os.getpid()},
    )


def readinto_threads(d: str) -> None:
    import threading
    from concurrent.futures import ThreadPoolExecutor

    import torch

    path = _p(d)["thr"]
    size = os.path.getsize(path)
    torch.zeros(1, device="cuda")
    local = threading.local()
    opened = []

    def one(off: int):
        if not hasattr(local, "f"):  # each thread: its own file object and buffer
            local.f = open(path, "rb", buffering=0)
            local.buf = bytearray(THR_CHUNK)
            opened.append(local.f)
        f, buf = local.f, local.buf
        f.seek(off)
        mv, got = memoryview(buf), 0
        want = min(THR_CHUNK, size - off)
        while got < want:
            k = f.readinto(mv[got:want])
            if not k:
                break
            got += k
        g = torch.frombuffer(buf, dtype=torch.uint8, count=got).cuda()  # synchronous: buf reusable after
        return off, g

    with ThreadPoolExecutor(4) as ex:
        parts = list(ex.map(one, range(0, size, THR_CHUNK)))
    torch.cuda.synchronize()
    for f in opened:
        f.close()
    n = sum(g.numel() for _, g in parts)
    whole = torch.cat([g for _, g in sorted(parts, key=lambda x: x[0])])
    assert whole.is_cuda and whole.numel() == n
    _truth("readinto-threads", {path: (n, "DRAM_BOUNCE")}, {"chunks": len(parts), "threads": 4})


def host_only(d: str) -> None:
    import hashlib
    import zlib

    import torch

    p = _p(d)
    torch.cuda.init()
    w = torch.randn(2048, 2048, device="cuda")
    w = w @ w  # the GPU is busy with something else
    torch.cuda.synchronize()
    with open(p["hash"], "rb") as f:
        digest = hashlib.file_digest(f, "sha256").hexdigest()
        hashed = f.tell()
    w = w @ w
    torch.cuda.synchronize()
    size = os.path.getsize(p["pin"])
    pinned = torch.empty(size, dtype=torch.uint8, pin_memory=True)  # page-locked, and never copied
    mv, got = memoryview(pinned.numpy()), 0
    with open(p["pin"], "rb", buffering=0) as f:
        while got < size:
            k = f.readinto(mv[got:])
            if not k:
                break
            got += k
    crc = zlib.crc32(mv[:got])
    w = w @ w
    torch.cuda.synchronize()
    _truth(
        "host-only",
        {p["hash"]: (hashed, "HOST"), p["pin"]: (got, "HOST")},
        {"sha256": digest[:16], "crc32": crc, "pinned": bool(pinned.is_pinned())},
    )


def jax_npz(d: str) -> None:
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    import jax
    import numpy as np

    path = _p(d)["npz"]
    dev = jax.devices("gpu")[0]
    out, n = {}, 0
    with np.load(path) as z:
        for k in z.files:
            a = z[k]  # numpy reads the member out of the zip
            out[k] = jax.device_put(a, dev)
            out[k].block_until_ready()
            n += a.nbytes
    assert all(x.platform == "gpu" for g in out.values() for x in g.devices())
    # the arrays' data; not the zip records nor the .npy headers of the members
    _truth("jax-npz", {path: (n, "DRAM_BOUNCE")}, {"arrays": len(out), "device": str(dev)})


def mmap_slices(d: str) -> None:
    import mmap
    import warnings

    import numpy as np
    import torch

    warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
    path = _p(d)["mm"]
    with open(path, "rb") as f:
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    size = len(mm)
    parts, n = [], 0
    for off in range(0, size, MM_SLICE):
        a = np.frombuffer(mm, dtype=np.float32, count=min(MM_SLICE, size - off) // 4, offset=off)
        g = torch.from_numpy(a).to("cuda", non_blocking=False)
        parts.append(g)
        n += a.nbytes
        del a
    torch.cuda.synchronize()
    assert all(g.is_cuda for g in parts)
    del mm
    _truth("mmap-slices", {path: (n, "DRAM_BOUNCE")}, {"slices": len(parts)})


LOADERS = {
    "h5-slices": h5_slices,
    "h5-gzip": h5_gzip,
    "pq-torch": pq_torch,
    "torch-fromfile": torch_fromfile,
    "hf-bert": hf_bert,
    "dl-files": dl_files,
    "readinto-threads": readinto_threads,
    "host-only": host_only,
    "jax-npz": jax_npz,
    "mmap-slices": mmap_slices,
}


if __name__ == "__main__":
    sys.exit(main(sys.argv, __doc__ or "", prepare, LOADERS))
