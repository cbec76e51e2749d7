"""A sweep point's why (issue 45): the route it measured, joined to the node's facts by the same
builder as trace's files and validate's proof cells (check/why.route_why). Pure: the point's own
figures and a NodeFacts in, facts (decisive first) and the fix out."""

from __future__ import annotations

from ..check.facts import Fact, NodeFacts
from ..check.why import failure_why, route_why
from ..routes import Route, route_of

SWEEP = "gdsdiag sweep"

# what a mode does by its design, where that alone decides its route (engines/bounce.py, host.py)
BY_DESIGN = {
    "bounce": "a bounce by design of --mode bounce: O_DIRECT into pinned host memory, then a copy to the GPU "
    "(writes: GPU → pinned → O_DIRECT)",
    "host": "--mode host: O_DIRECT file I/O of host memory only, the ceiling the GPU modes are held against; "
    "not on the GPU data path",
}


def point_route(route: str, mix: dict[str, int], error: str | None) -> tuple[Route, Fact]:
    """The route a point's why is about, and the measurement that says so."""
    if error is not None:
        return Route.NONE, Fact("the point", error, SWEEP)
    if mix:
        total = sum(mix.values())
        counted = ", ".join(f"{k} {v}" for k, v in sorted(mix.items()))
        said = Fact("cuFile's counters", f"{counted} of {total} I/O", "cuFile statistics of the point (route_mix)")
        if mix.get(Route.COMPAT.value):
            return Route.COMPAT, said
        direct = [Route(k) for k in mix if Route(k).is_p2p]
        if direct and len(mix) == len(direct):
            return direct[0], said
        return route_of(next(iter(sorted(mix, key=lambda k: -mix[k])))), said
    if route == "KVIKIO_POSIX":
        return Route.DRAM_BOUNCE, Fact(
            "kvikio", "its own POSIX path: no cuFile I/O counted (KVIKIO_COMPAT_MODE=AUTO falls back silently)", SWEEP
        )
    r = route_of(route)
    return r, Fact("measured route", r.value if r != Route.UNKNOWN else f"{route}: nothing conclusive", SWEEP)


def needs_node(mode: str, route: str, mix: dict[str, int], error: str | None) -> bool:
    """Whether this point's why reads the node's facts (a P2P or host point does not)."""
    r, _ = point_route(route, mix, error)
    return not (r.is_p2p or r == Route.HOST)


def point_why(
    mode: str, route: str, mix: dict[str, int], error: str | None, node: NodeFacts | None, directory: str
) -> tuple[list[Fact], str]:
    r, said = point_route(route, mix, error)
    if error is not None and "CU_FILE_" not in error:
        # (a stall, a short I/O, ENOSPC: the point's own reason; only a cuFile error is the node's)
        return failure_why(said, node, directory)
    design = BY_DESIGN.get(mode) if error is None else None
    fact = Fact("sweep mode", design, f"{SWEEP} --mode {mode}") if design else None
    return route_why(r, said, node, directory, fact)
