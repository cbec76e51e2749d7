"""The held-out captures (tests/fixtures/corpus/heldout/, sources in each file's header and in
SOURCES.md): real outputs from public threads the parsers were not written against. Each test runs
the installed command on one capture and asserts what the thread says is true (SCORES.md has the
before/after table). The ones that failed before their fix say so.
"""

import json
import os

import pytest
from conftest import CORPUS
from heldout_common import SNAPSHOT, explain_as_written, run, smi_cross_check

from gdsdiag.importers import nvidia_smi

HELDOUT = os.path.join(CORPUS, "heldout")


def heldout(kind, name):
    return os.path.join(HELDOUT, kind, name)


# --- nvidia-smi topo -m: cells and NUMA affinity as the threads show them ---------------------------

SMI_TRUTH = {
    # tabs, 4090 box: the dual-port NIC is PHB to GPU6 only, SYS to the rest; NUMA 0 for GPU0-3, 1 for 4-7
    "go-gpuallocator17-8x4090-tabs-nic-phb-gpu6.txt": (
        {("GPU6", "NIC0"): "PHB", ("GPU6", "NIC1"): "PHB", ("GPU7", "NIC0"): "SYS", ("GPU0", "GPU4"): "SYS"},
        {"GPU3": 0, "GPU4": 1},
        72,
    ),
    # three NICs PIX to GPU0 and to GPU4; CPU affinity written as comma lists
    "deepep-mirror-8gpu-12nic-topo-mp-cpu-list-affinity.txt": (
        {("GPU0", "NIC0"): "PIX", ("GPU0", "NIC2"): "PIX", ("GPU4", "NIC8"): "PIX", ("GPU7", "NIC11"): "PIX"},
        {"GPU0": 0, "GPU7": 1},
        152,
    ),
    # old format: mlx4_0 named in the header, no NUMA Affinity column; excerpt ends after GPU4
    "kubernetes53497-8gpu-mlx4-old-format-excerpt.txt": (
        {("GPU0", "GPU1"): "PIX", ("GPU0", "GPU2"): "PHB", ("GPU0", "mlx4_0"): "PHB", ("GPU4", "mlx4_0"): "SYS"},
        {},
        40,
    ),
    "deepep128-8gpu-10nic-pix-per-gpu-excerpt.txt": (
        {("GPU0", "NIC0"): "PIX", ("GPU5", "NIC5"): "PIX", ("GPU5", "NIC4"): "SYS"},
        {"GPU4": 1},
        102,
    ),
    # uneven header spacing ('NIC12  NIC13'): the columns after it must not shift
    "nccl2157-8gpu-18nic-nv12-pxb-uneven-header-excerpt.txt": (
        {("GPU0", "NIC5"): "PXB", ("GPU0", "NIC8"): "PXB", ("GPU0", "NIC13"): "SYS", ("GPU2", "NIC1"): "PXB"},
        {"GPU0": 3, "GPU2": 1},
        100,
    ),
    "sglang13973-8gpu-9nic-nv18-numa-0-0-0-1-2-excerpt.txt": (
        {("GPU3", "NIC4"): "PIX", ("GPU3", "NIC3"): "NODE", ("GPU0", "GPU5"): "NV18"},
        {"GPU2": 0, "GPU3": 1, "GPU4": 2},
        96,
    ),
    # a Slurm job's view: 2 GPUs (NV12) PXB to NIC0/NIC1, NUMA 3 (what dask-cuda needs, per the thread)
    "dask-cuda1358-slurm-2gpu-10nic-nv12-numa3-excerpt.txt": (
        {("GPU0", "GPU1"): "NV12", ("GPU0", "NIC1"): "PXB", ("GPU1", "NIC2"): "SYS"},
        {"GPU0": 3, "GPU1": 3},
        22,
    ),
    "vllm29944-8gpu-10nic-nv18-excerpt.txt": (
        {("GPU0", "NIC3"): "PIX", ("GPU3", "NIC0"): "PIX", ("GPU4", "NIC5"): "PIX"},
        {"GPU4": 1},
        85,
    ),
    # before the fix: 'no nvidia-smi topo -m matrix found' (exit 3) — the paste lost the ESC bytes of
    # the header underline, leaving '[4mGPU0 ... GPU NUMA ID[0m'
    "sglang-env-8gpu-9nic-ansi-header-bond.txt": (
        {("GPU0", "NIC0"): "PXB", ("GPU7", "NIC7"): "PXB", ("GPU0", "NIC8"): "SYS", ("GPU4", "NIC8"): "NODE"},
        {"GPU3": 0, "GPU4": 1},
        128,
    ),
}


@pytest.mark.parametrize("name", sorted(SMI_TRUTH))
def test_nvidia_smi_capture_cells_as_the_thread_shows(name):
    cells_truth, numa_truth, ncells = SMI_TRUTH[name]
    cells = smi_cross_check(heldout("nvidia-smi-topo", name))[1]
    assert len(cells) == ncells
    for k, v in cells_truth.items():
        assert cells[k] == v, k
    m = nvidia_smi.parse(open(heldout("nvidia-smi-topo", name)).read())
    for gpu, node in numa_truth.items():
        assert m.numa[gpu] == node, gpu
    if not numa_truth:
        assert m.numa == {}  # no NUMA Affinity column: unknown, not guessed


def test_nvidia_smi_command_glued_to_the_header_is_split_off():
    """aikitoria/open-gpu-kernel-modules#12: 'nvidia-smi topo -m      GPU0    GPU1 ...' on one line.
    Before the fix: exit 3 'no nvidia-smi topo -m matrix found'. Truth: GPU0-GPU1 PHB, NUMA 0."""
    name = "aikitoria12-2x5070-command-glued-to-header.txt"
    assert smi_cross_check(heldout("nvidia-smi-topo", name))[1] == {("GPU0", "GPU1"): "PHB", ("GPU1", "GPU0"): "PHB"}
    m = nvidia_smi.parse(open(heldout("nvidia-smi-topo", name)).read())
    assert m.numa == {"GPU0": 0, "GPU1": 0}
    assert m.split_glued == ["line 4: the command 'nvidia-smi topo -m' and the header"]


def test_nvidia_smi_paste_with_a_p2p_matrix_after_it_reads_only_topo_m():
    # aikitoria/open-gpu-kernel-modules#13: topo -m, then prompts and 'topo -p2p p' (all OK)
    name = "aikitoria13-5gpu-epyc-topo-m-then-p2p-p-prompts-excerpt.txt"
    cells = smi_cross_check(heldout("nvidia-smi-topo", name))[1]
    assert len(cells) == 20 and cells[("GPU3", "GPU4")] == "PHB" and cells[("GPU0", "GPU4")] == "NODE"
    assert "OK" not in cells.values()
    m = nvidia_smi.parse(open(heldout("nvidia-smi-topo", name)).read())
    assert any("GPU0\\tX\\tOK" in u for u in m.unread)  # the p2p matrix is named as not part of it


def test_nvidia_smi_topo_p2p_output_is_named_not_misread():
    # noonghunna/club-3090#1124: the 'topo -p2p rw' matrix (GNS between two GeForce 5090s)
    r = run(
        "topology",
        "--from",
        SNAPSHOT,
        "--nvidia-smi",
        heldout("nvidia-smi-topo", "club3090-1124-2x5090-topo-p2p-rw-matrix-not-topo-m.txt"),
    )
    assert r.returncode == 3 and r.stdout == ""
    assert "this is 'nvidia-smi topo -p2p' output" in r.stderr and r.stderr.count("\n") == 1


def test_nvidia_smi_ansi_remnant_capture_keeps_its_nic_legend():
    m = nvidia_smi.parse(open(heldout("nvidia-smi-topo", "sglang-env-8gpu-9nic-ansi-header-bond.txt")).read())
    assert m.nic_legend["NIC8"] == "mlx5_bond_0"
    assert any("ulimit soft" in u for u in m.unread)  # sglang's own line after the matrix is named


# --- lspci ------------------------------------------------------------------------------------------


def _topo_json(*files):
    r = run("topology", *[a for f in files for a in ("--lspci", f)], "--json")
    return r, (json.loads(r.stdout) if r.stdout.strip() else None)


def test_plain_lspci_grep_of_switch_ports_invents_no_root_ports():
    """NVIDIA/nccl#19: 'lspci | grep PLX' of a Supermicro 7048GR: PEX 8747 switch ports only. Before
    the fix every one of them was a 'root_port' on a 'host bridge' of its own bus (0000:03, 0000:04 …),
    exit 0 — structure the text does not hold. Now: bridges whose placement is said to be unknown."""
    r, d = _topo_json(heldout("lspci-plain", "nccl19-supermicro-7048gr-lspci-grep-plx-excerpt.txt"))
    assert r.returncode == 0, r.stderr
    roles = {x["bdf"]: x["role"] for x in d["devices"]}
    assert len(roles) == 8 and set(roles.values()) == {"bridge"}, roles
    t = run("topology", "--lspci", heldout("lspci-plain", "nccl19-supermicro-7048gr-lspci-grep-plx-excerpt.txt"))
    assert "placement not known for 0000:03:00.0" in t.stdout and "'lspci -tv'" in t.stdout


def test_indented_plain_lspci_paste_is_read_and_gpu_pairs_stay_unknown():
    """siderolabs/talos#9121: a plain 'lspci' excerpt of a Sapphire Rapids box with four H100
    ('Device 2330'), every line indented by one space. Before the fix: exit 3 'no lspci tree or
    device blocks found'. The text holds no parent bridges, so where the GPUs attach (and so the
    path between them) is unknown, and said so."""
    f = heldout("lspci-plain", "talos9121-spr-4xh100-broadcom-switch-mgmt-indented-excerpt.txt")
    r, d = _topo_json(f)
    assert r.returncode == 0, r.stderr
    gpus = [x["bdf"] for x in d["devices"] if x["role"] == "gpu"]
    assert gpus == ["0000:1a:00.0", "0000:1b:00.0", "0000:1c:00.0", "0000:1d:00.0"]
    pairs = [p for p in d["pairs"] if p["b_role"] == "gpu"]
    assert len(pairs) == 12 and {p["nvidia_smi"] for p in pairs} == {"?"} and {p["p2p"] for p in pairs} == {"UNKNOWN"}
    assert all(any("where a device attaches is not known" in x for x in p["reasons"]) for p in pairs)
    assert not any(s.startswith("host-bridge") for p in pairs for s in p["path"])
    t = run("topology", "--lspci", f, "--tree")
    assert "bus 0000:1a (upstream not in the input)" in t.stdout and "host bridge 0000:1a" not in t.stdout


def test_vvv_excerpt_acs_redirect_above_the_first_header_is_not_dropped():
    """HeyMeco/Rockchip-pcie-devices#6: a PEX 8725 excerpt that starts inside a port's ACS capability
    (ReqRedir+ CmpltRedir+). Before the fix: 'no findings', exit 0 — the redirect silently dropped."""
    f = heldout("lspci-vvv", "rockchip-xike-skn2bt-pex8725-acsctl-redir-headless-excerpt.txt")
    r = run("topology", "--lspci", f)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "WARN acs-unnamed-redirect: ACS redirect on 1 port(s) whose device header the excerpt cut off" in r.stdout
    assert "line 5 not read (before the first device header)" in r.stdout
    r, d = _topo_json(f)
    (dev,) = d["devices"]
    assert dev["bdf"] == "0000:02:08.0" and dev["role"] == "bridge" and dev["acs_known"] is False


def test_acsctl_grep_with_five_redirecting_ports():
    # NVIDIA/nccl#523: 'ACS disabled on BIOS & OS kernel', yet 5 of the 11 lines still redirect
    r = run("topology", "--lspci", heldout("lspci-vvv", "nccl523-acsctl-grep-five-redirect-excerpt.txt"))
    assert r.returncode == 1
    assert "ACS redirect on 5 of 11 ACS-capable ports (which ports: unknown" in r.stdout


def test_lspci_t_without_names_says_roles_cannot_be_recognised():
    r = run("topology", "--lspci", heldout("lspci-tree", "club3090-859-2x5090-lspci-t-switch-empty-ports-excerpt.txt"))
    assert r.returncode == 0
    assert "the tree names no device, so no GPU, NVMe or NIC can be recognised" in r.stdout


def test_elided_tree_fragment_is_refused_in_one_line():
    # intel/compute-runtime#935: three '…'-elided lines of 'lspci -tv' without the root line
    r = run("topology", "--lspci", heldout("lspci-tree", "intel-compute-runtime935-b70-pex880xx-elided-tv.txt"))
    assert r.returncode == 3 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and "no lspci tree or device blocks found" in r.stderr


def _pairs(d):
    label = {x["bdf"]: x["label"] or x["bdf"] for x in d["devices"]}
    return {(label[p["a"]], label[p["b"]]): p for p in d["pairs"]}


def test_kata_vm_gpu_and_nic_on_one_virtual_switch_are_pix():
    # kata-containers docs/design/kata-vra.md: hotplug on switch ports, one A100X + one BlueField per switch
    r, d = _topo_json(heldout("lspci-tree", "kata-vra-q35-vm-gpu-nic-pairs-on-switch-ports.txt"))
    assert r.returncode == 0, r.stderr
    pairs = _pairs(d)
    assert pairs[("GPU0", "0000:04:00.0")]["nvidia_smi"] == "PIX"
    assert pairs[("GPU1", "0000:07:00.0")]["nvidia_smi"] == "PIX"
    assert pairs[("GPU0", "GPU1")]["nvidia_smi"] == "PHB"
    # ACS of the virtual switch ports is not in an lspci -tv text: no P2P verdict is claimed
    assert {p["p2p"] for p in pairs.values()} == {"UNKNOWN"}


def test_kata_vm_root_line_indented_by_the_paste_is_still_read():
    """kata-vra.md's root-port VM: the doc's root line ' -[0000:00]-+-00.0' carries a leading blank
    its children do not. Before the fix: exit 3 'cannot place lspci tree entry at column 13'.
    The doc's truth: every GPU and NIC alone on a root port (no switch), so no GPU-NIC pair is PIX."""
    r, d = _topo_json(heldout("lspci-tree", "kata-vra-q35-vm-gpus-nics-on-root-ports.txt"))
    assert r.returncode == 0, r.stderr
    pairs = _pairs(d)
    assert len(pairs) == 6 and {p["nvidia_smi"] for p in pairs.values()} == {"PHB"}
    assert {p["p2p"] for p in pairs.values()} == {"UNKNOWN"}  # host bridge named but its id unknown


def test_hand_aligned_tree_is_refused_not_guessed():
    # kata-vra.md's last tree: the '\-01.0' under bus 0a sits one column right of its sibling (hand-edited)
    r = run("topology", "--lspci", heldout("lspci-tree", "kata-vra-q35-vm-nics-behind-pcie-to-pci-bridge.txt"))
    assert r.returncode == 3 and "cannot place lspci tree entry at column 43" in r.stderr


# --- explain: gdscheck, cufile.log, dmesg, nvidia-fs stats, gdsio --------------------------------------

EXPLAIN_TRUTH = {
    # (kind dir, file): (exit code, kind detected, text that must appear, text that must not)
    ("gdscheck", "gds-nvidia-fs75-h200-gds1.14-nvme-and-p2pdma-unsupported-excerpt.txt"): (
        1,
        "gdscheck",
        ["NVMe cannot use GDS on this node", "NVMe P2PDMA        : Unsupported"],
        [],
    ),
    ("gdscheck", "gds-nvidia-fs31-rocky8.6-gds1.7-nvme-unsupported-prompt-excerpt.txt"): (
        1,
        "gdscheck",
        ["NVMe cannot use GDS on this node"],
        [],
    ),
    ("gdscheck", "gds-nvidia-fs8-p100-markdown-flattened-compat-true-excerpt.txt"): (
        1,
        "gdscheck",
        ["NVMe cannot use GDS on this node", "properties.use_compat_mode : true"],
        [],
    ),
    ("gdscheck", "pg-strom913-gds1.13-nvme-p2pdma-supported-elided.txt"): (
        0,
        "gdscheck",
        ["NVMe P2PDMA        : Supported"],
        ["NVMe cannot use GDS"],
    ),
    # before the fix: 'unrecognised text', 10 unknown lines (only the DRIVER CONFIGURATION rows pasted)
    ("gdscheck", "gds-nvidia-fs4-driver-configuration-only.txt"): (
        1,
        "gdscheck",
        ["NVMe cannot use GDS on this node", "0 unknown"],
        ["unrecognised text"],
    ),
    # before the fix: 'Config doesn't support PCIP2PDMA' was an unknown line
    ("cufile-log", "gds-nvidia-fs78-info-config-no-pcip2pdma-excerpt.txt"): (
        1,
        "cufile-log",
        ["the P2PDMA route is off in the configuration"],
        ["Config doesn't support PCIP2PDMA'"],
    ),
    # the thread's question: did gdsio take the nvidia-fs path? 'gds path taken' + nvfs_io_submit: yes
    ("cufile-log", "gds-nvidia-fs78-trace-gds-path-nvfs-io-submit-excerpt.txt"): (
        0,
        "cufile-log",
        ["'gds path' is GPU-direct"],
        ["compat mode (POSIX"],
    ),
    # before the fix: 'cuFileBufRegister error cufile success' was an unknown error line
    ("cufile-log", "gds-nvidia-fs19-sample-labels-bufregister-nvme-not-registered-excerpt.txt"): (
        2,
        "cufile-log",
        ["the nvme driver is not registered with nvidia-fs", "cuFileBufRegister failed (its error text reads"],
        ["1 of them error/warning lines"],
    ),
    # routine: the nvidia-fs source logs 'IO state TERMINATED' on every munmap that finds no I/O in flight
    ("dmesg", "gds-nvidia-fs46-nvfs-ioctl-map-munmap-terminated.txt"): (0, "dmesg", ["nvidia-fs driver activity"], []),
    ("nvfs-stats", "gds-nvidia-fs46-rhel9-nvfs2.20.5-tabs-iostats-enabled-prompt-excerpt.txt"): (
        0,
        "nvfs-stats",
        ["nvidia-fs I/O counters are on", "0 unknown"],
        [],
    ),
    ("gdsio", "gds-nvidia-fs78-gpud-write-4k-env-prefix.txt"): (0, "gdsio", ["WRITE      GPUD", "0.013"], []),
    # before the fix: 'unrecognised text', 4 unknown lines (gdsio's failure lines without its command line)
    ("gdsio", "gds-nvidia-fs57-xe9680-write-io-failed-ret-5.txt"): (
        2,
        "gdsio",
        ["a gdsio I/O failed and gdsio stopped", "IOMMU off or in passthrough", "0 unknown"],
        [],
    ),
    # before the fix: 'unrecognised text', exit 0 (an nvidia-fs kernel line without dmesg's timestamp)
    ("dmesg", "gds-nvidia-fs57-xe9680-rdma-version-not-set.txt"): (
        2,
        "dmesg",
        ["nvidia-fs has no RDMA registration for the GPU buffer", "0 unknown"],
        [],
    ),
}


@pytest.mark.parametrize("key", sorted(EXPLAIN_TRUTH), ids=lambda k: k[1])
def test_explain_capture_as_the_thread_shows(key):
    explain_as_written(heldout(*key), *EXPLAIN_TRUTH[key])


# --- cufile.json (read where libcufile reads it: CUFILE_ENV_PATH_JSON on the live node) --------------


def _cufile_checks(name):
    f = heldout("cufile-json", name)
    r = run("check", "--json", env={"CUFILE_ENV_PATH_JSON": f})
    checks = {c["id"]: c for c in json.loads(r.stdout)["checks"]}
    assert checks["cufile.json"]["status"] == "PASS" and f in checks["cufile.json"]["summary"]
    return checks


def test_cufile_json_with_compat_mode_off():
    # TomAugspurger/kvikio-zarr-v3: NVIDIA's commented template with allow_compat_mode false
    checks = _cufile_checks("kvikio-zarr-v3-allow-compat-false.json")
    assert checks["cufile.allow_compat"]["summary"] == "allow_compat_mode = False"
    assert "cufile.dynamic_routing" not in checks  # rdma_dynamic_routing false: nothing to judge
    assert checks["cufile.logging"]["summary"].startswith("level ERROR, dir unset")


def test_cufile_json_with_dynamic_routing_on():
    # gadorlhiac/test_cufile: compat allowed, dynamic routing on (SYS_MEM third: no DRAM-bounce warning),
    # DEBUG logging, cufile_stats 3
    checks = _cufile_checks("test-cufile-dynamic-routing-weka-addrs.json")
    assert checks["cufile.allow_compat"]["summary"] == "allow_compat_mode = True"
    dr = checks["cufile.dynamic_routing"]
    assert dr["status"] == "INFO" and dr["summary"] == "on, order GPU_MEM_NVLINKS, GPU_MEM, SYS_MEM, P2P"
    assert checks["cufile.stats"]["summary"] == "profile.cufile_stats = 3"


def test_every_heldout_capture_is_scored():
    """SCORES.md lists every capture (and every capture has its source in SOURCES.md)."""
    scores = open(os.path.join(HELDOUT, "SCORES.md")).read()
    sources = open(os.path.join(HELDOUT, "SOURCES.md")).read()
    for kind in sorted(os.listdir(HELDOUT)):
        if os.path.isdir(os.path.join(HELDOUT, kind)):
            for name in os.listdir(os.path.join(HELDOUT, kind)):
                assert name in scores and name in sources, name


def test_vvv_endpoint_excerpt_bus_is_not_called_a_host_bridge():
    """The dev corpus's ASUS GPU endpoint block ('sudo lspci -vvv -s 01:00.0'): bus 01 is the GPU's
    root port's secondary bus, not a host bridge; before the fix the tree said 'host bridge 0000:01'."""
    f = os.path.join(CORPUS, "lspci-vvv", "asus-esc8000a-e12-gpu0-rtx6000ada-endpoint.txt")
    r = run("topology", "--lspci", f, "--tree")
    assert r.returncode == 0
    assert "bus 0000:01 (upstream not in the input)" in r.stdout and "host bridge 0000:01" not in r.stdout
