#!/usr/bin/env python3
"""Fuzz every parser a user can point gdsdiag at with generated inputs (issue 13 goal: >=100k per
parser without a crash, hang or escape). Figures go to docs/benchmarks-history.md.

    python3 benchmarks/fuzz_parsers.py [--n 100000] [--only NAME] [--seed 1]

Inputs are generated from seeds: real captures of tests/fixtures/corpus mutated (lines cut,
duplicated, characters changed), generated JSON (deep, huge numbers, wrong types), generated tar
archives (escaping names, link chains, loops, hard links, FIFOs, oversize members). A crash is
any exception other than GdsdiagError (or the parser's documented result); a hang is an input
that takes more than --hang seconds (SIGALRM); an escape is an archive input after which the
watched directory holds anything new. Prints one line per parser.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import random
import signal
import sys
import tarfile
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
CORPUS = os.path.join(os.path.dirname(HERE), "tests", "fixtures", "corpus")

from gdsdiag import cufile_json  # noqa: E402
from gdsdiag.bounded import loads_json  # noqa: E402
from gdsdiag.errors import GdsdiagError  # noqa: E402
from gdsdiag.importers import gdscheck, lspci, nvidia_smi  # noqa: E402
from gdsdiag.platform.archroot import ArchiveRoot, Limits  # noqa: E402
from gdsdiag.topology.build import build  # noqa: E402
from gdsdiag.topology.model import CpuInfo, IommuInfo  # noqa: E402


class Hang(Exception):
    pass


def _alarm(signum, frame):
    raise Hang()


def corpus_texts(sub: str) -> list[str]:
    d = os.path.join(CORPUS, sub)
    out = []
    for f in sorted(os.listdir(d)):
        with open(os.path.join(d, f), encoding="utf-8", errors="replace") as fh:
            out.append(fh.read())
    return out


def mutate(rnd: random.Random, text: str, max_bytes: int = 8192) -> str:
    lines = text.splitlines(keepends=True)
    if lines:
        start = rnd.randrange(len(lines))
        lines = lines[start : start + rnd.randint(1, 200)]
    for _ in range(rnd.randint(0, 10)):
        if not lines:
            break
        i = rnd.randrange(len(lines))
        op = rnd.randrange(6)
        if op == 0:
            del lines[i]
        elif op == 1:
            lines.insert(rnd.randrange(len(lines) + 1), lines[i] * rnd.randint(1, 3))
        elif op == 2:
            s = lines[i]
            j = rnd.randrange(len(s) + 1)
            lines[i] = (
                s[:j]
                + rnd.choice(
                    [
                        "",
                        "0",
                        "ff",
                        "\t",
                        " ",
                        ":",
                        "[",
                        "]",
                        "-",
                        "+",
                        "\\",
                        "\ufffd",
                        "9" * 40,
                        "0000:01:00.0",
                        "secondary=01",
                        "X",
                        "PHB",
                        "NV12",
                        "\x00",
                    ]
                )
                + s[j:]
            )
        elif op == 3:
            lines[i] = lines[i][: rnd.randrange(len(lines[i]) + 1)]
        elif op == 4:
            lines[i] = lines[i].replace(rnd.choice("0123456789abcdef"), rnd.choice("0123456789abcdef"))
        else:
            lines[i], lines[-1] = lines[-1], lines[i]
    return "".join(lines)[:max_bytes]


def gen_json(rnd: random.Random, depth: int = 0):
    r = rnd.random()
    if depth > 6 or r < 0.3:
        return rnd.choice([None, True, False, 0, -1, 2**63, 1.5, "x", "", "/tmp", [], {}])
    if r < 0.6:
        return [gen_json(rnd, depth + 1) for _ in range(rnd.randint(0, 4))]
    keys = sorted(cufile_json.SCHEMA) + ["properties", "logging", "fs", "execution", "weird", ""]
    return {rnd.choice(keys).split(".")[-1]: gen_json(rnd, depth + 1) for _ in range(rnd.randint(0, 5))}


def json_text(rnd: random.Random) -> str:
    r = rnd.random()
    if r < 0.05:
        return rnd.choice("[{") * rnd.randint(60, 100_000)
    if r < 0.1:
        return "[" + "9" * rnd.randint(20, 6000) + "]"
    if r < 0.15:
        return rnd.choice(["1e999", "-1e999", "NaN", "Infinity", "[1e309]", '"\\ud800"', "\ufeff{}"])
    text = json.dumps(gen_json(rnd))
    if rnd.random() < 0.3:
        i = rnd.randrange(len(text) + 1)
        text = text[:i] + rnd.choice(["", "]", "}", ",", '"', "//c\n", "/*", "\\", "\x00", "1e999"]) + text[i:]
    return text


# -- targets: each takes (rnd, workdir) and returns normally or raises GdsdiagError ----------------


def t_json(rnd, work):
    try:
        loads_json(json_text(rnd))
    except ValueError:
        pass


def t_cufile_json(rnd, work):
    cfg = cufile_json.parse(json_text(rnd), "cufile.json")
    assert cfg.parse_error is None or isinstance(cfg.parse_error, str)


LSPCI = None
SMI = None
GDSCHECK = None


def t_lspci(rnd, work):
    text = mutate(rnd, rnd.choice(LSPCI))
    fns = list(lspci.parse_vvv(text).values()) + lspci.parse_tree(text)
    for f in fns:
        f.host_bridge = f.host_bridge or f.bdf[:7]
    build(list({f.bdf: f for f in fns}.values()), {}, IommuInfo(mode="unknown"), CpuInfo())


def t_nvidia_smi(rnd, work):
    nvidia_smi.parse(mutate(rnd, rnd.choice(SMI)))


def t_gdscheck(rnd, work):
    gdscheck.parse(mutate(rnd, rnd.choice(GDSCHECK)))


def t_recording(rnd, work):
    from gdsdiag.trace.model.classify import classify
    from gdsdiag.trace.recording import read_record as read_recording

    lines = [json.dumps({"gdsdiag_trace_record": 1})] if rnd.random() < 0.9 else []
    kinds = [
        "api_enter",
        "api_exit",
        "usdt",
        "sys_exit",
        "blk_issue",
        "blk_done",
        "handle",
        "batch_req",
        "kprobe",
        "open",
    ]
    names = [
        "cuFileRead",
        "cuFileWrite",
        "cuFileHandleRegister",
        "pread64",
        "pwrite64",
        "ioctl",
        "cufio_core:cufio_gds_read",
        "x",
    ]
    for _ in range(rnd.randint(0, 30)):
        r = rnd.random() if rnd.random() < 0.3 else 0.0
        if r < 0.97:
            ev = [
                rnd.randint(0, 10**12),
                rnd.choice([1, 2]),
                rnd.choice([1, 2]),
                rnd.choice(kinds),
                rnd.choice(names),
                [rnd.choice([0, 1, 3, -1, -5, 4096, 1 << 20, 2**40, 2**63 - 1]) for _ in range(rnd.randint(0, 5))],
                "app",
                rnd.choice([None, "/data/f", ""]),
            ]
            if rnd.random() < 0.01:
                ev[rnd.randrange(8)] = gen_json(rnd)
            lines.append(json.dumps(ev))
        else:
            lines.append(json_text(rnd)[:2000])
    data = ("\n".join(lines) + "\n").encode()
    if rnd.random() < 0.05:
        data = data[: rnd.randrange(len(data) + 1)] + bytes([rnd.randrange(256)]) + data
    p = os.path.join(work, "rec.jsonl")
    with open(p, "wb") as f:
        f.write(data)
    _, events = read_recording(p)
    classify(events)


def gen_archive(rnd: random.Random) -> bytes:
    comps = ["sys", "proc", "etc", "a", "b", "..", ".", "cufile.json", "d" * rnd.choice([1, 100, 250]), "devices", "x"]

    def name():
        s = "/".join(rnd.choice(comps) for _ in range(rnd.randint(1, 6)))
        return ("/" + s) if rnd.random() < 0.2 else s

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for _ in range(rnd.randint(0, 30)):
            ti = tarfile.TarInfo(name())
            k = rnd.random()
            if k < 0.4:
                data = bytes(rnd.randrange(256) for _ in range(rnd.randint(0, 40)))
                ti.size = len(data)
                tar.addfile(ti, io.BytesIO(data))
                continue
            ti.type = (
                tarfile.SYMTYPE
                if k < 0.75
                else tarfile.DIRTYPE
                if k < 0.85
                else tarfile.LNKTYPE
                if k < 0.95
                else tarfile.FIFOTYPE
            )
            if ti.type in (tarfile.SYMTYPE, tarfile.LNKTYPE):
                ti.linkname = rnd.choice(
                    [
                        name(),
                        "../" * rnd.randint(1, 20) + "etc/passwd",
                        "/etc/shadow",
                        work_marker(),
                        "/".join(["l"] * rnd.randint(1, 50)),
                    ]
                )
            tar.addfile(ti)
    raw = buf.getvalue()
    r = rnd.random()
    if r < 0.1:
        raw = raw[: rnd.randrange(len(raw) + 1)]
    elif r < 0.2:
        b = bytearray(raw)
        for _ in range(rnd.randint(1, 8)):
            if b:
                b[rnd.randrange(len(b))] = rnd.randrange(256)
        raw = bytes(b)
    if rnd.random() < 0.5:
        import gzip

        raw = gzip.compress(raw, compresslevel=1)
        if rnd.random() < 0.1:
            raw = raw[: rnd.randrange(len(raw) + 1)]
    return raw


_WATCH = {"dir": None}


def work_marker() -> str:
    return os.path.join(_WATCH["dir"] or "/nonexistent", "escaped")


def t_archive(rnd, work):
    p = os.path.join(work, "a.tar")
    with open(p, "wb") as f:
        f.write(gen_archive(rnd))
    fs = ArchiveRoot(p, Limits(members=200, total_bytes=1 << 20, member_bytes=1 << 16, stream_bytes=4 << 20))
    for q in ("/etc/cufile.json", "/sys", "/a/b", "/proc/cmdline", "/l/l/l", "/a/../../etc/passwd", "/d" * 3):
        data = fs.read_bytes(q)
        assert data is None or isinstance(data, bytes)
        fs.listdir(q)
        fs.exists(q)
        fs.readlink_name(q)


TARGETS = {
    "json": t_json,
    "cufile.json": t_cufile_json,
    "lspci": t_lspci,
    "nvidia-smi": t_nvidia_smi,
    "gdscheck": t_gdscheck,
    "recording": t_recording,
    "archive": t_archive,
}


def main() -> int:
    global LSPCI, SMI, GDSCHECK
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--only", action="append")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--hang", type=float, default=5.0)
    args = ap.parse_args()
    LSPCI = corpus_texts("lspci-vvv") + corpus_texts("lspci-tree")
    SMI = corpus_texts("nvidia-smi-topo")
    GDSCHECK = corpus_texts("gdscheck")
    signal.signal(signal.SIGALRM, _alarm)
    failed = 0
    with tempfile.TemporaryDirectory(prefix="gdsdiag-fuzz-") as watch:
        _WATCH["dir"] = watch
        workdirs = set()
        for name, fn in TARGETS.items():
            if args.only and name not in args.only:
                continue
            rnd = random.Random(f"{args.seed}-{name}")
            crashes, hangs, refused, worst = [], 0, 0, 0.0
            work = tempfile.mkdtemp(prefix="w-", dir=watch)
            workdirs.add(os.path.basename(work))
            t0 = time.monotonic()
            for i in range(args.n):
                t = time.monotonic()
                signal.setitimer(signal.ITIMER_REAL, args.hang)
                try:
                    fn(rnd, work)
                except GdsdiagError:
                    refused += 1
                except Hang:
                    hangs += 1
                except Exception as e:  # a crash: record the first few
                    if len(crashes) < 5:
                        crashes.append(f"#{i}: {type(e).__name__}: {str(e)[:200]}")
                    else:
                        crashes.append("")
                finally:
                    signal.setitimer(signal.ITIMER_REAL, 0)
                worst = max(worst, time.monotonic() - t)
            escaped = sorted(set(os.listdir(watch)) - workdirs) + sorted(set(os.listdir(work)) - {"a.tar", "rec.jsonl"})
            secs = time.monotonic() - t0
            print(
                f"{name:12s} inputs {args.n:7d}  crashes {len(crashes):3d}  hangs {hangs}  escapes {len(escaped)}  "
                f"refused {refused:6d}  {secs:7.1f} s  worst {worst * 1000:6.1f} ms",
                flush=True,
            )
            for c in [c for c in crashes if c]:
                print("   ", c, flush=True)
            failed += len(crashes) + hangs + len(escaped)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
