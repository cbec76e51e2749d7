"""When the events ring is full the kernel counts what it could not send, per process, and the reads
among the lost events with their bytes (issue 21: the totals stay exact). Real probes on this
kernel: a child does more 4 KiB preads than the ring holds while nothing reads the ring, so the
kernel has to drop; every read must then be either a record that arrived or a lost read counted in
the kernel, and the lost bytes must be the lost reads' bytes."""

import os
import subprocess
import sys

from conftest import live

READS = 250_000  # the 16 MiB ring holds ~140k records
CHILD = r"""
import os, sys
os.read(0, 1)
fd = os.open(sys.argv[1], os.O_RDONLY)
for i in range(int(sys.argv[2])):
    os.pread(fd, 4096, (i % 256) * 4096)
"""


@live
def test_a_full_ring_counts_every_lost_read_and_its_bytes(tmp_path):
    from gdsdiag.trace.bpf import Probes

    data = tmp_path / "data.bin"
    data.write_bytes(os.urandom(1 << 20))
    p = Probes([], [], trace_all=False, want_kprobes=False, preattach=False, per_io=True)
    try:
        child = subprocess.Popen([sys.executable, "-c", CHILD, str(data), str(READS)], stdin=subprocess.PIPE)
        p.add_pid(child.pid)
        child.stdin.write(b"g")
        child.stdin.close()
        assert child.wait(120) == 0  # (the ring is not read meanwhile: it fills and the kernel drops)
        evs = p.poll(0, final=True)
        while True:
            more = p.poll(0, final=True)
            if not more:
                break
            evs += more
        sent = [e for e in evs if e.kind == "sys_exit" and e.name == "pread64" and e.pid == child.pid]
        lost = {r["pid"]: r for r in p.lost_by_process()}
        assert child.pid in lost, p.lost_by_process()
        row = lost[child.pid]
        assert row["ios"] > 0
        assert len(sent) + row["ios"] == READS  # every read: sent, or counted as lost
        assert row["bytes"] == 4096 * row["ios"]
        assert all(e.args[5] == 4096 for e in sent)
        assert p.lost >= row["lost"] >= row["ios"]
    finally:
        p.close()
