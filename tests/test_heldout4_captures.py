"""The fourth capture round (tests/fixtures/corpus/heldout4/, sources in each file's header and in
SOURCES.md; issue 47 goal 3): every line of every capture has the reading the test states — the
message it is explained by (with how many lines), 'unknown' at a named line number, or blank/structural —
and the topo matrix every cell. Captures read wrong before this round say what the tool said then."""

import json
import os

import pytest
from conftest import CORPUS
from heldout_common import run, smi_cross_check

HELDOUT4 = os.path.join(CORPUS, "heldout4")

# file -> (kind, lines, explained, unknown, skipped, {message id: lines}, unknown line numbers, exit code)
READINGS = {
    "gdscheck/mltf-vu-tutorial-gds1.11-nvfs2.25-nvme-supported-prompt-excerpt.txt": (
        "gdscheck",
        33,
        21,
        0,
        12,
        {
            "gdscheck-command": 1,
            "startup-version": 3,
            "gdscheck-driver-row": 11,
            "gdscheck-rdma-rows": 4,
            "gdscheck-config-value": 2,
        },
        [],
        0,
    ),
    "gdscheck/nvidia-gds-support-for-nvme-gds1.12-nvme-p2pdma-supported-prompt-excerpt.txt": (
        "gdscheck",
        17,
        7,
        0,
        10,
        {
            "gdscheck-command": 1,
            "startup-version": 3,
            "gdscheck-p2pdma-row": 1,
            "gdscheck-nvme-via-p2pdma": 1,
            "gdscheck-driver-row": 1,
        },
        [],
        0,
    ),
    "dmesg/gds-nvidia-fs26-insmod-initializing-registered-major-510.txt": (
        "dmesg",
        5,
        2,
        0,
        3,
        {"dmesg-nvfs-info": 2},
        [],
        0,
    ),
    "dmesg/nvidia-tsg-installing-gds-journalctl-iommu-translated-placeholders.txt": (
        "dmesg",
        9,
        6,
        0,
        3,
        {
            "dmesg-iommu-default-translated": 1,
            "dmesg-iommu-tlb-policy": 1,
            "dmesg-amd-vi-perf-counters": 1,
            "dmesg-iommu-group-add": 3,
        },
        [],
        1,
    ),
    "cufile-log/magnumio20-userspace-fs-handle-invalid-file-descriptor.txt": (
        "cufile-log",
        4,
        1,
        0,
        3,
        {"handle-invalid-fd": 1},
        [],
        2,
    ),
    "cufile-log/gds-nvidia-fs78-debug-udev-block-device-nvme0n1p4-excerpt.txt": (
        "cufile-log",
        13,
        10,
        0,
        3,
        {"cufile-udev-attributes": 9, "cufile-block-device-supported": 1},
        [],
        0,
    ),
    "gdsio/gds-nvidia-fs4-gdsio-verify-1g-ext4-nvme-prompt-excerpt.txt": (
        "gdsio",
        6,
        3,
        0,
        3,
        {"gdsio-command": 1, "gdsio-verify-params": 2},
        [],
        0,
    ),
}


def _doc(rel):
    r = run("explain", "--json", os.path.join(HELDOUT4, rel))
    return r.returncode, json.loads(r.stdout)


@pytest.mark.parametrize("rel", sorted(READINGS))
def test_every_line_has_its_reading(rel):
    kind, lines, explained, unknown, skipped, ids, unknown_lines, rc = READINGS[rel]
    code, d = _doc(rel)
    (f,) = d["files"]
    assert (f["kind"], f["lines"], f["explained"], f["unknown"], f["skipped"]) == (
        kind,
        lines,
        explained,
        unknown,
        skipped,
    )
    assert explained + unknown + skipped == lines  # no line without a reading
    assert {m["id"]: m["count"] for m in d["messages"]} == ids
    assert [u["line"] for u in d["unknown"]] == unknown_lines
    assert code == rc == d["exit_code"]


def test_nvme_row_beside_a_supported_p2pdma_row_is_no_warning():
    # NVIDIA's P2PDMA guide: 'NVMe : Unsupported' is the nvidia-fs route; 'NVMe P2PDMA : Supported' is
    # the GDS route NVMe has. Before: WARN 'NVMe cannot use GDS on this node'.
    _, d = _doc("gdscheck/nvidia-gds-support-for-nvme-gds1.12-nvme-p2pdma-supported-prompt-excerpt.txt")
    (m,) = [m for m in d["messages"] if m["message"].startswith("NVMe ") and "P2PDMA" not in m["message"]]
    assert m["id"] == "gdscheck-nvme-via-p2pdma" and m["severity"] == "info" and m["first"]["line"] == 16
    assert d["counts"]["warn"] == 0


def test_nvme_row_alone_still_warns(tmp_path):
    # the same row without the P2PDMA row (round 1's gds-nvidia-fs#4 paste) keeps its warning
    p = tmp_path / "rows.txt"
    p.write_text(" NVMe               : Unsupported\n NVMeOF             : Unsupported\n")
    d = json.loads(run("explain", "--json", str(p)).stdout)
    assert [m["id"] for m in d["messages"] if m["severity"] == "warn"] == ["gdscheck-nvme-unsupported"]


def test_iommu_lines_are_kernel_lines_and_translated_warns():
    _, d = _doc("dmesg/nvidia-tsg-installing-gds-journalctl-iommu-translated-placeholders.txt")
    (w,) = [m for m in d["messages"] if m["severity"] == "warn"]
    assert w["id"] == "dmesg-iommu-default-translated" and w["first"]["line"] == 4
    assert "amd_iommu=off" in w["fix"] and "installing-gpudirect-storage" in w["sources"][0]


def test_invalid_fd_that_is_no_fd_names_the_handle_type():
    _, d = _doc("cufile-log/magnumio20-userspace-fs-handle-invalid-file-descriptor.txt")
    (m,) = d["messages"]
    assert "CU_FILE_HANDLE_TYPE_USERSPACE_FS" in m["cause"] and m["first"]["line"] == 4
    assert "https://github.com/NVIDIA/MagnumIO/issues/20" in m["sources"]


def test_block_device_lines_are_libcufiles_own_strings():
    # each message's fixed text is in libcufile 1.20.0.107 (its strings, committed with the .so's sha256)
    strings = open(
        os.path.join(os.path.dirname(CORPUS), "libcufile-strings", "libcufile-1.20.0.107-block-device-checks.txt")
    ).read()
    for s in (
        "device pci path string :",
        "sysfs attribute found",
        "drive integrity check capability not present. Ok",
        "vol pciGroup :",
        "block device supported by cufile, bdev :",
        "added volume attributes for device:",
    ):
        assert f"\n{s}\n" in strings, s


def test_topo_matrix_every_cell():
    d, cells = smi_cross_check(os.path.join(HELDOUT4, "nvidia-smi-topo", "club3090-1229-2x5090-phb-tabs-legend.txt"))
    assert cells == {("GPU0", "GPU1"): "PHB", ("GPU1", "GPU0"): "PHB"}
    assert d["cross_check_input"]["unread"] == [] and d["cross_check_input"]["split_glued"] == []
    assert "it lists 2 GPUs, this node has 1" in d["cross_check_input"]["other_node"]


def test_every_capture_is_read_and_listed():
    on_disk = sorted(
        os.path.join(k, f)
        for k in os.listdir(HELDOUT4)
        if os.path.isdir(os.path.join(HELDOUT4, k))
        for f in os.listdir(os.path.join(HELDOUT4, k))
    )
    assert len(on_disk) >= 8
    assert sorted([*READINGS, "nvidia-smi-topo/club3090-1229-2x5090-phb-tabs-legend.txt"]) == on_disk
    listed = open(os.path.join(HELDOUT4, "SOURCES.md")).read()
    for rel in on_disk:
        assert f"`{rel}`" in listed, rel
        head = open(os.path.join(HELDOUT4, rel)).read().splitlines()[:3]
        assert head[0].startswith("# source: ") and head[1].startswith("# machine: ") and head[2].startswith("# date: ")
