"""cuFile statistics (1.15+): levels, start/stop/reset, L1/L2/L3 as plain dicts, and ``PathMix`` —
which route the process's I/O took, from the per-GPU level-3 counters (n_nvfs_*, n_p2p_*, n_posix_*,
n_dr_*, n_unaligned_*). The struct layout is picked from cuFileGetVersion() (1.19 grew level 1)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ._lib import Library, load
from .errors import check


def set_level(level: int, library: Library | None = None) -> None:
    L = library or load()
    check("cuFileSetStatsLevel", L.lib.cuFileSetStatsLevel(level))


def get_level(library: Library | None = None) -> int:
    L = library or load()
    v = L.ffi.new("int *")
    check("cuFileGetStatsLevel", L.lib.cuFileGetStatsLevel(v))
    return int(v[0])


def start(library: Library | None = None) -> None:
    check("cuFileStatsStart", (library or load()).lib.cuFileStatsStart())


def stop(library: Library | None = None) -> None:
    check("cuFileStatsStop", (library or load()).lib.cuFileStatsStop())


def reset(library: Library | None = None) -> None:
    check("cuFileStatsReset", (library or load()).lib.cuFileStatsReset())


def _to_py(ffi, cdata):
    if not isinstance(cdata, ffi.CData):  # array items of integer type come back as ints
        return cdata
    t = ffi.typeof(cdata)
    if t.kind == "struct":
        return {name: _to_py(ffi, getattr(cdata, name)) for name, _ in t.fields}
    if t.kind == "array":
        if t.item.cname == "char":
            return bytes(ffi.buffer(cdata)).hex()
        return [_to_py(ffi, x) for x in cdata]
    return cdata


def _get(level: int, library: Library | None):
    L = library or load()
    tname = L.stats_types[level - 1]
    s = L.ffi.new(tname + " *")
    fn = (L.lib.cuFileGetStatsL1, L.lib.cuFileGetStatsL2, L.lib.cuFileGetStatsL3)[level - 1]
    check(f"cuFileGetStatsL{level}", fn(s))
    return L, s


def level1(library: Library | None = None) -> dict:
    L, s = _get(1, library)
    d = _to_py(L.ffi, s[0])
    return {**d.pop("v1150"), **d} if "v1150" in d else d


def level2(library: Library | None = None) -> dict:
    L, s = _get(2, library)
    d = _to_py(L.ffi, s[0])
    b = d["basic"]
    if "v1150" in b:
        d["basic"] = {**b.pop("v1150"), **b}
    return d


@dataclass
class GpuPathMix:
    uuid: str
    reads: dict = field(default_factory=dict)  # total, nvfs, p2p, posix, dr, unaligned, err, bytes
    writes: dict = field(default_factory=dict)


@dataclass
class PathMix:
    """Which route this process's cuFile I/O took, per GPU and in total."""

    gpus: list[GpuPathMix]

    def total(self, op: str) -> dict:
        out: dict = {}
        for g in self.gpus:
            for k, v in getattr(g, op).items():
                out[k] = out.get(k, 0) + v
        return out

    def routes(self) -> dict:
        """{'NVFS': n, 'P2PDMA': n, 'COMPAT': n, 'DYNAMIC_ROUTING': n} over reads + writes."""
        r, w = self.total("reads"), self.total("writes")
        return {
            "NVFS": r.get("nvfs", 0) + w.get("nvfs", 0),
            "P2PDMA": r.get("p2p", 0) + w.get("p2p", 0),
            "COMPAT": r.get("posix", 0) + w.get("posix", 0),
            "DYNAMIC_ROUTING": r.get("dr", 0) + w.get("dr", 0),
        }

    def minus(self, before: PathMix) -> PathMix:
        """The I/O between two snapshots (counters are cumulative)."""
        prev = {g.uuid: g for g in before.gpus}
        out = []
        for g in self.gpus:
            p = prev.get(g.uuid)
            sub = lambda a, b: {k: v - (b or {}).get(k, 0) for k, v in a.items()}  # noqa: E731
            out.append(GpuPathMix(g.uuid, sub(g.reads, p.reads if p else None), sub(g.writes, p.writes if p else None)))
        return PathMix(out)

    def to_json(self) -> dict:
        return {
            "gpus": [g.__dict__ for g in self.gpus],
            "reads": self.total("reads"),
            "writes": self.total("writes"),
            "routes": self.routes(),
        }


def path_mix(library: Library | None = None) -> PathMix:
    """Level-3 per-GPU counters (needs cuFileSetStatsLevel(3) and cuFileStatsStart() first)."""
    L, s = _get(3, library)
    st = s[0]
    gpus = []
    for i in range(min(st.num_gpus, 16)):
        g = st.per_gpu_stats[i]
        uuid = bytes(L.ffi.buffer(g.uuid)).hex()
        gpus.append(
            GpuPathMix(
                uuid,
                reads={
                    "total": g.n_total_reads,
                    "nvfs": g.n_nvfs_reads,
                    "p2p": g.n_p2p_reads,
                    "posix": g.n_posix_reads,
                    "dr": g.n_dr_reads,
                    "unaligned": g.n_unaligned_reads,
                    "err": g.n_reads_err,
                    "bytes": g.read_bytes,
                },
                writes={
                    "total": g.n_total_writes,
                    "nvfs": g.n_nvfs_writes,
                    "p2p": g.n_p2p_writes,
                    "posix": g.n_posix_writes,
                    "dr": g.n_dr_writes,
                    "unaligned": g.n_unaligned_writes,
                    "err": g.n_writes_err,
                    "bytes": g.writes_bytes,
                },
            )
        )
    return PathMix(gpus)
