"""A fifth held-out set: model loaders from PyPI that run their own I/O engines (not ours, not torch's),
written without looking at how `gdsdiag trace` decides. Each prints its own ground truth for
tests/workloads/score_loaders.py, from what the library itself reports and what reached the GPU.

    python3 tests/workloads/loaders_heldout5.py prepare DIR       # untraced: writes DIR/ho5/*
    python3 tests/workloads/loaders.py evict|warm DIR/ho5         # untraced: cold or warm page cache
    gdsdiag trace --json -o RUN.jsonl -- python3 tests/workloads/loaders_heldout5.py LOADER DIR

The packages (wheels carried to the GPU machine; none is installed there by default):
  fastsafetensors 0.5   C++ reader threads: cuFile (GDS) when /dev/nvidia-fs0 exists, else its own
                        "nogds" copier (O_DIRECT pread into a pinned bounce buffer, cudaMemcpy to the GPU)
  runai-model-streamer  a C++ streamer with io_uring (O_DIRECT, registered buffers), libaio O_DIRECT and
  0.17                  synchronous pread engines (RUNAI_STREAMER_FS_STRATEGY), into host buffers; the
                        tensors it yields are copied to the GPU with torch
  kvikio 26.10          a C++ thread pool: cuFile, or its own POSIX path (pread into pinned bounce
                        buffers, then a copy) in compatibility mode (KVIKIO_COMPAT_MODE)

LOADER is one of:
  fst-auto        fastsafetensors with its defaults (GDS asked for): on a node without nvidia-fs it warns
                  and falls back to its nogds copier
  fst-nogds       fastsafetensors nogds=True (its O_DIRECT bounce path), 4 threads
  runai-uring     runai-model-streamer, RUNAI_STREAMER_FS_STRATEGY=io_uring_direct, tensors .to("cuda")
  runai-libaio    the same with libaio_direct
  runai-sync      the same with sync_buffered (pread from a thread pool)
  runai-hoststats a negative control: the streamer reads shard A and the tensors are only reduced on the
                  host, while CUDA copies random host tensors of the same sizes (made in memory) to the GPU
  kvikio-posix    kvikio CuFile.read into CuPy arrays, KVIKIO_COMPAT_MODE=ON (its POSIX path)
  kvikio-cufile   the same, KVIKIO_COMPAT_MODE=OFF (cuFile; on a node without nvidia-fs, libcufile's own
                  compatibility mode)

Ground truth. Every loader checks what reached the GPU against the file's tensors read on the host with
the safetensors package (a mismatch is an error, never a GROUND_TRUTH line). The bytes counted are the
tensors' data (the safetensors header, 8 bytes + JSON, never reaches a GPU and is left out, as in the
earlier sets). The route: DRAM_BOUNCE when the library's engine read into host memory and a CUDA copy took
the bytes; COMPAT when kvikio reports it read through cuFile (kvikio's own is_compat_mode_preferred()
says which: kvikio.defaults.is_compat_mode_preferred) — libcufile's compatibility mode on a node without nvidia-fs; HOST for the control.
"""

from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from heldout import main, paths, written  # noqa: E402
from heldout import truth as _truth  # noqa: E402

MiB = 1 << 20
# (name, rows, cols) of each shard's float16 tensors: sizes not all multiples of 4 KiB, so a tensor's
# start is not always where an engine's read starts
SHAPES = [(f"layer{i}.w", 1024 + 96 * i, 2048 + 8 * i) for i in range(10)] + [("embed", 4001, 1023)]


def _p(d: str) -> dict:
    return paths(d, "ho5", {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"})


def prepare(d: str) -> None:
    import torch
    from safetensors.torch import save_file

    p = _p(d)
    os.makedirs(os.path.dirname(p["a"]), exist_ok=True)
    g = torch.Generator().manual_seed(5)
    for k, path in (("a", p["a"]), ("b", p["b"])):
        tensors = {f"{k}.{n}": torch.randn(r, c, generator=g, dtype=torch.float32).half() for n, r, c in SHAPES}
        save_file(tensors, path)
    written(os.path.dirname(p["a"]), d)


def _data_bytes(path: str) -> int:
    """The tensors' bytes: the file less its 8-byte header length and the JSON header."""
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
    return os.path.getsize(path) - 8 - n


def _reference(path: str) -> dict:
    from safetensors import safe_open

    with safe_open(path, framework="pt", device="cpu") as f:
        return {k: f.get_tensor(k) for k in f.keys()}


def _check(path: str, on_gpu: dict) -> int:
    """Compare the GPU tensors with the file's own (read on the host after the load): the bytes checked."""
    import torch

    ref = _reference(path)
    if set(ref) != set(on_gpu):
        raise SystemExit(f"{path}: tensors {sorted(set(ref) ^ set(on_gpu))[:4]} missing or extra")
    n = 0
    for k, t in ref.items():
        g = on_gpu[k]
        if g.device.type != "cuda":
            raise SystemExit(f"{path}: {k} is on {g.device}, not a GPU")
        if not torch.equal(g.view(torch.int16).cpu(), t.view(torch.int16)):
            raise SystemExit(f"{path}: {k} differs from the file's bytes")
        n += t.numel() * t.element_size()
    return n


def _fst(d: str, nogds: bool, name: str) -> None:
    import fastsafetensors
    from fastsafetensors import SafeTensorsFileLoader, SingleGroup

    p = _p(d)
    # (its warnings go to stderr as the library prints them: the program's own message)
    loader = SafeTensorsFileLoader(SingleGroup(), "cuda:0", nogds=nogds, max_threads=4)
    copier = getattr(getattr(loader, "copier_class", None), "__name__", "?")
    loader.add_filenames({0: [p["a"], p["b"]]})
    fb = loader.copy_files_to_device()
    got: dict = {}
    for k, path in (("a", p["a"]), ("b", p["b"])):
        got[path] = {f"{k}.{n}": fb.get_tensor(f"{k}.{n}").clone() for n, _, _ in SHAPES}
    fb.close()
    loader.close()
    checked = {path: _check(path, t) for path, t in got.items()}
    for path, n in checked.items():
        if n != _data_bytes(path):
            raise SystemExit(f"{path}: {n} tensor bytes checked, the file holds {_data_bytes(path)}")
    _truth(
        name,
        {path: (n, "DRAM_BOUNCE") for path, n in checked.items()},
        {
            "copier": copier,
            "nvidia_fs_node": os.path.exists("/dev/nvidia-fs0"),
            "fastsafetensors": getattr(fastsafetensors, "__version__", "?"),
        },
    )


def fst_auto(d: str) -> None:
    _fst(d, False, "fst-auto")


def fst_nogds(d: str) -> None:
    _fst(d, True, "fst-nogds")


def _runai(d: str, strategy: str, name: str, host_only: bool = False) -> None:
    os.environ["RUNAI_STREAMER_FS_STRATEGY"] = strategy
    os.environ.setdefault("RUNAI_STREAMER_LOG_TO_STDERR", "1")
    import torch
    from runai_model_streamer import SafetensorsStreamer

    p = _p(d)
    paths_ = [p["a"]] if host_only else [p["a"], p["b"]]
    got: dict = {path: {} for path in paths_}
    where = {f"{'a' if path == p['a'] else 'b'}.{k}": path for path in paths_ for k, _, _ in SHAPES}
    sums = 0.0
    noise = []
    with SafetensorsStreamer() as s:
        s.stream_files(paths_)
        for key, t in s.get_tensors():
            if host_only:
                sums += float(t.float().sum())  # on the host only
                got[where[key]][key] = t.clone()
                # CUDA busy with other bytes of the same size, made in memory (from no file)
                noise.append(torch.randn(t.shape, dtype=torch.float32).half().to("cuda:0"))
            else:
                got[where[key]][key] = t.to("cuda:0")
    torch.cuda.synchronize()
    if host_only:
        ref = _reference(p["a"])
        if not all(torch.equal(ref[k].view(torch.int16), v.view(torch.int16)) for k, v in got[p["a"]].items()):
            raise SystemExit(f"{p['a']}: the streamer's tensors differ from the file's bytes")
        n = sum(t.numel() * t.element_size() for t in got[p["a"]].values())
        _truth(name, {p["a"]: (n, "HOST")}, {"strategy": strategy, "host_sum": sums, "noise_tensors": len(noise)})
        return
    checked = {path: _check(path, t) for path, t in got.items()}
    _truth(name, {path: (n, "DRAM_BOUNCE") for path, n in checked.items()}, {"strategy": strategy})


def runai_uring(d: str) -> None:
    _runai(d, "io_uring_direct", "runai-uring")


def runai_libaio(d: str) -> None:
    _runai(d, "libaio_direct", "runai-libaio")


def runai_sync(d: str) -> None:
    _runai(d, "sync_buffered", "runai-sync")


def runai_hoststats(d: str) -> None:
    _runai(d, "sync_buffered", "runai-hoststats", host_only=True)


def _kvikio(d: str, compat: str, name: str) -> None:
    os.environ["KVIKIO_COMPAT_MODE"] = compat
    import cupy as cp
    import kvikio
    import kvikio.defaults
    import torch

    p = _p(d)
    got: dict = {}
    posix = []
    for path in (p["a"], p["b"]):
        with open(path, "rb") as f:
            n = int.from_bytes(f.read(8), "little")
            header = json.loads(f.read(n))
        base = 8 + n
        got[path] = {}
        with kvikio.CuFile(path, "r") as f:
            # (kvikio's own answer: its POSIX path, or cuFile; KVIKIO_COMPAT_MODE decides it here)
            posix.append(bool(kvikio.defaults.is_compat_mode_preferred()))
            for key, meta in header.items():
                if key == "__metadata__":
                    continue
                lo, hi = meta["data_offsets"]
                buf = cp.empty(hi - lo, dtype=cp.uint8)
                if f.read(buf, hi - lo, base + lo) != hi - lo:
                    raise SystemExit(f"{path}: short kvikio read of {key}")
                got[path][key] = torch.as_tensor(buf, device="cuda:0").view(torch.float16).view(*meta["shape"])
    if len(set(posix)) != 1:
        raise SystemExit(f"kvikio chose different paths for the two files: {posix}")
    route = "DRAM_BOUNCE" if posix[0] else "COMPAT"
    checked = {path: _check(path, t) for path, t in got.items()}
    _truth(
        name,
        {path: (n, route) for path, n in checked.items()},
        {"kvikio": kvikio.__version__, "compat_mode": compat, "posix_path": posix[0]},
    )


def kvikio_posix(d: str) -> None:
    _kvikio(d, "ON", "kvikio-posix")


def kvikio_cufile(d: str) -> None:
    _kvikio(d, "OFF", "kvikio-cufile")


LOADERS = {
    "fst-auto": fst_auto,
    "fst-nogds": fst_nogds,
    "runai-uring": runai_uring,
    "runai-libaio": runai_libaio,
    "runai-sync": runai_sync,
    "runai-hoststats": runai_hoststats,
    "kvikio-posix": kvikio_posix,
    "kvikio-cufile": kvikio_cufile,
}


if __name__ == "__main__":
    sys.exit(main(sys.argv, __doc__ or "", prepare, LOADERS))
