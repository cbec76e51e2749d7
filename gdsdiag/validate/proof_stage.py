"""validate --proof as a stage of validate's report: what the options ask for (ProofPlan), and the
matrix built from the check report the rules were judged on (runner.run calls run() once, after
the rules), so a validate runs gdsdiag check once — its O_DIRECT probe per path included."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from ..errors import UsageError
from .proof import DEFAULT_BS, ProofMatrix, run_matrix

MAX_PROOF_SIZE = 1 << 30
# 'all' or up to 4,096 ASCII GPU indices or labels, checked before any work
_GPUS = re.compile(r"(?:(?:GPU)?[0-9]{1,4})(?:,(?:GPU)?[0-9]{1,4})*", re.I)


@dataclass(frozen=True)
class ProofPlan:
    gpus: str  # "all" or 0,1 / GPU0,GPU1
    size: int  # bytes read and written per probe
    timeout_s: float  # before a probe child is killed

    @classmethod
    def parse(cls, gpus: str, size_text: str, timeout_s: float) -> ProofPlan:
        """The --proof-* values checked before anything runs (a bad one is a UsageError, exit 4)."""
        from ..units import parse_size

        if timeout_s <= 0:
            raise UsageError(f"--proof-timeout {timeout_s:g}: must be > 0", "give seconds, e.g. --proof-timeout 60")
        if gpus != "all" and (gpus.count(",") >= 4096 or not _GPUS.fullmatch(gpus)):
            raise UsageError(f"--proof-gpus {gpus[:40]!r}: not 'all' or a list of GPU indices", "give e.g. 0,1 or all")
        try:
            size = parse_size(size_text)
        except ValueError:
            raise UsageError(f"--proof-size {size_text!r} is not a size", "give e.g. 16M") from None
        if size < DEFAULT_BS or size % DEFAULT_BS or size > MAX_PROOF_SIZE:
            raise UsageError(
                f"--proof-size {size_text}: must be a multiple of 1 MiB from 1 MiB to 1 GiB",
                "give e.g. --proof-size 16M",
            )
        return cls(gpus, size, timeout_s)


def run(ctx, check_report, paths: list[str], plan: ProofPlan, say) -> ProofMatrix:
    """The matrix of every GPU × --path, from the check report the rules were judged on. The rules
    judged every mount (the policy's too); the proof proves the --path directories, in their order.
    The node's facts (check/facts.py) come from the node checks, which the extra mounts leave alone."""
    first = {pv.path: pv for pv in reversed(check_report.paths)}
    narrowed = replace(check_report, paths=[first[p] for p in paths])
    return run_matrix(ctx, narrowed, plan.gpus, plan.size, DEFAULT_BS, plan.timeout_s, say)
