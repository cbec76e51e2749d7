"""check's per-mount routes (gdsdiag/check/targets.py, issue 47) held against real captures of
NFS over TCP and over RDMA, Lustre over o2ib, IBM Storage Scale (GPFS) and WekaFS mounts:
tests/fixtures/mounts/*.mount, each line copied verbatim from the public source its README cites.

The captures are `mount` output ("SRC on MP type FSTYPE (OPTIONS)"); util-linux prints that from
/proc/self/mountinfo, joining the per-mount and the super-block options into one list. A tree takes
each line back into the kernel's mountinfo form on the GPU machine's real snapshot: the options go
to both fields (Mount.option reads both), and the device is an anonymous 0:N, which is what the kernel
gives every network file system (the snapshot's own tmpfs and squashfs-less mounts show 0:N too).
Two nodes: the snapshot as it is (no nvidia-fs: COMPAT only), and the snapshot with nvidia-fs loaded
and each client's registration symbol exported (check_fixtures: the kallsyms line format of the
real file, names from gds-nvidia-fs src/nvfs-dma.c modules_list)."""

import json
import os
import re
import subprocess

import check_fixtures as cf
import pytest
from conftest import GDSDIAG
from test_check_targets import _mounts  # (check's mounts on a root, as the other mount tests read them)

from gdsdiag.routes import Route

MOUNTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "mounts")
_MOUNT_LINE = re.compile(r"^(?P<src>\S+) on (?P<mp>\S+) type (?P<type>\S+) \((?P<opts>[^)]*)\)$")
SYMBOLS = (
    ("rpcrdma_register_nvfs_dma_ops", "rpcrdma"),
    ("lustre_v1_register_nvfs_dma_ops", "lnet"),
    ("ibm_scale_v1_register_nvfs_dma_ops", "mmfslinux"),
)


def _capture(name):
    with open(os.path.join(MOUNTS, name)) as f:
        return [ln for ln in f.read().splitlines() if ln]


def _node(tmp_path, name, nvfs=False, cufile=None):
    root = cf.unpack_h200(str(tmp_path / "h200"))
    rows = []
    for i, line in enumerate(_capture(name)):
        m = _MOUNT_LINE.match(line)
        assert m, f"{name}: not a mount(8) line: {line}"
        o = m["opts"]
        rows.append(f"{900 + i} 1 0:{90 + i} / {m['mp']} {o} - {m['type']} {m['src']} {o}\n")
    with open(os.path.join(root, "proc", "self", "mountinfo"), "a") as f:
        f.write("".join(rows))
    if nvfs:
        cf.add_nvidia_fs(root)
        cf.add_device_nodes(root)
        cf.add_kallsyms(root, *SYMBOLS)
    if cufile is not None:
        cf.set_cufile(root, json.dumps(cufile))
    return root


def test_nfs_over_rdma_from_nvidias_guide_is_nvfs_with_rpcrdmas_registration(tmp_path):
    # NVIDIA GDS Benchmarking and Configuration Guide: nfs vers=3 proto=rdma port=20049
    _, ms = _mounts(_node(tmp_path, "nfs-rdma-nvidia-gds-config-guide.mount", nvfs=True))
    for mp, src in (
        ("/mnt/nfs/ib9/data/0", "192.168.0.10:/mnt/nfs_10/10"),
        ("/mnt/nfs/ib9/data/1", "192.168.0.11:/mnt/nfs_11/11"),
    ):
        m = ms[mp]
        assert (m.fstype, m.source, m.route) == ("nfs", src, Route.NVFS)
        assert m.deciding == "NFS over RDMA with rpcrdma's nvidia-fs registration" and m.fix == ""


def test_nfs_over_rdma_without_gds_rpcrdma_blames_the_client_not_the_mount(tmp_path):
    # the same real proto=rdma mounts on a node without nvidia-fs: the old rule said "GDS needs
    # proto=rdma" and told the operator to mount with -o proto=rdma, which it already was
    rep, ms = _mounts(_node(tmp_path, "nfs-rdma-nvidia-gds-config-guide.mount"))
    m = ms["/mnt/nfs/ib9/data/0"]
    assert m.route == Route.COMPAT
    assert m.deciding == (
        "NFS proto=rdma, but rpcrdma does not export rpcrdma_register_nvfs_dma_ops "
        "(not the GDS-enabled rpcrdma, or nvidia-fs is missing)"
    )
    assert "proto=rdma (port" not in m.fix and "--with-nfsrdma" in m.fix
    # check's rdma.nfs rule passes it (it is over RDMA)
    nfs = [r for r in rep.results if r.id == "rdma.nfs" and r.path == "/mnt/nfs/ib9/data/0"]
    assert [r.summary for r in nfs] == ["proto=rdma"] and nfs[0].status.value == "PASS"


def test_nfs4_over_tcp6_is_compat_with_the_proto_rdma_fix_even_with_nvidia_fs(tmp_path):
    rep, ms = _mounts(_node(tmp_path, "nfs4-tcp6-ustclug.mount", nvfs=True))
    m = ms["/mnt/nfs"]
    assert (m.fstype, m.source, m.route, m.decided_by) == ("nfs4", "localhost:/srv/abcde", Route.COMPAT, "mount")
    assert m.deciding == "NFS proto=tcp6: GDS needs proto=rdma and the GDS-enabled rpcrdma"
    assert m.fix.startswith("mount with -o proto=rdma (port 20049)")
    nfs = [r for r in rep.results if r.id == "rdma.nfs" and r.path == "/mnt/nfs"]
    assert nfs[0].summary == "proto=tcp6" and nfs[0].status.value == "WARN"


def test_nfs4_over_rdma_capture_is_nvfs(tmp_path):
    _, ms = _mounts(_node(tmp_path, "nfs4-rdma-ustclug.mount", nvfs=True))
    m = ms["/mnt/nfs"]
    assert (m.fstype, m.source, m.route) == ("nfs4", "192.168.122.47:/srv/abcde", Route.NVFS)


def test_lustre_o2ib_source_is_read_whole_and_routes_by_lnets_registration(tmp_path):
    _, ms = _mounts(_node(tmp_path, "lustre-o2ib-spack-docs.mount"))
    m = ms["/p/lscratchd"]
    assert (m.fstype, m.source, m.route) == ("lustre", "mds1-lnet0@o2ib100:/lsd", Route.COMPAT)
    assert m.deciding == "lustre: its client does not export lustre_v1_register_nvfs_dma_ops (or nvidia-fs is missing)"
    # the old fix sent Lustre users to NVMe-backed ext4; what is missing is the GDS-enabled client
    assert m.fix == "install lustre's GDS-enabled client (it registers with nvidia-fs) and load nvidia-fs"
    _, ms = _mounts(_node(tmp_path / "nvfs", "lustre-o2ib-spack-docs.mount", nvfs=True))
    for mp in ("/p/lscratchd", "/p/lscratche"):
        assert ms[mp].route == Route.NVFS
        assert ms[mp].deciding == "lustre client registered with nvidia-fs (lustre_v1_register_nvfs_dma_ops)"


def test_gpfs_needs_its_rdma_nic_list_then_the_scale_registration(tmp_path):
    # NVIDIA cuFile Compatibility Mode: an IBM Spectrum Scale mount without rdma_dev_addr_list is compat
    _, ms = _mounts(_node(tmp_path, "gpfs-storagescalevagrant.mount", nvfs=True))
    m = ms["/ibm/fs1"]
    assert (m.fstype, m.source, m.route, m.decided_by) == ("gpfs", "fs1", Route.COMPAT, "mount")
    assert m.deciding.startswith("no properties.rdma_dev_addr_list (nor fs.gpfs.rdma_dev_addr_list)")
    assert m.fix == "list this node's RDMA NIC addresses in cufile.json properties.rdma_dev_addr_list"
    cfg = {"properties": {"rdma_dev_addr_list": ["192.168.0.2"]}}
    _, ms = _mounts(_node(tmp_path / "listed", "gpfs-storagescalevagrant.mount", nvfs=True, cufile=cfg))
    assert ms["/ibm/fs1"].route == Route.NVFS
    assert ms["/ibm/fs1"].deciding == "gpfs client registered with nvidia-fs (ibm_scale_v1_register_nvfs_dma_ops)"


def test_wekafs_is_userspace_rdma_and_its_writes_are_compat(tmp_path):
    cfg = {"properties": {"rdma_dev_addr_list": ["192.168.0.2"]}}
    _, ms = _mounts(_node(tmp_path, "wekafs-weka-docs.mount", nvfs=True, cufile=cfg))
    m = ms["/mnt/weka"]
    assert (m.fstype, m.source, m.route) == ("wekafs", "new_fs", Route.COMPAT)
    assert (
        m.deciding
        == "WekaFS: cuFile's userspace RDMA route; gdsdiag cannot confirm it from the kernel — use gdsdiag trace"
    )
    assert m.reasons[-1].startswith("writes: compatibility mode (fs.weka.rdma_write_support unset, false by default")


@pytest.mark.parametrize(
    "capture,mp,route",
    [
        ("nfs-rdma-nvidia-gds-config-guide.mount", "/mnt/nfs/ib9/data/0", "NVFS"),
        ("nfs4-tcp6-ustclug.mount", "/mnt/nfs", "COMPAT"),
    ],
)
def test_installed_cli_gives_the_same_route(tmp_path, capture, mp, route):
    root = _node(tmp_path, capture, nvfs=True)
    out = subprocess.run([*GDSDIAG, "check", "--root", root, "--json"], capture_output=True, text=True, timeout=120)
    doc = json.loads(out.stdout)
    (m,) = [m for m in doc["mounts"] if m["mount_point"] == mp]
    assert m["route"] == route
