#!/usr/bin/env python3
"""Generate a 1,000-function sysfs tree and time `gdsdiag topology --json` on it.

Layout (synthetic load, not hardware claims): 8 host bridges (one PCI domain each) x 5 root ports x
(switch with 8 downstream ports x 3 functions) = 1,360 functions. Endpoint roles follow a large
GPU node: 16 GPUs, 64 NVMe, 32 NICs, the rest other functions, so the pair analysis does the work it
does on such a node (16 x 111 pairs). Reports the analysis time, measured inside a fresh process
(the command's report: read + build + pairs + findings + dynamic-routing notes; and its --json text
for a pipe), and the whole process (python start included), best and median of N runs, with the
conditions they were measured under (benchmarks/conditions.py): machine, load average before and
after, Python build, the file system the tree was generated on, cached bytecode for the children.

    python3 benchmarks/topology_1000.py [--runs 5] [--dir DIR] [--code CHECKOUT] [--against OTHER]
                                        [--python PY] [--instructions]
    (DIR: where to generate the tree; CHECKOUT: the gdsdiag tree to time, default this one; OTHER:
    a second tree timed in turn with it; PY: the interpreter of the timed processes, e.g. the README
    venv's ~/.gdsdiag/bin/python; --instructions: also each tree's instruction count, valgrind)
"""

import argparse
import json
import os
import re
import resource
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from conditions import child_env, describe, load  # noqa: E402


def write_fn(base, bdf, cls, ven, dev, port_type, sec=0):
    d = os.path.join(base, bdf)
    os.makedirs(d)
    for k, v in (
        ("class", f"0x{cls:06x}"),
        ("vendor", f"0x{ven:04x}"),
        ("device", f"0x{dev:04x}"),
        ("subsystem_vendor", f"0x{ven:04x}"),
        ("subsystem_device", "0x0000"),
        ("numa_node", "0"),
        ("current_link_speed", "32.0 GT/s PCIe"),
        ("current_link_width", "16"),
        ("max_link_speed", "32.0 GT/s PCIe"),
        ("max_link_width", "16"),
    ):
        with open(os.path.join(d, k), "w") as f:
            f.write(v + "\n")
    with open(os.path.join(d, "uevent"), "w") as f:
        # what every PCI function's uevent holds (pci_uevent(), drivers/pci/pci-driver.c)
        f.write(
            f"PCI_CLASS={cls:04X}\nPCI_ID={ven:04X}:{dev:04X}\nPCI_SUBSYS_ID={ven:04X}:0000\n"
            f"PCI_SLOT_NAME={bdf}\nMODALIAS=pci:v{ven:08X}d{dev:08X}sv{ven:08X}sd00000000"
            f"bc{cls >> 16:02X}sc{cls >> 8 & 0xFF:02X}i{cls & 0xFF:02x}\n"
        )
    b = bytearray(4096)
    struct.pack_into("<HHHH", b, 0, ven, dev, 0, 0x10)
    b[9:12] = bytes([cls & 0xFF, cls >> 8 & 0xFF, cls >> 16])
    b[0x0E] = 1 if cls >> 8 == 0x0604 else 0
    b[0x19] = sec
    b[0x34] = 0x40
    b[0x40] = 0x10
    struct.pack_into("<H", b, 0x42, port_type << 4 | 2)
    struct.pack_into("<I", b, 0x4C, 5 | 16 << 4)
    struct.pack_into("<H", b, 0x52, 5 | 16 << 4)
    struct.pack_into("<I", b, 0x100, 0x000D | 1 << 16)
    with open(os.path.join(d, "config"), "wb") as f:
        f.write(bytes(b))
    return d


def generate(root):
    devices = os.path.join(root, "sys/bus/pci/devices")
    os.makedirs(devices)
    n = 0
    gpus = 0
    roles = [(0x030200, 0x10DE, 0x2335), (0x010802, 0x144D, 0xA824), (0x020700, 0x15B3, 0x1021)]
    for hb in range(8):
        dom = f"{hb:04x}"  # one PCI domain per host bridge keeps bus numbers < 256
        bus = 0
        base = os.path.join(root, f"sys/devices/pci{dom}:00")
        for rp in range(5):
            bus += 1
            rpd = write_fn(base, f"{dom}:00:{rp + 1:02x}.0", 0x060400, 0x8086, 0x2030, 4, bus)
            usp_bus = bus
            usp = write_fn(rpd, f"{dom}:{usp_bus:02x}:00.0", 0x060400, 0x1000, 0xC030, 5, usp_bus + 1)
            bus += 1
            n += 2
            for port in range(8):
                bus += 1
                dsp = write_fn(usp, f"{dom}:{usp_bus + 1:02x}:{port:02x}.0", 0x060400, 0x1000, 0xC030, 6, bus)
                n += 1
                for fnum in range(3):
                    k = n % 17
                    cls, ven, dev = (
                        roles[0]
                        if k == 0 and gpus < 16
                        else roles[1]
                        if k in (1, 2, 3, 4)
                        else roles[2]
                        if k in (5, 6)
                        else (0x088000, 0x8086, 0x0B00)
                    )
                    gpus += cls == roles[0][0]
                    write_fn(dsp, f"{dom}:{bus:02x}:00.{fnum}", cls, ven, dev, 0)
                    n += 1
    for dirpath, dirnames, _ in os.walk(os.path.join(root, "sys/devices")):
        for dn in dirnames:
            if re.match(r"^[0-9a-f]{4}:[0-9a-f]{2}:", dn):
                os.symlink(os.path.relpath(os.path.join(dirpath, dn), devices), os.path.join(devices, dn))
    return n


# Run in a fresh process per timing: what the command does between its imports and its exit -- the
# report (read, build, pairs, findings, dynamic-routing notes) and the --json text for a pipe.
ANALYSIS = """
import contextlib, json, sys, time
from gdsdiag.documents.topology import document
from gdsdiag.topology.report import topology
try:
    from gdsdiag.commands._common import json_text, paused_gc
except ImportError:  # a commit from before the command paused the collector
    json_text = lambda doc, pretty=False: json.dumps(doc, separators=(",", ":"))
    paused_gc = contextlib.nullcontext
try:  # the pairs written from pieces, as the command does since 2026-12-01
    from gdsdiag.documents.topology import document_text
except ImportError:
    document_text = lambda r: json_text(document(r.topo, r.pairs, r.findings, r.cross_check, r.routing), pretty=False)
t0, c0 = time.perf_counter(), time.process_time()
with paused_gc():
    report = topology(sys.argv[1])
    document_text(report)
wall, cpu = time.perf_counter() - t0, time.process_time() - c0
gpus = sum(1 for d in report.topo.devices.values() if d.role.value == "gpu")
print(json.dumps({"wall_s": wall, "cpu_s": cpu, "devices": len(report.topo.devices), "gpus": gpus,
                  "pairs": len(report.pairs)}))
"""


def _instructions(argv: list[str], env: dict[str, str], cwd: str) -> float | None:
    """Millions of instructions the process runs in user space (valgrind's callgrind): unlike the
    seconds, the same from one minute to the next on a shared host whose other tenants make this
    VM's CPU time swing by up to 2x (docs/benchmarks-history.md). None without valgrind."""
    if shutil.which("valgrind") is None:
        return None
    cmd = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *argv]
    r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env, cwd=cwd)
    m = re.search(r"Collected : (\d+)", r.stderr)
    return round(int(m.group(1)) / 1e6, 1) if m else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--dir", default=None, help="where to generate the tree (default: the temp directory)")
    ap.add_argument(
        "--code",
        default=os.path.join(HERE, ".."),
        help="the gdsdiag checkout to time (default: this one); another commit's tree, for before/after "
        "figures on the same generated tree",
    )
    ap.add_argument(
        "--against",
        metavar="CHECKOUT",
        help="time this checkout too, one run of each in turn (the order swapped every round), so that "
        "both meet the same minutes of a shared host",
    )
    ap.add_argument(
        "--python",
        default=sys.executable,
        help="the interpreter the timed processes run (default: this one); e.g. the README venv's "
        "~/.gdsdiag/bin/python, the distribution's build, which users run",
    )
    ap.add_argument(
        "--instructions",
        action="store_true",
        help="also count each checkout's instructions for one whole process under valgrind (slow: ~1 min)",
    )
    args = ap.parse_args()
    codes = [os.path.abspath(args.code)] + ([os.path.abspath(args.against)] if args.against else [])
    with tempfile.TemporaryDirectory(dir=args.dir) as root, tempfile.TemporaryDirectory() as pycache:
        cond = describe(root, args.python)
        n = generate(root)
        env = child_env(pycache)
        analysis = [args.python, "-c", ANALYSIS, root]
        argv = [args.python, "-m", "gdsdiag", "topology", "--root", root, "--json"]
        times: dict[str, dict[str, list[float]]] = {c: {k: [] for k in ("an", "an_cpu", "wh", "wh_cpu")} for c in codes}
        envs = {c: dict(env, PYTHONPATH=c) for c in codes}  # the checkout under test, whatever the cwd
        for c in codes:  # warm-up: bytecode
            subprocess.run(analysis, stdout=subprocess.DEVNULL, check=True, env=envs[c], cwd=root)
            subprocess.run(argv, stdout=subprocess.DEVNULL, check=False, env=envs[c], cwd=root)
        for i in range(args.runs):
            for c in codes if i % 2 == 0 else codes[::-1]:
                # a fresh process each time, as a user's run is: the same heap state, nothing left over
                out = json.loads(
                    subprocess.run(analysis, capture_output=True, check=True, env=envs[c], cwd=root).stdout
                )
                times[c]["an"].append(out["wall_s"])
                times[c]["an_cpu"].append(out["cpu_s"])
                t0, r0 = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
                # stdout is a pipe to nothing: the compact (machine) JSON, as any program reading it gets
                subprocess.run(argv, stdout=subprocess.DEVNULL, check=False, env=envs[c], cwd=root)
                r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
                times[c]["wh"].append(time.perf_counter() - t0)
                times[c]["wh_cpu"].append(r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime)
        results = []
        for c in codes:
            t = times[c]
            results.append(
                {
                    "code": c,
                    # best of the runs, then the median; CPU seconds (user + system) of the same
                    # runs: on a loaded machine the wall time includes waiting for a CPU
                    "analysis_s": round(min(t["an"]), 4),
                    "analysis_cpu_s": round(min(t["an_cpu"]), 4),
                    "analysis_median_s": round(statistics.median(t["an"]), 4),
                    "whole_process_s": round(min(t["wh"]), 4),
                    "whole_process_cpu_s": round(min(t["wh_cpu"]), 4),
                    "whole_process_median_s": round(statistics.median(t["wh"]), 4),
                    **(
                        {"whole_process_instructions_m": _instructions(argv, envs[c], root)}
                        if args.instructions
                        else {}
                    ),
                }
            )
        print(
            json.dumps(
                {
                    "functions": n,
                    "devices_read": out["devices"],
                    "gpus": out["gpus"],
                    "pairs": out["pairs"],
                    "runs": args.runs,
                    "results": results,
                    "goal_analysis_s": 0.3,
                    "goal_whole_s": 0.5,
                    **cond,
                    "load_average_after": load(),
                },
                indent=1,
            )
        )


if __name__ == "__main__":
    main()
