"""The versioned JSON document of ``gdsdiag explain --json`` (schema in docs/json.md)."""

from __future__ import annotations

from ..errors import EXIT_FAIL, EXIT_OK, EXIT_WARN

SCHEMA = "gdsdiag.explain/1"
MAX_UNKNOWN = 500  # a huge unknown file must not make a huge document


def exit_code(report) -> int:
    worst = report.worst()
    if worst == "error":
        return EXIT_FAIL
    if worst == "warn" or report.unknown_that_matter:
        return EXIT_WARN
    return EXIT_OK


def _where(ln) -> dict | None:
    return None if ln is None else {"time": ln.time, "file": ln.file, "line": ln.lineno, "pid": ln.pid}


def _group(g) -> dict:
    ex = g.explanation
    return {
        "id": ex.id,
        "severity": ex.severity,
        "title": ex.title,
        "kind": g.kind,
        "level": g.level,
        "component": g.component,
        "message": g.message,
        "count": g.count,
        "pids": sorted(g.pids),
        "first": _where(g.first),
        "last": _where(g.last),
        "files": g.files,
        "meaning": ex.meaning,
        "cause": ex.cause,
        "fix": ex.fix,
        "sources": ex.sources,
        "code": ex.code,
        "fields": ex.fields,
    }


def document(report) -> dict:
    unknown = [
        {
            "file": ln.file,
            "line": ln.lineno,
            "kind": ln.kind,
            "level": ln.level,
            "text": ln.text,
            "matters": ln in report.unknown_that_matter,
        }
        for ln in report.unknown[:MAX_UNKNOWN]
    ]
    return {
        "schema": SCHEMA,
        "files": [f.__dict__.copy() for f in report.files],
        "messages": [_group(g) for g in report.groups],
        "unknown": unknown,
        "unknown_truncated": len(report.unknown) > MAX_UNKNOWN,
        "gdsio_runs": report.gdsio_runs,
        "counts": {
            **{s: sum(1 for g in report.groups if g.explanation.severity == s) for s in ("error", "warn", "info")},
            "unknown": len(report.unknown),
            "unknown_that_matter": len(report.unknown_that_matter),
        },
        "exit_code": exit_code(report),
    }
