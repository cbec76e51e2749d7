"""Sweep output: live progress (rich), the results table, CSV, and the PNG plot."""

from __future__ import annotations

import csv
import threading
import time

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..extras import install_command
from ..routes import dominant, point_label, point_shares
from ..units import size_text
from ..verdicts import style


def _eta_text(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    seconds = int(seconds + 0.5)
    return (
        f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
        if seconds >= 3600
        else f"{seconds // 60}:{seconds % 60:02d}"
    )


class SweepProgress:
    """Two bars — the whole sweep (points, with its ETA) and the current point (its name, time or
    bytes, GB/s so far) — updated by a poller thread, so the I/O threads only add to a counter.
    The ETA: the points left times the mean wall time of the points done (fill, setup, fio and
    verification included), or the point length plus 1 s before any point has finished."""

    def __init__(self, console: Console, npoints: int, seconds: float | None, total_bytes: int | None):
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        self.p = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            TextColumn("{task.percentage:>3.0f}%"),
            TextColumn("{task.fields[rate]}"),
            TextColumn("{task.fields[eta]}"),
            TimeElapsedColumn(),
            console=console,
            transient=True,
        )
        self.npoints, self.seconds, self.total_bytes = npoints, seconds, total_bytes
        self.done = 0
        self.t0 = time.monotonic()
        self._stop = threading.Event()
        self.overall = self.p.add_task(f"sweep 0/{npoints} points", total=npoints, rate="", eta="ETA ?")
        self.current = self.p.add_task("preparing", total=1, rate="", eta="")
        self.mode = "bytes"
        self.points_started = 0
        self.walls: list[float] = []
        self.point_t0: float | None = None

    def __enter__(self):
        self.p.start()
        self._thr = threading.Thread(target=self._poll, daemon=True)
        self._thr.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thr.join(1)
        self.p.stop()

    def eta(self, now: float) -> float | None:
        """Seconds until the sweep ends, from what the finished points took."""
        if self.point_t0 is None:
            return None
        per = sum(self.walls) / len(self.walls) if self.walls else (self.seconds + 1.0 if self.seconds else None)
        if per is None:
            return None
        left = self.npoints - len(self.walls)
        in_point = now - self.point_t0
        return max(per - in_point, 0.0) + max(left - 1, 0) * per

    def _poll(self):
        while not self._stop.wait(0.25):
            now = time.monotonic()
            el = max(now - self.t0, 1e-6)
            rate = f"{self.done / el / 1e9:.3f} GB/s" if self.done else ""
            if self.mode == "time" and self.seconds:
                self.p.update(self.current, completed=min(el, self.seconds), total=self.seconds, rate=rate)
            else:
                self.p.update(self.current, completed=self.done, rate=rate)
            self.p.update(self.overall, eta="ETA " + _eta_text(self.eta(now)))

    def phase(self, desc: str, total: int):
        self.mode, self.done, self.t0 = "bytes", 0, time.monotonic()
        self.p.update(self.current, description=desc, total=total, completed=0, rate="")

    def point(self, spec):
        now = time.monotonic()
        self.points_started += 1
        self.point_t0 = now
        self.done, self.t0 = 0, now
        desc = _point_name(spec)
        self.p.update(self.overall, description=f"sweep {self.points_started}/{self.npoints} points")
        if self.seconds:
            self.mode = "time"
            self.p.update(self.current, description=desc, total=self.seconds, completed=0, rate="")
        else:
            self.mode = "bytes"
            self.p.update(self.current, description=desc, total=self.total_bytes, completed=0, rate="")

    def done_point(self, rec):
        if self.point_t0 is not None:
            self.walls.append(time.monotonic() - self.point_t0)
        self.p.advance(self.overall)

    def advance(self, n: int):
        self.done += n


def _point_name(spec) -> str:
    return f"{spec.mode} {spec.rw} bs={size_text(spec.bs)} threads={spec.threads}" + (
        f" iodepth={spec.iodepth}" if getattr(spec, "iodepth", 1) > 1 else ""
    )


class LineProgress:
    """Progress where stderr is no terminal (a pipe, a log, CI): one line per finished point —
    its figures, fio's ratio with --compare-fio, the time so far and the ETA — and one when the
    pattern file is written, so a long sweep is never silent until it ends. Same calls as
    SweepProgress."""

    def __init__(self, stream, npoints: int, seconds: float | None, total_bytes: int | None):
        self.stream, self.npoints, self.seconds = stream, npoints, seconds
        self.t0 = time.monotonic()
        self.walls: list[float] = []
        self.point_t0: float | None = None
        self.spec = None
        self.phase_t0: float | None = None
        self.phase_desc = ""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None

    def _say(self, text: str) -> None:
        el = time.monotonic() - self.t0
        self.stream.write(f"gdsdiag sweep [{_eta_text(el)}] {text}\n")
        self.stream.flush()

    def phase(self, desc: str, total: int):
        self.phase_t0, self.phase_desc = time.monotonic(), desc
        self._say(desc)

    def point(self, spec):
        self.spec, self.point_t0 = spec, time.monotonic()

    def done_point(self, rec):
        now = time.monotonic()
        if self.point_t0 is not None:
            self.walls.append(now - self.point_t0)
        n = len(self.walls)
        left = (self.npoints - n) * (sum(self.walls) / n) if n else None
        name = _point_name(self.spec) if self.spec is not None else "?"
        if rec is None or rec.error:
            what = "ERROR" + (f": {rec.error.replace('gdsdiag: error: ', '')}" if rec is not None and rec.error else "")
        else:
            s = rec.summary
            what = f"{s.get('gbps', 0):.3f} GB/s, {s.get('iops', 0):.0f} IOPS, p50 {s.get('lat_us', {}).get('p50')} µs"
            f = rec.fio or {}
            if f.get("error"):
                what += f"; fio n/a: {f['error']}"
            elif f.get("ratio") is not None:
                by = f.get("by_jobs") or {f.get("jobs", "fio"): f}
                what += "; " + ", ".join(
                    f"÷fio {k} {v['ratio']:.2f}{_while_all_ran(v)}" for k, v in by.items() if v.get("ratio") is not None
                )
        self._say(f"point {n}/{self.npoints} {name}: {what} (ETA {_eta_text(left)})")

    def advance(self, n: int):
        pass


def _while_all_ran(f: dict) -> str:
    """The ratio against fio's rate while all its jobs ran, where it reads differently (fio.py)."""
    r = (f.get("all_running") or {}).get("ratio")
    return f" ({r:.2f} while all its jobs ran)" if r is not None and f"{r:.2f}" != f"{f['ratio']:.2f}" else ""


def _escape(s: str) -> str:
    from rich.markup import escape

    return escape(s)  # a directory name is shown, never read as markup


# The table's columns, the first dropped first where the terminal is too narrow for all of them
# (never a number cut: rich would shorten every cell to "2.…"); the ones never dropped lead the list
# of what a row is (mode, rw, bs, threads, GB/s, route, ÷fio).
DROP_ORDER = (
    "p99.9 µs",
    "fio IOPS",
    "CPU %",
    "p50 µs",
    "IOPS",
    "÷ceiling",
    "fio GB/s",
    "verified",
    "p99 µs",
)
LEFT = ("mode", "rw", "route")


def _columns(report) -> list[tuple[str, list]]:
    """Every column as (header, cells), one cell a point."""
    fio = any(p.fio for p in report.points)
    kinds = _fio_kinds(report)
    names = ["mode", "rw", "bs", "thr", "GB/s", "IOPS", "p50 µs", "p99 µs", "p99.9 µs", "CPU %", "route", "verified"]
    names += ["÷ceiling"]
    if fio:
        short = {"process": "proc", "thread": "thr"}
        names += ["fio GB/s", "fio IOPS"] + [f"÷fio {short.get(k, k)}" if len(kinds) > 1 else "÷fio" for k in kinds]
    rows = [_row(p, report, len(names), kinds if fio else None) for p in report.points]
    return [(n, [r[i] for r in rows]) for i, n in enumerate(names)]


def _row(p, report, ncols: int, kinds: list[str] | None) -> list:
    """One point's cells, in _columns' order."""
    head = [p.mode, p.rw, size_text(p.bs), str(p.threads)]
    if p.error:
        return head + [Text("ERROR", style="bold red"), *[""] * 5, Text("ERROR", style="red"), *[""] * (ncols - 11)]
    s, lat = p.summary, p.summary["lat_us"]
    return head + [
        f"{s['gbps']:.3f}",
        f"{s['iops']:.0f}",
        f"{lat['p50']}",
        f"{lat['p99']}",
        f"{lat['p99.9']}",
        f"{p.cpu_percent:.0f}",
        Text(route_label(p.route), style="red" if p.route_warning else style(dominant(point_shares(p.route) or {}))),
        _verified(p, report.config.verify),
        f"{p.ratio:.2f}" if p.ratio is not None else "",
        *(_fio_cells(p, kinds) if kinds is not None else ()),
    ]


def _build(report, cols: list[tuple[str, list]]) -> Table:
    t = Table(
        title=f"gdsdiag sweep — {_escape(str(report.config.directory))} ({size_text(report.config.size)} file)",
        box=box.SIMPLE_HEAD,
    )
    for name, _ in cols:
        t.add_column(name, justify="left" if name in LEFT else "right", no_wrap=True)
    for i in range(len(report.points)):
        t.add_row(*(cells[i] for _, cells in cols))
    return t


def _fits(console: Console, t: Table, width: int) -> bool:
    from rich.measure import Measurement

    return Measurement.get(console, console.options.update(width=10**4), t).maximum <= width


def fitted_table(report, console: Console, width: int | None = None) -> tuple[Table, list[str]]:
    """The table at the terminal's width (WIDTH, else the console's): the columns that are blank
    for every point left out, then those of DROP_ORDER, one at a time, until it fits; the names of
    those dropped for being too wide come back (the caller says so under the table)."""
    width = width or console.width
    cols = [(n, cells) for n, cells in _columns(report) if any(str(c) for c in cells)]
    dropped: list[str] = []
    for name in (None, *DROP_ORDER):
        if name is not None:
            if name not in [n for n, _ in cols]:
                continue
            cols = [(n, c) for n, c in cols if n != name]
            dropped.append(name)
        t = _build(report, cols)
        if _fits(console, t, width):
            break
    return t, dropped


def table(report) -> Table:
    """Every column (no terminal to fit: a capture at any width)."""
    return _build(report, _columns(report))


def route_label(route: dict | None) -> str:
    """A point's route mix as its table cell: "COMPAT", "NVFS 75% COMPAT 25%" ("" for an ERROR point)."""
    return point_label(route) or ""


def _verified(p, verify_on: bool) -> str:
    if not verify_on:
        return "off"
    return size_text(p.verified_bytes) if p.verified_bytes else "none"


def _fio_kinds(report) -> list[str]:
    """fio's job kinds in the table: one ÷fio column per kind (--fio-jobs both: process, thread)."""
    for p in report.points:
        f = p.fio or {}
        if f.get("by_jobs"):
            return list(f["by_jobs"])
        if f.get("jobs"):
            return [f["jobs"]]
    return ["process"]


def _fio_cells(p, kinds: list[str]) -> tuple:
    f = p.fio or {}
    if f.get("error"):
        return ("n/a", "", *([""] * len(kinds)))
    if not f:
        return ("", "", *([""] * len(kinds)))
    by = f.get("by_jobs") or {f.get("jobs", kinds[0]): f}
    ratios = [(by.get(k) or {}).get("ratio") for k in kinds]
    return (f"{f['gbps']:.3f}", f"{f['iops']:.0f}", *(f"{r:.2f}" if r is not None else "" for r in ratios))


def _fio_settings_lines(report) -> list[str]:
    """What the fio runs shared with the points and what they did not: the configured settings
    once per distinct set, the measured ones (the device's requests per I/O) per point."""
    seen: dict[tuple, None] = {}
    measured = []
    for p in report.points:
        st = (p.fio or {}).get("settings")
        if not st:
            continue
        conf = [d for d in st["differ"] if not d["setting"].endswith("(measured)")]
        key = (tuple(st["same"]), tuple((d["setting"], d["sweep"], d["fio"]) for d in conf))
        seen.setdefault(key, None)
        for d in st["differ"]:
            if d["setting"].endswith("(measured)"):
                measured.append(
                    f"fio differs at {p.mode} {p.rw} bs={size_text(p.bs)} threads={p.threads}: "
                    f"{d['setting']}: sweep {d['sweep']}, fio {d['fio']}"
                )
    out = []
    for same, differ in seen:
        line = "fio like for like: " + ", ".join(same)
        if differ:
            line += "; differs: " + "; ".join(f"{s} (sweep: {a}; fio: {b})" for s, a, b in differ)
        out.append(line)
    return out + measured


def render(console: Console, report) -> None:
    t, dropped = fitted_table(report, console)
    console.print(t)
    if dropped:
        console.print(
            f"left out at {console.width} columns: {', '.join(dropped)} (a wider terminal or --json has them)",
            style="dim",
        )
    for p in report.points:
        if p.error:
            console.print(
                Text(
                    f"ERROR {p.mode} {p.rw} bs={size_text(p.bs)} threads={p.threads}: "
                    + p.error.replace("gdsdiag: error: ", ""),
                    style="red",
                )
            )
    fio_notes = sorted({p.fio["error"] for p in report.points if p.fio and p.fio.get("error")})
    for n in fio_notes:
        console.print(Text(f"fio n/a: {n}", style="yellow"))
    for line in _fio_settings_lines(report):
        console.print(line, style="dim")
    py = {p.loop.get("why") for p in report.points if p.loop.get("kind") == "python"}
    for why in sorted(w for w in py if w):
        console.print(Text(f"python loop (Python's per-I/O cost is in these numbers): {why}", style="yellow"))
    c_loops = sorted({p.loop.get("engine") for p in report.points if p.loop.get("kind") == "c"})
    bufs = sorted({p.loop.get("buffers") for p in report.points if p.loop.get("buffers")})
    vsec = sum(p.verify_seconds for p in report.points if not p.error)
    # worker-seconds: verification runs in every worker, so compare with threads × point time
    tsec = sum(p.summary.get("seconds", 0) * p.threads for p in report.points if not p.error)
    line = f"loop: {', '.join(c_loops) or ('python' if py else '-')}" + (
        f" ({', '.join(bufs)} buffers)" if bufs else ""
    )
    if any(p.loop.get("workers") == "process" for p in report.points):
        line += "; workers: a process each (--workers process)"
    if report.config.verify and tsec:
        line += (
            f"; verification: {vsec:.2f} s generating/checking data (write points: reading back) in "
            f"{tsec:.1f} worker-seconds of points ({100 * vsec / tsec:.1f} %, outside each I/O's latency)"
        )
        if any(p.loop.get("check") == "overlapped" for p in report.points):
            line += "; reads of 64 KiB+ one at a time checked while the next is read"
    if report.prepare_seconds:
        line += f"; pattern file written once in {report.prepare_seconds:.1f} s"
    console.print(line, style="dim")
    c = report.ceilings
    if c:
        parts = []
        if "link" in c:
            parts.append(
                f"PCIe link {c['link']['gbps']} GB/s ({c['link']['link']} at {c['link']['at']}, {c['link']['pair']} {c['link']['nvidia_smi']})"
            )
        if "pinned_copy" in c:
            parts.append(f"pinned copy H2D {c['pinned_copy']['h2d']} / D2H {c['pinned_copy']['d2h']} GB/s")
        console.print(
            "ceilings: " + "; ".join(parts) + "; ÷ceiling = GB/s ÷ min(link, pinned copy, host mode)", style="dim"
        )
    for p in report.points:
        if p.route_warning:
            console.print(
                Text(f"{p.mode} {p.rw} bs={size_text(p.bs)} threads={p.threads}: {p.route_warning}", style="red")
            )
    for line in why_lines(report.points):
        console.print(Text(line), soft_wrap=True)  # (one line each: what logs and grep see)


def why_lines(points) -> list[str]:
    """Each point's why (check/why.py), once per mode and answer: the decisive fact on one line,
    the fix on the next (points of a mode mostly share both; --json has every point's chain)."""
    from ..check.why import text_lines

    groups: dict[tuple[str, str, str], int] = {}
    for p in points:
        if p.why_chain or p.fix:
            key = (p.mode, *text_lines(p.why_chain, p.fix))
            groups[key] = groups.get(key, 0) + 1
    out = []
    for (mode, why, fix), n in groups.items():
        out += [f"why {mode} ({n} point{'s' if n > 1 else ''}): {why}", f"fix {mode}: {fix}"]
    return out


CSV_FIELDS = (
    "mode",
    "rw",
    "bs",
    "threads",
    "gbps",
    "iops",
    "p50_us",
    "p90_us",
    "p99_us",
    "p99.9_us",
    "cpu_percent",
    "route",
    "verified_bytes",
    "ratio",
    "error",
    "workers",  # (added last, issue 27: thread or process, --workers)
)


def write_csv(report, f) -> None:
    """The CSV into the text stream ``f`` (the command opens the file: gdsdiag/outfile.py)."""
    w = csv.writer(f)
    w.writerow(CSV_FIELDS)
    for p in report.points:
        s, lat = p.summary, p.summary.get("lat_us", {})
        w.writerow(
            [
                p.mode,
                p.rw,
                p.bs,
                p.threads,
                s.get("gbps"),
                s.get("iops"),
                lat.get("p50"),
                lat.get("p90"),
                lat.get("p99"),
                lat.get("p99.9"),
                p.cpu_percent,
                route_label(p.route),
                p.verified_bytes,
                p.ratio,
                p.error or "",
                getattr(report.config, "workers", "thread"),
            ]
        )


def check_plot() -> None:
    """--plot needs matplotlib: refused before any work (the command calls this after the
    arguments are checked, before the sweep starts)."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        from ..errors import GdsdiagError

        raise GdsdiagError("--plot needs matplotlib", install_command("plot")) from None


def write_plot(report, path) -> None:  # a path, or the file object the command opened
    """Throughput vs block size, read and write panels: one line per mode and thread count swept
    (only the largest count was drawn: a 1- and 4-thread sweep showed its 4-thread line alone,
    issue 46); the GB/s axis starts at 0, so two lines' distance is their ratio."""
    check_plot()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [("read", ("read", "randread")), ("write", ("write", "randwrite"))]
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5), sharey=False)
    for ax, (title, rws) in zip(axes, panels):
        for rw in rws:
            for mode in report.config.modes:
                pts = [p for p in report.points if p.mode == mode and p.rw == rw and not p.error]
                if not pts:
                    continue
                for th in sorted({p.threads for p in pts}):
                    mine = sorted((p for p in pts if p.threads == th), key=lambda p: p.bs)
                    line = "-" if not rw.startswith("rand") else "--"
                    ax.plot(
                        [p.bs for p in mine],
                        [p.summary["gbps"] for p in mine],
                        line,
                        marker="o",
                        label=f"{mode} {rw} ({th} thr) [{route_label(mine[-1].route)}]",
                    )
        ax.set_xscale("log", base=2)
        sizes = sorted(report.config.block_sizes)
        ax.set_xticks(sizes)
        ax.set_xticklabels([size_text(b) for b in sizes])
        ax.set_xlabel("block size")
        ax.set_ylabel("GB/s")
        ax.set_ylim(bottom=0)
        ax.set_title(title)
        ax.grid(True, alpha=0.3)
        if ax.lines:
            ax.legend(fontsize=7)
    c = report.ceilings
    note = []
    if "link" in c:
        note.append(f"PCIe link {c['link']['gbps']} GB/s")
    if "pinned_copy" in c:
        note.append(f"pinned H2D {c['pinned_copy']['h2d']} GB/s")
    fig.suptitle(
        f"gdsdiag sweep {report.config.directory} — {report.machine.get('hostname')} {report.machine.get('date')}"
        + (f" ({'; '.join(note)})" if note else ""),
        fontsize=9,
    )
    fig.tight_layout()
    fig.savefig(path, format="png", dpi=110)  # a path or the file the command opened
    plt.close(fig)
