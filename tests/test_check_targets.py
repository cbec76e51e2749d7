"""check's per-target routes (gdsdiag/check/targets.py, issue 47 goal 1): every mount's route with
its deciding fact, and every cuObject endpoint cuobj.json names. Node trees: the GPU machine's real
snapshot (tests/check_fixtures.py), hwloc's real sysfs with an InfiniBand HCA (qib0 behind ib0,
port 1 ACTIVE: corpus/hwloc-sysfs/40intel64-2g2n4c+pci), this machine's real /proc/net
(fixtures/cpu-machine/proc-net). cufile.json / cuobj.json are written in NVIDIA's documented form."""

import json
import os
import shutil

import check_fixtures as cf
import pytest
from conftest import GDSDIAG

from gdsdiag import cuobj_json
from gdsdiag.check.context import CheckContext
from gdsdiag.check.endpoints import endpoint_routes
from gdsdiag.check.report import add_targets
from gdsdiag.check.runner import run
from gdsdiag.check.targets import visible_mounts
from gdsdiag.platform.fsroot import FsRoot
from gdsdiag.routes import Route

HERE = os.path.dirname(os.path.abspath(__file__))
PROC_NET = os.path.join(HERE, "fixtures", "cpu-machine", "proc-net")


@pytest.fixture
def h200(tmp_path):
    return cf.unpack_h200(str(tmp_path / "h200"))


def _mounts(root):
    ctx = CheckContext(FsRoot(root), env={})
    rep = run(ctx)
    add_targets(ctx, rep)
    return rep, {m.mount_point: m for m in rep.mounts}


def test_every_visible_mount_of_the_gpu_machine_has_its_route_and_deciding_fact(h200):
    rep, ms = _mounts(h200)
    # proc, sysfs, devtmpfs, devpts, cgroup2 are left out; /dev/shm is the tmpfs mounted last on it (0:27)
    assert list(ms) == ["/", "/mnt/sandboxing/model_tools_env/v1/python", "/usr/local/nvidia", "/dev/shm"]
    assert all(m.route == Route.COMPAT for m in ms.values())
    root = ms["/"]
    assert root.fstype == "ext4" and root.source == "/dev/vda" and root.decided_by == "mount"
    assert root.deciding == "ext4 on virtio: not an NVMe namespace, so no GDS-aware driver"
    assert ms["/usr/local/nvidia"].deciding.startswith("squashfs: not a filesystem cuFile can drive by P2P")
    # the route of each mount is the one check --path gives (one rule set)
    from gdsdiag.check.paths import file_route

    ctx = CheckContext(FsRoot(h200), env={})
    for mp, m in ms.items():
        assert file_route(ctx, mp, rep.verdict.routes)[0] == m.route


def test_a_node_without_a_cuFile_route_decides_every_mount():
    rep, ms = _mounts("/")  # this machine: no NVIDIA driver
    assert ms and all(m.route == Route.NONE and m.decided_by == "node" for m in ms.values())
    assert all(m.deciding.startswith("NVIDIA driver: ") for m in ms.values())


def test_denylist_on_mounts_without_a_direct_route_is_one_more_reason(h200):
    # check's denylist rule (paths._denylisted): where a mount would not take a direct route anyway
    # (this VM: virtio, tmpfs, squashfs) the listing is a reason after the mount's own, which decides
    cf.set_cufile(
        h200,
        json.dumps(
            {
                "properties": {"allow_compat_mode": True},
                "denylist": {"mounts": ["/usr/local/nvidia"], "filesystems": ["tmpfs"], "devices": ["/dev/vda"]},
            }
        ),
    )
    _, ms = _mounts(h200)
    nv = ms["/usr/local/nvidia"]
    assert nv.deciding.startswith("squashfs: not a filesystem cuFile can drive by P2P")
    assert nv.reasons[-1] == "cufile.json denylist.mounts lists /usr/local/nvidia: cuFile does not use GDS for it"
    assert ms["/dev/shm"].reasons[-1] == "cufile.json denylist.filesystems lists tmpfs: cuFile does not use GDS for it"
    assert ms["/"].reasons[-1] == "cufile.json denylist.devices lists /dev/vda: cuFile does not use GDS for it"
    assert all(m.route == Route.COMPAT and m.decided_by == "mount" for m in ms.values())


def test_without_compat_a_mount_without_a_direct_route_is_none(h200):
    cf.set_cufile(h200, json.dumps({"properties": {"allow_compat_mode": False}, "denylist": {"mounts": ["/"]}}))
    _, ms = _mounts(h200)
    assert ms["/"].route == Route.NONE
    assert ms["/"].reasons == [
        "ext4 on virtio: not an NVMe namespace, so no GDS-aware driver",
        "cufile.json denylist.mounts lists /: cuFile does not use GDS for it",
    ]


def test_check_json_carries_mounts_and_objects():
    import subprocess

    snap = cf.H200
    out = subprocess.run([*GDSDIAG, "check", "--from", snap, "--json"], capture_output=True, text=True)
    doc = json.loads(out.stdout)
    assert [m["mount_point"] for m in doc["mounts"]][0] == "/"
    assert set(doc["mounts"][0]) == {
        "mount_point",
        "fstype",
        "source",
        "where",
        "route",
        "deciding",
        "decided_by",
        "reasons",
        "fix",
    }
    assert doc["objects"] == {"source": "no cuobj.json in effect: it names no endpoint", "endpoints": []}
    text = subprocess.run([*GDSDIAG, "check", "--from", snap], capture_output=True, text=True).stdout
    assert "Per mount, a cuFile read would take:" in text
    assert "  /usr/local/nvidia" in text and "COMPAT  squashfs /dev/vdb — squashfs" in text


def _cuobj(tmp_path, props):
    d = tmp_path / "cuobj"
    (d / "etc").mkdir(parents=True)
    (d / "etc" / "cuobj.json").write_text(json.dumps({"properties": props}))
    return cuobj_json.load(FsRoot(str(d)), {})


def test_endpoints_by_name_on_a_real_infiniband_node(hwloc_trees, tmp_path):
    ctx = CheckContext(hwloc_trees["40intel64-2g2n4c+pci"], env={})
    ctx.__dict__["cuobj"] = _cuobj(tmp_path, {"rdma_dev_addr_list": ["ib0", "qib0", "eth0", "mlx5_0"]})
    eps, source = endpoint_routes(ctx)
    assert source == "4 endpoint(s) in /etc/cuobj.json (properties.rdma_dev_addr_list)"
    by = {e.endpoint: e for e in eps}
    # ib0 and qib0 are one HCA with port 1 ACTIVE; the node has no NVIDIA driver: host memory only
    for name in ("ib0", "qib0"):
        assert by[name].rdma_devices == ["qib0"] and by[name].route == Route.DRAM_BOUNCE and by[name].memory == "host"
        assert "no NVIDIA driver" in by[name].deciding
    assert by["ib0"].interface == "ib0"
    assert by["eth0"].route == Route.NONE and by["eth0"].deciding == "eth0 has no RDMA device (/sys/class/infiniband)"
    assert by["mlx5_0"].route == Route.NONE and "no device or interface mlx5_0" in by["mlx5_0"].deciding


def _with_proc_net(tmp_path):
    root = tmp_path / "node"
    shutil.copytree(PROC_NET, root / "proc" / "net")
    return root


def test_endpoints_by_address_from_real_proc_net(tmp_path):
    root = _with_proc_net(tmp_path)
    ctx = CheckContext(FsRoot(str(root)), env={})
    ctx.__dict__["cuobj"] = _cuobj(tmp_path, {"rdma_dev_addr_list": ["192.0.2.2", "fd00::2", "198.51.100.7"]})
    by = {e.endpoint: e for e in endpoint_routes(ctx)[0]}
    assert by["192.0.2.2"].interface == "eth0" and by["fd00::2"].interface == "eth0"
    assert by["192.0.2.2"].route == Route.NONE and "eth0 has no RDMA device" in by["192.0.2.2"].deciding
    assert by["198.51.100.7"].route == Route.NONE
    assert by["198.51.100.7"].deciding == "198.51.100.7 is not an address of this node (/proc/net)"


def test_endpoint_address_on_a_root_without_proc_net_is_unknown(h200, tmp_path):
    ctx = CheckContext(FsRoot(h200), env={})
    ctx.__dict__["cuobj"] = _cuobj(tmp_path, {"rdma_dev_addr_list": ["192.0.2.2"]})
    (e,) = endpoint_routes(ctx)[0]
    assert e.route == Route.UNKNOWN and "no /proc/net" in e.deciding


def test_peer_memory_type_decides_gpu_memory(hwloc_trees, tmp_path):
    from gdsdiag.check.endpoints import _gpu_memory, _peer_type

    ctx = CheckContext(hwloc_trees["40intel64-2g2n4c+pci"], env={})
    ctx.__dict__["cuobj"] = _cuobj(tmp_path, {"rdma_peer_type": "dmabuf"})
    assert _peer_type(ctx, {"rdma_peer_type": "dmabuf"}) == ("dmabuf", "/etc/cuobj.json properties.rdma_peer_type")
    assert _peer_type(ctx, {})[0] == "nvidia_peermem"
    ok, why = _gpu_memory(ctx, "nvidia_peermem", "default")
    assert not ok and "no NVIDIA driver" in why


def test_visible_mounts_hide_what_is_mounted_over(h200):
    # the snapshot's mountinfo mounts a second tmpfs (0:27) over /dev/shm (0:23): only the top one is seen
    ms = [m for m in visible_mounts(CheckContext(FsRoot(h200), env={})) if m.mount_point == "/dev/shm"]
    assert [m.dev for m in ms] == ["0:27"]


def test_text_lists_the_first_mounts_and_says_how_many_more(h200):
    # a Kubernetes node mounts a tmpfs per pod volume: the text shows the first MOUNT_LINES, -v all
    import io

    from rich.console import Console

    from gdsdiag.check.model import MountRoute
    from gdsdiag.render.check_text import MOUNT_LINES, render

    rep, ms = _mounts(h200)
    one = ms["/dev/shm"]
    rep.mounts = [
        MountRoute(
            f"/var/lib/kubelet/pods/p{i}/volumes", one.fstype, one.source, one.where, one.route, one.deciding, [], ""
        )
        for i in range(MOUNT_LINES + 5)
    ]

    def text(verbose):
        out = io.StringIO()
        render(Console(file=out, width=200), rep, verbose)
        return out.getvalue()

    short = text(False)
    assert f"/var/lib/kubelet/pods/p{MOUNT_LINES - 1}/volumes" in short
    assert f"/var/lib/kubelet/pods/p{MOUNT_LINES}/volumes" not in short
    assert "… 5 more mount(s): -v or --json lists every one" in short
    assert f"/var/lib/kubelet/pods/p{MOUNT_LINES + 4}/volumes" in text(True)
