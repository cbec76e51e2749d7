"""What the held-out loader sets (loaders_heldout.py, loaders_heldout2.py, loaders_heldout3.py) share:
the GROUND_TRUTH line each loader prints for score_loaders.py, and the command line."""

from __future__ import annotations

import json
import os
import sys


def paths(d: str, sub: str, names: dict[str, str]) -> dict[str, str]:
    """A set's files under D/SUB: {key: path} for NAMES {key: file name}."""
    return {k: os.path.join(d, sub, v) for k, v in names.items()}


def files_under(top: str) -> list[str]:
    """Every file under TOP, sorted."""
    out = []
    for root, _, names in os.walk(top):
        out += [os.path.join(root, n) for n in names]
    return sorted(out)


def written(top: str, d: str) -> None:
    """What prepare wrote under TOP on disk before any eviction; its sizes printed (paths from D)."""
    files = files_under(top)
    for f in files:
        fd = os.open(f, os.O_RDONLY)
        os.fsync(fd)
        os.close(fd)
    print(json.dumps({os.path.relpath(f, d): os.path.getsize(f) for f in files}))


def truth(loader: str, files: dict, extra: dict | None = None) -> None:
    """Print LOADER's GROUND_TRUTH line. FILES: {path: (bytes on the expected route, route)}."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from loaders import _cached_pages

    for f, (n, _) in files.items():
        if not 0 <= n <= os.path.getsize(f):
            raise SystemExit(f"{loader}: truth of {f} is {n} bytes, outside 0..{os.path.getsize(f)}")
    doc = {
        "loader": loader,
        "files": {
            f: {"size": os.path.getsize(f), "to_gpu": int(n), "route": r, "cached_after": _cached_pages(f)}
            for f, (n, r) in files.items()
        },
        **(extra or {}),
    }
    sys.stdout.write("GROUND_TRUTH " + json.dumps(doc) + "\n")  # (one write: never split by another's line)
    sys.stdout.flush()


def main(argv: list[str], doc: str, prepare, loaders: dict) -> int:
    """`SCRIPT prepare DIR` or `SCRIPT LOADER DIR`: 2 on a wrong command line, 3 when a loader's
    library is missing (never a GROUND_TRUTH line without the real library)."""
    if len(argv) != 3:
        print(doc, file=sys.stderr)
        return 2
    what, d = argv[1], argv[2]
    fns = {"prepare": prepare, **loaders}
    if what not in fns:
        print(f"unknown loader {what}; one of {', '.join(fns)}", file=sys.stderr)
        return 2
    try:
        fns[what](d)
    except ImportError as e:
        print(f"{os.path.basename(argv[0])} {what}: a library is missing: {e}", file=sys.stderr)
        return 3
    return 0
