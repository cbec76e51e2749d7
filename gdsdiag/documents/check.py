"""The versioned JSON document of ``gdsdiag check --json`` (schema in docs/json.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..schema import check as schema

SCHEMA = "gdsdiag.check/1"


def document(report) -> schema.CheckDoc:
    doc: schema.CheckDoc = {
        "schema": SCHEMA,
        "source": report.source,
        "verdict": report.verdict.to_json(),
        "paths": [p.to_json() for p in report.paths],
        "mounts": [m.to_json() for m in report.mounts],
        "objects": {"source": report.endpoints_source, "endpoints": [e.to_json() for e in report.endpoints]},
        "untraced": [u.to_json() for u in report.untraced],
        "checks": [r.to_json() for r in report.results],
        "counts": {
            "PASS": _count(report, "PASS"),
            "WARN": _count(report, "WARN"),
            "FAIL": _count(report, "FAIL"),
            "SKIP": _count(report, "SKIP"),
            "INFO": _count(report, "INFO"),
        },
        "exit_code": report.exit_code,
        "problems": report.problems,
    }
    if report.gdscheck is not None:
        doc["gdscheck"] = report.gdscheck
    return doc


def _count(report, status: str) -> int:
    return sum(1 for r in report.results if r.status.value == status)
