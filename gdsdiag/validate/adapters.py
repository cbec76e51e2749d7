"""The one place validate calls the other parts of gdsdiag (check, topology, sweep, trace).

Each adapter wraps one public entry point and returns plain data, so a change in those parts is
absorbed here and nowhere else in validate.
"""

from __future__ import annotations

import json
import os

from ..errors import GdsdiagError
from ..routes import route_of
from ..selfexec import module_argv


def cufile_modes() -> tuple[str, ...]:
    """The sweep modes whose I/O goes through cuFile (their route is measured, not fixed)."""
    from ..sweep.runner import CUFILE_MODES

    return tuple(CUFILE_MODES)


def check_report(ctx, paths: list[str]):
    """gdsdiag check (gdsdiag.check.runner.run): results, node verdict, per-path verdicts."""
    from ..check.runner import run

    return run(ctx, list(paths))


def topology(root):
    # root: a path or an open FsRoot (live, tree or snapshot archive)
    """gdsdiag topology (load.from_root, pairs.analyse_all, findings.find): (topology, pairs, findings)."""
    from ..topology.findings import find
    from ..topology.load import from_root
    from ..topology.pairs import analyse_all

    topo = from_root(root)
    pairs = analyse_all(topo)
    return topo, pairs, find(topo, pairs)


def sweep_config(directory: str, gpu: int, pts: dict):
    from ..sweep.runner import SweepConfig
    from ..units import parse_size

    return SweepConfig(
        directory=directory,
        size=parse_size(str(pts["size"])),
        block_sizes=[parse_size(str(b)) for b in pts["bs"]],
        threads=list(pts["threads"]),
        rws=list(pts["rw"]),
        modes=list(pts["modes"]),
        gpu=gpu,
        seconds=float(pts["seconds"]),
        total_bytes=None,
        verify=True,
    )


def sweep(directory: str, gpu: int, pts: dict) -> dict:
    """gdsdiag sweep (sweep.runner.run_sweep) in this process: a gdsdiag.sweep/2 document."""
    from ..sweep.runner import run_sweep

    # the rules read it as a plain dict (a point's keys are not typed: schema/sweep.py)
    return dict(run_sweep(sweep_config(directory, gpu, pts)).to_json())


def trace_available() -> str | None:
    """None when gdsdiag trace can attach here, else why not."""
    if os.geteuid() != 0:
        return "gdsdiag trace needs root"
    try:
        from ..trace.probes.bpf import preflight

        preflight()
    except GdsdiagError as e:  # no root, no tracefs: the reason is the message
        return e.cause
    return None


def trace_summary_of(result) -> dict:
    """{Route value: {"count", "bytes"}} from a trace result's summary (keyed by Route values:
    trace/model/tally.ROUTES)."""
    out: dict = {}
    for label, s in result.summary.items():
        r = route_of(label)
        cur = out.setdefault(r.value, {"count": 0, "bytes": 0})
        cur["count"] += s.get("count", 0)
        cur["bytes"] += s.get("bytes", 0)
    return out


def traced_sweep(directory: str, gpu: int, pts: dict) -> tuple[dict, dict]:
    """The sweep run as 'gdsdiag sweep --json' under gdsdiag trace (trace.live.run_live): the sweep
    document and the per-I/O route totals the tracer saw."""
    from .. import workdirs
    from ..trace.live import run_live

    workdirs.remove_stale("gdsdiag-validate-sweep-")  # what a killed validate left
    with workdirs.WorkDir("gdsdiag-validate-sweep-") as work:
        out = os.path.join(work, "sweep.json")
        args = [
            # (the running gdsdiag, never a gdsdiag/ package in the current directory: selfexec)
            *module_argv("gdsdiag"),
            "sweep",
            "--dir",
            directory,
            "--size",
            str(pts["size"]),
            "--bs",
            ",".join(str(b) for b in pts["bs"]),
            "--threads",
            ",".join(str(t) for t in pts["threads"]),
            "--rw",
            ",".join(pts["rw"]),
            "--mode",
            ",".join(pts["modes"]),
            "--gpu",
            str(gpu),
            "--time",
            f"{pts['seconds']}s",
            "--json",
        ]
        # exec keeps the pid the tracer registered; the document lands in our temporary file
        cmd = ["/bin/sh", "-c", f'exec "$@" > {out}', "gdsdiag-validate", *args]
        res = run_live(cmd, None, None, directory, None, lambda v: None)
        with open(out, encoding="utf-8") as f:
            text = f.read()
    from ..errors import GdsdiagError

    try:
        doc = json.loads(text)
    except ValueError:
        raise GdsdiagError(
            f"the traced sweep wrote no JSON (exit {res.exit_code})",
            "run the same 'gdsdiag sweep' by hand to see its error",
        ) from None
    return doc, trace_summary_of(res)


def trace_replay(path: str, path_filter: str | None = None) -> dict:
    """A recorded trace (gdsdiag trace --record) re-analysed (trace.live.replay)."""
    from ..trace.live import replay

    return trace_summary_of(replay(path, path_filter, lambda v: None))


def trace_window(seconds: float, path_filter: str | None, on_verdict) -> int | None:
    """Trace every process for ``seconds`` (trace.live.run_live), feeding each verdict to on_verdict.
    The signal (INT/TERM/HUP) that ended the window early, if one did: the caller stops for it."""
    from ..trace.live import run_live

    new_window = getattr(on_verdict, "new_window", None)
    if new_window is not None:
        new_window()  # (pids read again: one may now be another pod's process)
    res = run_live(None, None, seconds, path_filter, None, on_verdict)
    add = getattr(on_verdict, "add_counted", None)
    if add is not None:
        for row in res.counted:  # host I/O the kernel counted (no per-I/O verdict)
            add(row)
    add_cache = getattr(on_verdict, "add_page_cache", None)
    if add_cache is not None:
        for pid, (read, filled) in res.page_cache_by_pid.items():  # (each pod's page-cache hit share)
            add_cache(pid, read, filled)
    return getattr(res, "stopped_by", None)
