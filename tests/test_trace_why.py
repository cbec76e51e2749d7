"""Every file of a trace says why (issue 45): the decisive fact first, the chain, each fact with its
source, and the one change that would move the bytes. The node's side comes from `gdsdiag check`'s
own rules (check/facts.py), here read from the committed snapshot of the project's GPU machine (one
H200 in a VM: no nvidia-fs, no PCI P2PDMA, ext4 on a virtio disk)."""

import dataclasses
import os

import pytest
from conftest import FIXTURES

from gdsdiag.check.context import CheckContext
from gdsdiag.check.facts import NodeFacts
from gdsdiag.platform.roots import open_snapshot
from gdsdiag.trace.model.classify import classify
from gdsdiag.trace.model.events import Event
from gdsdiag.trace.model.why import file_why

H200 = os.path.join(FIXTURES, "snapshots", "h200-vm-2026-11-29.tar.gz")


@pytest.fixture(scope="module")
def h200():
    return NodeFacts.collect(CheckContext(open_snapshot(H200), env={}))


def _row(routes, via=("read",), how=(), hit=None, path="/var/tmp/model.safetensors"):
    return {"path": path, "routes": routes, "via": list(via), "how": list(how), "page_cache_hit": hit, "why": ""}


def test_compat_names_nvidia_fs_absent_then_p2pdma_off_then_the_file_system(h200):
    """The GPU machine's cuFile answer: the chain nvidia-fs absent + P2PDMA off + ext4 on virtio."""
    facts, fix = file_why(_row({"COMPAT": 1 << 29}, via=("cuFile",)), h200, None)
    assert [(f.fact, f.role) for f in facts[:3]] == [
        ("nvidia-fs", "decisive"),
        ("PCI P2PDMA", "contributing"),
        ("file system", "contributing"),
    ]
    assert facts[0].value == "nvidia-fs is not loaded" and facts[0].source == "/proc/modules"
    assert "ext4" in facts[2].value and "virtio" in facts[2].value
    assert any("not an NVMe namespace" in f.value for f in facts)
    assert "nvidia-fs" in fix and "move the file to a mount GDS serves" in fix


def test_a_loaders_silent_fallback_is_named_as_such(h200):
    """libcufile loaded, cuFileDriverOpen called, then the bytes read with pread: the decisive fact
    is the loader's own fallback, and the fix says no node change would make cuFile P2P here."""
    unused = (
        "libcufile loaded, no cuFile I/O: loader/7 loaded libcufile, opened the driver, and read these bytes itself"
    )
    facts, fix = file_why(_row({"DRAM_BOUNCE": 1 << 28}, how=("staged",)), h200, unused)
    assert (facts[0].fact, facts[0].role, facts[0].value) == ("libcufile", "decisive", unused)
    assert fix.startswith("none on this node: cuFile would run in compatibility mode here too")


def test_a_libcufile_only_mapped_does_not_lead_an_mmap_loaders_why(h200):
    """safetensors' load_file on the H100 (held-out set 1): the process mapped libcufile (a
    framework's import links it) and never called it; the loader's own mmap path is the reason."""
    unused = "libcufile loaded, no cuFile I/O: python3/3855 loaded libcufile, and read these bytes itself"
    facts, _ = file_why(_row({"DRAM_BOUNCE": 1 << 28}, via=("mmap",), hit=0.0), h200, unused, None, False)
    assert facts[0].role == "decisive" and "mapped it (mmap)" in facts[0].value
    assert ("libcufile", "contributing") in [(f.fact, f.role) for f in facts]


def test_an_mmap_loaders_bounce_names_the_mechanism_and_the_page_cache(h200):
    facts, _ = file_why(_row({"DRAM_BOUNCE": 1 << 28}, via=("mmap",), hit=0.75), h200, None)
    assert facts[0].role == "decisive" and "mapped it (mmap)" in facts[0].value
    assert ("page cache", "75 % of its mapped bytes were cached") in [(f.fact, f.value) for f in facts]


def test_force_compat_mode_in_cufile_json_is_named_with_its_file(h200):
    forced = dataclasses.replace(h200, force_compat=True, cufile_json="/etc/cufile.json")
    facts, fix = file_why(_row({"COMPAT": 1 << 20}, via=("cuFile",)), forced, None)
    assert (facts[0].fact, facts[0].value, facts[0].source, facts[0].role) == (
        "cufile.json force_compat_mode",
        "true",
        "/etc/cufile.json",
        "decisive",
    )
    assert fix.startswith("set properties.force_compat_mode to false in /etc/cufile.json")


def test_host_and_p2p_need_no_fix_and_a_replay_says_the_node_is_not_known():
    assert file_why(_row({"HOST": 10}), None, None)[1] == "none needed"
    assert file_why(_row({"NVFS": 10}, via=("cuFile",)), None, None)[1] == "none needed"
    facts, fix = file_why(_row({"DRAM_BOUNCE": 10}), None, None)
    assert any("not known (a replay" in f.value for f in facts) and fix.startswith("not known here")


def test_the_summary_carries_the_chain_and_the_fix_of_each_file():
    """A replayed stream (no node): every file row has why_chain and fix; a libcufile the process
    opened the driver of and never read through is the decisive fact of its bounced file."""
    e = [
        Event(1000, 100, 100, "api_enter", "cuFileDriverOpen", [], "ld", None),
        Event(2000, 100, 100, "api_exit", "cuFileDriverOpen", [5009], "ld", None),
        Event(3000, 100, 100, "open", "openat", [5], "ld", "/data/w.bin"),
        Event(4000, 100, 100, "sys_exit", "pread64", [5, 0x7F1000000000, 1 << 22, 0, 0, 1 << 22, 1000], "ld", None),
        Event(5000, 100, 100, "api_enter", "cuMemcpy", [0x7E0000000000, 0x7F1000000000, 1 << 22, 1], "ld", None),
    ]
    from gdsdiag.trace.model.classify import Classifier

    c = Classifier()
    for x in e:
        c.feed(x)
    c.flush()
    (f,) = c.file_summary()
    assert f["why_chain"][0]["role"] == "decisive" and f["why_chain"][0]["fact"] == "libcufile"
    assert "its cuFileDriverOpen failed (5009 CU_FILE_DEVICE_NOT_SUPPORTED)" in f["why_chain"][0]["value"]
    assert f["fix"].startswith("not known here")
    assert classify(e)[0]["route"] == "DRAM_BOUNCE"


def test_where_the_node_has_a_direct_route_the_files_mount_decides(h200):
    """A node whose check found a direct route (routes as `decide` would give with nvidia-fs) and a
    file on ext4 over virtio: its mount is the decisive fact, the file system next, and the fix moves
    the file."""
    from gdsdiag.routes import Route

    direct = dataclasses.replace(h200, routes=[Route.NVFS, Route.COMPAT])
    facts, fix = file_why(_row({"COMPAT": 1 << 20}, via=("cuFile",)), direct, None)
    assert [(f.fact, f.role) for f in facts[:2]] == [("its mount", "decisive"), ("file system", "contributing")]
    assert "not an NVMe namespace" in facts[0].value and fix.startswith("move the file to a mount GDS serves")


def test_a_fault_bound_mmap_loads_major_faults_are_in_its_why_and_its_how_line(h200):
    """The figures as the live trace gave them on this VM (tests/test_trace_majflt_live.py): a mapped
    file's major faults are a contributing fact of its bounce's why and part of its how line; a file
    whose faults were not counted (null) says nothing of them."""
    from gdsdiag.render.trace_out import file_why_lines

    row = {**_row({"DRAM_BOUNCE": 64 << 20}, via=("mmap",), hit=0.0), "major_faults": 12, "major_faults_per_gib": 192.0}
    facts, fix = file_why(row, h200, None)
    assert ("major page faults", "12 (192 per GiB mapped)", "perf software event page-faults-major") in [
        (f.fact, f.value, f.source) for f in facts
    ]
    row.update(mechanism="mmap page faults", gbps=0.65, why_chain=[f.to_json() for f in facts], fix=fix)
    assert file_why_lines(row)[0] == "how: mmap page faults, 0.65 GB/s over its I/O, 12 major faults (192 a GiB mapped)"
    row.update(major_faults=None, major_faults_per_gib=None)
    assert not any(f.fact == "major page faults" for f in file_why(row, h200, None)[0])
    assert file_why_lines(row)[0] == "how: mmap page faults, 0.65 GB/s over its I/O"


def test_a_node_check_that_has_not_answered_in_time_is_named_with_the_wait(monkeypatch):
    """NodeFactsReader waits GDSDIAG_NODE_FACTS_WAIT_S (0.5 s by default) for its `gdsdiag check`
    child after the trace: a child not done by then is killed and the why names the wait it missed;
    a value that is not a number is the default, never a traceback. (Not live: the child is the real
    `gdsdiag check --json`, which needs no root; with a wait of 0 it cannot have answered.)"""
    from gdsdiag.trace.session import NodeFactsReader

    monkeypatch.setenv("GDSDIAG_NODE_FACTS_WAIT_S", "not-a-number")
    monkeypatch.setenv("GDSDIAG_NODE_FACTS", "0")  # (parse only: no child for this one)
    assert NodeFactsReader().wait_s == NodeFactsReader.WAIT_S
    monkeypatch.setenv("GDSDIAG_NODE_FACTS", "1")
    monkeypatch.setenv("GDSDIAG_NODE_FACTS_WAIT_S", "0")
    reader = NodeFactsReader()
    assert reader.wait_s == 0.0
    assert reader.result() is None
    assert "had not answered 0 s after the trace ended" in reader.missing.text, reader.missing
