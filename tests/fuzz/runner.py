"""Run the targets in this process against the installed package and count what went wrong.

An input is a crash when the command raised anything but a clean exit (click's usage errors and
GdsdiagError end in SystemExit with 0-4), printed "internal error", or exited with another code;
a hang when it used more than ``timeout`` seconds of CPU (SIGPROF: on a machine shared with other
work, wall time says more about the neighbours than about the input) or was blocked for six times
that (SIGALRM), and a fresh ``python -m gdsdiag`` process given the same input also needs more
than ``timeout`` CPU seconds (or never ends); over 1 GiB when its peak RSS (VmHWM, reset
before each input through /proc/self/clear_refs) grew by more than 1 GiB, or it hit the
address-space limit set 1 GiB above the start (MemoryError) -- and a fresh ``python -m gdsdiag``
process given the same input then also needs more than 1 GiB (peak RSS from wait4), so that
what one long fuzzing process accumulates (caches) is never blamed on an input.

The targets run in forked children of ``CHUNK`` inputs each (a fresh process, as every command
run is), and the caches of gdsdiag's modules are cleared after each input.
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


CHUNK = 1000


_clears: list = []
_seen_modules = 0


def _clear_caches() -> None:
    """Clear every functools cache of gdsdiag's modules (found again only when modules were added:
    looking costs ~5 ms, clearing microseconds)."""
    global _seen_modules
    mods = [(n, m) for n, m in list(sys.modules.items()) if n.startswith("gdsdiag") and m is not None]
    if len(mods) != _seen_modules:
        _seen_modules = len(mods)
        _clears.clear()
        for name, mod in mods:
            for v in list(vars(mod).values()):
                clear = getattr(v, "cache_clear", None)
                if callable(clear) and getattr(v, "__module__", None) == name:
                    _clears.append(clear)
    for clear in _clears:
        try:
            clear()
        except Exception:
            pass


def confirm_memory(argv: list[str], data: bytes, suffix: str, timeout: float = 120) -> float | None:
    """Peak RSS (MiB) of a fresh gdsdiag process on this input, under a 2 GiB address-space limit
    (None: it could not be measured). Over 1,024 (or a MemoryError: 2048) is a real finding."""
    import subprocess

    work = tempfile.mkdtemp(prefix="gdsdiag-fuzz-confirm-")
    try:
        path = os.path.join(work, "input" + suffix)
        with open(path, "wb") as f:
            f.write(data)
        old = argv[argv.index("__INPUT__")] if "__INPUT__" in argv else None
        args = [path if a == old else a for a in argv]

        def limit():
            resource.setrlimit(resource.RLIMIT_AS, (2 * GiB, 2 * GiB))

        p = subprocess.Popen(
            [sys.executable, "-m", "gdsdiag", *args],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            preexec_fn=limit,
            cwd="/",
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            pid, status, ru = os.wait4(p.pid, os.WNOHANG)
            if pid:
                err = p.stderr.read().decode(errors="replace") if p.stderr else ""
                if "MemoryError" in err:
                    return 2048.0
                return ru.ru_maxrss / 1024
            time.sleep(0.05)
        p.kill()
        p.wait()
        return None
    finally:
        import shutil

        shutil.rmtree(work, ignore_errors=True)


def confirm_cpu(argv: list[str], data: bytes, suffix: str, limit: float, timeout: float = 300) -> float | None:
    """CPU seconds a fresh gdsdiag process needs for this input, run with RLIMIT_CPU a little over
    ``limit`` (None: it was killed at the limit, or still running after ``timeout`` wall seconds)."""
    import subprocess

    work = tempfile.mkdtemp(prefix="gdsdiag-fuzz-confirm-")
    try:
        path = os.path.join(work, "input" + suffix)
        with open(path, "wb") as f:
            f.write(data)
        old = argv[argv.index("__INPUT__")] if "__INPUT__" in argv else None
        args = [path if a == old else a for a in argv]
        cap = int(limit) + 2

        def limit_cpu():
            resource.setrlimit(resource.RLIMIT_CPU, (cap, cap + 1))

        p = subprocess.Popen(
            [sys.executable, "-m", "gdsdiag", *args],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            stdin=subprocess.DEVNULL,
            preexec_fn=limit_cpu,
            cwd="/",
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            pid, status, ru = os.wait4(p.pid, os.WNOHANG)
            if pid:
                if os.WIFSIGNALED(status) and os.WTERMSIG(status) in (signal.SIGXCPU, signal.SIGKILL):
                    return None
                return ru.ru_utime + ru.ru_stime
            time.sleep(0.05)
        p.kill()
        p.wait()
        return None
    finally:
        import shutil

        shutil.rmtree(work, ignore_errors=True)


def run(
    targets: list[Target],
    per_target: int | None,
    seconds: float | None,
    seed: int,
    timeout: float,
    keep: str | None = None,
    say=print,
    fork: bool = True,
) -> dict[str, Counts]:
    """Each target's inputs in forked children of CHUNK inputs (in this process with fork=False)."""
    import json as _json

    results: dict[str, Counts] = {}
    for t in targets:
        total = Counts()
        start = time.monotonic()
        done = 0
        while (per_target is None or done < per_target) and (seconds is None or time.monotonic() - start < seconds):
            n = CHUNK if per_target is None else min(CHUNK, per_target - done)
            left = None if seconds is None else max(0.0, seconds - (time.monotonic() - start))
            if not fork:
                part = _run(t, n, left, seed, timeout, keep, say, done)
            else:
                r, w = os.pipe()
                sys.stdout.flush()
                pid = os.fork()
                if pid == 0:  # the child: one chunk, its counts back through the pipe
                    os.close(r)
                    code = 0
                    try:
                        part = _run(t, n, left, seed, timeout, keep, say, done)
                        with os.fdopen(w, "w") as f:
                            _json.dump(part.__dict__, f)
                    except BaseException:
                        traceback.print_exc()
                        code = 1
                    finally:
                        sys.stdout.flush()
                        sys.stderr.flush()
                        os._exit(code)
                os.close(w)
                with os.fdopen(r) as f:
                    text = f.read()
                os.waitpid(pid, 0)
                if not text:
                    raise RuntimeError(f"the fuzz child for {t.name} died")
                part = Counts(**_json.loads(text))
            for k in ("inputs", "crashes", "hangs", "over_1gib"):
                setattr(total, k, getattr(total, k) + getattr(part, k))
            total.max_rss_growth_mib = max(total.max_rss_growth_mib, part.max_rss_growth_mib)
            total.slowest_s = max(total.slowest_s, part.slowest_s)
            for site, saved in part.sites.items():
                total.sites.setdefault(site, saved)
            done += part.inputs
            if part.inputs == 0:
                break
            if per_target is not None and done < per_target:  # progress of a long run, per chunk
                say(
                    f"  ... {t.name}: {total.inputs:,} inputs, {total.crashes} crash, {total.hangs} hang, "
                    f"{total.over_1gib} >1GiB ({time.monotonic() - start:.0f} s)"
                )
        total.seconds = time.monotonic() - start
        results[t.name] = total
        say(total.row(t.name))
        sys.stdout.flush()
    return results


def _run(
    t: Target,
    per_target: int | None,
    seconds: float | None,
    seed: int,
    timeout: float,
    keep: str | None,
    say,
    offset: int,
) -> Counts:
    """One chunk of one target's inputs in this process."""
    import click
    from click.testing import CliRunner

    from gdsdiag.cli import cli, exit_code_of
    from gdsdiag.errors import GdsdiagError

    # 1 GiB of address space above what the process holds now: an input that needs more ends in
    # MemoryError (counted) instead of taking the machine
    base_as = _status_kib("VmSize:") * 1024
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (base_as + GiB + (256 << 20), hard))
    previous = signal.signal(signal.SIGALRM, _on_alarm)
    previous_prof = signal.signal(signal.SIGPROF, _on_alarm)
    runner = CliRunner()
    c = Counts()
    work = tempfile.mkdtemp(prefix="gdsdiag-fuzz-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    try:
        rng = random.Random(f"{seed}:{t.name}:{offset}")
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
            argv = t.argv(path, offset + i)
            i += 1
            _reset_peak()
            rss0 = _status_kib("VmRSS:")
            t0 = time.monotonic()
            problem = None
            signal.setitimer(signal.ITIMER_PROF, timeout)
            signal.setitimer(signal.ITIMER_REAL, timeout * 6)
            try:
                # (not standalone: the command's report comes back, and its exit code with it)
                res = runner.invoke(cli, argv, catch_exceptions=True, standalone_mode=False)
                signal.setitimer(signal.ITIMER_REAL, 0)
                signal.setitimer(signal.ITIMER_PROF, 0)
                out = res.output if isinstance(res.output, str) else ""
                # a GdsdiagError (or click's usage error) is the clean end gdsdiag.cli.main turns into
                # one line and its exit code (click's runner calls the group, not main)
                clean = (SystemExit, GdsdiagError, click.ClickException)
                if res.exception is not None and not isinstance(res.exception, clean):
                    if isinstance(res.exception, MemoryError):
                        problem = "mem", "MemoryError"
                    else:
                        problem = "crash", _site(res.exception)
                elif "Traceback (most recent call last)" in out:  # a thread's, or one printed and swallowed
                    problem = "crash", "traceback: " + out.strip().splitlines()[-1][:120]
                elif "gdsdiag: internal error" in out:
                    problem = "crash", "internal error: " + out.strip().splitlines()[-1][:120]
                elif res.exception is None and exit_code_of(res.return_value) not in (0, 1, 2, 3, 4):
                    problem = "crash", f"exit code {exit_code_of(res.return_value)}"
            except Hang:
                problem = "hang", "hang"
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
                signal.setitimer(signal.ITIMER_PROF, 0)
            took = time.monotonic() - t0
            growth = max(0, _status_kib("VmHWM:") - rss0) / 1024
            _clear_caches()
            c.inputs += 1
            c.slowest_s = max(c.slowest_s, took)
            if problem is None and growth > 1024:
                problem = "mem", "peak RSS over 1 GiB"
            if problem and problem[0] == "hang":
                # confirmed in a fresh process with a CPU limit, or it was the machine's load
                cpu = confirm_cpu(["__INPUT__" if a == path else a for a in argv], data, t.suffix, timeout)
                if cpu is not None and cpu <= timeout:
                    problem = None
                else:
                    problem = "hang", "hang" if cpu is None else f"hang ({cpu:.1f} CPU s in a fresh process)"
            if problem and problem[0] == "mem":
                # confirmed in a fresh process, or it was what this long process accumulated
                peak = confirm_memory(["__INPUT__" if a == path else a for a in argv], data, t.suffix)
                if peak is None:
                    problem = "hang", "over 120 s in a fresh process"
                elif peak <= 1024:
                    problem = None
                    growth = min(growth, peak)
                else:
                    problem = "mem", f"{problem[1]} (a fresh process: {peak:.0f} MiB)"
            c.max_rss_growth_mib = max(c.max_rss_growth_mib, growth)
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
                    say(f"  {t.name} #{offset + i - 1}: {kind}: {site} {saved}")
        c.seconds = time.monotonic() - start
    finally:
        signal.signal(signal.SIGALRM, previous)
        signal.signal(signal.SIGPROF, previous_prof)
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
        import shutil

        shutil.rmtree(work, ignore_errors=True)
    return c
