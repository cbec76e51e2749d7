"""The validation policy: a YAML file checked against a schema, merged over the shipped default.

Schema = the shipped default (default_policy.yaml) plus the types below: every key a user writes must
exist in the default, with a value of the listed type. A wrong key or type is one error line naming
the key and the fix — a typo must never silently leave a threshold on its default.
"""

from __future__ import annotations

import copy
import difflib
import math
import os
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..bounded import MAX_POLICY, count_nodes, short_repr
from ..errors import GdsdiagError
from ..routes import Route

if TYPE_CHECKING:
    from ..schema import validate as schema

DEFAULT_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "default_policy.yaml")
ROUTE_NAMES = tuple(r.value for r in Route)
ACTIONS = ("fail", "warn", "ignore")
IOMMU_MODES = ("off", "passthrough", "translated", "mixed", "unknown")

# dotted key -> (kind, description). kinds: int?, float?, str?, bool, action, routes, iommu, sizemap,
# sizelist, intlist, strlist, gpus, mounts, sweepcfg, size
SCHEMA: dict[str, tuple[str, str]] = {
    "version": ("version", "policy format version (1)"),
    "expect.gpus": ("int?", "expected GPU count"),
    "expect.nics": ("int?", "expected NIC count (Ethernet/InfiniBand PCI functions)"),
    "expect.nvme": ("int?", "expected NVMe controller count"),
    "routes.allowed": ("routes", "routes a cuFile I/O may take on every mount"),
    "mounts": ("mounts", "per-mount entries: {path, allowed?, min_gbps?}"),
    "pcie.acs_redirect": ("action", "ACS redirect on a GPU↔NVMe/NIC path"),
    "pcie.downtrained": ("action", "a link below its maximum on a GPU↔NVMe/NIC path"),
    "iommu.allowed": ("iommu", "IOMMU modes accepted"),
    "drivers.nvidia_min": ("str?", "minimum NVIDIA driver version"),
    "drivers.nvidia_fs_required": ("bool", "nvidia-fs must be loaded"),
    "drivers.nvidia_fs_min": ("str?", "minimum nvidia-fs version when loaded"),
    "drivers.libcufile_min": ("str?", "minimum libcufile version"),
    "cufile.require_file": ("bool", "a cufile.json must exist"),
    "cufile.ignored_keys": ("action", "cufile.json keys the installed libcufile ignores"),
    "cufile.compat_pool.concurrent_ios": ("int?", "concurrent I/Os the compat bounce pool must serve"),
    "cufile.compat_pool.io_size": ("size", "size of each of those I/Os"),
    "container.require_udev": ("bool", "/run/udev must be visible"),
    "sweep.gpus": ("gpus", "'all' or a list of GPU indices to sweep"),
    "sweep.quick": ("sweepcfg", "sweep points of --quick"),
    "sweep.full": ("sweepcfg", "sweep points of --full"),
    "sweep.min_gbps": ("sizemap", "minimum GB/s per GPU per mount by block size"),
    "sweep.max_p99_us": ("sizemap", "maximum p99 latency (µs) by block size"),
    "io.max_compat_share": ("share", "largest share of compat-mode I/O (0..1)"),
    "io.max_bounce_share": ("share", "largest share of DRAM-bounce I/O (0..1)"),
}
SWEEP_KEYS = {
    "size": "size",
    "bs": "sizelist",
    "threads": "intlist",
    "rw": "strlist",
    "modes": "strlist",
    "seconds": "float",
}


def _size(v, key: str) -> int:
    from ..units import parse_size

    try:
        n = parse_size(str(v))
    except ValueError:
        n = 0
    if n <= 0:
        raise GdsdiagError(f"policy {key}: {short_repr(v)} is not a size", "write sizes like 4k, 1m, 16m, 1g")
    return n


MAX_POLICY_NUMBER = 1 << 40  # counts, thresholds and sizes: far above any real one, far below trouble
_VERSION = re.compile(r"[0-9]{1,9}(?:\.[0-9]{1,9}){0,7}")


def _num(v) -> bool:
    """A finite number of a bounded size (YAML reads '.nan', '.inf' and 10**400 as numbers: a NaN
    threshold compared False with every measurement and so never failed)."""
    if not isinstance(v, (int, float)) or isinstance(v, bool):
        return False
    return abs(v) <= MAX_POLICY_NUMBER and (isinstance(v, int) or math.isfinite(v))


class _Bad:
    """The "not valid" error, its text made only when raised and from a bounded repr (the value
    may be 10⁹ items reached through YAML aliases)."""

    def __init__(self, kind: str, key: str, v):
        self.kind, self.key, self.v = kind, key, v

    def __call__(self) -> GdsdiagError:
        return GdsdiagError(
            f"policy {self.key}: {short_repr(self.v)} is not valid ({self.kind})",
            f"see docs/validate.md, Policy: {self.key}",
        )


def _check(kind: str, key: str, v):
    bad = _Bad(kind, key, v)
    if kind == "version":
        if v != 1:
            raise GdsdiagError(f"policy version {short_repr(v)} is not supported", "write 'version: 1'")
    elif kind.endswith("?") and v is None:
        return
    elif kind in ("int?",):
        if not isinstance(v, int) or isinstance(v, bool) or v < 0 or v > MAX_POLICY_NUMBER:
            raise bad()
    elif kind == "str?":  # (a version: '2.25.7', 565.47; ASCII digits, '2.25.٧' is none)
        if not isinstance(v, (str, int, float)) or isinstance(v, bool) or not _VERSION.fullmatch(str(v)):
            raise bad()
    elif kind == "bool":
        if not isinstance(v, bool):
            raise bad()
    elif kind == "action":
        if v not in ACTIONS:
            raise GdsdiagError(
                f"policy {key}: {short_repr(v)} is not one of {', '.join(ACTIONS)}",
                f"set {key} to fail, warn or ignore",
            )
    elif kind == "routes":
        if not isinstance(v, list) or any(str(x).upper() not in ROUTE_NAMES for x in v):
            raise GdsdiagError(
                f"policy {key}: {short_repr(v)} names an unknown route",
                f"use route names from {', '.join(ROUTE_NAMES)}",
            )
    elif kind == "iommu":
        if not isinstance(v, list) or any(str(x) not in IOMMU_MODES for x in v):
            raise GdsdiagError(
                f"policy {key}: {short_repr(v)} names an unknown IOMMU mode", f"use {', '.join(IOMMU_MODES)}"
            )
    elif kind == "size":
        _size(v, key)
    elif kind == "sizemap":
        if not isinstance(v, dict) or any(not _num(x) or x < 0 for x in v.values()):
            raise bad()
        for k in v:
            _size(k, f"{key}.{k}")
    elif kind == "share":
        if not _num(v) or not 0 <= v <= 1:
            raise GdsdiagError(
                f"policy {key}: {short_repr(v)} is not a share between 0 and 1", "write e.g. 0.0 (none) or 0.05 (5 %)"
            )
    elif kind == "gpus":
        if v != "all" and not (isinstance(v, list) and all(_num(x) and isinstance(x, int) and x >= 0 for x in v)):
            raise bad()
    elif kind == "sweepcfg":
        if not isinstance(v, dict):
            raise bad()
        for k, x in v.items():
            sub = SWEEP_KEYS.get(k)
            if sub is None:
                raise GdsdiagError(f"policy {key}.{k} is not a sweep setting", f"use {', '.join(SWEEP_KEYS)}")
            if sub == "size":
                _size(x, f"{key}.{k}")
            elif sub == "sizelist":
                if not isinstance(x, list) or not x:
                    raise bad()
                for s in x:
                    _size(s, f"{key}.{k}")
            elif sub == "intlist" and not (
                isinstance(x, list) and x and all(_num(i) and isinstance(i, int) and i > 0 for i in x)
            ):
                raise bad()
            elif sub == "strlist" and not (isinstance(x, list) and x and all(isinstance(i, str) for i in x)):
                raise bad()
            elif sub == "float" and not (_num(x) and x > 0):
                raise bad()
    elif kind == "mounts":
        if not isinstance(v, list):
            raise bad()
        for i, m in enumerate(v):
            if not isinstance(m, dict) or not isinstance(m.get("path"), str):
                raise GdsdiagError(f"policy mounts[{i}] needs a 'path'", "write - path: /mnt/data")
            extra = set(m) - {"path", "allowed", "min_gbps"}
            if extra:
                raise GdsdiagError(
                    f"policy mounts[{i}]: unknown key(s) {', '.join(sorted(extra))}", "use path, allowed, min_gbps"
                )
            if "allowed" in m:
                _check("routes", f"mounts[{i}].allowed", m["allowed"])
            if "min_gbps" in m:
                _check("sizemap", f"mounts[{i}].min_gbps", m["min_gbps"])


def _flatten(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict) and key in SCHEMA_SECTIONS:
            out.update(_flatten(v, key + "."))
        else:
            out[key] = v
    return out


SCHEMA_SECTIONS = {".".join(k.split(".")[:i]) for k in SCHEMA for i in range(1, k.count(".") + 1)}


def _merge(base: dict, over: dict) -> dict:
    out = copy.deepcopy(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict) and k != "min_gbps" and k != "max_p99_us":
            out[k] = _merge(out[k], v)
        else:
            out[k] = v
    return out


@dataclass
class Policy:
    data: dict
    source: str

    def get(self, key: str):
        cur = self.data
        for p in key.split("."):
            cur = cur[p]
        return cur

    def allowed_routes(self, mount_entry: dict | None = None) -> list[str]:
        lst = (mount_entry or {}).get("allowed", self.get("routes.allowed"))
        return [str(x).upper() for x in lst]

    def to_json(self) -> schema.Policy:
        return {"source": self.source, "values": self.data}


def parse(text: str, source: str) -> dict:
    import yaml

    try:
        doc = yaml.safe_load(text)
    except (RecursionError, ValueError) as e:
        # nesting deeper than the parser's stack, an integer over Python's digit limit
        why = "nested too deep" if isinstance(e, RecursionError) else "a number too large"
        raise GdsdiagError(
            f"{source}: not a policy ({why})", "start from gdsdiag/validate/default_policy.yaml"
        ) from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" line {mark.line + 1} column {mark.column + 1}" if mark else ""
        raise GdsdiagError(
            f"{source}{where}: not valid YAML ({getattr(e, 'problem', None) or e})", "fix the YAML (indent with spaces)"
        ) from None
    if doc is None:
        doc = {}
    too_big = count_nodes(doc, 100_000, 16)  # the shipped policy has ~150 values, 4 levels
    if too_big:
        raise GdsdiagError(f"{source}: not a policy ({too_big})", "start from gdsdiag/validate/default_policy.yaml")
    if not isinstance(doc, dict):
        raise GdsdiagError(
            f"{source}: the policy must be a mapping, not a {type(doc).__name__}",
            "start from gdsdiag/validate/default_policy.yaml",
        )
    iom = doc.get("iommu")
    if isinstance(iom, dict) and isinstance(iom.get("allowed"), list):
        # YAML 1.1 reads a bare 'off' as false: that is what the user meant
        iom["allowed"] = ["off" if x is False else x for x in iom["allowed"]]
    for key, v in _flatten(doc).items():
        if key not in SCHEMA:
            near = difflib.get_close_matches(key, list(SCHEMA), n=1, cutoff=0.6)
            raise GdsdiagError(
                f"{source}: unknown policy key '{key}'" + (f" (did you mean '{near[0]}'?)" if near else ""),
                "see docs/validate.md, Policy, for every key",
            )
        _check(SCHEMA[key][0], key, v)
    return doc


def default_text() -> str:
    with open(DEFAULT_PATH, encoding="utf-8") as f:
        return f.read()


def load(path: str | None = None) -> Policy:
    base = parse(default_text(), "default policy")
    if path is None:
        return Policy(base, "default")
    from ..bounded import read_user_file

    # a regular file under the limit only: /dev/zero or a FIFO as --policy is refused at once
    data = read_user_file(path, "policy", MAX_POLICY, "check the --policy path", named=True)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise GdsdiagError(f"{path}: not UTF-8 text (byte {e.start})", "save the policy as UTF-8") from None
    return Policy(_merge(base, parse(text, path)), path)
