"""The ceilings a node shows on a file's path without measuring (platform/ceiling.py, issue 45), read
from real trees, and the GB/s of a traced file held against them in its row, its why and the text.

Sources, all committed or live:
- tests/fixtures/snapshots/h200-vm-2026-11-29.tar.gz: the project's GPU machine (one H200 in a VM,
  current_link_speed "32.0 GT/s PCIe" x16 on 0000:00:06.0; /var/tmp on ext4 over the virtio disk vda,
  whose PCI function shows no PCIe link);
- tests/fixtures/snapshots/h200x2-vm-snapshot-2026-11-30.tar.gz: two H200s, both Gen5 x16;
- check_fixtures.set_link: a link trained below its maximum, as the kernel shows it (its docstring);
- corpus/hwloc-sysfs/32em64t-2n8c+dax+nvme+mic+dimms.tar.bz2 (hwloc's test tree, see its README):
  a real NVMe namespace's queue directory (nvme0n1: max_sectors_kb 128, nr_requests 128, rotational 0);
- this machine, read live: a VM's virtio disk (the ceiling is unknown, and says why).
"""

from __future__ import annotations

import os

import check_fixtures as cf
import pytest
from conftest import FIXTURES

from gdsdiag.check.context import CheckContext
from gdsdiag.check.facts import NodeFacts
from gdsdiag.platform import ceiling, mounts
from gdsdiag.platform.fsroot import FsRoot
from gdsdiag.platform.roots import node_root, open_snapshot
from gdsdiag.render.trace_out import file_why_lines
from gdsdiag.trace.model.why import file_why

SNAP = os.path.join(FIXTURES, "snapshots")
H200 = os.path.join(SNAP, "h200-vm-2026-11-29.tar.gz")
H200X2 = os.path.join(SNAP, "h200x2-vm-snapshot-2026-11-30.tar.gz")
NVME_TREE = os.path.join(FIXTURES, "corpus", "hwloc-sysfs", "32em64t-2n8c+dax+nvme+mic+dimms.tar.bz2")
GEN5_X16 = round(32.0 * 128 / 130 / 8 * 16, 2)  # 63.02 GB/s: 128b/130b at 32 GT/s, 16 lanes


def _unpack(archive: str, dest: str) -> str:
    return cf.unpack(archive, dest)


def test_the_gpu_machines_gpu_link_is_its_ceiling_and_its_virtio_disk_is_unknown():
    c = ceiling.for_path(open_snapshot(H200), "/var/tmp")
    disk, gpu = c.ceilings
    assert (gpu.whose, gpu.gbps, gpu.what, gpu.at) == ("GPU", GEN5_X16, "PCIe Gen5 x16 link", "0000:00:06.0")
    assert gpu.source == "/sys/bus/pci/devices/0000:00:06.0/current_link_speed"
    assert disk.gbps is None and disk.what.startswith("unknown: vda is virtio, 0000:00:01.0 shows no PCIe link")
    assert c.lowest is gpu
    assert c.against(2.1) == (
        "2.10 GB/s of the GPU's 63.02 GB/s PCIe Gen5 x16 link (0000:00:06.0); not known: disk: vda is virtio, "
        "0000:00:01.0 shows no PCIe link (no current_link_speed)"
    )
    doc = c.to_json()
    assert doc["gbps"] == GEN5_X16 and doc["limit"] == "the GPU's 63.02 GB/s PCIe Gen5 x16 link (0000:00:06.0)"


def test_host_io_has_no_gpu_side_and_then_nothing_is_known_on_a_virtio_disk():
    c = ceiling.for_path(open_snapshot(H200), "/var/tmp", gpus=None)
    assert [x.whose for x in c.ceilings] == ["disk"] and c.lowest is None
    assert c.against(1.0).startswith("1.00 GB/s; ceiling unknown (disk: vda is virtio")
    assert c.to_json()["gbps"] is None and c.to_json()["limit"] == "unknown"


def test_several_gpus_with_one_link_kind_give_it_and_different_links_are_unknown(tmp_path):
    gpu = ceiling.gpu_ceiling(open_snapshot(H200X2))
    assert (gpu.gbps, gpu.what, gpu.at) == (GEN5_X16, "PCIe Gen5 x16 link", "each of 2 GPUs")
    root = _unpack(H200X2, str(tmp_path / "x2"))
    gpus = ceiling._gpus(FsRoot(root))
    assert len(gpus) == 2
    cf.set_link(root, gpus[1], speed_gts=16.0, width=8)  # the second trained at Gen4 x8
    with node_root(root) as fs:
        got = ceiling.gpu_ceiling(fs)
        assert got.gbps is None and "2 GPUs with different links" in got.what
        one = ceiling.gpu_ceiling(fs, gpus[1])
        assert (one.gbps, one.what) == (round(16.0 * 128 / 130 / 8 * 8, 2), "PCIe Gen4 x8 link")


def test_a_downtrained_gpu_link_lowers_the_ceiling(tmp_path):
    root = cf.unpack_h200(str(tmp_path / "t"))
    cf.set_link(root, "0000:00:06.0", speed_gts=2.5, width=1)  # Gen1 x1: 8b/10b
    with node_root(root) as fs:
        c = ceiling.for_path(fs, "/var/tmp")
    assert c.lowest is not None and (c.lowest.gbps, c.lowest.what) == (0.25, "PCIe Gen1 x1 link")


def test_an_nvme_namespaces_queue_limits_are_read_and_a_tree_without_its_link_says_unknown(tmp_path):
    fs = FsRoot(os.path.join(_unpack(NVME_TREE, str(tmp_path)), "32em64t-2n8c+1mic"))
    assert ceiling.queue_limits(fs, "nvme0n1") == {
        "max_sectors_kb": 128,
        "max_hw_sectors_kb": 128,
        "nr_requests": 128,
        "read_ahead_kb": 128,
        "rotational": 0,
    }
    # (hwloc kept 64 bytes of its config space and no current_link_* files: the link is not known)
    link = ceiling.link_ceiling(fs, "0000:00:02.0", "disk")
    assert link.gbps is None and link.what == "unknown: 0000:00:02.0 shows no PCIe link (no current_link_speed)"


def test_this_machines_disk_is_read_live():
    fs = FsRoot("/")
    m = mounts.mount_for(os.path.realpath("/var/tmp"), mounts.read_mounts(fs))
    chain = mounts.block_chain(fs, m.dev) if m is not None else None
    if chain is None or any(leaf.kind != "virtio" for leaf in chain.leaves()):
        pytest.skip("/var/tmp is not on a virtio disk here")
    c = ceiling.for_path(fs, os.path.realpath("/var/tmp"), gpus=None)
    (disk,) = c.ceilings
    assert disk.gbps is None and " is virtio, " in disk.what
    (name,) = [leaf.name for leaf in chain.leaves()]
    assert c.queue[name]["nr_requests"] == int(open(f"/sys/class/block/{name}/queue/nr_requests").read())


@pytest.fixture(scope="module")
def h200():
    return NodeFacts.collect(CheckContext(open_snapshot(H200), env={}))


def test_a_traced_files_rate_stands_against_its_ceiling_in_the_why_and_the_text(h200):
    c = h200.ceilings("/var/tmp/model.safetensors", True)
    assert c is h200.ceilings("/var/tmp/other.bin", True)  # (read once per mount)
    row = {
        "path": "/var/tmp/model.safetensors",
        "routes": {"DRAM_BOUNCE": 1 << 28},
        "via": ["mmap"],
        "how": [],
        "page_cache_hit": 0.0,
        "why": "",
        "mechanism": "mmap page faults",
        "gbps": 2.1,
        "ceiling": c.to_json(),
        "against_ceiling": c.against(2.1),
    }
    facts, _ = file_why(row, h200, None)
    (f,) = [f for f in facts if f.fact == "GB/s against the path's ceiling"]
    assert f.value.startswith("2.10 GB/s of the GPU's 63.02 GB/s PCIe Gen5 x16 link (0000:00:06.0)")
    assert f.source == "/sys/bus/pci/devices/0000:00:06.0/current_link_speed" and f.role == "contributing"
    row["why_chain"], row["fix"] = [x.to_json() for x in facts], "…"
    lines = file_why_lines(row)
    assert lines[1] == "ceiling: " + row["against_ceiling"]
    # a replay (no node): no ceiling, nothing said of one
    assert not any(
        f.fact.startswith("GB/s against")
        for f in file_why({**row, "ceiling": None, "against_ceiling": None}, None, None)[0]
    )


def test_a_measured_pinned_copy_below_the_links_is_the_ceiling():
    """sweep's ceilings.pinned_copy (h2d), where a caller measured one: the narrowest known wins."""
    c = ceiling.for_path(open_snapshot(H200), "/var/tmp", pinned_copy_gbps=24.5)
    assert c.lowest is not None and (c.lowest.whose, c.lowest.gbps) == ("pinned copy", 24.5)
    assert c.against(2.1).startswith("2.10 GB/s of the pinned copy's 24.50 GB/s pinned host-to-GPU copy, measured")
    assert ceiling.for_path(open_snapshot(H200), "/var/tmp", gpus=None, pinned_copy_gbps=24.5).lowest is None


def test_a_link_the_kernel_could_not_read_is_unknown_and_says_what_it_read(tmp_path):
    """A link that did not train: the kernel prints 'Unknown' (pci-sysfs.c: PCI_SPEED_UNKNOWN) and
    width 0; the ceiling says so rather than compute one."""
    root = cf.unpack_h200(str(tmp_path / "t"))
    dev = os.path.realpath(os.path.join(root, "sys/bus/pci/devices/0000:00:06.0"))
    for name, text in (("current_link_speed", "Unknown\n"), ("current_link_width", "0\n")):
        with open(os.path.join(dev, name), "w") as f:
            f.write(text)
    with node_root(root) as fs:
        got = ceiling.link_ceiling(fs, "0000:00:06.0", "GPU")
    assert got.gbps is None and got.what == "unknown: 0000:00:06.0's link reads 'Unknown' x0"


def test_the_scale_out_views_ceiling_is_the_nodes_gpu_link_or_nothing(tmp_path):
    """--interval's pod rows carry the node's GPU link (platform/ceiling.node_gpu_link) as their
    ceiling: the GPU machine's tree gives its H200's Gen5 x16 link; this machine (no NVIDIA GPU) an
    unknown, and the pod row then has no ceiling rather than a guess."""
    from gdsdiag.platform.containers import Identity
    from gdsdiag.trace.model.interval import Intervals

    gpu = ceiling.node_gpu_link(_unpack(H200, str(tmp_path / "h200")))
    assert gpu == (GEN5_X16, "the GPU's 63.02 GB/s PCIe Gen5 x16 link (0000:00:06.0)")
    here = ceiling.node_gpu_link("/")
    if not any(os.path.exists(f"/proc/driver/nvidia/gpus/{b}") for b in os.listdir("/sys/bus/pci/devices")):
        assert here[0] is None and here[1].startswith("unknown")
    now = [0.0]
    for known in (gpu, (None, "unknown: no NVIDIA GPU in /sys/bus/pci/devices")):
        reads = []
        iv = Intervals(1.0, clock=lambda: now[0])
        iv.set_ceiling(lambda k=known, r=reads: r.append(k) or k)
        for _ in range(2):
            # (as the live printer does at every interval that is due)
            iv.set_pods({10: Identity("c" * 64, "containerd", "u-a", "vllm-0", "llm", "server")})
            iv.add(
                {
                    "pid": 10,
                    "comm": "p",
                    "path": "/w",
                    "route": "DRAM_BOUNCE",
                    "size": 4 << 20,
                    "latency_ns": 1,
                    "ts": None,
                }
            )
            now[0] += 2.0
            rec = iv.tick()
            assert rec is not None
            (row,) = rec["pods"]
            if known[0] is not None:
                assert (row["ceiling_gbps"], row["ceiling"]) == (GEN5_X16, gpu[1])
            else:
                assert "ceiling_gbps" not in row and "ceiling" not in row
        assert len(reads) == 1  # (read once, at the first pod row)
    quiet = Intervals(1.0, clock=lambda: now[0])  # no pods: the node is never read
    quiet.set_ceiling(lambda: pytest.fail("read without a pod row"))
    quiet.add({"pid": 10, "comm": "p", "path": "/w", "route": "HOST", "size": 4096, "latency_ns": 1, "ts": None})
    now[0] += 2.0
    assert quiet.tick() is not None
