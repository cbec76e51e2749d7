"""cufile.json: find it the way libcufile does, parse it (JSON with // and /* */ comments, as
NVIDIA's own template has), and check every known key's type and range.

Key list and defaults: NVIDIA GDS configuration guide §4.2.2 template and the key strings of
libcufile 1.15/1.20 (../shared/research/cufile-kvikio.md §2.2). Unknown keys are reported with the
nearest known name, because libcufile ignores a misspelt key silently and runs on its default.
"""

from __future__ import annotations

import ipaddress
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from .bounded import loads_json
from .platform.fsroot import FsRoot
from .verdicts import Severity

BOOL, INT, STR, LIST_INT, LIST_STR, DICT, ANY = "bool", "int", "str", "list[int]", "list[str]", "object", "any"

_FS_RDMA = ("lustre", "beegfs", "gpfs", "nfs", "weka", "scatefs", "panfs")
_FS_P2PDMA = ("lustre", "beegfs", "gpfs", "nfs", "scatefs", "virtiofs", "panfs")

# path -> (type, constraint) ; constraint: (min, max, multiple_of) for ints, tuple of choices for str
SCHEMA: dict[str, tuple] = {
    "logging.dir": (STR, None),
    "logging.level": (STR, ("NOTICE", "ERROR", "WARN", "INFO", "DEBUG", "TRACE")),
    "logging.max_file_size_mb": (INT, (-1, None, None)),
    "profile.nvtx": (BOOL, None),
    "profile.cufile_stats": (INT, (0, 3, None)),
    "execution.max_io_queue_depth": (INT, (1, None, None)),
    "execution.max_io_threads": (INT, (0, None, None)),
    "execution.parallel_io": (BOOL, None),
    "execution.min_io_threshold_size_kb": (INT, (4, None, 4)),
    "execution.max_request_parallelism": (INT, (0, None, None)),
    "properties.max_direct_io_size_kb": (INT, (64, None, 64)),
    "properties.max_device_cache_size_kb": (INT, (0, None, 4)),
    "properties.per_buffer_cache_size_kb": (INT, (64, 16384, 64)),
    "properties.gpu_bounce_buffer_slab_config": (DICT, None),
    "properties.gpu_bounce_buffer_slab_config.slab_size_kb": (LIST_INT, None),
    "properties.gpu_bounce_buffer_slab_config.slab_count": (LIST_INT, None),
    "properties.max_device_pinned_mem_size_kb": (INT, (0, None, 4)),
    "properties.posix_pool_slab_size_kb": (LIST_INT, None),
    "properties.posix_pool_slab_count": (LIST_INT, None),
    "properties.use_poll_mode": (BOOL, None),
    "properties.poll_mode_max_size_kb": (INT, (0, None, 4)),
    "properties.use_pci_p2pdma": (BOOL, None),
    "properties.allow_compat_mode": (BOOL, None),
    "properties.force_compat_mode": (BOOL, None),
    "properties.gds_rdma_write_support": (BOOL, None),
    "properties.io_batchsize": (INT, (1, None, None)),
    "properties.io_priority": (STR, ("default", "low", "med", "high")),
    "properties.max_batch_io_size": (INT, (1, None, None)),
    "properties.max_batch_io_timeout_msecs": (INT, (0, None, None)),
    "properties.rdma_dev_addr_list": (LIST_STR, None),
    "properties.rdma_load_balancing_policy": (
        STR,
        ("FirstFit", "MaxMinFit", "RoundRobin", "RoundRobinMaxMin", "Randomized"),
    ),
    "properties.rdma_dynamic_routing": (BOOL, None),
    "properties.rdma_dynamic_routing_order": (LIST_STR, None),
    "properties.rdma_dc_key": (STR, None),
    "properties.rdma_access_mask": (STR, None),
    "properties.rdma_peer_type": (STR, ("peer_mem", "dmabuf")),
    "properties.rdma_service_level": (INT, (0, 15, None)),
    "properties.allow_system_memory": (BOOL, None),
    "properties.prefer_iouring": (BOOL, None),
    "properties.force_odirect_mode": (BOOL, None),
    "properties.vanilla_posix_io_mode": (BOOL, None),
    "properties.posix_io_mode": (BOOL, None),
    "properties.gds_fallback_io": (BOOL, None),
    "properties.compat_odirect_unaligned_read_split": (BOOL, None),
    "properties.compat_odirect_unaligned_read_split_min_size_kb": (INT, (0, None, 4)),
    "fs.generic.posix_unaligned_writes": (BOOL, None),
    "fs.weka.rdma_write_support": (BOOL, None),
    "fs.gpfs.gds_write_support": (BOOL, None),
    "fs.gpfs.gds_async_support": (BOOL, None),
    "block.nvme.use_pci_p2pdma": (BOOL, None),
    "block.nvmeof.use_pci_p2pdma": (BOOL, None),
    "block.raid.use_pci_p2pdma": (BOOL, None),
    "miscellaneous.api_check_aggressive": (BOOL, None),
    "miscellaneous.skip_topology_detection": (BOOL, None),
    "miscellaneous.enable_static_routing": (BOOL, None),
    "miscellaneous.static_routing_filepath": (STR, None),
    "miscellaneous.enable_static_config": (BOOL, None),
    "miscellaneous.static_config_filepath": (STR, None),
    "miscellaneous.rdma_token_reset_timeout_secs": (INT, (0, None, None)),
    "miscellaneous.stream_memops_bypass": (BOOL, None),
    "miscellaneous.rcu_library_used": (BOOL, None),
}
for _k in ("drivers", "devices", "mounts", "filesystems", "fsids"):
    SCHEMA[f"denylist.{_k}"] = (LIST_STR, None)
for _fs in ("lustre", "beegfs", "scatefs"):
    SCHEMA[f"fs.{_fs}.posix_gds_min_kb"] = (INT, (0, None, None))
for _fs in _FS_RDMA:
    SCHEMA[f"fs.{_fs}.rdma_dev_addr_list"] = (LIST_STR, None)
    SCHEMA[f"fs.{_fs}.mount_table"] = (DICT, None)
for _fs in _FS_P2PDMA:
    SCHEMA[f"fs.{_fs}.use_pci_p2pdma"] = (BOOL, None)
# 1.19/1.20 RDMA keys: known, types not audited (libcufile 1.20 strings only).
RDMA_KEYS_1_19 = (
    "rdma_transport_type",
    "allow_rdma_token_reset",
    "rdma_multipath_enabled",
    "rdma_max_backup_devices",
    "rdma_io_retry_count",
    "rdma_io_retry_delay_ms",
    "rdma_failback_enabled",
    "rdma_failback_delay_ms",
    "rdma_health_check_interval_ms",
    "rdma_async_event_monitoring",
    "rdma_unhealthy_threshold",
)
for _k in RDMA_KEYS_1_19:
    SCHEMA[f"properties.{_k}"] = (ANY, None)
SECTIONS = {k.split(".")[0] for k in SCHEMA} | {
    ".".join(k.split(".")[:2]) for k in SCHEMA if k.startswith(("fs.", "block."))
}
# names 'gdscheck -p' prints for a key that differ from the cufile.json key (libcufile 1.15 strings:
# 'properties.use_compat_mode :' is printed, 'properties.allow_compat_mode' is what it reads)
GDSCHECK_NAMES = {"properties.use_compat_mode": "properties.allow_compat_mode"}
CONTAINERS = {"properties.gpu_bounce_buffer_slab_config"} | {f"fs.{f}.mount_table" for f in _FS_RDMA}
ROUTING_ORDER = ("GPU_MEM_NVLINKS", "GPU_MEM", "SYS_MEM", "P2P")


@dataclass
class ConfigIssue:
    key: str
    severity: Severity
    message: str

    def to_json(self) -> dict:
        return self.__dict__.copy()


@dataclass
class CufileConfig:
    path: str | None
    found_via: str | None
    searched: list[str] = field(default_factory=list)
    data: dict | None = None
    parse_error: str | None = None
    issues: list[ConfigIssue] = field(default_factory=list)

    def get(self, key: str, default=None):
        """The value at KEY as the file has it, when it has the type SCHEMA gives KEY; otherwise
        DEFAULT. A value of the wrong type is validate()'s finding (FAIL, named), never a value the
        checks compute with (issue 42: rdma_dev_addr_list 5 ended check with an internal error)."""
        cur = self.data
        for part in key.split("."):
            if not isinstance(cur, dict) or part not in cur:
                return default
            cur = cur[part]
        spec = SCHEMA.get(key)
        if spec is not None and cur is not None and not _type_ok(spec[0], cur):
            return default
        return cur


def strip_comments(text: str) -> str:
    """Remove // and /* */ comments outside strings; keep newlines so error positions stay true."""
    out, i, n = [], 0, len(text)
    in_str = False
    while i < n:
        c = text[i]
        if in_str:
            out.append(c)
            if c == "\\" and i + 1 < n:
                out.append(text[i + 1])
                i += 2
                continue
            if c == '"':
                in_str = False
            i += 1
        elif c == '"':
            in_str = True
            out.append(c)
            i += 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            chunk = text[i : n if j < 0 else j + 2]
            out.append("\n" * chunk.count("\n"))
            i = n if j < 0 else j + 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


MAX_ISSUES = 100  # listed per file; the rest are counted (renderers stay fast on hostile files)


def locate(fs: FsRoot, env: Mapping[str, str] | None = None) -> tuple[str | None, str | None, list[str]]:
    """(path, how, searched) in libcufile's order: CUFILE_ENV_PATH_JSON, /etc/cufile.json, then
    the CUDA toolkit's gds/cufile.json (not read by libcufile, but the template users copy)."""
    if env is None:
        env = os.environ
    searched: list[str] = []
    p = env.get("CUFILE_ENV_PATH_JSON") if fs.is_live else None
    if p:
        searched.append(p)
        if fs.exists(p):
            return p, "CUFILE_ENV_PATH_JSON", searched
    searched.append("/etc/cufile.json")
    if fs.exists("/etc/cufile.json"):
        return "/etc/cufile.json", "/etc/cufile.json", searched
    for cand in ("/usr/local/cuda/gds/cufile.json",):
        searched.append(cand)
        if fs.exists(cand):
            return cand, "CUDA toolkit template (libcufile will NOT read it: copy to /etc/cufile.json)", searched
    return None, None, searched


def parse(text: str, path: str = "cufile.json") -> CufileConfig:
    cfg = CufileConfig(path=path, found_via=None)
    stripped = strip_comments(text)
    dups: list[str] = []

    def hook(pairs):
        seen = {}
        for k, v in pairs:
            if k in seen:
                dups.append(k)
            seen[k] = v
        return seen

    try:
        data = loads_json(stripped, object_pairs_hook=hook)
    except json.JSONDecodeError as e:
        cfg.parse_error = f"{path} line {e.lineno} column {e.colno}: {e.msg}"
        return cfg
    except ValueError as e:  # gdsdiag's limits: depth, number size, NaN/Infinity
        cfg.parse_error = f"{path}: {e}"
        return cfg
    if not isinstance(data, dict):
        cfg.parse_error = f"{path}: top level is a {type(data).__name__}, not an object"
        return cfg
    cfg.data = data
    for d in dups:
        cfg.issues.append(ConfigIssue(d, Severity.WARN, f"key '{d}' appears twice; only the last value counts"))
    _validate(data, "", cfg.issues)
    _semantic(cfg)
    if len(cfg.issues) > MAX_ISSUES:
        more = len(cfg.issues) - MAX_ISSUES
        cfg.issues = cfg.issues[:MAX_ISSUES] + [ConfigIssue("", Severity.WARN, f"{more} more issues not listed")]
    return cfg


def load(fs: FsRoot, env: dict | None = None) -> CufileConfig:
    path, how, searched = locate(fs, env)
    if path is None:
        return CufileConfig(path=None, found_via=None, searched=searched)
    # bounded: CUFILE_ENV_PATH_JSON may name /dev/zero, a FIFO or a 50 MB file (docs/security.md)
    from .bounded import MAX_CUFILE_JSON

    raw, why = fs.read_checked(path, MAX_CUFILE_JSON)
    if raw is None:
        cfg = CufileConfig(path=path, found_via=how, searched=searched)
        cfg.parse_error = f"{path}: cannot read: {why}"
        return cfg
    cfg = parse(raw.decode("utf-8", "replace"), path)
    cfg.found_via, cfg.searched = how, searched
    return cfg


def _type_ok(kind: str, v) -> bool:
    if kind == ANY:
        return True
    if kind == BOOL:
        return isinstance(v, bool)
    if kind == INT:
        return isinstance(v, int) and not isinstance(v, bool)
    if kind == STR:
        return isinstance(v, str)
    if kind == LIST_INT:
        return isinstance(v, list) and all(isinstance(x, int) and not isinstance(x, bool) for x in v)
    if kind == LIST_STR:
        return isinstance(v, list) and all(isinstance(x, str) for x in v)
    if kind == DICT:
        return isinstance(v, dict)
    return False


def _validate(node: dict, prefix: str, issues: list[ConfigIssue]) -> None:
    for k, v in node.items():
        key = f"{prefix}{k}"
        if key in CONTAINERS:
            if not isinstance(v, dict):
                issues.append(ConfigIssue(key, Severity.FAIL, f"{key} must be an object, got {type(v).__name__}"))
            elif key == "properties.gpu_bounce_buffer_slab_config":
                _validate(v, key + ".", issues)
            continue
        if isinstance(v, dict) and (key in SECTIONS or any(s.startswith(key + ".") for s in SCHEMA)):
            _validate(v, key + ".", issues)
            continue
        if key == "blacklist" or key.startswith("blacklist."):
            new = "denylist" + key[len("blacklist") :]
            issues.append(ConfigIssue(key, Severity.WARN, f"'{key}' is the old name: libcufile reads '{new}'"))
            continue
        spec = SCHEMA.get(key)
        if spec is None and key in GDSCHECK_NAMES:
            # gdscheck -p prints allow_compat_mode as 'properties.use_compat_mode' (libcufile's own display
            # string), and people copy that name into cufile.json (jmdelahanty/palette: use_compat_mode
            # false to turn compat off); spelling similarity pointed them at force_compat_mode instead
            issues.append(
                ConfigIssue(
                    key,
                    Severity.WARN,
                    f"unknown key '{key}' is ignored by libcufile: it is the name 'gdscheck -p' prints for "
                    f"'{GDSCHECK_NAMES[key]}', the key libcufile reads",
                )
            )
            continue
        if spec is None:
            import difflib  # only for an unknown key: not every 'check' needs it

            # spelling hints cost ~2 ms each: a hostile file with 60,000 keys took 36 s
            near = (
                difflib.get_close_matches(key, list(SCHEMA) + sorted(SECTIONS), n=1, cutoff=0.75)
                if len(issues) < MAX_ISSUES
                else []
            )
            hint = f"; did you mean '{near[0]}'?" if near else ""
            issues.append(ConfigIssue(key, Severity.WARN, f"unknown key '{key}' is ignored by libcufile{hint}"))
            continue
        kind, cons = spec
        if not _type_ok(kind, v):
            issues.append(
                ConfigIssue(key, Severity.FAIL, f"{key} must be {kind}, got {json.dumps(v)[:40]} ({type(v).__name__})")
            )
            continue
        if kind == INT and cons:
            lo, hi, mult = cons
            if lo is not None and v < lo or hi is not None and v > hi:
                rng = f"{lo}..{hi}" if hi is not None else f">= {lo}"
                issues.append(ConfigIssue(key, Severity.FAIL, f"{key} = {v} is out of range ({rng})"))
            elif mult and v % mult:
                issues.append(ConfigIssue(key, Severity.WARN, f"{key} = {v} is not a multiple of {mult}"))
        if kind == STR and isinstance(cons, tuple) and v not in cons:
            issues.append(ConfigIssue(key, Severity.FAIL, f"{key} = {v!r} is not one of {', '.join(cons)}"))


def _semantic(cfg: CufileConfig) -> None:
    g, issues = cfg.get, cfg.issues
    for a, b in (
        ("properties.posix_pool_slab_size_kb", "properties.posix_pool_slab_count"),
        (
            "properties.gpu_bounce_buffer_slab_config.slab_size_kb",
            "properties.gpu_bounce_buffer_slab_config.slab_count",
        ),
    ):
        la, lb = g(a), g(b)
        if isinstance(la, list) and isinstance(lb, list) and len(la) != len(lb):
            issues.append(ConfigIssue(a, Severity.FAIL, f"{a} has {len(la)} entries but {b} has {len(lb)}"))
        if isinstance(la, list) and any(isinstance(x, int) and x % 4 for x in la):
            issues.append(ConfigIssue(a, Severity.WARN, f"{a} entries must be page aligned (multiples of 4 KiB)"))
    order = g("properties.rdma_dynamic_routing_order")
    if isinstance(order, list):
        bad = [x for x in order if x not in ROUTING_ORDER]
        if bad:
            issues.append(
                ConfigIssue(
                    "properties.rdma_dynamic_routing_order",
                    Severity.FAIL,
                    f"unknown routing mode(s) {bad}; valid: {', '.join(ROUTING_ORDER)}",
                )
            )
    for key in ["properties.rdma_dev_addr_list"] + [f"fs.{f}.rdma_dev_addr_list" for f in _FS_RDMA]:
        lst = g(key)
        if isinstance(lst, list):
            for a in lst:
                try:
                    ipaddress.ip_address(a)
                except ValueError:
                    issues.append(ConfigIssue(key, Severity.FAIL, f"{key}: {a!r} is not an IP address"))
    cache, per, batch = (
        g("properties.max_device_cache_size_kb"),
        g("properties.per_buffer_cache_size_kb"),
        g("properties.io_batchsize"),
    )
    if (
        all(isinstance(x, int) and not isinstance(x, bool) for x in (cache, per, batch))
        and per > 0
        and cache // per < batch
    ):
        issues.append(
            ConfigIssue(
                "properties.max_device_cache_size_kb",
                Severity.WARN,
                f"max_device_cache_size_kb / per_buffer_cache_size_kb = {cache // per} < io_batchsize {batch} "
                "(NVIDIA's template notes it must be >=)",
            )
        )
