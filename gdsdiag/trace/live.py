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
    gate = f'read -r _ <&{r}; exec {r}<&-; exec "$@"'
    proc = subprocess.Popen(["/bin/sh", "-c", gate, "gdsdiag-trace-gate", *cmd], pass_fds=(r,))
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
    stop = {"flag": False}

    def on_sigint(signum, frame):
        stop["flag"] = True

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
    return TraceResult(verdicts, summarize(verdicts), probes.attached, probes.failed, probes.lost, nevents, exit_code, header)


def replay(path: str, path_filter: str | None, on_verdict) -> TraceResult:
    from .classify import classify
    from .events import read_record
    header, events = read_record(path)
    verdicts = classify(events, path_filter)
    for v in verdicts:
        on_verdict(v)
    return TraceResult(verdicts, summarize(verdicts), header.get("probes_attached", []), header.get("probes_not_attached", []),
                       header.get("lost", 0), len(events), None, header)
