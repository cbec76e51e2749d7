"""Merge many nodes' validate reports (gdsdiag.validate/1) into one fleet view: which node fails
which rule, and the sweep figures side by side. Pure: documents in, tables out."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import GdsdiagError

if TYPE_CHECKING:
    from ..schema import validate as schema

RANK = {"FAIL": 3, "WARN": 2, "PASS": 1, "SKIP": 0}


def _bs(bs: int) -> str:
    for unit, shift in (("g", 30), ("m", 20), ("k", 10)):
        if bs >= 1 << shift and bs % (1 << shift) == 0:
            return f"{bs >> shift}{unit}"
    return str(bs)


_FIX = "give the JSON files written by 'gdsdiag validate --json'"
# what fleet reads of a report; every other key is carried, never interpreted
_STR = (str, None)
REPORT_SHAPE = {
    "schema!": str,
    "node": ({"hostname": _STR, "root": _STR, "snapshot_id": _STR, "machine_id": _STR, "boot_id": _STR}, None),
    "verdict": str,
    "level": str,
    "rules": ([{"rule!": str, "status!": str}], None),
    "sweeps": (
        [{"points": ([{"mode": _STR, "rw": _STR, "bs": (int, None), "gbps": (float, None)}], None)}],
        None,
    ),
}
_RWS = ("read", "write", "randread", "randwrite")


def load_reports(paths: list[str]) -> list[tuple[str, dict]]:
    from ..bounded import MAX_REPORT_JSON, check_shape, load_user_json

    out = []
    for p in paths[:100_000]:
        doc = load_user_json(p, "validate report", MAX_REPORT_JSON, _FIX)
        if not isinstance(doc, dict) or doc.get("schema") != "gdsdiag.validate/1":
            raise GdsdiagError(f"{p} is not a gdsdiag.validate/1 report", _FIX)
        check_shape(p, doc, REPORT_SHAPE, "gdsdiag.validate/1 report")
        out.append((p, doc))
    if not out:
        raise GdsdiagError("no report given", "gdsdiag report DIR/*.json")
    return out


def _name(path: str, d: dict) -> str:
    import os

    n = d.get("node") or {}
    return n.get("hostname") or os.path.basename(str(n.get("root") or "")) or path


def labels(reports: list[tuple[str, dict]]) -> list[str]:
    """The name each report's node is shown by: its hostname (a snapshot's file name), and where
    two nodes share it, what tells them apart — the machine id, else the boot id, else the report
    file when the documents carry neither id (reports written before they did) — so a FAIL is never
    put on the wrong node. Reports that carry the same ids are of one node and keep the plain name."""
    import os

    names = [_name(p, d) for p, d in reports]
    out = list(names)
    for name in set(names):
        group = [i for i, n in enumerate(names) if n == name]
        if len(group) < 2:
            continue
        nodes = [reports[i][1].get("node") or {} for i in group]
        for key, word in (("machine_id", "machine"), ("boot_id", "boot")):
            vals = [n.get(key) for n in nodes]
            if len(set(vals)) > 1:
                for i, v in zip(group, vals):
                    out[i] = f"{name} ({word} {str(v).removeprefix('hmac:')[:8] if v else 'unknown'})"
                break
        else:
            if all(n.get("machine_id") is None and n.get("boot_id") is None for n in nodes):
                for i in group:  # nothing in the documents says whether they are one node
                    out[i] = f"{name} ({os.path.basename(reports[i][0])})"
    return out


def rows(reports: list[tuple[str, dict]]) -> list[schema.NodeRow]:
    """One row per report, worst first. A row is the report document's own record
    (schema.validate.NodeRow), so its fields are declared once."""
    from .adapters import cufile_modes

    cufile = cufile_modes()  # the sweep's engine table: the modes that go through cuFile
    out: list[schema.NodeRow] = []
    for (path, d), label in zip(reports, labels(reports)):
        n = d.get("node") or {}
        rules = d.get("rules") or []
        verdict, inconsistent = _verdict(d, rules)
        gb: dict[str, float] = {}
        for s in d.get("sweeps") or []:
            for p in s.get("points") or []:
                if p.get("mode") not in cufile or p.get("error") or p.get("gbps") is None:
                    continue
                if p.get("rw") not in _RWS or not isinstance(p.get("bs"), int) or not 0 < p["bs"] <= 1 << 50:
                    continue  # not a point gdsdiag wrote: no column for it
                key = f"{p['rw']} {_bs(p['bs'])}"
                gb[key] = max(gb.get(key, 0.0), p["gbps"])
        out.append(
            {
                "node": label,
                "hostname": n.get("hostname"),
                "machine_id": n.get("machine_id"),
                "boot_id": n.get("boot_id"),
                "source": path,
                "snapshot_id": n.get("snapshot_id", "?"),
                "verdict": verdict,
                "inconsistent": inconsistent,
                "level": d.get("level", "?"),
                "failed": [r["rule"] for r in rules if r.get("status") == "FAIL"],
                "warned": [r["rule"] for r in rules if r.get("status") == "WARN"],
                "gbps": gb,
            }
        )
    return sorted(out, key=lambda r: (-RANK.get(r["verdict"], 0), r["node"]))


def _verdict(d: dict, rules: list) -> tuple[str, str | None]:
    """A row's verdict and, where the report contradicts itself, why ("inconsistent"). A report is
    another node's file: its "verdict" must be what its own rules make it (validate's worst rule,
    PASS/SKIP alike), or the row says so and is FAIL (issue 42: "worst PASS" was printed beside a
    failed rule of a report whose verdict said PASS)."""
    said = d.get("verdict")
    statuses = [r.get("status") for r in rules]
    unknown = sorted({str(s) for s in statuses if s not in RANK and s != "INFO"})[:3]
    known = [s for s in statuses if s in RANK]
    from_rules = max(known, key=lambda s: RANK[s]) if known else None
    why = None
    if said is None:  # (no verdict at all claims nothing: the rules' own, else unknown)
        return from_rules or "?", None
    if said not in RANK:
        why = f"verdict {str(said)[:40]!r} is none of FAIL, WARN, PASS, SKIP"
    elif unknown:
        why = "rule status " + ", ".join(repr(u[:40]) for u in unknown) + " is none of FAIL, WARN, PASS, SKIP, INFO"
    elif from_rules is not None and max(RANK[said], 1) != max(RANK[from_rules], 1):
        why = f"the report says {said}, its rules {from_rules}"
    if why is None:
        return str(said), None
    return "FAIL", f"inconsistent input: {why}"


def gbps_keys(rs: list[schema.NodeRow]) -> list[str]:
    """'read 64k' < 'read 1m' < 'write 64k': by pattern, then block size in bytes."""
    from ..units import parse_size

    keys = {k for r in rs for k in r["gbps"]}
    return sorted(keys, key=lambda k: (k.split()[0], parse_size(k.split()[1])))


def rule_matrix(reports: list[tuple[str, dict]]) -> dict:
    """rule -> {verdict: [nodes]} for every rule that is not PASS/SKIP everywhere (nodes named as
    in rows())."""
    m: dict = {}
    for (_path, d), node in zip(reports, labels(reports)):
        for r in d.get("rules") or []:
            m.setdefault(r["rule"], {}).setdefault(r["status"], []).append(node)
    return {k: v for k, v in m.items() if set(v) - {"PASS", "SKIP"}}


def worst(rs: list[schema.NodeRow]) -> str:
    return max((r["verdict"] for r in rs), key=lambda v: RANK.get(v, 0), default="PASS")
