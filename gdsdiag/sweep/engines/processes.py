"""``--workers process``: each worker of a point in its own process, as fio runs its jobs by default.

Why a fresh process (fork + exec of ``python -m gdsdiag.sweep.worker_process``, the child's side), never a bare
fork: before the first point the sweep's own process has initialised CUDA (the pinned-copy ceiling,
cupy) and a forked child of a CUDA process cannot use CUDA. Each child is a new program that sets
itself up as one fio job does: its own cuFile driver (level-3 statistics, libcufile's own compat
bounce pool), its own file handle registered on the sweep's open file (the descriptor is passed
down, the file is never reopened by path), its own buffers and CUDA context, and worker ``idx``'s
slice of the file — the same ``Worker`` the thread workers run, in the same C loop.

One point's protocol, one JSON document a line (the child's stdout is moved to a private
descriptor first, so nothing a library prints can corrupt it):

- parent → child: the point (spec, worker index, descriptor, file identity and seed);
- child → parent: ``{"ready": …, "setup_error": …}`` once set up and warmed up (untimed);
- parent → child: ``{"go": deadline_ns}`` when every child is ready (the point's clock starts:
  CLOCK_MONOTONIC is one clock for every process), or ``{"abort": why}``;
- child → parent: ``{"progress": bytes, "last_done_ns": …}`` four times a second while it runs;
- parent → child: ``{"stop": true}`` (or end of file: the parent is gone) ends the loop after
  its current I/O;
- child → parent: ``{"result": …}`` — the loop's counters (struct gd_job), its latency histogram,
  its written-blocks bitmap, errors, CPU seconds and the route its own cuFile counters saw.

No worker outlives its point: children ignore SIGINT (the parent, which gets Ctrl-C too, stops
them through the pipe, then kills what did not stop in 10 s), die with the parent (PR_SET_PDEATHSIG
SIGKILL) and stop when their stdin closes; a child stuck in one I/O past the grace is killed (its
point is an error that says so). The parent merges the results exactly as it merges its threads'
(base._collect, base.judge).
"""

from __future__ import annotations

import base64
import json
import os
import queue
import subprocess
import threading
import time
from types import SimpleNamespace
from typing import Any

from ...routes import Route, RouteMix
from ...selfexec import module_argv
from ...units import size_text
from .base import RESULT_FIELDS, SETUP_TIMEOUT_S, PointError, PointResult, PointSpec, RouteSeen

STOP_WAIT_S = 10.0  # a stopped child ends its current I/O and reports; then it is killed
PROGRESS_S = 0.25


# --- the parent's side -----------------------------------------------------------------------------


class _Child:
    """One worker process and the reader of its reports."""

    def __init__(self, spec: PointSpec, sf, idx: int):
        import gdsdiag

        self.idx = idx
        root = os.path.dirname(os.path.dirname(os.path.abspath(gdsdiag.__file__)))
        env = dict(os.environ)
        env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        self.proc = subprocess.Popen(
            module_argv("gdsdiag.sweep.worker_process"),  # gdsdiag/selfexec.py: never the cwd's package
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            pass_fds=(sf.fd,),
            env=env,
            text=True,
            bufsize=1,
        )
        self.msgs: queue.Queue = queue.Queue()
        self.bytes = 0
        self.last_done_ns = 0
        self.result: dict | None = None
        self.gone = False  # its stdout ended
        threading.Thread(target=self._read, daemon=True, name=f"gdsdiag-sweep-proc-{idx}").start()
        self.send(
            {
                "spec": spec.__dict__,
                "idx": idx,
                "fd": sf.fd,
                "size": sf.size,
                "seed": sf.seed,
                "path": sf.path,
                "ident": list(sf.ident),
            }
        )

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                self.msgs.put(json.loads(line))
            except ValueError:
                continue  # not a report (nothing else should reach this descriptor)
        self.msgs.put(None)

    def send(self, msg: dict) -> None:
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write(json.dumps(msg) + "\n")
            self.proc.stdin.flush()
        except (OSError, ValueError):
            pass  # it is gone: its missing report says so

    def close_stdin(self) -> None:
        try:
            if self.proc.stdin is not None:
                self.proc.stdin.close()
        except OSError:
            pass

    def next(self, timeout: float) -> dict | None:
        """The next report (progress folded in), None at the end of its output; raises queue.Empty."""
        while True:
            m = self.msgs.get(timeout=timeout)
            if m is None:
                self.gone = True
                return None
            if "progress" in m:
                self.bytes, self.last_done_ns = int(m["progress"]), int(m["last_done_ns"])
                if timeout:
                    continue
            return m

    def drain(self) -> None:
        """Take every report waiting, keeping the latest progress and the result."""
        while not self.gone and self.result is None:
            try:
                m = self.next(0)
            except queue.Empty:
                return
            if m is not None and "result" in m:
                self.result = m["result"]

    def exit_note(self) -> str:
        rc = self.proc.poll()
        if rc is None:
            return "it stopped reporting"
        return f"its process exited with {'signal ' + str(-rc) if rc < 0 else 'status ' + str(rc)}"

    def kill(self) -> None:
        if self.proc.poll() is None:
            try:
                self.proc.kill()  # our own child, by its id
            except ProcessLookupError:
                pass
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            pass


def run_processes(engine, spec: PointSpec, sf, progress=None) -> PointResult:
    """Set up, start together, watch, collect and judge one point whose workers are processes."""
    from .base import _collect, judge

    sf.check_same()
    children: list[_Child] = []
    try:
        for i in range(spec.threads):
            children.append(_Child(spec, sf, i))
        setup = _wait_ready(children)
        failed = [(c.idx, e) for c, e in zip(children, setup) if e]
        if failed:
            for c in children:
                c.send({"abort": f"worker {failed[0][0]} failed its setup"})
        else:
            t0 = time.monotonic_ns()
            deadline = t0 + int(spec.seconds * 1e9) if spec.seconds else 0
            for c in children:
                c.send({"go": deadline})
        if failed:
            t0 = 0
        stuck = _watch(children, spec, t0, progress)
    except BaseException:
        for c in children:  # Ctrl-C, SIGTERM: the loops return after their current I/O
            c.send({"stop": True})
            c.close_stdin()
        end = time.monotonic() + STOP_WAIT_S
        for c in children:
            try:
                c.proc.wait(max(end - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                pass
        raise
    finally:
        end = time.monotonic() + STOP_WAIT_S
        for c in children:
            c.close_stdin()  # (end of file: a child still running stops after its current I/O)
            try:
                c.proc.wait(max(end - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                pass
            c.kill()  # what has not exited by now never will on its own
    if failed:
        idx, why = failed[0]
        raise PointError(
            f"{spec.mode} {spec.rw} bs={size_text(spec.bs)} threads={spec.threads}: worker {idx} did not run: {why}",
            "for cuFile errors run `gdsdiag check --path DIR`; the cause is named above",
        )
    if stuck:
        from .base import _stall_fix

        raise PointError(f"{spec.mode} {spec.rw} bs={size_text(spec.bs)}: " + "; ".join(stuck), _stall_fix(spec))
    point, workers, cpu = _remote(spec, sf, children, t0)
    res = _collect(point, workers, cpu)
    res.loop["workers"] = "process"
    if "cufile_handles" in res.loop:  # each process registered its own: one per worker, as fio's jobs
        res.loop["cufile_handles"] = "one per worker process"
    res.route = merge_routes([w.route for w in workers])
    judge(spec, res, workers, sf.size)
    return res


def _wait_ready(children: list[_Child]) -> list[str | None]:
    """Each child's setup error (None: ready), once all have answered or SETUP_TIMEOUT_S passed."""
    end = time.monotonic() + SETUP_TIMEOUT_S
    out: list[str | None] = []
    for c in children:
        try:
            m = c.next(max(end - time.monotonic(), 0.01))
        except queue.Empty:
            out.append(f"its setup did not finish in {SETUP_TIMEOUT_S:.0f} s")
            continue
        if m is None:
            try:
                c.proc.wait(5)
            except subprocess.TimeoutExpired:
                pass
            out.append(f"the worker process ended during its setup ({c.exit_note()})")
        else:
            out.append(m.get("setup_error"))
    return out


def _watch(children: list[_Child], spec: PointSpec, t0: int, progress) -> list[str]:
    """Wait for every result, feeding progress; past the deadline plus a grace, stop them, and
    kill and name any still stuck inside one I/O."""
    grace_ns = int(max(10.0, 2 * (spec.seconds or 0)) * 1e9)
    last_bytes = 0
    quiet_since = time.monotonic_ns()
    stop_at = None
    deadline = t0 + int(spec.seconds * 1e9) if spec.seconds and t0 else 0
    while True:
        for c in children:
            c.drain()
        if all(c.result is not None or c.gone for c in children):
            break
        time.sleep(0.05)
        now = time.monotonic_ns()
        total = sum(c.bytes for c in children)
        if total != last_bytes:
            if progress:
                progress(total - last_bytes)
            quiet_since, last_bytes = now, total
        late = (deadline and now > deadline + grace_ns) or (
            not deadline and now - quiet_since > max(grace_ns, 60_000_000_000)
        )
        if late and stop_at is None:
            for c in children:
                c.send({"stop": True})
            stop_at = now
        if stop_at is not None and now - stop_at > 5_000_000_000:
            out = []
            for c in children:
                if c.result is None and not c.gone:
                    since = (now - c.last_done_ns) / 1e9 if c.last_done_ns else (now - t0) / 1e9
                    out.append(f"worker {c.idx} stuck in one I/O: no completion for {since:.1f} s (its process killed)")
                    c.kill()
            if out:
                return out
    total = sum(int((c.result.get("job") or {}).get("bytes", c.bytes)) if c.result else c.bytes for c in children)
    if progress and total != last_bytes:
        progress(total - last_bytes)
    return []


def _remote(spec: PointSpec, sf, children: list[_Child], t0: int):
    """The children's results as the point and workers base._collect and base.judge read."""
    import numpy as np

    written = None
    if not spec.is_read and spec.verify:
        written = np.zeros((sf.size // spec.bs + 7) // 8, dtype=np.uint8)
    point = SimpleNamespace(spec=spec, t0_ns=t0, written=written, why=None)
    workers = []
    cpu = 0.0
    for c in children:
        r = c.result
        if r is None:  # it ended without a result: an error of this point, named
            r = {"run_error": f"the worker process ended without a result ({c.exit_note()})"}
        job = dict.fromkeys(RESULT_FIELDS, 0)
        job.update(r.get("job") or {})
        job["seed"] = sf.seed
        hist = np.zeros(4096, dtype=np.uint64)
        for k, v in (r.get("hist") or {}).items():
            hist[int(k)] = int(v)
        if written is not None and r.get("written"):
            written |= np.frombuffer(base64.b64decode(r["written"]), dtype=np.uint8)
        if r.get("why"):
            point.why = r["why"]
        w = SimpleNamespace(
            idx=c.idx,
            job=SimpleNamespace(**job),
            hist=hist,
            setup_error=r.get("setup_error"),
            run_error=r.get("run_error"),
            loop_name=r.get("loop_name", "python"),
            loop_extra=r.get("loop_extra") or {},
            route=RouteSeen.from_json(r["route"]) if r.get("route") else RouteSeen({}, {}, None),
        )
        workers.append(w)
        cpu += float(r.get("cpu_seconds", 0.0))
    return point, workers, cpu


def merge_routes(seen: list[RouteSeen]) -> RouteSeen:
    """One point's route from its processes' own counters: the mixes summed; where nothing was
    counted, the route the processes agree on (UNKNOWN when they do not)."""
    warning = next((s.warning for s in seen if s.warning), None)
    detail = _sum_leaves([s.detail for s in seen])
    mix: RouteMix = {}
    for s in seen:
        for r, n in s.mix.items():
            mix[r] = mix.get(r, 0) + int(n)
    uncounted = {s.uncounted for s in seen}
    return RouteSeen(mix, detail, warning, uncounted.pop() if len(uncounted) == 1 else Route.UNKNOWN)


def _sum_leaves(docs: list) -> Any:
    """Counters of several processes as one: numbers summed, dicts key by key, lists item by item;
    anything else (a GPU's UUID) kept when all agree."""
    docs = [d for d in docs if d is not None]
    if not docs:
        return None
    first = docs[0]
    if all(isinstance(d, dict) for d in docs):
        keys: list = []
        for d in docs:
            keys += [k for k in d if k not in keys]
        return {k: _sum_leaves([d.get(k) for d in docs]) for k in keys}
    if all(isinstance(d, list) for d in docs) and len({len(d) for d in docs}) == 1:
        return [_sum_leaves(list(items)) for items in zip(*docs)]
    if all(isinstance(d, (int, float)) and not isinstance(d, bool) for d in docs):
        total = sum(docs)
        return round(total, 6) if isinstance(total, float) else total
    return first if all(d == first for d in docs) else None
