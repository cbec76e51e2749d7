"""Small host-to-GPU copies from N threads of one process against N processes (one CUDA context
each): does the GPU serialise work of several processes where it overlaps one process's threads?

fio's libcufile engine in compatibility mode is a pread into a pinned bounce buffer and a copy to
the GPU per I/O; forked fio jobs are N processes, each with its own CUDA context on the one GPU,
where --thread jobs share one. This takes cuFile and the disk out: each worker does only
synchronous cudaMemcpy of --bs bytes (pinned or pageable host memory) for --seconds.

    python3 benchmarks/history/cuda_ctx_bench.py --workers 4 --spawn process|thread [--bs 4096] [--pageable]

One JSON line: copies per second in all, per worker, and the mean time per copy.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import threading
import time


def copies(bs: int, seconds: float, pageable: bool, start_at: float, out, idx: int) -> None:
    import ctypes

    import cupy as cp
    import numpy as np

    cp.cuda.Device(0).use()
    cp.cuda.runtime.free(0)  # the primary context current in this thread
    dev = cp.empty(bs, dtype=cp.uint8)
    if pageable:
        host = np.zeros(bs, dtype=np.uint8)
    else:
        mem = cp.cuda.alloc_pinned_memory(bs)
        host = np.frombuffer(mem, dtype=np.uint8, count=bs)
    # the driver's synchronous copy through ctypes, which drops the GIL for the call, so threads
    # overlap their copies as C threads would
    fn = ctypes.CDLL("libcuda.so.1").cuMemcpyHtoD_v2
    fn.argtypes = (ctypes.c_uint64, ctypes.c_void_p, ctypes.c_size_t)
    dst, src, nbytes = dev.data.ptr, host.ctypes.data, host.nbytes

    def memcpy() -> None:
        r = fn(dst, src, nbytes)
        if r:
            raise RuntimeError(f"cuMemcpyHtoD_v2: CUresult {r}")

    memcpy()  # context and first use are setup
    while time.time() < start_at:
        time.sleep(0.001)
    n = 0
    t0 = time.perf_counter()
    end = t0 + seconds
    while True:
        memcpy()
        n += 1
        if not n % 64 and time.perf_counter() >= end:
            break
    out[idx] = (n, time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--spawn", choices=("process", "thread"), default="process")
    ap.add_argument("--bs", type=int, default=4096)
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--pageable", action="store_true")
    a = ap.parse_args()
    start_at = time.time() + (6.0 if a.spawn == "process" else 1.5)  # every worker's context is up by then
    if a.spawn == "process":
        ctx = mp.get_context("spawn")
        out = ctx.Manager().dict()
        procs = [
            ctx.Process(target=copies, args=(a.bs, a.seconds, a.pageable, start_at, out, i)) for i in range(a.workers)
        ]
    else:
        out = {}
        procs = [
            threading.Thread(target=copies, args=(a.bs, a.seconds, a.pageable, start_at, out, i))
            for i in range(a.workers)
        ]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    per = [out.get(i, (0, 1.0)) for i in range(a.workers)]
    rate = sum(n / s for n, s in per)
    print(
        json.dumps(
            {
                "bench": "cuda_memcpy_h2d",
                "spawn": a.spawn,
                "workers": a.workers,
                "bs": a.bs,
                "host": "pageable" if a.pageable else "pinned",
                "copies_per_s": round(rate),
                "per_worker": [round(n / s) for n, s in per],
                "us_per_copy": [round(s / n * 1e6, 2) if n else None for n, s in per],
            }
        )
    )


if __name__ == "__main__":
    main()
