"""cuObject beside cuFile (GDS 1.20): which configuration file each reads, the environment that
overrides cuObject's, and the shared-runtime trap — in one process the first of the two to
initialise fixes the configuration for both."""

from __future__ import annotations

from ..cuobj_json import CUFILE_SELECTOR, DEFAULT, SELECTOR, flatten
from ..verdicts import Status
from .context import CheckContext
from .model import CheckResult, Evidence, plain

NOTES = "NVIDIA GDS release notes v1.20 (release-notes/new-features-and-changes.html)"
LIMITS = "NVIDIA GDS release notes v1.20, Known Limitations (release-notes/known-limitations.html)"
SHARED = (
    f"{LIMITS}: 'In GDS v1.20, cuFile and cuObject share a runtime within each process. The first successful "
    "initialization, whether explicit or implicit, selects the runtime configuration. Subsequent initialization "
    "through either interface reuses the active configuration without loading another JSON file or reapplying "
    "environment settings.'"
)


def check_cuobj(ctx: CheckContext) -> list[CheckResult]:
    c = ctx.cuobj
    cuf = ctx.cufile
    moved = cuf.get("properties.rdma_transport_type") if cuf.data else None
    if not c.present:
        ev = [Evidence(DEFAULT, "absent"), Evidence("environment", f"no {SELECTOR}, no CUOBJ_*")]
        summary = "no cuobj.json, no CUOBJ_* variables: a cuObject client ≥ 1.4.0 runs on its defaults"
        if moved is not None:
            summary += f"; cufile.json still sets properties.rdma_transport_type ({plain(moved)}), which cuObject reads from cuobj.json since 1.20"
            ev.append(Evidence(cuf.path or "cufile.json", f"properties.rdma_transport_type: {plain(moved)}"))
        return [
            CheckResult(
                "cuobj.json",
                "cuobj.json (cuObject configuration)",
                Status.INFO,
                summary,
                ev,
                f"{NOTES}: 'cuObject uses /etc/cuobj.json by default'; 'Moved properties.rdma_transport_type from "
                "the shipped cufile.json template to cuobj.json'",
                "put rdma_transport_type in /etc/cuobj.json" if moved is not None else "",
            )
        ]
    out = [_file_result(ctx)]
    if c.overrides or c.fallbacks or c.unknown:
        ev = [Evidence("environment", f"{k}={v}") for k, v in c.overrides[:12]]
        ev += [Evidence("environment", f"{k}: not a variable libcufile 1.20 reads") for k in c.unknown[:12]]
        ev += [
            Evidence("environment", f"{k}={v} (no CUOBJ_{k[len('CUFILE_') :]}: cuObject takes it)")
            for k, v in c.fallbacks[:12]
        ]
        out.append(
            CheckResult(
                "cuobj.env",
                "CUOBJ_* overrides",
                Status.WARN if c.unknown else Status.INFO,
                f"{len(c.overrides)} CUOBJ_* override(s), {len(c.fallbacks)} CUFILE_* fallback(s) for cuObject"
                + (f", {len(c.unknown)} unknown CUOBJ_* name(s)" if c.unknown else ""),
                ev,
                f"{NOTES}: 'CUOBJ_* … overrides … take precedence over JSON settings. Corresponding CUFILE_* variables "
                "are accepted as migration fallbacks only when the matching CUOBJ_* variable is absent.' The names "
                "are those libcufile 1.20.0.107 carries in its strings; another spelling is not one it looks up",
                "correct the name (gdsdiag/cuobj_json.py lists the ones libcufile reads)" if c.unknown else "",
            )
        )
    out.append(_shared_result(ctx))
    return out


def _file_result(ctx: CheckContext) -> CheckResult:
    c = ctx.cuobj
    cid, title = "cuobj.json", "cuobj.json (cuObject configuration)"
    why = (
        f"{NOTES}: 'A nonempty CUOBJ_ENV_PATH_JSON selects a custom file in place of /etc/cuobj.json. The custom "
        f"file is not applied as an overlay.' {CUFILE_SELECTOR} does not select it ('This fallback does not apply "
        "to JSON configuration-file selection')"
    )
    if c.missing_selected:
        return CheckResult(
            cid,
            title,
            Status.WARN,
            f"{SELECTOR}={c.missing_selected} names no file: cuObject does not fall back to {DEFAULT}",
            [Evidence(c.missing_selected, "missing")],
            why,
            f"point {SELECTOR} at an existing file, or unset it to use {DEFAULT}",
        )
    if c.path is None:
        return CheckResult(
            cid,
            title,
            Status.INFO,
            f"no {DEFAULT}: cuObject runs on its defaults plus the environment below",
            [Evidence(DEFAULT, "absent")],
            why,
        )
    if c.parse_error:
        return CheckResult(
            cid,
            title,
            Status.WARN,
            c.parse_error,
            [Evidence(c.path, "unparsable")],
            why,
            "fix the JSON at the position given",
        )
    leaves = c.leaves()
    ev = [Evidence(c.path, f"{len(leaves)} setting(s)")]
    summary = f"{c.path} (via {c.found_via}) is cuObject's configuration"
    if leaves.get("execution.parallel_io") is True:
        summary += "; execution.parallel_io is ignored there (cuObject forces it off)"
        ev.append(Evidence(c.path, "execution.parallel_io: true"))
    return CheckResult(cid, title, Status.INFO, summary, ev, why)


def _shared_result(ctx: CheckContext) -> CheckResult:
    c, cuf = ctx.cuobj, ctx.cufile
    cid, title = "cuobj.shared_runtime", "cuFile and cuObject in one process"
    cufile_path = cuf.path if cuf.data is not None else None
    ev = [Evidence("cuFile", cufile_path or "built-in defaults"), Evidence("cuObject", c.path or "built-in defaults")]
    fix = "run cuFile and cuObject users in separate processes, or make the two files agree on these keys"
    differ: list[str] = []
    if c.data is not None and cuf.data is not None:
        a, b = flatten(cuf.data), c.leaves()
        for k in sorted(set(a) & set(b)):
            if k != "execution.parallel_io" and a[k] != b[k]:
                differ.append(f"{k} (cufile.json {plain(a[k])}, cuobj.json {plain(b[k])})")
    if differ:
        return CheckResult(
            cid,
            title,
            Status.WARN,
            f"{len(differ)} setting(s) differ: a process using both runs with whichever file its first "
            "initialisation read",
            ev + [Evidence("cufile.json vs cuobj.json", d) for d in differ[:12]],
            SHARED,
            fix,
        )
    return CheckResult(
        cid,
        title,
        Status.INFO,
        "the first of cuFile/cuObject to initialise in a process fixes the configuration of both "
        f"(cuFile alone: {cufile_path or 'defaults'}; cuObject alone: {c.path or 'defaults'})",
        ev,
        SHARED,
    )
