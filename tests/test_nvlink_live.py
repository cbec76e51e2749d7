"""NVLink on a live node, against nvidia-smi on the same node. Needs NVIDIA GPUs, nvidia-ml-py and
nvidia-smi (the GPU machine: two H200 joined by NV18); skipped elsewhere with the reason."""

import shutil
import subprocess

import pytest

from gdsdiag.importers import nvidia_smi
from gdsdiag.topology.cross_check import cross_check
from gdsdiag.topology.load import from_root
from gdsdiag.topology.model import Role
from gdsdiag.topology.pairs import P2pVerdict, analyse_all

pynvml = pytest.importorskip("pynvml", reason="nvidia-ml-py not installed")
if shutil.which("nvidia-smi") is None:
    pytest.skip("no nvidia-smi on this machine", allow_module_level=True)
try:
    pynvml.nvmlInit()
    pynvml.nvmlShutdown()
except Exception as e:  # no driver / no GPU
    pytest.skip(f"NVML unavailable: {e}", allow_module_level=True)


def test_nvml_nvlink_matches_nvidia_smi_cells():
    topo = from_root("/")
    text = subprocess.run(["nvidia-smi", "topo", "-m"], capture_output=True, text=True, timeout=60).stdout
    m = nvidia_smi.parse(text)
    pairs = analyse_all(topo)
    res = cross_check(topo, pairs, text)
    gg = [r for r in res if r["row"].startswith("GPU") and r["column"].startswith("GPU")]
    if len(topo.by_role(Role.GPU)) < 2:
        pytest.skip("one GPU: no GPU pair")
    assert topo.nvlink is not None and topo.nvlink.source == "nvml", topo.nvlink_note
    for r in gg:
        # every GPU cell is compared (NVML is an independent source) and agrees
        assert r["agree"] is True, r
    nv_cells = {k: v for k, v in m.cells.items() if v.startswith("NV")}
    for p in pairs:
        if p.b.role == Role.GPU and (p.a.label, p.b.label) in nv_cells:
            assert p.label == nv_cells[(p.a.label, p.b.label)]
            assert p.verdict == P2pVerdict.NVLINK and p.nvlink.p2p_ok is not False
