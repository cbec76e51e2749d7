"""Why bytes took their route: the decisive fact first, the chain behind it, each fact with its
source, and the one change that would move the bytes to a better route (issue 45). One builder for
`trace`'s files (``file_why``), `validate --proof`'s cells and `sweep`'s points (``route_why``), so
the three answer from the same node rules: `check`'s own (check/facts.NodeFacts).

Pure: it joins what was measured or seen (the routes cuFile counted, how a program read and copied a
file, a libcufile it loaded and did not use) with what `check` knows of the node (nvidia-fs, PCI
P2PDMA, the IOMMU, ACS, cufile.json, and the route a cuFile I/O on that mount would take). Without
the node's facts (a replay) the chain holds what was seen, and says the rest is not known.
It sits in check/ (below trace, validate and sweep) so none of them imports another for it.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Concatenate, ParamSpec

from ..routes import Route
from ..units import size_text
from ..verdicts import Status
from .facts import INVISIBLE, Fact, NodeFacts
from .paths import DENYLIST

P = ParamSpec("P")

TRACE = "gdsdiag trace"


def _check_fact(node: NodeFacts, cid: str, name: str, default_source: str) -> tuple[Fact, str] | None:
    """Check CID where it failed, as a fact and its fix."""
    got = node.failed(cid)
    if got is None:
        return None
    return Fact(name, got[0], got[1] or default_source), got[2]


# Why the node's facts are missing from an answer, and what to do (NodeMissing.text, .fix): a
# replay's default; a live trace names its own reason (trace/session.py NodeFactsReader.missing), never
# "a replay" for a trace that ran on the node
@dataclass(frozen=True)
class NodeMissing:
    text: str
    fix: str


REPLAY = NodeMissing(
    "a replay: the node it was traced on is elsewhere", "not known here: replay on the node, or run gdsdiag check there"
)


def forced_compat(node: NodeFacts, role: str = "contributing") -> tuple[Fact, str] | None:
    """cuFile forced into compatibility mode as check found it, named by what forced it: cufile.json's
    force_compat_mode in the file in effect, or CUFILE_FORCE_COMPAT_MODE in the environment check ran
    in (the variable alone was reported as the file's key); None where nothing forces it."""
    got = node.checks.get("cufile.force_compat")
    if not node.force_compat and got is None:
        return None
    src = node.cufile_json or "cufile.json"
    if node.force_compat:
        fix = f"set properties.force_compat_mode to false in {src}"
        if got is not None and "CUFILE_FORCE_COMPAT_MODE" in got[1]:
            fix += " and unset CUFILE_FORCE_COMPAT_MODE"
        return Fact("cufile.json force_compat_mode", "true", src, role), fix
    value = got[1].rsplit("(", 1)[-1].rstrip(")") if got is not None else "set"
    return (
        Fact("CUFILE_FORCE_COMPAT_MODE", value, got[2] if got is not None else "environment", role),
        "unset CUFILE_FORCE_COMPAT_MODE in the environment the I/O runs in",
    )


def _node_chain(
    node: NodeFacts | None, path: str, missing: NodeMissing = REPLAY
) -> tuple[list[Fact], str | None, Route | None]:
    """The node's side: why cuFile I/O of PATH could not go P2P here (facts), the fix, and the
    route such I/O would take (None: not known, for MISSING's reason)."""
    if node is None:
        return [Fact("the node's GDS facts", f"not known ({missing.text})", TRACE)], None, None
    out: list[Fact] = []
    fix = None
    got = node.file(path)
    route, reasons, where = got if got is not None else (None, [], "unknown")
    forced = forced_compat(node)
    if forced is not None:
        out.append(forced[0])
        fix = forced[1]
    direct = [r for r in node.routes if r in (Route.NVFS, Route.P2PDMA)]
    base = _check_fact(node, "nvidia.driver", "NVIDIA driver", "/proc/driver/nvidia/version") or _check_fact(
        node, "nvidia.gpus", "GPUs seen by the driver", "/proc/driver/nvidia/gpus"
    )
    if base is not None:  # (no cuFile route at all, compatibility mode included: check's `decide`)
        out.append(base[0])
        fix = fix or base[1] or None
    if not direct:
        nvfs = _check_fact(node, "nvfs.loaded", "nvidia-fs", "/proc/modules")
        p2p = _check_fact(node, "p2pdma.config", "PCI P2PDMA", "/boot/config") or _check_fact(
            node, "p2pdma.symbols", "PCI P2PDMA", "/proc/kallsyms"
        )
        for got_fact, blocked in ((nvfs, Route.NVFS), (p2p, Route.P2PDMA)):
            if got_fact is not None:
                out.append(got_fact[0])
                fix = fix or got_fact[1]
            else:
                # the route's driver is there and something else of its prerequisites failed (the
                # IOMMU translating with nvidia-fs loaded…): check's own FAIL, by its title
                for cid, title, summary, source, cfix in node.blockers.get(blocked, [])[:1]:
                    out.append(Fact(title, summary, source or f"gdsdiag check {cid}"))
                    fix = fix or cfix or None
    fs = Fact("file system", where, "/proc/self/mountinfo")
    own: list[Fact] = []  # (reasons about the mount itself, not the node's missing direct route)
    if route is not None and route not in (Route.NVFS, Route.P2PDMA):
        own = [
            Fact("its mount", r, "gdsdiag check's route rules") for r in reasons if "without a direct route" not in r
        ]
    if own:
        move = "move the file to a mount GDS serves (an NVMe namespace with a GDS-aware driver, NFS over RDMA…)"
        if own[0].value.startswith(DENYLIST):  # (the listing decided: taking it out is the change)
            key = own[0].value[len(DENYLIST) :].split(" lists ", 1)
            move = f"take {key[1].split(':', 1)[0]} out of denylist.{key[0]} in {node.cufile_json or 'cufile.json'}"
        fix = f"{fix}; and {move}" if fix else move
    if own and direct:  # (the node has a direct route: the mount is what decided it, first)
        out = [own[0], fs, *own[1:], *out]
    else:
        out += [fs, *own]
    if direct and route in (Route.NVFS, Route.P2PDMA):
        # the node and the mount both allow a direct route: what check found on the PCI path is
        # all that is left between them (ACS redirecting peer traffic to the root complex)
        acs = node.checks.get("platform.acs")
        if acs is not None and acs[0] == Status.FAIL:
            out.insert(0, Fact("ACS redirect on GPU paths", acs[1], acs[2] or "PCI config space"))
            fix = fix or acs[3] or None
    # the key that lets a fallback happen silently, as the cufile.json in effect sets it (never decisive:
    # it permits compatibility mode, the facts above cause it)
    allow = "unset (libcufile's default)" if node.allow_compat is None else str(node.allow_compat).lower()
    out.append(Fact("cufile.json allow_compat_mode", allow, node.cufile_json or "no cufile.json found"))
    return out, fix, route


# A line a program said (trace/model/said.py) that gives up on a faster path: its own reason, put first
FALLBACK_WORDS = re.compile(r"fall(?:ing|s)?[ -]?back|not found|not supported|unsupported|disabl|fail", re.IGNORECASE)


def _said_facts(said: list[tuple[str, str]] | None) -> list[Fact]:
    """What the program said on stderr about its data path (trace/model/said.py): (who, line) each."""
    return [Fact("the program said", line, f"stderr of {who}") for who, line in (said or [])[:3]]


def _with_ceiling(
    why: Callable[Concatenate[dict, P], tuple[list[Fact], str]],
) -> Callable[Concatenate[dict, P], tuple[list[Fact], str]]:
    """WHY of a file's row, with the GB/s the program achieved against the ceiling of the file's path
    (platform/ceiling.py) where the node was read, as its last fact: whether the route or the
    hardware held the rate down (after every return of the why, whichever decided it)."""

    @functools.wraps(why)
    def with_ceiling(row: dict, *args: P.args, **kwargs: P.kwargs) -> tuple[list[Fact], str]:
        facts, fix = why(row, *args, **kwargs)
        ceil = row.get("ceiling")
        if row.get("against_ceiling") and ceil:
            low = next((c for c in ceil["ceilings"] if c["gbps"] == ceil["gbps"]), None)
            src = low["source"] if low else ", ".join(c["source"] for c in ceil["ceilings"])
            facts.append(Fact("GB/s against the path's ceiling", row["against_ceiling"], src))
        return facts, fix

    return with_ceiling


def untraced_facts(node: NodeFacts | None) -> list[Fact]:
    """The node's paths host tracing cannot see (check/untraced.py), a fact each: what the trace's
    answer cannot include, never left unsaid."""
    if node is None:
        return []
    return [Fact(title, summary, source or "gdsdiag check") for title, summary, source in node.untraced]


def _with_untraced(
    why: Callable[Concatenate[dict, P], tuple[list[Fact], str]],
) -> Callable[Concatenate[dict, P], tuple[list[Fact], str]]:
    """WHY of a file's row with the node's untraceable paths as its last facts (contributing: they
    decide nothing about this file's bytes, they say which bytes the trace could not have seen)."""

    @functools.wraps(why)
    def with_untraced(row: dict, *args: P.args, **kwargs: P.kwargs) -> tuple[list[Fact], str]:
        facts, fix = why(row, *args, **kwargs)
        node = args[0] if args else kwargs.get("node")
        return facts + untraced_facts(node if isinstance(node, NodeFacts) else None), fix

    return with_untraced


# the routes whose bytes reached a GPU (a file's bytes the trace saw go to one)
TO_GPU = (Route.NVFS, Route.P2PDMA, Route.RDMA, Route.PEER_GPU, Route.COMPAT, Route.DRAM_BOUNCE)


def untraced_why(node: NodeFacts | None, files: list[dict]) -> dict | None:
    """The trace's answer for bytes it cannot see: where the node has a path host tracing cannot see
    (a kernel-bypass NVMe driver, cuObject over RDMA), the trace says so — how many file bytes it saw
    reach a GPU (none, or some), the paths, and how to verify — instead of a silent nothing. None
    where the node has no such path or its facts are not known (a replay)."""
    facts = untraced_facts(node)
    if not facts:
        return None
    seen = 0
    for f in files:
        for k, n in (f.get("routes") or {}).items():
            try:
                seen += n if Route(k) in TO_GPU else 0
            except ValueError:
                continue
    if seen:
        lead = f"the trace saw {size_text(seen)} of file bytes reach a GPU; bytes over the node's paths below are {INVISIBLE}"
    elif files:
        lead = f"the trace saw none reach a GPU ({len(files)} file(s), host I/O only); the node's paths below are {INVISIBLE}"
    else:
        lead = f"the trace saw no file I/O; the node's paths below are {INVISIBLE}"
    return {
        "seen_to_gpu_bytes": seen,
        "why_chain": [x.to_json() for x in [Fact("the program's storage bytes", lead, TRACE, "decisive"), *facts]],
        "fix": "run gdsdiag validate --proof on this node: it measures the route of each GPU × storage target "
        "by cuFile's own counters; a user-space NVMe driver's reads (SPDK…) count only in its own statistics",
    }


@_with_untraced
@_with_ceiling
def file_why(
    row: dict,
    node: NodeFacts | None,
    cufile_unused: str | None,
    said: list[tuple[str, str]] | None = None,
    cufile_called: bool = True,
    node_missing: NodeMissing = REPLAY,
) -> tuple[list[Fact], str]:
    """The why of one file of the summary (Classifier.file_summary's row): facts, decisive first,
    and the fix ("none on this node: …" where nothing the user can change on it would help). SAID:
    (who, line) of what the file's processes wrote to stderr about their data path, fallbacks first:
    a loader's own reason for not using cuFile is the decisive fact of its bounced bytes.
    CUFILE_CALLED: the program called libcufile (opened the driver, asked its version…): it tried
    GDS and moved the bytes itself, the decisive fact; a libcufile only mapped (a framework's import
    links it) says nothing of the loader, and the mechanism leads. NODE_MISSING: why NODE is None."""
    r = row["routes"]
    path = row["path"]
    p2p = sum(n for k, n in r.items() if Route(k).is_p2p)
    compat = r.get(Route.COMPAT, 0)
    bounce = r.get(Route.DRAM_BOUNCE, 0)
    unknown = r.get(Route.UNKNOWN, 0)
    if p2p and not (compat or bounce):
        return [Fact("route", "cuFile moved these bytes by P2P DMA", TRACE, "decisive")], "none needed"
    node_facts, node_fix, would = _node_chain(node, path, node_missing)
    facts: list[Fact] = []
    if compat:
        # cuFile was called and fell back: the node's first missing piece decided it
        ran = Fact("cuFile", "libcufile read the file with POSIX I/O through its bounce buffers", TRACE)
        if node is None:
            return [Fact(ran.fact, ran.value, ran.source, "decisive"), *node_facts, *_said_facts(said)], (
                node_missing.fix
            )
        decisive = node_facts[0]
        facts = [Fact(decisive.fact, decisive.value, decisive.source, "decisive"), *node_facts[1:], ran]
        return [*facts, *_said_facts(said)], node_fix or "none found on this node: no GDS fact read here explains it"
    if bounce:
        via = row.get("via_to_gpu") or row.get("via") or []  # (the calls that moved what reached a GPU)
        how = "mapped it (mmap) and copied the pages" if "mmap" in via else "read it into host memory and copied it"
        if "staged" in (row.get("how") or []):
            how += " through a host staging buffer"
        told = _said_facts(said)
        if told and FALLBACK_WORDS.search(told[0].value):
            # (the loader's own reason for its non-GDS path, in its words: what the user reads first)
            facts.append(_decisive(told[0]))
            if cufile_unused:
                facts.append(Fact("libcufile", cufile_unused, TRACE))
            facts.append(Fact("how the bytes moved", f"the program {how} to the GPU", TRACE))
            facts += told[1:]
        elif cufile_unused and cufile_called:
            facts.append(Fact("libcufile", cufile_unused, TRACE, "decisive"))
            facts.append(Fact("how the bytes moved", f"the program {how} to the GPU", TRACE))
            facts += told
        elif cufile_unused:
            facts.append(
                Fact("how the bytes moved", f"no cuFile call: the program {how} to the GPU", TRACE, "decisive")
            )
            facts.append(Fact("libcufile", cufile_unused, TRACE))
            facts += told
        else:
            facts.append(
                Fact("how the bytes moved", f"no cuFile call: the program {how} to the GPU", TRACE, "decisive")
            )
            facts += told
        if row.get("page_cache_hit") is not None:
            facts.append(
                Fact("page cache", f"{100 * row['page_cache_hit']:.0f} % of its mapped bytes were cached", TRACE)
            )
        if row.get("major_faults"):  # (a load that waited on the disk a fault at a time)
            facts.append(
                Fact(
                    "major page faults",
                    f"{row['major_faults']} ({row['major_faults_per_gib']:g} per GiB mapped)",
                    "perf software event page-faults-major",
                )
            )
        facts += node_facts
        if would in (Route.NVFS, Route.P2PDMA):
            fix = (
                f"read it through cuFile (kvikio, or the loader's own GDS switch): a cuFile read of this file takes "
                f"{would.value} on this node"
            )
        elif node is None:
            fix = node_missing.fix
        else:
            why = "; ".join(f.value for f in node_facts[:2]) or node.summary
            fix = f"none on this node: cuFile would run in compatibility mode here too ({why})"
            if node_fix:
                fix += f"; to change that: {node_fix}"
        return facts, fix
    if unknown:
        return [Fact("route", row.get("why") or "nothing conclusive was seen", TRACE, "decisive")], "none known"
    return [
        Fact("route", "no CUDA copy took these bytes: host I/O, not on the GPU data path", TRACE, "decisive")
    ], "none needed"


def _decisive(f: Fact) -> Fact:
    return Fact(f.fact, f.value, f.source, "decisive")


def _explaining(facts: list[Fact]) -> int | None:
    """The index of the first fact that explains a fallback: not the file system line (it says where,
    not why), not allow_compat_mode (it permits a fallback, or forbids it), not a replay's "not known"."""
    for i, f in enumerate(facts):
        if f.fact not in ("file system", "cufile.json allow_compat_mode", "the node's GDS facts"):
            return i
    return None


def route_why(
    route: Route, measured: Fact, node: NodeFacts | None, path: str, by_design: Fact | None = None
) -> tuple[list[Fact], str]:
    """The why of bytes whose route was measured rather than traced: a `validate --proof` cell or a
    `sweep` point on the directory PATH. MEASURED says what was counted and where (cuFile's counters,
    a probe's error); BY_DESIGN is the mode's own fact where the route is the mode's choice (the
    sweep's bounce and host modes). Facts decisive first, and the fix."""
    if route.is_p2p:
        return [_decisive(measured)], "none needed"
    if route == Route.HOST or (by_design is not None and route != Route.DRAM_BOUNCE and route != Route.COMPAT):
        return [_decisive(by_design or measured)], "none needed"
    node_facts, node_fix, would = _node_chain(node, path)
    direct = would in (Route.NVFS, Route.P2PDMA)
    if by_design is not None:  # a bounce the mode makes on purpose: what cuFile would do here follows
        facts = [_decisive(by_design), measured, *node_facts]
        if direct and would is not None:
            return facts, f"none for this mode (a bounce by its design): a cuFile mode takes {would.value} here"
        if node is None:
            return facts, "none for this mode (a bounce by its design)"
        why = "; ".join(f.value for f in node_facts[:2])
        return facts, (
            f"none for this mode (a bounce by its design); cuFile would run in compatibility mode here too ({why})"
            + (f"; to change that: {node_fix}" if node_fix else "")
        )
    if node is None:
        return [_decisive(measured), *node_facts], "not known here: run gdsdiag check on the node"
    if route == Route.DRAM_BOUNCE:
        # a library's own POSIX path (kvikio under KVIKIO_COMPAT_MODE=AUTO: libcufile not loaded, a
        # handle not registered, O_DIRECT refused…): it says nothing of which, so what it did leads
        loud = "KVIKIO_COMPAT_MODE=OFF makes kvikio fail with the reason instead of falling back silently"
        return [_decisive(measured), *node_facts], f"{node_fix}; {loud}" if node_fix and not direct else loud
    if route in (Route.COMPAT, Route.NONE):
        i = _explaining(node_facts)
        if i is None:
            # the node's rules allow a direct route here and none of check's facts says otherwise:
            # the measurement is the decisive fact, and no invented cause stands beside it
            what = f"gdsdiag check predicts {would.value} for this mount" if direct and would else node.summary
            return [_decisive(measured), *node_facts], (
                f"none found on this node ({what}): read the run's cufile.log (logging.level INFO) for the "
                "fallback's own reason"
            )
        lead = _decisive(node_facts[i])
        facts = [lead, *node_facts[:i], *node_facts[i + 1 :], measured]
        return facts, node_fix or "none found on this node: no GDS fact read here explains it"
    if route == Route.PEER_GPU:
        dyn = node.checks.get("cufile.dynamic_routing")
        facts = [_decisive(measured), *node_facts]
        if dyn is not None:
            facts.insert(1, Fact("cufile.json rdma_dynamic_routing", dyn[1], dyn[2] or "cufile.json"))
        return facts, (dyn[3] if dyn is not None and dyn[3] else "none known: cuFile chose the peer GPU")
    return [_decisive(measured), *node_facts], "none known"


def failure_why(measured: Fact, node: NodeFacts | None, path: str) -> tuple[list[Fact], str]:
    """The why of a run that failed for a reason of its own (a stall, a timeout, a crashed child, a
    missing module): that reason leads; the node's facts follow, as context, never as its cause."""
    node_facts, _, _ = _node_chain(node, path)
    return [_decisive(measured), *node_facts], "none known from the node's facts: the failure above is the run's own"


def text_lines(chain: list[dict], fix: str) -> tuple[str, str]:
    """A why for the text views: the decisive fact (with where it was read) and the fix, a line
    each; the whole chain is in --json."""
    lead = next((x for x in chain if x.get("role") == "decisive"), chain[0] if chain else None)
    why = f"{lead['fact']}: {lead['value']} ({lead['source']})" if lead else "not known"
    return why, fix or "none known"
