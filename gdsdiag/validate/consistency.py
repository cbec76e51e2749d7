"""Whether a sweep document (``validate --sweep-results``) agrees with itself.

A sweep document is data from outside: anyone can edit one. Issue 42, item 7: a document whose own
cuFile counters said 21,340 POSIX I/Os and 0 NVFS, with a ``route_mix`` edited to NVFS and a
throughput 8x its own link ceiling, earned PASS ("0.0 % COMPAT", exit 0). The checks below cost
nothing on a real document (the relations hold by construction in gdsdiag/sweep: each real capture
in tests/fixtures passes them all) and one edited number breaks at least one of them:

- ``summary.gbps`` is ``summary.bytes / summary.seconds`` (rounded to 4 digits);
- a point moves no more than its link allows (``ceilings.link``, the GPU link's raw rate);
- a cuFile point's ``route_mix``, its cuFile counters' ``routes``, those counters by operation
  (``reads``/``writes``: nvfs, p2p, posix, dr) and its ``route`` label name the same routes.

A document that breaks one earns no PASS: validate's measured rules say "inconsistent input: …".
"""

from __future__ import annotations

import math

from ..routes import Route, mix_of, point_shares, route_of

GBPS_SLACK = 0.05  # summary.gbps against bytes / seconds: the sweep rounds GB/s to 4 digits
GBPS_FLOOR = 0.001  # GB/s: below this the rounding alone can differ by more than the slack
LINK_SLACK = 1.25  # a point above 1.25x its link's raw rate moved bytes the link cannot carry
# cuFile's counters by operation, and the route each one counts (cufile/stats.py PathMix.routes)
OP_COUNTERS = (("nvfs", "NVFS"), ("p2p", "P2PDMA"), ("posix", "COMPAT"), ("dr", "DYNAMIC_ROUTING"))
MAX_PROBLEMS = 16  # a forged document of 10,000 points is said in 16 lines, the rest counted


def _num(v) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    f = float(v)
    return f if math.isfinite(f) else None


def _dict(v) -> dict:
    return v if isinstance(v, dict) else {}


def _counts(v) -> dict[str, int]:
    """A {label: count} map with only finite non-negative numbers (anything else: none known)."""
    out = {}
    for k, n in _dict(v).items():
        f = _num(n)
        if f is None or f < 0:
            return {}
        out[str(k)] = int(f)
    return out


def _routes(counts: dict[str, int]) -> set[Route]:
    return set(mix_of(counts)) if sum(counts.values()) > 0 else set()


def _names(routes: set[Route]) -> str:
    return "/".join(sorted(r.value for r in routes))


def _link_ceiling(doc: dict, p: dict) -> float | None:
    link = _num(_dict(p.get("ceilings")).get("link"))
    if link is None and p.get("mode") != "host":  # (a host point never crosses the GPU's link)
        link = _num(_dict(_dict(doc.get("ceilings")).get("link")).get("gbps"))
    return link if link and link > 0 else None


def _throughput(doc: dict, p: dict, label: str) -> list[str]:
    summ = _dict(p.get("summary"))
    gbps, nbytes, secs = _num(summ.get("gbps")), _num(summ.get("bytes")), _num(summ.get("seconds"))
    out = []
    if gbps is not None and nbytes is not None and secs and secs > 0:
        expect = nbytes / secs / 1e9
        if abs(gbps - expect) > GBPS_SLACK * max(gbps, expect) + GBPS_FLOOR:
            out.append(f"{label}: {gbps:g} GB/s, but its {nbytes:.0f} bytes in {secs:g} s are {expect:.4g} GB/s")
    link = _link_ceiling(doc, p)
    if gbps is not None and link and gbps > link * LINK_SLACK:
        out.append(f"{label}: {gbps:g} GB/s is {gbps / link:.1f}x its own link ceiling ({link:g} GB/s)")
    return out


def _route_counters(p: dict, label: str) -> list[str]:
    stats = _dict(_dict(p.get("route_detail")).get("cufile_stats"))
    routes = _counts(stats.get("routes"))
    by_routes, by_mix = _routes(routes), _routes(_counts(p.get("route_mix")))
    out = []
    if by_routes and by_mix and by_routes != by_mix:
        out.append(f"{label}: route_mix says {_names(by_mix)}, its cuFile counters say {_names(by_routes)}")
    reads, writes = _counts(stats.get("reads")), _counts(stats.get("writes"))
    if routes and (reads or writes):
        for op, name in OP_COUNTERS:
            if name in routes and routes[name] != reads.get(op, 0) + writes.get(op, 0):
                n = reads.get(op, 0) + writes.get(op, 0)
                out.append(f"{label}: its cuFile counters say {n} {op} I/Os but {routes[name]} {name}")
    known = by_routes or by_mix
    # the routes its "route" names that cuFile's counters count (a /1 label or a /2 mix)
    said = set(point_shares(p.get("route")) or {}) & {route_of(name) for _, name in OP_COUNTERS}
    if known and said and not said <= known:
        out.append(f"{label}: labelled {_names(said)}, but its cuFile counters say {_names(known)}")
    return out


def sweep_problems(doc: dict, name: str) -> list[str]:
    """Where the sweep document ``doc`` (read from ``name``) contradicts itself; [] when it does not."""
    out: list[str] = []
    for i, p in enumerate(doc.get("points") or []):
        if not isinstance(p, dict) or p.get("error"):
            continue
        label = f"{name} point {i} ({p.get('mode')} {p.get('rw')} bs={p.get('bs')} x{p.get('threads')})"
        out += _throughput(doc, p, label)
        out += _route_counters(p, label)
    return out
