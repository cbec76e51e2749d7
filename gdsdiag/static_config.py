"""GDS 1.20's static GPU hardware configuration: the file that caches each GPU's BAR size and PCI
P2PDMA support so libcufile need not probe them at start-up, as the cufile.json in effect names it.

What NVIDIA publishes (API reference guide, "Static Topology and Hardware Configuration",
docs.nvidia.com/gpudirect-storage/api-reference-guide/static-topology-and-hardware-configuration.html):
"Static hardware configuration: Caches GPU BAR size and PCI P2PDMA support to reduce runtime discovery
during initialization. Supported in GDS 1.20." and "Both files can be generated using gdscheck.py".
The cufile.json keys are libcufile 1.20.0.107's own strings, miscellaneous.enable_static_config and
miscellaneous.static_config_filepath (tests/fixtures/libcufile-strings/). No default file name and no
file format is published in what gdsdiag can cite, so the file is reported by presence, path and size
only — its contents are not read as facts (FORMAT says so wherever it is shown).
"""

from __future__ import annotations

from dataclasses import dataclass

from .cufile_json import CufileConfig
from .platform.fsroot import FsRoot

ENABLE = "miscellaneous.enable_static_config"
PATH = "miscellaneous.static_config_filepath"
FORMAT = "format not documented by NVIDIA: its contents are not read"
SOURCE = "NVIDIA GDS API reference, Static Topology and Hardware Configuration (GDS 1.20)"


@dataclass
class StaticConfig:
    cufile_json: str | None  # the cufile.json in effect (None: libcufile's defaults)
    enabled: bool | None  # enable_static_config as that file sets it (None: unset)
    path: str | None  # static_config_filepath as set (None: unset)
    present: bool | None  # the file exists (None: no path to look at)
    size: int | None  # its size in bytes when present

    def summary(self) -> str:
        where = self.cufile_json or "libcufile's defaults (no cufile.json)"
        if self.enabled is not True:
            said = "unset" if self.enabled is None else "false"
            line = f"off ({ENABLE} {said}: {where}): libcufile probes BAR size and P2PDMA at start-up"
            if self.present:
                line += f"; {self.path} is there ({self.size} bytes) but unused"
            return line
        if not self.path:
            return f"on in {where}, but {PATH} is unset: libcufile falls back to probing BAR size and P2PDMA"
        if not self.present:
            return f"on in {where}, but {self.path} does not exist: libcufile falls back to probing BAR size and P2PDMA"
        return (
            f"on: {self.path} ({self.size} bytes) caches each GPU's BAR size and P2PDMA support; libcufile takes "
            f"them from it, not from the node: after a GPU, driver, BAR or kernel change regenerate it ({FORMAT})"
        )

    def to_json(self) -> dict:
        return {
            "cufile_json": self.cufile_json,
            "enabled": self.enabled,
            "path": self.path,
            "present": self.present,
            "bytes": self.size,
            "format": FORMAT,
            "summary": self.summary(),
        }


def read(fs: FsRoot, cfg: CufileConfig) -> StaticConfig:
    enabled = cfg.get(ENABLE)
    path = cfg.get(PATH)
    present = size = None
    if isinstance(path, str) and path:
        present = fs.exists(path)
        if present:
            raw = fs.read_bytes(path, limit=1 << 20)
            size = len(raw) if raw is not None else None
    return StaticConfig(cfg.path if cfg.data is not None else None, enabled, path or None, present, size)
