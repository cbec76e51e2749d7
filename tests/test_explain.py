"""gdsdiag explain on real text only: the corpus captures (tests/fixtures/corpus, and
/work/shared/corpus + research captures where this machine has them) and cufile.log/gdsio/dmesg
excerpts copied verbatim from public issue threads (tests/fixtures/explain, each names its source)."""

import glob
import json
import os
import re
import subprocess

import pytest
from conftest import GDSDIAG

from gdsdiag.errors import GdsdiagError
from gdsdiag.explain import catalog, explain_paths, explain_texts, matters
from gdsdiag.explain.readers import MAX_BYTES, read_input

HERE = os.path.dirname(os.path.abspath(__file__))
FIX = os.path.join(HERE, "fixtures", "explain")
CORPORA = [os.path.join(HERE, "fixtures", "corpus"), "/work/shared/corpus", "/work/shared/research/captures"]
KIND_DIRS = ("cufile-log", "gdsio", "gdscheck", "nvfs-stats")


def _corpus_files():
    out = []
    for base in CORPORA:
        for d in KIND_DIRS:
            out += sorted(glob.glob(os.path.join(base, d, "*.txt")))
        if base.endswith("captures"):  # loose captures: take those whose text is one of our kinds
            out += [p for p in sorted(glob.glob(os.path.join(base, "*.txt")))]
    return out + sorted(glob.glob(os.path.join(FIX, "*")))


def _run(*args):
    return subprocess.run([*GDSDIAG, "explain", *args], capture_output=True, text=True, cwd=os.path.dirname(HERE))


# --- the done criterion: every error/warning line of every capture is explained, with a source -------------


def test_every_capture_error_or_warning_line_is_explained_with_a_source():
    files = _corpus_files()
    assert len(files) >= 20, files  # the repo's own corpus alone has 2 + 5 + 7 + 1 + 11
    unexplained, uncited, seen_matter = [], [], 0
    from gdsdiag.explain.readers import detect

    for path in files:
        text = read_input(path)
        kind = detect(text)
        if kind is None:
            continue  # e.g. a bcc trace capture: not an input explain reads
        rep = explain_texts([(path, text)])
        unexplained += [f"{ln.file}:{ln.lineno}: {ln.text}" for ln in rep.unknown_that_matter]
        for g in rep.groups:
            if g.explanation.severity in ("fail", "warn") or g.level in ("ERROR", "WARN"):
                seen_matter += g.count
            if not g.explanation.sources or not all(s.startswith("https://") for s in g.explanation.sources):
                uncited.append(g.explanation.id)
    assert not unexplained, "\n".join(unexplained)
    assert not uncited, uncited
    assert seen_matter > 150  # the walk really met the error lines (hongsunjang alone has 137)


def test_corpus_cufile_logs_every_line_explained():
    for path in glob.glob(os.path.join(HERE, "fixtures", "corpus", "cufile-log", "*.txt")):
        rep = explain_paths([path])
        assert rep.files[0].kind == "cufile-log"
        assert rep.unknown == [], [u.text for u in rep.unknown]


# --- specific real messages -------------------------------------------------------------------------------


def _ids(rep):
    return {g.explanation.id: g for g in rep.groups}


def test_container_udev_missing_explained_with_run_udev_fix_and_tids_folded():
    rep = explain_paths([os.path.join(FIX, "lmcache-795-container-dm0-udev.cufile.log")])
    g = _ids(rep)["udev-property-missing"]
    assert g.count == 2 and g.pids == {276}  # two threads (tid 454, 455), one pid
    assert "/run/udev:/run/udev:ro" in g.explanation.fix
    assert g.explanation.fields == {"prop": "ID_FS_USAGE", "dev": "dm-0"}
    assert "https://github.com/LMCache/LMCache/issues/795" in g.explanation.sources
    assert _ids(rep)["driver-compat-mode"].explanation.severity == "warn"


def test_internal_error_5030_uses_the_cufile_error_table():
    rep = explain_paths([os.path.join(FIX, "gds-nvidia-fs-62-new-fs-udev-dm.cufile.log")])
    g = _ids(rep)["cufile-error-5030"]
    assert g.explanation.code == {"code": 5030, "name": "CU_FILE_INTERNAL_ERROR", "text": "internal error"}
    assert "udev" in g.explanation.cause
    assert _ids(rep)["unsupported-block-device"].explanation.fields["dev"] == "/dev/dm-0"
    assert "mount-table-miss" in _ids(rep)


def test_5008_file_checks_and_nvme_not_registered():
    rep = explain_paths([os.path.join(FIX, "tinygrad-51-rtx4090-file-checks.cufile.log")])
    ids = _ids(rep)
    assert ids["cufile-error-5008"].explanation.code["name"] == "CU_FILE_IO_NOT_SUPPORTED"
    assert ids["nvme-not-registered"].count == 2
    assert rep.worst() == "fail"


def test_gdsio_file_register_error_carries_5008():
    rep = explain_paths([os.path.join(FIX, "gds-nvidia-fs-70-gdsio-file-register.gdsio.txt")])
    assert rep.files[0].kind == "gdsio"
    g = _ids(rep)["gdsio-file-register-error"]
    assert g.explanation.code["code"] == 5008


def test_p2pdma_801_names_the_cuda_error():
    rep = explain_paths([os.path.join(FIX, "gds-nvidia-fs-75-h200-p2pdma-801.cufile.log")])
    gs = [g for g in rep.groups if g.explanation.id == "p2pdma-not-supported"]
    assert gs and all(g.explanation.fields["cuda_error"] == "CUDA_ERROR_NOT_SUPPORTED" for g in gs)


def test_nvidia_fs_map_failure_and_dmesg_symbol_mismatch():
    rep = explain_paths([os.path.join(FIX, "aikitoria-17-rtx5090-nvfs-map.cufile.log")])
    assert {g.explanation.id for g in rep.groups} == {"nvfs-map-failed"}
    rep = explain_paths([os.path.join(FIX, "gds-nvidia-fs-72-h20-dmesg.txt")])
    assert rep.files[0].kind == "dmesg"
    assert _ids(rep)["dmesg-nvfs-symbol-version"].explanation.fields["sym"] == "nvidia_p2p_dma_unmap_pages"


def test_grouping_counts_pids_and_time_span_on_the_interleaved_corpus_log():
    path = os.path.join(HERE, "fixtures", "corpus", "cufile-log", "hongsunjang-compat-mode-topology-table-misses.txt")
    text = open(path).read()
    rep = explain_paths([path])
    [g] = [g for g in rep.groups if g.explanation.id == "topology-table-miss" and g.message.endswith("0001:10:00.0")]
    rows = [ln for ln in text.splitlines() if ln.endswith("attribute table: 0001:10:00.0")]
    assert g.count == len(rows)
    assert g.pids == {int(re.search(r"pid=(\d+)", r).group(1)) for r in rows}
    assert g.first.time == "16-06-2024 05:40:20:816"
    assert g.last.time == rows[-1].split("[")[0].strip()
    # ms field "37" of 07:53:06:37 sorts after 07:52:23:679, not as text
    assert g.last.sort_time > (2024, 6, 16, 7, 52, 23, 679)


def test_gdscheck_failed_platform_and_success_lines():
    rep = explain_paths(
        [
            os.path.join(
                HERE, "fixtures", "corpus", "gdscheck", "optiplex3050-quadro-k1200-gds-beta-verification-failed.txt"
            )
        ]
    )
    ids = _ids(rep)
    assert {"gdscheck-gpu-arch", "gdscheck-no-gpu", "gdscheck-verification-failed"} <= set(ids)
    rep = explain_paths(
        [os.path.join(HERE, "fixtures", "corpus", "gdscheck", "asus-esc8000a-e12-gds1.14-iommu-off.txt")]
    )
    assert rep.worst() == "info" and rep.unknown == []
    assert "DRIVER CONFIGURATION" in _ids(rep)["gdscheck-verification-ok"].explanation.meaning


def test_nvme_unsupported_row_is_a_warning_from_real_gdscheck_text():
    # the row as gdscheck 1.14 prints it in gds-nvidia-fs#75 (and #70)
    rep = explain_texts(
        [
            (
                "x",
                " GDS release version: 1.14.0.30\n DRIVER CONFIGURATION:\n NVMe P2PDMA        : Unsupported\n NVMe               : Unsupported\n",
            )
        ]
    )
    ids = _ids(rep)
    assert ids["gdscheck-nvme-unsupported"].explanation.severity == "warn"
    assert "gdscheck-p2pdma-row" in ids


def test_nvfs_stats_nonzero_error_counter_is_an_error():
    path = os.path.join(HERE, "fixtures", "corpus", "nvfs-stats", "stelline-gds1.14-nvfs2.25.7-after-gdsio-write.txt")
    text = open(path).read()
    assert explain_texts([("ok", text)]).worst() == "info"
    bad = text.replace("Mmap                 : n=1 ok=1 err=0", "Mmap                 : n=1 ok=0 err=1")
    rep = explain_texts([("bad", bad)])
    g = _ids(rep)["nvfs-stats-errors"]
    assert g.explanation.fields["key"] == "err" and g.explanation.fields["name"] == "Mmap"


def test_unknown_lines_are_counted_and_listed_with_verbose():
    path = os.path.join(HERE, "fixtures", "corpus", "gdsio", "optiplex3050-quadro-p1000-cpuonly-cpugpu-gpud-matrix.txt")
    rep = explain_paths([path])
    assert rep.files[0].unknown == 16 and not rep.unknown_that_matter  # the author's section labels
    r = _run(path)
    # each is named with its line number without --verbose (issue 47), not only counted
    assert "16 line(s) not in the known-messages table:" in r.stdout
    assert "optiplex3050-quadro-p1000-cpuonly-cpugpu-gpud-matrix.txt:13: (3) Storage -> GPU (GDS)" in r.stdout
    assert len(re.findall(r"-gpud-matrix\.txt:\d+: ", r.stdout)) == 16
    r = _run("--verbose", path)
    assert "(3) Storage -> GPU (GDS)" in r.stdout


def test_an_unknown_cufile_error_line_matters():
    line = " 01-01-2026 00:00:00:001 [pid=1 tid=1] ERROR  cufio-xyz:1 something nobody documented\n"
    rep = explain_texts([("x", line)])
    assert [ln.text for ln in rep.unknown_that_matter] == ["something nobody documented"]
    assert matters(rep.unknown[0])


# --- the table itself -------------------------------------------------------------------------------------


def test_table_entries_are_complete_and_cited():
    cat = catalog.load()
    ids = [e.id for e in cat.entries]
    assert len(ids) == len(set(ids))
    for e in cat.entries:
        assert e.severity in catalog.SEVERITIES and set(e.kinds) <= set(catalog.KINDS), e.id
        assert e.meaning and e.title and e.sources, e.id
        assert all(s.startswith("https://") for s in e.sources), (e.id, e.sources)
    from gdsdiag.cufile.errors import OP_ERRORS

    assert all(int(c) in OP_ERRORS for c in cat.codes)  # additions only for codes errors.py knows


def test_find_code_number_and_text_forms():
    assert catalog.find_code("cuFileBufRegister checks failed: -5014") == 5014
    assert catalog.find_code("cuFileHandleRegister failed (cuFile err=5030, cuda_err=0)") == 5030
    assert catalog.find_code("cuFileHandleRegister error: GPUDirect Storage not supported on current file") == 5008
    assert catalog.find_code("GPUDirect Storage not supported on current file") is None  # no 'error' before it
    assert catalog.find_code("ops: 5020 total_time 2.1 secs") is None


# --- bounded input ----------------------------------------------------------------------------------------


def test_refuses_directories_devices_fifos_and_oversize(tmp_path):
    for p in (str(tmp_path), "/dev/null"):
        with pytest.raises(GdsdiagError, match="not a regular file"):
            read_input(p)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(GdsdiagError, match="not a regular file"):
        read_input(str(fifo))  # must not block reading a FIFO
    big = tmp_path / "big.log"
    with open(big, "wb") as f:
        f.truncate(MAX_BYTES + 1)
    with pytest.raises(GdsdiagError, match="over the 64 MiB limit"):
        read_input(str(big))
    r = _run(str(big))
    assert r.returncode == 3 and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr


def test_invalid_utf8_is_replaced(tmp_path):
    p = tmp_path / "cufile.log"
    p.write_bytes(
        b" 09-06-2025 07:01:23:837 [pid=276 tid=454] ERROR  cufio-udev:67 udev property not found: ID_FS_USAGE dm\xff-0\n"
    )
    rep = explain_paths([str(p)])
    assert rep.groups[0].explanation.id == "udev-property-missing"
    assert "\ufffd" in rep.groups[0].message


# --- CLI --------------------------------------------------------------------------------------------------


def test_cli_json_schema_and_exit_codes():
    path = os.path.join(FIX, "lmcache-795-container-dm0-udev.cufile.log")
    r = _run("--json", path)
    assert r.returncode == 2, r.stderr
    doc = json.loads(r.stdout)
    assert doc["schema"] == "gdsdiag.explain/2" and doc["exit_code"] == 2
    assert set(doc) == {
        "schema",
        "files",
        "messages",
        "unknown",
        "unknown_truncated",
        "gdsio_runs",
        "counts",
        "exit_code",
    }
    m = next(m for m in doc["messages"] if m["id"] == "udev-property-missing")
    assert set(m) >= {
        "severity",
        "title",
        "kind",
        "level",
        "component",
        "message",
        "count",
        "pids",
        "first",
        "last",
        "meaning",
        "cause",
        "fix",
        "sources",
        "code",
        "fields",
    }
    assert m["first"]["time"] == "09-06-2025 07:01:23:837" and m["pids"] == [276]
    ok = os.path.join(HERE, "fixtures", "corpus", "cufile-log", "abci3-hnode-cufile-head-gds1.11-lustre.txt")
    assert _run(ok).returncode == 0
    assert _run(os.path.join(FIX, "kvikio-508-urcu-missing.cufile.log")).returncode == 1


def test_cli_stdin_and_forced_kind():
    path = os.path.join(FIX, "gds-nvidia-fs-72-h20-dmesg.txt")
    r = subprocess.run(
        [*GDSDIAG, "explain", "--kind", "dmesg", "-"],
        input=open(path).read(),
        capture_output=True,
        text=True,
        cwd=os.path.dirname(HERE),
    )
    assert r.returncode == 1 and "nvidia-fs was built without symbol versions" in r.stdout


def test_gdsio_runs_are_parsed_one_per_result_line():
    paths = sorted(glob.glob(os.path.join(HERE, "fixtures", "corpus", "gdsio", "*.txt")))
    rep = explain_paths(paths)
    n = sum(open(p).read().count("IoType:") for p in paths)
    assert len(rep.gdsio_runs) == n == 36
    kvm = [r for r in rep.gdsio_runs if "kvm-guest" in r["file"]]
    assert kvm[0] == {
        **kvm[0],
        "io": "READ",
        "xfer": "GPUD",
        "io_size_kib": 256,
        "gib_per_s": 1.564272,
        "dataset_kib": 16117760,
        "file_kib": 10485760,
        "wrapped": True,
    }
    doc = json.loads(_run("--json", *paths).stdout)
    assert len(doc["gdsio_runs"]) == 36


def test_trace_log_gds_path_lines_are_explained_and_other_trace_lines_do_not_matter():
    rep = explain_paths([os.path.join(FIX, "gds-nvidia-fs-78-trace-gds-path.cufile.log")])
    g = _ids(rep)["io-path-trace"]
    assert g.count == 3  # 'gds path taken', 'nvfs_io_submit', 'nvfs_io_submit_aligned'
    assert rep.unknown and not rep.unknown_that_matter  # TRACE internals: counted, not alarming
    assert rep.worst() == "info"


def test_text_of_no_known_kind_still_gets_cufile_error_codes():
    rep = explain_paths([os.path.join(FIX, "lmcache-795-python-traceback.txt")])
    assert rep.files[0].kind is None
    [g] = rep.groups
    assert g.explanation.id == "cufile-error-5030" and g.message.startswith("RuntimeError: cuFileHandleRegister failed")
    assert [ln.text for ln in rep.unknown] == [
        'raise RuntimeError(f"{name} failed (cuFile err={status.err}, cuda_err={status.cu_err})")'
    ]


# --- issue 22: trimmed pastes, and the lines libcufile 1.15-1.20 write on a node without the driver ---


def _trimmed(text: str, drop_pid: bool) -> str:
    """The real lines as people paste them: the timestamp cut, and with drop_pid the [pid tid] too."""
    cut = r"^\s*\d\d-\d\d-\d{4} \d\d:\d\d:\d\d:\d+\s+" + (r"\[pid=\d+ tid=\d+\]\s+" if drop_pid else "")
    return "\n".join(re.sub(cut, "", ln) for ln in text.splitlines() if not ln.startswith("#"))


@pytest.mark.parametrize("drop_pid", [False, True])
@pytest.mark.parametrize(
    "name",
    ["gds-nvidia-fs-31-rocky-nvme-not-registered.cufile.log", "gdsdiag-cpu-libcufile-1.20.0.107-no-driver.cufile.log"],
)
def test_trimmed_cufile_log_is_recognised_by_content(name, drop_pid):
    from gdsdiag.explain.readers import detect

    full = read_input(os.path.join(FIX, name))
    cut = _trimmed(full, drop_pid)
    assert "[pid=" not in cut if drop_pid else "[pid=" in cut
    assert detect(cut) == "cufile-log"
    a, b = explain_texts([("full", full)]), explain_texts([("cut", cut)])
    assert [g.explanation.id for g in a.groups] == [g.explanation.id for g in b.groups]
    assert len(b.unknown) == len(a.unknown)


@pytest.mark.parametrize("ver", ["1.15.1.6", "1.18.1.6", "1.20.0.107"])
def test_libcufile_no_driver_lines_are_explained(ver):
    rep = explain_paths([os.path.join(FIX, f"gdsdiag-cpu-libcufile-{ver}-no-driver.cufile.log")])
    assert not rep.unknown_that_matter, [ln.text for ln in rep.unknown_that_matter]
    ids = {g.explanation.id for g in rep.groups}
    assert "cuda-symbols-missing" in ids
    if ver != "1.15.1.6":  # 1.16+ log the loader's reason and look for nvidia-fs before spinning
        assert {"lib-dlopen-error", "nvfs-devcount-missing", "driver-compat-mode"} <= ids


def test_unrecognised_text_suggests_kind(tmp_path):
    p = tmp_path / "x.txt"
    p.write_text("something nobody wrote\n")
    # every value --kind takes is named, gds-stats too
    assert (
        "say which tool wrote it: --kind cufile-log | gdsio | gdscheck | nvfs-stats | gds-stats | dmesg"
        in _run(str(p)).stdout
    )


def test_gdscheck_platform_info_acs_switch_is_an_error():
    """gdscheck 1.16+'s PLATFORM INFO 'Found ACS enabled for switch' (NVIDIA's own gds-diag test
    text) is an error: the run must not exit 0 on an ACS problem."""
    path = os.path.join(FIX, "nvidia-gds-diag-gdscheck-1.16-modes-platform-info-acs.txt")
    rep = explain_paths([path])
    assert not rep.unknown
    (g,) = [g for g in rep.groups if g.explanation.id == "gdscheck-acs-switch"]
    assert g.explanation.severity == "fail" and g.explanation.fields.get("bdf") in (None, "0000:40:01.1")
    assert _run(path).returncode == 2


def test_gdscheck_1_16_rows_are_known():
    # gds-nvidia-fs#77: gdscheck.py 1.16.1.26 with an ENVIRONMENT row, VIRTIOFS and Userspace RDMA rows
    rep = explain_paths([os.path.join(FIX, "gds-nvidia-fs-77-gdscheck-1.16.1.26.txt")])
    assert not rep.unknown, [ln.text for ln in rep.unknown]
    assert {"gdscheck-env-row", "gdscheck-command", "gdscheck-driver-row"} <= {g.explanation.id for g in rep.groups}


def test_gds_stats_is_read_and_posix_fallback_is_a_warning():
    """NVIDIA's gds_stats -l 3 example (configuration guide, DGX-2): every line known; then the same
    real text with GPU 2's reads counted as POSIX, as a compat run shows it, is a warning."""
    from gdsdiag.explain.readers import detect

    path = os.path.join(FIX, "nvidia-config-guide-dgx2-gds-stats-l3.txt")
    text = read_input(path)
    assert detect(text) == "gds-stats"
    rep = explain_texts([(path, text)])
    assert not rep.unknown, [ln.text for ln in rep.unknown]
    assert {"gds-stats-version", "gds-stats-gpu", "gds-stats-histogram"} <= {g.explanation.id for g in rep.groups}
    assert _run(path).returncode == 0
    compat = text.replace("n=78193 posix=0", "n=78193 posix=78193", 1)
    ids = {g.explanation.id: g.explanation.severity for g in explain_texts([("c", compat)]).groups}
    assert ids["gds-stats-gpu-posix"] == "warn"


def test_nvfs_stats_ver_2_0_is_known_and_says_what_it_lacks():
    rep = explain_paths([os.path.join(FIX, "nvidia-config-guide-nfs-client-nvfs-stats-ver2.0.txt")])
    assert not rep.unknown, [ln.text for ln in rep.unknown]
    (g,) = [g for g in rep.groups if g.explanation.id == "nvfs-stats-ver2"]
    assert "a counter it lacks is not zero" in g.explanation.meaning
