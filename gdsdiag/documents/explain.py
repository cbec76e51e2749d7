"""The versioned JSON document of ``gdsdiag explain --json`` (schema in docs/json.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..verdicts import Severity

if TYPE_CHECKING:
    from ..schema import explain as schema

SCHEMA = "gdsdiag.explain/2"  # /2 (issue 23): severity and counts say "fail", /1 said "error"
MAX_UNKNOWN = 500  # a huge unknown file must not make a huge document


def _where(ln) -> schema.Where | None:
    return None if ln is None else {"time": ln.time, "file": ln.file, "line": ln.lineno, "pid": ln.pid}


def _group(g) -> schema.Message:
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


def document(report) -> schema.ExplainDoc:
    unknown: list[schema.Unknown] = [
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
        "files": [
            {
                "path": f.path,
                "kind": f.kind,
                "lines": f.lines,
                "explained": f.explained,
                "unknown": f.unknown,
                "skipped": f.skipped,
            }
            for f in report.files
        ],
        "messages": [_group(g) for g in report.groups],
        "unknown": unknown,
        "unknown_truncated": len(report.unknown) > MAX_UNKNOWN,
        "gdsio_runs": report.gdsio_runs,
        "counts": {
            "fail": _count(report, Severity.FAIL),
            "warn": _count(report, Severity.WARN),
            "info": _count(report, Severity.INFO),
            "unknown": len(report.unknown),
            "unknown_that_matter": len(report.unknown_that_matter),
        },
        "exit_code": report.exit_code,
    }


def _count(report, severity: Severity) -> int:
    return sum(1 for g in report.groups if g.explanation.severity == severity)
