"""The versioned JSON document of ``gdsdiag diff --json`` (schema in docs/json.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..schema import diff as schema

SCHEMA = "gdsdiag.diff/1"
SECTIONS = ("verdict", "checks", "topology", "pairs", "findings", "cufile.json")


def document(res) -> schema.DiffDoc:
    return {
        "schema": SCHEMA,
        "a": {"input": res.a.input, "form": res.a.form, "verdict": res.a.check.get("verdict", {}).get("summary")},
        "b": {"input": res.b.input, "form": res.b.form, "verdict": res.b.check.get("verdict", {}).get("summary")},
        "same": res.same,
        "differences": [x.to_json() for x in res.differences],
        "counts": {
            "verdict": _count(res, "verdict"),
            "checks": _count(res, "checks"),
            "topology": _count(res, "topology"),
            "pairs": _count(res, "pairs"),
            "findings": _count(res, "findings"),
            "cufile.json": _count(res, "cufile.json"),
        },
        "exit_code": 0 if res.same else 1,
    }


def _count(res, section: str) -> int:
    return sum(1 for x in res.differences if x.section == section)
