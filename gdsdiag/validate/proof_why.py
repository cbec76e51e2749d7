"""A proof cell's why (issue 45): its outcome (proof.reconcile) joined to the node's facts by the
builder trace's files and sweep's points use (check/why.route_why), so the three answer from
`check`'s one rule set. Pure: the cell's two runs and a NodeFacts in, facts and the fix out."""

from __future__ import annotations

from ..check.facts import Fact, NodeFacts
from ..check.why import failure_why, forced_compat, route_why
from ..routes import Route

PROOF = "gdsdiag validate --proof"
AS_CONFIGURED = f"{PROOF} (the run as configured)"
FORBIDDEN = f"{PROOF} (the run with allow_compat_mode false)"
# the probe's stages where a failure is cuFile's own refusal, with its error code (proof_probe.STAGES)
CUFILE_STAGES = ("driver_open", "handle_register", "buf_register", "read", "write")


def _log_facts(run: dict | None) -> list[Fact]:
    """libcufile's own last lines of a failed run: its words, not ours."""
    return [
        Fact("cufile.log", line, "cufile.log of the compat-forbidden run") for line in (run or {}).get("log_tail") or []
    ][:3]


def cell_why(
    result: str,
    line: str,
    runs: tuple[dict, dict | None],
    said: tuple[str, tuple[Route, str] | None, str, str],
    node: NodeFacts | None,
    path: str,
    no_gpu: str | None = None,
) -> tuple[list[Fact], str]:
    """Facts (decisive first) and the fix of one cell. RESULT and LINE are its Outcome's; RUNS the
    configured and compat-forbidden runs; SAID what proof.py read of them (the configured run's
    counters, the forbidden run's measured route where it did I/O, what that run says, and the
    configured run's failure); NO_GPU the matrix's note where the node has no GPU."""
    conf, forb = runs
    counted, forbidden_route, forbidden_says, failure = said
    counters = Fact("cuFile's counters", counted, AS_CONFIGURED)
    if result == "verified":
        return [Fact("the probe", line, PROOF, "decisive")], "none needed"
    if result == "mismatch":
        return [Fact("the data read back", line, PROOF, "decisive")], (
            "none on this node's configuration: the storage or the GPU path returned other bytes than were "
            "written; run it again and check dmesg and the device's errors"
        )
    if result == "skipped":
        return [Fact("the probe", line, PROOF, "decisive")], "none known: the probe could not tell the route"
    forbidden = Fact("compat forbidden", forbidden_says, FORBIDDEN)
    if result == "compat" and forbidden_route is not None:
        fr = forbidden_route
        if fr[0].is_p2p:
            # the two runs differ only in allow/force_compat_mode and CUFILE_*_COMPAT_MODE (proof.py
            # compat_forbidden_config, COMPAT_ENV): P2P works here, and the configuration forced compat
            two = Fact("the two runs", f"as configured: {counted}; with compat forbidden: {fr[1]}", PROOF)
            forced = forced_compat(node, "decisive") if node is not None else None
            if forced is not None:
                return [forced[0], two], forced[1]
            return [
                Fact(two.fact, two.value + " (they differ only in the compat keys and variables)", PROOF, "decisive"),
                Fact("cufile.json", (node.cufile_json or "none found") if node else "not read", "gdsdiag check"),
            ], (
                "unset CUFILE_FORCE_COMPAT_MODE in the environment the I/O runs in, and set "
                "properties.force_compat_mode to false in the cufile.json it reads (CUFILE_ENV_PATH_JSON first)"
            )
    if result == "no_route" and no_gpu:
        return [Fact("GPU", no_gpu, "gdsdiag topology (the node's PCI devices)", "decisive"), *_log_facts(conf)], (
            "none on this node: it has no NVIDIA GPU; prove GDS on a GPU node"
        )
    if result == "no_route":
        measured = Fact("the probe", failure, AS_CONFIGURED)
        if conf.get("stage") in CUFILE_STAGES and conf.get("code") is not None:
            facts, fix = route_why(Route.NONE, measured, node, path)  # cuFile refused it: the node says why
        else:
            facts, fix = failure_why(measured, node, path)  # a timeout, a crash, no libcufile: its own reason
        return facts + _log_facts(conf), fix
    # compat and not_taken: cuFile bounced the I/O through its POSIX pool; the node says why
    facts, fix = route_why(Route.COMPAT, counters, node, path)
    return facts + [forbidden, *_log_facts(forb)], fix
