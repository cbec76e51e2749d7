"""validate --proof: the proof matrix (GPU × storage target), its reconciliation, its outputs (JSON,
JUnit, Prometheus, NFD) and its promises (bounded by a timeout, nothing left behind, nothing
written outside the probe directory).

What no hardware here produces comes from captures on the project's GPU machine (H200, libcufile
1.15.1.6, compat mode only), each named where it is used. The CPU-machine path is run for real:
the nvidia-cufile wheel's libcufile loads and cuFileDriverOpen fails (5033) in the probe child.
No capture of a node where cuFile counted nvidia-fs or P2PDMA I/O exists in this repository or
../shared/corpus, so the "P2P verified" branch is exercised only on such a node (the GPU test).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET

import pytest
from conftest import FIXTURES, GDSDIAG, HERE, INSTALLED

from gdsdiag import cufile_json
from gdsdiag.check.model import NodeVerdict, PathVerdict
from gdsdiag.check.runner import CheckReport
from gdsdiag.cufile._lib import candidates
from gdsdiag.routes import Route
from gdsdiag.validate import proof, proof_out
from gdsdiag.validate.proof_probe import _io_result

REPO = os.path.dirname(HERE)
GPU_MACHINE = os.path.join(FIXTURES, "gpu-machine")
HAS_LIBCUFILE = bool(candidates())
needs_libcufile = pytest.mark.skipif(not HAS_LIBCUFILE, reason="no libcufile: pip install '.[test]' (nvidia-cufile)")
HAS_GPU = os.path.exists("/dev/nvidiactl")


def _capture(name: str) -> dict:
    """A JSON capture from the GPU machine (three '#' lines of provenance, then the document)."""
    with open(os.path.join(GPU_MACHINE, name), encoding="utf-8") as f:
        return json.loads("".join(x for x in f if not x.startswith("#")))


# gdsdiag check --path /var/tmp on the GPU machine (check-before.json, 2026-11-29): COMPAT, ext4 on virtio
GPU_CHECK = _capture("check-before.json")
GPU_PATH = GPU_CHECK["paths"][0]
# cuFile level-3 counters there after write 32 MiB + read it twice (cufile-pathmix.json, 2026-11-29): all POSIX
GPU_PATHMIX = _capture("cufile-pathmix.json")["path_mix"]


def _target(path_json: dict) -> proof.Target:
    pv = PathVerdict(
        path_json["path"],
        Route(path_json["route"]),
        path_json["reasons"],
        path_json["fstype"],
        path_json["mount_point"],
        path_json["devices"],
        path_json["topology"],
    )
    verdict = NodeVerdict(
        [Route(r) for r in GPU_CHECK["verdict"]["routes"]],
        GPU_CHECK["verdict"]["summary"],
        GPU_CHECK["verdict"]["reasons"],
    )
    (t,) = proof.targets_from_check(CheckReport([], verdict, [pv]))
    return t


@pytest.fixture(scope="module")
def cpu_forbidden_run(tmp_path_factory):
    """The compat-forbidden probe, for real, on this machine's libcufile (no GPU: driver open fails)."""
    if not HAS_LIBCUFILE or HAS_GPU:
        pytest.skip("needs libcufile and no GPU (the driver-open failure of a machine without one)")
    d = tmp_path_factory.mktemp("forbidden")
    return proof.run_probe(str(d), None, "compat_forbidden", None, timeout_s=60)


def _ok_run(path_mix: dict) -> dict:
    return {"ok": True, "path_mix": path_mix, "read": {"match": True}, "write": {"match": True}}


# ---- predictions --------------------------------------------------------------------------


def test_the_gpu_machine_path_is_predicted_compat_for_gpu0_with_check_reason():
    t = _target(GPU_PATH)
    assert t.kind == "other" and t.fstype == "ext4"
    p = t.predict("GPU0")
    assert p.route == Route.COMPAT and p.p2p == "NO_P2P" and p.p2pdma_map == "NOT_SUPPORTED"
    assert "not an NVMe namespace" in p.reasons[0]
    assert p.reasons[1] == "NVFS route unavailable: nvfs.loaded: nvidia-fs is not loaded"


def test_a_direct_route_the_pair_rules_out_is_predicted_as_the_fallback():
    """check said P2PDMA for the path, but topology says this GPU ↔ device pair cannot map P2PDMA."""
    t = _target(dict(GPU_PATH, route="P2PDMA", reasons=["NVMe namespace, kernel P2PDMA ready"]))
    p = t.predict("GPU0")
    assert p.route == Route.COMPAT
    assert any("GPU0 ↔ 0000:00:01.0: NO_P2P" in r for r in p.reasons)
    assert t.predict("GPU7").route == Route.P2PDMA  # no row for that GPU: the path's route stands


# ---- reconciliation on the GPU machine's real counters ------------------------------------


def test_measured_route_of_the_compat_capture():
    route, how = proof.measured_route(GPU_PATHMIX)
    assert route == Route.COMPAT and how == "COMPAT 12 of 12 I/O"
    assert proof.measured_route(None)[0] == Route.UNKNOWN


def test_compat_capture_with_compat_forbidden_failing_says_compat_and_the_error(cpu_forbidden_run):
    forb = cpu_forbidden_run
    assert forb["ok"] is False and forb["code"] == 5033 and forb["stage"] == "driver_open"
    pred = _target(GPU_PATH).predict("GPU0")
    out = proof.reconcile(pred, _ok_run(GPU_PATHMIX), forb)
    assert out.result == "compat" and out.route == Route.COMPAT
    assert out.line.startswith("COMPAT (ext4 on virtio: not an NVMe namespace")
    assert "; NVFS route unavailable: nvfs.loaded: nvidia-fs is not loaded;" in out.line
    assert "cuFile counted COMPAT 12 of 12 I/O" in out.line
    assert (
        "P2P not possible here: compat forbidden → error 5033 CU_FILE_NVFS_SETUP_ERROR at cuFileDriverOpen" in out.line
    )


def test_compat_counted_where_p2p_was_predicted_is_not_taken_never_verified(cpu_forbidden_run):
    pred = proof.Prediction(Route.NVFS, ["NVMe namespace with a GDS-aware nvme driver and nvidia-fs loaded"])
    out = proof.reconcile(pred, _ok_run(GPU_PATHMIX), cpu_forbidden_run)
    assert out.result == "not_taken"
    assert out.line.startswith("P2P predicted but not taken (predicted NVFS: NVMe namespace")
    # and even a compat-forbidden run that "worked" cannot turn counted COMPAT I/O into P2P
    out = proof.reconcile(pred, _ok_run(GPU_PATHMIX), _ok_run(GPU_PATHMIX))
    assert out.result != "verified"


def test_without_counters_only_a_refused_compat_forbidden_run_tells_compat(cpu_forbidden_run, tmp_path):
    pred = _target(GPU_PATH).predict("GPU0")
    out = proof.reconcile(pred, _ok_run(None), cpu_forbidden_run)
    assert out.result == "compat" and "not counted (cuFile counters unavailable), inferred" in out.line
    hung = proof.run_probe(str(tmp_path), None, "compat_forbidden", None, timeout_s=0.05)  # a real timeout
    out = proof.reconcile(pred, _ok_run(None), hung)
    assert out.result == "skipped" and out.route == Route.UNKNOWN and "inconclusive" in out.line


def test_a_compat_forbidden_run_the_driver_did_not_forbid_proves_nothing():
    """The driver reports CU_FILE_ALLOW_COMPAT_MODE as on the GPU machine (cufile-pathmix.json's
    properties, 2026-11-29) although the run was meant to forbid it: its I/O cannot verify P2P."""
    props = _capture("cufile-pathmix.json")["properties"]
    assert "CU_FILE_ALLOW_COMPAT_MODE" in props["control_flags"]
    unforbidden = dict(_ok_run(None), compat_allowed=True, nvfs_loaded=props["nvfs_loaded"])
    pred = proof.Prediction(Route.NVFS, ["NVMe namespace with a GDS-aware nvme driver and nvidia-fs loaded"])
    out = proof.reconcile(pred, _ok_run(None), unforbidden)
    assert out.result == "skipped" and "compat could not be forbidden" in out.line


def test_wrong_bytes_beat_every_route():
    exp = bytes(range(256)) * 16
    got = bytearray(exp)
    got[1000] ^= 0xFF
    r = _io_result(len(exp), 0.001, [0.001], exp, bytes(got))
    assert r["match"] is False and r["first_diff"] == 1000 and r["sha256"] != r["sha256_expected"]
    assert _io_result(len(exp), 0.001, [0.001], exp, exp)["match"] is True
    run = dict(_ok_run(GPU_PATHMIX), read=r)
    out = proof.reconcile(_target(GPU_PATH).predict("GPU0"), run, None)
    assert out.result == "mismatch" and "first wrong byte at offset 1000" in out.line


def test_a_configured_run_that_cannot_do_io_is_no_route(cpu_forbidden_run):
    out = proof.reconcile(_target(GPU_PATH).predict("GPU0"), cpu_forbidden_run, None)
    assert out.result == "no_route" and "CU_FILE_NVFS_SETUP_ERROR (5033)" in out.line


# ---- the private cufile.json --------------------------------------------------------------


def test_compat_forbidden_copy_of_the_gpu_machine_cufile_json():
    """/etc/cufile.json as captured on the GPU machine (facts.txt '---cufile' section, 2026-11-29)."""
    with open(os.path.join(GPU_MACHINE, "facts.txt"), encoding="utf-8") as f:
        section = f.read().split("---cufile\n", 1)[1].split("\n---", 1)[0]
    text = section[section.index("{") : section.rindex("}") + 1]
    node = cufile_json.parse(text, "/etc/cufile.json").data
    assert node["properties"]["allow_compat_mode"] is True
    cfg = proof.compat_forbidden_config(node)
    assert cfg["properties"]["allow_compat_mode"] is False and cfg["properties"]["force_compat_mode"] is False
    assert node["properties"]["allow_compat_mode"] is True  # the node's copy is untouched
    assert cfg["logging"] == node["logging"] and cfg["properties"]["max_direct_io_size_kb"] == 16384
    assert cufile_json.parse(json.dumps(cfg)).get("properties.allow_compat_mode") is False
    assert proof.compat_forbidden_config(None) == {
        "properties": {"allow_compat_mode": False, "force_compat_mode": False}
    }


# ---- the children: bounded, and they clean up ----------------------------------------------


def test_a_hung_probe_is_killed_named_and_its_directory_removed(tmp_path):
    out = proof.run_probe(str(tmp_path), None, "compat_forbidden", None, timeout_s=0.05)
    assert out["ok"] is False and out["hung"] is True and out["name"] == "TIMEOUT"
    assert "did not finish within 0.05 s" in out["error"]
    assert out["removed"] is True and os.listdir(tmp_path) == []


def test_an_unwritable_probe_directory_is_named(tmp_path):
    out = proof.run_probe(str(tmp_path / "missing"), None, "configured", None)
    assert out["ok"] is False and out["stage"] == "file" and "cannot create a probe directory" in out["error"]


# ---- the command on this machine (no GPU), for real ----------------------------------------


def _validate(args, cwd, env=None):
    e = dict(os.environ)
    e.update(env or {})
    if not INSTALLED:  # from the checkout, run from another cwd: the checkout's gdsdiag
        e["PYTHONPATH"] = REPO + os.pathsep + e.get("PYTHONPATH", "")
    return subprocess.run([*GDSDIAG, "validate", *args], capture_output=True, text=True, cwd=cwd, timeout=300, env=e)


@pytest.fixture(scope="module")
def cpu_run(tmp_path_factory):
    if HAS_GPU:
        pytest.skip("a GPU is present: this is the no-GPU path")
    root = tmp_path_factory.mktemp("cpu")
    probe_dir = root / "probe"
    probe_dir.mkdir()
    out = root / "out"
    out.mkdir()
    cwd = root / "cwd"
    cwd.mkdir()
    r = _validate(
        [
            "--path",
            str(probe_dir),
            "--proof",
            "--json",
            str(out / "v.json"),
            "--junit",
            str(out / "v.xml"),
            "--prom",
            str(out / "v.prom"),
            "--nfd",
            str(out / "gdsdiag.features"),
        ],
        cwd=str(cwd),
        env={"GDSDIAG_LOG_DIR": str(root / "logs")},
    )
    assert not (root / "logs").exists()  # libcufile's log went to the probe's cell directory, not GDSDIAG_LOG_DIR
    return r, probe_dir, out, cwd


def test_no_gpu_machine_says_so_and_exits_2(cpu_run):
    r, probe_dir, out, cwd = cpu_run
    assert r.returncode == 2, r.stderr
    doc = json.load(open(out / "v.json"))
    m = doc["proof"]
    assert m["gpus"] == [] and m["note"].startswith("no NVIDIA GPU on this node")
    (cell,) = m["cells"]
    assert cell["result"] == "no_route" and cell["route"] == "NONE" and cell["gpu"] is None
    assert cell["line"].startswith("no route (no NVIDIA GPU on this node")
    if HAS_LIBCUFILE:  # the real wheel: the child loaded it and cuFileDriverOpen failed by name
        assert "CU_FILE_NVFS_SETUP_ERROR (5033)" in cell["line"]
        assert cell["configured"]["stage"] == "driver_open" and cell["configured"]["log_tail"]
    assert f"proof - {probe_dir}: no route" in r.stdout


def test_nothing_is_left_in_the_probe_directory_or_the_cwd(cpu_run):
    _, probe_dir, _, cwd = cpu_run
    assert os.listdir(probe_dir) == [] and os.listdir(cwd) == []


def test_proof_json_matches_the_documented_type(cpu_run):
    from test_json_schema import compare

    from gdsdiag.schema import validate as vs

    _, _, out, _ = cpu_run
    problems: list[str] = []
    compare(json.load(open(out / "v.json")), vs.ValidateDoc, "validate", problems, documented=False)
    assert not problems, problems


def test_junit_has_one_testcase_per_cell(cpu_run):
    _, probe_dir, out, _ = cpu_run
    root = ET.parse(out / "v.xml").getroot()
    suites = root.findall("testsuite")
    assert len(suites) == 2 and suites[1].get("name").startswith("gdsdiag validate proof")
    (tc,) = suites[1].findall("testcase")
    assert tc.get("name") == f"no-gpu {probe_dir}" and tc.find("failure").get("type") == "no_route"


def test_prometheus_one_gauge_per_cell_and_parsable(cpu_run):
    parser = pytest.importorskip("prometheus_client.parser")
    _, probe_dir, out, _ = cpu_run
    fams = {f.name: f for f in parser.text_string_to_metric_families(open(out / "v.prom").read())}
    (s,) = fams["gdsdiag_proof_p2p_verified"].samples
    assert s.labels == {"gpu": "none", "target": str(probe_dir), "route": "NONE", "result": "no_route"}
    assert s.value == 0


LABEL_NAME = re.compile(r"^gdsdiag\.io/[A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?$")
LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?)?$")


def test_nfd_feature_file(cpu_run):
    _, _, out, _ = cpu_run
    lines = open(out / "gdsdiag.features").read().splitlines()
    assert lines[0].startswith(proof_out.NFD_MARK) and lines[1].startswith("# +expiry-time=")
    feats = dict(x.split("=", 1) for x in lines if not x.startswith("#"))
    assert feats["gdsdiag.io/p2p-verified"] == "false" and feats["gdsdiag.io/proof-result"] == "no-route"
    for k, v in feats.items():
        assert LABEL_NAME.match(k) and LABEL_VALUE.match(v), (k, v)


def test_nfd_replaces_only_its_own_file(tmp_path, cpu_run):
    _, _, out, _ = cpu_run
    own = tmp_path / "own.features"
    own.write_text(open(out / "gdsdiag.features").read())
    m = proof.ProofMatrix([], [], [], 1 << 20, 1 << 20, 1.0)
    proof_out.write_nfd(str(own), proof_out.nfd_text(m))
    assert "gdsdiag.io/p2p-verified=false" in own.read_text() and os.listdir(tmp_path) == ["own.features"]
    foreign = tmp_path / "other.features"
    foreign.write_text("vendor.io/x=1\n")
    from gdsdiag.errors import GdsdiagError

    with pytest.raises(GdsdiagError, match="not written by gdsdiag"):
        proof_out.write_nfd(str(foreign), proof_out.nfd_text(m))
    assert foreign.read_text() == "vendor.io/x=1\n"


@pytest.mark.parametrize(
    "args, says",
    [
        (["--nfd", "x.features"], "--nfd labels come from the proof matrix"),
        (["--proof"], "--proof needs a storage target"),
        (["--proof", "--path", "/var/tmp", "--proof-size", "1000"], "multiple of 1 MiB"),
        (["--proof", "--path", "/var/tmp", "--proof-timeout", "0"], "must be more than 0 s"),
    ],
)
def test_usage_errors_exit_4_before_any_work(tmp_path, args, says):
    r = _validate(args, cwd=str(tmp_path))
    assert r.returncode == 4 and says in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert os.listdir(tmp_path) == []


def test_proof_on_a_snapshot_is_refused():
    snap = os.path.join(FIXTURES, "snapshots", "h200-vm-2026-11-29.tar.gz")
    r = _validate(["--from", snap, "--proof", "--path", "/var/tmp"], cwd=REPO)
    assert r.returncode == 4 and "--proof does I/O on the running node" in r.stderr


# ---- the GPU machine (skips here) ----------------------------------------------------------


def _cuda_gpu() -> str:
    """'' when a CUDA GPU and cupy are usable here, else why not."""
    try:
        import cupy as cp

        return "" if cp.cuda.runtime.getDeviceCount() > 0 else "no CUDA GPU"
    except Exception as e:  # cupy missing, or no driver (CUDARuntimeError)
        return f"needs cupy and a CUDA GPU ({type(e).__name__})"


@pytest.mark.skipif(bool(_cuda_gpu()), reason=_cuda_gpu() or "GPU present")
def test_gpu_machine_proof_of_gpu0(tmp_path_factory):
    """Run there by benchmarks/gpu_proof.sh (after gds_udev_entry /var/tmp): the matrix of GPU0 ×
    a directory in /var/tmp is proved, data correct in both directions, nothing left behind; without
    nvidia-fs the line says COMPAT and names the compat-forbidden error."""
    import tempfile

    d = tempfile.mkdtemp(prefix="gdsdiag-proof-test-", dir="/var/tmp")
    try:
        r = _validate(["--path", d, "--proof", "--proof-gpus", "0", "--json", "-"], cwd=d)
        assert r.returncode in (0, 1, 2), r.stderr
        m = json.loads(r.stdout)["proof"]
        (cell,) = m["cells"]
        assert cell["gpu"] == "GPU0" and cell["configured"]["removed"] and os.listdir(d) == []
        assert cell["result"] in ("verified", "compat", "not_taken"), cell["line"]
        assert cell["configured"]["read"]["match"] and cell["configured"]["write"]["match"]
        assert cell["read_gbps"] > 0 and cell["read_p99_us"] > 0
        if cell["configured"]["nvfs_loaded"] is False and cell["result"] == "compat":
            assert "P2P not possible here: compat forbidden → error" in cell["line"]
            assert cell["compat_forbidden"]["ok"] is False and cell["compat_forbidden"]["name"]
    finally:
        shutil.rmtree(d, ignore_errors=True)


# ---- every GPU, not GPU 0: the GPU machine's two-GPU snapshot ------------------------------

H200X2 = os.path.join(FIXTURES, "snapshots", "h200x2-vm-snapshot-2026-11-30.tar.gz")  # 2× H200 VM, 2026-11-30


@pytest.fixture(scope="module")
def x2_ctx():
    from gdsdiag.check.context import CheckContext
    from gdsdiag.platform.roots import node_root

    with node_root("/", H200X2) as fs:
        ctx = CheckContext(fs, env={})
        ctx.topology  # noqa: B018  (read while the archive is open)
        yield ctx


def test_gpus_of_the_two_gpu_snapshot_and_the_choice(x2_ctx):
    from gdsdiag.errors import UsageError

    gpus = proof.node_gpus(x2_ctx)
    assert gpus == [("GPU0", "0000:00:06.0"), ("GPU1", "0000:00:07.0")]
    assert proof.pick_gpus(gpus, "all") == gpus and proof.pick_gpus(gpus, "1") == [gpus[1]]
    assert proof.pick_gpus(gpus, "GPU0,1") == gpus
    with pytest.raises(UsageError, match="no GPU5 on this node"):
        proof.pick_gpus(gpus, "5")


@needs_libcufile
def test_the_matrix_is_every_gpu_times_every_target(x2_ctx, tmp_path):
    """The snapshot's GPUs and its check verdict for /var/tmp, probed (for real, failing at driver
    open here) in two local directories: 2 GPUs × 2 targets = 4 cells, 8 children, nothing left."""
    from dataclasses import replace

    from gdsdiag.check.runner import run
    from gdsdiag.platform.libcufile import locate

    rep = run(x2_ctx, ["/var/tmp"])
    x2_ctx.__dict__["libcufile"] = locate()  # the snapshot names the GPU machine's libcufile: probe with ours
    dirs = [tmp_path / "a", tmp_path / "b"]
    for d in dirs:
        d.mkdir()
    rep.paths = [replace(rep.paths[0], path=str(d)) for d in dirs]
    seen = []
    m = proof.run_matrix(x2_ctx, rep, "all", 1 << 20, 1 << 20, 60, seen.append)
    assert [(c.gpu, c.target.path) for c in m.cells] == [(g, str(d)) for d in dirs for g in ("GPU0", "GPU1")]
    assert all(c.prediction.route == Route.COMPAT and c.prediction.p2p == "NO_P2P" for c in m.cells)
    if not HAS_GPU:
        assert {c.outcome.result for c in m.cells} == {"no_route"} and m.exit_code == 2
        assert all(c.compat_forbidden is not None and c.compat_forbidden["code"] == 5033 for c in m.cells)
    assert len(seen) == 8 and all(os.listdir(d) == [] for d in dirs)
    prom = proof_out.prometheus(m)
    assert prom.count("gdsdiag_proof_p2p_verified{") == 4  # one series per cell
    labels = proof_out.nfd_labels(m)
    assert labels["gdsdiag.io/gpu1.p2p-verified"] == "false" and labels["gdsdiag.io/p2p-verified-gpus"] == "0"


def test_a_missing_target_is_refused_in_one_line_and_nothing_is_created(tmp_path):
    missing = tmp_path / "not-here"
    r = _validate(["--path", str(missing), "--proof", "--json", "-"], cwd=str(tmp_path))
    assert r.returncode == 4 and r.stdout == "" and len(r.stderr.strip().splitlines()) == 1  # usage (issue 23)
    assert f"{missing} does not exist" in r.stderr
    assert not missing.exists() and os.listdir(tmp_path) == []


# ---- one check per validate: the proof is a stage of validate's report (issue 44) ----------


def test_validate_proof_runs_check_once_and_proves_only_the_paths_given(tmp_path, monkeypatch):
    """validate --proof judges its rules and builds its proof matrix from one run of gdsdiag check
    (each run does a real O_DIRECT probe per path); the command layer once ran check a second time
    for the proof. In process, so the count sees every call; the probes are real children (no GPU
    here: no route). A policy mount that is not a --path is judged by the rules but not proved."""
    from click.testing import CliRunner

    from gdsdiag.check import runner as check_runner
    from gdsdiag.cli import cli

    calls: list[list[str]] = []
    real_run = check_runner.run

    def counted(ctx, paths=(), *args, **kw):
        calls.append(list(paths))
        return real_run(ctx, paths, *args, **kw)

    monkeypatch.setattr(check_runner, "run", counted)
    proved, judged = tmp_path / "proved", tmp_path / "judged"
    proved.mkdir()
    judged.mkdir()
    policy = tmp_path / "policy.yaml"
    policy.write_text(f"mounts:\n  - path: {judged}\n")
    out = tmp_path / "v.json"
    args = ["--policy", str(policy), "--path", str(proved), "--proof", "--proof-size", "1M", "--json", str(out)]
    r = CliRunner().invoke(cli, ["validate", *args])
    assert r.exception is None or isinstance(r.exception, SystemExit), r.output
    assert calls == [[str(judged), str(proved)]]  # once, with every mount the rules judge
    doc = json.loads(out.read_text())
    assert [t["path"] for t in doc["proof"]["targets"]] == [str(proved)]
    assert [c["path"] for c in doc["proof"]["cells"]] == [str(proved)]
    per_mount = next(x for x in doc["rules"] if x["rule"] == "routes.per_mount")
    assert str(judged) in json.dumps(per_mount) and str(proved) in json.dumps(per_mount)
