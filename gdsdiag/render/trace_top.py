"""``gdsdiag trace --top``: a live screen of processes x routes x GB/s, redrawn every second (like
``top``), from the verdicts as they come and the kernel's host-I/O counters' growth. Where stdout
is not a terminal (or with --json / --replay) the command prints ``--interval 1`` lines instead."""

from __future__ import annotations

import time

from rich.console import Console
from rich.live import Live
from rich.table import Table
from rich.text import Text

from ..routes import Route
from ..verdicts import style

ROWS = 20  # processes shown, busiest first
_ORDER = {r.value: i for i, r in enumerate(Route)}


class TopScreen:
    """Feed it verdicts (``add``) and call ``tick`` often; every EVERY_S it redraws."""

    def __init__(self, console: Console, every_s: float = 1.0, clock=time.monotonic):
        self.console, self.every, self.clock = console, every_s, clock
        self.start: float | None = None
        self.t0 = clock()
        self.procs: dict[tuple[int, str], dict[str, list[int]]] = {}  # (pid, comm) -> route -> [ios, bytes]
        self._counters: dict[tuple, tuple[int, int]] = {}  # kernel counter -> (count, bytes) last seen
        self.live: Live | None = None
        self.total: dict[str, list[int]] = {}  # the whole trace so far, per route
        self.waiting: list[dict] = []  # the I/Os not decided at the last redraw (trace.result.waiting_rows)

    def add(self, v) -> None:
        if self.start is None:
            self.start = self.clock()
        self._count(v["pid"], v["comm"], v["route"], 1, max(v["size"], 0))

    def _count(self, pid: int, comm: str | None, route: str, n: int, nbytes: int) -> None:
        for acc in (self.procs.setdefault((pid, comm or "?"), {}), self.total):
            a = acc.setdefault(str(route), [0, 0])
            a[0] += n
            a[1] += nbytes

    def add_counted(self, rows: list[dict]) -> None:
        """The kernel's host-I/O counters as they stand (cumulative): their growth counts now."""
        for r in rows:
            key = (r["pid"], r["api"], r["path"], r["size_class"])
            n0, b0 = self._counters.get(key, (0, 0))
            self._counters[key] = (r["count"], r["bytes"])
            if r["count"] > n0:
                self._count(r["pid"], r["comm"], r["route"], r["count"] - n0, max(r["bytes"] - b0, 0))

    def table(self, secs: float) -> Table:
        routes = sorted({r for d in self.procs.values() for r in d} | set(self.total), key=lambda r: _ORDER.get(r, 99))
        t = Table(
            title=f"gdsdiag trace --top  {time.strftime('%H:%M:%S')}  last {secs:.1f} s  (Ctrl-C ends; the summary follows)",
            title_justify="left",
            box=None,
            header_style="bold",
        )
        t.add_column("PROCESS", no_wrap=True)
        t.add_column("I/Os/s", justify="right")
        t.add_column("GB/s", justify="right")
        for r in routes:
            t.add_column(f"{r} GB/s", justify="right", style=style(r))
        busiest = sorted(self.procs.items(), key=lambda kv: -sum(b for _, b in kv[1].values()))
        for (pid, comm), d in busiest[:ROWS]:
            ios = sum(n for n, _ in d.values())
            nbytes = sum(b for _, b in d.values())
            t.add_row(
                f"{comm[:16]}/{pid}",
                f"{ios / secs:,.0f}",
                f"{nbytes / secs / 1e9:.3f}",
                *(f"{d[r][1] / secs / 1e9:.3f}" if r in d else "" for r in routes),
            )
        if len(busiest) > ROWS:
            t.add_row(Text(f"… {len(busiest) - ROWS} more processes", style="dim"))
        if not busiest:
            t.add_row(Text("no I/O in this second", style="dim"))
        tot = Text("since the start: ", style="dim")
        tot.append(
            ", ".join(f"{r} {self.total[r][0]:,} I/Os" for r in sorted(self.total, key=lambda r: _ORDER.get(r, 99)))
            or "no I/O yet",
            style="dim",
        )
        waiting = self.waiting
        if waiting:
            n, b = sum(r["ios"] for r in waiting), sum(r["bytes"] for r in waiting)
            tot.append(
                f"\nwaiting for evidence: {n:,} I/Os, {b / 1e9:.3f} GB (a CUDA copy may still take their bytes: "
                f"decided when their window ends)",
                style="yellow",
            )
        t.caption, t.caption_justify = tot, "left"
        return t

    def tick(self, final: bool = False, counted=None, waiting=None, pods=None, cache=None) -> None:
        """COUNTED: a function giving the kernel's host-I/O counters now; WAITING: one giving the
        I/Os not decided yet (both read only when due)."""
        now = self.clock()
        if self.start is None:
            self.start = now
        if not final and now - self.start < self.every:
            return
        if counted is not None:
            self.add_counted(counted())
        self.waiting = waiting() if waiting is not None and not final else []
        table = self.table(max(now - self.start, 1e-6))
        if self.live is None:
            self.live = Live(table, console=self.console, auto_refresh=False, transient=False)
            self.live.start(refresh=True)
        else:
            self.live.update(table, refresh=True)
        self.procs = {}
        self.start = now
        if final:
            self.live.stop()  # (the last screen stays; the summary prints below it)
