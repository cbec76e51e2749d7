"""The versioned JSON document of ``gdsdiag diff --json`` (schema in docs/json.md)."""

from __future__ import annotations

SCHEMA = "gdsdiag.diff/1"
SECTIONS = ("verdict", "checks", "topology", "pairs", "findings", "cufile.json")


def document(res) -> dict:
    return {
        "schema": SCHEMA,
        "a": {"input": res.a.input, "form": res.a.form, "verdict": res.a.check.get("verdict", {}).get("summary")},
        "b": {"input": res.b.input, "form": res.b.form, "verdict": res.b.check.get("verdict", {}).get("summary")},
        "same": res.same,
        "differences": [x.to_json() for x in res.differences],
        "counts": {s: sum(1 for x in res.differences if x.section == s) for s in SECTIONS},
        "exit_code": 0 if res.same else 1,
    }
