"""The versioned JSON document of ``gdsdiag topology --json`` (schema in docs/json.md)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, cast

from ..jsontext import compact as _compact
from ..jsontext import integer as _json_int
from ..jsontext import optional as _json_opt
from ..jsontext import string as _json_str
from ..jsontext import strings as _json_strs
from ..pci.config_space import AcsControl
from ..pci.records import Link
from ..topology.findings import Finding
from ..topology.model import Device, Topology
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
    *,
    with_devices: bool = True,
    cross_check_input: dict | None = None,
) -> schema.TopologyDoc:
    """The document; ``with_devices=False`` leaves the devices list empty, for document_text,
    which writes it from pieces."""
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
        "devices": [_device(d) for d in _devices(topo)] if with_devices else [],
        "nvlink": topo.nvlink.to_json() if topo.nvlink is not None else {"source": None, "note": topo.nvlink_note},
        "pairs": [p.to_json() for p in pairs],
        "dynamic_routing": cast("list[schema.DynamicRoute]", routing or []),
        "findings": [f.to_json() for f in findings],
    }
    if cross_check is not None:
        doc["cross_check"] = cast("list[schema.CrossCheckCell]", cross_check)
    if cross_check_input is not None:
        doc["cross_check_input"] = cast("schema.CrossCheckInput", cross_check_input)
    return doc


def document_text(report: TopologyReport) -> str:
    """The compact JSON text of the report's ``document(...)`` (what ``--json`` writes to a pipe),
    the same bytes, with the devices and the pairs written from pieces (``_device_text``,
    ``PairAnalysis.json_text``) instead of the encoder walking thousands of dicts that repeat the
    same links and hops: on a large node that took a fifth of ``topology --json``'s time
    (docs/benchmarks-history.md). tests/test_topology_json_text.py checks both ways give the same bytes."""
    doc = document(
        report.topo,
        [],
        report.findings,
        report.cross_check,
        report.routing,
        with_devices=False,
        cross_check_input=report.cross_check_input,
    )
    parts = []
    for key, value in doc.items():
        if key == "devices":
            text = "[" + ",".join(_device_text(d) for d in _devices(report.topo)) + "]"
        elif key == "pairs":
            text = "[" + ",".join(p.json_text() for p in report.pairs) + "]"
        else:
            text = _compact(value)
        parts.append(f"{_json_str(key)}:{text}")
    return "{" + ",".join(parts) + "}"


def _devices(topo: Topology) -> list[Device]:
    return sorted(topo.devices.values(), key=lambda d: d.bdf)


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


def _device_text(d: Device) -> str:
    """``_compact(_device(d))``, byte for byte, from pieces: a node's links, ACS settings and PCIe
    settings repeat from device to device and are encoded once per distinct value."""
    fn = d.fn
    pcie = fn.config.pcie if fn.config else None
    return "".join(
        (
            '{"bdf":',
            _json_str(fn.bdf),
            ',"host_bridge":',
            _json_str(fn.host_bridge),
            ',"parent":',
            _json_str(d.parent.bdf) if d.parent else "null",
            ',"role":',
            _json_str(d.role._value_),
            ',"label":',
            _json_opt(d.label),
            ',"names":',
            _json_strs(d.names),
            ',"model":',
            _json_opt(d.model),
            ',"class":',
            _json_opt(_hex(fn.class_code, 6)),
            ',"vendor":',
            _json_opt(_hex(fn.vendor, 4)),
            ',"device":',
            _json_opt(_hex(fn.device, 4)),
            ',"subsystem_vendor":',
            _json_opt(_hex(fn.subsystem_vendor, 4)),
            ',"subsystem_device":',
            _json_opt(_hex(fn.subsystem_device, 4)),
            ',"driver":',
            _json_opt(fn.driver),
            ',"numa_node":',
            _json_int(fn.numa_node),
            ',"numa_source":',
            _json_opt(fn.numa_source),
            ',"gpu_numa_node":',
            _json_int(fn.gpu_numa_node),
            ',"iommu_group":',
            _json_opt(fn.iommu_group),
            ',"port_type":',
            _json_str(fn.port_type._value_) if fn.port_type else "null",
            ',"switch":',
            _json_opt(d.switch_id),
            ',"link":',
            _link_text(fn.link),
            ',"acs":',
            _acs_text(fn.acs_control),
            ',"acs_known":',
            "true" if fn.acs_known else "false",
            ',"config_bytes":',
            _json_int(fn.config_size),
            ',"pcie":',
            "null"
            if pcie is None
            else _once(
                lambda: {
                    "max_payload": pcie.max_payload,
                    "max_read_request": pcie.max_read_request,
                    "relaxed_ordering": pcie.relaxed_ordering,
                },
                ("pcie", pcie.max_payload, pcie.max_read_request, pcie.relaxed_ordering),
            ),
            ',"problems":',
            _json_strs(fn.config.problems) if fn.config and fn.config.problems else "[]",
            "}",
        )
    )


# compact JSON text of a value, by a key naming the value; a process analyses one node at a time,
# and a node has a handful of distinct links and settings
_ONCE: dict[tuple, str] = {}


def _once(make: Callable[[], object], key: tuple) -> str:
    text = _ONCE.get(key)
    if text is None:
        text = _ONCE[key] = _compact(make())
    return text


def _link_text(link: Link) -> str:
    # the key keeps each speed's type: 32 and 32.0 are one dict key but two JSON texts
    speed, max_speed = link.speed_gts, link.max_speed_gts
    return _once(link.to_json, (type(speed), speed, link.width, type(max_speed), max_speed, link.max_width))


def _acs_text(acs: AcsControl | None) -> str:
    if acs is None:
        return "null"
    # AcsControl.from_bits hands out one record per value; keyed by the value all the same
    return _once(lambda: {"control": acs.to_json(), "redirect": acs.redirects}, ("acs", acs))
