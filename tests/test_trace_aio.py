"""Linux AIO through the live probes: each iocb of an io_submit is one record (the probe reads them
in a bounded loop, the first AIO_MAX), with the request's file offset, size and host buffer. A
child submits three 4 KiB preads at offsets it prints, with the buffers' addresses; the trace must
report exactly those."""

import json
import os
import subprocess
import sys

from conftest import live

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHILD = r"""
import ctypes, os, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
fd = os.open(sys.argv[1], os.O_RDONLY)
ctx = ctypes.c_ulong(0)
assert libc.syscall(206, 8, ctypes.byref(ctx)) == 0  # io_setup
bufs = [ctypes.create_string_buffer(4096) for _ in range(3)]
# struct iocb: data, key, rw_flags, lio_opcode (0: PREAD), reqprio, fildes, buf, nbytes, offset, ...
cbs = [ctypes.create_string_buffer(struct.pack("<QIIHhIQQqQII", i, 0, 0, 0, 0, fd, ctypes.addressof(b), 4096,
                                               (i + 1) * 8192, 0, 0, 0), 64) for i, b in enumerate(bufs)]
arr = (ctypes.c_void_p * 3)(*[ctypes.addressof(c) for c in cbs])
assert libc.syscall(209, ctx, 3, arr) == 3  # io_submit
ev = ctypes.create_string_buffer(32 * 3)
assert libc.syscall(208, ctx, 3, 3, ev, None) == 3  # io_getevents
libc.syscall(207, ctx)
with open(sys.argv[2], "w") as f:
    f.write(" ".join(str(ctypes.addressof(b)) for b in bufs))
"""


@live
def test_each_iocb_of_io_submit_is_reported_with_its_offset_and_buffer(tmp_path):
    data = tmp_path / "data.bin"
    data.write_bytes(os.urandom(64 << 10))
    out = tmp_path / "bufs.txt"
    r = subprocess.run(
        [sys.executable, "-m", "gdsdiag", "trace", "--json", "--", sys.executable, "-c", CHILD, str(data), str(out)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")},
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-600:]
    bufs = [int(x) for x in out.read_text().split()]
    ios = [json.loads(x) for x in r.stdout.splitlines() if x.startswith('{"type": "io"')]
    aio = sorted((v for v in ios if v["api"] == "aio" and v["path"] == str(data)), key=lambda v: v["offset"])
    assert [(v["offset"], v["size"], v["op"]) for v in aio] == [
        (8192, 4096, "read"),
        (16384, 4096, "read"),
        (24576, 4096, "read"),
    ]
    for v, buf in zip(aio, bufs):
        assert f"into host memory {buf:#x}" in v["evidence"][0]
