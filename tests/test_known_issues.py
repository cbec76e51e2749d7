"""NVIDIA's GDS Known Issues as node rules (gdsdiag/check/known_issues.py), each held against the
GPU machine's real snapshot and the node files of tests/fixtures/known-issues (README there cites
every source). Each test fails if its rule says the wrong thing either way."""

import gzip
import os
import shutil

import check_fixtures as cf
import pytest
from conftest import REPO

from gdsdiag.check.context import CheckContext
from gdsdiag.check.runner import run
from gdsdiag.platform import osinfo
from gdsdiag.platform.fsroot import FsRoot
from gdsdiag.routes import Route
from gdsdiag.verdicts import Status

KI = os.path.join(REPO, "tests", "fixtures", "known-issues")


def _ids(root, env=None):
    rep = run(CheckContext(FsRoot(root), env=env or {}))
    return rep, {r.id: r for r in rep.results if r.path is None}


def _write(root, path, text):
    full = os.path.join(root, path.lstrip("/"))
    os.makedirs(os.path.dirname(full), exist_ok=True)
    with open(full, "w") as f:
        f.write(text)


def _read(root, path):
    with open(os.path.join(root, path.lstrip("/"))) as f:
        return f.read()


def _os_release(root, name):
    shutil.copy(os.path.join(KI, name), os.path.join(root, "etc", "os-release"))


@pytest.fixture
def h200(tmp_path):
    return cf.unpack_h200(str(tmp_path / "h200"))


@pytest.fixture
def p2p(h200):
    """The real snapshot made P2PDMA-ready (check_fixtures.set_p2pdma_ready)."""
    cf.set_p2pdma_ready(h200)
    cf.add_kallsyms(h200, ("p2pdma_pgmap_ops", None), ("pci_p2pdma_add_resource", None))
    cf.add_device_nodes(h200)
    return h200


# --- KASLR -------------------------------------------------------------------------------------


def test_kaslr_not_relevant_without_p2pdma_kernel(h200):
    # the real snapshot: KASLR on, but CONFIG_PCI_P2PDMA is not set — nothing to warn about
    _, ids = _ids(h200)
    assert ids["known.kaslr"].status == Status.INFO and "not relevant" in ids["known.kaslr"].summary


def test_kaslr_on_x86_warns_with_nokaslr_fix(p2p):
    rep, ids = _ids(p2p)
    k = ids["known.kaslr"]
    assert k.status == Status.WARN, k.summary
    assert "nokaslr" in k.fix and "KASLR is enabled" in k.why and k.route == Route.P2PDMA
    assert any("CONFIG_RANDOMIZE_BASE=y" in e.value for e in k.evidence)
    assert any("CONFIG_X86_64=y" in e.source for e in k.evidence)
    assert Route.P2PDMA in rep.verdict.routes  # "can fail": a warning, not a removed route


def test_nokaslr_on_the_command_line_passes(p2p):
    line = _read(p2p, "/proc/cmdline").rstrip("\n")
    # kernel words come before the lone '--'; nokaslr after it would go to init, not the kernel
    head, sep, tail = line.partition(" -- ")
    _write(p2p, "/proc/cmdline", f"{head} {sep.strip()} nokaslr {tail}\n")
    _, ids = _ids(p2p)
    assert ids["known.kaslr"].status == Status.WARN  # init's argument, not the kernel's
    _write(p2p, "/proc/cmdline", f"{head} nokaslr {sep.strip()} {tail}\n")
    _, ids = _ids(p2p)
    assert ids["known.kaslr"].status == Status.PASS and "nokaslr" in ids["known.kaslr"].summary


def test_kaslr_not_built_passes_and_unknown_config_skips(p2p):
    cfg = os.path.join(p2p, "proc/config.gz")
    text = gzip.decompress(open(cfg, "rb").read()).decode()
    with open(cfg, "wb") as f:
        f.write(gzip.compress(text.replace("CONFIG_RANDOMIZE_BASE=y", "# CONFIG_RANDOMIZE_BASE is not set").encode()))
    _, ids = _ids(p2p)
    assert ids["known.kaslr"].status == Status.PASS
    os.unlink(cfg)  # no kernel config at all: P2PDMA relevance and KASLR both unknown
    _, ids = _ids(p2p)
    assert ids["known.kaslr"].status == Status.SKIP and "unknown" in ids["known.kaslr"].summary


def test_kaslr_is_x86_only(p2p):
    cfg = os.path.join(p2p, "proc/config.gz")
    text = gzip.decompress(open(cfg, "rb").read()).decode()
    text = text.replace("CONFIG_X86_64=y", "# CONFIG_X86_64 is not set") + "CONFIG_ARM64=y\n"
    with open(cfg, "wb") as f:
        f.write(gzip.compress(text.encode()))
    _, ids = _ids(p2p)
    assert ids["known.kaslr"].status == Status.PASS and "x86_64 only" in ids["known.kaslr"].summary


# --- RHEL 9.5 ----------------------------------------------------------------------------------


def test_rhel95_x86_p2pdma_warns(p2p):
    _os_release(p2p, "rhel-9.5-os-release")
    _, ids = _ids(p2p)
    r = ids["known.rhel95"]
    assert r.status == Status.WARN and "Red Hat Enterprise Linux 9.5 (Plow)" in r.summary
    assert "not supported on RHEL 9.5 for x86" in r.why and "nvidia-fs route" in r.fix


def test_other_distribution_passes(p2p):
    _os_release(p2p, "debian-12-os-release")
    _, ids = _ids(p2p)
    assert ids["known.rhel95"].status == Status.PASS and "Debian" in ids["known.rhel95"].summary


def test_rhel95_without_os_release_skips(p2p):
    for p in ("etc/os-release", "usr/lib/os-release"):
        if os.path.exists(os.path.join(p2p, p)):
            os.unlink(os.path.join(p2p, p))
    _, ids = _ids(p2p)
    assert ids["known.rhel95"].status == Status.SKIP


def test_rhel95_not_relevant_without_p2pdma(h200):
    _os_release(h200, "rhel-9.5-os-release")
    _, ids = _ids(h200)
    assert ids["known.rhel95"].status == Status.INFO


def test_os_release_parser_quotes():
    f = osinfo.parse_os_release(open(os.path.join(KI, "rhel-9.5-os-release")).read())
    assert f["ID"] == "rhel" and f["VERSION_ID"] == "9.5" and f["VERSION"] == "9.5 (Plow)"
    f = osinfo.parse_os_release(open(os.path.join(KI, "debian-12-os-release")).read())
    assert f["ID"] == "debian" and f["VERSION_ID"] == "12"
    assert osinfo.parse_os_release("ID='rocky'\nBROKEN=\"x\n# c\n")["ID"] == "rocky"


# --- B200 without nvidia-persistenced -----------------------------------------------------------


def _b200(root):
    info = "proc/driver/nvidia/gpus/0000:00:06.0/information"
    _write(root, info, _read(root, info).replace("NVIDIA H200", "NVIDIA B200"))


def test_b200_without_persistenced_state_is_unknown_in_a_snapshot(p2p):
    _b200(p2p)
    _, ids = _ids(p2p)
    assert ids["known.b200_persistenced"].status == Status.SKIP


def test_b200_with_persistenced_socket_passes(p2p):
    _b200(p2p)
    _write(p2p, "/var/run/nvidia-persistenced/socket", "")
    _, ids = _ids(p2p)
    assert ids["known.b200_persistenced"].status == Status.PASS


def test_h200_has_no_b200_rule(p2p):
    _, ids = _ids(p2p)
    assert "known.b200_persistenced" not in ids


def test_live_node_without_persistenced_is_not_running():
    # this machine: a live root, no nvidia-persistenced process
    p = osinfo.read_persistenced(FsRoot("/"))
    assert p.running is False and any("/proc/*/comm" in e for e in p.evidence)


# --- nvidia-fs 2.25.6 --------------------------------------------------------------------------


def test_nvfs_2257_passes(h200):
    cf.add_nvidia_fs(h200)
    _, ids = _ids(h200)
    assert ids["known.nvfs_2256"].status == Status.PASS and "2.25.7" in ids["known.nvfs_2256"].summary


def test_nvfs_2256_warns(h200):
    cf.add_nvidia_fs(h200)
    _write(h200, "/sys/module/nvidia_fs/version", "2.25.6\n")
    _, ids = _ids(h200)
    r = ids["known.nvfs_2256"]
    assert r.status == Status.WARN and "2.25.7 or newer" in r.fix and r.route == Route.NVFS
    assert r.evidence[0].source == "/sys/module/nvidia_fs/version"


def test_nvfs_major_minor_only_cannot_tell(h200):
    cf.add_nvidia_fs(h200)
    os.unlink(os.path.join(h200, "sys/module/nvidia_fs/version"))
    os.unlink(os.path.join(h200, "proc/driver/nvidia-fs/stats"))
    _, ids = _ids(h200)
    r = ids["known.nvfs_2256"]
    assert r.status == Status.SKIP and "2.25" in r.summary  # "version: 2.25" only: unknown, not a pass


def test_no_nvfs_no_rule(h200):
    _, ids = _ids(h200)
    assert "known.nvfs_2256" not in ids


# --- the nvme symbol mismatch that sends every NVMe read to compat (gds-nvidia-fs#87) -----------


def test_doca_2601_nvme_v2_on_a_6_8_kernel_warns(h200):
    # #87: DOCA-OFED 26.01's nvme exports nvme_v2_register_nvfs_dma_ops on a kernel that needs the
    # v1 ABI, nvidia-fs looks up v1, every NVMe read silently goes to compat. The kernel release is
    # an Ubuntu 6.8 release as the corpus captures print it (6.8.0-64-generic: ASUS ESC8000A-E12 gdscheck).
    cf.add_nvidia_fs(h200)
    cf.add_kallsyms(h200, ("nvme_v2_register_nvfs_dma_ops", "nvme"))
    _write(h200, "/proc/sys/kernel/osrelease", "6.8.0-64-generic\n")
    _, ids = _ids(h200)
    r = ids["storage.nvme_abi"]
    assert r.status == Status.WARN and "expects the nvme v1 ops but nvme exports v2" in r.summary
    assert "gds-nvidia-fs#87" in r.why and "DOCA" in r.fix
    cf.add_kallsyms(h200, ("nvme_v1_register_nvfs_dma_ops", "nvme"))  # a matching nvme: no warning
    _, ids = _ids(h200)
    assert "storage.nvme_abi" not in ids


# --- the readers answer the same from a snapshot -----------------------------------------------


def test_snapshot_carries_os_release_and_cmdline(tmp_path):
    from gdsdiag.platform.roots import open_snapshot
    from gdsdiag.snapshot import create

    if not os.path.exists("/etc/os-release"):
        pytest.skip("no /etc/os-release here")
    out = tmp_path / "node.tar.gz"
    create(str(out))
    snap, live = open_snapshot(str(out)), FsRoot("/")
    assert osinfo.read_os_release(snap).fields == osinfo.read_os_release(live).fields
    assert osinfo.read_cmdline(snap) == osinfo.read_cmdline(live)
