"""One live trace as an object: ``start()`` resolves the targets and attaches the probes, ``step()``
polls once and hands out the verdicts decided, ``stop()`` ends within the stop budgets (STOP_*_S),
``finish()`` gives the TraceResult; leaving the ``with`` block detaches every probe and puts the
signal handlers back. live.run_live drives it; a test or a benchmark over offline probes
(``TraceSession.over``) calls the same ``step()``."""

from __future__ import annotations

import contextlib
import json
import operator
import os
import subprocess
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import GdsdiagError
from ..selfexec import module_argv
from ..signals import stopping
from .filesample import LiveContentCheck
from .model.classify import Classifier
from .model.content import ContentCheck, answer_event
from .model.counted import CountedIo
from .model.events import RECORD_VERSION
from .model.tally import RouteTally, Unclassified, merge_unclassified
from .model.why import NodeMissing
from .result import TraceResult, cache_now, page_cache_share, result_of, tally_events, waiting_rows
from .targets import Targets

if TYPE_CHECKING:
    from collections.abc import Callable

    from .pods import PodBook
    from .probes.bpf import Probes


_TS = operator.attrgetter("ts")
CHUNK = 1024  # events (or verdicts) handled between two drains of the ring buffers
# After INT/TERM/HUP the events still queued are classified for at most this long, and at most
# STOP_RAW records still undecoded are kept: under a load Python cannot keep up with, the queue can
# hold a million events (a minute of classifying), and the summary must be out within a second.
# What is left is counted (``unclassified_at_stop``), never silently dropped.
# The budgets count from the signal (each phase gets at least its own slice when an earlier one,
# such as a traced program that ignores SIGTERM, took longer), so the summary is out ~0.8 s after it.
STOP_BUDGET_S = 0.35
# (decoding is part of the budget: ~20k records is what 0.3 s classifies on a loaded 2-vCPU VM;
# the records dropped beyond them are counted per process, with their reads and writes and bytes)
STOP_RAW = 20_000
# then the I/Os the classifier holds for evidence still to come (a CUDA copy of their bytes,
# libcufile's call) are decided until this long after the signal, the rest counted per process
STOP_FLUSH_S = 0.55
# and the verdicts made after the signal are printed until this long after it; the rest are in the
# summary's totals (and --record keeps every event)
STOP_PRINT_S = 0.75
STOP_SLICE_S = 0.1  # the least each phase gets


RUN_CHECK = "run gdsdiag check on this node"  # (the fix of every NodeFactsReader.missing)


class NodeFactsReader:
    """`check`'s node facts (check/facts.py) for each file's why, read by `gdsdiag check --json` in
    a child process started with the trace: its reads (kallsyms, sysfs, libcufile's notes) cost the
    tracer no CPU and hold no lock of its (in a thread of the tracer they took 0.5-1.4 s of its CPU on
    the H100's bounce streams). Waited for at most WAIT_S at the end; a check not done by then, or
    failed, leaves the why without the node's side, and the why says so."""

    WAIT_S = 0.5

    def __init__(self) -> None:
        self._proc: subprocess.Popen | None = None
        # GDSDIAG_NODE_FACTS_WAIT_S: a loaded machine (a CI box running two suites on 2 cores) can take
        # longer than the program to start Python and read the node; a test that asserts the node's
        # side of the why waits for it instead of racing it. Not a number: the default.
        try:
            self.wait_s = max(0.0, float(os.environ.get("GDSDIAG_NODE_FACTS_WAIT_S", self.WAIT_S)))
        except ValueError:
            self.wait_s = self.WAIT_S
        # why result() gave None, for the why's text (never "a replay" in a trace on the node)
        self.missing = NodeMissing("not read", RUN_CHECK)
        if os.environ.get("GDSDIAG_NODE_FACTS", "1") == "0":  # (benchmarks: the tracer's own cost alone)
            self.missing = NodeMissing("not read: GDSDIAG_NODE_FACTS=0 turned the node's check off", RUN_CHECK)
            return
        try:
            self._proc = subprocess.Popen(
                # (the running gdsdiag, never a gdsdiag/ package in the current directory: selfexec)
                module_argv("gdsdiag", "check", "--json"),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                start_new_session=True,  # (the terminal's Ctrl-C is the trace's to handle)
            )
        except OSError as e:
            self._proc = None
            self.missing = NodeMissing(f"not read: gdsdiag check could not start ({e.strerror or e})", RUN_CHECK)

    def abandon(self) -> None:
        """No file needs the node's facts: the check is ended, not waited for."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            self._proc.communicate()

    def result(self):
        from ..bounded import loads_json
        from ..check.context import CheckContext
        from ..check.facts import NodeFacts
        from ..platform.roots import node_root

        p = self._proc
        if p is None:
            return None
        try:
            out, _ = p.communicate(timeout=self.wait_s)
        except subprocess.TimeoutExpired:
            p.kill()
            p.communicate()
            self.missing = NodeMissing(
                f"not read: gdsdiag check had not answered {self.wait_s:g} s after the trace ended",
                RUN_CHECK,
            )
            return None
        try:
            doc = loads_json(out.decode("utf-8", "replace"))
            with node_root("/") as fs:
                return NodeFacts.from_check_json(doc, CheckContext(fs, env=dict(os.environ)))
        except (ValueError, OSError, GdsdiagError) as e:
            self.missing = NodeMissing(f"not read: gdsdiag check's answer could not be used ({e})", RUN_CHECK)
            return None


def record_answers(record_file, content: ContentCheck, ts: int) -> None:
    """The content checks made since the last call, as recording lines (a replay reads them)."""
    lines = (answer_event(ts, p, off, fs).to_list() for p, off, fs in content.take_answers())
    record_file.write("".join(json.dumps(v) + "\n" for v in lines))


@dataclass
class TraceOptions:
    """What a live trace follows and how (gdsdiag trace's options; live.run_live documents each)."""

    cmd: list[str] | None = None
    pids: list[int] | None = None
    duration: float | None = None
    path_filter: str | None = None
    libcufile: str | None = None
    record_file: Any = None
    block: bool = False
    cgroup: str | None = None
    comm: str | None = None
    per_io: bool = False
    pod: str | None = None
    namespace: str | None = None
    pod_logs: str = "/var/log/pods"


@dataclass
class _Stop:
    """The first stop signal (its number names the exit code) and when it came; later ones only note."""

    flag: bool = False
    signum: int | None = None
    t: float | None = None


@dataclass
class TraceSession:
    opts: TraceOptions
    on_verdict: Callable
    on_status: Callable[[str], None] | None = None
    on_tick: Callable | None = None
    on_batch: Callable[[], None] | None = None
    # set by start() (or handed to over())
    probes: Probes = field(init=False)
    clf: Classifier = field(init=False)
    targets: Targets = field(init=False)
    book: PodBook | None = field(init=False, default=None)
    content: ContentCheck = field(init=False)
    header: dict = field(init=False, default_factory=dict)
    timing: dict = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        self.counter = CountedIo()
        self.tally = RouteTally()
        self.nevents = 0
        self.unclassified = 0
        self.unsent: Unclassified = {}  # of those, per process (tally.Unclassified)
        self.unprinted: list = []  # verdicts made after a stop signal, before the loop ended
        self.queued: list = []  # events taken but not classified when a stop signal came (oldest first)
        self.exit_code: int | None = None
        self.not_printed = 0
        self.stopped = _Stop()
        self._cleanup = contextlib.ExitStack()
        self._many = getattr(self.on_verdict, "many", None)  # (a printer that takes a poll's verdicts together)
        self._t_end: float | None = None
        self._node: NodeFactsReader | None = None
        self.cache: Any = None
        self.libcufiles: list[str] = []

    def _say(self, msg: str) -> None:
        if self.on_status is not None:
            self.on_status(msg)

    # -- start -------------------------------------------------------------------------------------

    def start(self) -> TraceSession:
        """Targets resolved, the command started at its gate, the probes attached, the classifier
        ready; INT, TERM and HUP from here on ask the session to stop (signals.stopping)."""
        from .probes.bpf import preflight

        t0 = time.monotonic()
        preflight()
        self._resolve()
        probes = self._attach()
        t_attached = self._t_attached = time.monotonic()
        for p in self.targets.walk_again():
            probes.add_pid(p)
        proc = self.targets.proc
        probes.adopt([p for p in self.targets.existing if not proc or p != proc.pid])
        for p in self.targets.existing:
            probes.scan_maps(p)
        self._write_header()
        self._ready_model()
        # The handlers stay until the probes are gone (left after the detach): a second signal only
        # notes itself, so neither the summary nor the detach is cut short.
        self._cleanup.enter_context(stopping(self.request_stop))
        self._cleanup.callback(self.content.close)
        self._cleanup.callback(probes.close)  # detach every probe, whatever happened (all at once: detach.py)
        o = self.opts
        self._t_end = time.monotonic() + o.duration if o.duration else None
        self.timing = {"attach_s": round(t_attached - t0, 2), **probes.timing}
        self._say(f"tracing, Ctrl-C to end (live after {t_attached - t0:.1f} s)")
        return self

    def _resolve(self) -> None:
        """The targets (targets.py), each process's pod book, and the command started at its gate."""
        from ..platform.containers import Identities
        from ..platform.fsroot import FsRoot
        from .pods import PodBook

        o = self.opts
        targets = self.targets = Targets.named(o.pids, o.cgroup)
        # (the node the trace runs on: its processes' /proc/PID/cgroup and the kubelet's /var/log/pods)
        # (exporter --trace hands over its reader, under its --root and --pod-logs, and takes what the
        # trace read while the processes lived for its labels: a verdict held for evidence, or a kernel
        # counter read at the end, comes after its process may have gone)
        own = getattr(self.on_verdict, "identities", None)
        book = self.book = PodBook(own if isinstance(own, Identities) else Identities(FsRoot("/"), o.pod_logs))
        share = getattr(self.on_verdict, "use_identities", None)
        if share is not None:
            share(book.of)
        targets.select_pods(o.pod, o.namespace, book)
        self._say("attaching…")
        targets.start_command(o.cmd)
        for p in targets.walk(o.comm):
            book.add(p)
        self.libcufiles = targets.libcufiles(o.libcufile)

    def _attach(self) -> Probes:
        from .probes.bpf import Probes

        o, targets = self.opts, self.targets
        try:
            self.probes = Probes(
                self.libcufiles,
                targets.existing,
                trace_all=not targets.selective,
                block=o.block,
                cgroup=targets.bpf_cgroup,
                comm=o.comm,
                cmd=o.cmd,
                preattach=not o.libcufile,  # --libcufile: that copy only, as asked
                per_io=o.per_io,
            )
        except BaseException:
            targets.abandon()
            raise
        return self.probes

    def _write_header(self) -> None:
        o, probes = self.opts, self.probes
        self.header = {
            "libcufile": self.libcufiles[0] if self.libcufiles else None,
            "kernel": os.uname().release,
            "probes_attached": probes.attached,
            "probes_not_attached": probes.failed,
            "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "cmd": o.cmd,
            "pids": self.targets.pids,
            "cgroup": o.cgroup,
            "comm": o.comm,
            "pod": o.pod,
            "namespace": o.namespace,
        }
        if o.record_file is not None:
            o.record_file.write(json.dumps({"gdsdiag_trace_record": RECORD_VERSION, **self.header}) + "\n")

    def _ready_model(self) -> None:
        """The classifier as this trace's probes and options need it, its content check, the node's
        facts read beside the trace, and whole cuFile calls paired from the ring's records."""
        o, probes = self.opts, self.probes
        clf = self.clf = Classifier(o.path_filter)
        if getattr(probes, "major_faults", False):
            clf.major_faults = {}  # (counted: a file with none has 0, not "not counted")
        clf.cgroup_job = bool(o.cgroup)  # a container's processes are one job, forked from each other or not
        self.content = LiveContentCheck()  # staged copies checked against the files' own bytes
        clf.use_content(self.content)
        self._node = NodeFactsReader()  # the node's GDS facts for each file's why, read beside the trace
        self.cache = page_cache_share(clf)  # (each pod's page-cache hit share: the verdicts, counters and fills)
        if o.record_file is None and os.environ.get("GDSDIAG_WHOLE_CALLS", "1") != "0":
            # (a recording keeps every event: there each call is decoded as before)
            probes.pair_whole_calls(self.whole_gate)

    @classmethod
    def over(cls, probes: Probes, clf: Classifier, on_verdict: Callable = lambda v: None) -> TraceSession:
        """A session around probes already made (bpf.Probes.offline: the record path without bcc or
        root) and a classifier: what step() does to records, for tests and benchmarks."""
        self = cls(TraceOptions(), on_verdict)
        self.probes, self.clf = probes, clf
        self.targets = Targets([])
        self.content = ContentCheck()
        return self

    def __enter__(self) -> TraceSession:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Every probe detached, the files the content check read closed, the handlers back."""
        self._cleanup.close()
        if hasattr(self, "probes"):
            self.timing.update({k: v for k, v in self.probes.timing.items() if k in ("probes", "detach_s")})

    # -- signals -----------------------------------------------------------------------------------

    def request_stop(self, signum: int) -> None:
        """INT, TERM or HUP: the loop ends at its next turn; the first signal names the stop (its
        exit code), later ones only note."""
        s = self.stopped
        s.flag = True
        if s.signum is None:
            s.signum = signum
            s.t = time.monotonic()

    # -- step --------------------------------------------------------------------------------------

    def whole_gate(self):
        veto, opened, bounce_ok = self.clf.whole_gate()
        if self.queued:  # (taken, not fed yet: a stop signal came)
            veto.update(e.pid for e in self.queued)
            bounce_ok = None
        return veto, opened, bounce_ok

    def counted_now(self) -> list[dict]:
        """The kernel's host-I/O counters as they stand, named as the summary names them."""
        now = CountedIo()
        now.paths, now.comms, now.counted = self.counter.paths, self.counter.comms, self.probes.counted_host_io()
        return now.rows(self.clf._path_ok, self.clf.copied_elsewhere)

    def take(self, timeout_ms: int, final: bool = False, deadline: float | None = None) -> None:
        """Poll once: record the raw events (if asked) and feed them to the classifier. Once a stop
        signal has come, the rest of a large batch waits for the final call, which works until
        DEADLINE and counts what is left."""
        probes, clf, record_file = self.probes, self.clf, self.opts.record_file
        if deadline is not None:
            self.unclassified += probes.drop_raw_beyond(STOP_RAW, self.unsent)
        new = probes.poll(timeout_ms, final)
        pairs, bounces = probes.take_whole(), probes.take_bounce()
        if pairs or bounces:  # (whole calls: decided now; those it cannot, fed with the rest in time order)
            self.nevents += 2 * (len(pairs) + len(bounces))
            left = clf.feed_whole(pairs, bounces)
            if left:
                self.nevents -= len(left)
                new = sorted(new + left, key=_TS)
        self.nevents += len(new)
        # a process that exec'd or mapped a file we do not know as data may have loaded a library:
        # probe any new libcufile / libcuda copy it maps (once per file)
        rescan = set()
        for e in new:
            if e.kind == "open" and e.path and os.path.basename(e.path).startswith(("libcufile.so", "libcuda.so")):
                probes.attach_library(e.path, e.pid)  # as it is opened, before it is mapped
            elif (e.kind == "proc" and e.name == "exec") or (e.kind == "fd" and e.name == "mmap"):
                rescan.add(e.pid)
        for p in rescan:
            probes.scan_maps(p)
        probes.attach_answers()
        evs = self.queued + new if self.queued else new
        self.queued = []
        # the ring is emptied into memory (cheap: bytes copied) every CHUNK events of this slower work,
        # so a burst waits in memory instead of overflowing the ring while Python classifies
        for i in range(0, len(evs), CHUNK):
            if deadline is not None and time.monotonic() > deadline:
                # ("bounces": one event standing for two per pair)
                self.unclassified += sum(2 * len(e.args) if e.kind == "bounces" else 1 for e in evs[i:])
                tally_events(evs[i:], self.unsent, probes.exits_counted)
                break
            if self.stopped.flag and not final:
                self.queued.extend(evs[i:])
                break
            part = evs[i : i + CHUNK]
            if record_file is not None:
                record_file.write("".join(json.dumps(e.to_list()) + "\n" for e in part))
            for e in part:
                clf.feed(e)
                self.counter.feed(e)
            if self.book is not None:
                self.book.see_pids([e.pid for e in part])  # (each process's pod, read while it lives)
            if record_file is not None and self.content.answers:
                record_answers(record_file, self.content, part[-1].ts)
            probes.drain()

    def hand_out(self, part: list) -> None:
        """A chunk of verdicts to the printer: together where it takes lists, else one by one."""
        if self._many is not None:
            self._many(part)
        else:
            for v in part:
                self.on_verdict(v)

    def step(self, timeout_ms: int = 100, final: bool = False) -> bool:
        """One turn of the live loop: poll, classify, hand out what is decided, tick; False once the
        trace should end (a stop signal, the command's exit, every --pid gone, --duration). FINAL
        (a stream that has ended, as offline probes replay one): the records held for reordering
        are let out, and every I/O decided that the events seen can decide."""
        if self.stopped.flag:
            return False
        probes, clf, book = self.probes, self.clf, self.book
        self.take(timeout_ms, final)
        if book is not None:
            book.see(clf.procs)  # (each new process's pod, read while it lives)
        clf.advance(0 if final or self.stopped.flag or self.queued else probes.complete_ns)
        vs = clf.drain()
        for i in range(0, len(vs), CHUNK):
            part = vs[i : i + CHUNK]
            self.tally.add_all(part)
            if self.cache is not None:
                self.cache.add_all(part)
            if self.stopped.flag:
                self.unprinted.extend(part)  # (a signal came: printed with the held ones, in the stop's budget)
            else:
                self.hand_out(part)
            if len(part) == CHUNK:
                probes.drain()
        if self.on_batch is not None:
            self.on_batch()
        if self.on_tick is not None:
            self.on_tick(
                counted=self.counted_now,
                waiting=lambda: waiting_rows(clf),
                pods=self._pods,
                cache=self._cache_now,
            )
        proc = self.targets.proc
        if proc and proc.poll() is not None:
            self.exit_code = proc.returncode
            # the buffers may still hold the last events: the kernel wakes the reader only
            # now and then, so drain without waiting until a poll brings nothing
            for _ in range(3):
                self.take(20)
            return False
        if self.targets.all_gone(clf.procs):
            return False  # every followed process has gone, children started later too
        return not (self._t_end and time.monotonic() >= self._t_end)

    def _pods(self) -> dict:
        """pid -> its pod's identity as the book holds it now (--interval, the exporter's labels)."""
        return self.book.of if self.book is not None else {}

    def _cache_now(self):
        return cache_now(self.cache, self.counted_now(), self.probes.read_fills(), self.book)

    # -- stop, finish ------------------------------------------------------------------------------

    def run(self) -> None:
        """The command's gate opened, then step() until the trace should end; the command's tree
        stopped whatever ended it."""
        try:
            self.targets.open_gate()
            while self.step():
                pass
        finally:
            self.exit_code = self.targets.stop_command(self.exit_code)

    def _until(self, budget_s: float) -> float | None:
        """A phase's deadline after a signal: BUDGET_S from it, or at least a slice from now."""
        if not self._signalled:
            return None
        return max(self._t_stop + budget_s, time.monotonic() + STOP_SLICE_S)

    def stop(self) -> None:
        """The end, in the stop budgets when a signal ended the trace (STOP_*_S, from the signal):
        what is still in the ring buffers classified, the held I/Os flushed, the held verdicts printed."""
        probes, clf, record_file = self.probes, self.clf, self.opts.record_file
        # where the end goes, from the signal (or the loop's end) on (startup_s: stop_*_s)
        self._t_stop = t_stop = self.stopped.t or time.monotonic()
        phases = self._phases = {"tree_s": round(time.monotonic() - t_stop, 3)}
        self._signalled = self.stopped.signum is not None  # (a signal that comes after this only notes)
        # what is still in the ring buffers counts too (after a signal: what the budget allows)
        self.take(0, final=True, deadline=self._until(STOP_BUDGET_S))
        if self.book is not None:
            self.book.see(clf.procs)
        phases["classify_s"] = round(time.monotonic() - t_stop, 3)
        counted = probes.counted_host_io()
        if record_file is not None:
            record_answers(record_file, self.content, clf.now)
            record_file.write("".join(json.dumps(e.to_list()) + "\n" for e in counted))
        for e in counted:
            self.counter.feed(e)
        self.nevents += len(counted)
        # (the calls whose exit was counted without being classified are not decided again)
        clf.exits_counted(probes.cufile_exits_counted())
        clf.flush(self._until(STOP_FLUSH_S))
        self.unclassified += sum(row[0] for row in clf.unclassified.values())
        merge_unclassified(self.unsent, clf.unclassified)  # (held for evidence the stop cut short: counted)
        phases["flush_s"] = round(time.monotonic() - t_stop, 3)
        print_until = self._until(STOP_PRINT_S)
        held = clf.drain()
        self.tally.add_all(held)
        if self.cache is not None:
            self.cache.add_all(held)
        # (a chunk at a time, as the loop prints: a trace behind its program makes most of its verdicts
        # here, and one call and one write a line were a twentieth of the tracer's CPU on the H100)
        rest = self.unprinted + held if self.unprinted else held
        for i in range(0, len(rest), CHUNK):
            if print_until is not None and time.monotonic() >= print_until:
                self.not_printed = len(rest) - i
                break
            self.hand_out(rest[i : i + CHUNK])
        phases["held_printed_s"] = round(time.monotonic() - t_stop, 3)
        if self.on_tick is not None:
            self.on_tick(final=True, counted=self.counted_now, pods=self._pods, cache=self._cache_now)

    def finish(self) -> TraceResult:
        """The result: the verdicts' totals, the kernel's counters, the per-file, per-tree and per-pod books."""
        probes, clf = self.probes, self.clf
        timing = self.timing
        timing["end_s"] = round(time.monotonic() - self._t_attached, 3)
        # (cumulative from the signal: tree stopped, queue classified, flushed, held verdicts out)
        timing.update({f"stop_{k}": v for k, v in self._phases.items()})
        # (the processes that mapped libcufile: a file's why names one that never did I/O through it)
        clf.libcufile_pids.update(p for x in probes.libraries if x["kind"] == "libcufile" for p in x["pids"])
        # (waited for only where a file's why needs it: a trace of host I/O alone ends at once)
        node = self._node
        if node is not None:
            if clf.needs_node_facts(any(x["kind"] in ("libcuda", "libcufile") and x["pids"] for x in probes.libraries)):
                clf.node = node.result()
                clf.node_missing = node.missing
            else:
                node.abandon()
        res = result_of(
            clf,
            self.counter,
            self.tally,
            attached=probes.attached,
            failed=probes.failed,
            lost=probes.lost,
            events=self.nevents,
            exit_code=self.exit_code,
            header=self.header,
            timing=timing,
            stopped_by=self.stopped.signum,
            libraries=probes.libraries,
            lost_by_process=probes.lost_by_process(),
            unclassified_at_stop=self.unclassified,
            unclassified_by_process=self.unsent,
            verdicts_not_printed=self.not_printed,
            book=self.book,
            cache=self.cache,
            fills=probes.read_fills(),
        )
        if self.opts.record_file is not None:
            self.opts.record_file.flush()
        return res
