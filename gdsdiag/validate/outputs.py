"""The four renderings of a validate report: rich summary, JSON (gdsdiag.validate/1), JUnit XML
(one testcase per rule) and a Prometheus textfile for node_exporter's textfile collector. A report
with a proof matrix (--proof) carries it in each: proof_out.py renders the matrix's part."""

from __future__ import annotations

import re
import time
import xml.etree.ElementTree as ET
from typing import TYPE_CHECKING

from ..routes import point_label
from ..verdicts import Status, style
from .runner import ValidateReport

if TYPE_CHECKING:
    from ..schema import validate as schema

SCHEMA = "gdsdiag.validate/1"


def document(rep: ValidateReport) -> schema.ValidateDoc:
    sweeps: list[schema.Sweep] = []
    for s in rep.sweeps:
        pts: list[schema.SweepPoint] = [
            {
                "mode": p.get("mode"),
                "rw": p.get("rw"),
                "bs": p.get("bs"),
                "threads": p.get("threads"),
                "gbps": (p.get("summary") or {}).get("gbps"),
                "p99_us": ((p.get("summary") or {}).get("lat_us") or {}).get("p99"),
                "route": point_label(p.get("route"), p.get("route_mix")),
                "error": p.get("error"),
            }
            for p in (s["doc"].get("points") or [])
        ]
        sweeps.append({"path": s["path"], "gpu": s["gpu"], "points": pts})
    counts: schema.Counts = {
        "PASS": _count(rep, Status.PASS),
        "WARN": _count(rep, Status.WARN),
        "FAIL": _count(rep, Status.FAIL),
        "SKIP": _count(rep, Status.SKIP),
    }
    doc: schema.ValidateDoc = {
        "schema": SCHEMA,
        "tool_version": rep.node["tool_version"],
        "node": rep.node,
        "level": rep.level,
        "policy": rep.policy.to_json(),
        "verdict": rep.worst().value,
        "exit_code": rep.exit_code,
        "counts": counts,
        "stopped_early": rep.stopped_early,
        "seconds": rep.seconds,
        "rules": [r.to_json() for r in rep.results],
        "sweeps": sweeps,
        "route_ratio": rep.route_ratio(),
        "trace": rep.trace,
    }
    if rep.proof is not None:
        doc["proof"] = rep.proof.to_json()
    return doc


def _count(rep: ValidateReport, st: Status) -> int:
    return sum(1 for r in rep.results if r.status == st)


_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def xml_safe(root: ET.Element) -> ET.Element:
    """Characters XML 1.0 cannot carry (ESC, BEL, NUL... from a hostname, a mount path or a log
    line) as '?' in every attribute and text: ElementTree writes them as they are, and a CI's
    JUnit parser then refuses the whole file ("not well-formed (invalid token)")."""
    for el in root.iter():
        for k, v in el.attrib.items():
            el.set(k, _NOT_XML.sub("?", v))
        if el.text:
            el.text = _NOT_XML.sub("?", el.text)
        if el.tail:
            el.tail = _NOT_XML.sub("?", el.tail)
    return root


def junit(rep: ValidateReport) -> bytes:
    suites = ET.Element("testsuites", name="gdsdiag validate")
    suite = ET.SubElement(
        suites,
        "testsuite",
        name=f"gdsdiag validate {rep.node.get('hostname') or rep.node['root']}",
        tests=str(len(rep.results)),
        failures=str(sum(r.status == Status.FAIL for r in rep.results)),
        errors="0",
        skipped=str(sum(r.status == Status.SKIP for r in rep.results)),
        time=str(rep.seconds),
        timestamp=rep.node["date"],
        hostname=rep.node.get("hostname") or "snapshot",
    )
    props = ET.SubElement(suite, "properties")
    for k in ("snapshot_id", "tool_version"):
        ET.SubElement(props, "property", name=k, value=str(rep.node[k]))
    ET.SubElement(props, "property", name="policy", value=rep.policy.source)
    for r in rep.results:
        tc = ET.SubElement(suite, "testcase", classname=f"gdsdiag.validate.{r.stage}", name=r.rule, time="0")
        detail = "\n".join(
            [r.title, r.summary] + [f"{e.source}: {e.value}" for e in r.evidence] + ([f"fix: {r.fix}"] if r.fix else [])
        )
        if r.status == Status.FAIL:
            ET.SubElement(tc, "failure", message=r.summary, type="FAIL").text = detail
        elif r.status == Status.SKIP:
            ET.SubElement(tc, "skipped", message=r.summary)
        else:
            # JUnit has no "warning": a WARN passes and says so in its output
            ET.SubElement(tc, "system-out").text = f"{r.status.value}: {detail}"
    if rep.proof is not None:  # a second testsuite, one testcase per cell
        from .proof_out import junit_suite

        suites.append(junit_suite(rep.proof, rep.node.get("hostname") or rep.node["root"]))
    return ET.tostring(xml_safe(suites), encoding="utf-8", xml_declaration=True)


def _lv(v) -> str:
    return str(v).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(**kw) -> str:
    return "{" + ",".join(f'{k}="{_lv(v)}"' for k, v in kw.items()) + "}"


def prometheus(rep: ValidateReport, now: float | None = None) -> str:
    """Text exposition format 0.0.4, one HELP/TYPE per family, no duplicate series."""
    out: list[str] = []

    def family(name, help_, rows):
        out.append(f"# HELP {name} {help_}")
        out.append(f"# TYPE {name} gauge")
        out.extend(f"{name}{lab} {val}" for lab, val in rows)

    family(
        "gdsdiag_validate_info",
        "Node snapshot id, tool version and policy of the last validation (always 1).",
        [
            (
                _labels(
                    snapshot_id=rep.node["snapshot_id"],
                    version=rep.node["tool_version"],
                    policy=rep.policy.source,
                    level=rep.level,
                ),
                1,
            )
        ],
    )
    family(
        "gdsdiag_validate_exit_code",
        "Exit code of the last validation: 0 pass, 1 warn, 2 fail.",
        [("", rep.exit_code)],
    )
    family(
        "gdsdiag_validate_timestamp_seconds",
        "When the last validation finished (Unix time).",
        [("", int(now or time.time()))],
    )
    family(
        "gdsdiag_rule_pass",
        "1 if the rule passed, 0 if it failed or warned (skipped rules are absent).",
        [(_labels(rule=r.rule), 1 if r.status == Status.PASS else 0) for r in rep.results if r.status != Status.SKIP],
    )
    family(
        "gdsdiag_rule_status",
        "One series per rule and verdict; 1 marks the rule's verdict.",
        [
            (_labels(rule=r.rule, status=st.value), int(r.status == st))
            for r in rep.results
            for st in (Status.PASS, Status.WARN, Status.FAIL, Status.SKIP)
        ],
    )
    gb, p99 = [], []
    seen = set()
    for s in rep.sweeps:
        for p in s["doc"].get("points") or []:
            if p.get("error"):
                continue
            key = (s["gpu"], s["path"], p["bs"], p["rw"], p["mode"], p["threads"])
            if key in seen:
                continue
            seen.add(key)
            lab = _labels(gpu=s["gpu"], mount=s["path"], bs=p["bs"], rw=p["rw"], mode=p["mode"], threads=p["threads"])
            summ = p.get("summary") or {}
            if summ.get("gbps") is not None:
                gb.append((lab, summ["gbps"]))
            v = (summ.get("lat_us") or {}).get("p99")
            if v is not None:
                p99.append((lab, round(v / 1e6, 9)))
    family(
        "gdsdiag_sweep_gbps",
        "Measured throughput (GB/s, 1e9 B/s) per GPU, mount, block size (bytes), pattern, mode, threads.",
        gb,
    )
    family("gdsdiag_sweep_p99_seconds", "Measured p99 latency per sweep point.", p99)
    family(
        "gdsdiag_io_route_ratio",
        "Share of the measured GPU I/O bytes per route (sweep cuFile statistics).",
        [(_labels(route=k), round(v, 6)) for k, v in rep.route_ratio().items()],
    )
    text = "\n".join(out) + "\n"
    if rep.proof is not None:  # the proof's families follow, one series per cell
        from .proof_out import prometheus as proof_families

        text += proof_families(rep.proof)
    return text


def _txt(v) -> str:
    """Text from the node, a snapshot, a policy path or sweep results, made inert for rich: a
    hostname or a mount path may hold '[link=…]' or terminal control sequences."""
    from rich.markup import escape

    from ..bounded import clip, printable

    return escape(printable(clip(str(v), 2000)))


def _plain(v) -> str:
    """The same for a line printed with markup off: no escaping, control characters still out."""
    from ..bounded import clip, printable

    return printable(clip(str(v), 2000))


def render(console, rep: ValidateReport, verbose: bool = False) -> None:
    from rich.table import Table

    t = Table(
        title=f"gdsdiag validate — {_txt(rep.node.get('hostname') or rep.node['root'])} ({rep.level}, policy {_txt(rep.policy.source)})",
        show_lines=False,
    )
    t.add_column("rule")
    t.add_column("verdict")
    t.add_column("summary", overflow="fold")
    for r in rep.results:
        t.add_row(r.rule, f"[{style(r.status)}]{r.status.value}[/]", _txt(r.summary))
    console.print(t)
    for r in rep.results:
        if r.status in (Status.FAIL, Status.WARN) or verbose:
            # soft_wrap: never broken by the renderer, so a fix is copied whole from a pipe or a log
            console.print(f"[{style(r.status)}]{r.status.value}[/] {r.rule}: {_txt(r.summary)}", soft_wrap=True)
            for e in r.evidence[:8]:
                console.print(
                    f"    evidence: {_plain(e.source)}: {_plain(e.value)}",
                    markup=False,
                    highlight=False,
                    soft_wrap=True,
                )
            if r.fix:
                console.print(f"    fix: {_plain(r.fix)}", markup=False, highlight=False, soft_wrap=True)
    if rep.stopped_early:
        console.print(f"[yellow]stopped early[/]: {_txt(rep.stopped_early)}")
    w = rep.worst()
    console.print(
        f"verdict: [{style(w)}]{w.value}[/]  (snapshot {_txt(rep.node['snapshot_id'])}, gdsdiag {rep.node['tool_version']}, {rep.seconds} s)"
    )
    if rep.proof is not None:
        from .proof_out import render as render_proof

        render_proof(console, rep.proof)
