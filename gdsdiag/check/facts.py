"""The node's facts that decide a GDS route, as `trace`, `validate --proof` and `sweep` join them to
what a program did (check/why.py): the same checks and rules as `gdsdiag check` (one rule set), read
once, and per file the route a cuFile I/O of it would take (``paths.file_route``: its mount, file
system and block devices)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..routes import Route
from ..verdicts import Status
from .context import CheckContext
from .model import INVISIBLE, UNTRACED_PREFIX

__all__ = ["INVISIBLE", "Fact", "NodeFacts"]


@dataclass(frozen=True)
class Fact:
    """One fact of a why: what, its value, where it was read, and whether it decided the route."""

    fact: str
    value: str
    source: str
    role: str = "contributing"  # decisive | contributing

    def to_json(self) -> dict:
        return {"fact": self.fact, "value": self.value, "source": self.source, "role": self.role}


@dataclass
class NodeFacts:
    """What `check` found on this node, reduced to what a route's why needs."""

    routes: list[Route]
    summary: str  # the node verdict's ("COMPAT only", "NVFS + P2PDMA (compat fallback allowed)")
    checks: dict[str, tuple[Status, str, str, str]]  # id -> (status, summary, first source, fix)
    cufile_json: str | None  # the file in effect (CUFILE_ENV_PATH_JSON of gdsdiag's environment first)
    force_compat: bool
    allow_compat: bool | None
    files: dict[str, tuple[Route, list[str], str]] = field(default_factory=dict)
    # the failed prerequisites of each direct route, in check order: (id, title, summary, source, fix)
    blockers: dict[Route, list[tuple[str, str, str, str, str]]] = field(default_factory=dict)
    # paths host tracing cannot see (check/untraced.py's results: a kernel-bypass NVMe driver, cuObject
    # over RDMA), each as (title, summary, first source)
    untraced: list[tuple[str, str, str]] = field(default_factory=list)
    _ctx: CheckContext | None = None
    _ceilings: dict = field(default_factory=dict)  # (mount's device, to a GPU) -> ceiling.PathCeilings

    @classmethod
    def collect(cls, ctx: CheckContext) -> NodeFacts:
        """Run the node checks here (a snapshot's, in tests) and read them as the trace reads
        `gdsdiag check --json` (from_check_json: one reader of the checks' results)."""
        from .checks import NODE_CHECKS
        from .runner import decide

        results = [r for check in NODE_CHECKS for r in check(ctx)]
        return cls.from_results(decide(ctx, results), results, ctx)

    @classmethod
    def from_results(cls, verdict, results, ctx: CheckContext | None) -> NodeFacts:
        """From a check run already made (validate --proof's check report: its node verdict and
        results), through the same reader as `gdsdiag check --json`'s document."""
        return cls.from_check_json({"verdict": verdict.to_json(), "checks": [r.to_json() for r in results]}, ctx)

    @classmethod
    def from_check_json(cls, doc: dict, ctx: CheckContext | None) -> NodeFacts:
        """From `gdsdiag check --json`'s document (the trace runs check in a child process, so its
        reads never take the tracer's CPU), with CTX for the files' routes and cufile.json keys."""
        verdict = doc.get("verdict") or {}
        routes = []
        for r in verdict.get("routes") or []:
            try:
                routes.append(Route(r))
            except ValueError:
                continue
        checks = {}
        untraced: list[tuple[str, str, str]] = []
        blockers: dict[Route, list[tuple[str, str, str, str, str]]] = {}
        for c in doc.get("checks") or []:
            try:
                status = Status(c.get("status"))
            except ValueError:
                continue
            ev = c.get("evidence") or []
            src = ev[0].get("source", "") if ev and isinstance(ev[0], dict) else ""
            cid, summary, fix = str(c.get("id")), str(c.get("summary") or ""), str(c.get("fix") or "")
            checks[cid] = (status, summary, str(src), fix)
            if cid.startswith(UNTRACED_PREFIX) and status in (Status.INFO, Status.WARN):
                untraced.append((str(c.get("title") or cid), summary, str(src)))
            if status == Status.FAIL and c.get("route") in (Route.NVFS.value, Route.P2PDMA.value):
                # (what `decide` names as the route's missing pieces: "NVFS route unavailable: …")
                blockers.setdefault(Route(c["route"]), []).append(
                    (cid, str(c.get("title") or cid), summary, str(src), fix)
                )
        cfg = ctx.cufile if ctx is not None else None
        return cls(
            routes,
            str(verdict.get("summary") or "unknown"),
            checks,
            cfg.path if cfg is not None else None,
            bool(cfg is not None and cfg.get("properties.force_compat_mode") is True),
            cfg.get("properties.allow_compat_mode") if cfg is not None else None,
            blockers=blockers,
            untraced=untraced,
            _ctx=ctx,
        )

    def file(self, path: str) -> tuple[Route, list[str], str] | None:
        """The route a cuFile I/O of PATH would take here, the reasons and its mount; None when the
        node cannot be read for it (a replay: the node is elsewhere)."""
        got = self.files.get(path)
        if got is None and self._ctx is not None:
            from .paths import file_route

            try:
                got = self.files[path] = file_route(self._ctx, path, self.routes)
            except (OSError, ValueError):
                return None
        return got

    def ceilings(self, path: str, to_gpu: bool):
        """What the node's hardware allows on PATH's path (platform/ceiling.py): its disk's link, and
        the GPU's where its bytes went to one (TO_GPU); None where the node cannot be read (a replay).
        Read once per mount."""
        if self._ctx is None:
            return None
        from ..platform import ceiling, mounts

        m = mounts.mount_for(path, self._ctx.mounts)
        key = (m.dev if m is not None else "", to_gpu)
        got = self._ceilings.get(key)
        if got is None:
            got = self._ceilings[key] = ceiling.for_path(
                self._ctx.fs, path, "one" if to_gpu else None, None, self._ctx.mounts
            )
        return got

    def failed(self, cid: str) -> tuple[str, str, str] | None:
        """(summary, source, fix) of check CID where it failed."""
        got = self.checks.get(cid)
        if got is None or got[0] != Status.FAIL:
            return None
        return got[1], got[2], got[3]
