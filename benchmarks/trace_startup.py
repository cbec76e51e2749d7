#!/usr/bin/env python3
"""Where gdsdiag trace's start-up goes: bcc compile+load of the probe program (CPU and wall seconds),
with and without the USDT handlers of the libcufile the bindings find, and the USDT note parse.

  sudo python3 benchmarks/trace_startup.py [--rounds 2] [--libcufile PATH]

CPU seconds are the stable figure on a shared machine (wall time there is load-dependent). The
program is measured compiled (GDSDIAG_BPF_CACHE=0) and loaded from the compiled-program cache."""

import argparse
import json
import os
import resource
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--libcufile")
    a = ap.parse_args()
    from gdsdiag.platform.libcufile import locate, read_usdt_notes
    from gdsdiag.trace.probes.bpf import Probes, import_bcc

    bcc = import_bcc()
    lib = a.libcufile or locate().path
    out = {
        "machine": os.uname().nodename,
        "kernel": os.uname().release,
        "nproc": os.cpu_count(),
        "libcufile": lib,
        "rounds": [],
    }
    for _ in range(a.rounds):
        r = {}
        t, c = time.monotonic(), cpu()
        b = bcc.BPF(text="TRACEPOINT_PROBE(syscalls, sys_enter_read) { return 0; }")
        r["minimal_program"] = {"wall_s": round(time.monotonic() - t, 2), "cpu_s": round(cpu() - c, 2)}
        b.cleanup()
        if lib:
            t, c = time.monotonic(), cpu()
            read_usdt_notes(lib)
            r["usdt_note_parse"] = {"wall_s": round(time.monotonic() - t, 3), "cpu_s": round(cpu() - c, 3)}
        for label, libs, cache in (
            ("probes_without_usdt_compiled", [], "0"),
            ("probes_with_usdt_compiled", [lib] if lib else [], "0"),
            ("probes_with_usdt_from_cache", [lib] if lib else [], "1"),  # (the compile above may fill it)
        ):
            os.environ["GDSDIAG_BPF_CACHE"] = cache
            if cache == "1":  # fill the cache once if this text is not in it yet
                Probes(libs, [os.getpid()], trace_all=False, want_kprobes=False).close()
            t, c = time.monotonic(), cpu()
            p = Probes(libs, [os.getpid()], trace_all=False, want_kprobes=False)
            r[label] = {"wall_s": round(time.monotonic() - t, 2), "cpu_s": round(cpu() - c, 2), "parts": p.timing}
            p.close()
        out["rounds"].append(r)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
