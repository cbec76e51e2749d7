"""gdsdiag/platform/containers.py: a process's container and pod from /proc/PID/cgroup, and the
pod's namespace and name from /var/log/pods. Every cgroup line below was copied from a public
capture (the URL beside it), not written from the naming rules the parser follows."""

from __future__ import annotations

import os

import pytest

from gdsdiag.platform.containers import Identities, parse_cgroup, parse_path, pod_names
from gdsdiag.platform.fsroot import FsRoot

# (capture, source, container id, pod uid, runtime)
CAPTURES = [
    (
        # containerd, kubelet on systemd, containerd without SystemdCgroup: cgroup v1, literal "…slice:cri-containerd:ID"
        "11:perf_event:/kubepods-besteffort-pod0125ec2f_b64a_4868_8f5b_94b56cbab864.slice:cri-containerd:"
        "ee4b20e90ac7f42a10bd004d05646b13d8ab5e2c5e7cbc01abf8006bac016459\n"
        "10:blkio:/system.slice/containerd.service/kubepods-besteffort-pod0125ec2f_b64a_4868_8f5b_94b56cbab864.slice"
        ":cri-containerd:ee4b20e90ac7f42a10bd004d05646b13d8ab5e2c5e7cbc01abf8006bac016459\n",
        "https://github.com/open-telemetry/opentelemetry-java/issues/4507",
        "ee4b20e90ac7f42a10bd004d05646b13d8ab5e2c5e7cbc01abf8006bac016459",
        "0125ec2f-b64a-4868-8f5b-94b56cbab864",
        "containerd",
    ),
    (
        "1:name=systemd:/system.slice/containerd.service/kubepods-burstable-podff49d0be_16b7_4a49_bb9e_8ec1f1f4e27f"
        ".slice:cri-containerd:0f99ad5f45163ed14ab8eaf92ed34bb4a631d007f8755a7d79be614bcb0df0ef\n",
        "https://github.com/elastic/apm-agent-nodejs/issues/3550",
        "0f99ad5f45163ed14ab8eaf92ed34bb4a631d007f8755a7d79be614bcb0df0ef",
        "ff49d0be-16b7-4a49-bb9e-8ec1f1f4e27f",
        "containerd",
    ),
    (
        # CRI-O, systemd driver, cgroup v1 (a "files" controller line of "/" before it does not count)
        "13:freezer:/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-poda5c1f8d5_1919_434d_add7_4afaafdaef89"
        ".slice/crio-5eed917563583925ffdbd40a64efb2aaffe58638e57add8becaf460fe74f5b1c.scope\n11:files:/\n",
        "https://github.com/opencontainers/runc/issues/4620",
        "5eed917563583925ffdbd40a64efb2aaffe58638e57add8becaf460fe74f5b1c",
        "a5c1f8d5-1919-434d-add7-4afaafdaef89",
        "cri-o",
    ),
    (
        # Docker under kubelet (dockershim / cri-dockerd), systemd driver, cgroup v1
        "12:rdma:/\n11:freezer:/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod7d4424e6_bb13_42f4_a47a_"
        "45a4828bf54d.slice/docker-d0b3604b67ac7930dd34ba3a796627e3e4717d12309e90a4afe3f38b6816ac98.scope\n",
        "https://github.com/lxc/lxc/issues/3890",
        "d0b3604b67ac7930dd34ba3a796627e3e4717d12309e90a4afe3f38b6816ac98",
        "7d4424e6-bb13-42f4-a47a-45a4828bf54d",
        "docker",
    ),
    (
        # Docker alone, cgroupfs driver: no pod
        "12:name=systemd:/\n11:hugetlb:/docker/611a8d133d2c636e777745e4dbb1d5866a068fe0f6cc87033e52fe139fca5ba1\n",
        "https://github.com/d2iq-archive/kubernetes-mesos/issues/565",
        "611a8d133d2c636e777745e4dbb1d5866a068fe0f6cc87033e52fe139fca5ba1",
        None,
        "docker",
    ),
]

# cgroup paths as captured (systemd-cgls / cadvisor / NRI output), each a v2 "0::" line here
PATHS = [
    (
        # kubelet cgroupfs driver (cadvisor's id; namespace=default pod=alpine in the same capture)
        "/kubepods/besteffort/pod18d34ce4-50c7-452c-9df8-53c4a3fdf363/"
        "a684bbdd0c4b6937b5ece9713bed661305ab0de570eb12b7c28a032aaf602937",
        "https://github.com/siderolabs/talos/pull/3950",
        "a684bbdd0c4b6937b5ece9713bed661305ab0de570eb12b7c28a032aaf602937",
        "18d34ce4-50c7-452c-9df8-53c4a3fdf363",
        None,  # a bare id under a pod: containerd and cri-dockerd name it alike
    ),
    (
        # kind: kubelet under kubelet.slice, containerd with SystemdCgroup, cgroup v2
        "/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-besteffort.slice/kubelet-kubepods-besteffort-pod1e597579"
        "_417e_482f_bf65_5fe170c3aebd.slice/cri-containerd-d7dfb4a21fe1703a8537e60d5af248af729315d187b24a538102d14874c8117d"
        ".scope",
        "https://github.com/containerd/nri/pull/227",
        "d7dfb4a21fe1703a8537e60d5af248af729315d187b24a538102d14874c8117d",
        "1e597579-417e-482f-bf65-5fe170c3aebd",
        "containerd",
    ),
    (
        # a static pod: its UID is the config hash, 32 hex digits
        "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod8daa50c3a64c9ff60bb9eab7b44b56fd.slice/"
        "cri-containerd-2884d57c0e100d7a9a2f9487ce0bc2986bca3430e988af7a4865aff061f51ac5.scope",
        "https://github.com/netdata/netdata/issues/4868",
        "2884d57c0e100d7a9a2f9487ce0bc2986bca3430e988af7a4865aff061f51ac5",
        "8daa50c3a64c9ff60bb9eab7b44b56fd",
        "containerd",
    ),
    (
        # CRI-O in a node that is itself a Docker container (minikube): the innermost container wins
        "/docker/d6701ec289c56e4391acb11d07474b3139466857a305490575508a8b7a9fcf22/kubepods.slice/kubepods-besteffort.slice/"
        "kubepods-besteffort-podae7a96fb_2bdc_46b0_96e2_78e4af94847b.slice/"
        "crio-89e8f450417b56acf3089925dfd8f050dd50e950e18cfe83ea923269df601102.scope",
        "https://github.com/kubernetes/minikube/issues/11280",
        "89e8f450417b56acf3089925dfd8f050dd50e950e18cfe83ea923269df601102",
        "ae7a96fb-2bdc-46b0-96e2-78e4af94847b",
        "cri-o",
    ),
]


@pytest.mark.parametrize("text,source,cid,uid,runtime", CAPTURES, ids=[c[1].rsplit("/", 3)[1] for c in CAPTURES])
def test_proc_cgroup_captures(text, source, cid, uid, runtime):
    c = parse_cgroup(text)
    assert (c.container_id, c.pod_uid, c.runtime) == (cid, uid, runtime), source


@pytest.mark.parametrize("path,source,cid,uid,runtime", PATHS, ids=[p[1].rsplit("/", 3)[1] for p in PATHS])
def test_cgroup_paths(path, source, cid, uid, runtime):
    c = parse_cgroup(f"0::{path}\n")
    assert (c.container_id, c.pod_uid, c.runtime) == (cid, uid, runtime), source
    # seen from a private cgroup namespace (a DaemonSet pod on v2) the same path is relative
    rel = parse_path("/../../.." + path[path.index("/kube") :] if "/kube" in path else path)
    assert rel.pod_uid == uid


def test_host_processes_say_nothing():
    # this machine's own processes (not in a container): nothing is guessed
    for text in ("0::/\n", "0::/init.scope\n", "0::/system.slice/ssh.service\n", "", "garbage\n", "1:cpu:\n"):
        c = parse_cgroup(text)
        assert (c.container_id, c.pod_uid, c.runtime) == (None, None, None), text
    # a CRI-O monitor (conmon) sits beside the container, not in it
    c = parse_path(
        "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-poda5c1f8d5_1919_434d_add7_4afaafdaef89.slice/"
        "crio-conmon-5eed917563583925ffdbd40a64efb2aaffe58638e57add8becaf460fe74f5b1c.scope"
    )
    assert (c.container_id, c.pod_uid) == (None, "a5c1f8d5-1919-434d-add7-4afaafdaef89")


def _pod_logs(tmp_path, names):
    for n in names:
        os.makedirs(tmp_path / "var/log/pods" / n / "main", exist_ok=True)
    return FsRoot(str(tmp_path))


def test_pod_names_from_log_dirs(tmp_path):
    fs = _pod_logs(
        tmp_path,
        [
            "default_alpine_18d34ce4-50c7-452c-9df8-53c4a3fdf363",
            "kube-system_kube-apiserver-node-1_8daa50c3a64c9ff60bb9eab7b44b56fd",  # a static pod's hash
            "llm-serving_vllm-70b-7d9f8c-x2k4q_0125ec2f-b64a-4868-8f5b-94b56cbab864",
            "not_a_pod",
            "Bad_Upper_18d34ce4-50c7-452c-9df8-53c4a3fdf364",
        ],
    )
    got = {u: (p.namespace, p.name) for u, p in pod_names(fs).items()}
    assert got == {
        "18d34ce4-50c7-452c-9df8-53c4a3fdf363": ("default", "alpine"),
        "8daa50c3a64c9ff60bb9eab7b44b56fd": ("kube-system", "kube-apiserver-node-1"),
        "0125ec2f-b64a-4868-8f5b-94b56cbab864": ("llm-serving", "vllm-70b-7d9f8c-x2k4q"),
    }
    assert pod_names(FsRoot(str(tmp_path / "nothing"))) == {}


def test_identities_under_a_root(tmp_path):
    fs = _pod_logs(tmp_path, ["llm-serving_vllm-0_0125ec2f-b64a-4868-8f5b-94b56cbab864"])
    # the kubelet's container log link: <pod>_<namespace>_<container>-<id>.log
    links = tmp_path / "var/log/containers"
    links.mkdir()
    (links / f"vllm-0_llm-serving_model-server-{CAPTURES[0][2]}.log").symlink_to("/nonexistent")
    (links / f"vllm-0_llm-serving_cut-{CAPTURES[0][2][:40]}.log").symlink_to("/nonexistent")  # cut at 255: no id
    for pid, text in ((10, CAPTURES[0][0]), (11, CAPTURES[2][0]), (12, "0::/system.slice/ssh.service\n")):
        os.makedirs(tmp_path / f"proc/{pid}")
        (tmp_path / f"proc/{pid}/cgroup").write_text(text)
    ids = Identities(fs)
    a = ids.of(10)
    assert (a.namespace, a.pod, a.runtime, a.container) == ("llm-serving", "vllm-0", "containerd", "model-server")
    b = ids.of(11)  # its pod has no log directory: the UID is known, the name is not
    assert (b.pod_uid, b.pod, b.namespace) == ("a5c1f8d5-1919-434d-add7-4afaafdaef89", None, None)
    assert ids.of(12).as_dict() == dict.fromkeys(
        ("container", "container_id", "runtime", "pod_uid", "pod", "namespace")
    )
    assert ids.of(99).pod_uid is None  # gone: nothing says
    # a pod started after the first look is found on the next process that names it
    os.makedirs(tmp_path / "var/log/pods/ops_loader_a5c1f8d5-1919-434d-add7-4afaafdaef89")
    os.makedirs(tmp_path / "proc/13")
    (tmp_path / "proc/13/cgroup").write_text(CAPTURES[2][0])
    assert (ids.of(13).namespace, ids.of(13).pod) == ("ops", "loader")


def test_exporter_labels_namespace_pod_container_bounded(tmp_path, monkeypatch):
    """gdsdiag exporter --trace: each verdict's process labelled with its pod as the node says, at
    most pod_limit label sets named at once (the rest 'other'), an idle one giving its place back
    (its series leave the output; their values are kept for its return)."""
    from gdsdiag.exporter import collect
    from gdsdiag.exporter.collect import OTHER_POD, TraceCounters

    fs = _pod_logs(
        tmp_path,
        [
            "llm_vllm-0_0125ec2f-b64a-4868-8f5b-94b56cbab864",
            "llm_vllm-1_ff49d0be-16b7-4a49-bb9e-8ec1f1f4e27f",
        ],
    )
    (tmp_path / "var/log/containers").mkdir()
    (tmp_path / f"var/log/containers/vllm-0_llm_server-{CAPTURES[0][2]}.log").symlink_to("/nonexistent")
    for pid, text in ((10, CAPTURES[0][0]), (11, CAPTURES[1][0]), (12, CAPTURES[2][0]), (13, "0::/init.scope\n")):
        os.makedirs(tmp_path / f"proc/{pid}")
        (tmp_path / f"proc/{pid}/cgroup").write_text(text)
    now = [1000.0]
    t = TraceCounters(ids=Identities(fs), pod_limit=2, clock=lambda: now[0])
    for pid in (10, 11, 12, 13):
        t({"route": "DRAM_BOUNCE", "comm": "python3", "op": "read", "size": 1 << 20, "pid": pid})
    t.add_counted({"route": "HOST", "comm": "python3", "op": "read", "count": 4, "bytes": 4096, "pid": 10})
    got: dict = {}
    for k, v in t.bytes.items():
        got[k[3:]] = got.get(k[3:], 0) + v
    assert got == {
        ("llm", "vllm-0", "server"): (1 << 20) + 4096,  # named (container from its log link)
        ("llm", "vllm-1", "0f99ad5f4516"): 1 << 20,  # no link: the ID's first 12 digits
        OTHER_POD: 1 << 20,  # the third pod (CRI-O, no log directory): over the limit
        ("", "", ""): 1 << 20,  # a host process: no pod labels
    }
    fam = {f.name: f for f in t.families()}
    labels = [s.labels for s in fam["gdsdiag_trace_bytes"].samples]
    assert {"route", "comm", "op", "namespace", "pod", "container"} == set(labels[0])
    # vllm-1 idle past POD_IDLE_S while vllm-0 keeps loading: the CRI-O pod takes vllm-1's place
    now[0] += collect.POD_IDLE_S / 2
    t({"route": "DRAM_BOUNCE", "comm": "python3", "op": "read", "size": 1, "pid": 10})
    now[0] += collect.POD_IDLE_S / 2 + 1
    t.new_window()
    t({"route": "P2PDMA", "comm": "python3", "op": "read", "size": 8, "pid": 12})
    got = {k[3:] for k in t.bytes}
    assert ("llm", "vllm-1", "0f99ad5f4516") not in got  # its series ended
    assert ("unknown", "a5c1f8d5-1919-434d-add7-4afaafdaef89", "5eed91756358") in got  # named by UID
    assert t.parked[("llm", "vllm-1", "0f99ad5f4516")] == {
        ("DRAM_BOUNCE", "python3", "read", "llm", "vllm-1", "0f99ad5f4516"): (1, 1 << 20)
    }


def test_a_zombie_on_cgroup_v1_takes_its_parents_pod(tmp_path):
    """A process gone before the trace read it still has a /proc entry while unreaped, and on v1 it
    reads '/' everywhere: it is given its parent's pod (it was forked there), not 'no pod'."""
    from gdsdiag.trace.pods import PodBook

    fs = _pod_logs(tmp_path, ["llm_vllm-0_0125ec2f-b64a-4868-8f5b-94b56cbab864"])
    zombie_cg = "9:name=systemd:/\n8:pids:/\n1:cpu:/\n0::/\n"
    for pid, text, stat in (
        (20, CAPTURES[0][0], "20 (python3) S 1 20 20 0"),
        (21, zombie_cg, "21 (pt_data_worker) Z 20 20 20 0"),
        (22, zombie_cg, "22 (sshd) S 1 22 22 0"),  # alive, at the root: a host process
    ):
        os.makedirs(tmp_path / f"proc/{pid}")
        (tmp_path / f"proc/{pid}/cgroup").write_text(text)
        (tmp_path / f"proc/{pid}/stat").write_text(stat)
    book = PodBook(Identities(fs))
    book.add(21)  # (first, before its parent was read)
    book.see_pids([20, 22])
    assert book.of[21].pod == "vllm-0" and book.of[22].pod_uid is None


def test_trace_pod_options_refuse_bad_input_in_one_line(tmp_path):
    """The installed command: an empty --pod/--namespace, a --pod-logs that is no directory, and a
    replay asked for pods are each one line naming the fix (exit 4), never a traceback."""
    import subprocess

    from conftest import FIXTURES, GDSDIAG

    rec = os.path.join(FIXTURES, "trace", "trace-h200-cufile.jsonl.gz")
    for args, said in (
        (["--pod", " "], "--pod: an empty name"),
        (["--namespace", ""], "--namespace: an empty name"),
        (["--pod", "x", "--pod-logs", str(tmp_path / "none")], "not a directory"),
        (["--namespace", "llm", "--replay", rec], "a recording holds no pods"),
    ):
        r = subprocess.run([*GDSDIAG, "trace", *args], capture_output=True, text=True, timeout=120)
        assert r.returncode == 4 and said in r.stderr and "Traceback" not in r.stderr, (args, r.stderr)
        assert r.stderr.count("\n") == 1


def test_replayed_rows_carry_the_fields_as_unknown():
    """A recording holds no pods: its process and tree rows carry the fields, null; no pod rows."""
    import json
    import subprocess

    from conftest import FIXTURES, GDSDIAG

    rec = os.path.join(FIXTURES, "trace", "trace-h200-cufile.jsonl.gz")
    r = subprocess.run([*GDSDIAG, "trace", "--replay", rec, "--json"], capture_output=True, text=True, timeout=300)
    summ = json.loads(r.stdout.splitlines()[-1])
    assert summ["pods"] == [] and summ["processes"] and summ["trees"]
    for row in summ["processes"] + summ["trees"]:
        assert all(row[k] is None for k in ("container", "container_id", "runtime", "pod_uid", "pod", "namespace"))


def test_per_pod_text_rows():
    """The summary's 'per pod' block: most bytes first, its route mix; a pod with no name by UID."""
    import io

    from rich.console import Console

    from gdsdiag.render.trace_out import _render_pods

    buf = io.StringIO()
    _render_pods(
        Console(file=buf, width=200),
        [
            {
                "pod_uid": "u1",
                "pod": "vllm-0",
                "namespace": "llm",
                "containers": ["c"],
                "pids": [1, 2],
                "ios": 10,
                "bytes": 3 << 30,
                "routes": {"DRAM_BOUNCE": 2 << 30, "NVFS": 1 << 30},
            },
            {
                "pod_uid": "0125ec2f-b64a-4868-8f5b-94b56cbab864",
                "pod": None,
                "namespace": None,
                "containers": [],
                "pids": [3],
                "ios": 1,
                "bytes": 4096,
                "routes": {"HOST": 4096},
            },
        ],
    )
    out = buf.getvalue().splitlines()
    assert out[0] == "per pod:"
    assert out[1].startswith(
        "  llm/vllm-0: 3 GiB in 10 I/Os by 2 processes: DRAM_BOUNCE 2 GiB (67 %), NVFS 1 GiB (33 %)"
    ), out
    assert out[2].startswith(
        "  uid 0125ec2f-b64a-4868-8f5b-94b56cbab864 (name unknown): 4 KiB in 1 I/Os by 1 process: HOST 4 KiB (100 %)"
    ), out


def test_interval_per_pod_rows():
    """--interval's scale-out view: each pod's verdicts and kernel-counter growth in the interval,
    its route mix in bytes and GB/s; processes outside pods are left out of it."""
    from gdsdiag.platform.containers import Identity
    from gdsdiag.trace.model.interval import Intervals

    now = [0.0]
    iv = Intervals(1.0, clock=lambda: now[0])
    pods = {
        10: Identity("c" * 64, "containerd", "u-a", "vllm-0", "llm", "server"),
        11: Identity(),
        12: Identity(pod_uid="u-b"),
    }
    for pid, route, size in ((10, "DRAM_BOUNCE", 3 << 20), (10, "NVFS", 1 << 20), (11, "HOST", 5 << 20)):
        iv.add({"pid": pid, "comm": "p", "path": "/w", "route": route, "size": size, "latency_ns": 1000, "ts": None})
    iv.add_counted(
        [
            {
                "pid": 12,
                "comm": "q",
                "api": "pread64",
                "path": "/w",
                "size_class": "1 MiB-2 MiB",
                "route": "HOST",
                "count": 2,
                "bytes": 2 << 20,
            }
        ]
    )
    iv.set_pods(pods)
    now[0] = 2.0
    rec = iv.tick()
    assert rec is not None
    assert rec["pods"] == [
        {
            "pod_uid": "u-a",
            "pod": "vllm-0",
            "namespace": "llm",
            "count": 2,
            "bytes": 4 << 20,
            "gbps": 0.002,
            "routes": {"DRAM_BOUNCE": 3 << 20, "NVFS": 1 << 20},
        },
        {
            "pod_uid": "u-b",
            "pod": None,
            "namespace": None,
            "count": 2,
            "bytes": 2 << 20,
            "gbps": 0.001,
            "routes": {"HOST": 2 << 20},
        },
    ]
