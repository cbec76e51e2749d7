"""deploy/: the Kubernetes manifests validate against the Kubernetes schema (kubernetes-validate ships
the JSON schemas: no network), the policy they carry parses, the commands they run exist, the
Prometheus alert rules pass promtool, and the Dockerfile copies only what exists."""

import os
import re
import shutil
import subprocess
import sys

import pytest
import yaml

from gdsdiag.validate import policy as pol

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEPLOY = os.path.join(ROOT, "deploy")
MANIFESTS = sorted(f for f in os.listdir(DEPLOY) if f.endswith(".yaml"))
K8S_VERSIONS = ("1.30.0", "1.37.0")  # a common production version and the newest schema shipped


def docs(name):
    with open(os.path.join(DEPLOY, name)) as f:
        return [d for d in yaml.safe_load_all(f) if d]


def pod_spec(d):
    return d["spec"]["template"]["spec"]


def test_manifest_set():
    assert {
        "namespace.yaml",
        "policy-configmap.yaml",
        "reports-pvc.yaml",
        "validate-job.yaml",
        "exporter-daemonset.yaml",
        "exporter-daemonset-trace.yaml",
        "report-job.yaml",
        "proof-daemonset.yaml",
    } <= set(MANIFESTS)


@pytest.mark.parametrize("version", K8S_VERSIONS)
@pytest.mark.parametrize("name", MANIFESTS)
def test_manifest_validates_against_kubernetes_schema(name, version):
    kv = pytest.importorskip("kubernetes_validate")
    for d in docs(name):
        kv.validate(d, version, strict=True)  # raises ValidationError with the field path


def test_schema_validation_catches_errors():
    kv = pytest.importorskip("kubernetes_validate")
    d = docs("validate-job.yaml")[0]
    pod_spec(d)["hostPIDD"] = True  # a misspelt field must not pass silently
    with pytest.raises(kv.ValidationError):
        kv.validate(d, K8S_VERSIONS[0], strict=True)


def test_validate_job_mounts_and_privileges():
    (job,) = docs("validate-job.yaml")
    spec = pod_spec(job)
    assert job["kind"] == "Job" and spec["nodeName"] and spec["hostPID"] is False
    c = spec["containers"][0]
    mounts = {m["mountPath"] for m in c["volumeMounts"]}
    assert {"/sys", "/run/udev", "/dev", "/lib/modules", "/usr/src", "/data"} <= mounts
    sc = c["securityContext"]
    assert sc["capabilities"]["drop"] == ["ALL"] and "privileged" not in sc
    assert "SYS_ADMIN" in sc["capabilities"]["add"]  # extended config space (ACS)


def test_hostpid_and_bpf_only_where_needed():
    for name in MANIFESTS:
        for d in docs(name):
            if d["kind"] not in ("Job", "DaemonSet"):
                continue
            spec = pod_spec(d)
            caps = set(spec["containers"][0]["securityContext"]["capabilities"].get("add", []))
            traces = "--trace" in spec["containers"][0].get("args", [])
            assert ("BPF" in caps and "PERFMON" in caps) == traces, name
            assert not spec["containers"][0]["securityContext"].get("privileged"), name
            if traces:
                assert spec["hostPID"] is True
                assert {"/lib/modules", "/usr/src", "/sys/kernel/tracing"} <= {
                    m["mountPath"] for m in spec["containers"][0]["volumeMounts"]
                }


def test_configmap_policy_is_the_shipped_default_and_parses():
    (cm,) = docs("policy-configmap.yaml")
    text = cm["data"]["policy.yaml"]
    assert pol.parse(text, "configmap") == pol.parse(pol.default_text(), "default")
    p = pol.load(os.path.join(DEPLOY, "policies", "compat-allowed.yaml"))
    assert p.get("io.max_compat_share") == 1.0 and "COMPAT" in p.allowed_routes()


def _gdsdiag_invocations(d):
    c = pod_spec(d)["containers"][0]
    if c.get("command") == ["/bin/sh", "-c"]:
        script = " ".join(c["args"])
        return [m.group(0).split() for m in re.finditer(r"gdsdiag \w+[^;]*", script)]
    return [["gdsdiag"] + c["args"]]


def test_manifest_commands_use_real_options():
    seen = 0
    for name in MANIFESTS:
        for d in docs(name):
            if d["kind"] not in ("Job", "DaemonSet"):
                continue
            for argv in _gdsdiag_invocations(d):
                sub = argv[1]
                helptext = subprocess.run(
                    [sys.executable, "-m", "gdsdiag", sub, "--help"], capture_output=True, text=True, timeout=60
                ).stdout
                for opt in (a for a in argv[2:] if a.startswith("--")):
                    assert opt in helptext, f"{name}: gdsdiag {sub} has no option {opt}"
                seen += 1
    assert seen >= 4


def test_alert_rules_pass_promtool():
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool not installed (Debian package 'prometheus')")
    p = subprocess.run(
        [promtool, "check", "rules", os.path.join(DEPLOY, "prometheus", "gdsdiag-alerts.yml")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 0, p.stdout + p.stderr


def test_pod_bounce_alert_fires_where_p2p_was_possible():
    """promtool's own rule test (deploy/prometheus/gdsdiag-alerts-test.yml): the per-pod alert fires
    for the pod that bounced on a node where another pod read P2P, and not on a node without P2P."""
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool not installed (Debian package 'prometheus')")
    p = subprocess.run(
        [promtool, "test", "rules", os.path.join(DEPLOY, "prometheus", "gdsdiag-alerts-test.yml")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 0 and "SUCCESS" in p.stdout, p.stdout + p.stderr


def test_dockerfile_copies_what_exists():
    with open(os.path.join(DEPLOY, "Dockerfile")) as f:
        lines = [ln.strip() for ln in f if ln.strip() and not ln.startswith("#")]
    assert lines[0].startswith("FROM ") and any(ln.startswith("ENTRYPOINT") and "gdsdiag" in ln for ln in lines)
    assert any("python3-bpfcc" in ln for ln in lines)
    for ln in lines:
        if ln.startswith("COPY "):
            for src in ln.split()[1:-1]:
                assert os.path.exists(os.path.join(ROOT, src)), src


def test_proof_daemonset_writes_the_nfd_feature_file():
    """validate --proof --nfd into the node's NFD features.d/, without holding GPUs from the scheduler."""
    (ds,) = docs("proof-daemonset.yaml")
    spec = pod_spec(ds)
    c = spec["containers"][0]
    (argv,) = _gdsdiag_invocations(ds)
    assert argv[:2] == ["gdsdiag", "validate"] and {"--proof", "--path", "--nfd"} <= set(argv)
    nfd = argv[argv.index("--nfd") + 1]
    mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
    vols = {v["name"]: v for v in spec["volumes"]}
    (mp,) = [m for m in mounts if nfd.startswith(m + "/")]
    assert vols[mounts[mp]]["hostPath"]["path"] == "/etc/kubernetes/node-feature-discovery/features.d"
    assert not os.path.basename(nfd).startswith(".")  # NFD skips dotfiles
    assert "nvidia.com/gpu" not in str(c.get("resources"))
    assert {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"} in c["env"]
