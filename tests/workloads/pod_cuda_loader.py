"""A pod's weights loader for tests/workloads/gpu_pods_run.sh: joins the cgroups named on the command
line (its pod's, tests/pods_fixture.py), loads CUDA (torch or cupy) and makes its context, says
"ready", waits for the GO file, then reads FILE in 4 MiB preads into one host buffer and copies
each chunk to the GPU, and writes its own ground truth as one JSON line to TRUTH:

    {"pid", "backend", "bytes_read", "bytes_copied", "sha256" (of the bytes read),
     "host_sum" / "gpu_sum" (the bytes' sum on the host, with numpy, and, after the copies, on the
     GPU: equal where every byte reached it), "skipped"}

BACKEND: torch | cupy | none. none (the dry run, or a machine without a GPU) reads the file and
copies nothing; "skipped" says why. Usage:

    python3 pod_cuda_loader.py BACKEND FILE GO TRUTH CGROUP_DIR...
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time

CHUNK = 4 << 20


def _copier(backend: str):
    """(copy(memoryview) -> None, gpu_sum() -> int) for BACKEND, its CUDA context made now."""
    if backend == "torch":
        import torch

        acc = torch.zeros((), dtype=torch.int64, device="cuda")

        def copy(mv) -> None:
            nonlocal acc
            t = torch.frombuffer(mv, dtype=torch.uint8).to("cuda")  # pageable host -> device
            acc += t.sum(dtype=torch.int64)

        return copy, lambda: int(acc.item())
    if backend == "cupy":
        import cupy
        import numpy

        cupy.zeros(1).sum()  # (the context, before "ready")
        total = [cupy.zeros((), dtype=cupy.int64)]

        def copy(mv) -> None:
            d = cupy.asarray(numpy.frombuffer(mv, dtype=numpy.uint8))  # pageable host -> device
            total[0] += d.sum(dtype=cupy.int64)

        return copy, lambda: int(total[0].get())
    return None, None


def main(argv: list[str]) -> int:
    backend, path, go, truth_path, *cgroups = argv
    for d in cgroups:
        with open(os.path.join(d, "cgroup.procs"), "w") as f:
            f.write(str(os.getpid()))
    skipped = None
    copy = gpu_sum = None
    if backend == "none":
        skipped = "dry run: no CUDA copy (DRY=1, or no GPU on this machine)"
    else:
        try:
            copy, gpu_sum = _copier(backend)
        except Exception as e:  # (the ground truth says why, the scorer expects HOST then)
            skipped = f"{backend} unusable here: {type(e).__name__}: {e}"
    if backend == "torch" and copy is not None:
        import torch

        torch.zeros(1, device="cuda").sum().item()  # (the context, before "ready")
    print("ready", flush=True)
    deadline = time.monotonic() + 300
    while not os.path.exists(go):
        if time.monotonic() > deadline:
            print("no GO file in 300 s", file=sys.stderr)
            return 3
        time.sleep(0.05)
    try:
        import numpy as np
    except ImportError:  # (no host sum then: the sha256 stands)
        np = None
    h = hashlib.sha256()
    buf = bytearray(CHUNK)
    mv = memoryview(buf)
    read = copied = 0
    host_sum: int | None = 0
    fd = os.open(path, os.O_RDONLY)
    try:
        while True:
            n = os.preadv(fd, [mv], read)
            if n <= 0:
                break
            part = mv[:n]
            h.update(part)
            host_sum = None if host_sum is None or np is None else host_sum + int(np.frombuffer(part, np.uint8).sum())
            read += n
            if copy is not None:
                copy(part)
                copied += n
    finally:
        os.close(fd)
    out = {
        "pid": os.getpid(),
        "backend": backend if copy is not None else "none",
        "bytes_read": read,
        "bytes_copied": copied,
        "sha256": h.hexdigest(),
        "host_sum": host_sum,
        "gpu_sum": gpu_sum() if gpu_sum is not None else None,
        "skipped": skipped,
    }
    with open(truth_path, "w") as f:
        f.write(json.dumps(out) + "\n")
    print("done", read, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
