#!/usr/bin/env python3
"""How fast gdsdiag trace ends: after the traced program exits, and after a signal.

  sudo python3 benchmarks/trace_end.py [--rounds 3] [--tree DIR ...] [--out results.json]

Each --tree is a checkout of gdsdiag (default: this one) run as ``python3 -m gdsdiag`` from it, so
the old code can be measured in the same run (git worktree add /tmp/old 445cc82; --tree /tmp/old
--tree .). Per tree and round it measures, with the compiled program cached (a warm-up run fills
the cache):

- ``true_wall_s``: the whole ``gdsdiag trace -- true`` command, start to exit;
- ``exit_to_summary_s``: the traced program writes CLOCK_MONOTONIC as it exits; the time until the
  summary line reaches our pipe (``--json``), and ``exit_to_exit_s`` until gdsdiag has exited;
- ``start_s``: spawn to the "tracing" line (live), with a --comm filter of a new value each round
  (a filter must not force a compile) and ``cached`` as the summary reports it;
- ``<SIG>_to_summary_s`` for TERM, INT and HUP sent once the trace is live, while the traced program
  is a shell that ignores SIGTERM and has a child (the whole tree must stop), with ``tree_left``:
  processes of that tree still alive after gdsdiag exited; ``double_TERM``: two TERMs 20 ms apart,
  whether the summary still came; ``TERM_under_load``: the same while the traced program does 4 KiB
  page-cache preads as fast as it can with ``--per-io`` (far more events than Python classifies),
  with the events, lost events and those still queued at the stop.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def pythonpath(tree: str) -> str:
    """TREE first, then what the environment had (the GPU machine's kit puts bcc there)."""
    return os.pathsep.join(x for x in (tree, os.environ.get("PYTHONPATH", "")) if x)


def gdsdiag(tree: str) -> list[str]:
    return [sys.executable, "-m", "gdsdiag"]


def spawn(tree: str, args: list[str]) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": pythonpath(tree)}
    return subprocess.Popen(
        [*gdsdiag(tree), "trace", "--json", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=tree,
        start_new_session=True,  # a TERM to us does not reach it; it is not a terminal job either
    )


def wait_live(p: subprocess.Popen, t0: float, timeout: float = 120) -> float:
    """Seconds from t0 until the 'tracing' status line (stderr)."""
    assert p.stderr is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = p.stderr.readline()
        if not line:
            raise RuntimeError("gdsdiag ended before it was live")
        if b"tracing" in line:
            import threading

            threading.Thread(target=p.stderr.read, daemon=True).start()  # (never a full pipe)
            return time.monotonic() - t0
    raise RuntimeError("never live")


def read_summary(p: subprocess.Popen) -> dict:
    """Reads stdout in a thread: out["t"], out["summary"] once the summary line has arrived (the
    stdout pipe may stay open after gdsdiag's exit: the old code leaves the traced tree running)."""
    import threading

    out: dict = {"t": None, "summary": None}

    def reader() -> None:
        assert p.stdout is not None
        for line in p.stdout:
            if b'"type": "summary"' in line:
                out["t"] = time.monotonic()
                out["summary"] = json.loads(line)

    th = threading.Thread(target=reader, daemon=True)
    th.start()
    out["thread"] = th
    return out


def alive_with(marker: str) -> list[int]:
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/cmdline", "rb") as f:
                    if marker.encode() in f.read():
                        out.append(int(d))
            except OSError:
                pass
    return [p for p in out if p != os.getpid()]


def round_true(tree: str) -> dict:
    t0 = time.monotonic()
    r = subprocess.run(
        [*gdsdiag(tree), "trace", "--", "true"],
        capture_output=True,
        env={**os.environ, "PYTHONPATH": pythonpath(tree)},
        cwd=tree,
    )
    return {"true_wall_s": round(time.monotonic() - t0, 3), "rc": r.returncode}


def round_exit(tree: str, comm: str) -> dict:
    with tempfile.NamedTemporaryFile("r", suffix=".t") as f:
        prog = f"import time; time.sleep(0.5); open({f.name!r}, 'w').write(repr(time.monotonic()))"
        t0 = time.monotonic()
        p = spawn(tree, ["--comm", comm, "--", "/usr/bin/python3", "-c", prog])
        start = wait_live(p, t0)
        got = read_summary(p)
        p.wait()
        t_exit = time.monotonic()
        got["thread"].join(5)
        t_sum, summ = got["t"], got["summary"]
        t_prog = float(open(f.name).read() or "nan")
    return {
        "start_s": round(start, 3),
        "cached": (summ or {}).get("startup_s", {}).get("cached"),
        "exit_to_summary_s": round(t_sum - t_prog, 3) if t_sum else None,
        "exit_to_exit_s": round(t_exit - t_prog, 3),
    }


LOAD = "import os, sys; fd = os.open(sys.argv[1], os.O_RDONLY)\nfor i in range(10**10): os.pread(fd, 4096, (i % 1024) * 4096)"


def round_signal(tree: str, sig: int, twice: bool = False, load: str | None = None) -> dict:
    marker = str(3_000_000 + uuid.uuid4().int % 1_000_000)  # the tree's sleeps carry it in their cmdline
    if load:  # 4 KiB preads from the page cache as fast as they go, each sent to Python (--per-io)
        args = ["--per-io", "--", "/usr/bin/python3", "-c", LOAD, load, marker]
    else:  # a shell that ignores TERM, with a child in the background: the trace must stop all three
        args = ["--", "/bin/sh", "-c", f'trap "" TERM; sleep {marker} & sleep {marker}; : {marker}']
    t0 = time.monotonic()
    p = spawn(tree, args)
    wait_live(p, t0)
    time.sleep(3.0 if load else 1.0)  # (the gate is open and the program running)
    t_sig = time.monotonic()
    os.kill(p.pid, sig)
    if twice:
        time.sleep(0.02)
        try:
            os.kill(p.pid, sig)
        except ProcessLookupError:
            pass
    got = read_summary(p)
    try:
        p.wait(60)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
    t_exit = time.monotonic()
    time.sleep(0.2)
    left = alive_with(marker)
    for pid in left:  # (the old code leaves them: clean up after the measurement)
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    got["thread"].join(5)
    t_sum = got["t"]
    name = signal.Signals(sig).name[3:]
    key = f"double_{name}" if twice else f"{name}_under_load" if load else name
    extra = {}
    if load and got["summary"]:
        summ = got["summary"]
        extra = {f"{key}_events": summ["events"], f"{key}_lost": summ["lost_events"]}
        extra[f"{key}_unclassified"] = summ.get("unclassified_at_stop")
        extra[f"{key}_ios_lost_in_kernel"] = summ.get("ios_lost_in_kernel")
        extra[f"{key}_stop_phases"] = {k: v for k, v in summ.get("startup_s", {}).items() if k.startswith("stop_")}
    return {
        f"{key}_to_summary_s": round(t_sum - t_sig, 3) if t_sum else None,
        f"{key}_to_exit_s": round(t_exit - t_sig, 3),
        f"{key}_tree_left": len(left),
        f"{key}_rc": p.returncode,
        **extra,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--tree", action="append", help="a gdsdiag checkout (repeatable; default: this one)")
    ap.add_argument("--out")
    ap.add_argument("--quick", action="store_true", help="trace -- true and the exit only (no signals)")
    ap.add_argument("--load-only", action="store_true", help="TERM under load only (each round)")
    a = ap.parse_args()
    trees = [os.path.abspath(t) for t in (a.tree or [HERE])]
    res: dict = {"machine": os.uname().nodename, "kernel": os.uname().release, "nproc": os.cpu_count(), "trees": {}}
    for tree in trees:
        rev = subprocess.run(["git", "-C", tree, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
        round_true(tree)  # warm-up: fills the compiled-program cache for this tree's program
        rounds = []
        for i in range(a.rounds):
            r = {} if a.load_only else {**round_true(tree), **round_exit(tree, f"bench{uuid.uuid4().hex[:6]}")}
            if a.load_only:
                with tempfile.NamedTemporaryFile(dir="/var/tmp") as data:
                    data.write(os.urandom(4 << 20))
                    data.flush()
                    r.update(round_signal(tree, signal.SIGTERM, load=data.name))
            elif not a.quick:
                for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
                    r.update(round_signal(tree, sig))
                r.update(round_signal(tree, signal.SIGTERM, twice=True))
                with tempfile.NamedTemporaryFile(dir="/var/tmp") as data:
                    data.write(os.urandom(4 << 20))
                    data.flush()
                    r.update(round_signal(tree, signal.SIGTERM, load=data.name))
            rounds.append(r)
            print(json.dumps({"tree": tree, "round": i, **r}), file=sys.stderr, flush=True)
        med = {
            k: round(statistics.median(r[k] for r in rounds), 3)
            for k in rounds[0]
            if all(isinstance(r.get(k), (int, float)) and not isinstance(r.get(k), bool) for r in rounds)
        }
        res["trees"][tree] = {"rev": rev.stdout.strip(), "rounds": rounds, "median": med}
    if len(trees) == 2:
        old, new = (res["trees"][t]["median"] for t in trees)
        res["old_over_new"] = {k: round(old[k] / new[k], 1) for k in new if k in old and new[k] and k.endswith("_s")}
    text = json.dumps(res, indent=1)
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
