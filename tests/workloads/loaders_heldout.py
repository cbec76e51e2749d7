"""More real loaders, written without looking at how `gdsdiag trace` decides (a held-out set beside
loaders.py): each prints its own ground truth for tests/workloads/score_loaders.py.

    python3 tests/workloads/loaders_heldout.py prepare DIR        # untraced: writes DIR/ho/*
    python3 tests/workloads/loaders.py evict|warm DIR/ho          # untraced: cold or warm page cache
    gdsdiag trace --json -o RUN.jsonl -- python3 tests/workloads/loaders_heldout.py LOADER DIR

LOADER is one of:
  st-loadfile   safetensors.torch.load_file(device="cuda:0"): the whole file at once
  torch-mmap    torch.load(mmap=True, map_location="cpu") of a zip checkpoint, then .cuda() per tensor
  pinned-stage  a reader with its own 4 MiB pinned buffer: readinto it, copy it to its place on the GPU
                (non_blocking), synchronize, reuse it
  zlib-decode   4 threads pread compressed chunks, inflate them into one NumPy array (their own decode
                buffers), then one cupy.asarray of the array
  odirect       O_DIRECT preadv into an anonymous mapping, each chunk then copied to the GPU (cupy set)
  kv-offload    a KV-cache block offloaded: GPU -> pageable host (cupy.asnumpy) -> write + fsync, and
                another block read back: readinto a NumPy buffer -> cupy.asarray
  mixed         CUDA up; one file only checksummed on the host (never reaches the GPU) while another is
                read chunk by chunk and each chunk copied to the GPU, interleaved in one thread
  dl-memmap     torch DataLoader, 2 forked workers indexing np.load(mmap_mode="r") rows (page faults in
                the workers), pin_memory=True, the main process copying each batch to the GPU

Each prints one line `GROUND_TRUTH {json}` as loaders.py does; "to_gpu" is the bytes of the file on
the expected route ("route": DRAM_BOUNCE for bytes between the file and a GPU through host memory,
HOST for bytes that never reached a GPU).
"""

from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from heldout import main, paths  # noqa: E402
from heldout import truth as _truth  # noqa: E402

MiB = 1 << 20
CHUNK = 4 * MiB


def _p(d: str) -> dict:
    return paths(
        d,
        "ho",
        {
            "st": "w.safetensors",
            "pt": "ckpt.pt",
            "stream": "stream.bin",
            "z": "chunks.z",
            "direct": "direct.bin",
            "kv_in": "kv_in.bin",
            "kv_out": "kv_out.bin",
            "host": "host.bin",
            "mix": "mix.bin",
            "mm": "rows.npy",
        },
    )


def prepare(d: str) -> None:
    import zlib

    import numpy as np
    import torch
    from safetensors.torch import save_file

    p = _p(d)
    os.makedirs(os.path.dirname(p["st"]), exist_ok=True)
    rng = np.random.default_rng(11)
    save_file(
        {f"blk{i}.w": torch.from_numpy(rng.standard_normal((768, 1024 + 64 * i), dtype=np.float32)) for i in range(10)},
        p["st"],
    )
    torch.save(
        {f"p{i}": torch.from_numpy(rng.standard_normal((512, 1536), dtype=np.float32)) for i in range(8)}, p["pt"]
    )
    for k, n in (("stream", 48), ("direct", 32), ("kv_in", 32), ("host", 24), ("mix", 24)):
        rng.standard_normal(n * MiB // 4, dtype=np.float32).tofile(p[k])
    # 16 compressed 2 MiB chunks (compressible: small integers), then an index of (offset, length)
    index, off = [], 0
    with open(p["z"], "wb") as f:
        for _ in range(16):
            c = zlib.compress(rng.integers(0, 16, 2 * MiB // 4, dtype=np.int32).tobytes(), 1)
            f.write(c)
            index.append((off, len(c)))
            off += len(c)
        tail = json.dumps(index).encode()
        f.write(tail + len(tail).to_bytes(8, "little"))
    np.save(p["mm"], rng.standard_normal((4096, 2048), dtype=np.float32))
    for f in p.values():
        if os.path.exists(f):
            fd = os.open(f, os.O_RDONLY)
            os.fsync(fd)
            os.close(fd)
    print(json.dumps({f: os.path.getsize(f) for f in p.values() if os.path.exists(f)}))


def st_loadfile(d: str) -> None:
    import torch
    from safetensors.torch import load_file

    path = _p(d)["st"]
    sd = load_file(path, device="cuda:0")
    torch.cuda.synchronize()
    n = sum(t.numel() * t.element_size() for t in sd.values())
    assert all(t.is_cuda for t in sd.values())
    _truth("st-loadfile", {path: (n, "DRAM_BOUNCE")}, {"tensors": len(sd)})


def torch_mmap(d: str) -> None:
    import torch

    path = _p(d)["pt"]
    sd = torch.load(path, mmap=True, map_location="cpu", weights_only=True)
    n = 0
    for t in sd.values():
        g = t.cuda()
        n += g.numel() * g.element_size()
    torch.cuda.synchronize()
    _truth("torch-mmap", {path: (n, "DRAM_BOUNCE")}, {"tensors": len(sd)})


def pinned_stage(d: str) -> None:
    import torch

    path = _p(d)["stream"]
    size = os.path.getsize(path)
    pinned = torch.empty(CHUNK, dtype=torch.uint8, pin_memory=True)
    g = torch.empty(size, dtype=torch.uint8, device="cuda")
    view = memoryview(pinned.numpy())
    off = 0
    with open(path, "rb", buffering=0) as f:
        while True:
            n = f.readinto(view)
            if not n:
                break
            g[off : off + n].copy_(pinned[:n], non_blocking=True)
            torch.cuda.synchronize()  # the buffer is reused: the copy must be done first
            off += n
    _truth("pinned-stage", {path: (off, "DRAM_BOUNCE")})


def zlib_decode(d: str) -> None:
    import zlib
    from concurrent.futures import ThreadPoolExecutor

    import cupy
    import numpy as np

    path = _p(d)["z"]
    size = os.path.getsize(path)
    fd = os.open(path, os.O_RDONLY)
    tlen = int.from_bytes(os.pread(fd, 8, size - 8), "little")
    index = json.loads(os.pread(fd, tlen, size - 8 - tlen))
    out = np.empty(len(index) * 2 * MiB, dtype=np.uint8)

    def one(i: int) -> None:
        o, n = index[i]
        raw = zlib.decompress(os.pread(fd, n, o))
        out[i * 2 * MiB : (i + 1) * 2 * MiB] = np.frombuffer(raw, dtype=np.uint8)

    with ThreadPoolExecutor(4) as ex:
        list(ex.map(one, range(len(index))))
    g = cupy.asarray(out)
    cupy.cuda.runtime.deviceSynchronize()
    os.close(fd)
    data = sum(n for _, n in index)  # the compressed chunks reached the GPU, inflated (not the index)
    _truth("zlib-decode", {path: (data, "DRAM_BOUNCE")}, {"decoded_bytes_to_gpu": int(g.nbytes)})


def odirect(d: str) -> None:
    import mmap

    import cupy
    import numpy as np

    path = _p(d)["direct"]
    size = os.path.getsize(path)
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    buf = mmap.mmap(-1, CHUNK)  # page-aligned: what O_DIRECT needs
    g = cupy.empty(size, dtype=cupy.uint8)
    off = 0
    while off < size:
        n = os.preadv(fd, [buf], off)
        if n <= 0:
            break
        g[off : off + n].set(np.frombuffer(buf, dtype=np.uint8, count=n))
        off += n
    cupy.cuda.runtime.deviceSynchronize()
    os.close(fd)
    _truth("odirect", {path: (off, "DRAM_BOUNCE")})


def kv_offload(d: str) -> None:
    import cupy
    import numpy as np

    p = _p(d)
    blk = cupy.random.standard_normal(32 * MiB // 4, dtype=cupy.float32)
    host = cupy.asnumpy(blk)  # GPU -> pageable host memory
    fd = os.open(p["kv_out"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    mv = memoryview(host).cast("B")
    for o in range(0, len(mv), CHUNK):
        os.write(fd, mv[o : o + CHUNK])
    os.fsync(fd)
    os.close(fd)
    back = np.empty(os.path.getsize(p["kv_in"]), dtype=np.uint8)
    with open(p["kv_in"], "rb", buffering=0) as f:
        got = f.readinto(memoryview(back))
    g = cupy.asarray(back)
    cupy.cuda.runtime.deviceSynchronize()
    _truth(
        "kv-offload",
        {p["kv_out"]: (host.nbytes, "DRAM_BOUNCE"), p["kv_in"]: (got, "DRAM_BOUNCE")},
        {"gpu_bytes": int(g.nbytes)},
    )


def mixed(d: str) -> None:
    import hashlib

    import cupy
    import numpy as np

    p = _p(d)
    cupy.zeros(1).sum()  # CUDA up before any read
    h = hashlib.sha256()
    size = os.path.getsize(p["mix"])
    g = cupy.empty(size, dtype=cupy.uint8)
    hosted = moved = 0
    with open(p["host"], "rb", buffering=0) as a, open(p["mix"], "rb", buffering=0) as b:
        while True:
            x = a.read(MiB)
            y = b.read(MiB)
            if x:
                h.update(x)  # on the host only
                hosted += len(x)
            if y:
                g[moved : moved + len(y)].set(np.frombuffer(y, dtype=np.uint8))
                moved += len(y)
            if not x and not y:
                break
    cupy.cuda.runtime.deviceSynchronize()
    _truth("mixed", {p["host"]: (hosted, "HOST"), p["mix"]: (moved, "DRAM_BOUNCE")}, {"sha256": h.hexdigest()[:16]})


class _Rows:
    def __init__(self, path: str):
        self.path, self.mm = path, None

    def __len__(self) -> int:
        return 4096 // 16

    def __getitem__(self, i: int):
        import numpy as np
        import torch

        if self.mm is None:  # opened in the worker: its pages fault in there
            self.mm = np.load(self.path, mmap_mode="r")
        return torch.from_numpy(np.array(self.mm[i * 16 : (i + 1) * 16]))


def dl_memmap(d: str) -> None:
    import numpy as np
    import torch
    from torch.utils.data import DataLoader

    path = _p(d)["mm"]
    torch.cuda.init()
    loader = DataLoader(_Rows(path), batch_size=4, num_workers=2, pin_memory=True)
    n = 0
    for batch in loader:
        g = batch.cuda(non_blocking=True)
        n += g.numel() * g.element_size()
    torch.cuda.synchronize()
    hdr = os.path.getsize(path) - np.load(path, mmap_mode="r").nbytes
    _truth("dl-memmap", {path: (n, "DRAM_BOUNCE")}, {"npy_header": hdr, "workers": 2})


LOADERS = {
    "st-loadfile": st_loadfile,
    "torch-mmap": torch_mmap,
    "pinned-stage": pinned_stage,
    "zlib-decode": zlib_decode,
    "odirect": odirect,
    "kv-offload": kv_offload,
    "mixed": mixed,
    "dl-memmap": dl_memmap,
}


if __name__ == "__main__":
    sys.exit(main(sys.argv, __doc__ or "", prepare, LOADERS))
