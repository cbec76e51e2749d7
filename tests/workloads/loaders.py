"""Real loaders users run, each printing its own ground truth, for `gdsdiag trace` to be scored on.

    python3 tests/workloads/loaders.py prepare DIR         # untraced: writes the files every loader reads
    python3 tests/workloads/loaders.py evict DIR           # untraced: drops them from the page cache (cold)
    python3 tests/workloads/loaders.py warm DIR            # untraced: reads them once (warm)
    gdsdiag trace --json -- python3 tests/workloads/loaders.py LOADER DIR

LOADER is one of:
  st-load     safetensors.safe_open(framework="pt", device="cuda:0"), tensor by tensor (the library mmaps
              the file and copies each tensor through host memory)
  hf-load     transformers AutoModelForCausalLM.from_pretrained(DIR/hf, device_map="cuda") of a small
              Llama model saved with save_pretrained (safetensors shards)
  dl-load     torch DataLoader, 2 forked worker processes reading raw .bin samples, pin_memory=True,
              the main process copying each batch to the GPU
  dl-spawn    the same with spawned workers
  pq-load     pyarrow.parquet.read_table (its own thread pool, snappy pages decoded into its own
              buffers) then cupy.asarray of each column
  np-memmap   numpy.load(mmap_mode="r") then cupy.asarray (a copy from the mapping)
  jax-load    numpy.fromfile then jax.device_put (JAX's own driver calls)
  h5-load     h5py dataset reads then cupy.asarray (HDF5's own reads into NumPy buffers)
  st-wait     st-load, started untraced: it waits for DIR/go before loading (for `trace --pid`)

Each loader prints one line `GROUND_TRUTH {json}`: for every file it read, the bytes of it that reached
the GPU and the route they took (no cuFile call in any of these: host memory, DRAM_BOUNCE), the file's
size, and what the program itself saw (tensor counts, bytes copied to the GPU).
"""

from __future__ import annotations

import json
import os
import sys

ST_TENSORS = [(f"layer{i}.w", (1024, 512 + 128 * i)) for i in range(12)] + [("embed", (2048, 1024))]


def _paths(d: str) -> dict:
    return {
        "st": os.path.join(d, "weights.safetensors"),
        "hf": os.path.join(d, "hf"),
        "dl": os.path.join(d, "samples"),
        "pq": os.path.join(d, "table.parquet"),
        "npy": os.path.join(d, "array.npy"),
        "raw": os.path.join(d, "raw.bin"),
        "h5": os.path.join(d, "data.h5"),
    }


def prepare(d: str) -> None:
    import numpy as np

    p = _paths(d)
    os.makedirs(d, exist_ok=True)
    rng = np.random.default_rng(7)
    import torch
    from safetensors.torch import save_file

    save_file({n: torch.from_numpy(rng.standard_normal(s, dtype=np.float32)) for n, s in ST_TENSORS}, p["st"])
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(
        hidden_size=512,
        intermediate_size=1376,
        num_hidden_layers=4,
        num_attention_heads=8,
        num_key_value_heads=8,
        vocab_size=8000,
        tie_word_embeddings=False,
    )
    torch.manual_seed(0)
    LlamaForCausalLM(cfg).to(torch.bfloat16).save_pretrained(p["hf"], safe_serialization=True)
    os.makedirs(p["dl"], exist_ok=True)
    for i in range(32):
        rng.standard_normal(512 * 1024, dtype=np.float32).tofile(os.path.join(p["dl"], f"s{i:03d}.bin"))
    import pyarrow as pa
    import pyarrow.parquet as pq

    n = 1 << 20
    cols = {f"c{i}": rng.integers(0, 1000, n).astype(np.int64) for i in range(4)}
    cols.update({f"f{i}": rng.standard_normal(n) for i in range(2)})
    pq.write_table(pa.table(cols), p["pq"], compression="snappy")
    np.save(p["npy"], rng.standard_normal((2048, 4096), dtype=np.float32))
    rng.standard_normal(4 << 20, dtype=np.float32).tofile(p["raw"])
    import h5py

    with h5py.File(p["h5"], "w") as h:
        for i in range(4):
            h.create_dataset(f"d{i}", data=rng.standard_normal((1024, 2048), dtype=np.float32))
    for f in _files(d):
        fd = os.open(f, os.O_RDONLY)
        os.fsync(fd)
        os.close(fd)
    print(json.dumps({f: os.path.getsize(f) for f in _files(d)}))


def _files(d: str) -> list[str]:
    out = []
    for root, _, names in os.walk(d):
        out += [os.path.join(root, n) for n in sorted(names)]
    return sorted(out)


def _cached_pages(path: str) -> tuple[int, int]:
    """(pages resident in the page cache, pages) by mincore on a mapping of the file."""
    import ctypes
    import mmap

    size = os.path.getsize(path)
    if size == 0:
        return 0, 0
    with open(path, "rb") as f:
        m = mmap.mmap(f.fileno(), size, access=mmap.ACCESS_COPY)  # (private: ctypes needs a writable buffer)
    libc = ctypes.CDLL(None, use_errno=True)
    n = (size + 4095) // 4096
    vec = (ctypes.c_ubyte * n)()
    c = ctypes.c_char.from_buffer(m)
    libc.mincore(ctypes.c_void_p(ctypes.addressof(c)), ctypes.c_size_t(size), vec)
    del c
    resident = sum(v & 1 for v in vec)
    m.close()
    return resident, n


def evict(d: str) -> None:
    for f in _files(d):
        fd = os.open(f, os.O_RDONLY)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)
    if any(_cached_pages(f)[0] for f in _files(d)) and os.geteuid() == 0:
        with open("/proc/sys/vm/drop_caches", "w") as f:  # (a file system that ignores the advice)
            f.write("1\n")
    print(json.dumps({f: _cached_pages(f) for f in _files(d)}))


def warm(d: str) -> None:
    for f in _files(d):
        with open(f, "rb") as fh:
            while fh.read(1 << 20):
                pass
    print(json.dumps({f: _cached_pages(f) for f in _files(d)}))


def _truth(loader: str, files: dict, extra: dict) -> None:
    cache = {f: _cached_pages(f) for f in files}
    print(
        "GROUND_TRUTH "
        + json.dumps(
            {
                "loader": loader,
                "files": {
                    f: {"size": os.path.getsize(f), "to_gpu": n, "route": "DRAM_BOUNCE", "cached_after": cache[f]}
                    for f, n in files.items()
                },
                **extra,
            }
        ),
        flush=True,
    )


def st_load(d: str) -> None:
    import torch
    from safetensors import safe_open

    path = _paths(d)["st"]
    before = _cached_pages(path)
    n = nbytes = 0
    with safe_open(path, framework="pt", device="cuda:0") as f:
        for k in f.keys():
            t = f.get_tensor(k)
            n += 1
            nbytes += t.numel() * t.element_size()
    torch.cuda.synchronize()
    # every tensor byte came from the file; the header is read too (a few hundred bytes)
    _truth("st-load", {path: nbytes}, {"tensors": n, "bytes_to_gpu": nbytes, "cached_before": before})


def hf_load(d: str) -> None:
    import torch
    from transformers import AutoModelForCausalLM

    hf = _paths(d)["hf"]
    shards = sorted(os.path.join(hf, n) for n in os.listdir(hf) if n.endswith(".safetensors"))
    before = {s: _cached_pages(s) for s in shards}
    model = AutoModelForCausalLM.from_pretrained(hf, device_map="cuda", torch_dtype=torch.bfloat16)
    torch.cuda.synchronize()
    nbytes = sum(p.numel() * p.element_size() for p in model.parameters())
    dev = {str(p.device) for p in model.parameters()}
    # safetensors tensors are the parameters: the shard bytes less headers reached the GPU
    from safetensors import safe_open

    per = {}
    for s in shards:
        with safe_open(s, framework="np") as f:
            per[s] = sum(_nbytes(f, k) for k in f.keys())
    _truth("hf-load", per, {"param_bytes": nbytes, "devices": sorted(dev), "cached_before": before})


def _nbytes(f, k) -> int:
    import math

    sl = f.get_slice(k)
    sizes = {"F32": 4, "BF16": 2, "F16": 2, "I64": 8, "F64": 8, "I32": 4}
    return math.prod(sl.get_shape()) * sizes.get(sl.get_dtype(), 4)


class _Samples:
    def __init__(self, d: str):
        self.files = sorted(os.path.join(d, n) for n in os.listdir(d))

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, i: int):
        import numpy as np
        import torch

        with open(self.files[i], "rb") as f:
            return torch.from_numpy(np.frombuffer(f.read(), dtype=np.float32).copy())


def dl_load(d: str, ctx: str | None) -> None:
    import torch
    from torch.utils.data import DataLoader

    torch.cuda.init()
    ds = _Samples(_paths(d)["dl"])
    loader = DataLoader(ds, batch_size=4, num_workers=2, pin_memory=True, multiprocessing_context=ctx)
    nbytes = 0
    for batch in loader:
        g = batch.cuda(non_blocking=True)
        nbytes += g.numel() * g.element_size()
    torch.cuda.synchronize()
    _truth(
        "dl-spawn" if ctx else "dl-load",
        {f: os.path.getsize(f) for f in ds.files},
        {"bytes_to_gpu": nbytes, "workers": 2, "main_pid": os.getpid()},
    )


def pq_load(d: str) -> None:
    import cupy
    import pyarrow.parquet as pq

    path = _paths(d)["pq"]
    t = pq.read_table(path)
    nbytes = 0
    for name in t.column_names:
        g = cupy.asarray(t.column(name).to_numpy())
        nbytes += g.nbytes
    cupy.cuda.runtime.deviceSynchronize()
    # every column chunk of the file reached the GPU, decoded (the file is snappy-compressed)
    _truth("pq-load", {path: os.path.getsize(path)}, {"decoded_bytes_to_gpu": nbytes, "columns": t.num_columns})


def np_memmap(d: str) -> None:
    import cupy
    import numpy as np

    path = _paths(d)["npy"]
    a = np.load(path, mmap_mode="r")
    g = cupy.asarray(a)
    cupy.cuda.runtime.deviceSynchronize()
    _truth("np-memmap", {path: g.nbytes}, {"bytes_to_gpu": g.nbytes})


def jax_load(d: str) -> None:
    import jax
    import numpy as np

    path = _paths(d)["raw"]
    a = np.fromfile(path, dtype=np.float32)
    g = jax.device_put(a, jax.devices("gpu")[0])
    g.block_until_ready()
    _truth("jax-load", {path: a.nbytes}, {"bytes_to_gpu": a.nbytes, "device": str(g.devices())})


def h5_load(d: str) -> None:
    import cupy
    import h5py

    path = _paths(d)["h5"]
    nbytes = 0
    with h5py.File(path, "r") as h:
        for k in h:
            g = cupy.asarray(h[k][...])
            nbytes += g.nbytes
    cupy.cuda.runtime.deviceSynchronize()
    _truth("h5-load", {path: nbytes}, {"bytes_to_gpu": nbytes})


def st_wait(d: str) -> None:
    """Imports done and CUDA up before the trace attaches (a running server, as --pid finds it)."""
    import time

    import torch

    torch.zeros(1, device="cuda")
    print(f"ready {os.getpid()}", flush=True)
    go = os.path.join(d, "go")
    for _ in range(600):
        if os.path.exists(go):
            break
        time.sleep(0.05)
    st_load(d)


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    what, d = argv[1], argv[2]
    fns = {
        "prepare": prepare,
        "evict": evict,
        "warm": warm,
        "st-load": st_load,
        "hf-load": hf_load,
        "dl-load": lambda d: dl_load(d, None),
        "dl-spawn": lambda d: dl_load(d, "spawn"),
        "pq-load": pq_load,
        "np-memmap": np_memmap,
        "jax-load": jax_load,
        "h5-load": h5_load,
        "st-wait": st_wait,
    }
    if what not in fns:
        print(f"unknown loader {what}; one of {', '.join(fns)}", file=sys.stderr)
        return 2
    fns[what](d)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
