"""A fourth held-out set of real GPU loaders, written without looking at how `gdsdiag trace` decides
(beside loaders.py, loaders_heldout.py, loaders_heldout2.py and loaders_heldout3.py, none of whose
programs it repeats): each prints its own ground truth for tests/workloads/score_loaders.py.

    python3 tests/workloads/loaders_heldout4.py prepare DIR       # untraced: writes DIR/ho4/*
    python3 tests/workloads/loaders.py evict|warm DIR/ho4         # untraced: cold or warm page cache
    gdsdiag trace --json -o RUN.jsonl -- python3 tests/workloads/loaders_heldout4.py LOADER DIR

LOADER is one of:
  shm-handoff    a spawned worker *process* reads a raw file chunk by chunk into 3 multiprocessing
                 shared_memory blocks in turn; the main process (not the one that read) copies each block
                 into its place in one torch CUDA tensor and hands the block back through a queue
  pipe-stream    a child process (`dd if=FILE bs=1M`) reads a raw file and writes it to a pipe; the main
                 process reads the pipe (raw reads) into a 1 MiB NumPy buffer, each full buffer copied into
                 its place in one cupy array
  torch-mmap-subset  torch.load(mmap=True, weights_only=True) of a zip checkpoint of a 6-layer model;
                 pipeline stage 0 of 2 moves the embedding and layers 0-2 to the GPU (.to("cuda")); the
                 output head and layers 3-5 are never touched
  st-slices      safetensors safe_open(framework="pt", device="cpu"), tensor-parallel rank 1 of 4: a
                 quarter of the rows (get_slice) of the embedding and the gate/up projections, a quarter of
                 the columns of the down projections, the norms whole (get_tensor), each then .to("cuda")
  preadv-scatter os.preadv of each 2 MiB record into 4 separate NumPy buffers of unequal sizes (one call a
                 record), each buffer then copied to the GPU by cupy.asarray, cupy.concatenate at the end
  executor-prefetch  asyncio: a producer coroutine keeps 4 os.pread calls in flight in a thread pool
                 (loop.run_in_executor), a consumer coroutine copies each chunk through one cupy pinned
                 buffer (cupy.cuda.alloc_pinned_memory) on a non-blocking stream into a cupy array
  fromfile-window  data-parallel rank 1 of 3 of a uint32 token file: np.fromfile(offset=, count=) of its
                 middle third only (an offset that is no multiple of a page), then jax.device_put
  memmap-gather  np.load(mmap_mode="r") of a float32 .npy, 6 batches of 256 rows picked at random (fancy
                 indexing gathers them into a new array), each pinned (pin_memory) and copied with its row
                 ids to the GPU (torch)
  txt-tokens     a plain .txt corpus of whitespace-separated integer token ids iterated line by line in text
                 mode (encoding="ascii"), int() of each id into one int32 NumPy array, then torch .cuda()
  legacy-torch   torch.load(map_location="cpu", weights_only=True) of a checkpoint saved in the legacy
                 (non-zip) format (_use_new_zipfile_serialization=False), then .cuda() per tensor
  sendfile-copy  a thread keeps CUDA busy copying host data made in memory (np.random, from no file) to the
                 GPU while file A is copied to A.copy by os.sendfile (kernel to kernel) and file B to B.copy
                 by shutil.copyfileobj (read + write through a 1 MiB user buffer): no file byte reaches a GPU
                 (then 4 KiB at each end of each file and copy are read back, on the host, to check them)
  kvikio-posix   KVIKIO_COMPAT_MODE=ON set before `import kvikio`: kvikio.CuFile(path, "r").pread of the two
                 halves of a raw file into one cupy array (kvikio's own POSIX reads and copies, no cuFile);
                 optional: without kvikio, rc 3
  arrow-ipc      a Hugging Face datasets-style Arrow IPC *stream* file (a list<int32> "input_ids" column and
                 a string "text" column, 1000-row record batches) opened through pa.memory_map (zero-copy);
                 each batch's input_ids offsets and values copied to the GPU (torch); "text" never touched
  ckpt-save      a training checkpoint written, the other direction: a model and its AdamW state on the GPU
                 (one optimizer step) saved by torch.save to an opened file, then flush + fsync (torch copies
                 each CUDA storage to host memory and writes it); then the zip's directory and the first
                 storage's first 64 bytes are read back on the host to check the file

Each prints one line `GROUND_TRUTH {json}` as the earlier sets do: for each file, "to_gpu" is the bytes
of the file on the expected "route" (DRAM_BOUNCE: file bytes that reached a GPU through host memory, or a
GPU's bytes that reached the file through host memory; HOST: file bytes that never reached a GPU),
computed from what the program itself read, copied or wrote.

How the bytes are counted (the conventions of loaders.py and the earlier held-out sets):
  - a format's own metadata that never reaches a GPU is left out: the zip records and data.pkl of the
    checkpoints (only the storages count), the legacy checkpoint's pickles and the 8-byte length before
    each storage, the safetensors header, the .npy header, the Arrow IPC schema and record-batch messages
    and buffer padding;
  - a partial load counts only the bytes of the parts copied: torch-mmap-subset the storages of the tensors
    moved to the GPU (each tensor has a storage of its own), st-slices the bytes of the elements in each
    slice (a column slice's elements lie in every row: the pages holding them hold the other columns too,
    which are not counted), fromfile-window the window's bytes, memmap-gather the bytes of the distinct
    rows gathered (a row picked twice reached the GPU twice but is one set of the file's bytes), arrow-ipc
    the offsets and values buffers of "input_ids" (rows + 1 offsets and the values, 4 bytes each, per
    batch), not the "text" column's buffers;
  - parsed text counts the text bytes the values were parsed from: txt-tokens counts every line of the
    file (the ids and the whitespace between them; every line's ids reached the GPU);
  - a file read by another process counts as if the program had read it: shm-handoff's file (read by the
    worker process into shared memory) and pipe-stream's file (read by dd, through the pipe) count every
    byte that reached the GPU;
  - a write counts the bytes written: ckpt-save counts the storages that were on the GPU (DRAM_BOUNCE; the
    optimizer's step counters, CPU tensors of 4 bytes, and the zip records are left out; the check's reads
    of the file afterwards reach no GPU and are not counted); sendfile-copy's
    copies A.copy and B.copy count every byte written (HOST: they came from a file and no GPU), as A and
    B count every byte copied from them (HOST);
  - raw files read whole count all their bytes.
"""

from __future__ import annotations

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
        "ho4",
        {
            "shm": "shm.bin",
            "pipe": "pipe.bin",
            "pt": "stage.pt",
            "st": "tp.safetensors",
            "pv": "records.bin",
            "ex": "prefetch.bin",
            "tok": "tokens.u32",
            "npy": "rows.npy",
            "txt": "corpus.txt",
            "legacy": "legacy.pt",
            "sfa": "a.bin",
            "sfa_copy": "a.bin.copy",  # (written by sendfile-copy, not by prepare)
            "sfb": "b.bin",
            "sfb_copy": "b.bin.copy",  # (the same)
            "kv": "kvikio.bin",
            "arrow": "data-00000-of-00001.arrow",
            "ckpt": "ckpt_out.pt",  # (written by ckpt-save, not by prepare)
        },
    )


# Raw files hold a pattern of 32-bit words that the GPU can recompute: word i is (i * MUL + salt) mod 2**32
# (little-endian), so each loader checks on the GPU that every byte it claims came from the file in place.
MUL = 2654435761
PATTERN = {  # file: (bytes, salt); the token file's third is no whole number of pages
    "shm": (24 * MiB, 11),
    "pipe": (20 * MiB, 12),
    "pv": (20 * MiB, 13),
    "ex": (20 * MiB, 14),
    "tok": (30 * MiB + 12000, 15),
    "kv": (16 * MiB, 16),
}
HOST_FILES = {"sfa": 12, "sfb": 12}  # MiB of random bytes

SHM_CHUNK, SHM_SLOTS = 2 * MiB, 3
PIPE_CHUNK = MiB
PV_PARTS = (64 * KiB, 448 * KiB, 512 * KiB, 1024 * KiB)  # one 2 MiB record a call
EX_CHUNK, EX_AHEAD = 2 * MiB, 4
TOK_RANK, TOK_WORLD = 1, 3
NPY_ROWS, NPY_COLS = 6144, 1024  # float32: 4 KiB rows, 24 MiB
MG_BATCHES, MG_BATCH = 6, 256
TXT_BYTES = 12 * MiB  # lines are written until the file holds at least this much
TP_RANK, TP_WORLD = 1, 4
PT_LAYERS, PT_DIM, PT_VOCAB = 6, 512, 4096
ARROW_ROWS, ARROW_BATCH = 8192, 1000
SF_CHUNK = 4 * MiB
SF_H2D = MiB


def _words(start: int, n: int, salt: int):
    import numpy as np

    i = np.arange(start, start + n, dtype=np.uint64)
    return ((i * MUL + salt) & 0xFFFFFFFF).astype("<u4")


def _check_cupy(g, start_byte: int, salt: int, what: str) -> None:
    """G (cupy uint8) holds the pattern file's bytes from START_BYTE on: checked on the GPU."""
    import cupy

    assert start_byte % 4 == 0 and g.size % 4 == 0, (start_byte, g.size)
    w = start_byte // 4
    i = cupy.arange(w, w + g.size // 4, dtype=cupy.uint64)
    want = ((i * MUL + salt) & 0xFFFFFFFF).astype(cupy.uint32)
    bad = int(cupy.count_nonzero(g.view(cupy.uint32) != want))
    if bad:
        raise SystemExit(f"{what}: {bad} of {g.size // 4} words on the GPU differ from the file")


def _check_torch(g, start_byte: int, salt: int, what: str) -> None:
    """G (torch uint8, CUDA) holds the pattern file's bytes from START_BYTE on: checked on the GPU."""
    import torch

    assert g.is_cuda and start_byte % 4 == 0 and g.numel() % 4 == 0
    w = start_byte // 4
    i = torch.arange(w, w + g.numel() // 4, dtype=torch.int64, device=g.device)
    want = (i * MUL + salt) & 0xFFFFFFFF
    got = g.view(torch.int32).to(torch.int64) & 0xFFFFFFFF
    bad = int((got != want).sum())
    if bad:
        raise SystemExit(f"{what}: {bad} of {g.numel() // 4} words on the GPU differ from the file")


def _prep_raw(d: str, rng) -> None:
    import numpy as np

    p = _p(d)
    for k, (size, salt) in PATTERN.items():
        _words(0, size // 4, salt).tofile(p[k])
    for k, mib in HOST_FILES.items():
        rng.integers(0, 256, mib * MiB, dtype=np.uint8).tofile(p[k])
    a = rng.standard_normal((NPY_ROWS, NPY_COLS), dtype=np.float32)
    a[:, 0] = np.arange(NPY_ROWS, dtype=np.float32)  # each row's id in its first column (exact in float32)
    np.save(p["npy"], a)


def _prep_text(d: str, rng) -> None:
    n = 0
    with open(_p(d)["txt"], "w", encoding="ascii", newline="\n") as f:
        while n < TXT_BYTES:
            ids = rng.integers(0, 50257, int(rng.integers(64, 512))).tolist()
            line = " ".join(map(str, ids)) + "\n"
            f.write(line)
            n += len(line)


def _prep_st(d: str, rng) -> None:
    import numpy as np
    from safetensors.numpy import save_file

    h, inter, vocab = 1024, 2048, 4096
    t = {"model.embed_tokens.weight": rng.standard_normal((vocab, h), dtype=np.float32).astype(np.float16)}
    for i in range(2):
        pre = f"model.layers.{i}."
        for name, shape in (("mlp.gate_proj", (inter, h)), ("mlp.up_proj", (inter, h)), ("mlp.down_proj", (h, inter))):
            t[pre + name + ".weight"] = (rng.standard_normal(shape, dtype=np.float32) * 0.02).astype(np.float16)
        t[pre + "input_layernorm.weight"] = np.ones(h, dtype=np.float16)
        t[pre + "post_attention_layernorm.weight"] = np.ones(h, dtype=np.float16)
    for k, a in t.items():  # ids a slice can be checked by, exact in float16 (integers up to 2048)
        if k.endswith(("gate_proj.weight", "up_proj.weight", "embed_tokens.weight")):
            a[:, 0] = np.arange(a.shape[0]) % 2048  # the row's id
        elif k.endswith("down_proj.weight"):
            a[0, :] = np.arange(a.shape[1]) % 2048  # the column's id
    save_file(t, _p(d)["st"], metadata={"format": "pt"})


def _prep_arrow(d: str, rng) -> None:
    import numpy as np
    import pyarrow as pa

    schema = pa.schema([("input_ids", pa.list_(pa.int32())), ("text", pa.string())])
    with pa.OSFile(_p(d)["arrow"], "wb") as sink, pa.ipc.new_stream(sink, schema) as w:
        for r0 in range(0, ARROW_ROWS, ARROW_BATCH):
            n = min(ARROW_BATCH, ARROW_ROWS - r0)
            lens = rng.integers(128, 640, n)
            offs = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
            vals = rng.integers(0, 50257, int(offs[-1]), dtype=np.int32)
            ids = pa.ListArray.from_arrays(pa.array(offs), pa.array(vals))
            chars = rng.integers(97, 123, n * 480, dtype=np.uint8).tobytes().decode("ascii")
            text = pa.array([chars[i * 480 : (i + 1) * 480] for i in range(n)])
            w.write_batch(pa.record_batch([ids, text], schema=schema))


def _prep_torch(d: str, rng) -> None:
    import numpy as np
    import torch

    def bf16(*shape, scale=0.02):
        return torch.from_numpy(rng.standard_normal(shape, dtype=np.float32) * scale).to(torch.bfloat16)

    sd = {"tok_embeddings.weight": bf16(PT_VOCAB, PT_DIM)}
    for i in range(PT_LAYERS):
        sd[f"layers.{i}.attention_norm.weight"] = torch.ones(PT_DIM)
        sd[f"layers.{i}.attention.wqkv.weight"] = bf16(3 * PT_DIM, PT_DIM)
        sd[f"layers.{i}.attention.wo.weight"] = bf16(PT_DIM, PT_DIM)
        sd[f"layers.{i}.ffn_norm.weight"] = torch.ones(PT_DIM)
        sd[f"layers.{i}.feed_forward.w1.weight"] = bf16(2 * PT_DIM, PT_DIM)
        sd[f"layers.{i}.feed_forward.w2.weight"] = bf16(PT_DIM, 2 * PT_DIM)
    sd["norm.weight"] = torch.ones(PT_DIM)
    sd["output.weight"] = bf16(PT_VOCAB, PT_DIM)
    sd = {k: v.clone().contiguous() for k, v in sd.items()}  # each its own, exact storage
    torch.save(sd, _p(d)["pt"])  # the default: a zip file

    def f32(*shape):
        return torch.from_numpy(rng.standard_normal(shape, dtype=np.float32) * 0.05)

    legacy = {"conv1.weight": f32(64, 3, 7, 7)}
    for name, c in (("bn1", 64), ("layer1.bn", 256), ("layer2.bn", 512)):
        legacy[f"{name}.weight"] = torch.ones(c)
        legacy[f"{name}.bias"] = torch.zeros(c)
        legacy[f"{name}.running_mean"] = f32(c)
        legacy[f"{name}.running_var"] = torch.ones(c)
        legacy[f"{name}.num_batches_tracked"] = torch.tensor(5000, dtype=torch.int64)
    legacy["layer1.conv.weight"] = f32(256, 64, 3, 3)
    legacy["layer1.conv2.weight"] = f32(256, 256, 3, 3)
    legacy["layer2.conv.weight"] = f32(512, 256, 3, 3)
    legacy["fc.weight"] = f32(1000, 2048)
    legacy["fc.bias"] = torch.zeros(1000)
    legacy = {k: v.clone().contiguous() for k, v in legacy.items()}
    torch.save(legacy, _p(d)["legacy"], _use_new_zipfile_serialization=False)


def prepare(d: str) -> None:
    import numpy as np

    p = _p(d)
    top = os.path.dirname(p["shm"])
    os.makedirs(top, exist_ok=True)
    rng = np.random.default_rng(41)
    _prep_raw(d, rng)
    _prep_text(d, rng)
    _prep_st(d, rng)
    _prep_arrow(d, rng)
    _prep_torch(d, rng)  # (last: without torch, everything else is written)
    written(top, d)


def _shm_worker(path: str, names: list, chunk: int, free_q, full_q) -> None:
    """shm-handoff's reading process: fills the free shared blocks with the file's chunks, in order."""
    from multiprocessing import shared_memory

    import numpy as np

    blocks = [shared_memory.SharedMemory(name=n) for n in names]
    try:
        off = 0
        with open(path, "rb", buffering=0) as f:
            while True:
                slot = free_q.get()
                k = 0
                while k < chunk:
                    n = f.readinto(blocks[slot].buf[k:chunk])
                    if not n:
                        break
                    k += n
                if not k:
                    break
                s = int(np.frombuffer(blocks[slot].buf, dtype=np.uint8, count=k).sum(dtype=np.uint64))
                full_q.put((slot, off, k, s))
                off += k
        full_q.put(("done", off, os.getpid()))
    except BaseException as e:  # (told to the main process, which fails loudly)
        full_q.put(("error", repr(e), os.getpid()))
    finally:
        for b in blocks:
            b.close()


def shm_handoff(d: str) -> None:
    import multiprocessing as mp
    from multiprocessing import shared_memory

    import torch

    path = _p(d)["shm"]
    size = os.path.getsize(path)
    ctx = mp.get_context("spawn")
    blocks = [shared_memory.SharedMemory(create=True, size=SHM_CHUNK) for _ in range(SHM_SLOTS)]
    try:
        free_q, full_q = ctx.Queue(), ctx.Queue()
        for i in range(SHM_SLOTS):
            free_q.put(i)
        dest = torch.empty(size, dtype=torch.uint8, device="cuda")
        torch.cuda.synchronize()
        proc = ctx.Process(target=_shm_worker, args=(path, [b.name for b in blocks], SHM_CHUNK, free_q, full_q))
        proc.start()
        moved = host_sum = chunks = 0
        while True:
            msg = full_q.get(timeout=60)
            if msg[0] == "error":
                raise SystemExit(f"shm-handoff: the reading process failed: {msg[1]}")
            if msg[0] == "done":
                read_by_worker, worker_pid = msg[1], msg[2]
                break
            slot, off, k, s = msg
            src = torch.frombuffer(blocks[slot].buf, dtype=torch.uint8, count=k)
            dest[off : off + k].copy_(src)  # from pageable memory: done when it returns
            del src
            free_q.put(slot)  # the block may be refilled
            moved += k
            host_sum += s
            chunks += 1
        proc.join(30)
        if proc.exitcode != 0:
            raise SystemExit(f"shm-handoff: the reading process ended with {proc.exitcode}")
    finally:
        for b in blocks:
            b.close()
            b.unlink()
    torch.cuda.synchronize()
    assert moved == read_by_worker == size, (moved, read_by_worker, size)
    assert int(dest.sum(dtype=torch.int64)) == host_sum, "the GPU's sum differs from the worker's"
    _check_torch(dest, 0, PATTERN["shm"][1], "shm-handoff")
    _truth(
        "shm-handoff",
        {path: (moved, "DRAM_BOUNCE")},
        {"chunks": chunks, "reader_pid": worker_pid, "copier_pid": os.getpid(), "slots": SHM_SLOTS},
    )


def pipe_stream(d: str) -> None:
    import subprocess

    import cupy
    import numpy as np

    path = _p(d)["pipe"]
    size = os.path.getsize(path)  # (the length a manifest would give)
    g = cupy.empty(size, dtype=cupy.uint8)
    buf = np.empty(PIPE_CHUNK, dtype=np.uint8)
    mv = memoryview(buf)
    proc = subprocess.Popen(["dd", f"if={path}", f"bs={MiB}", "status=none"], stdout=subprocess.PIPE, bufsize=0)
    got = chunks = 0
    with proc.stdout as pipe:
        while True:
            k = 0
            while k < PIPE_CHUNK:  # a pipe gives at most its capacity (64 KiB) a read
                n = pipe.readinto(mv[k:])
                if not n:
                    break
                k += n
            if not k:
                break
            if got + k > size:
                raise SystemExit(f"pipe-stream: more than the file's {size} bytes came through the pipe")
            g[got : got + k].set(buf[:k])  # synchronous: buf is free again on return
            got += k
            chunks += 1
    rc = proc.wait(timeout=30)
    if rc != 0:
        raise SystemExit(f"pipe-stream: dd ended with {rc}")
    cupy.cuda.runtime.deviceSynchronize()
    assert got == size, (got, size)
    _check_cupy(g, 0, PATTERN["pipe"][1], "pipe-stream")
    _truth("pipe-stream", {path: (got, "DRAM_BOUNCE")}, {"chunks": chunks, "reader": "dd", "reader_pid": proc.pid})


def torch_mmap_subset(d: str) -> None:
    import zipfile

    import torch

    path = _p(d)["pt"]
    assert zipfile.is_zipfile(path)
    sd = torch.load(path, mmap=True, map_location="cpu", weights_only=True)
    layers = 1 + max(int(k.split(".")[1]) for k in sd if k.startswith("layers."))
    stage = [
        k
        for k in sd
        if k.startswith("tok_embeddings.") or (k.startswith("layers.") and int(k.split(".")[1]) < layers // 2)
    ]
    on_gpu, n = {}, 0
    for k in stage:
        t = sd[k]
        assert t.untyped_storage().nbytes() == t.numel() * t.element_size(), f"{k} shares a storage"
        on_gpu[k] = t.to("cuda")
        n += t.numel() * t.element_size()
    torch.cuda.synchronize()
    for k, g in on_gpu.items():  # (the host side: the mapping's pages the copy just read)
        if not torch.equal(g.cpu(), sd[k]):
            raise SystemExit(f"torch-mmap-subset: {k} on the GPU differs from the checkpoint")
    skipped = [k for k in sd if k not in on_gpu]
    _truth(
        "torch-mmap-subset",
        {path: (n, "DRAM_BOUNCE")},
        {
            "stage": "0 of 2",
            "tensors_moved": len(on_gpu),
            "tensors_untouched": len(skipped),
            "bytes_untouched": sum(sd[k].numel() * sd[k].element_size() for k in skipped),
        },
    )


def st_slices(d: str) -> None:
    import torch
    from safetensors import safe_open

    path = _p(d)["st"]
    on_gpu, n, parts = {}, 0, {}
    with safe_open(path, framework="pt", device="cpu") as f:
        for name in f.keys():
            sl = f.get_slice(name)
            shape = sl.get_shape()
            if name.endswith(("embed_tokens.weight", "gate_proj.weight", "up_proj.weight")):
                r = shape[0] // TP_WORLD  # vocab- or column-parallel: this rank's rows
                lo, hi, axis = TP_RANK * r, (TP_RANK + 1) * r, 0
                t = sl[lo:hi]
            elif name.endswith("down_proj.weight"):
                c = shape[1] // TP_WORLD  # row-parallel: this rank's columns
                lo, hi, axis = TP_RANK * c, (TP_RANK + 1) * c, 1
                t = sl[:, lo:hi]
            else:
                t = f.get_tensor(name)  # replicated on every rank
                lo, hi, axis = 0, shape[0], None
            g = t.to("cuda")
            on_gpu[name] = g
            n += t.numel() * t.element_size()
            parts[name] = [axis, lo, hi]
            if axis is not None:  # the ids prepare wrote: each row's in column 0, each column's in row 0
                ids = g[:, 0] if axis == 0 else g[0, :]
                want = (torch.arange(lo, hi, device="cuda") % 2048).to(g.dtype)
                if not torch.equal(ids, want):
                    raise SystemExit(f"st-slices: {name} on the GPU is not its slice {lo}:{hi} (axis {axis})")
            if not torch.equal(g.cpu(), t):
                raise SystemExit(f"st-slices: {name} on the GPU differs from the slice read")
    torch.cuda.synchronize()
    _truth(
        "st-slices",
        {path: (n, "DRAM_BOUNCE")},
        {"rank": TP_RANK, "world": TP_WORLD, "tensors": len(on_gpu), "slices": parts},
    )


def preadv_scatter(d: str) -> None:
    import cupy
    import numpy as np

    path = _p(d)["pv"]
    size = os.path.getsize(path)
    bufs = [np.empty(n, dtype=np.uint8) for n in PV_PARTS]
    parts, calls, off = [], 0, 0
    fd = os.open(path, os.O_RDONLY)
    try:
        while off < size:
            k = os.preadv(fd, bufs, off)
            if k <= 0:
                break
            calls += 1
            left = k
            for b in bufs:  # the kernel filled them in order
                m = min(left, b.nbytes)
                if not m:
                    break
                parts.append(cupy.asarray(b[:m]))  # synchronous: b is free again on return
                left -= m
            off += k
    finally:
        os.close(fd)
    g = cupy.concatenate(parts)
    cupy.cuda.runtime.deviceSynchronize()
    assert g.size == off == size, (g.size, off, size)
    _check_cupy(g, 0, PATTERN["pv"][1], "preadv-scatter")
    _truth("preadv-scatter", {path: (off, "DRAM_BOUNCE")}, {"calls": calls, "buffers": len(parts)})


def executor_prefetch(d: str) -> None:
    import asyncio
    import collections
    from concurrent.futures import ThreadPoolExecutor

    import cupy
    import numpy as np

    path = _p(d)["ex"]
    size = os.path.getsize(path)
    g = cupy.empty(size, dtype=cupy.uint8)
    stats = {"moved": 0, "chunks": 0}

    async def run() -> None:
        loop = asyncio.get_running_loop()
        q: asyncio.Queue = asyncio.Queue(maxsize=EX_AHEAD)
        fd = os.open(path, os.O_RDONLY)

        def read(o: int) -> bytes:
            return os.pread(fd, min(EX_CHUNK, size - o), o)

        async def producer(ex) -> None:
            offs = iter(range(0, size, EX_CHUNK))
            inflight: collections.deque = collections.deque()
            for o in offs:
                inflight.append((o, loop.run_in_executor(ex, read, o)))
                if len(inflight) == EX_AHEAD:
                    break
            while inflight:
                o, fut = inflight.popleft()
                data = await fut
                nxt = next(offs, None)
                if nxt is not None:
                    inflight.append((nxt, loop.run_in_executor(ex, read, nxt)))
                await q.put((o, data))
            await q.put(None)

        async def consumer() -> None:
            mem = cupy.cuda.alloc_pinned_memory(EX_CHUNK)
            pinned = np.frombuffer(mem, dtype=np.uint8, count=EX_CHUNK)
            stream = cupy.cuda.Stream(non_blocking=True)
            while (item := await q.get()) is not None:
                o, data = item
                k = len(data)
                assert k == min(EX_CHUNK, size - o), f"short read at {o}: {k}"
                pinned[:k] = np.frombuffer(data, dtype=np.uint8)
                g[o : o + k].set(pinned[:k], stream=stream)  # asynchronous, from pinned memory
                stream.synchronize()  # the pinned buffer is refilled next
                stats["moved"] += k
                stats["chunks"] += 1

        try:
            with ThreadPoolExecutor(EX_AHEAD) as ex:
                await asyncio.gather(producer(ex), consumer())
        finally:
            os.close(fd)

    asyncio.run(run())
    cupy.cuda.runtime.deviceSynchronize()
    assert stats["moved"] == size, (stats, size)
    _check_cupy(g, 0, PATTERN["ex"][1], "executor-prefetch")
    _truth(
        "executor-prefetch",
        {path: (stats["moved"], "DRAM_BOUNCE")},
        {"chunks": stats["chunks"], "in_flight": EX_AHEAD},
    )


def fromfile_window(d: str) -> None:
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    import jax
    import jax.numpy as jnp
    import numpy as np

    path = _p(d)["tok"]
    dev = jax.devices("gpu")[0]
    words = os.path.getsize(path) // 4
    per = words // TOK_WORLD
    start = TOK_RANK * per
    a = np.fromfile(path, dtype="<u4", count=per, offset=start * 4)
    assert a.size == per
    g = jax.device_put(a, dev)
    g.block_until_ready()
    assert all(x.platform == "gpu" for x in g.devices())
    want = jnp.arange(start, start + per, dtype=jnp.uint32) * jnp.uint32(MUL) + jnp.uint32(PATTERN["tok"][1])
    want = jax.device_put(want, dev)
    bad = int(jnp.count_nonzero(g != want))
    if bad:
        raise SystemExit(f"fromfile-window: {bad} of {per} tokens on the GPU differ from the file's window")
    _truth(
        "fromfile-window",
        {path: (a.nbytes, "DRAM_BOUNCE")},
        {"offset": start * 4, "bytes": a.nbytes, "rank": TOK_RANK, "world": TOK_WORLD, "device": str(dev)},
    )


def memmap_gather(d: str) -> None:
    import numpy as np
    import torch

    path = _p(d)["npy"]
    torch.zeros(1, device="cuda")
    mm = np.load(path, mmap_mode="r")
    rows, cols = mm.shape
    rng = np.random.default_rng(2024)
    seen: set[int] = set()
    moved = 0
    for _ in range(MG_BATCHES):
        idx = rng.choice(rows, MG_BATCH, replace=False)
        batch = mm[idx]  # gathered from the mapping into a new array
        assert not np.shares_memory(batch, mm)
        x = torch.from_numpy(np.asarray(batch)).pin_memory().cuda(non_blocking=True)
        ids = torch.from_numpy(idx).cuda(non_blocking=True)
        torch.cuda.synchronize()
        if not torch.equal(x[:, 0].to(torch.int64), ids):
            raise SystemExit("memmap-gather: the rows on the GPU are not the rows picked")
        moved += x.numel() * x.element_size()
        seen.update(idx.tolist())
    row_bytes = cols * mm.dtype.itemsize
    _truth(
        "memmap-gather",
        {path: (len(seen) * row_bytes, "DRAM_BOUNCE")},
        {"batches": MG_BATCHES, "rows_picked": MG_BATCHES * MG_BATCH, "distinct_rows": len(seen), "h2d": moved},
    )


def txt_tokens(d: str) -> None:
    import numpy as np
    import torch

    path = _p(d)["txt"]
    ids: list[int] = []
    lens: list[int] = []
    read = 0
    with open(path, encoding="ascii") as f:  # text mode
        for line in f:
            read += len(line)  # (ASCII: a character a byte)
            toks = line.split()
            ids.extend(map(int, toks))
            lens.append(len(toks))
    assert read == os.path.getsize(path), (read, os.path.getsize(path))
    a = np.array(ids, dtype=np.int32)
    offsets = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    g = torch.from_numpy(a).cuda()
    go = torch.from_numpy(offsets).cuda()
    torch.cuda.synchronize()
    if int(g.sum(dtype=torch.int64)) != int(a.sum(dtype=np.int64)) or int(go[-1]) != g.numel():
        raise SystemExit("txt-tokens: the ids on the GPU differ from those parsed")
    assert int(g[0]) == ids[0] and int(g[-1]) == ids[-1]
    _truth(
        "txt-tokens",
        {path: (read, "DRAM_BOUNCE")},
        {"lines": len(lens), "tokens": g.numel(), "decoded_bytes_to_gpu": g.numel() * 4 + go.numel() * 8},
    )


def legacy_torch(d: str) -> None:
    import zipfile

    import torch

    path = _p(d)["legacy"]
    assert not zipfile.is_zipfile(path), "expected the legacy (non-zip) format"
    sd = torch.load(path, map_location="cpu", weights_only=True)
    storages = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in sd.values()}
    on_gpu, n = {}, 0
    for k, t in sd.items():
        on_gpu[k] = t.cuda()
        n += t.numel() * t.element_size()
    torch.cuda.synchronize()
    for k, g in on_gpu.items():
        if not torch.equal(g.cpu(), sd[k]):
            raise SystemExit(f"legacy-torch: {k} on the GPU differs from the checkpoint")
    assert n == sum(storages.values()), "every storage is one whole tensor"
    # the storages reached the GPU; the pickles (the object, then the storage keys) and each storage's
    # 8-byte element count did not
    _truth("legacy-torch", {path: (n, "DRAM_BOUNCE")}, {"tensors": len(on_gpu), "storages": len(storages)})


def sendfile_copy(d: str) -> None:
    import shutil
    import threading

    import numpy as np
    import torch

    p = _p(d)
    torch.zeros(1, device="cuda")
    stop, busy = threading.Event(), threading.Event()
    h2d = {"bytes": 0, "copies": 0}
    errors: list[BaseException] = []

    def gpu_busy() -> None:
        try:
            rng = np.random.default_rng(9)
            pool = rng.standard_normal((4, SF_H2D // 4), dtype=np.float32)  # made here, from no file
            w = torch.randn(512, 512, device="cuda")  # (as many elements as one copy)
            while not stop.is_set() or h2d["copies"] < 16:
                x = pool[h2d["copies"] % len(pool)]
                g = torch.from_numpy(x).cuda()  # a pageable host-to-GPU copy
                if h2d["copies"] % 8 == 0:
                    w = torch.tanh(w @ w + g[: w.numel()].view_as(w))
                h2d["bytes"] += x.nbytes
                h2d["copies"] += 1
                busy.set()
            torch.cuda.synchronize()
        except BaseException as e:  # (re-raised in the main thread)
            errors.append(e)
            busy.set()

    t = threading.Thread(target=gpu_busy)
    t.start()
    busy.wait(60)
    during = h2d["copies"]
    sent = 0
    with open(p["sfa"], "rb") as fi, open(p["sfa_copy"], "wb") as fo:
        size_a = os.fstat(fi.fileno()).st_size
        while sent < size_a:
            k = os.sendfile(fo.fileno(), fi.fileno(), sent, min(SF_CHUNK, size_a - sent))
            if not k:
                break
            sent += k
    with open(p["sfb"], "rb") as fi, open(p["sfb_copy"], "wb") as fo:
        shutil.copyfileobj(fi, fo, MiB)
        copied, wrote = fi.tell(), fo.tell()
    during = h2d["copies"] - during
    stop.set()
    t.join()
    if errors:
        raise errors[0]
    assert sent == size_a == os.path.getsize(p["sfa_copy"]), (sent, size_a)
    assert copied == wrote == os.path.getsize(p["sfb"]) == os.path.getsize(p["sfb_copy"]), (copied, wrote)
    for src, dst in ((p["sfa"], p["sfa_copy"]), (p["sfb"], p["sfb_copy"])):  # the copies' ends, on the host
        n = os.path.getsize(src)
        with open(src, "rb", buffering=0) as a, open(dst, "rb", buffering=0) as b:
            for o in (0, n - 4096):
                if os.pread(a.fileno(), 4096, o) != os.pread(b.fileno(), 4096, o):
                    raise SystemExit(f"sendfile-copy: {dst} differs from {src} at {o}")
    _truth(
        "sendfile-copy",
        {
            p["sfa"]: (sent, "HOST"),
            p["sfa_copy"]: (sent, "HOST"),
            p["sfb"]: (copied, "HOST"),
            p["sfb_copy"]: (wrote, "HOST"),
        },
        {"h2d_bytes_not_from_files": h2d["bytes"], "h2d_copies": h2d["copies"], "h2d_during_file_copies": during},
    )


def kvikio_posix(d: str) -> None:
    os.environ["KVIKIO_COMPAT_MODE"] = "ON"  # before the import: kvikio reads it once
    import cupy
    import kvikio
    import kvikio.defaults

    if not kvikio.defaults.is_compat_mode_preferred():
        raise SystemExit("kvikio-posix: kvikio does not prefer its compat (POSIX) mode: the route would differ")
    path = _p(d)["kv"]
    size = os.path.getsize(path)
    g = cupy.empty(size, dtype=cupy.uint8)
    half = (size // 2) & ~(MiB - 1)
    with kvikio.CuFile(path, "r") as f:
        futs = [f.pread(g[:half], half, 0), f.pread(g[half:], size - half, half)]  # its thread pool
        n = sum(fut.get() for fut in futs)
    cupy.cuda.runtime.deviceSynchronize()
    assert n == size, (n, size)
    _check_cupy(g, 0, PATTERN["kv"][1], "kvikio-posix")
    conf = {}
    for k in ("compat_mode", "num_threads", "task_size", "bounce_buffer_size", "auto_direct_io_read"):
        try:
            conf[k] = str(kvikio.defaults.get(k))
        except Exception as e:  # (the names differ between releases)
            conf[k] = f"? {e!r}"
    _truth(
        "kvikio-posix",
        {path: (n, "DRAM_BOUNCE")},
        {"kvikio": getattr(kvikio, "__version__", "?"), "reads": len(futs), **conf},
    )


def arrow_ipc(d: str) -> None:
    import warnings

    import numpy as np
    import pyarrow as pa
    import torch

    warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
    path = _p(d)["arrow"]
    torch.zeros(1, device="cuda")
    n = rows = batches = 0
    parts = []
    before = pa.total_allocated_bytes()
    with pa.memory_map(path, "r") as src:
        reader = pa.ipc.open_stream(src)
        for batch in reader:
            col = batch.column(batch.schema.get_field_index("input_ids"))
            assert col.null_count == 0 and col.offset == 0
            offs = col.offsets.to_numpy(zero_copy_only=True)  # views of the mapping
            vals = col.values.to_numpy(zero_copy_only=True)
            assert offs[0] == 0 and offs[-1] == vals.size
            go = torch.from_numpy(offs).cuda()
            gv = torch.from_numpy(vals).cuda()
            torch.cuda.synchronize()
            if int(gv.sum(dtype=torch.int64)) != int(vals.sum(dtype=np.int64)) or int(go[-1]) != gv.numel():
                raise SystemExit(f"arrow-ipc: batch {batches} on the GPU differs from the file")
            parts.append((go, gv))
            n += offs.nbytes + vals.nbytes
            rows += batch.num_rows
            batches += 1
        copied = pa.total_allocated_bytes() - before
    _truth(
        "arrow-ipc",
        {path: (n, "DRAM_BOUNCE")},
        {"rows": rows, "batches": batches, "arrow_pool_bytes": copied, "tokens": sum(g.numel() for _, g in parts)},
    )


def _tensors(obj):
    """The tensors in a nested checkpoint object, in the order pickle meets them."""
    import torch

    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, dict):
        for v in obj.values():
            yield from _tensors(v)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            yield from _tensors(v)


def ckpt_save(d: str) -> None:
    import re
    import zipfile

    import torch
    from torch import nn

    path = _p(d)["ckpt"]
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Embedding(4096, 256),
        *[m for _ in range(4) for m in (nn.Linear(256, 1024), nn.GELU(), nn.Linear(1024, 256))],
    ).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randint(0, 4096, (8, 128), device="cuda")
    model(x).float().pow(2).mean().backward()
    opt.step()
    torch.cuda.synchronize()
    ckpt = {"model": model.state_dict(), "optimizer": opt.state_dict(), "step": 1}
    seen: dict[int, tuple] = {}  # storage -> (nbytes, on a GPU), in the order torch.save writes them
    for t in _tensors(ckpt):
        s = t.untyped_storage()
        seen.setdefault(s.data_ptr(), (s.nbytes(), s.device.type == "cuda", t))
    with open(path, "wb") as f:
        torch.save(ckpt, f)
        f.flush()
        os.fsync(f.fileno())
    gpu_bytes = sum(n for n, cuda, _ in seen.values() if cuda)
    cpu_bytes = sum(n for n, cuda, _ in seen.values() if not cuda)
    with zipfile.ZipFile(path) as z:  # (the central directory and one record's first bytes, on the host)
        recs = {int(m.group(1)): i for i in z.infolist() if (m := re.search(r"(?:^|/)data/(\d+)$", i.filename))}
        if sum(i.file_size for i in recs.values()) != gpu_bytes + cpu_bytes or len(recs) != len(seen):
            raise SystemExit(f"ckpt-save: the file holds {len(recs)} storages, not the {len(seen)} saved")
        first = next(iter(seen.values()))[2]
        with z.open(recs[0]) as r:
            head = r.read(64)
    assert first.is_contiguous() and first.storage_offset() == 0
    if head != first.detach().reshape(-1).view(torch.uint8)[:64].cpu().numpy().tobytes():
        raise SystemExit("ckpt-save: the first storage in the file differs from the GPU's")
    _truth(
        "ckpt-save",
        {path: (gpu_bytes, "DRAM_BOUNCE")},
        {"storages": len(seen), "gpu_storages": sum(c for _, c, _ in seen.values()), "cpu_bytes": cpu_bytes},
    )


LOADERS = {
    "shm-handoff": shm_handoff,
    "pipe-stream": pipe_stream,
    "torch-mmap-subset": torch_mmap_subset,
    "st-slices": st_slices,
    "preadv-scatter": preadv_scatter,
    "executor-prefetch": executor_prefetch,
    "fromfile-window": fromfile_window,
    "memmap-gather": memmap_gather,
    "txt-tokens": txt_tokens,
    "legacy-torch": legacy_torch,
    "sendfile-copy": sendfile_copy,
    "kvikio-posix": kvikio_posix,
    "arrow-ipc": arrow_ipc,
    "ckpt-save": ckpt_save,
}


if __name__ == "__main__":
    sys.exit(main(sys.argv, __doc__ or "", prepare, LOADERS))
