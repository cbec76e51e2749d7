"""The worker process of ``--workers process`` (``python -m gdsdiag.sweep.worker_process``): one
worker of one point, set up as one fio job is (its own cuFile driver, handle, buffers and slice),
started and stopped by its sweep over a pipe, its results handed back as one JSON line. The
protocol and why it is a fresh process: gdsdiag/sweep/engines/processes.py (the sweep's side)."""

from __future__ import annotations

import base64
import json
import os
import signal
import sys
import threading
import time

from ..errors import GdsdiagError
from .engines.base import RESULT_FIELDS, PointSpec
from .engines.processes import PROGRESS_S


class InheritedFile:
    """The sweep's open file as a worker process sees it: the descriptor its parent passed down."""

    def __init__(self, fd: int, size: int, seed: int, path: str, ident: tuple[int, int]):
        self.fd, self.size, self.seed, self.path, self.ident = fd, size, seed, path, ident

    def check_same(self) -> None:
        st = os.fstat(self.fd)
        if (st.st_dev, st.st_ino) != self.ident:
            raise GdsdiagError(f"{self.path}'s descriptor changed identity", "this is a bug; report it")

    @property
    def proc_path(self) -> str:
        return f"/proc/{os.getpid()}/fd/{self.fd}"


def _die_with_parent() -> None:
    """PR_SET_PDEATHSIG SIGKILL: a worker whose sweep was killed (SIGKILL) goes with it."""
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass  # then the closed pipe stops it after its current I/O


def child_main() -> int:
    ppid = os.getppid()
    _die_with_parent()
    if os.getppid() != ppid:  # the parent died before the line above
        return 1
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent stops us through the pipe
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # what a library prints goes to stderr, never into the reports
    lock = threading.Lock()

    def send(msg: dict) -> None:
        with lock:
            proto.write(json.dumps(msg) + "\n")
            proto.flush()

    line = sys.stdin.readline()
    if not line:
        return 1
    msg = json.loads(line)
    from .engines import engine
    from .engines.base import Point

    spec = PointSpec(**msg["spec"])
    eng = engine(spec.mode)
    sf = InheritedFile(msg["fd"], msg["size"], msg["seed"], msg["path"], tuple(msg["ident"]))
    driver = point = w = route0 = None
    setup_error: str | None = None
    run_error: str | None = None
    opened = False
    try:
        sf.check_same()
        if eng.cufile:
            from .engines.cufile import open_driver

            driver = open_driver(probe=False)  # the sweep probed it before its first point
        route0 = eng.route_start()
        point = Point(spec, sf)  # type: ignore[arg-type]  # (the SweepFile attributes a worker reads)
        eng.open_point(point)
        opened = True
        w = eng.worker(point, msg["idx"])
        w.prepare()
        w.warmup()
    except GdsdiagError as e:
        setup_error = e.cause
    except Exception as e:  # a cuFile or CUDA error during setup: keep its name
        setup_error = f"{type(e).__name__}: {e}"
    send({"ready": setup_error is None, "setup_error": setup_error})
    go = json.loads(sys.stdin.readline() or "{}")
    cpu = 0.0
    if "go" in go and setup_error is None and w is not None and point is not None:
        w.job.deadline_ns = int(go["go"])
        stop, job = point.stop, w.job
        done = threading.Event()

        def watch_stdin() -> None:  # "stop", or the parent gone (end of file)
            for _ in iter(sys.stdin.readline, ""):
                break
            stop[0] = 1

        def report() -> None:
            while not done.wait(PROGRESS_S):
                send({"progress": int(job.bytes), "last_done_ns": int(job.last_done_ns)})

        threading.Thread(target=watch_stdin, daemon=True).start()
        reporter = threading.Thread(target=report, daemon=True)
        reporter.start()
        cpu0 = time.process_time()
        try:
            w.run()
        except GdsdiagError as e:
            run_error = e.cause
        except Exception as e:  # the worker's failure of any kind ends its point as an ERROR, named
            run_error = f"{type(e).__name__}: {e}"
        cpu = time.process_time() - cpu0
        done.set()
        reporter.join()
    elif setup_error is None:
        setup_error = "not started: " + str(go.get("abort", "the sweep stopped before the point started"))
    result: dict = {"setup_error": setup_error, "run_error": run_error, "cpu_seconds": cpu}
    if w is not None:
        try:
            w.close()
        except Exception as e:  # (the same for its cleanup: the point's error names it)
            result["run_error"] = result["run_error"] or f"cleanup: {type(e).__name__}: {e}"
        j = w.job
        result["job"] = {k: int(getattr(j, k)) for k in RESULT_FIELDS}
        result["hist"] = {str(i): int(v) for i, v in enumerate(w.hist) if v}
        result["loop_name"] = w.loop_name
        result["loop_extra"] = getattr(w, "loop_extra", {})
    if point is not None:
        if point.written is not None:
            result["written"] = base64.b64encode(point.written.tobytes()).decode()
        result["why"] = point.why
        if opened:
            try:
                eng.close_point(point)
            except Exception as e:  # noqa: BLE001 (its cleanup: named in the point's error)
                result["run_error"] = result["run_error"] or f"cleanup: {type(e).__name__}: {e}"
    try:
        result["route"] = eng.route_end(route0).to_json()
    except Exception:  # the route is evidence, never a reason to lose the figures
        result["route"] = None
    if driver is not None:
        driver.close()
    send({"result": result})
    proto.close()
    # everything it set up is released above; the interpreter's own teardown (CUDA, cupy) would
    # only delay the next point
    os._exit(0)


if __name__ == "__main__":
    sys.exit(child_main())
