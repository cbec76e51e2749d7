"""Probe: where does libcufile publish a process's statistics for gds_stats -p PID?

libcufile 1.15 imports shmget/shmat/shmctl and carries the strings "stats shared memory segment id",
"invalid shared memory segment key for stats" (strings/nm of the wheel's libcufile.so.0). This
probe, run on a GPU node, lists the System V segments (/proc/sysvipc/shm) before and after
cuFileStatsStart and after some cuFile I/O, attaches any segment this process created read-only,
and saves its bytes next to the process's own cuFileGetStatsL3 struct bytes so the layouts can be
compared offline. Writes only under OUTDIR and one scratch file it removes.

    python3 benchmarks/history/cufile_stats_shm_probe.py DATA_DIR OUTDIR
"""

import ctypes
import json
import os
import sys


def segments():
    rows = []
    with open("/proc/sysvipc/shm") as f:
        head = f.readline().split()
        for line in f:
            rows.append(dict(zip(head, line.split())))
    return rows


def main(data_dir, out):
    os.makedirs(out, exist_ok=True)
    report = {"pid": os.getpid(), "before": segments()}
    import cupy as cp

    from gdsdiag.cufile import Driver, FileHandle, stats
    from gdsdiag.cufile._lib import load

    stats.set_level(3)
    drv = Driver().open()
    report["after_open"] = segments()
    stats.start()
    report["after_stats_start"] = segments()
    path = os.path.join(data_dir, f"gdsdiag-shm-probe-{os.getpid()}.dat")
    with open(path, "wb") as f:
        f.write(os.urandom(8 << 20))
    try:
        buf = cp.empty(1 << 20, dtype=cp.uint8)
        fh = FileHandle(path, "r").register()
        for i in range(8):
            fh.read(buf, 1 << 20, i << 20)
        fh.deregister()
        fh.close()
    finally:
        os.unlink(path)
    report["after_io"] = segments()
    L = load()
    s = L.ffi.new(L.stats_types[2] + " *")
    L.lib.cuFileGetStatsL3(s)
    l3 = bytes(L.ffi.buffer(s))
    open(os.path.join(out, "l3-struct.bin"), "wb").write(l3)
    report["l3_struct_size"] = len(l3)
    report["path_mix"] = stats.path_mix().to_json()
    report["level1"] = stats.level1()
    libc = ctypes.CDLL(None, use_errno=True)
    libc.shmat.restype = ctypes.c_void_p
    libc.shmat.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
    mine = [r for r in report["after_io"] if r.get("cpid") == str(os.getpid())]
    report["mine"] = mine
    for r in mine:
        addr = libc.shmat(int(r["shmid"]), None, 0o10000)  # SHM_RDONLY
        if addr in (None, ctypes.c_void_p(-1).value):
            report.setdefault("attach_errors", []).append(ctypes.get_errno())
            continue
        data = ctypes.string_at(addr, int(r["size"]))
        open(os.path.join(out, f"shm-{r['key']}-{r['shmid']}.bin"), "wb").write(data)
        report.setdefault("l3_found_at", {})[r["shmid"]] = data.find(l3[:256]) if len(l3) >= 256 else None
    drv.close()
    with open(os.path.join(out, "shm-probe.json"), "w") as f:
        json.dump(report, f, indent=1)
    print(json.dumps({k: report[k] for k in ("pid", "mine", "l3_struct_size", "l3_found_at") if k in report}, indent=1))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
