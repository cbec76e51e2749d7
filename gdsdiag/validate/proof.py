"""The proof matrix: for every GPU × storage target, a checksummed cuFile read+write probe as
configured and again with compatibility mode forbidden, reconciled with what check/topology
predicted into one line per cell (docs/validate.md "Proof matrix").

Here: the targets and predictions (from gdsdiag check's per-path verdicts and topology's GPU ↔
device pairs), the private cufile.json, the children (gdsdiag.validate.proof_probe, one per cell
and mode, each with a timeout) and the reconciliation (``reconcile``, a pure function the tests
drive with real captures). The renderings are in proof_out.py.

Writes only under the probe directories given: each cell gets its own subdirectory there (the
probe file, the private cufile.json, libcufile's log) and that subdirectory is removed whatever
the child did, a timeout included.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..errors import EXIT_FAIL, EXIT_OK, EXIT_TOOL_ERROR, EXIT_WARN, UsageError
from ..extras import install_command
from ..routes import Route
from ..selfexec import module_argv

if TYPE_CHECKING:
    from ..schema import validate as schema

# One result per cell, worst last; the line of a cell starts with its text.
RESULTS = ("verified", "compat", "bounce", "not_taken", "skipped", "mismatch", "no_route")
TEXT = {
    "verified": "P2P verified",
    "compat": "COMPAT",
    "bounce": "DRAM bounce",
    "not_taken": "P2P predicted but not taken",
    "skipped": "skipped",
    "mismatch": "data mismatch",
    "no_route": "no route",
}
EXIT = {
    "verified": EXIT_OK,
    "compat": EXIT_WARN,  # the I/O works and its data is right, but over host memory
    "bounce": EXIT_WARN,
    "not_taken": EXIT_WARN,
    "skipped": EXIT_WARN,
    "mismatch": EXIT_FAIL,
    "no_route": EXIT_FAIL,
}
MAX_TARGETS = 16  # bounds the matrix, the Prometheus series and the run time (cells × 2 children)
DEFAULT_SIZE = 16 << 20
DEFAULT_BS = 1 << 20
DEFAULT_TIMEOUT_S = 60.0


@dataclass
class Prediction:
    route: Route  # what gdsdiag check says a cuFile I/O there would take
    reasons: list[str]
    p2p: str | None = None  # topology's GPU ↔ storage device verdict (P2P_DIRECT, NO_P2P…), None: no PCI device
    p2pdma_map: str | None = None  # the kernel's P2PDMA map type for that pair

    def to_json(self) -> schema.ProofPrediction:
        return {"route": self.route.value, "reasons": self.reasons, "p2p": self.p2p, "p2pdma_map": self.p2pdma_map}


@dataclass
class Target:
    path: str
    kind: str  # nvme | nfs-rdma | nfs | dfs | other | unknown: what the directory is stored on
    fstype: str | None
    mount_point: str | None
    devices: list[str]
    route: Route
    reasons: list[str]
    topology: list[dict] = field(default_factory=list)  # check's rows: gpu, device, nvidia_smi, p2p, p2pdma_map

    def to_json(self) -> schema.ProofTarget:
        return {
            "path": self.path,
            "kind": self.kind,
            "fstype": self.fstype,
            "mount_point": self.mount_point,
            "devices": self.devices,
            "predicted": self.route.value,
            "reasons": self.reasons,
        }

    def predict(self, gpu: str | None) -> Prediction:
        """The node-level prediction for this directory, narrowed by the GPU ↔ device pair: a
        direct route the topology rules out for this GPU is predicted as the fallback."""
        rows = [r for r in self.topology if r.get("gpu") == gpu]
        p2p = rows[0].get("p2p") if rows else None
        pmap = rows[0].get("p2pdma_map") if rows else None
        route, reasons = self.route, list(self.reasons)
        if route.is_p2p and rows:
            bad = [r for r in rows if r.get("p2p") == "NO_P2P"]
            if route == Route.P2PDMA:
                bad += [r for r in rows if r.get("p2pdma_map") == "NOT_SUPPORTED" and r not in bad]
            if bad:
                r = bad[0]
                reasons.append(f"{gpu} ↔ {r['device']}: {r.get('p2p')} (P2PDMA map {r.get('p2pdma_map')})")
                route = Route.COMPAT
        return Prediction(route, reasons, p2p, pmap)


def target_kind(pv) -> str:
    fs = (pv.fstype or "").lower()
    if fs in ("nfs", "nfs4"):
        return "nfs-rdma" if any("proto=rdma" in r or "over RDMA" in r for r in pv.reasons) else "nfs"
    if fs in ("lustre", "beegfs", "gpfs", "wekafs") or fs.startswith("lustre"):
        return "dfs"
    if any("nvme" in d for d in pv.devices):
        return "nvme"
    return "other" if fs else "unknown"


def targets_from_check(check_report) -> list[Target]:
    """One target per --path, with check's reasons for its route; where that route is not direct,
    the node's reasons follow (first clause each: "NVFS route unavailable: nvfs.loaded: nvidia-fs
    is not loaded"), since a path's own reason (ext4 on virtio…) rarely names the missing driver."""
    verdict = getattr(check_report, "verdict", None)
    node = [r.split(";")[0] for r in (getattr(verdict, "reasons", None) or [])]
    return [
        Target(
            pv.path,
            target_kind(pv),
            pv.fstype,
            pv.mount_point,
            list(pv.devices),
            pv.route,
            list(pv.reasons) + ([] if pv.route.is_p2p else node),
            [dict(r) for r in pv.topology],
        )
        for pv in check_report.paths
    ]


# ---- the private cufile.json -------------------------------------------------------------


def compat_forbidden_config(node_config: dict | None) -> dict:
    """A copy of the node's cufile.json with compatibility mode forbidden: allow_compat_mode false
    (cuFile then fails an I/O it cannot do by P2P instead of bouncing it through host memory) and
    force_compat_mode false (else every I/O would be compat by configuration). Everything else is
    the node's, so the probe still sees its P2PDMA, RDMA and denylist settings."""
    data = json.loads(json.dumps(node_config)) if isinstance(node_config, dict) else {}
    props = data.get("properties")
    if not isinstance(props, dict):
        props = data["properties"] = {}
    props["allow_compat_mode"] = False
    props["force_compat_mode"] = False
    return data


# Environment variables that override cufile.json's compat settings (NVIDIA GDS troubleshooting
# guide §3.5; ../shared/research/cufile-kvikio.md §2.3): removed for the compat-forbidden run.
COMPAT_ENV = ("CUFILE_FORCE_COMPAT_MODE", "CUFILE_ALLOW_COMPAT_MODE")


# ---- the children --------------------------------------------------------------------------


def _tail(path: str, n: int = 6) -> list[str]:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = [x.rstrip() for x in f.readlines()[-200:] if x.strip()]
    except OSError:
        return []
    return [x[:300] for x in lines[-n:]]


def run_probe(
    directory: str,
    gpu_bdf: str | None,
    mode: str,
    node_config: dict | None,
    size: int = DEFAULT_SIZE,
    bs: int = DEFAULT_BS,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    library_path: str | None = None,
) -> dict:
    """One child for one cell and mode (configured | compat_forbidden): its JSON answer, or a
    named timeout. The cell's subdirectory of ``directory`` is removed before this returns."""
    from .. import workdirs

    t0 = time.monotonic()
    workdirs.remove_stale("gdsdiag-proof-", directory)  # the cells a killed proof left on the target
    try:
        cell_dir = tempfile.mkdtemp(prefix=f"gdsdiag-proof-{mode}-", dir=directory)
        cell_lock = workdirs.hold(cell_dir)
    except OSError as e:
        return {
            "ok": False,
            "stage": "file",
            "error": f"cannot create a probe directory in {directory}: {e.strerror}",
            "name": "EACCES" if e.errno == 13 else "OSError",
            "code": e.errno,
            "seconds": 0.0,
            "removed": True,
        }
    env = dict(os.environ)
    env["CUFILE_LOGFILE_PATH"] = os.path.join(cell_dir, "cufile.log")  # never the cwd or ~/.cache
    env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
    # the child imports this same gdsdiag (from a checkout too: its cwd is the cell directory)
    pkg_parent = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = pkg_parent + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.pop("CUDA_VISIBLE_DEVICES", None)  # the child finds the GPU by PCI address among all
    if library_path:
        env["GDSDIAG_LIBCUFILE"] = library_path
    if mode == "compat_forbidden":
        cfg = os.path.join(cell_dir, "cufile.json")
        with open(cfg, "x", encoding="utf-8") as f:
            json.dump(compat_forbidden_config(node_config), f, indent=1)
        env["CUFILE_ENV_PATH_JSON"] = cfg
        for k in COMPAT_ENV:
            env.pop(k, None)
    spec = {"dir": cell_dir, "gpu_bdf": gpu_bdf, "size": size, "bs": bs}
    out: dict
    proc = None
    try:
        proc = subprocess.Popen(
            module_argv("gdsdiag.validate.proof_probe", json.dumps(spec)),  # never the cwd's package
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=cell_dir,  # anything libcufile writes relative to the cwd stays in the cell
        )
        try:
            so, se = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            try:
                proc.communicate(timeout=5)
                left = ""
            except subprocess.TimeoutExpired:  # stuck in the kernel (D state): do not wait for it
                left = f"; pid {proc.pid} did not exit after SIGKILL (stuck in the kernel)"
            out = {
                "ok": False,
                "stage": "timeout",
                "hung": True,
                "name": "TIMEOUT",
                "code": None,
                "error": f"the probe did not finish within {timeout_s:g} s{left} — storage or the GPU hung, "
                "or libcufile 1.16+ spins in cuFileDriverOpen without libcuda.so.1",
            }
        else:
            try:
                out = json.loads(so.strip().splitlines()[-1])
            except (ValueError, IndexError):
                out = {
                    "ok": False,
                    "stage": "child",
                    "name": "CHILD_FAILED",
                    "code": proc.returncode,
                    "error": f"probe process failed (rc {proc.returncode}): {' '.join(se.split())[-300:]}",
                }
        out["log_tail"] = _tail(env["CUFILE_LOGFILE_PATH"]) if not out.get("ok") else []
    finally:
        if proc is not None and proc.poll() is None:  # interrupted (Ctrl-C, SIGTERM): the child goes too
            proc.kill()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        shutil.rmtree(cell_dir, ignore_errors=True)
        removed = not os.path.lexists(cell_dir)
        os.close(cell_lock)
    out["removed"] = bool(out.get("removed", True)) and removed
    out["seconds"] = round(time.monotonic() - t0, 2)
    return out


# ---- reconciliation ----------------------------------------------------------------------


def measured_route(path_mix: dict | None) -> tuple[Route, str]:
    """The route cuFile counted for the probe's I/O (level-3 counters, reads + writes), and how."""
    if not path_mix:
        return Route.UNKNOWN, "cuFile counters unavailable"
    r = path_mix.get("routes") or {}
    n = {k: int(r.get(k, 0)) for k in ("NVFS", "P2PDMA", "COMPAT", "DYNAMIC_ROUTING")}
    total = sum(n.values())
    if not total:
        return Route.UNKNOWN, "cuFile counted no I/O"
    desc = ", ".join(f"{k} {v}" for k, v in n.items() if v) + f" of {total} I/O"
    if n["COMPAT"]:
        return Route.COMPAT, desc  # any compat I/O: the route is not (only) direct
    if n["DYNAMIC_ROUTING"]:
        return Route.PEER_GPU, desc
    return (Route.NVFS if n["NVFS"] >= n["P2PDMA"] else Route.P2PDMA), desc


def _failure(run: dict) -> str:
    stage = run.get("stage") or "?"
    return f"{stage}: {run.get('error') or 'failed'}"


def _forbidden_says(run: dict | None) -> str:
    if run is None:
        return "compat-forbidden run not made"
    if run.get("compat_allowed") is True:
        return (
            "compat could not be forbidden: the driver still reports CU_FILE_ALLOW_COMPAT_MODE "
            "(the private cufile.json was not read: CUFILE_ENV_PATH_JSON ignored?)"
        )
    if run.get("ok"):
        route, how = measured_route(run.get("path_mix"))
        return f"compat forbidden: I/O OK ({how})"
    code = run.get("code")
    name = run.get("name") or "?"
    meaning = run.get("meaning") or run.get("error") or ""
    where = {"driver_open": "cuFileDriverOpen", "handle_register": "cuFileHandleRegister"}.get(
        run.get("stage") or "", run.get("stage") or "?"
    )
    return f"P2P not possible here: compat forbidden → error {code if code is not None else name} {name} at {where} ({meaning})"


@dataclass
class Outcome:
    result: str  # one of RESULTS
    route: Route
    line: str


def reconcile(pred: Prediction, conf: dict, forb: dict | None) -> Outcome:
    """One line from the prediction and the two runs. Order: wrong data beats everything; a
    configured run that could not do I/O is no route; then the route cuFile counted, judged
    against the prediction and the compat-forbidden run."""
    for name, run in (("configured", conf), ("compat forbidden", forb)):
        for d in ("read", "write"):
            io = (run or {}).get(d)
            if io and not io.get("match"):
                return Outcome(
                    "mismatch",
                    measured_route((run or {}).get("path_mix"))[0],
                    f"{TEXT['mismatch']} ({name} {d}: first wrong byte at offset {io.get('first_diff')}, "
                    f"sha256 {str(io.get('sha256'))[:12]} expected {str(io.get('sha256_expected'))[:12]})",
                )
    if not conf.get("ok"):
        if conf.get("name") in ("NO_CUPY",):
            return Outcome("skipped", Route.UNKNOWN, f"{TEXT['skipped']} ({_failure(conf)}: {install_command('cu13')})")
        return Outcome("no_route", Route.NONE, f"{TEXT['no_route']} ({_failure(conf)})")
    route, how = measured_route(conf.get("path_mix"))
    # a compat-forbidden run proves something only if the driver agreed that compat was forbidden
    forb_ok = bool(forb and forb.get("ok") and forb.get("compat_allowed") is not True)
    forb_route = measured_route(forb.get("path_mix"))[0] if forb_ok and forb else Route.UNKNOWN
    says = _forbidden_says(forb)
    why = "; ".join(pred.reasons[:2]) or "no reason recorded"  # the path's, then the node's first
    if route.is_p2p or (route == Route.UNKNOWN and forb_ok and forb_route != Route.COMPAT):
        shown = route if route.is_p2p else (forb_route if forb_route.is_p2p else pred.route)
        note = "" if pred.route.is_p2p else f"; predicted {pred.route.value}"
        if not forb_ok:
            note += f"; but {says}"
        return Outcome(
            "verified",
            shown if shown.is_p2p else Route.UNKNOWN,
            f"{TEXT['verified']} ({shown.value}: {how}; {says}{note})",
        )
    if route == Route.PEER_GPU:
        return Outcome(
            "not_taken",
            route,
            f"{TEXT['not_taken']} (cuFile dynamic routing bounced it through a peer GPU: {how}; {says})",
        )
    if route == Route.UNKNOWN:
        # no counters: only a compat-forbidden run that cuFile itself refused tells the route (the I/O
        # worked with compat allowed and not without); a timeout or a crashed child tells nothing
        stage = (forb or {}).get("stage") or ""
        refused = (
            forb is not None
            and not forb.get("ok")
            and forb.get("compat_allowed") is not True
            and stage not in ("", "timeout", "child", "load", "file")
        )
        if not refused:
            return Outcome(
                "skipped",
                Route.UNKNOWN,
                f"{TEXT['skipped']} (route unknown: {how}, and the compat-forbidden run was inconclusive: {says})",
            )
        how = f"not counted ({how}), inferred from the compat-forbidden run"
    if route == Route.COMPAT or route == Route.UNKNOWN:
        if forb_ok and forb_route.is_p2p:
            return Outcome(
                "compat",
                Route.COMPAT,
                f"{TEXT['compat']} (as configured: {how}; P2P works with compat forbidden ({forb_route.value}): check "
                "properties.force_compat_mode and CUFILE_FORCE_COMPAT_MODE)",
            )
        if pred.route.is_p2p:
            return Outcome(
                "not_taken",
                Route.COMPAT if route == Route.COMPAT else Route.UNKNOWN,
                f"{TEXT['not_taken']} (predicted {pred.route.value}: {why}; cuFile counted {how}; {says})",
            )
        return Outcome("compat", Route.COMPAT, f"{TEXT['compat']} ({why}; cuFile counted {how}; {says})")
    return Outcome("no_route", Route.NONE, f"{TEXT['no_route']} (route {route.value}: {how})")


# ---- the matrix ----------------------------------------------------------------------------


@dataclass
class Cell:
    gpu: str | None
    gpu_bdf: str | None
    target: Target
    prediction: Prediction
    configured: dict
    compat_forbidden: dict | None
    outcome: Outcome
    why_chain: list[dict] = field(default_factory=list)  # proof_why.cell_why: facts, decisive first
    fix: str = ""

    def with_why(self, node, no_gpu: str | None = None) -> Cell:
        """This cell with its why: the node's facts (check/facts.NodeFacts) joined to its runs."""
        from .proof_why import cell_why

        conf, forb = self.configured, self.compat_forbidden
        forb_did = forb is not None and forb.get("ok") and forb.get("compat_allowed") is not True
        said = (
            measured_route(conf.get("path_mix"))[1],
            measured_route(forb.get("path_mix")) if forb is not None and forb_did else None,
            _forbidden_says(forb),
            _failure(conf),
        )
        facts, self.fix = cell_why(
            self.outcome.result, self.outcome.line, (conf, forb), said, node, self.target.path, no_gpu
        )
        self.why_chain = [f.to_json() for f in facts]
        return self

    def to_json(self) -> schema.ProofCell:
        io_r = self.configured.get("read") or {}
        io_w = self.configured.get("write") or {}
        return {
            "gpu": self.gpu,
            "gpu_bdf": self.gpu_bdf,
            "path": self.target.path,
            "result": self.outcome.result,
            "route": self.outcome.route.value,
            "line": self.outcome.line,
            "predicted": self.prediction.to_json(),
            "read_gbps": io_r.get("gbps"),
            "read_p99_us": io_r.get("p99_us"),
            "write_gbps": io_w.get("gbps"),
            "write_p99_us": io_w.get("p99_us"),
            "configured": probe_json(self.configured),
            "compat_forbidden": probe_json(self.compat_forbidden) if self.compat_forbidden is not None else None,
            "why_chain": self.why_chain,  # type: ignore[typeddict-item]
            "fix": self.fix,
        }


def probe_json(run: dict) -> schema.ProofRun:
    def io(d) -> schema.ProofIo | None:
        if not d:
            return None
        return {k: d.get(k) for k in ("bytes", "n", "gbps", "p50_us", "p99_us", "match", "sha256", "first_diff")}  # type: ignore[return-value]

    pm = run.get("path_mix") or {}
    return {
        "ok": bool(run.get("ok")),
        "stage": run.get("stage"),
        "error": run.get("error"),
        "code": run.get("code"),
        "name": run.get("name"),
        "meaning": run.get("meaning"),
        "compat_allowed": run.get("compat_allowed"),
        "nvfs_loaded": run.get("nvfs_loaded"),
        "direct": run.get("direct"),
        "read": io(run.get("read")),
        "write": io(run.get("write")),
        "routes": pm.get("routes") if pm else None,
        "removed": bool(run.get("removed", True)),
        "seconds": run.get("seconds"),
        "log_tail": list(run.get("log_tail") or []),
    }


@dataclass
class ProofMatrix:
    gpus: list[tuple[str, str]]  # (label, bdf)
    targets: list[Target]
    cells: list[Cell]
    size: int
    bs: int
    timeout_s: float
    note: str | None = None  # why the matrix has no GPU columns, etc.
    seconds: float = 0.0

    def counts(self) -> dict[str, int]:
        return {r: sum(c.outcome.result == r for c in self.cells) for r in RESULTS}

    @property
    def exit_code(self) -> int:
        if self.cells and all(c.outcome.result == "skipped" for c in self.cells):
            return EXIT_TOOL_ERROR  # nothing could be proved by this install
        return max((EXIT[c.outcome.result] for c in self.cells), default=EXIT_OK)

    def to_json(self) -> schema.ProofDoc:
        return {
            "gpus": [{"gpu": g, "bdf": b} for g, b in self.gpus],
            "targets": [t.to_json() for t in self.targets],
            "cells": [c.to_json() for c in self.cells],
            "counts": self.counts(),  # type: ignore[typeddict-item]
            "exit_code": self.exit_code,
            "note": self.note,
            "probe": {"size": self.size, "bs": self.bs, "timeout_s": self.timeout_s},
            "seconds": self.seconds,
        }


def node_gpus(ctx) -> list[tuple[str, str]]:
    """Every GPU of the node as (label, PCI address), in label order (GPU0, GPU1, … GPU10)."""
    from ..topology.model import Role

    gs = sorted(ctx.topology.by_role(Role.GPU), key=lambda d: d.sort_key())
    return [(g.label or g.bdf, g.bdf) for g in gs]


def pick_gpus(all_gpus: list[tuple[str, str]], want: str) -> list[tuple[str, str]]:
    """``all`` or a comma list of indices/labels (0,1 or GPU0,GPU1)."""
    if want in ("", "all"):
        return all_gpus
    out = []
    for w in want.split(","):
        label = w.strip() if w.strip().upper().startswith("GPU") else f"GPU{w.strip()}"
        hit = [g for g in all_gpus if g[0].upper() == label.upper()]
        if not hit:
            have = ", ".join(g[0] for g in all_gpus) or "none"
            raise UsageError(
                f"--proof-gpus: no {label} on this node (GPUs: {have})", "give GPU indices that exist, or 'all'"
            )
        out += hit
    return out


def _node_facts(ctx, check_report):
    """`check`'s facts of the node, from the check report the targets came from (one rule set: the
    same reader as trace's and sweep's); None where the report has no node verdict."""
    from ..check.facts import NodeFacts

    verdict = getattr(check_report, "verdict", None)
    if verdict is None:
        return None
    return NodeFacts.from_results(verdict, list(getattr(check_report, "results", None) or []), ctx)


def run_matrix(
    ctx,
    check_report,
    gpus: str = "all",
    size: int = DEFAULT_SIZE,
    bs: int = DEFAULT_BS,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    progress=None,
) -> ProofMatrix:
    """Every GPU × every path of ``check_report`` (the per-path verdicts gdsdiag check made)."""
    t0 = time.monotonic()
    say = progress or (lambda msg: None)
    targets = targets_from_check(check_report)
    if len(targets) > MAX_TARGETS:
        raise UsageError(f"--proof: {len(targets)} storage targets (at most {MAX_TARGETS})", "give fewer --path DIR")
    all_gpus = node_gpus(ctx)
    chosen = pick_gpus(all_gpus, gpus) if all_gpus else []
    note = None
    columns: list[tuple[str | None, str | None]] = list(chosen)
    if not all_gpus:
        note = "no NVIDIA GPU on this node (none in the PCI topology)"
        columns = [(None, None)]  # one column, so every target still says why it has no route
    lib = getattr(ctx.libcufile, "path", None)
    node = _node_facts(ctx, check_report)
    node_cfg = ctx.cufile.data if isinstance(ctx.cufile.data, dict) else None
    cells: list[Cell] = []
    for t in targets:
        for label, bdf in columns:
            pred = t.predict(label)
            if (
                t.route == Route.NONE
                and t.reasons
                and any("not a directory" in r or "no mount" in r for r in t.reasons)
            ):
                conf = {"ok": False, "stage": "file", "error": "; ".join(t.reasons), "name": "NO_TARGET"}
                cell = Cell(label, bdf, t, pred, conf, None, reconcile(pred, conf, None))
                cells.append(cell.with_why(node, note if label is None else None))
                continue
            say(f"proof {label or 'no GPU'} × {t.path}: as configured")
            conf = run_probe(t.path, bdf, "configured", node_cfg, size, bs, timeout_s, lib)
            forb = None
            if conf.get("stage") not in ("load", "file", "timeout") and conf.get("name") != "NO_CUPY":
                say(f"proof {label or 'no GPU'} × {t.path}: compat forbidden")
                forb = run_probe(t.path, bdf, "compat_forbidden", node_cfg, size, bs, timeout_s, lib)
            out = reconcile(pred, conf, forb)
            if label is None and out.result == "no_route":
                out = Outcome("no_route", Route.NONE, f"{TEXT['no_route']} ({note}; {_failure(conf)})")
            cells.append(Cell(label, bdf, t, pred, conf, forb, out).with_why(node, note if label is None else None))
    return ProofMatrix(chosen, targets, cells, size, bs, timeout_s, note, round(time.monotonic() - t0, 2))
