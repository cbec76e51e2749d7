"""The one verdict vocabulary, beside the one route vocabulary (``routes.Route``).

``Status`` is what a check or a policy rule ended with (PASS … SKIP). ``Severity`` is how much a
finding matters: a topology finding, a cufile.json issue, an explained log line. ``STYLE`` is the
one colour table every renderer takes a route, status or severity's colour from (a colour is
never the only mark: every renderer also prints the word).
"""

from __future__ import annotations

from enum import Enum


class Status(str, Enum):
    PASS = "PASS"
    WARN = "WARN"
    FAIL = "FAIL"
    SKIP = "SKIP"
    INFO = "INFO"


class Severity(str, Enum):
    """info | warn | fail, the same three words in every --json document that carries a severity."""

    INFO = "info"
    WARN = "warn"
    FAIL = "fail"

    def __str__(self) -> str:
        return self.value

    @property
    def rank(self) -> int:
        """fail 2, warn 1, info 0: sort and compare by it."""
        return _RANK[self]

    @property
    def status(self) -> Status:
        """The status a finding of this severity gives the check or rule that reports it."""
        return {Severity.INFO: Status.INFO, Severity.WARN: Status.WARN, Severity.FAIL: Status.FAIL}[self]


_RANK = {Severity.INFO: 0, Severity.WARN: 1, Severity.FAIL: 2}


def worst(severities) -> Severity | None:
    """The gravest of ``severities`` (None for none)."""
    return max(severities, key=lambda s: s.rank, default=None)


# rich styles, by the word a renderer prints: route names, status and severity words
STYLE: dict[str, str] = {
    # routes.Route
    "NVFS": "green",
    "P2PDMA": "green",
    "RDMA": "green",
    "PEER_GPU": "cyan",
    "COMPAT": "yellow",
    "DRAM_BOUNCE": "magenta",
    "HOST": "dim",
    "UNKNOWN": "red",  # a route, or a pair's P2P, not known: said loudly (the word or '?' mark goes with it)
    "NONE": "red",
    "ERROR": "red",  # a sweep point without a trustworthy number
    # topology.pairs.P2pVerdict
    "P2P_NVLINK": "green",
    "P2P": "green",
    "P2P_VIA_HOST": "yellow",
    "NO_P2P": "red",
    # Status
    "PASS": "green",
    "WARN": "yellow",
    "FAIL": "red",
    "SKIP": "dim",
    "INFO": "cyan",
    # Severity
    "fail": "red",
    "warn": "yellow",
    "info": "cyan",
}


def style(word: str) -> str:
    """The colour of a route, status or severity word ('' for a word the table does not know)."""
    return STYLE.get(str(word.value if isinstance(word, Enum) else word), "")
