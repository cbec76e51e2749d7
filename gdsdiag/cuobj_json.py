"""cuobj.json: the cuObject client's own configuration (GDS 1.20, cuObject client ≥ 1.4.0), found
the way NVIDIA's release notes say, and the environment variables that override it.

NVIDIA GDS release notes, New Features and Changes, v1.20
(docs.nvidia.com/gpudirect-storage/release-notes/new-features-and-changes.html):
  "cuObject uses /etc/cuobj.json by default. A nonempty CUOBJ_ENV_PATH_JSON selects a custom file
   in place of /etc/cuobj.json. The custom file is not applied as an overlay."
  "CUOBJ_* environment-variable overrides … take precedence over JSON settings. Corresponding
   CUFILE_* variables are accepted as migration fallbacks only when the matching CUOBJ_* variable
   is absent. This fallback does not apply to JSON configuration-file selection."
The file is parsed as cufile.json is (JSON with // and /* */ comments); its keys are not judged
against cufile.json's schema: cuObject's values differ (rdma_peer_type "nvidia_peermem" in the
cuObjClient API guide) and no key list of cuobj.json is published.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from . import cufile_json
from .bounded import MAX_CUFILE_JSON  # the same bound as cufile.json (docs/security.md)
from .platform.fsroot import FsRoot

DEFAULT = "/etc/cuobj.json"
SELECTOR = "CUOBJ_ENV_PATH_JSON"
CUFILE_SELECTOR = "CUFILE_ENV_PATH_JSON"  # selects cufile.json only, never cuobj.json
# The CUOBJ_* names libcufile 1.20.0.107 reads (its strings; each has a CUFILE_* twin of the same
# suffix in the same library, which is the "matching" variable of NVIDIA's note):
# tests/fixtures/libcufile-strings/libcufile-1.20.0.107-cuobject-and-static-config.txt
CUOBJ_VARS = (
    "CUOBJ_ENV_PATH_JSON",
    "CUOBJ_VISIBLE_DEVICES",
    "CUOBJ_LOGFILE_MAX_SIZE_MB",
    "CUOBJ_STATS_LEVEL",
    "CUOBJ_RDMA_DC_KEY",
    "CUOBJ_LOGGING_LEVEL",
    "CUOBJ_IO_PRIORITY",
    "CUOBJ_DMABUF_ENABLE",
    "CUOBJ_MAX_DEVICE_CACHE_SIZE",
    "CUOBJ_PER_BUFFER_CACHE_SIZE",
    "CUOBJ_STREAM_MEMOPS_BYPASS",
    "CUOBJ_RDMA_ALLOW_RDMA_TOKEN_RESET",
    "CUOBJ_RDMA_TOKEN_RESET_TIMEOUT_SECS",
)


@dataclass
class CuobjConfig:
    path: str | None  # the file in effect; None: built-in defaults
    found_via: str | None
    searched: list[str] = field(default_factory=list)
    data: dict | None = None
    parse_error: str | None = None
    missing_selected: str | None = None  # CUOBJ_ENV_PATH_JSON named a file that is not there
    overrides: list[tuple[str, str]] = field(default_factory=list)  # CUOBJ_* set
    unknown: list[str] = field(default_factory=list)  # CUOBJ_* set that libcufile 1.20 does not read
    fallbacks: list[tuple[str, str]] = field(default_factory=list)  # CUFILE_* that apply for lack of CUOBJ_*

    @property
    def present(self) -> bool:
        return bool(self.path or self.missing_selected or self.overrides or self.fallbacks or self.unknown)

    def leaves(self) -> dict[str, object]:
        return flatten(self.data or {})


def flatten(d: dict, prefix: str = "") -> dict[str, object]:
    out: dict[str, object] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(flatten(v, key + "."))
        else:
            out[key] = v
    return out


def env_layers(env: Mapping[str, str]) -> tuple[list[tuple[str, str]], list[tuple[str, str]], list[str]]:
    """(CUOBJ_* set, CUFILE_* that cuObject takes because its CUOBJ_* twin is absent, CUOBJ_* set
    that libcufile 1.20 does not read). Only a CUFILE_* with a CUOBJ_* twin is a fallback; the file
    selectors never are: NVIDIA says the fallback does not select files."""
    known = set(CUOBJ_VARS) - {SELECTOR}
    overrides = sorted((k, v) for k, v in env.items() if k in known)
    unknown = sorted(k for k in env if k.startswith("CUOBJ_") and k not in CUOBJ_VARS)
    fallbacks = sorted(
        (k, v)
        for k, v in env.items()
        if k.startswith("CUFILE_")
        and "CUOBJ_" + k[len("CUFILE_") :] in known
        and "CUOBJ_" + k[len("CUFILE_") :] not in env
    )
    return overrides, fallbacks, unknown


def load(fs: FsRoot, env: Mapping[str, str] | None = None) -> CuobjConfig:
    """Environment is read on a live node only (a snapshot does not carry the caller's)."""
    if env is None:
        env = os.environ
    env = env if fs.is_live else {}
    cfg = CuobjConfig(path=None, found_via=None)
    cfg.overrides, cfg.fallbacks, cfg.unknown = env_layers(env)
    chosen = env.get(SELECTOR)
    if chosen:
        cfg.searched.append(chosen)
        if not fs.exists(chosen):
            # "in place of /etc/cuobj.json": the default is not read instead
            cfg.missing_selected = chosen
            return cfg
        path, how = chosen, SELECTOR
    else:
        cfg.searched.append(DEFAULT)
        if not fs.exists(DEFAULT):
            return cfg
        path, how = DEFAULT, DEFAULT
    cfg.path, cfg.found_via = path, how
    raw, why = fs.read_checked(path, MAX_CUFILE_JSON)
    if raw is None:
        cfg.parse_error = f"{path}: cannot read: {why}"
        return cfg
    parsed = cufile_json.parse(raw.decode("utf-8", "replace"), path)
    cfg.data, cfg.parse_error = parsed.data, parsed.parse_error
    return cfg
