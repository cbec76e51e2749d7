"""Parsers for /proc/driver/nvidia-fs/* and the nvidia-fs module parameters.

Formats are the ``seq_printf`` strings of NVIDIA/gds-nvidia-fs (src/nvfs-proc.c, src/nvfs-stat.c,
src/nvfs-pci.c); real samples live in tests/fixtures/corpus/nvfs-stats/. Every parser takes text and
returns what it understood plus the lines it did not, never raising.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..bounded import ascii_int
from ..textparse import fields, set_field
from .fsroot import FsRoot

NVFS_PROC = "/proc/driver/nvidia-fs"
NVFS_PARAMS = (
    "rw_stats_enabled",
    "peer_stats_enabled",
    "dbg_enabled",
    "info_enabled",
    "max_devices",
    "use_legacy_p2p_allocation",
)
# 'name=value' counters. A name starts only where no name character precedes it, and a value is 1-20
# ASCII digits not followed by another: each position is tried once, so a 10 MB line costs linear
# time (the pattern without the look-behind retried every suffix of a long word: quadratic), and
# int() never meets '²' or 5,000 digits.
_KV = re.compile(r"(?<![\w\-()%/])([A-Za-z_][\w\-()%/]*)=(-?[0-9]{1,20})(?![0-9])", re.ASCII)


@dataclass
class NvfsStats:
    gds_version: str | None = None
    stats_version: str | None = None
    driver_version: str | None = None
    peer_direct: bool | None = None
    io_stats: bool | None = None
    peer_io_stats: bool | None = None
    log_level: str | None = None
    active_shadow_mib: int | None = None
    active_process: int | None = None
    counters: dict[str, dict[str, int]] = field(default_factory=dict)  # "Reads" -> {"err": 0, ...}
    gpus: list[dict] = field(default_factory=list)
    unparsed: list[str] = field(default_factory=list)


def _bool(word: str) -> bool | None:
    w = word.strip().lower()
    return True if w in ("true", "enabled", "yes", "1") else False if w in ("false", "disabled", "no", "0") else None


# the header lines of /proc/driver/nvidia-fs/stats that carry one value each
_STATS_FIELDS = fields(
    (r"^GDS Version:\s*(\S+)", "gds_version", str),
    (r"^NVFS statistics\(ver:\s*([\d.]+)\)", "stats_version", str),
    (r"^NVFS Driver\(version:\s*([\d.]+)\)", "driver_version", str),
    (r"^Mellanox PeerDirect Supported:\s*(\w+)", "peer_direct", _bool),
    (r"^Logging level:\s*(\w+)", "log_level", str),
    (r"^Active Shadow-Buffer \(MiB\):\s*([0-9]+)", "active_shadow_mib", ascii_int),
    (r"^Active Process:\s*([0-9]+)", "active_process", ascii_int),
)


def parse_stats(text: str) -> NvfsStats:
    s = NvfsStats()
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        if set_field(s, line, _STATS_FIELDS):
            continue
        m = re.match(r"^IO stats:\s*(\w+),\s*peer IO stats:\s*(\w+)", line)
        if m:
            s.io_stats, s.peer_io_stats = _bool(m.group(1)), _bool(m.group(2))
            continue
        m = re.match(r"^GPU\s+([0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])\s+uuid:(\S+)\s*:\s*(.*)$", line)
        if m:
            gpu = {"bdf": m.group(1).lower(), "uuid": m.group(2)}
            gpu.update({k: int(v) for k, v in _KV.findall(m.group(3))})
            s.gpus.append(gpu)
            continue
        m = re.match(r"^([A-Za-z][A-Za-z0-9 \t\-]*):(.*)$", line)  # (one quantifier over the spaces: linear)
        if m and _KV.search(m.group(2)):
            name = m.group(1).strip()
            s.counters.setdefault(name, {}).update({k: int(v) for k, v in _KV.findall(m.group(2))})
            continue
        s.unparsed.append(raw)
    return s


def parse_version(text: str) -> str | None:
    m = re.search(r"version:\s*([\d.]+)", text or "")
    return m.group(1) if m else None


def parse_modules(text: str) -> dict[str, str]:
    """'nvme: (null)' / 'wekafsio: 1' lines -> {name: version}."""
    out = {}
    for line in (text or "").splitlines():
        k, sep, v = line.partition(":")
        if sep and k.strip():
            out[k.strip()] = v.strip()
    return out


def parse_peer_distance(text: str) -> list[dict]:
    """Rows 'gpu<TAB>peer<TAB>peerrank<TAB>p2pdist<TAB>link<TAB>gen<TAB>numa<TAB>np2p<TAB>class'."""
    rows = []
    bdf = r"([0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7])"
    hx = r"(0x[0-9a-f]{1,16})"  # (bounded: a value, not a 5,000-digit number)
    for line in (text or "").splitlines():
        m = re.match(
            rf"^{bdf}\s+{bdf}\s+{hx}\s+{hx}\s+{hx}\s+{hx}\s+{hx}\s+([0-9]{{1,20}})\s+(\S+)",
            line.strip(),
            re.I,
        )
        if m:
            rows.append(
                {
                    "gpu": m.group(1).lower(),
                    "peer": m.group(2).lower(),
                    "peerrank": int(m.group(3), 16),
                    "p2pdist": int(m.group(4), 16),
                    "link": int(m.group(5), 16),
                    "gen": int(m.group(6), 16),
                    "numa": int(m.group(7), 16),
                    "np2p": int(m.group(8)),
                    "class": m.group(9),
                }
            )
    return rows


def parse_peer_affinity(text: str) -> dict[str, list[int]]:
    """'GPU :0000:ca:00.0 :0 0 ... 0' -> {bdf: 33 counts} (32 PCI distances + cross root port)."""
    out = {}
    for line in (text or "").splitlines():
        m = re.match(r"^GPU\s*:\s*([0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.\d)\s*:\s*(.*)$", line.strip(), re.I)
        if m:
            counts = [ascii_int(x) for x in m.group(2).split()]
            if all(c is not None for c in counts):
                out[m.group(1).lower()] = [c for c in counts if c is not None]
    return out


@dataclass
class NvfsState:
    loaded: bool
    module_version: str | None = None
    proc_version: str | None = None
    devices: list[str] = field(default_factory=list)  # /dev/nvidia-fs*
    devcount: int | None = None
    params: dict[str, str] = field(default_factory=dict)
    stats: NvfsStats | None = None
    modules: dict[str, str] | None = None
    peer_distance: list[dict] = field(default_factory=list)
    peer_affinity: dict[str, list[int]] = field(default_factory=dict)
    bridges: list[str] = field(default_factory=list)


def read_state(fs: FsRoot, loaded: bool) -> NvfsState:
    st = NvfsState(loaded=loaded)
    st.module_version = fs.read_text("/sys/module/nvidia_fs/version")
    st.proc_version = parse_version(fs.read_text(f"{NVFS_PROC}/version") or "")
    st.devices = [f"/dev/{d}" for d in fs.listdir("/dev") if d.startswith("nvidia-fs")]
    dc = fs.read_text(f"{NVFS_PROC}/devcount")
    st.devcount = ascii_int(dc.strip(), 1 << 20) if dc else None  # isdigit() is true for '²': int() then failed
    for p in NVFS_PARAMS:
        v = fs.read_text(f"/sys/module/nvidia_fs/parameters/{p}")
        if v is not None:
            st.params[p] = v
    stats = fs.read_text(f"{NVFS_PROC}/stats")
    st.stats = parse_stats(stats) if stats is not None else None
    mods = fs.read_text(f"{NVFS_PROC}/modules")
    st.modules = parse_modules(mods) if mods is not None else None
    st.peer_distance = parse_peer_distance(fs.read_text(f"{NVFS_PROC}/peer_distance") or "")
    st.peer_affinity = parse_peer_affinity(fs.read_text(f"{NVFS_PROC}/peer_affinity") or "")
    st.bridges = [b for b in (fs.read_text(f"{NVFS_PROC}/bridges") or "").split() if b]
    return st
