"""A trace session: attach, start or follow the workload, stream verdicts, detach, summarise."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from dataclasses import dataclass, field

from ..errors import GdsdiagError
from .classify import Classifier, IoVerdict, summarize


@dataclass
class TraceResult:
    verdicts: list[IoVerdict]
    summary: dict
    attached: list[str]
    failed: list[str]
    lost: int
    events: int
    exit_code: int | None = None
    header: dict = field(default_factory=dict)
    stopped_by: int | None = None      # the signal (INT/TERM/HUP) that ended a live trace early

    def summary_json(self) -> dict:
        return {"type": "summary", "routes": self.summary, "ios": len(self.verdicts), "events": self.events,
                "lost_events": self.lost, "probes_attached": self.attached, "probes_not_attached": self.failed,
                "traced_exit_code": self.exit_code}


def _gate_child(cmd: list[str]):
    """Start CMD held at a pipe so probes are attached and its pid registered before it runs."""
    import shutil
    if shutil.which(cmd[0]) is None and not os.path.exists(cmd[0]):
        raise GdsdiagError(f"command not found: {cmd[0]}", "give the program to trace after --")
    r, w = os.pipe()
    # A shell waits on the pipe and then execs CMD in place: the pid we register is CMD's pid, and
    # nothing of CMD runs before the probes are attached. (A preexec_fn cannot wait: Popen blocks
    # until the child has exec'd.)
    # Only the word "go" opens the gate: if gdsdiag is stopped or killed before the probes are live,
    # the pipe closes, read fails and CMD never runs untraced (exit 125).
    # The pipe is moved to fd 3 in the child: dash accepts only one-digit descriptors in '<&N'.
    gate = 'IFS= read -r word <&3 && [ "$word" = go ] || exit 125; exec 3<&-; exec "$@"'
    proc = subprocess.Popen(["/bin/sh", "-c", gate, "gdsdiag-trace-gate", *cmd], pass_fds=(3,),
                            preexec_fn=lambda: os.dup2(r, 3))
    os.close(r)
    return proc, w


def run_live(cmd: list[str] | None, pid: int | None, duration: float | None, path_filter: str | None,
             libcufile: str | None, on_verdict, record_file=None, block: bool = False) -> TraceResult:
    from .bpf import Probes, preflight
    preflight()
    if libcufile is None:
        from ..platform.libcufile import locate
        libcufile = locate().path
    if pid is not None and not os.path.exists(f"/proc/{pid}"):
        raise GdsdiagError(f"no process {pid}", "give the pid of a running process")
    proc, gate = (None, None)
    if cmd:
        proc, gate = _gate_child(cmd)
    pids = [p for p in (pid, proc.pid if proc else None) if p]
    try:
        probes = Probes(libcufile, pids, trace_all=not pids, block=block)
    except BaseException:
        if proc:
            os.close(gate)
            proc.kill()
        raise
    header = {"libcufile": libcufile, "kernel": os.uname().release, "probes_attached": probes.attached,
              "probes_not_attached": probes.failed, "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
              "cmd": cmd, "pid": pid}
    if record_file is not None:
        record_file.write(json.dumps({"gdsdiag_trace_record": 1, **header}) + "\n")
    clf = Classifier(path_filter)
    verdicts: list[IoVerdict] = []
    nevents = 0
    stop = {"flag": False, "signum": None}

    def on_sigint(signum, frame):
        stop["flag"] = True
        stop["signum"] = signum

    def take(timeout_ms: int) -> None:
        """Poll once: record the raw events (if asked) and feed them to the classifier."""
        nonlocal nevents
        evs = probes.poll(timeout_ms)
        nevents += len(evs)
        for e in evs:
            if record_file is not None:
                record_file.write(json.dumps(e.to_list()) + "\n")
            clf.feed(e)
    old = signal.signal(signal.SIGINT, on_sigint)
    old_term = signal.signal(signal.SIGTERM, on_sigint)
    old_hup = signal.signal(signal.SIGHUP, on_sigint)
    t_end = time.monotonic() + duration if duration else None
    exit_code = None
    try:
        if proc:
            os.write(gate, b"go\n")
            os.close(gate)
        while not stop["flag"]:
            take(100)
            clf.advance()
            for v in clf.drain():
                verdicts.append(v)
                on_verdict(v)
            if proc and proc.poll() is not None:
                exit_code = proc.returncode
                # the buffers may still hold the last events
                for _ in range(3):
                    take(50)
                break
            if pid and not os.path.exists(f"/proc/{pid}"):
                break
            if t_end and time.monotonic() >= t_end:
                break
    finally:
        signal.signal(signal.SIGINT, old)
        signal.signal(signal.SIGTERM, old_term)
        signal.signal(signal.SIGHUP, old_hup)
        probes.close()                    # detach every probe, whatever happened
        if proc and proc.poll() is None:
            proc.terminate()
            try:
                exit_code = proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
    clf.flush()
    for v in clf.drain():
        verdicts.append(v)
        on_verdict(v)
    return TraceResult(verdicts, summarize(verdicts), probes.attached, probes.failed, probes.lost, nevents, exit_code, header,
                       stopped_by=stop["signum"])


MAX_REPLAY_EVENTS = 2_000_000     # ~1 GiB of Event objects; a longer run is recorded in parts


class _NotARecording(Exception):
    def __init__(self, line: int, why: str):
        super().__init__(why)
        self.line, self.why = line, why


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and -(1 << 64) < v < (1 << 64)


def _event(v, n: int):
    """An Event from one parsed line, or _NotARecording naming what is wrong with it."""
    from .events import Event
    if not isinstance(v, list) or len(v) != 8:
        raise _NotARecording(n, "an event is a list of 8 values")
    ts, pid, tid, kind, name, args, comm, path = v
    if not (_is_int(ts) and _is_int(pid) and _is_int(tid)):
        raise _NotARecording(n, "timestamp, pid and tid must be integers")
    if not (isinstance(kind, str) and isinstance(name, str) and isinstance(comm, str)):
        raise _NotARecording(n, "kind, name and comm must be strings")
    # the probes record integer arguments only (probes/cufile_trace.c)
    if not isinstance(args, list) or len(args) > 16 or not all(_is_int(a) for a in args):
        raise _NotARecording(n, "args must be a list of at most 16 integers")
    if path is not None and not isinstance(path, str):
        raise _NotARecording(n, "path must be a string or null")
    return Event(ts, pid, tid, kind, name, args, comm, path)


def read_recording(path: str):
    """(header, events) of a --record file (plain or .gz), read as a bounded stream: refuses FIFOs
    and devices, lines over 64 KiB, more than MAX_REPLAY_EVENTS events, invalid UTF-8, JSON nested
    deeper than 64 or numbers out of range, and values of the wrong type — each as "not a gdsdiag
    recording: line N" instead of an internal error or a MemoryError."""
    import gzip
    import zlib
    from ..bounded import MAX_RECORD_LINE, MAX_RECORDING, loads_json, open_user_file
    fix = "record one with gdsdiag trace --record FILE"
    raw = open_user_file(path, "trace recording", MAX_RECORDING, fix)
    n = 0
    try:
        with raw:
            magic = raw.peek(2)[:2] if hasattr(raw, "peek") else b""
            f = gzip.GzipFile(fileobj=raw) if magic == b"\x1f\x8b" else raw
            header = None
            events = []
            total = 0
            while True:
                line = f.readline(MAX_RECORD_LINE + 1)
                if not line:
                    break
                n += 1
                total += len(line)
                if len(line) > MAX_RECORD_LINE:
                    raise _NotARecording(n, f"line longer than {MAX_RECORD_LINE >> 10} KiB")
                if total > MAX_RECORDING:
                    raise _NotARecording(n, f"more than {MAX_RECORDING >> 30} GiB of events")
                try:
                    text = line.decode("utf-8").strip()
                except UnicodeDecodeError:
                    raise _NotARecording(n, "invalid UTF-8") from None
                if header is None:
                    try:
                        header = loads_json(text)
                    except ValueError:
                        header = None
                    if not isinstance(header, dict) or "gdsdiag_trace_record" not in header:
                        raise _NotARecording(n, "no gdsdiag_trace_record header")
                    for key in ("probes_attached", "probes_not_attached"):
                        if not isinstance(header.get(key, []), list):
                            raise _NotARecording(n, f"header field {key} must be a list")
                    if not _is_int(header.get("lost", 0)):
                        raise _NotARecording(n, "header field lost must be an integer")
                    continue
                if not text or text.startswith("#"):
                    continue
                try:
                    v = loads_json(text)
                except ValueError as e:
                    raise _NotARecording(n, f"not an event record ({e})") from None
                events.append(_event(v, n))
                if len(events) > MAX_REPLAY_EVENTS:
                    raise _NotARecording(n, f"more than {MAX_REPLAY_EVENTS} events")
            if header is None:
                raise _NotARecording(max(n, 1), "empty file")
    except _NotARecording as e:
        raise GdsdiagError(f"{path} is not a gdsdiag trace record: line {e.line}: {e.why}", fix) from None
    except (EOFError, zlib.error, gzip.BadGzipFile) as e:
        raise GdsdiagError(f"{path} is not a gdsdiag trace record: line {n + 1}: damaged gzip stream ({e})", fix) from None
    except OSError as e:
        raise GdsdiagError(f"cannot read {path}: {e.strerror or e}", "check the path") from None
    return header, events


def replay(path: str, path_filter: str | None, on_verdict) -> TraceResult:
    from .classify import classify
    header, events = read_recording(path)
    verdicts = classify(events, path_filter)
    for v in verdicts:
        on_verdict(v)
    return TraceResult(verdicts, summarize(verdicts), header.get("probes_attached", []), header.get("probes_not_attached", []),
                       header.get("lost", 0), len(events), None, header)
