"""FsRoot.attrs()/link_attrs(): the one-descriptor-per-device reads the topology uses answer exactly
as the FsRoot's own path reads do, also for what a hostile --root tree may hold (links out of the
tree, a FIFO, a directory in place of a file). Real files on disk; nothing mocked."""

from __future__ import annotations

import os

import pytest

from gdsdiag.platform.fsroot import FsRoot

DEV = "/sys/devices/pci0000:00/0000:00:02.0"


@pytest.fixture
def tree(tmp_path):
    d = tmp_path / DEV.lstrip("/")
    d.mkdir(parents=True)
    (d / "class").write_text("0x030200\n")
    (d / "vendor").write_text("0x10de\n")
    (d / "numa_node").write_text("garbage\n")
    (d / "config").write_bytes(bytes(range(256)) * 16)
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc" / "device").write_text("0x2335\n")
    os.symlink("/etc/device", d / "device")  # absolute: must mean the tree's /etc/device, not the host's
    os.symlink("../../../../../../../../etc/hostname", d / "subsystem_vendor")  # climbs out: stays in the tree
    os.mkfifo(d / "subsystem_device")
    (d / "revision").mkdir()
    os.symlink("../../../bus/pci/drivers/nvidia", d / "driver")
    links = tmp_path / "sys/bus/pci/devices"
    links.mkdir(parents=True)
    os.symlink("../../../devices/pci0000:00/0000:00:02.0", links / "0000:00:02.0")
    return str(tmp_path)


NAMES = ["class", "vendor", "device", "numa_node", "subsystem_vendor", "subsystem_device", "revision", "absent"]


def test_attrdir_reads_as_the_fsroot_does(tree):
    direct, via = FsRoot(tree), FsRoot(tree)
    with via.attrs(DEV) as d:
        assert d.fd is not None  # the descriptor path is what is under test
        for name in NAMES:
            assert d.read_checked(name, FsRoot.MAX_FILE) == direct.read_checked(f"{DEV}/{name}", FsRoot.MAX_FILE), name
            assert d.read_text(name) == direct.read_text(f"{DEV}/{name}"), name
            assert d.read_int(name, 16) == direct.read_int(f"{DEV}/{name}", 16), name
        assert d.read_bytes("config", limit=4096) == direct.read_bytes(f"{DEV}/config", limit=4096)
        assert d.read_bytes("config", limit=64) == direct.read_bytes(f"{DEV}/config", limit=64)
        assert d.readlink_name("driver") == direct.readlink_name(f"{DEV}/driver") == "nvidia"
        assert d.readlink_name("iommu_group") is None
    assert via.problems == direct.problems  # the same "not an integer" lines, in the same order
    assert any("numa_node: not an integer" in p for p in via.problems)


def test_hostile_entries_are_answered_inside_the_tree(tree):
    with FsRoot(tree).attrs(DEV) as d:
        assert d.read_text("device") == "0x2335"  # the tree's /etc/device
        assert d.read_checked("subsystem_vendor", 1 << 20) == (None, "No such file or directory")
        data, why = d.read_checked("subsystem_device", 1 << 20)
        assert data is None and "FIFO" in why
        data, why = d.read_checked("revision", 1 << 20)
        assert data is None and "directory" in why


def test_link_attrs_finds_the_canonical_path(tree):
    fs = FsRoot(tree)
    real, d = fs.link_attrs("/sys/bus/pci/devices/0000:00:02.0")
    with d:
        assert real == fs.follow_link("/sys/bus/pci/devices/0000:00:02.0") == DEV
        assert d.fd is not None and d.read_text("class") == "0x030200"


def test_attrdir_without_a_directory_goes_through_the_fsroot(tree):
    fs = FsRoot(tree)
    with fs.attrs("/sys/devices/nothing-here") as d:
        assert d.fd is None
        assert d.read_text("class") is None and d.readlink_name("driver") is None
