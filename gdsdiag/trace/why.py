"""Why a file's bytes took their route: the decisive fact first, the chain behind it, each fact
with its source, and the one change that would move the bytes to a better route (issue 45).

Pure: it joins what the trace saw of a file (its routes, how it was read and copied, a libcufile
the program loaded and did not use) with what `check` knows of the node (check/facts.NodeFacts:
nvidia-fs, PCI P2PDMA, cufile.json, and the route a cuFile I/O of that file would take on its mount).
Without the node's facts (a replay) the chain holds what the trace saw, and says the rest is not known.
"""

from __future__ import annotations

from ..check.facts import Fact, NodeFacts
from ..routes import Route
from .said import FALLBACK_WORDS

TRACE = "gdsdiag trace"


def _node_chain(node: NodeFacts | None, path: str) -> tuple[list[Fact], str | None, Route | None]:
    """The node's side: why cuFile I/O of PATH could not go P2P here (facts), the fix, and the
    route such I/O would take (None: not known)."""
    if node is None:
        return (
            [Fact("the node's GDS facts", "not known (a replay: the node it was traced on is elsewhere)", TRACE)],
            None,
            None,
        )
    out: list[Fact] = []
    fix = None
    got = node.file(path)
    route, reasons, where = got if got is not None else (None, [], "unknown")
    if node.force_compat:
        out.append(Fact("cufile.json force_compat_mode", "true", node.cufile_json or "cufile.json"))
        fix = f"set properties.force_compat_mode to false in {node.cufile_json or 'cufile.json'}"
    nvfs = node.failed("nvfs.loaded")
    p2p = node.failed("p2pdma.config") or node.failed("p2pdma.symbols")
    direct = [r for r in node.routes if r in (Route.NVFS, Route.P2PDMA)]
    if not direct:
        if nvfs is not None:
            out.append(Fact("nvidia-fs", nvfs[0], nvfs[1] or "/proc/modules"))
            fix = fix or nvfs[2]
        if p2p is not None:
            out.append(Fact("PCI P2PDMA", p2p[0], p2p[1] or "/boot/config"))
            fix = fix or p2p[2]
    fs = Fact("file system", where, "/proc/self/mountinfo")
    own: list[Fact] = []  # (reasons about the mount itself, not the node's missing direct route)
    if route is not None and route not in (Route.NVFS, Route.P2PDMA):
        own = [
            Fact("its mount", r, "gdsdiag check's route rules") for r in reasons if "without a direct route" not in r
        ]
    if own:
        move = "move the file to a mount GDS serves (an NVMe namespace with a GDS-aware driver, NFS over RDMA…)"
        fix = f"{fix}; and {move}" if fix else move
    if own and direct:  # (the node has a direct route: the mount is what decided it, first)
        out = [own[0], fs, *own[1:], *out]
    else:
        out += [fs, *own]
    if node.allow_compat is False:
        out.append(Fact("cufile.json allow_compat_mode", "false", node.cufile_json or "cufile.json"))
    return out, fix, route


def _said_facts(said: list[tuple[str, str]] | None) -> list[Fact]:
    """What the program said on stderr about its data path (trace/said.py): (who, line) each."""
    return [Fact("the program said", line, f"stderr of {who}") for who, line in (said or [])[:3]]


def file_why(
    row: dict, node: NodeFacts | None, cufile_unused: str | None, said: list[tuple[str, str]] | None = None
) -> tuple[list[Fact], str]:
    """The why of one file of the summary (Classifier.file_summary's row): facts, decisive first,
    and the fix ("none on this node: …" where nothing the user can change on it would help). SAID:
    (who, line) of what the file's processes wrote to stderr about their data path, fallbacks first:
    a loader's own reason for not using cuFile is the decisive fact of its bounced bytes."""
    r = row["routes"]
    path = row["path"]
    p2p = sum(n for k, n in r.items() if Route(k).is_p2p)
    compat = r.get(Route.COMPAT, 0)
    bounce = r.get(Route.DRAM_BOUNCE, 0)
    unknown = r.get(Route.UNKNOWN, 0)
    if p2p and not (compat or bounce):
        return [Fact("route", "cuFile moved these bytes by P2P DMA", TRACE, "decisive")], "none needed"
    node_facts, node_fix, would = _node_chain(node, path)
    facts: list[Fact] = []
    if compat:
        # cuFile was called and fell back: the node's first missing piece decided it
        ran = Fact("cuFile", "libcufile read the file with POSIX I/O through its bounce buffers", TRACE)
        if node is None:
            return [Fact(ran.fact, ran.value, ran.source, "decisive"), *node_facts, *_said_facts(said)], (
                "not known here: replay on the node, or run gdsdiag check there"
            )
        decisive = node_facts[0]
        facts = [Fact(decisive.fact, decisive.value, decisive.source, "decisive"), *node_facts[1:], ran]
        return [*facts, *_said_facts(said)], node_fix or "none found on this node: no GDS fact read here explains it"
    if bounce:
        via = row.get("via") or []
        how = "mapped it (mmap) and copied the pages" if "mmap" in via else "read it into host memory and copied it"
        if "staged" in (row.get("how") or []):
            how += " through a host staging buffer"
        told = _said_facts(said)
        if told and FALLBACK_WORDS.search(told[0].value):
            # (the loader's own reason for its non-GDS path, in its words: what the user reads first)
            facts.append(Fact(told[0].fact, told[0].value, told[0].source, "decisive"))
            if cufile_unused:
                facts.append(Fact("libcufile", cufile_unused, TRACE))
            facts.append(Fact("how the bytes moved", f"the program {how} to the GPU", TRACE))
            facts += told[1:]
        elif cufile_unused:
            facts.append(Fact("libcufile", cufile_unused, TRACE, "decisive"))
            facts.append(Fact("how the bytes moved", f"the program {how} to the GPU", TRACE))
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
        facts += node_facts
        if would in (Route.NVFS, Route.P2PDMA):
            fix = (
                f"read it through cuFile (kvikio, or the loader's own GDS switch): a cuFile read of this file takes "
                f"{would.value} on this node"
            )
        elif node is None:
            fix = "not known here: replay on the node, or run gdsdiag check there"
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
