"""Parse ``gdscheck -p`` in every format seen in real captures (tests/fixtures/corpus/gdscheck/):
beta 0.9 ('cuFile CONFIGURATION:', upper-case names, 0/1 values, 'IOMMU : disabled'), 1.0/1.1,
1.14 ('NVMe P2PDMA' row, 'Supported'/'Unsupported'), 1.16+ route tokens ('nvfs, compat'), with or
without the leading space, indented or truncated — and compare it with gdsdiag's own findings."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..textparse import fields, set_field, unbold

if TYPE_CHECKING:
    from ..schema import check as check_schema

_CANON = {
    "NVME": "NVMe",
    "NVMEOF": "NVMeOF",
    "NVME P2PDMA": "NVMe P2PDMA",
    "SCSI": "SCSI",
    "SCALEFLUX CSD": "ScaleFlux CSD",
    "NVMESH": "NVMesh",
    "DDN EXASCALER": "DDN EXAScaler",
    "LUSTRE": "Lustre",
    "FSX LUSTRE": "FSx Lustre",
    "IBM SPECTRUM SCALE": "IBM Spectrum Scale",
    "NFS": "NFS",
    "BEEGFS": "BeeGFS",
    "SCATEFS": "ScaTeFS",
    "VIRTIOFS": "VIRTIOFS",
    "WEKAFS": "WekaFS",
    "PANFS": "PanFS",
    "USERSPACE RDMA": "Userspace RDMA",
}
DIRECT_TOKENS = {"nvfs", "p2pdma", "c2c", "dmabuf", "nvidia_peermem", "supported"}


@dataclass
class GdsCheck:
    release: str | None = None
    beta: bool = False
    nvfs_version: str | None = None
    libcufile_version: str | None = None
    nvfs_min_version: str | None = None
    drivers: dict[str, list[str]] = field(default_factory=dict)  # canonical name -> tokens (lower case)
    rdma: dict[str, str] = field(default_factory=dict)  # '--' sub-rows
    config: dict[str, str] = field(default_factory=dict)
    gpus: list[dict] = field(default_factory=list)
    iommu: str | None = None
    driver_status: str | None = None
    cuda_driver: str | None = None
    platform: str | None = None
    verification: str | None = None  # succeeded | failed | None (truncated)
    errors: list[str] = field(default_factory=list)

    @property
    def recognised(self) -> bool:
        """Did the text carry anything only gdscheck prints? (Any other text parses to nothing.)"""
        return bool(
            self.release
            or self.nvfs_version
            or self.nvfs_min_version
            or self.gpus
            or self.drivers
            or self.config
            or self.verification
            or self.driver_status
            or self.platform
        )


# lines that carry one value each, in every gdscheck format
_ONE_VALUE_LINES = fields(
    (r"^Platform verification (succeeded|failed)", "verification", str),
    (r"^IOMMU\s*:\s*(\w+)", "iommu", str.lower),
    (r"^Nvidia Driver Info Status:\s*(.+)$", "driver_status", str),
    (r"^Cuda Driver Version Installed:\s*(\d+)", "cuda_driver", str),
    (r"^Platform:\s*(.+)$", "platform", str),
)


def parse(text: str) -> GdsCheck:
    g = GdsCheck()
    for raw in text.splitlines():
        if raw.startswith("#"):
            continue
        line = raw.strip()
        line = unbold(line)  # ('**NVMe : Unsupported**' is that row)
        if not line or set(line) <= {"="}:
            continue
        m = re.match(r"^GDS release version( \(beta\))?:\s*(\S+)", line)
        if m:
            g.beta, g.release = bool(m.group(1)), m.group(2)
            continue
        m = re.match(r"^nvidia_fs version:\s*(\S+)\s+libcufile version:\s*(\S+)", line)
        if m:
            g.nvfs_version, g.libcufile_version = m.group(1), m.group(2)
            continue
        m = re.match(r"^(?:nvidia_fs version:\s*(\S+)\s+)?nvidia_fs minimum version:\s*(\S+)", line)
        if m:
            g.nvfs_version, g.nvfs_min_version = m.group(1), m.group(2)
            continue
        m = re.match(
            # ASCII digits, bounded: int() of a group never fails (issue 24: 5,000 digits, '٣')
            r"^GPU index ([0-9]{1,6}) (.+?) bar:([0-9]{1,3}) bar size \(MiB\):\s*([0-9]{1,12})\s+(supports GDS|.*?)(?:, IOMMU State: (\w[\w\- ]*))?$",
            line,
        )
        if m:
            g.gpus.append(
                {
                    "index": int(m.group(1)),
                    "name": m.group(2),
                    "bar_mib": int(m.group(4)),
                    "supports_gds": m.group(5) == "supports GDS",
                    "iommu_state": m.group(6),
                }
            )
            continue
        m = re.match(r"^GPU ([0-9]{1,6}) (.+?) does not have supported architecture", line)
        if m:
            g.gpus.append({"index": int(m.group(1)), "name": m.group(2), "supports_gds": False, "iommu_state": None})
            g.errors.append(line)
            continue
        if set_field(g, line, _ONE_VALUE_LINES):
            continue
        m = re.match(r"^--([^:]+):(.*)$", line)  # (no two quantifiers over the same spaces: linear)
        if m and m.group(1).strip():
            g.rdma[m.group(1).strip()] = m.group(2).strip()
            continue
        m = re.match(r"^((?:properties|fs|profile|execution|miscellaneous|block|logging)\.[\w.]+)\s*:\s*(.*)$", line)
        if m:
            g.config[m.group(1)] = m.group(2).strip()
            continue
        m = re.match(r"^([A-Za-z][A-Za-z0-9 \t]*):[ \t]*([A-Za-z_][\w, ]*)$", line)
        if m and m.group(1).strip().upper() in _CANON:
            g.drivers[_CANON[m.group(1).strip().upper()]] = [
                t.strip().lower() for t in m.group(2).split(",") if t.strip()
            ]
            continue
        if re.search(r"(not supported|failed|error|does not)", line, re.I):
            g.errors.append(line)
    return g


def _direct(tokens: list[str] | None) -> bool | None:
    if tokens is None:
        return None
    return bool(set(tokens) & DIRECT_TOKENS)


def compare(g: GdsCheck, report) -> list[check_schema.GdscheckRow]:
    """Items where gdscheck and gdsdiag can be set side by side; 'agree' False lists a difference."""
    from ..routes import Route

    out: list[check_schema.GdscheckRow] = []
    routes = report.verdict.routes
    by_id = {r.id: r for r in report.results}

    def add(item: str, theirs: str, ours: str, agree: bool | None, note: str = "") -> None:
        out.append({"item": item, "gdscheck": theirs, "gdsdiag": ours, "agree": agree, "note": note})

    nvme = g.drivers.get("NVMe")
    if nvme is not None:
        ours = Route.NVFS in routes
        add(
            "NVMe via nvidia-fs",
            ", ".join(nvme),
            "NVFS route" if ours else "no NVFS route",
            _direct(nvme) == ours,
            "gdscheck reports the driver's build support; gdsdiag also needs nvidia-fs loaded and a registered nvme",
        )
    p2p = g.drivers.get("NVMe P2PDMA")
    if p2p is not None:
        ours = Route.P2PDMA in routes
        add("NVMe P2PDMA", ", ".join(p2p), "P2PDMA route" if ours else "no P2PDMA route", _direct(p2p) == ours)
    if g.iommu is not None and "platform.iommu" in by_id:
        mode = by_id["platform.iommu"].summary
        theirs_off = g.iommu in ("disabled", "off")
        add(
            "IOMMU",
            g.iommu,
            mode,
            theirs_off == (mode in ("off", "passthrough")) or mode == "unknown",
            "inside a VM gdscheck reports the guest's view",
        )
    if g.verification is not None:
        direct = [r for r in routes if r in (Route.NVFS, Route.P2PDMA)]
        agree = (g.verification == "succeeded") == bool(direct)
        add(
            "platform verdict",
            f"Platform verification {g.verification}",
            report.verdict.summary,
            agree,
            "" if agree else "'Platform verification succeeded' means the stack is installed, not that I/O can go P2P",
        )
    allow = g.config.get("properties.use_compat_mode")
    if allow is not None and "cufile.allow_compat" in by_id:
        ours = by_id["cufile.allow_compat"].summary
        theirs_b = allow.lower() in ("true", "1")
        ours_b = "false" not in ours
        add(
            "allow_compat_mode",
            allow,
            ours,
            theirs_b == ours_b,
            "gdscheck prints allow_compat_mode as properties.use_compat_mode",
        )
    return out
