"""The PCI ids come from one file, ``uevent``, where it has them: the kernel prints PCI_CLASS,
PCI_ID and PCI_SUBSYS_ID from the same struct pci_dev fields as the class/vendor/device/
subsystem_* attribute files (pci_uevent() in drivers/pci/pci-driver.c, pci_config_attr() in
drivers/pci/pci-sysfs.c). Checked here against every real capture that has both."""

from __future__ import annotations

import os

import pytest

from gdsdiag.platform import pci_sysfs
from gdsdiag.platform.archroot import ArchiveRoot
from gdsdiag.platform.fsroot import FsRoot
from gdsdiag.platform.roots import open_snapshot
from gdsdiag.topology.load import from_root

SNAPSHOTS = os.path.join(os.path.dirname(__file__), "fixtures", "snapshots")
FILES = ("class", "vendor", "device", "subsystem_vendor", "subsystem_device")


def _functions(fs: FsRoot | ArchiveRoot):
    for name in fs.listdir("/sys/bus/pci/devices"):
        if pci_sysfs.BDF_RE.match(name):
            yield name, fs.resolve(f"/sys/bus/pci/devices/{name}")


def _both(fs):
    """(name, ids from uevent, ids from the five files) for every function that has both."""
    for name, real in _functions(fs):
        ids = pci_sysfs.parse_pci_uevent(fs.read_text(f"{real}/uevent"))
        files = tuple(fs.read_int(f"{real}/{f}", 16) for f in FILES)
        if ids is not None and None not in files:
            yield name, ids, files


def test_uevent_ids_equal_the_attribute_files_in_every_capture(hwloc_trees):
    roots = [hwloc_trees[n] for n in sorted(hwloc_trees)]
    roots += [open_snapshot(os.path.join(SNAPSHOTS, f)) for f in sorted(os.listdir(SNAPSHOTS))]
    compared = 0
    for fs in roots:
        for name, ids, files in _both(fs):
            assert ids == files, f"{fs}: {name}"
            compared += 1
    # 7 hwloc trees and 2 snapshots: 262 functions carry both (none may silently drop out)
    assert compared >= 250


def test_live_node_uevent_equals_the_attribute_files():
    fs = FsRoot("/")
    pairs = list(_both(fs))
    if not pairs:
        pytest.skip("no PCI functions with uevent here")
    for name, ids, files in pairs:
        assert ids == files, name


def test_without_uevent_the_five_files_are_read(hwloc_trees):
    # hwloc's nvidiagpunumanodes tree has no uevent files (a real capture): the ids still come
    # from the attribute files
    fs = hwloc_trees["nvidiagpunumanodes"]
    assert not any(fs.exists(f"{real}/uevent") for _, real in _functions(fs))
    topo = from_root(fs)
    assert topo.devices and all(d.fn.vendor is not None and d.fn.class_code is not None for d in topo.devices.values())


@pytest.mark.parametrize(
    "text",
    [
        None,
        "",
        "DRIVER=nvme\nPCI_CLASS=10802\nPCI_ID=144D:A824\n",  # no PCI_SUBSYS_ID
        "PCI_CLASS=zz\nPCI_ID=144D:A824\nPCI_SUBSYS_ID=144D:A801\n",
        "PCI_CLASS=10802\nPCI_ID=144DA824\nPCI_SUBSYS_ID=144D:A801\n",
        "PCI_CLASS=1000000\nPCI_ID=144D:A824\nPCI_SUBSYS_ID=144D:A801\n",  # wider than 24 bits
        "PCI_CLASS=10802\nPCI_ID=10000:A824\nPCI_SUBSYS_ID=144D:A801\n",
    ],
)
def test_a_uevent_without_all_three_ids_reads_the_files(text):
    assert pci_sysfs.parse_pci_uevent(text) is None


def test_uevent_as_the_kernel_writes_it():
    # /sys/bus/pci/devices/0000:00:00.0/uevent of the dev VM (Linux 6.18)
    text = (
        "PCI_CLASS=60000\nPCI_ID=8086:0D57\nPCI_SUBSYS_ID=0000:0000\nPCI_SLOT_NAME=0000:00:00.0\n"
        "MODALIAS=pci:v00008086d00000D57sv00000000sd00000000bc06sc00i00"
    )
    assert pci_sysfs.parse_pci_uevent(text) == (0x060000, 0x8086, 0x0D57, 0, 0)
