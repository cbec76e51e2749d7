"""``gdsdiag trace --top``: the live screen's figures (processes x routes x GB/s per second, the
kernel's counted host I/O by its growth), and the --interval 1 lines where stdout is no terminal."""

import io
import os
import subprocess
import sys

from rich.console import Console

from gdsdiag.render.trace_top import TopScreen

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def _v(pid, comm, route, size):
    return {"pid": pid, "comm": comm, "route": route, "size": size, "latency_ns": 1000, "path": "/d/f", "ts": 0}


def test_the_screen_shows_each_process_per_route_per_second():
    now = [100.0]
    out = io.StringIO()
    con = Console(file=out, force_terminal=True, width=160, color_system=None)
    s = TopScreen(con, clock=lambda: now[0])
    s.tick()  # (starts the second)
    for _ in range(4):
        s.add(_v(7, "loader", "DRAM_BOUNCE", 250_000_000))  # 1 GB in the second
    s.add(_v(9, "cat", "HOST", 500_000_000))
    s.tick()  # not due yet: nothing drawn
    assert s.live is None
    now[0] += 1.0
    # the kernel's counters: 3 I/Os, 3 GB so far for pid 9, then 1 more I/O of 1 GB
    row = {"pid": 9, "comm": "cat", "api": "read", "path": "/d/f", "size_class": "1 GiB-2 GiB", "route": "HOST"}
    s.tick(counted=lambda: [{**row, "count": 3, "bytes": 3_000_000_000}])
    text = out.getvalue()
    assert "loader/7" in text and "cat/9" in text
    assert "1.000" in text  # loader: 1 GB/s DRAM_BOUNCE
    assert "3.500" in text  # cat: 0.5 GB/s per I/O + 3 GB counted in the kernel
    now[0] += 1.0
    s.tick(final=True, counted=lambda: [{**row, "count": 4, "bytes": 4_000_000_000}])
    assert s.total["HOST"] == [5, 4_500_000_000] and s.total["DRAM_BOUNCE"] == [4, 1_000_000_000]
    assert s.live is not None and not s.live.is_started


def test_not_a_terminal_gives_interval_lines():
    rec = os.path.join(HERE, "fixtures", "trace", "trace-h200-cufile.jsonl.gz")
    r = subprocess.run(
        [sys.executable, "-m", "gdsdiag", "trace", "--replay", rec, "--top"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": ROOT},
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert "last 1.0 s" in r.stdout or "last " in r.stdout
    assert "COMPAT" in r.stdout
    r = subprocess.run(
        [sys.executable, "-m", "gdsdiag", "trace", "--replay", rec, "--top", "--interval", "2"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": ROOT},
        timeout=120,
    )
    assert r.returncode != 0 and "--top with --interval" in (r.stdout + r.stderr)


def test_the_screen_says_what_is_waiting_for_evidence():
    """Reads a CUDA copy may still take are not HOST yet (their window): the screen says how many
    wait, instead of a HOST column that looks like "no host I/O"; the last screen (the trace ended,
    everything decided) says nothing of them."""
    now = [100.0]
    out = io.StringIO()
    con = Console(file=out, force_terminal=True, width=200, color_system=None)
    s = TopScreen(con, clock=lambda: now[0])
    s.tick()
    now[0] += 1.0
    s.tick(waiting=lambda: [{"pid": 5, "comm": "worker", "ios": 1200, "bytes": 2_400_000_000}])
    assert "waiting for evidence: 1,200 I/Os, 2.400 GB" in " ".join(out.getvalue().split())  # (wrapped)
    now[0] += 1.0
    s.tick(final=True, waiting=lambda: [{"pid": 5, "comm": "worker", "ios": 7, "bytes": 7}])
    assert "7 I/Os" not in " ".join(out.getvalue().split())
