"""exporter --trace --top-pods N: the (namespace, pod, container) label sets named are the busiest
by bytes in the last 10 minutes, and every counter series only grows while pods move in and out of
the named set (docs/fleet.md, "bounded by bytes"). The rule on a clock the test drives; the same
with real processes in real cgroups is tests/test_trace_pods_live.py."""

from __future__ import annotations

import pytest

pytest.importorskip("prometheus_client")
from gdsdiag.exporter import collect  # noqa: E402
from gdsdiag.exporter.collect import OTHER_POD, TraceCounters  # noqa: E402
from gdsdiag.platform.containers import Identities, Identity  # noqa: E402
from gdsdiag.platform.fsroot import FsRoot  # noqa: E402

MiB = 1 << 20


def _counters(tmp_path, n: int, limit: int, now: list[float]) -> TraceCounters:
    """Counters whose pids 1..n are pods llm/p1..pn (identities handed over, as run_live does)."""
    t = TraceCounters(ids=Identities(FsRoot(str(tmp_path))), pod_limit=limit, clock=lambda: now[0])
    t.use_identities(
        {
            i: Identity(container_id=f"{i:064x}", pod_uid=f"uid-{i}", pod=f"p{i}", namespace="llm")
            for i in range(1, n + 1)
        }
    )
    return t


def _scrape(t: TraceCounters) -> dict[tuple, float]:
    """The bytes series as a scrape shows them: labels -> value."""
    fam = next(f for f in t.families() if f.name == "gdsdiag_trace_bytes")
    return {tuple(s.labels[k] for k in collect.TRACE_LABELS): s.value for s in fam.samples}


def _read(t: TraceCounters, pid: int, nbytes: int) -> None:
    t({"route": "HOST", "comm": "python3", "op": "read", "size": nbytes, "pid": pid})


def _pods(series: dict) -> dict[str, float]:
    out: dict[str, float] = {}
    for k, v in series.items():
        out[k[4]] = out.get(k[4], 0) + v
    return out


def test_a_pod_that_outgrows_a_named_one_takes_its_place_and_no_series_goes_down(tmp_path):
    now = [1000.0]
    t = _counters(tmp_path, 4, 2, now)
    scrapes = []
    fed = 0
    # p1, p2 take the two places; p3 and p4 start later and load far more
    for step in range(30):
        for pid, per_step in ((1, 1), (2, 2), (3, 8), (4, 16)):
            if pid <= 2 or step >= 3:
                _read(t, pid, per_step * MiB)
                fed += per_step * MiB
        now[0] += 1.0
        scrapes.append(_scrape(t))
    last = scrapes[-1]
    assert set(_pods(last)) == {"p3", "p4", "other"}  # the busiest two named, the rest 'other'
    # no bytes lost or counted twice: the series (and the parked values) add up to what was fed
    parked = sum(b for v in t.parked.values() for _, b in v.values())
    assert sum(last.values()) + parked == fed
    # every series only grows from scrape to scrape, while it is there
    for a, b in zip(scrapes, scrapes[1:]):
        for k, v in b.items():
            assert v >= a.get(k, 0), (k, a.get(k), v)
    # a displaced pod's series ended with its value kept; named again, it goes on from there
    p1 = ("llm", "p1", f"{1:064x}"[:12])
    kept = t.parked[p1][("HOST", "python3", "read", *p1)][1]
    now[0] += collect.RANK_WINDOW_S + 1  # everyone idle past the window ...
    for _ in range(3):
        _read(t, 1, 64 * MiB)  # ... then p1 loads again: it outgrows the idle named pods
        now[0] += collect.RERANK_S
    s = _scrape(t)
    assert s[("HOST", "python3", "read", *p1)] >= kept + 64 * MiB
    assert s[("HOST", "python3", "read", *p1)] <= kept + 3 * 64 * MiB


def test_neck_and_neck_pods_do_not_trade_places(tmp_path):
    """Pods loading at nearly the same pace keep the places they took: a trade needs OUTGROW times
    the bytes (each trade ends a series and starts another)."""
    now = [0.0]
    t = _counters(tmp_path, 6, 3, now)
    named = None
    for step in range(200):
        for pid in range(1, 7):
            _read(t, pid, (10 + (step + pid) % 3) * MiB)  # jitter of +-10 %
        now[0] += 1.0
        got = {p for p in _pods(_scrape(t)) if p != "other"}
        named = named or got
        assert got == named
    assert named == {"p1", "p2", "p3"}


def test_other_holds_what_it_counted(tmp_path):
    """A pod promoted out of 'other' starts its own series from nothing: the bytes 'other' counted
    for it stay there (moving them would count them twice in rate() over both)."""
    now = [0.0]
    t = _counters(tmp_path, 2, 1, now)
    _read(t, 1, MiB)
    _read(t, 2, MiB)  # no place, and not outgrown yet: 'other' (a re-rank was made here)
    _read(t, 2, 4 * MiB)  # now outgrown, but the next re-rank is RERANK_S away: 'other'
    before = _scrape(t)[("HOST", "python3", "read", *OTHER_POD)]
    now[0] += collect.RERANK_S
    assert set(_pods(_scrape(t))) == {"other"}  # re-ranked at the scrape: p2 outgrew p1 (its series ended) ...
    assert {p[1] for p in t.pods} == {"p2"}  # ... and p2 is named, with no series until its next bytes
    _read(t, 2, MiB)
    s = _scrape(t)
    assert s[("HOST", "python3", "read", *OTHER_POD)] == before == 5 * MiB
    assert s[("HOST", "python3", "read", "llm", "p2", f"{2:064x}"[:12])] == MiB


def test_page_cache_counters_follow_the_label_set(tmp_path):
    """gdsdiag_trace_page_cache_{read,filled}_bytes: under the pod's label set while it is named,
    under 'other' while it is not, kept (not lost, not shrunk) while it is displaced."""
    now = [0.0]
    t = _counters(tmp_path, 3, 1, now)
    _read(t, 1, MiB)
    t.add_page_cache(1, MiB, MiB)  # a cold read: every byte filled
    t.add_page_cache(2, 4 * MiB, 0)  # p2 has no place: 'other'
    t.add_page_cache(9, MiB, 0)  # outside any pod: nothing
    t.add_page_cache(1, MiB, None)  # fills unreadable: nothing (never counted as hits)

    def cache() -> dict:
        fams = {f.name: f for f in t.families()}
        out = {}
        for name in ("gdsdiag_trace_page_cache_read_bytes", "gdsdiag_trace_page_cache_filled_bytes"):
            for s in fams[name].samples:
                out.setdefault(s.labels["pod"], []).append(s.value)
        return out

    assert cache() == {"p1": [MiB, MiB], "other": [4 * MiB, 0]}
    now[0] += collect.RERANK_S
    _read(t, 3, 8 * MiB)  # p3 outgrows p1: p1 displaced, its page-cache counters kept
    assert cache() == {"other": [4 * MiB, 0]}
    t.add_page_cache(3, 8 * MiB, 0)
    assert cache() == {"p3": [8 * MiB, 0], "other": [4 * MiB, 0]}
    now[0] += collect.RANK_WINDOW_S + 1
    for _ in range(2):
        _read(t, 1, 64 * MiB)  # p1 back, outgrowing idle p3: its counters go on from where they were
        now[0] += collect.RERANK_S
    t.families()
    assert cache()["p1"] == [MiB, MiB]
