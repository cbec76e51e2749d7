"""gdsdiag check: real runs on this machine and on the GPU machine's snapshot, fixture trees for
what neither machine has (tests/check_fixtures.py), and the CLI contract."""

import json
import os
import subprocess

import check_fixtures as cf
import pytest
from conftest import GDSDIAG, corpus

from gdsdiag.check.context import CheckContext
from gdsdiag.check.runner import run
from gdsdiag.platform.fsroot import FsRoot
from gdsdiag.routes import Route
from gdsdiag.verdicts import Status


def _run(root, paths=(), env=None):
    return run(CheckContext(FsRoot(root), env=env or {}), list(paths))


def _by_id(report):
    return {r.id: r for r in report.results if r.path is None}


@pytest.fixture
def h200(tmp_path):
    return cf.unpack_h200(str(tmp_path / "h200"))


def test_this_machine_every_check_answers():
    rep = _run("/", env=dict(os.environ))
    ids = _by_id(rep)
    assert ids["nvidia.driver"].status == Status.FAIL and "no NVIDIA driver" in ids["nvidia.driver"].summary
    assert ids["nvidia.gpus"].status == Status.SKIP
    assert ids["nvfs.loaded"].status == Status.FAIL
    assert all(ids[i].status == Status.SKIP for i in ("nvfs.devices", "nvfs.stats", "nvfs.modules", "p2pdma.driver"))
    assert rep.verdict.routes == [] and rep.verdict.summary == "none"
    assert rep.exit_code == 2
    for r in rep.results:
        assert r.summary and r.evidence, r.id  # every answer carries its evidence


def test_this_machine_paths_real_odirect(tmp_path):
    rep = _run("/", [str(tmp_path)], env=dict(os.environ))
    (pv,) = rep.paths
    odirect = next(r for r in rep.results if r.id == "path.odirect")
    assert odirect.status == Status.PASS, odirect.summary
    assert os.listdir(tmp_path) == []  # the probe removed its own file
    assert pv.fstype in ("ext4", "xfs", "tmpfs", "overlay", "btrfs")
    assert pv.route == Route.NONE  # no driver here: no route at all


def _mount(fstype, where):
    os.makedirs(where, exist_ok=True)
    r = subprocess.run(["mount", "-t", fstype, "none", where], capture_output=True)
    return r.returncode == 0


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting ramfs/tmpfs needs root")
def test_filesystem_without_odirect_is_explained(tmp_path):
    where = str(tmp_path / "ramfs")
    if not _mount("ramfs", where):
        pytest.skip("ramfs mount not permitted here")
    try:
        rep = _run("/", [where], env=dict(os.environ))
        odirect = next(r for r in rep.results if r.id == "path.odirect")
        assert odirect.status == Status.FAIL
        assert "refuses O_DIRECT (EINVAL)" in odirect.summary and "ext4, xfs" in odirect.fix
        assert rep.paths[0].fstype == "ramfs"
        assert os.listdir(where) == []
    finally:
        subprocess.run(["umount", where])


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting tmpfs needs root")
def test_tmpfs_path_is_compat_class(tmp_path):
    where = str(tmp_path / "tmpfs")
    if not _mount("tmpfs", where):
        pytest.skip("tmpfs mount not permitted here")
    try:
        rep = _run("/", [where], env=dict(os.environ))
        pv = rep.paths[0]
        assert pv.fstype == "tmpfs" and any("tmpfs" in r for r in pv.reasons)
        # tmpfs gained O_DIRECT in Linux 6.6; older kernels refuse it: either answer is explained
        od = next(r for r in rep.results if r.id == "path.odirect")
        assert od.status in (Status.PASS, Status.FAIL) and od.summary
    finally:
        subprocess.run(["umount", where])


def test_gpu_machine_snapshot_is_compat_only(h200):
    """The real GPU machine: open driver 580, no nvidia-fs, P2PDMA off in the kernel, cufile.json."""
    rep = _run(h200)
    ids = _by_id(rep)
    assert (
        ids["nvidia.driver"].status == Status.PASS and ids["nvidia.driver"].summary == "580.159.04 (open kernel module)"
    )
    assert ids["nvidia.gpus"].summary == "NVIDIA H200 (0000:00:06.0)"
    assert ids["nvfs.loaded"].status == Status.FAIL
    assert ids["p2pdma.config"].status == Status.FAIL and ids["p2pdma.config"].evidence[0].source == "/proc/config.gz"
    assert ids["p2pdma.registry"].status == Status.FAIL
    assert ids["p2pdma.driver"].status == Status.PASS  # 580 open ≥ 565.47
    assert ids["p2pdma.gpu"].status == Status.PASS
    assert ids["cufile.json"].status == Status.PASS  # NVIDIA's own file, comments and all
    assert ids["platform.devnodes"].status == Status.PASS and ids["libcufile"].summary.startswith("1.15.1.6")
    # the GPU machine is a VM whose image carries /.dockerenv on an ext4 root: not a container sign
    # alone (issue 22); the summary says what it rests on
    assert ids["platform.container"].summary.startswith("not known to be a container: only /.dockerenv present")
    assert rep.verdict.summary == "COMPAT only" and rep.verdict.routes == [Route.COMPAT]
    assert any("nvidia-fs is not loaded" in r for r in rep.verdict.reasons)
    assert any("CONFIG_PCI_P2PDMA is not set" in r for r in rep.verdict.reasons)
    # The snapshot was taken after writing the udev entry libcufile needs; without it (as the
    # machine boots, see fixtures/gpu-machine/check-before.json) the check explains the 5027.
    assert ids["platform.udev"].status == Status.PASS
    import shutil

    shutil.rmtree(os.path.join(h200, "run", "udev"))
    ids = _by_id(_run(h200))
    assert ids["platform.udev"].status == Status.FAIL and "5027" in ids["platform.udev"].why


def test_gpu_machine_live_run_recorded():
    from conftest import FIXTURES

    doc = json.loads("".join(open(os.path.join(FIXTURES, "gpu-machine", "check-before.json")).readlines()[3:]))
    st = {c["id"]: c["status"] for c in doc["checks"]}
    assert doc["verdict"]["summary"] == "COMPAT only" and doc["exit_code"] == 2
    assert st["platform.udev"] == "FAIL" and st["path.udev"] == "FAIL" and st["path.odirect"] == "PASS"
    (p,) = doc["paths"]
    assert p["route"] == "COMPAT" and p["fstype"] == "ext4"


def test_nvidia_fs_with_gds_nvme_gives_nvfs_route(h200):
    # the VM has no NVMe function of its own: NVMe-oF (nvme_rdma) is what nvidia-fs reaches here
    # (without it the snapshot contradicts itself and NVFS is not claimed: test_hostile_forged.py)
    cf.add_nvidia_fs(h200)
    cf.add_kallsyms(
        h200,
        ("nvme_v1_register_nvfs_dma_ops", "nvme"),
        ("nvme_rdma_v1_register_nvfs_dma_ops", "nvme_rdma"),
        ("nvidia_p2p_get_pages_persistent", "nvidia"),
    )
    cf.add_device_nodes(h200)
    cf.add_udev(h200)
    rep = _run(h200)
    ids = _by_id(rep)
    assert ids["nvfs.loaded"].status == Status.PASS and "2.25" in ids["nvfs.loaded"].summary
    assert ids["nvfs.devices"].summary == "16 nodes"
    assert ids["nvfs.stats"].status == Status.INFO and "rw_stats_enabled" in ids["nvfs.stats"].summary
    assert "GDS 1.14.0.31, driver 2.25.7" in ids["nvfs.stats"].evidence[-1].value
    assert (
        ids["nvfs.modules"].status == Status.INFO
        and "only while a /dev/nvidia-fs* is open" in ids["nvfs.modules"].summary
    )
    assert ids["storage.symbols"].status == Status.PASS and ids["storage.symbols"].summary == "NVMe, NVMeOF"
    # kernel 6.18 wants the v2 nvme ops; a v1-only nvme is the mismatch of gds-nvidia-fs#87
    assert ids["storage.nvme_abi"].status == Status.WARN
    assert Route.NVFS in rep.verdict.routes and rep.verdict.summary.startswith("NVFS")
    # P2PDMA prerequisites are not needed now: reported, not failed
    assert ids["p2pdma.config"].status == Status.INFO and "not needed" in ids["p2pdma.config"].summary


def test_p2pdma_ready_node(h200):
    cf.set_p2pdma_ready(h200)
    cf.add_kallsyms(h200, ("p2pdma_pgmap_ops", None), ("pci_p2pdma_add_resource", None))
    cf.add_device_nodes(h200)
    rep = _run(h200)
    ids = _by_id(rep)
    for i in (
        "p2pdma.config",
        "p2pdma.kernel",
        "p2pdma.symbols",
        "p2pdma.driver",
        "p2pdma.registry",
        "p2pdma.multipath",
    ):
        assert ids[i].status == Status.PASS, (i, ids[i].summary)
    assert rep.verdict.routes[0] == Route.P2PDMA
    assert ids["nvfs.loaded"].status == Status.INFO


def test_iommu_translating_blocks_nvfs(h200):
    cf.add_nvidia_fs(h200)
    cf.add_kallsyms(h200, ("nvme_v2_register_nvfs_dma_ops", "nvme"))
    cf.set_iommu_translating(h200)
    rep = _run(h200)
    ids = _by_id(rep)
    assert ids["platform.iommu"].status == Status.FAIL and ids["platform.iommu"].summary == "translated"
    assert Route.NVFS not in rep.verdict.routes
    assert "storage.nvme_abi" not in ids  # v2 on 6.18: the ABI matches


def test_cufile_json_settings_that_force_routes(h200):
    cf.set_cufile(
        h200,
        """{ // comment
      "properties": {"force_compat_mode": true, "use_pci_p2pdma": true, "allow_compat_mode": false,
                     "rdma_dynamic_routing": true, "rdma_dynamic_routing_order": ["SYS_MEM", "GPU_MEM"],
                     "max_direct_io_size_kb": "16384", "max_io_thread": 4},
      /* block comment */
      "logging": {"level": "VERBOSE", "dir": "/var/log/cufile"}
    }""",
    )
    rep = _run(h200)
    ids = _by_id(rep)
    cfg = ids["cufile.json"]
    assert cfg.status == Status.FAIL
    msgs = " | ".join(e.value for e in cfg.evidence)
    assert "properties.max_direct_io_size_kb must be int" in msgs
    assert "did you mean 'execution.max_io_threads'?" in msgs or "unknown key 'properties.max_io_thread'" in msgs
    assert "logging.level = 'VERBOSE' is not one of" in msgs
    assert ids["cufile.force_compat"].status == Status.WARN
    assert ids["cufile.p2pdma"].status == Status.FAIL  # use_pci_p2pdma without the registry keys
    assert ids["cufile.dynamic_routing"].status == Status.WARN
    assert rep.verdict.routes == [Route.COMPAT] and any("force_compat_mode" in r for r in rep.verdict.reasons)


def test_malformed_cufile_json_is_one_clear_failure(h200):
    cf.set_cufile(h200, '{"properties": {"use_poll_mode": false,}}')
    rep = _run(h200)
    c = _by_id(rep)["cufile.json"]
    assert c.status == Status.FAIL and c.summary.startswith("/etc/cufile.json line 1 column")


def test_gdscheck_comparison_flags_the_misleading_verdict(h200):
    text = open(corpus("gdscheck", "asus-esc8000a-e12-gds1.14-iommu-off.txt")).read()
    rep = run(CheckContext(FsRoot(h200), env={}), [], text)
    items = {d["item"]: d for d in rep.gdscheck}
    assert items["platform verdict"]["agree"] is False  # "succeeded" while only compat is possible here
    assert items["NVMe via nvidia-fs"]["agree"] is False
    assert items["NVMe P2PDMA"]["agree"] is True  # Unsupported vs no P2PDMA route
    assert rep.exit_code == 2


def _cli(*args):
    return subprocess.run([*GDSDIAG, *args], capture_output=True, text=True)


def test_cli_check_json_on_snapshot():
    r = _cli("check", "--from", cf.H200, "--json")
    doc = json.loads(r.stdout)
    assert doc["schema"] == "gdsdiag.check/1" and doc["verdict"]["summary"] == "COMPAT only"
    assert r.returncode == doc["exit_code"] == 2
    assert doc["counts"]["FAIL"] >= 3


def test_cli_check_path_json_here(tmp_path):
    r = _cli("check", "--path", str(tmp_path), "--json")
    doc = json.loads(r.stdout)
    (p,) = doc["paths"]
    assert p["path"] == str(tmp_path) and p["route"] == "NONE"
    assert any(c["id"] == "path.odirect" and c["status"] == "PASS" for c in doc["checks"])


@pytest.mark.parametrize(
    "args,needle",
    [
        (("check", "--from", "/nope.tar.gz"), "snapshot /nope.tar.gz not found"),
        (("check", "--gdscheck", "/nope.txt"), "cannot read /nope.txt"),
        (("check", "--from", cf.H200, "--path", "/tmp"), "--path cannot be probed inside a snapshot"),
    ],
)
def test_cli_check_errors(args, needle):
    # each names nothing there or cannot be right together: usage errors, exit 4 (issue 23)
    r = _cli(*args)
    assert r.returncode == 4 and needle in r.stderr and "Traceback" not in r.stderr


def test_md_raid_p2pdma_rule_follows_nvidia_guidance():
    """RAID0 over NVMe may take P2PDMA on NVIDIA Grace or Linux >= 7.1 (NVIDIA's gds-diag; kernel
    commit 02666132403a), other levels never (gdsdiag/check/paths.py cites both)."""
    from types import SimpleNamespace

    from gdsdiag.check.paths import _md_p2pdma

    def ctx(release, cpuinfo=""):
        return SimpleNamespace(release=release, fs=SimpleNamespace(read_text=lambda p: cpuinfo))

    ok, why = _md_p2pdma(ctx("7.1.10-cmp"), {"raid0"})
    assert ok and "block.raid.use_pci_p2pdma" in why and "Release 615" in why
    ok, why = _md_p2pdma(ctx("6.8.0-45-generic"), {"raid0"})
    assert not ok and "needs NVIDIA Grace or Linux 7.1" in why
    grace = "CPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: 0x0\nCPU part\t: 0xd4f\n"
    assert _md_p2pdma(ctx("6.8.0-1013-nvidia-64k", grace), {"raid0"})[0] is True
    ok, why = _md_p2pdma(ctx("7.3.0"), {"raid0", "raid5"})
    assert not ok and "raid5" in why
    assert _md_p2pdma(ctx("7.3.0"), {"raid1"})[0] is False
    assert _md_p2pdma(ctx(None), {"raid0"})[0] is False
