"""A sweep point's why (issue 45): the route it measured, joined to the node's facts by the same
builder as trace's files and validate's proof cells (check/why.route_why). Pure: the point's own
figures and a NodeFacts in, facts (decisive first) and the fix out."""

from __future__ import annotations

from ..check.facts import Fact, NodeFacts
from ..check.why import failure_why, route_why
from ..routes import Route, dominant, mix_of, point_shares

SWEEP = "gdsdiag sweep"


def point_route(route: object, mix: dict[str, int], error: str | None) -> tuple[Route, Fact]:
    """The route a point's why is about, and the measurement that says so (``route``: the point's,
    a gdsdiag.sweep/2 mix or a /1 label: routes.point_shares)."""
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
        return dominant(mix_of(mix)), said
    r = dominant(point_shares(route) or {})
    return r, Fact("measured route", r.value if r != Route.UNKNOWN else "nothing conclusive", SWEEP)


def needs_node(route: object, mix: dict[str, int], error: str | None) -> bool:
    """Whether this point's why reads the node's facts (a P2P or host point does not)."""
    r, _ = point_route(route, mix, error)
    return not (r.is_p2p or r == Route.HOST)


def point_why(
    mode: str,
    route: object,
    mix: dict[str, int],
    error: str | None,
    node: NodeFacts | None,
    directory: str,
    design: str = "",
) -> tuple[list[Fact], str]:
    """``design``: what the mode does by its design where that decides the route (its engine's
    ``design_for``: host, bounce, kvikio without cuFile I/O)."""
    r, said = point_route(route, mix, error)
    if error is not None and "CU_FILE_" not in error:
        # (a stall, a short I/O, ENOSPC: the point's own reason; only a cuFile error is the node's)
        return failure_why(said, node, directory)
    fact = None
    if design and error is None:
        fact = Fact("sweep mode", design, f"{SWEEP} --mode {mode}")
    return route_why(r, said, node, directory, fact)
