#!/usr/bin/env python3
"""A gdsdiag command under cProfile, also when it ends through os._exit (a trace, a report of a
million objects: their process leaves its heap to the OS, and cProfile's own exit hook never runs).

  python3 benchmarks/profile_command.py OUT.prof [--print N] -- trace --json -- CMD...

The gdsdiag imported is the one first on sys.path (PYTHONPATH=TREE for another checkout). With
--print N the N functions of most own CPU time are printed when the command ends (CPU time,
not wall time: a trace spends most of its wall time waiting in the ring buffer's poll)."""

import cProfile
import os
import pstats
import sys
import time


def main() -> None:
    if "--" not in sys.argv[1:]:
        raise SystemExit(__doc__)
    cut = sys.argv.index("--")
    mine, args = sys.argv[1:cut], sys.argv[cut + 1 :]
    out, top = mine[0], int(mine[mine.index("--print") + 1]) if "--print" in mine else 0
    prof = cProfile.Profile(time.process_time)  # CPU time: a poll's wait is not the tracer's cost
    leave = os._exit

    def dump(code: int) -> None:
        prof.disable()
        prof.dump_stats(out)
        if top:
            pstats.Stats(out, stream=sys.stderr).sort_stats("tottime").print_stats(top)
        leave(code)

    os._exit = dump  # type: ignore[assignment]
    sys.argv = ["gdsdiag", *args]
    from gdsdiag.cli import main as gdsdiag_main

    prof.enable()
    try:
        gdsdiag_main()
    except SystemExit as e:
        dump(e.code if isinstance(e.code, int) else 0)
    dump(0)


if __name__ == "__main__":
    main()
