"""The versioned JSON document of ``gdsdiag topology --json`` (schema in docs/json.md)."""

from __future__ import annotations

import json
from json.encoder import encode_basestring_ascii as _json_str
from typing import TYPE_CHECKING, cast

from ..topology.findings import Finding
from ..topology.model import Topology
from ..topology.pairs import PairAnalysis

if TYPE_CHECKING:
    from ..schema import topology as schema
    from ..topology.report import TopologyReport

SCHEMA = "gdsdiag.topology/1"


def document(
    topo: Topology,
    pairs: list[PairAnalysis],
    findings: list[Finding],
    cross_check: list[dict] | None = None,
    routing: list[dict] | None = None,
) -> schema.TopologyDoc:
    doc: schema.TopologyDoc = {
        "schema": SCHEMA,
        "source": topo.source,
        "cpu": {
            "vendor": topo.cpu.vendor,
            "family": topo.cpu.family,
            "model": topo.cpu.model_name,
            "numa_nodes": topo.cpu.numa_nodes,
            "cpu_nodes": topo.cpu.cpu_nodes,
            "memory_only_nodes": topo.cpu.memory_only_nodes,
            "gpu_memory_nodes": {str(k): v for k, v in sorted(topo.cpu.gpu_memory_nodes.items())},
        },
        "iommu": {
            "mode": topo.iommu.mode,
            "units": topo.iommu.units,
            "cmdline": topo.iommu.cmdline,
            "group_types": topo.iommu.group_types,
            "evidence": topo.iommu.evidence,
        },
        "host_bridges": [
            {"id": h.id, "numa_node": h.numa_node, "vendor": _hex(h.vendor, 4), "device": _hex(h.device, 4)}
            for h in sorted(topo.host_bridges.values(), key=lambda h: h.id)
        ],
        "devices": [_device(d) for d in sorted(topo.devices.values(), key=lambda d: d.bdf)],
        "nvlink": topo.nvlink.to_json() if topo.nvlink is not None else {"source": None, "note": topo.nvlink_note},
        "pairs": [p.to_json() for p in pairs],
        "dynamic_routing": cast("list[schema.DynamicRoute]", routing or []),
        "findings": [f.to_json() for f in findings],
    }
    if cross_check is not None:
        doc["cross_check"] = cast("list[schema.CrossCheckCell]", cross_check)
    return doc


def document_text(report: TopologyReport) -> str:
    """The compact JSON text of the report's ``document(...)`` (what ``--json`` writes to a pipe), the same
    bytes, with the pairs written by ``PairAnalysis.json_text`` instead of the encoder walking
    4,720 dicts that repeat the same hops (docs/benchmarks.md)."""
    doc = document(report.topo, [], report.findings, report.cross_check, report.routing)
    parts = []
    for key, value in doc.items():
        text = "[" + ",".join(p.json_text() for p in report.pairs) + "]" if key == "pairs" else _compact(value)
        parts.append(f"{_json_str(key)}:{text}")
    return "{" + ",".join(parts) + "}"


def _compact(value: object) -> str:
    # commands/_common.json_text's compact form: documents are trees, no cycle check
    return json.dumps(value, separators=(",", ":"), check_circular=False)


def _hex(v: int | None, width: int) -> str | None:
    return None if v is None else f"{v:0{width}x}"


def _device(d) -> schema.Device:
    fn = d.fn
    acs = fn.acs_control
    return {
        "bdf": fn.bdf,
        "host_bridge": fn.host_bridge,
        "parent": d.parent.bdf if d.parent else None,
        "role": d.role.value,
        "label": d.label,
        "names": d.names,
        "model": d.model,
        "class": _hex(fn.class_code, 6),
        "vendor": _hex(fn.vendor, 4),
        "device": _hex(fn.device, 4),
        "subsystem_vendor": _hex(fn.subsystem_vendor, 4),
        "subsystem_device": _hex(fn.subsystem_device, 4),
        "driver": fn.driver,
        "numa_node": fn.numa_node,
        "numa_source": fn.numa_source,
        "gpu_numa_node": fn.gpu_numa_node,
        "iommu_group": fn.iommu_group,
        "port_type": fn.port_type.value if fn.port_type else None,
        "switch": d.switch_id,
        "link": fn.link.to_json(),
        "acs": None if acs is None else {"control": acs.to_json(), "redirect": acs.redirects},
        "acs_known": fn.acs_known,
        "config_bytes": fn.config_size,
        "pcie": None
        if not (fn.config and fn.config.pcie)
        else {
            "max_payload": fn.config.pcie.max_payload,
            "max_read_request": fn.config.pcie.max_read_request,
            "relaxed_ordering": fn.config.pcie.relaxed_ordering,
        },
        "problems": fn.config.problems if fn.config else [],
    }
