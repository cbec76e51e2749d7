"""Gather what the rules need, cheapest first, and evaluate every rule once.

Order: static reads (check, topology) → static rules → if no fatal failure (or --keep-going) and
--quick/--full: the sweep per GPU per mount (in --full attached to gdsdiag trace) → measured rules
→ with --proof, the proof matrix (proof_stage.py) from the same check report: check runs once.
A rule that could not be evaluated says SKIP with the reason; every rule appears exactly once.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .. import __version__
from ..check.model import Evidence
from ..errors import EXIT_FAIL, EXIT_OK, EXIT_WARN, GdsdiagError
from ..verdicts import Status
from . import adapters
from .consistency import MAX_PROBLEMS, sweep_problems
from .policy import Policy
from .rules import MEASURED, RULES, Inputs, RuleResult, route_mix

if TYPE_CHECKING:
    from ..schema import validate as schema
    from .proof import ProofMatrix
    from .proof_stage import ProofPlan

ORDER = {Status.FAIL: 3, Status.WARN: 2, Status.PASS: 1, Status.SKIP: 0, Status.INFO: 0}


# What validate's rules read of a 'sweep --json' document (--sweep-results); other keys are kept.
_S = (str, None)
SWEEP_SHAPE = {
    "config": ({"dir": _S, "gpu": (int, None)}, None),
    "points": (
        [
            {
                "mode!": str,
                "rw!": str,
                "bs!": int,
                "threads!": int,
                "error": (str, None),
                "route": (str, {"*": (float, None)}, None),  # /1 a label, /2 a mix of shares
                "verified_bytes": (int, None),
                "summary": (
                    {"gbps": (float, None), "bytes": (int, None), "lat_us": ({"*": (float, None)}, None)},
                    None,
                ),
                "route_detail": ({"cufile_stats": ({"routes": ({"*": (float, None)}, None)}, None)}, None),
                "route_mix": ({"*": (int, None)}, None),  # {"NVFS": 3, ...}: a list or text crashed (issue 42)
            }
        ],
        None,
    ),
}


@dataclass
class ValidateReport:
    results: list[RuleResult]
    policy: Policy
    level: str  # static | quick | full
    node: schema.Node
    sweeps: list[dict] = field(default_factory=list)
    trace: dict[str, schema.RouteCount] | None = None
    stopped_early: str | None = None
    seconds: float = 0.0
    proof: ProofMatrix | None = None  # --proof: every GPU × --path (docs/validate.md "Proof matrix")

    def worst(self) -> Status:
        return max((r.status for r in self.results), key=lambda s: ORDER[s], default=Status.PASS)

    @property
    def exit_code(self) -> int:
        """The rules' code (the JSON's and Prometheus's "exit_code"; the proof matrix has its own)."""
        w = self.worst()
        return EXIT_FAIL if w == Status.FAIL else EXIT_WARN if w == Status.WARN else EXIT_OK

    @property
    def command_exit_code(self) -> int:
        """What 'gdsdiag validate' exits with: the worse of the rules' and the proof matrix's."""
        return self.exit_code if self.proof is None else max(self.exit_code, self.proof.exit_code)

    def route_ratio(self) -> dict[str, float]:
        mix, _ = route_mix(self.sweeps)
        tot = sum(mix.values())
        return {k: v / tot for k, v in sorted(mix.items())} if tot else {}


# The key of the app-specific node ids: systemd asks that /etc/machine-id never leave the host as it
# is ("confidential", machine-id(5)) but be keyed per application, as sd_id128_get_machine_app_specific
# does; the boot id is hashed the same way so a report carries neither raw id.
_NODE_ID_KEY = b"gdsdiag.validate node id 1"
_ID_TEXT = re.compile(r"[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}")


def node_ids(fs) -> dict[str, str | None]:
    """Which machine and which boot the report is of, as read under the root: ``machine_id`` from
    /etc/machine-id (one installation; a cloned image that never regenerated it shares it), and
    ``boot_id`` from /proc/sys/kernel/random/boot_id (the kernel's random id of this boot, the same
    inside a container as on its host). Each None when absent (a snapshot captures neither) or not
    an id. ``gdsdiag report`` tells nodes with one hostname apart by them."""
    out: dict[str, str | None] = {}
    for key, path in (("machine_id", "/etc/machine-id"), ("boot_id", "/proc/sys/kernel/random/boot_id")):
        raw = (fs.read_text(path) or "").strip()
        ok = _ID_TEXT.fullmatch(raw) and raw.replace("-", "").strip("0")
        digest = hmac.new(_NODE_ID_KEY, raw.replace("-", "").lower().encode(), hashlib.sha256).hexdigest()
        out[key] = f"hmac:{digest[:16]}" if ok else None
    return out


def snapshot_id(ctx) -> str:
    """A stable id of the node's state as read: hash of the facts the static rules used (driver,
    nvidia-fs, libcufile, PCI functions with links, IOMMU, cufile.json). Two reports with the same id
    saw the same node configuration."""
    topo = ctx.topology
    facts = {
        "driver": ctx.driver.version,
        "gpus": sorted(ctx.driver.gpus),
        "nvfs": ctx.nvfs.module_version or ctx.nvfs.proc_version,
        "libcufile": getattr(ctx.libcufile, "version", None),
        "iommu": topo.iommu.mode,
        "kernel": ctx.release,
        "pci": sorted(
            f"{d.bdf} {d.role.value} {d.fn.link.describe() if getattr(d.fn, 'link', None) else ''}"
            for d in topo.devices.values()
        ),
        "cufile_json": ctx.cufile.data,
    }
    return "sha256:" + hashlib.sha256(json.dumps(facts, sort_keys=True, default=str).encode()).hexdigest()[:16]


def inconsistent(rule, problems: list[str]) -> RuleResult:
    """A measured rule's verdict on sweep results that contradict themselves (validate/consistency.py):
    no PASS from a document whose numbers cannot all be true, and no verdict on its numbers either."""
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    return RuleResult(
        rule.id,
        rule.title,
        Status.FAIL,
        f"inconsistent input: {problems[0]}{more}",
        [Evidence("--sweep-results", p) for p in problems[:MAX_PROBLEMS]],
        "re-run 'gdsdiag sweep --json' on the node and judge that document; this one was edited or damaged",
        rule.source,
        rule.stage,
    )


def _gpus(policy: Policy, inp: Inputs) -> list[int]:
    want = policy.get("sweep.gpus")
    if want == "all":
        n = len(inp.ctx.driver.gpus) or 1
        return list(range(n))
    return list(want)


def run(
    ctx,
    policy: Policy,
    paths: list[str],
    level: str = "static",
    keep_going: bool = False,
    progress=None,
    sweep_results: Sequence[str] = (),
    trace_replay: str | None = None,
    proof: ProofPlan | None = None,
) -> ValidateReport:
    """level: static (files only), quick or full (also measure). sweep_results: existing
    gdsdiag sweep documents (/1 or /2) to judge instead of sweeping; trace_replay: a recorded trace;
    proof: prove the route of every GPU × ``paths`` (run whatever the rules said: the matrix says why
    itself)."""
    t0 = time.monotonic()
    say = progress or (lambda msg: None)
    mounts = [dict(m) for m in policy.get("mounts")]
    for p in paths:
        if p not in {m["path"] for m in mounts}:
            mounts.append({"path": p})
    inp = Inputs(policy, ctx, mounts)
    say("reading the node (check, topology)")
    inp.check = adapters.check_report(ctx, [m["path"] for m in mounts])
    inp.topo, inp.pairs, _ = adapters.topology(ctx.fs)  # the check's own root: read once
    results: list[RuleResult] = []
    for rule in (r for r in RULES if r.stage != MEASURED):
        say(f"rule {rule.id}")
        results.append(rule.evaluate(inp))
    fatal = [
        r
        for r, rule in zip(results, [x for x in RULES if x.stage != MEASURED])
        if rule.fatal and r.status == Status.FAIL
    ]
    stopped = None
    measure = level in ("quick", "full") or sweep_results or trace_replay
    if fatal and not keep_going and measure:
        stopped = (
            "fatal: "
            + ", ".join(r.rule for r in fatal)
            + " failed; measurements skipped (--keep-going runs them anyway)"
        )
        inp.sweep_note = stopped
    elif sweep_results or trace_replay:
        for f in sweep_results:
            from ..bounded import MAX_REPORT_JSON, check_shape, load_user_json

            doc = load_user_json(f, "sweep results", MAX_REPORT_JSON, "give a 'gdsdiag sweep --json' document")
            from ..schema.sweep import READABLE

            if not isinstance(doc, dict) or doc.get("schema") not in READABLE:
                raise GdsdiagError(f"{f} is not a gdsdiag sweep document", "give a 'gdsdiag sweep --json' document")
            check_shape(f, doc, SWEEP_SHAPE, "gdsdiag sweep document")
            inp.inconsistent += sweep_problems(doc, f)
            cfg = doc.get("config") or {}  # null is allowed by the shape: then nothing is known of it
            inp.sweeps.append({"path": cfg.get("dir") or f, "gpu": cfg.get("gpu") or 0, "doc": doc})
        if trace_replay:
            inp.trace = adapters.trace_replay(trace_replay)
        if not inp.sweeps:
            inp.sweep_note = "no sweep results given"
    elif level in ("quick", "full"):
        if not mounts:
            inp.sweep_note = "nothing to measure: give --path DIR (or policy mounts)"
        else:
            pts = policy.get(f"sweep.{level}")
            why_no_trace = adapters.trace_available() if level == "full" else None
            if level == "full" and why_no_trace:
                inp.trace_note = why_no_trace
            # (a node without a GPU sweeps its host modes only: no "GPU0" it does not have, issue 46)
            on = "GPU{}" if inp.ctx.driver.gpus else "(no GPU)"
            for m in mounts:
                for gpu in _gpus(policy, inp):
                    say(
                        f"sweep {on.format(gpu)} {m['path']} ({level}"
                        + (", traced)" if level == "full" and not why_no_trace else ")")
                    )
                    try:
                        if level == "full" and not why_no_trace:
                            doc, tr = adapters.traced_sweep(m["path"], gpu, pts)
                            inp.trace = inp.trace or {}
                            inp.trace_of_own_sweep = True
                            for k, v in tr.items():
                                cur = inp.trace.setdefault(k, {"count": 0, "bytes": 0})
                                cur["count"] += v["count"]
                                cur["bytes"] += v["bytes"]
                        else:
                            doc = adapters.sweep(m["path"], gpu, pts)
                    except GdsdiagError as e:
                        msg = f"sweep of {m['path']} {'on ' if inp.ctx.driver.gpus else ''}{on.format(gpu)} failed: {e.cause}"
                        say(msg)
                        if "needs cupy" in e.cause:
                            inp.sweep_note = msg  # this gdsdiag install cannot measure: not the node's fault
                        else:
                            inp.sweep_errors.append(msg)  # the node could not do GPU I/O: a failure
                        continue
                    inp.sweeps.append({"path": m["path"], "gpu": gpu, "doc": doc, "on": on.format(gpu)})
    else:
        inp.sweep_note = "static run: measurements need --quick or --full"
    for rule in (r for r in RULES if r.stage == MEASURED):
        say(f"rule {rule.id}")
        results.append(inconsistent(rule, inp.inconsistent) if inp.inconsistent else rule.evaluate(inp))
    import platform

    ids = node_ids(ctx.fs)
    node: schema.Node = {
        "hostname": platform.node() if ctx.live else None,
        "root": ctx.fs.root,
        "snapshot_id": snapshot_id(ctx),
        "machine_id": ids["machine_id"],
        "boot_id": ids["boot_id"],
        "tool_version": __version__,
        "kernel": ctx.release,
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    rep = ValidateReport(results, policy, level, node, inp.sweeps, inp.trace, stopped, round(time.monotonic() - t0, 2))
    if proof is not None:  # (its time is the matrix's own "seconds", not the rules')
        from . import proof_stage

        rep.proof = proof_stage.run(ctx, inp.check, paths, proof, say)
    return rep
