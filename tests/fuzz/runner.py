"""Run the targets in this process against the installed package and count what went wrong.

An input is a crash when the command raised anything but a clean exit (click's usage errors and
GdsdiagError end in SystemExit with 0-4), printed a traceback or "internal error", or exited with
another code; a hang when it ran past ``timeout`` seconds (SIGALRM); over 1 GiB when its peak
RSS (VmHWM, reset before each input through /proc/self/clear_refs) grew by more than 1 GiB, or
it hit the address-space limit set at 1 GiB above the start (MemoryError).
"""

from __future__ import annotations

import hashlib
import os
import random
import resource
import signal
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field

from .targets import Target

GiB = 1 << 30


class Hang(BaseException):
    """Raised by SIGALRM: a BaseException so that click's runner does not catch it."""


@dataclass
class Counts:
    inputs: int = 0
    crashes: int = 0
    hangs: int = 0
    over_1gib: int = 0
    max_rss_growth_mib: float = 0.0
    slowest_s: float = 0.0
    seconds: float = 0.0
    sites: dict[str, str] = field(default_factory=dict)  # crash site -> saved input

    def row(self, name: str) -> str:
        return (
            f"{name:24} {self.inputs:7,} inputs  crash {self.crashes:4}  hang {self.hangs:3}  >1GiB {self.over_1gib:3}"
            f"  peak +{self.max_rss_growth_mib:7.1f} MiB  slowest {self.slowest_s:5.2f} s  ({self.seconds:.0f} s)"
        )


def _status_kib(key: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key):
                return int(line.split()[1])
    return 0


def _reset_peak() -> None:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # resets VmHWM to the current RSS (Linux >= 4.0)
    except OSError:
        pass


def _site(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    ours = [f for f in frames if "/gdsdiag/" in f.filename] or frames
    f = ours[-1] if ours else None
    where = f"{os.path.basename(f.filename)}:{f.lineno}" if f else "?"
    return f"{type(exc).__name__} at {where}"


def _on_alarm(signum, frame):
    raise Hang()


def run(
    targets: list[Target],
    per_target: int | None,
    seconds: float | None,
    seed: int,
    timeout: float,
    keep: str | None = None,
    say=print,
) -> dict[str, Counts]:
    from click.testing import CliRunner

    from gdsdiag.cli import cli
    from gdsdiag.errors import GdsdiagError

    # 1 GiB of address space above what the process holds now: an input that needs more ends in
    # MemoryError (counted) instead of taking the machine
    base_as = _status_kib("VmSize:") * 1024
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (base_as + GiB + (256 << 20), hard))
    previous = signal.signal(signal.SIGALRM, _on_alarm)
    runner = CliRunner()
    results: dict[str, Counts] = {}
    work = tempfile.mkdtemp(prefix="gdsdiag-fuzz-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    try:
        for t in targets:
            c = results[t.name] = Counts()
            rng = random.Random(f"{seed}:{t.name}")
            path = os.path.join(work, "input" + t.suffix)
            start = time.monotonic()
            i = 0
            while (per_target is None or i < per_target) and (seconds is None or time.monotonic() - start < seconds):
                try:
                    data = t.inputs(rng)
                except MemoryError:
                    continue  # the generator's own limit, not the parser's
                with open(path, "wb") as f:
                    f.write(data)
                argv = t.argv(path, i)
                i += 1
                _reset_peak()
                rss0 = _status_kib("VmRSS:")
                t0 = time.monotonic()
                problem = None
                signal.setitimer(signal.ITIMER_REAL, timeout)
                try:
                    res = runner.invoke(cli, argv, catch_exceptions=True)
                    signal.setitimer(signal.ITIMER_REAL, 0)
                    out = res.output if isinstance(res.output, str) else ""
                    # a GdsdiagError is the clean end gdsdiag.cli.main turns into one line and its
                    # exit code (click's runner calls the group, not main)
                    if res.exception is not None and not isinstance(res.exception, (SystemExit, GdsdiagError)):
                        if isinstance(res.exception, MemoryError):
                            problem = "mem", "MemoryError"
                        else:
                            problem = "crash", _site(res.exception)
                    elif "gdsdiag: internal error" in out:
                        problem = "crash", "internal error: " + out.strip().splitlines()[-1][:120]
                    elif res.exit_code not in (0, 1, 2, 3, 4):
                        problem = "crash", f"exit code {res.exit_code}"
                except Hang:
                    problem = "hang", "hang"
                finally:
                    signal.setitimer(signal.ITIMER_REAL, 0)
                took = time.monotonic() - t0
                growth = max(0, _status_kib("VmHWM:") - rss0) / 1024
                c.inputs += 1
                c.slowest_s = max(c.slowest_s, took)
                c.max_rss_growth_mib = max(c.max_rss_growth_mib, growth)
                if problem is None and growth > 1024:
                    problem = "mem", "peak RSS over 1 GiB"
                if problem:
                    kind, site = problem
                    if kind == "crash":
                        c.crashes += 1
                    elif kind == "hang":
                        c.hangs += 1
                    else:
                        c.over_1gib += 1
                    if site not in c.sites:
                        saved = ""
                        if keep:
                            os.makedirs(keep, exist_ok=True)
                            saved = os.path.join(keep, f"{t.name}-{hashlib.sha256(data).hexdigest()[:12]}{t.suffix}")
                            with open(saved, "wb") as f:
                                f.write(data)
                        c.sites[site] = saved
                        say(f"  {t.name} #{i - 1}: {kind}: {site} {saved}")
            c.seconds = time.monotonic() - start
            say(c.row(t.name))
            sys.stdout.flush()
    finally:
        signal.signal(signal.SIGALRM, previous)
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
        import shutil

        shutil.rmtree(work, ignore_errors=True)
    return results
