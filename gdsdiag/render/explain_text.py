"""Text of ``gdsdiag explain``: errors and warnings in full (what, cause, fix, sources), the
informational lines one per kind, unknown lines counted (listed with --verbose). Plain lines, never
wrapped, so a fix can be copied from a pipe or a ticket."""

from __future__ import annotations

from ..explain.catalog import KINDS
from ..verdicts import Severity

# the words of the text (an explained line of severity fail is an error message of its log)
_LABEL = {Severity.FAIL: "ERROR", Severity.WARN: "WARN ", Severity.INFO: "info "}

UNKNOWN_SHOWN = 20  # unknown lines named without --verbose


def _span(g) -> str:
    if g.first is None or not g.first.time:
        return ""
    if g.first is g.last or g.first.time == g.last.time:
        return f"  at {g.first.time}"
    return f"  {g.first.time} .. {g.last.time}"


def _pids(g) -> str:
    if not g.pids:
        return ""
    pids = sorted(g.pids)
    shown = " ".join(map(str, pids[:6])) + (" ..." if len(pids) > 6 else "")
    return f"  {len(pids)} pid{'s' if len(pids) > 1 else ''} ({shown})"


# what to do when the content did not say which tool wrote it
_UNRECOGNISED = f"unrecognised text (say which tool wrote it: --kind {' | '.join(KINDS)})"


def lines(report, verbose: bool = False) -> list[str]:
    out: list[str] = []
    for f in report.files:
        out.append(
            f"{f.path}: {f.kind or _UNRECOGNISED}, {f.explained} lines explained, "
            f"{f.unknown} unknown, {f.skipped} blank/structural"
        )
    out.append("")
    infos = []
    for g in report.groups:
        ex = g.explanation
        if ex.severity == Severity.INFO and not verbose:
            infos.append(g)
            continue
        where = f"{g.component}: " if g.component else ""
        out.append(f"{_LABEL[ex.severity]} x{g.count}{_pids(g)}{_span(g)}")
        out.append(f"  {where}{g.message}")
        out.append(
            f"  = {ex.title}"
            + (f" [{ex.code['name']} {ex.code['code']}]" if ex.code and ex.code["name"] not in ex.title else "")
        )
        out.append(f"  what:  {ex.meaning}")
        if ex.cause and ex.cause != "—":
            out.append(f"  cause: {ex.cause}")
        if ex.fix and ex.fix != "—":
            out.append(f"  fix:   {ex.fix}")
        if ex.fields.get("cuda_error"):
            out.append(f"  CUDA:  {ex.fields['cuda_error']}")
        out.append(f"  see:   {' ; '.join(ex.sources)}")
        out.append("")
    if infos:
        out.append("Informational (--verbose explains each):")
        for g in infos:
            out.append(f'  x{g.count:<4} {g.explanation.title}  e.g. "{g.message[:100]}"')
        out.append("")
    if report.gdsio_runs:
        out.append(
            "gdsio runs (XferType is the transfer asked for: a GPUD run that fell back to compat mode still says GPUD):"
        )
        out.append(
            f"  {'where':<28} {'IoType':<10} {'XferType':<15} {'thr':>3} {'IOSize':>9} {'GiB/s':>9} {'lat us':>11}"
        )
        for r in report.gdsio_runs:
            where = f"{r['file'].rsplit('/', 1)[-1][:22]}:{r['line']}"
            size = f"{r['io_size_kib'] // 1024}M" if r["io_size_kib"] >= 1024 else f"{r['io_size_kib']}K"
            out.append(
                f"  {where:<28} {r['io']:<10} {r['xfer']:<15} {r['threads']:>3} {size:>9} {r['gib_per_s']:>9.3f} "
                f"{r['avg_latency_us']:>11.1f}"
            )
        out.append("")
    if report.unknown:
        # every line not understood is named with its line number (issue 47), never only counted:
        # without --verbose the first UNKNOWN_SHOWN, error/warning lines among them first
        n_matter = len(report.unknown_that_matter)
        matter = set(map(id, report.unknown_that_matter))
        if verbose:
            shown = report.unknown[:200]
        else:
            ordered = report.unknown_that_matter + [ln for ln in report.unknown if id(ln) not in matter]
            shown = sorted(ordered[:UNKNOWN_SHOWN], key=lambda ln: (ln.file, ln.lineno))
        more = len(report.unknown) - len(shown)
        out.append(
            f"{len(report.unknown)} line(s) not in the known-messages table"
            + (f", {n_matter} of them error/warning lines" if n_matter else "")
            + (f" (the first {len(shown)} below; --verbose lists up to 200, --json up to 500)" if more > 0 else "")
            + ":"
        )
        for ln in shown:
            out.append(f"  {ln.file}:{ln.lineno}: {ln.raw.strip()}")
    errors = sum(1 for g in report.groups if g.explanation.severity == Severity.FAIL)
    warns = sum(1 for g in report.groups if g.explanation.severity == Severity.WARN)
    out.append(f"Summary: {errors} error and {warns} warning message(s) explained.")
    return out
