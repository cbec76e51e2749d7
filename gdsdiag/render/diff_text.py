"""Text of ``gdsdiag diff``: the two verdicts, then each difference as 'key: A -> B' by section."""

from __future__ import annotations

from ..documents.diff import SECTIONS


def _v(x) -> str:
    import json

    if isinstance(x, (list, dict)):
        return json.dumps(x)
    if isinstance(x, str):
        return x if x == "(absent)" else repr(x) if (not x or x != x.strip()) else x
    return "null" if x is None else str(x).lower() if isinstance(x, bool) else str(x)


def lines(res) -> list[str]:
    a, b = res.a, res.b
    out = [
        f"A: {a.input} ({a.form})   verdict: {a.check.get('verdict', {}).get('summary')}",
        f"B: {b.input} ({b.form})   verdict: {b.check.get('verdict', {}).get('summary')}",
    ]
    if res.same:
        out.append("No differences in topology, links, ACS, IOMMU, drivers, cufile.json or check verdicts.")
        return out
    for sec in SECTIONS:
        rows = [x for x in res.differences if x.section == sec]
        if not rows:
            continue
        out.append("")
        out.append(f"{sec} ({len(rows)}):")
        for x in rows:
            out.append(f"  {x.key}: {_v(x.a)} -> {_v(x.b)}")
    out.append("")
    out.append(f"{len(res.differences)} difference(s).")
    return out
