"""The command line as users run it: exit codes, one-line errors, JSON schema, lazy imports."""

import json
import os
import subprocess
import sys

import pytest
from conftest import FIXTURES, GDSDIAG, corpus

H200 = os.path.join(FIXTURES, "snapshots", "h200-vm-2026-11-29.tar.gz")


def run(*args, **kw):
    return subprocess.run([*GDSDIAG, *args], capture_output=True, text=True, **kw)


def test_help_and_topology_do_not_import_heavy_modules():
    # at exit: the command ends its process itself once the exit handlers ran (_common.exit_leaving_heap)
    code = (
        "import atexit, sys, runpy; sys.argv=['gdsdiag','topology','--json']\n"
        "heavy = lambda: [m for m in ('cupy','kvikio','bcc','cffi','numpy') if m in sys.modules]\n"
        "atexit.register(lambda: sys.stderr.write('HEAVY=%s' % heavy()))\n"
        "runpy.run_module('gdsdiag', run_name='__main__')\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert "HEAVY=[]" in r.stderr
    assert run("--help").returncode == 0


def test_topology_json_from_gpu_machine_snapshot():
    r = run("topology", "--from", H200, "--json")
    doc = json.loads(r.stdout)
    assert doc["schema"] == "gdsdiag.topology/1"
    assert doc["source"] == H200
    (pair,) = doc["pairs"]
    assert pair["a_label"] == "GPU0" and pair["b_label"] == "eth0"
    assert pair["nvidia_smi"] == "PHB" and pair["p2pdma_map"] == "NOT_SUPPORTED" and pair["p2p"] == "NO_P2P"
    # the only pair P2PDMA refuses is GPU↔virtio NIC, which does no peer DMA at all: no warning
    # (issue 22), so nothing is left above info
    assert r.returncode == 0
    assert "p2pdma-not-supported" not in {f["id"] for f in doc["findings"]}


def test_topology_text_tree_and_matrix():
    r = run("topology", "--from", H200)
    assert "GPU0" in r.stdout and "NVIDIA H200" in r.stdout and "Gen5 x16" in r.stdout
    assert "PHB!" in r.stdout and "! = no P2P" in r.stdout


def test_cross_check_with_saved_nvidia_smi():
    r = run(
        "topology",
        "--lspci",
        corpus("lspci-tree", "asus-esc8000a-e12-highpoint-nvme-switch.txt"),
        "--numa",
        "0000:00-7f=0,0000:80-ff=1",
        "--nvidia-smi",
        corpus("nvidia-smi-topo", "asus-esc8000a-e12-4xrtx6000ada-cx7.txt"),
        "--json",
    )
    doc = json.loads(r.stdout)
    assert len(doc["cross_check"]) == 28 and all(c["agree"] for c in doc["cross_check"])


@pytest.mark.parametrize(
    "args,needle,code",
    [
        # a path that names nothing (or not the directory --root needs) is a usage error, exit 4;
        # an input that is there but is not what it should be, exit 3 (issue 23: one rule for all)
        (("topology", "--from", "/nonexistent.tar.gz"), "snapshot /nonexistent.tar.gz not found", 4),
        (("topology", "--lspci", "/nonexistent.txt"), "cannot read /nonexistent.txt", 4),
        (("topology", "--from", __file__), "is not a readable tar archive", 3),
        (("topology", "--nvidia-smi", __file__, "--from", H200), "no 'nvidia-smi topo -m' matrix found", 3),
        # a bad root is an error, never an empty report with exit 0 (issue 22)
        (("topology", "--root", "/nonexistent"), "--root /nonexistent: no such directory", 4),
        (("check", "--root", "/nonexistent"), "--root /nonexistent: no such directory", 4),
        (("check", "--root", __file__), "not a directory", 4),
        (("topology", "--root", os.path.dirname(__file__)), "holds neither sys/ nor proc/", 3),
        (("snapshot", "-o", "/tmp/gdsdiag-never-written.tar.gz", "--root", "/nonexistent"), "no such directory", 4),
    ],
)
def test_bad_input_one_line(args, needle, code):
    r = run(*args)
    assert r.returncode == code
    assert needle in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_usage_error_exit_4():
    r = run("topology", "--no-such-flag")
    assert r.returncode == 4 and "no such option" in r.stderr.lower()


def test_snapshot_refuses_to_overwrite(tmp_path):
    f = tmp_path / "keep.tar.gz"
    f.write_bytes(b"user data")
    r = run("snapshot", "-o", str(f))
    assert r.returncode == 3 and "exists" in r.stderr
    assert f.read_bytes() == b"user data"


def test_a_root_with_no_pci_device_is_exit_3(tmp_path):
    # sys/ and proc/ but nothing in them: not a node topology can describe (issue 22: it used to
    # print 'IOMMU: off', 'no findings' and exit 0)
    (tmp_path / "sys").mkdir()
    (tmp_path / "proc").mkdir()
    r = run("topology", "--root", str(tmp_path))
    assert r.returncode == 3 and "no PCI devices under its sys/bus/pci/devices" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and not r.stdout
