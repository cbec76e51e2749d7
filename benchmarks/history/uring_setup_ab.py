"""A/B of the C loop's io_uring ring setup on one sweep file, alternating: "old" = the loop before
fio's ring flags (plain ring, READV; `git show a71abef:csrc/ioloop.c`), "new" = csrc/ioloop.c now
(CQSIZE, COOP_TASKRUN, SINGLE_ISSUER|DEFER_TASKRUN, READ). 4 KiB sequential reads, 1 thread,
iodepth 32. Build both first:
    git show a71abef:csrc/ioloop.c > /tmp/h10ab/old.c; cp csrc/ioloop.c /tmp/h10ab/new.c
    for v in old new; do gcc -O2 -shared -fPIC -Icsrc -o /tmp/h10ab/$v.so /tmp/h10ab/$v.c; done
    python3 benchmarks/history/uring_setup_ab.py DIR SECONDS ROUNDS"""

import sys

import numpy as np

from gdsdiag.sweep import files, native

f = native.ffi()
libs = {v: f.dlopen(f"/tmp/h10ab/{v}.so") for v in ("old", "new")}
sf = files.SweepFile(sys.argv[1], 1 << 30)
sf.fill()
secs, rounds, bs, depth = float(sys.argv[2]), int(sys.argv[3]), 4096, 32
iob = files.IoBuffer(bs * depth)
res = {"old": [], "new": []}
try:
    for r in range(rounds):
        for v in ("old", "new") if r % 2 == 0 else ("new", "old"):
            lib = libs[v]
            j = f.new("struct gd_job *")
            hist = f.new("uint64_t[]", 4096)
            stop = f.new("int *")
            j.engine, j.iodepth, j.fd, j.bs, j.data_base = lib.GD_ENGINE_URING, depth, sf.fd, bs, files.HEADER_SIZE
            j.host_buf = iob.cdata(f)
            j.slice_start, j.slice_blocks, j.file_blocks, j.seed = 0, sf.size // bs, sf.size // bs, sf.seed
            j.stop, j.hist = stop, hist
            j.deadline_ns = lib.gd_now_ns() + int(secs * 1e9)
            lib.gd_run(j)
            iob.release(f)
            assert j.err_kind == 0, j.err_kind
            iops = j.ops / ((j.t_end_ns - j.t_start_ns) / 1e9)
            res[v].append(iops)
            print(r, v, round(iops), "mean lat us", round(j.lat_sum_ns / j.ops / 1000, 1), flush=True)
finally:
    iob.close()
    sf.remove()
for v, xs in res.items():
    print(v, "median", round(float(np.median(xs))), "all", [round(x) for x in xs])
