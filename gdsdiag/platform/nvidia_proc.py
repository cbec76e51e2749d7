"""/proc/driver/nvidia: driver version and flavour, module parameters, GPUs.

Formats from the open driver source (kernel-open/nvidia/nv-procfs.c): ``version`` starts with
``NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build`` (open) or
``NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.x`` (proprietary); ``params`` is ``Name: value``
lines with the string options quoted (``RegistryDwords: "RMForceStaticBar1=1;..."``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .fsroot import FsRoot


@dataclass
class NvidiaDriver:
    present: bool
    version: str | None = None
    open_module: bool | None = None
    version_line: str | None = None
    params: dict[str, str] = field(default_factory=dict)
    registry_dwords: dict[str, str] = field(default_factory=dict)
    gpus: dict[str, dict[str, str]] = field(default_factory=dict)  # bdf -> information fields

    def version_tuple(self) -> tuple[int, ...] | None:
        if not self.version:
            return None
        try:
            return tuple(int(x) for x in self.version.split("."))
        except ValueError:
            return None


def parse_version(text: str) -> tuple[str | None, bool | None, str | None]:
    line = next((ln for ln in text.splitlines() if ln.startswith("NVRM version:")), None)
    if line is None:
        return None, None, None
    m = re.search(r"\s(\d+\.\d+(?:\.\d+)?)\s", line + " ")
    is_open = "Open Kernel Module" in line
    return (m.group(1) if m else None), is_open, line.strip()


def parse_params(text: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        key, sep, val = line.partition(":")
        if sep:
            out[key.strip()] = val.strip().strip('"')
    return out


def parse_registry_dwords(value: str) -> dict[str, str]:
    """'RMForceStaticBar1=1;RmForceDisableIomapWC=1;' -> {'RMForceStaticBar1': '1', ...}"""
    out = {}
    for part in value.split(";"):
        k, sep, v = part.partition("=")
        if sep and k.strip():
            out[k.strip()] = v.strip()
    return out


def read_driver(fs: FsRoot) -> NvidiaDriver:
    text = fs.read_text("/proc/driver/nvidia/version")
    if text is None:
        return NvidiaDriver(present=False)
    version, is_open, line = parse_version(text)
    drv = NvidiaDriver(present=True, version=version, open_module=is_open, version_line=line)
    drv.params = parse_params(fs.read_text("/proc/driver/nvidia/params") or "")
    for key in ("RegistryDwords", "RegistryDwordsPerDevice"):
        drv.registry_dwords.update(parse_registry_dwords(drv.params.get(key, "")))
    for bdf in fs.listdir("/proc/driver/nvidia/gpus"):
        info = {}
        for line in (fs.read_text(f"/proc/driver/nvidia/gpus/{bdf}/information") or "").splitlines():
            k, sep, v = line.partition(":")
            if sep:
                info[k.strip()] = v.strip()
        drv.gpus[bdf.lower()] = info
    return drv
