"""The versioned JSON document of ``gdsdiag check --json`` (schema in docs/json.md)."""

from __future__ import annotations

SCHEMA = "gdsdiag.check/1"


def document(report) -> dict:
    doc = {
        "schema": SCHEMA,
        "source": report.source,
        "verdict": report.verdict.to_json(),
        "paths": [p.to_json() for p in report.paths],
        "checks": [r.to_json() for r in report.results],
        "counts": {
            s: sum(1 for r in report.results if r.status.value == s) for s in ("PASS", "WARN", "FAIL", "SKIP", "INFO")
        },
        "exit_code": report.exit_code(),
        "problems": report.problems,
    }
    if report.gdscheck is not None:
        doc["gdscheck"] = report.gdscheck
    return doc
