"""NVLink records, as the NVML reader (platform/nvlink_nvml.py) and the nvidia-smi text importer
produce them and the topology consumes them (see topology/nvlink.py for how they are built)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from ..schema import topology as schema


@dataclass
class NvLinkPair:
    a: str  # GPU bdf
    b: str  # GPU bdf
    links: int  # nvidia-smi's #: links between them (or via NVSwitch: the fewer of both sides)
    via_nvswitch: bool = False
    p2p_ok: bool | None = None  # NVML P2P status over NVLink; None when not asked (text sources)
    source: str = ""

    @property
    def label(self) -> str:
        return f"NV{self.links}"

    def to_json(self) -> schema.NvLink:
        return {
            "links": self.links,
            "label": self.label,
            "via_nvswitch": self.via_nvswitch,
            "p2p_ok": self.p2p_ok,
            "source": self.source,
        }


@dataclass
class NvLinkGpu:
    bdf: str
    links_active: int = 0
    links_inactive: int = 0
    to_nvswitch: int = 0
    remote_types: dict[str, int] = field(default_factory=dict)  # gpu / nvswitch / ibmnpu / unknown -> count
    version: int | None = None

    def to_json(self) -> schema.NvLinkGpu:
        # the fields are the document's keys (tests/test_json_schema.py checks them against the type)
        return cast("schema.NvLinkGpu", dict(self.__dict__))


@dataclass
class NvLinkInfo:
    source: str  # "nvml", "nvidia-smi topo -m text (FILE)", ...
    pairs: dict[frozenset, NvLinkPair] = field(default_factory=dict)
    gpus: dict[str, NvLinkGpu] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    def between(self, a: str, b: str) -> NvLinkPair | None:
        return self.pairs.get(frozenset((a, b)))

    def add(self, pair: NvLinkPair) -> None:
        self.pairs[frozenset((pair.a, pair.b))] = pair

    def to_json(self) -> schema.NvLinkInfo:
        return {
            "source": self.source,
            "pairs": [
                {"a": p.a, "b": p.b, **p.to_json()} for p in sorted(self.pairs.values(), key=lambda p: (p.a, p.b))
            ],
            "gpus": [g.to_json() for g in sorted(self.gpus.values(), key=lambda g: g.bdf)],
            "problems": self.problems,
        }
