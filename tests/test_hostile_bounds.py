"""Issue 24, items 1, 5 and 6: tiny inputs that took the machine, crash sites, unbounded readers.
Each test feeds the reported input (or one of its class) through the command or importer a user
runs, and holds it to one clear line, the documented exit code and bounded time."""

import json
import os
import subprocess
import sys
import tarfile
import threading
import time

import pytest

from gdsdiag import bounded
from gdsdiag.errors import GdsdiagError
from gdsdiag.platform.pci_sysfs import parse_cpulist, parse_cpumask

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = os.path.join(REPO, "tests", "fixtures", "models")


def cli(*args, timeout=60):
    t = time.monotonic()
    p = subprocess.run(
        [sys.executable, "-m", "gdsdiag", *args], capture_output=True, text=True, cwd=REPO, timeout=timeout
    )
    return p.returncode, p.stdout, p.stderr, time.monotonic() - t


def one_line(err: str) -> bool:
    return err.count("\n") == 1 and "Traceback" not in err and "internal error" not in err


@pytest.mark.parametrize(
    "text", ["0-4000000000", "0-65536", "99999999999999999999999", "1" * 5000, "²", "①-3", "3-1", "1.5", "0x3"]
)
def test_cpulist_outside_the_bounds_is_unknown(text):
    assert parse_cpulist(text) is None


def test_cpulist_and_mask_that_are_real():
    assert parse_cpulist("0-3,8,10-11\n") == {0, 1, 2, 3, 8, 10, 11}
    assert parse_cpumask("0000,00000000,0000ffff") == set(range(16))
    assert parse_cpumask("80000000,00000001") == {0, 63}


def test_million_digit_cpumask_is_linear():
    t = time.monotonic()
    assert parse_cpumask("f" * 1_000_000) is None  # wider than any CPU count
    assert parse_cpumask("0" * 16_000 + "1") == {0}
    assert time.monotonic() - t < 1


def test_nvidia_smi_numa_range_is_bounded():
    from gdsdiag.importers.nvidia_smi import _nodelist

    # a range past MAX_NUMNODES, or no ASCII digits, is refused before anything is expanded (the
    # importer names the cell as not read: tests/test_smi_glued.py)
    assert _nodelist("0,3-5") == [0, 3, 4, 5]
    for text in ("0-4000000000", "²", "1" * 5000):
        with pytest.raises(ValueError):
            _nodelist(text)


@pytest.mark.parametrize("text", ["²", "١٢", "1_000", " 12", "1" * 21, "", "-1", "+1"])
def test_ascii_int_refuses_what_int_accepts(text):
    assert bounded.ascii_int(text) is None


@pytest.mark.parametrize(
    "text", ["infs", "nans", "inf", "1e400s", "1.2.3s", "²s", "--1s", "1" * 5000 + "s", "9999999999m", "1_0s"]
)
def test_durations_outside_the_bounds(text):
    from gdsdiag.units import parse_duration

    with pytest.raises(ValueError):
        parse_duration(text)


@pytest.mark.parametrize("text", ["nanG", "infk", "1.2.3", "²k", "1" * 5000, "1_0", "-4k", "99999999t", "1.5"])
def test_sizes_outside_the_bounds(text):
    from gdsdiag.units import parse_size

    with pytest.raises(ValueError):
        parse_size(text)


def test_sweep_time_inf_is_a_usage_error(tmp_path):
    rc, _, err, took = cli("sweep", "--dir", str(tmp_path), "--time", "infs", "--mode", "host")
    assert rc == 4 and one_line(err) and "duration" in err and took < 30


@pytest.mark.parametrize(
    "opt", [["--gbps", "nan"], ["--gbps", "inf"], ["--gbps", "-1"], ["--gbps", "1", "--prefill-tps", "nan"]]
)
def test_kv_numbers_are_finite_and_positive(opt):
    rc, out, err, _ = cli("kv", "--model-config", os.path.join(MODELS, "qwen2.5-1.5b.config.json"), *opt)
    assert rc == 4 and one_line(err) and "nan ms" not in out


def _fifo(tmp_path):
    f = tmp_path / "fifo"
    os.mkfifo(f)
    return str(f)


@pytest.mark.parametrize(
    "args",
    [
        lambda f: ["validate", "--policy", f],
        lambda f: ["report", f],
        lambda f: ["kv", "--model-config", f, "--gbps", "1"],
        lambda f: ["kv", "--model-config", os.path.join(MODELS, "qwen2.5-1.5b.config.json"), "--sweep", f],
        lambda f: ["validate", "--sweep-results", f, "--keep-going"],
    ],
)
@pytest.mark.parametrize("kind", ["fifo", "zero"])
def test_fifo_and_dev_zero_are_refused_at_once(tmp_path, args, kind):
    f = _fifo(tmp_path) if kind == "fifo" else "/dev/zero"
    rc, _, err, took = cli(*args(f), timeout=30)
    assert rc == 3 and one_line(err) and "not a regular file" in err and took < 20


def test_policy_alias_bomb_is_refused_quickly(tmp_path):
    """520 bytes that expand to 10^9 values through aliases; _check formatted repr() of it."""
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 9):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]")
    lines.append("routes:\n  allowed: *a8")
    p = tmp_path / "bomb.yaml"
    p.write_text("\n".join(lines) + "\n")
    rc, _, err, took = cli("validate", "--policy", str(p), "--root", "/nonexistent", timeout=60)
    assert rc == 3 and one_line(err) and took < 20


@pytest.mark.parametrize("text", ["[" * 100_000, "a: " + "[" * 5000, "x: 1" + "0" * 5000])
def test_deep_or_huge_policy_is_one_line(tmp_path, text):
    from gdsdiag.validate import policy

    p = tmp_path / "p.yaml"
    p.write_text(text)
    with pytest.raises(GdsdiagError):
        policy.load(str(p))


@pytest.mark.parametrize(
    "doc",
    [
        "[" * 100_000 + "]" * 100_000,
        '{"schema": "gdsdiag.validate/1", "rules": 5}',
        '{"schema": "gdsdiag.validate/1", "rules": [{"rule": 1, "status": "FAIL"}]}',
        '{"schema": "gdsdiag.validate/1", "node": "x"}',
        '{"schema": "gdsdiag.validate/1", "sweeps": [{"points": [{"mode": "cufile", "rw": "read x", "bs": 4096, "gbps": 1}]}]}',
        '{"schema": "gdsdiag.validate/1", "verdict": 1' + "0" * 5000 + "}",
    ],
    ids=["deep", "rules-number", "rule-number", "node-string", "rw-space", "huge-number"],
)
def test_report_inputs_of_the_wrong_shape(tmp_path, doc):
    p = tmp_path / "r.json"
    p.write_text(doc)
    rc, _, err, _ = cli("report", str(p))
    assert rc in (0, 3) and (rc == 0 or one_line(err)), err


def test_report_hostname_markup_is_shown_not_obeyed(tmp_path):
    doc = {
        "schema": "gdsdiag.validate/1",
        "node": {"hostname": "[/][link=http://evil]x[/link][bold red]\x1b]8;;http://e\x07"},
        "verdict": "FAIL",  # (its rule's: a PASS beside it is an inconsistent input, test_hostile_forged.py)
        "rules": [{"rule": "[/]", "status": "FAIL"}],
    }
    p = tmp_path / "r.json"
    p.write_text(json.dumps(doc))
    rc, out, err, _ = cli("report", str(p))
    assert rc == 2 and "[link=http://evil]" in out and "\x1b]8" not in out, err


@pytest.mark.parametrize(
    "doc",
    [
        {"schema": "gdsdiag.sweep/1", "points": 5},
        {"schema": "gdsdiag.sweep/1", "points": [{"mode": "cufile", "rw": 3, "bs": 1, "threads": 1}]},
        {"schema": "gdsdiag.sweep/1", "config": [], "points": []},
        {
            "schema": "gdsdiag.sweep/1",
            "points": [{"mode": "cufile", "rw": "read", "bs": 4096, "threads": 1, "summary": {"gbps": "fast"}}],
        },
    ],
)
def test_sweep_documents_of_the_wrong_shape(tmp_path, doc):
    p = tmp_path / "s.json"
    p.write_text(json.dumps(doc))
    rc, _, err, _ = cli("kv", "--model-config", os.path.join(MODELS, "qwen2.5-1.5b.config.json"), "--sweep", str(p))
    assert rc == 3 and one_line(err) and "s.json" in err, err
    root = tmp_path / "node"  # (an empty node tree: a missing --root is an error of its own now)
    for d in ("sys", "proc"):
        (root / d).mkdir(parents=True)
    rc, _, err, _ = cli("validate", "--sweep-results", str(p), "--root", str(root), "--keep-going")
    assert rc == 3 and one_line(err) and "s.json" in err, err


def test_archive_member_names_of_20000_components(tmp_path):
    from gdsdiag.platform.archroot import ArchiveRoot

    p = tmp_path / "a.tar.gz"
    with tarfile.open(p, "w:gz") as tar:
        for i in range(30):
            ti = tarfile.TarInfo("/".join(["d"] * 20000) + f"/f{i}")
            tar.addfile(ti)
    t = time.monotonic()
    try:
        fs = ArchiveRoot(str(p))
        fs.resolve("/".join(["d"] * 20000))
    except (GdsdiagError, OSError):
        pass
    assert time.monotonic() - t < 10


def test_kv_deep_json_is_one_line(tmp_path):
    p = tmp_path / "c.json"
    p.write_text("[" * 200_000)
    rc, _, err, _ = cli("kv", "--model-config", str(p), "--gbps", "1")
    assert rc == 3 and one_line(err) and "c.json" in err


def test_kv_config_numbers_are_bounded(tmp_path):
    p = tmp_path / "c.json"
    p.write_text(
        json.dumps({"torch_dtype": "bfloat16", "num_hidden_layers": 10**18, "num_attention_heads": 1, "hidden_size": 1})
    )
    rc, _, err, _ = cli("kv", "--model-config", str(p), "--gbps", "1")
    assert rc == 3 and one_line(err) and "num_hidden_layers" in err


def test_threads_list_reads_ascii_digits():
    rc, _, err, _ = cli("sweep", "--dir", "/tmp", "--threads", "²", "--mode", "host")
    assert rc == 4 and one_line(err) and "--threads" in err


def test_prom_onto_a_fifo_returns(tmp_path):
    f = _fifo(tmp_path)
    done = threading.Event()
    from gdsdiag.commands.validate import PROM_MARK, write_prom

    def go():
        try:
            write_prom(f, PROM_MARK)
        except GdsdiagError:
            pass
        done.set()

    threading.Thread(target=go, daemon=True).start()
    assert done.wait(10)


def test_sysfs_numbers_are_short_ascii_tokens(tmp_path):
    from gdsdiag.platform.fsroot import FsRoot

    for name, text in (("a", "f" * 100_000), ("b", "٣"), ("c", "1_0"), ("d", "0x10de\n"), ("e", "-1")):
        (tmp_path / name).write_text(text)
    fs = FsRoot(str(tmp_path))
    assert [fs.read_int(f"/{n}", 16 if n in "ad" else 0) for n in "abcde"] == [None, None, None, 0x10DE, -1]


def test_versions_compare_on_bounded_ascii_parts():
    from gdsdiag.validate.rules import _vt

    assert _vt("570.86.15") == (570, 86, 15) and _vt("٣.1") == (1,) and len(_vt("9" * 5000)) <= 23


@pytest.mark.parametrize("doc", [{"config": None, "points": []}, {"points": None}, {"config": {"dir": None}}])
def test_sweep_results_with_nulls_are_judged_not_crashed(tmp_path, doc):
    """Found by the long fuzz run: null where the shape allows it reached .get() and iteration."""
    p = tmp_path / "s.json"
    p.write_text(json.dumps({"schema": "gdsdiag.sweep/1", **doc}))
    h200 = os.path.join(REPO, "tests", "fixtures", "snapshots", "h200-vm-2026-11-29.tar.gz")
    rc, _, err, _ = cli("validate", "--from", h200, "--keep-going", "--sweep-results", str(p))
    assert rc in (0, 1, 2) and "internal error" not in err, err


def test_replay_with_record_is_a_usage_error_and_writes_nothing(tmp_path):
    """`trace --replay R --record X` recorded nothing without a word (issue 24): now exit 4, one line."""
    rec = os.path.join(os.path.dirname(__file__), "fixtures", "trace", "trace-h200-cufile.jsonl.gz")
    out = tmp_path / "x.rec"
    rc, _, err, _ = cli("trace", "--replay", rec, "--record", str(out))
    assert rc == 4 and "--record with --replay" in err and len(err.strip().splitlines()) == 1
    assert not out.exists()


def test_an_lspci_text_of_hundreds_of_gpus_and_nvme_is_refused_not_expanded(tmp_path):
    """Issue 24: a 253 KB lspci text of 1,000 GPUs x 1,000 NVMe needed > 3 GiB for its pairs. The
    pairs are counted before one is analysed: past MAX_PAIRS, one line and exit 3, in little memory."""
    lines = ["00:00.0 Host bridge: Intel Corporation Sky Lake-E DMI3 Registers (rev 07)"]
    for i in range(800):
        kind = (
            "3D controller: NVIDIA Corporation GH100 [H200 SXM 141GB] (rev a1)"
            if i % 2 == 0
            else "Non-Volatile memory controller: Samsung Electronics Co Ltd NVMe SSD Controller PM173X"
        )
        lines.append(f"{1 + i // 4:02x}:{i % 4:02x}.0 {kind}")
    p = tmp_path / "lspci.txt"
    p.write_text("\n".join(lines) + "\n")
    rc, _, err, _ = cli("topology", "--lspci", str(p))
    assert rc == 3 and "more than the 65536 gdsdiag analyses" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "line",
    [
        "Reads : " + "a" * (10 << 20),  # a 10 MB word with no '=': every suffix was retried
        "a" + " " * (10 << 20),  # a counter name with no colon: lazy name and '\\s*' over one run
        "Reads : " + "n=1 " * (1 << 20),  # 1 M counters (4 MB)
    ],
    ids=["long-word", "long-spaces", "many-counters"],
)
def test_nvfs_stats_parser_is_linear_on_a_long_line(line):
    """Issue 24: a long nvidia-fs stats line was quadratic in nvfs_proc (the 'name=value' and the
    counter-line patterns). 10 MB now takes about a second (quadratic: hours; the bound leaves room
    for a loaded machine)."""
    from gdsdiag.platform.nvfs_proc import parse_stats

    t = time.monotonic()
    parse_stats(line)
    took = time.monotonic() - t
    assert took < 30, took


def test_nvfs_stats_counters_are_bounded_ascii_numbers():
    from gdsdiag.platform.nvfs_proc import parse_peer_affinity, parse_peer_distance, parse_stats

    s = parse_stats("Reads : n=" + "9" * 5000 + " ok=3 err=١٢ io=7\nActive Process: " + "9" * 5000)
    assert s.counters == {"Reads": {"ok": 3, "io": 7}} and s.active_process is None
    assert parse_peer_affinity("GPU :0000:ca:00.0 :0 ² 1") == {}
    row = "0000:ca:00.0 0000:cb:00.0 0x1 0x2 0x3 0x4 0x5 " + "9" * 5000 + " nvme"
    assert parse_peer_distance(row) == []


def test_nvidia_smi_matrix_with_a_row_repeated_5000_times_is_named_in_bounded_lines(tmp_path):
    """Found by the long fuzz run: one unreadable matrix row repeated 5,000 times (600 KB) made
    50,000 'not compared' cells, each printed through rich: > 10 s. A repeated row is one row's
    cells, and the text output names at most MAX_CELL_LINES cells (--json keeps them all)."""
    from gdsdiag.render.topology_text import MAX_CELL_LINES

    head = "\tGPU0\tGPU1\tGPU2\tCPU Affinity\tNUMA Affinity\n"
    bad = "GPU2\tSYS\tSYS\tX\tPIX\t0-31\t0\tN/A\n"  # one cell too many
    p = tmp_path / "topo.txt"
    p.write_text(head + "GPU0\t X \tNV18\tSYS\t0-31\t0\n" + bad * 5000)
    h200 = os.path.join(REPO, "tests", "fixtures", "snapshots", "h200-vm-2026-11-29.tar.gz")
    rc, out, err, secs = cli("topology", "--from", h200, "--nvidia-smi", str(p))
    assert rc in (0, 1, 2, 3) and "internal error" not in err and secs < 20, (rc, err, secs)
    assert out.count("not compared") <= MAX_CELL_LINES + 2, out.count("not compared")


H200 = os.path.join(REPO, "tests", "fixtures", "snapshots", "h200-vm-2026-11-29.tar.gz")
QWEN = os.path.join(MODELS, "qwen2.5-1.5b.config.json")
# every number option of every command, with what else it needs to get past click
NUMBER_OPTIONS = [
    (["cufile", "--no-open"], "--timeout"),
    (["trace"], "--pid"),
    (["trace", "--replay", "x"], "--duration"),
    (["trace", "--replay", "x"], "--interval"),
    (["validate", "--proof", "--path", "/tmp"], "--proof-timeout"),
    (["validate", "--proof", "--path", "/tmp"], "--proof-size"),
    (["validate", "--proof", "--path", "/tmp"], "--proof-gpus"),
    (["exporter", "--root", "/nonexistent"], "--port"),
    (["exporter", "--root", "/nonexistent"], "--interval"),
    (["exporter", "--root", "/nonexistent"], "--trace-window"),
    (["kv", "--model-config", QWEN, "--prefill-tps", "100"], "--gbps"),
    (["kv", "--model-config", QWEN, "--gbps", "2"], "--prefill-tps"),
    (["kv", "--model-config", QWEN, "--gbps", "2"], "--tokens"),
    (["sweep", "--dir", "/nonexistent", "--mode", "host"], "--gpu"),
    (["sweep", "--dir", "/nonexistent", "--mode", "host"], "--size"),
    (["sweep", "--dir", "/nonexistent", "--mode", "host"], "--bs"),
    (["sweep", "--dir", "/nonexistent", "--mode", "host"], "--threads"),
    (["sweep", "--dir", "/nonexistent", "--mode", "host"], "--iodepth"),
    (["sweep", "--dir", "/nonexistent", "--mode", "host"], "--time"),
    (["sweep", "--dir", "/nonexistent", "--mode", "host"], "--bytes"),
]
# the options read as durations ('3s', '500ms', '2m' or seconds: commands/_common.Duration)
DURATIONS = {"--timeout", "--duration", "--interval", "--proof-timeout", "--trace-window", "--time"}
HOSTILE_NUMBERS = ["inf", "nan", "-1", "0x10", "١٢", "1_000", " 5", "9" * 5000, "1.2.3", "²", "1e400", ""]


@pytest.mark.parametrize("base,option", NUMBER_OPTIONS, ids=[f"{b[0]} {o}" for b, o in NUMBER_OPTIONS])
def test_every_number_option_refuses_what_int_and_float_take(base, option):
    """click's INTEGER/FLOAT take '١٢', '1_000', ' 5', 'inf', 'nan' and (until the digit limit)
    thousands of digits: 'trace --duration inf' traced forever, 'cufile --timeout nan' waited
    nan seconds, '--numa 0000:00=<5,000 digits>' crashed. Every number option refuses them before
    any work: a usage error naming the option, exit 4, one line."""
    for v in HOSTILE_NUMBERS:
        if option == "--bs" and v == "":
            continue  # (an empty list is the defaults')
        if option in DURATIONS and v == " 5":
            continue  # (a duration is read by units.parse_duration, which allows spaces around '5', '5s')
        rc, _, err, took = cli(*base, option, v, timeout=30)
        assert rc == 4 and "Traceback" not in err and "internal error" not in err, (option, v[:20], rc, err)
        assert took < 20, (option, v[:20], took)


@pytest.mark.parametrize("v", ["0000:00=" + "9" * 5000, "0000:00=١", "0000:00=²", "0000:00=1.5"])
def test_numa_map_nodes_are_bounded_ascii(tmp_path, v):
    lspci = os.path.join(REPO, "tests", "fixtures", "corpus", "lspci-vvv")
    f = os.path.join(lspci, sorted(os.listdir(lspci))[0])
    rc, _, err, _ = cli("topology", "--lspci", f, "--numa", v)
    assert rc in (3, 4) and one_line(err) and "--numa" in err, err


@pytest.mark.parametrize(
    "body",
    [
        "mounts: [{path: /x, min_gbps: {1m: .nan}}]",  # a NaN threshold compared False: it never failed
        "cufile: {compat_pool: {concurrent_ios: 99999999999999999999999999, io_size: 1m}}",
        "expect: {gpus: .inf}",
        "drivers: {nvidia_fs_min: '2.25.٧'}",  # an Arabic-Indic digit in a minimum version
        "drivers: {nvidia_min: '" + "9" * 5000 + "'}",
        "sweep: {quick: {threads: [99999999999999999999999]}}",
    ],
)
def test_policy_numbers_are_finite_bounded_and_versions_ascii(tmp_path, body):
    p = tmp_path / "p.yaml"
    p.write_text(body + "\n")
    rc, _, err, _ = cli("validate", "--from", H200, "--policy", str(p))
    assert rc == 3 and one_line(err) and "policy" in err, err


@pytest.mark.parametrize(
    "args, says",
    [
        (["--rw", ",".join(["read"] * 2000)], None),  # 2,000 copies of one pattern: one point, not 2,000
        (["--bs", ",".join(f"{4 * (i + 1)}k" for i in range(70))], "more than 64 values"),
        (
            [
                "--size",
                "1G",
                "--rw",
                "read,write",
                "--bs",
                ",".join(f"{4 * (i + 1)}k" for i in range(60)),
                "--threads",
                ",".join(str(i + 1) for i in range(60)),
            ],
            "more than 1,000",
        ),
    ],  # fmt: skip
    ids=["repeated-rw", "70-block-sizes", "7200-points"],
)
def test_sweep_lists_and_points_are_bounded(tmp_path, args, says):
    """`sweep --rw read,read,...` (x 2,000) ran 2,000 points; lists of any length multiplied into
    millions of points. Repeats count once, each list holds at most 64 values, a sweep at most
    1,000 points: refused before any file is made (exit 4)."""
    base = ["sweep", "--dir", str(tmp_path), "--size", "8M", "--bs", "4k", "--threads", "1", "--mode", "host"]
    base += ["--time", "0.1s", "--rw", "read"]
    rc, out, err, took = cli(*base, *args, timeout=120)
    if says is None:
        # (the table's rows: one point, the repeats counted once; the why lines below it name the mode too)
        rows = [x for x in out.splitlines() if x.split()[:2] == ["host", "read"]]
        assert rc in (0, 1) and len(rows) == 1, (rc, out[-600:], err[-300:])
    else:
        assert rc == 4 and one_line(err) and says in err, err
        assert os.listdir(tmp_path) == []
