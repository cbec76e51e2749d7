#!/usr/bin/env python3
"""Minimal reproducer for the cufile-async verified-read mismatch (issue 10), outside the sweep.

N cuFileReadAsync calls are in flight at once, each on its own registered CUDA stream, each reading
a different block of a file whose block k holds the 32-bit value k in every word. After all streams
are synchronised, each destination is checked: does it hold the block it asked for, or which one?
The destinations are laid out three ways, the question being which one libcufile gets right:
  shared   one allocation, one base pointer for every request, bufPtr_offset = slot x bs (the sweep)
  based    one allocation, base pointer = allocation + slot x bs, bufPtr_offset = 0
  separate one allocation per slot, bufPtr_offset = 0
and one control: "one-stream", every request on the same stream (stream-ordered, one at a time).

    python3 benchmarks/history/cufile_async_repro.py DIR [--rounds 20]
DIR must be on a file system cuFile can open (the GPU machine: after `gds_udev_entry DIR`).
Prints one line per (layout, depth, bs): wrong destinations and what they held.
"""

import argparse
import collections
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", ".."))  # the checkout


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--rounds", type=int, default=20)
    a = ap.parse_args()
    import cupy as cp
    import numpy as np

    from gdsdiag import cufile

    cp.cuda.Device(0).use()
    blocks_max, bs_max = 64, 1 << 20
    path = os.path.join(a.dir, "gdsdiag-async-repro.dat")
    words = np.repeat(np.arange(blocks_max * (bs_max // 4096), dtype=np.uint32), 1024)  # per 4 KiB
    with open(path, "wb") as f:
        f.write(words.tobytes())
        f.flush()
        os.fsync(f.fileno())
    drv = cufile.Driver().open()
    fh = cufile.FileHandle(path, "r").register()
    failures = 0
    try:
        for bs in (65536, 1 << 20):
            per = bs // 4096  # 4 KiB units per block: block k of size bs starts with value k * per
            for depth in (2, 8):
                streams = [cp.cuda.Stream(non_blocking=True) for _ in range(depth)]
                regs = [cufile.StreamRegistration(s).register() for s in streams]
                big = cp.zeros(depth * bs, dtype=cp.uint8)
                sep = [cp.zeros(bs, dtype=cp.uint8) for _ in range(depth)]
                bregs = [cufile.BufferRegistration(b).register() for b in [big, *sep]]  # as the sweep does
                for layout in ("shared", "based", "separate", "one-stream"):
                    wrong: collections.Counter = collections.Counter()
                    n = 0
                    for r in range(a.rounds):
                        big.fill(0xEE)
                        for s in sep:
                            s.fill(0xEE)
                        cp.cuda.Device().synchronize()
                        first = (r * depth) % (blocks_max * (bs_max // bs) - depth)
                        ops = []
                        for i in range(depth):
                            st = streams[0] if layout == "one-stream" else streams[i]
                            foff = (first + i) * bs
                            if layout in ("shared", "one-stream"):
                                ops.append(fh.read_async(big, bs, foff, i * bs, st))
                            elif layout == "based":
                                ops.append(fh.read_async(big[i * bs :], bs, foff, 0, st))
                            else:
                                ops.append(fh.read_async(sep[i], bs, foff, 0, st))
                        for s in streams:
                            s.synchronize()
                        for i, op in enumerate(ops):
                            n += 1
                            got = (big[i * bs : (i + 1) * bs] if layout != "separate" else sep[i]).view(cp.uint32)
                            want = (first + i) * per
                            head = int(got[0])
                            try:
                                res = op.result
                            except Exception as e:  # a failed request: counted, with its error
                                wrong[f"error {e}"] += 1
                                continue
                            ok = res == bs and head == want and bool((got[:1024] == want).all())
                            ok = ok and int(got[-1]) == want + per - 1
                            if not ok:
                                held = "untouched" if head == 0xEEEEEEEE else f"{(head - want) / per:+.0f} blocks"
                                wrong[held] += 1
                    failures += sum(wrong.values())
                    print(
                        f"bs={bs:>7} depth={depth} {layout:<10}: {sum(wrong.values())} of {n} destinations wrong"
                        + (f" ({dict(wrong)})" if wrong else ""),
                        flush=True,
                    )
                for reg in regs + bregs:
                    reg.deregister()
    finally:
        fh.deregister()
        if drv is not None:
            drv.close()
        os.unlink(path)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
