"""Check that every `validate --proof` cell and every `sweep` point of a GPU-machine run says why, and
that the why is the node's (issue 45): on a node without nvidia-fs, without PCI P2PDMA and with its
files on ext4 over a virtio disk, each answer's chain names those three facts, and where cuFile fell
back (COMPAT) or could not run (no route), one of them is the decisive fact.

    python3 tests/workloads/check_why.py [--proof validate-proof.json] [--sweep sweep.json]…

Per class, what is held (the rules of gdsdiag/check/why.py, one builder for both):
- a proof cell: why_chain and fix present; the decisive fact one of NODE_FACTS; the chain names all
  three; a P2P-verified cell would need none (and fails here: this node cannot go P2P);
- a sweep point of a cuFile mode (cufile, cufile-batch, cufile-async, kvikio) that took COMPAT or no
  route: the same; one that bounced by kvikio's own POSIX path (DRAM_BOUNCE): the measurement leads and
  the chain names the three; one that failed: its own reason leads (the point's error) or a cuFile
  refusal the node explains, and it is listed as a failure of the run, not passed;
- a bounce point: a bounce by design of the mode leads, the chain names the three (what cuFile would
  do there);
- a host point: by design, "none needed".
Prints one line per cell or point; exit 0 when all hold, 1 otherwise, 2 on unreadable input."""

from __future__ import annotations

import argparse
import json
import sys

# the facts check/why.py names for this node, by their fact names (check/why._node_chain)
NVIDIA_FS, P2PDMA, FILE_SYSTEM, ITS_MOUNT = "nvidia-fs", "PCI P2PDMA", "file system", "its mount"
NODE_FACTS = (NVIDIA_FS, P2PDMA, FILE_SYSTEM, ITS_MOUNT)
CUFILE_MODES = ("cufile", "cufile-batch", "cufile-async", "kvikio")


def _doc(path: str) -> dict:
    """A JSON document, '#' comment lines (validate's header) left out."""
    with open(path, encoding="utf-8") as f:
        return json.loads("".join(x for x in f if not x.startswith("#")))


def _decisive(chain: list[dict]) -> dict | None:
    return next((x for x in chain if x.get("role") == "decisive"), None)


def _names_the_node(chain: list[dict]) -> list[str]:
    """What the chain lacks of the three facts of this node (nvidia-fs, P2PDMA, the file system)."""
    facts = {x.get("fact") for x in chain}
    want = {NVIDIA_FS: "nvidia-fs absent", P2PDMA: "P2PDMA off", FILE_SYSTEM: "the file system"}
    missing = [v for k, v in want.items() if k not in facts]
    fs = next((x for x in chain if x.get("fact") == FILE_SYSTEM), None)
    if fs is not None and not ("ext4" in fs.get("value", "") and "virtio" in fs.get("value", "")):
        missing.append(f"ext4 on virtio (file system says {fs.get('value')!r})")
    return missing


def check_chain(
    what: str, chain: list[dict] | None, fix: str | None, lead: tuple[str, ...], node: bool = True
) -> list[str]:
    """What is wrong with one answer: LEAD the facts its decisive fact may be; NODE: the chain must
    name this node's three facts (all but a host point's)."""
    if not chain:
        return [f"{what}: no why_chain"]
    if not fix:
        return [f"{what}: no fix"]
    d = _decisive(chain)
    bad = []
    if d is None:
        bad.append(f"{what}: no decisive fact")
    elif d.get("fact") not in lead:
        bad.append(f"{what}: decisive fact is {d.get('fact')!r} ({d.get('value')!r}), not one of {list(lead)}")
    if node:
        bad += [f"{what}: the chain does not name {m}" for m in _names_the_node(chain)]
    return bad


def check_proof(doc: dict) -> tuple[list[str], list[str]]:
    """(lines, problems) of validate --proof's cells."""
    cells = (doc.get("proof") or {}).get("cells") or []
    lines, bad = [], []
    if not cells:
        bad.append("proof: no cells")
    for c in cells:
        what = f"proof {c.get('gpu')} × {c.get('path') or (c.get('target') or {}).get('path')}: {c.get('result')}"
        got = check_chain(what, c.get("why_chain"), c.get("fix"), NODE_FACTS)
        d = _decisive(c.get("why_chain") or []) or {}
        lines.append(
            f"{'ok  ' if not got else 'FAIL'} {what} — {d.get('fact')}: {d.get('value')} | fix: {c.get('fix')}"
        )
        bad += got
    return lines, bad


def check_sweep(doc: dict, name: str) -> tuple[list[str], list[str]]:
    """(lines, problems) of a sweep document's points."""
    points = doc.get("points") or []
    lines, bad = [], []
    if not points:
        bad.append(f"{name}: no points")
    for p in points:
        mode, route = p.get("mode"), str(p.get("route"))
        what = f"{name} {mode} {p.get('rw')} bs={p.get('bs')} t={p.get('threads')}: {route}"
        chain, fix = p.get("why_chain"), p.get("fix")
        if p.get("error"):
            got = check_chain(what, chain, fix, ("the point", *NODE_FACTS))
            got.append(f"{what}: the point failed: {p['error']}")
        elif mode == "host":
            got = check_chain(what, chain, fix, ("sweep mode",), node=False)
            if fix != "none needed":
                got.append(f"{what}: fix {fix!r}, not 'none needed'")
        elif mode == "bounce":
            got = check_chain(what, chain, fix, ("sweep mode",))
        elif mode in CUFILE_MODES and route == "DRAM_BOUNCE":  # (kvikio's own POSIX path: it says not why)
            got = check_chain(what, chain, fix, ("measured route", "cuFile's counters", *NODE_FACTS))
        elif mode in CUFILE_MODES:
            got = check_chain(what, chain, fix, NODE_FACTS)
        else:
            got = [f"{what}: mode {mode!r} not known to this checker"]
        d = _decisive(chain or []) or {}
        lines.append(f"{'ok  ' if not got else 'FAIL'} {what} — {d.get('fact')}: {d.get('value')} | fix: {fix}")
        bad += got
    return lines, bad


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--proof", action="append", default=[], help="validate --proof's --json document")
    ap.add_argument("--sweep", action="append", default=[], help="sweep --json's document")
    a = ap.parse_args(argv)
    if not a.proof and not a.sweep:
        print("check_why: nothing to check: give --proof FILE and/or --sweep FILE", file=sys.stderr)
        return 2
    lines, bad = [], []
    try:
        for f in a.proof:
            got = check_proof(_doc(f))
            lines += got[0]
            bad += got[1]
        for f in a.sweep:
            got = check_sweep(_doc(f), f.rsplit("/", 1)[-1])
            lines += got[0]
            bad += got[1]
    except (OSError, ValueError) as e:
        print(f"check_why: cannot read the documents: {e}", file=sys.stderr)
        return 2
    print("\n".join(lines))
    print(f"{len(lines)} answers, {len(bad)} problems" + "".join(f"\n  {b}" for b in bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
