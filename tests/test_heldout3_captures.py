"""The third held-out round (tests/fixtures/corpus/heldout3/, sources in each file's header and in
SOURCES.md): real outputs from public pages and threads the parsers were not written against. Each test
runs the command (GDSDIAG: the installed console script in CI) on one capture and asserts what the source
says is true, or the explicit unknown. SCORES.md has the before/after table; the tests of captures that
were read wrong or not at all before their fix say what the tool did then.
"""

import json
import os
import re

import pytest
from conftest import CORPUS
from heldout_common import SNAPSHOT, explain_as_written, run, smi_cross_check

HELDOUT3 = os.path.join(CORPUS, "heldout3")


def capture(kind, name):
    return os.path.join(HELDOUT3, kind, name)


# --- nvidia-smi topo -m: every GPU-row cell against an independent split of the capture ------------


def _split_cells(path):
    """The GPU rows of the capture split by hand (runs of blanks), the columns named from the header
    by a regex that also parts glued names ('NIC11NIC12', 'NIC11CPU Affinity')."""
    lines = open(path).read().splitlines()[3:]
    h = next(i for i, ln in enumerate(lines) if re.search(r"GPU0\s+GPU1", ln))
    cols = re.findall(r"GPU\d+|NIC\d+|mlx\d+_\d+", lines[h])
    out = {}
    for ln in lines[h + 1 :]:
        m = re.match(r"(GPU\d+)\s", ln)
        if m:
            out.update({(m.group(1), c): v for c, v in zip(cols, ln.split()[1:]) if c != m.group(1)})
    return out


SMI_TRUTH = {
    # (number of GPU-row cells, cells the source points at, NUMA per GPU as the text gives it)
    # vLLM's collect_env lost the header's leading blanks: the header starts with 'GPU0' like a row
    "vllm5001-h20-8gpu-5nic-header-at-column-0-collect-env-excerpt.txt": (
        48,
        {("GPU1", "NIC1"): "PIX", ("GPU3", "NIC2"): "PIX", ("GPU0", "NIC0"): "NODE", ("GPU2", "NIC4"): "SYS"},
        {"GPU0": 0, "GPU3": 0},
    ),
    # header 'NIC11NIC12' glued, the rows' cells apart ('PIX  NODE')
    "vllm31594-b200-8gpu-13nic-header-nic11nic12-glued-cells-apart-excerpt.txt": (
        80,
        {("GPU0", "NIC11"): "PIX", ("GPU0", "NIC12"): "NODE", ("GPU3", "NIC8"): "PIX", ("GPU1", "NIC7"): "SYS"},
        {"GPU0": 0, "GPU3": 0},
    ),
    # header 'NIC11CPU Affinity' glued
    "vllm20862-b200-8gpu-12nic-nic11-glued-to-cpu-affinity-excerpt.txt": (
        76,
        {("GPU0", "NIC0"): "PIX", ("GPU1", "NIC3"): "PIX", ("GPU3", "NIC5"): "PIX", ("GPU2", "NIC11"): "SYS"},
        {"GPU1": 0, "GPU2": 1, "GPU3": 1},
    ),
    # affinity cells narrower than their header
    "unsloth3872-b200-8gpu-9nic-narrow-affinity-columns-excerpt.txt": (
        80,
        {("GPU0", "NIC0"): "PIX", ("GPU4", "NIC4"): "PIX", ("GPU2", "NIC3"): "NODE", ("GPU4", "NIC8"): "SYS"},
        {"GPU0": 0, "GPU2": 1, "GPU4": 2},
    ),
    # 16 GPUs, mlx5_N named in the header, no NUMA Affinity column (none guessed)
    "nccl-tests78-dgx2-16gpu-nv6-10-mlx5-header-no-numa-excerpt.txt": (
        100,
        {("GPU0", "mlx5_0"): "PIX", ("GPU0", "mlx5_1"): "PXB", ("GPU3", "mlx5_1"): "PIX", ("GPU1", "GPU15"): "NV6"},
        {},
    ),
    "nccl1505-dgxa100-8gpu-12nic-pxb-numa-3-1-prompt-excerpt.txt": (
        76,
        {("GPU0", "NIC1"): "PXB", ("GPU2", "NIC3"): "PXB", ("GPU0", "NIC2"): "SYS", ("GPU1", "GPU7"): "NV12"},
        {"GPU0": 3, "GPU1": 3, "GPU2": 1, "GPU3": 1},
    ),
    "vllm25848-8gpu-18nic-pix-numa-0-2-excerpt.txt": (
        75,
        {("GPU0", "NIC0"): "PIX", ("GPU1", "NIC1"): "PIX", ("GPU2", "NIC4"): "PIX", ("GPU2", "NIC17"): "SYS"},
        {"GPU0": 0, "GPU2": 2},
    ),
}


@pytest.mark.parametrize("name", sorted(SMI_TRUTH))
def test_nvidia_smi_cells_as_the_capture_shows(name):
    ncells, truth, numa = SMI_TRUTH[name]
    d, cells = smi_cross_check(capture("nvidia-smi-topo", name))
    assert cells == _split_cells(capture("nvidia-smi-topo", name))
    assert len(cells) == ncells
    for k, v in truth.items():
        assert cells[k] == v, k
    from gdsdiag.importers import nvidia_smi

    m = nvidia_smi.parse(open(capture("nvidia-smi-topo", name)).read())
    for gpu, node in numa.items():
        assert m.numa[gpu] == node, gpu
    if not numa:
        assert m.numa == {}


@pytest.mark.parametrize(
    "name, glued",
    [
        ("vllm31594-b200-8gpu-13nic-header-nic11nic12-glued-cells-apart-excerpt.txt", "header: NIC11NIC12"),
        ("vllm20862-b200-8gpu-12nic-nic11-glued-to-cpu-affinity-excerpt.txt", "header: NIC11CPU"),
    ],
)
def test_glued_header_names_are_reported(name, glued):
    d, _ = smi_cross_check(capture("nvidia-smi-topo", name))
    assert d["cross_check_input"]["split_glued"] == [glued]
    assert d["cross_check_input"]["unread"] == ["line 4: before the matrix, not read: 'GPU Topology:'"]


def test_rows_without_a_header_are_one_error_line():
    """vllm#16336: the GPU rows of a B200 matrix (GPU2 without NVLink) without the header line: the columns
    cannot be named from the text, so one error line and exit 3, no matrix guessed."""
    r = run(
        "topology",
        "--from",
        SNAPSHOT,
        "--nvidia-smi",
        capture("nvidia-smi-topo", "vllm16336-b200-gpu2-without-nvlink-rows-only-no-header-excerpt.txt"),
    )
    assert r.returncode == 3 and r.stdout == ""
    assert r.stderr.strip().splitlines() == [
        "gdsdiag: error: no 'nvidia-smi topo -m' matrix found (header starting with GPU0) — pass the output of "
        "'nvidia-smi topo -m' unchanged"
    ]


# --- lspci ----------------------------------------------------------------------------------------------


def test_vm_tree_eight_h200_and_six_cx7_each_on_its_own_root_port():
    # nccl-tests#256: a q35 guest flattens the host's switches; 'Device 2335' (H200) is a GPU
    f = capture("lspci-tree", "nccl-tests256-h200-vm-q35-8gpu-device2335-cx7-root-ports-prompt-excerpt.txt")
    r = run("topology", "--lspci", f, "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    roles = {x["bdf"]: x["role"] for x in d["devices"]}
    gpus = sorted(b for b, role in roles.items() if role == "gpu")
    nics = sorted(b for b, role in roles.items() if role == "nic")
    assert gpus == [f"0000:{b:02x}:00.0" for b in range(5, 13)]
    assert nics == [f"0000:{b:02x}:00.0" for b in range(13, 19)]
    assert not [b for b, role in roles.items() if role in ("switch_up", "switch_down", "bridge")]
    # every GPU-GPU and GPU-NIC pair meets at host bridge 0000:00 only
    levels = {
        p["nvidia_smi"] for p in d["pairs"] if roles[p["a"]] in ("gpu", "nic") and roles[p["b"]] in ("gpu", "nic")
    }
    assert levels == {"PHB"}


# --- explain: gdscheck, gdsio, nvidia-fs stats --------------------------------------------------------

EXPLAIN_TRUTH = {
    # (kind dir, file): (exit code, kind detected, text that must appear, text that must not)
    ("gdscheck", "nvforum339782-a100-gds1.11-nvme-nvmeof-wekafs-supported-compat-true-prompt-excerpt.txt"): (
        0,
        "gdscheck",
        [
            "GDS release version: 1.11.1.6",
            "NVMe               : Supported",
            "0 unknown",
            "the gdscheck command line, as pasted",
        ],
        ["NVMe cannot use GDS"],
    ),
    # the three runs in order, the 'top' lines after each named as not known (nothing claimed of them)
    ("gdsio", "nvforum346097-read-gpud-cpugpu-cpuonly-with-top-output.txt"): (
        0,
        "gdsio",
        [
            "READ       GPUD              4        1M     6.623       589.4",
            "READ       CPU_GPU           4        1M     6.574       593.9",
            "READ       CPUONLY           4        1M     6.479       597.6",
            "9 unknown",
        ],
        ["gdsio I/O failed"],
    ),
    # before the fix: the indented second lines (pg-cache…, active=0, max_pinned_MiB…) were 4 unknown lines
    ("nvfs-stats", "nvidia-troubleshooting-guide-gds1.0-stats-ver4.0-sparse-reads-indented-excerpt.txt"): (
        0,
        "nvfs-stats",
        ["0 unknown", "second line of the nvidia-fs row above", "nvidia-fs I/O counters are on"],
        ["ERROR x", "= nvidia-fs counted errors"],
    ),
}


@pytest.mark.parametrize("key", sorted(EXPLAIN_TRUTH), ids=lambda k: k[1])
def test_explain_capture_as_the_source_shows(key):
    explain_as_written(capture(*key), *EXPLAIN_TRUTH[key])


def test_nvfs_stats_error_on_a_second_line_is_an_error(tmp_path):
    """The same wrapped layout with a non-zero error field on the second line: read as the error it is
    (before the fix the line was only 'not in the known-messages table')."""
    lines = open(
        capture("nvfs-stats", "nvidia-troubleshooting-guide-gds1.0-stats-ver4.0-sparse-reads-indented-excerpt.txt")
    ).read()
    f = tmp_path / "stats.txt"
    f.write_text(lines.replace("pg-cache-fail=0", "pg-cache-fail=7"))
    r = run("explain", str(f))
    assert r.returncode == 2, r.stdout
    assert "= nvidia-fs counted errors" in r.stdout and "pg-cache-fail=7" in r.stdout and "0 unknown" in r.stdout


def test_check_gdscheck_reads_nvme_supported():
    # the gdsdiag side is this machine's, so only the capture's side is asserted
    r = run(
        "check",
        "--gdscheck",
        capture("gdscheck", "nvforum339782-a100-gds1.11-nvme-nvmeof-wekafs-supported-compat-true-prompt-excerpt.txt"),
    )
    assert "Traceback" not in r.stderr
    assert re.search(r"NVMe via nvidia-fs\s+gdscheck: supported;", r.stdout), r.stdout


# --- cufile.json (read where libcufile reads it: CUFILE_ENV_PATH_JSON on the live node) --------------


def _cufile(name):
    f = capture("cufile-json", name)
    r = run("check", "--json", env={"CUFILE_ENV_PATH_JSON": f})
    assert "Traceback" not in r.stderr
    checks = {c["id"]: c for c in json.loads(r.stdout)["checks"]}
    assert f in checks["cufile.json"]["summary"]
    return checks


def test_cufile_json_template_with_tabs():
    checks = _cufile("gds-sandbox-template-tabs-max-io-threads-0.json")
    assert checks["cufile.json"]["status"] == "PASS"
    assert checks["cufile.allow_compat"]["summary"] == "allow_compat_mode = True"
    assert checks["cufile.stats"]["summary"] == "profile.cufile_stats = 0"
    assert "cufile.dynamic_routing" not in checks and "cufile.p2pdma" not in checks


def test_cufile_json_gdscheck_name_use_compat_mode():
    """jmdelahanty/palette: 'properties.use_compat_mode: false' is the name gdscheck prints for
    allow_compat_mode; libcufile ignores it, so compat stays allowed. Before the fix the warning said
    "did you mean 'properties.force_compat_mode'?"."""
    f = capture("cufile-json", "palette-version2-use-compat-false-filesystems-mountpoints.json")
    checks = _cufile("palette-version2-use-compat-false-filesystems-mountpoints.json")
    assert checks["cufile.json"]["status"] == "WARN"
    assert checks["cufile.allow_compat"]["summary"] == "allow_compat_mode = unset (default true)"
    r = run("check", "-v", env={"CUFILE_ENV_PATH_JSON": f})
    text = " ".join(r.stdout.split())
    assert "it is the name 'gdscheck -p' prints for 'properties.allow_compat_mode'" in text
    assert "force_compat_mode'?" not in text
    for key in ("version", "filesystems", "mountPoints"):
        assert f"unknown key '{key}' is ignored by libcufile" in text


def test_cufile_json_p2pdma_on_and_a_key_under_the_wrong_section():
    checks = _cufile("sentry-pci-p2pdma-true-io-batchsize-under-profile.json")
    assert checks["cufile.json"]["status"] == "WARN"
    assert checks["cufile.p2pdma"]["summary"].startswith("properties.use_pci_p2pdma true")
    assert checks["cufile.stats"]["summary"] == "profile.cufile_stats = 3"
    r = run(
        "check",
        "-v",
        env={"CUFILE_ENV_PATH_JSON": capture("cufile-json", "sentry-pci-p2pdma-true-io-batchsize-under-profile.json")},
    )
    assert "did you mean 'properties.io_batchsize'?" in " ".join(r.stdout.split())


def test_every_heldout3_capture_is_scored():
    """SCORES.md lists every capture and SOURCES.md gives its source."""
    scores = open(os.path.join(HELDOUT3, "SCORES.md")).read()
    sources = open(os.path.join(HELDOUT3, "SOURCES.md")).read()
    n = 0
    for kind in sorted(os.listdir(HELDOUT3)):
        if os.path.isdir(os.path.join(HELDOUT3, kind)):
            for name in os.listdir(os.path.join(HELDOUT3, kind)):
                n += 1
                assert name in scores and name in sources, name
                if kind != "cufile-json":  # whole files, byte for byte, no header
                    with open(os.path.join(HELDOUT3, kind, name)) as f:
                        head = [next(f) for _ in range(3)]
                    assert [h.split(":", 1)[0] for h in head] == ["# source", "# machine", "# date"], name
    assert n == 15
