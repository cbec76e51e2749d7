"""What a traced program said on stderr about its data path: the lines a loader prints when it falls
back from GDS ("GDS device node /dev/nvidia-fs0 not found; falling back to nogds copier"), libcufile's
and kvikio's own complaints. The probes send the first writes of each process to descriptor 2
(probes/cufile_trace.c stderr_enter); this joins their parts into lines and keeps the few that name
the data path, so a recording holds those lines and nothing else the program printed.

Pure: text in, lines out (the reader feeds it, the classifier reads its "said" events)."""

from __future__ import annotations

import re

# Words of the data path a loader's or library's message uses. A line must hold one to be kept:
# everything else a program prints (progress bars, its results) is none of the tracer's business.
PATH_WORDS = re.compile(
    r"nvidia[-_]fs|\bgds\b|nogds|gpudirect|cufile|compat(?:ibility)?[ _-]mode|fall(?:ing|s)?[ -]?back"
    r"|o_direct|p2p|bounce buffer|kvikio|peer[ -]to[ -]peer",
    re.IGNORECASE,
)
LINE_MAX = 300  # characters kept of one line (the part that says why comes first)
LINES_PER_PROCESS = 32  # lines kept per process: a loader says why once, at its start
PENDING_MAX = 1024  # characters of an unfinished line held per process


def keep(line: str) -> bool:
    """Whether LINE names the data path (PATH_WORDS)."""
    return bool(PATH_WORDS.search(line))


class StderrLines:
    """Parts of writes to stderr in, whole lines that name the data path out, per process."""

    def __init__(self) -> None:
        self._pending: dict[int, str] = {}
        self._kept: dict[int, int] = {}

    def feed(self, pid: int, text: str) -> list[str]:
        """The lines TEXT completes for process PID that are kept (at most LINES_PER_PROCESS each)."""
        if self._kept.get(pid, 0) >= LINES_PER_PROCESS:
            return []
        text = self._pending.pop(pid, "") + text.replace("\r", "\n")
        *done, rest = text.split("\n")
        if rest:
            self._pending[pid] = rest[-PENDING_MAX:]
        out = []
        for line in done:
            line = line.strip()
            if line and keep(line) and self._kept.get(pid, 0) < LINES_PER_PROCESS:
                self._kept[pid] = self._kept.get(pid, 0) + 1
                out.append(line[:LINE_MAX])
        return out

    def flush(self, pid: int) -> list[str]:
        """The unfinished line of PID (it exited, or the trace ends), if kept."""
        rest = self._pending.pop(pid, "").strip()
        return self.feed(pid, rest + "\n") if rest else []

    def pids(self) -> list[int]:
        return list(self._pending)
