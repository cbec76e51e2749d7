"""Files a user points gdsdiag at (issue 13): cufile.json via CUFILE_ENV_PATH_JSON, saved
lspci/nvidia-smi/gdscheck text, trace recordings. FIFOs, /dev/zero, huge, deep and malformed
inputs end in bounded time and memory with one clear line and the documented exit code."""

import gzip
import json
import os
import subprocess
import sys
import time

import pytest
from conftest import FIXTURES, GDSDIAG, corpus

from gdsdiag import cufile_json

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RECORDING = os.path.join(FIXTURES, "trace", "trace-h200-cufile.jsonl.gz")
ARM_LSPCI = corpus("lspci-vvv", "arm-n1sdp-plx-pex8749-acs-redir-on-dsp-lspci-vvxxx.txt")


def cli(*args, env=None, timeout=60):
    """(rc, stdout, stderr, seconds, peak RSS KiB) of the CLI in a child."""
    t = time.monotonic()
    p = subprocess.Popen(
        [sys.executable, "-m", "gdsdiag", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=REPO,
        env=dict(os.environ, **(env or {})),
    )
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        raise
    return p.returncode, out.decode(errors="replace"), err.decode(errors="replace"), time.monotonic() - t, None


@pytest.fixture
def fifo(tmp_path):
    p = tmp_path / "fifo"
    os.mkfifo(p)
    return str(p)


# -- cufile.json -------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["/dev/zero", "fifo"])
def test_cufile_env_path_json_dev_zero_and_fifo(kind, fifo):
    """Before: /dev/zero read until MemoryError, a FIFO hung forever."""
    path = fifo if kind == "fifo" else "/dev/zero"
    rc, out, err, secs, _ = cli("check", "--json", env={"CUFILE_ENV_PATH_JSON": path}, timeout=30)
    assert secs < 20, secs
    (cj,) = [c for c in json.loads(out)["checks"] if c["id"] == "cufile.json"]
    assert cj["status"] == "FAIL" and "not a regular file" in cj["summary"], cj


def test_cufile_json_over_the_size_limit_is_refused(tmp_path):
    big = tmp_path / "cufile.json"
    big.write_text('{"properties": {"x": "' + "a" * (5 << 20) + '"}}')
    rc, out, err, secs, _ = cli("check", "--json", env={"CUFILE_ENV_PATH_JSON": str(big)}, timeout=60)
    (cj,) = [c for c in json.loads(out)["checks"] if c["id"] == "cufile.json"]
    assert "over the 1.0 MiB limit" in cj["summary"] and secs < 20, (secs, cj)


def test_cufile_json_with_many_unknown_keys_is_fast():
    """60,000 unknown keys (1 MB) took 36 s of spelling hints before; now 100 issues are listed."""
    text = json.dumps({"properties": {f"x{i}": i for i in range(60000)}})
    t = time.monotonic()
    cfg = cufile_json.parse(text, "cufile.json")
    assert time.monotonic() - t < 10
    assert len(cfg.issues) == 101 and cfg.issues[-1].message.endswith("more issues not listed")


@pytest.mark.parametrize(
    "text,words",
    [
        ("[" * 100_000, "nested deeper than 64 levels"),  # RecursionError before
        ('{"properties": {"max_direct_io_size_kb": ' + "9" * 5000 + "}}", "number of 5000 digits"),  # ValueError before
        ('{"properties": {"max_direct_io_size_kb": 1e999}}', "out of range"),
        ('{"properties": {"max_direct_io_size_kb": NaN}}', "NaN is not JSON"),
        ('{"a": "\\ud800"} garbage', "line 1"),
    ],
    ids=["deep", "bigint", "1e999", "nan", "garbage"],
)
def test_cufile_json_deep_and_huge_numbers_are_parse_errors(text, words):
    cfg = cufile_json.parse(text, "cufile.json")
    assert cfg.parse_error and words in cfg.parse_error, cfg.parse_error


def test_long_values_are_clipped_in_the_text_renderer(tmp_path):
    """Before: a 5 MB cufile.json kept the renderer busy > 90 s; a 900 KB value printed whole."""
    cj = tmp_path / "cufile.json"
    cj.write_text(json.dumps({"logging": {"dir": "/x" * 450000, "level": "A" * 1000}}))
    rc, out, err, secs, _ = cli("check", "-v", env={"CUFILE_ENV_PATH_JSON": str(cj)}, timeout=60)
    assert secs < 20 and len(out) < 200_000, (secs, len(out))
    assert "more characters)" in out


# -- saved command output ----------------------------------------------------------------------------


@pytest.mark.parametrize("option", [("topology", "--lspci"), ("topology", "--nvidia-smi"), ("check", "--gdscheck")])
@pytest.mark.parametrize("kind", ["/dev/zero", "fifo"])
def test_saved_outputs_must_be_regular_files(option, kind, fifo):
    path = fifo if kind == "fifo" else "/dev/zero"
    args = list(option) + [path]
    if option[1] == "--nvidia-smi":
        args = ["topology", "--lspci", ARM_LSPCI, "--nvidia-smi", path]
    rc, out, err, secs, _ = cli(*args, timeout=30)
    assert rc == 3 and "not a regular file" in err and err.count("\n") == 1 and secs < 20, err


def test_saved_output_over_the_limit_is_refused(tmp_path):
    big = tmp_path / "lspci.txt"
    with open(big, "wb") as f:
        f.truncate(65 << 20)  # sparse: no disk used
    rc, out, err, secs, _ = cli("topology", "--lspci", str(big), timeout=30)
    assert rc == 3 and "over the 64.0 MiB limit" in err and secs < 20, err


def test_lspci_bus_cycle_is_a_finding_not_a_hang(tmp_path):
    """The real N1SDP 'lspci -vvv' capture (hex dump dropped, as plain -vvv prints it) with one
    downstream port's secondary bus changed to 01: bus 01 -> 02 -> 01. Before: endless loop."""
    text = "".join(ln for ln in open(ARM_LSPCI).readlines() if not _hexline(ln))
    text = text.replace(
        "Bus: primary=02, secondary=03, subordinate=03", "Bus: primary=02, secondary=01, subordinate=03", 1
    )
    p = tmp_path / "cycle.txt"
    p.write_text(text)
    rc, out, err, secs, _ = cli("topology", "--lspci", str(p), "--json", timeout=30)
    assert secs < 20 and rc in (0, 1, 2), err
    titles = [f["title"] for f in json.loads(out)["findings"]]
    assert any(t.startswith("PCI hierarchy cycle 0000:") and "0000:01:00.0" in t for t in titles), titles


def _hexline(ln):
    head = ln.split(":")[0]
    return len(head) in (2, 3) and all(c in "0123456789abcdef" for c in head) and ln[len(head) : len(head) + 2] == ": "


# -- trace recordings ----------------------------------------------------------------------------------

HEADER = json.dumps({"gdsdiag_trace_record": 1, "probes_attached": [], "probes_not_attached": []}) + "\n"
EVENT = json.dumps([1000, 42, 42, "api_enter", "cuFileRead", [1, 2, 3], "app", None]) + "\n"


@pytest.mark.parametrize(
    "body,line,words",
    [
        (HEADER + EVENT + "\xff\xfe\n", 3, "invalid UTF-8"),
        (HEADER + "[" * 60_000 + "\n", 2, "nested deeper"),  # under the 64 KiB line limit
        (HEADER + '[1e999, 1, 1, "a", "b", [], "c", null]\n', 2, "out of range"),
        (HEADER + "[" + "9" * 5000 + ', 1, 1, "a", "b", [], "c", null]\n', 2, "5000 digits"),
        (HEADER + EVENT + '["x", 1, 1, "a", "b", [], "c", null]\n', 3, "must be integers"),
        (HEADER + '[1, 1, 1, 5, "b", [], "c", null]\n', 2, "must be strings"),
        (HEADER + '[1, 1, 1, "a", "b", {"x": 1}, "c", null]\n', 2, "args must be a list of at most 16 integers"),
        (HEADER + '[1, 1, 1, "a", "b", [[1]], "c", null]\n', 2, "args must be a list of at most 16 integers"),
        (HEADER + '{"not": "a list"}\n', 2, "list of 8 values"),
        (HEADER + '[true, 1, 1, "a", "b", [], "c", null]\n', 2, "must be integers"),
        (json.dumps({"gdsdiag_trace_record": 1, "probes_attached": "x"}) + "\n", 1, "must be a list"),
        ("\xff\n", 1, "invalid UTF-8"),
        ("", 1, "empty file"),
    ],
    ids=[
        "utf8",
        "deep",
        "1e999",
        "bigint",
        "str-ts",
        "int-kind",
        "dict-args",
        "nested-args",
        "dict-event",
        "bool-ts",
        "header-type",
        "utf8-header",
        "empty",
    ],
)
def test_replay_malformed_recordings_name_the_line(tmp_path, body, line, words):
    """Before: UnicodeDecodeError, RecursionError, OverflowError, TypeError as internal errors."""
    p = tmp_path / "rec.jsonl"
    p.write_bytes(body.encode("utf-8", "surrogateescape") if "\xff" not in body else body.encode("latin-1"))
    rc, out, err, secs, _ = cli("trace", "--replay", str(p), timeout=30)
    assert rc == 3 and f"not a gdsdiag trace record: line {line}: " in err and words in err, err
    assert err.count("\n") == 1 and "internal error" not in err


def test_replay_gzip_bomb_and_devices_are_bounded(tmp_path, fifo):
    """A 2 MB gzip that unpacks to 2 GiB of zeros (no newline): MemoryError before."""
    bomb = tmp_path / "bomb.jsonl.gz"
    zeros = gzip.compress(bytes(1 << 20), compresslevel=9)  # one member, reused: gzip allows concatenation
    bomb.write_bytes(gzip.compress(HEADER.encode()) + zeros * 2048)
    assert bomb.stat().st_size < 3 << 20
    for path, words in (
        (str(bomb), "line 2: line longer than 64 KiB"),
        ("/dev/zero", "not a regular file"),
        (fifo, "not a regular file"),
    ):
        from test_hostile_archives import peak_rss_kib

        rc, err, rss = peak_rss_kib("trace", "--replay", path)
        assert rc == 3 and words in err, err
        assert rss < 300_000, rss  # KiB, of the CLI process itself


def test_replay_of_the_real_recordings_still_works():
    rc, out, err, secs, _ = cli("trace", "--replay", RECORDING, "--json")
    assert rc == 0, err
    assert json.loads(out.strip().splitlines()[-1])["type"] == "summary"


# -- --root trees ----------------------------------------------------------------------------------


@pytest.mark.parametrize("openat2", [True, False], ids=["openat2", "fallback"])
def test_root_tree_links_resolve_inside_the_tree(tmp_path, tmp_path_factory, monkeypatch, openat2):
    """A --root tree whose etc/cufile.json links to a host file (absolute, or by climbing with
    '..'): read inside the tree (openat2 RESOLVE_IN_ROOT, or gdsdiag's own resolution where the
    kernel lacks it), so the host file is never read. Before: plain open() read the host file."""
    from gdsdiag.platform import inroot
    from gdsdiag.platform.fsroot import FsRoot

    if not openat2:
        monkeypatch.setattr(inroot, "_supported", False)
    secret = tmp_path_factory.mktemp("host") / "shadow"
    secret.write_text('{"logging": {"dir": "SECRET"}}')
    (tmp_path / "etc").mkdir()
    (tmp_path / "proc").mkdir()
    os.symlink(str(secret), tmp_path / "etc" / "cufile.json")
    os.symlink("../" * 12 + str(secret).lstrip("/"), tmp_path / "proc" / "cmdline")
    (tmp_path / "proc" / "version").write_text("Linux version 6.1.0\n")
    fs = FsRoot(str(tmp_path))
    assert fs.read_bytes("/etc/cufile.json") is None and fs.read_bytes("/proc/cmdline") is None
    assert fs.read_text("/proc/version") == "Linux version 6.1.0"
    cfg = cufile_json.load(fs, {})
    assert cfg.data is None or "SECRET" not in json.dumps(cfg.data)


_H200 = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "snapshots", "h200-vm-2026-11-29.tar.gz")
_QWEN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "models", "qwen2.5-1.5b.config.json")
EVERY_INPUT = {
    "topology --lspci": ["topology", "--lspci", "X"],
    "topology --nvidia-smi": ["topology", "--from", _H200, "--nvidia-smi", "X"],
    "topology --from": ["topology", "--from", "X"],
    "check --gdscheck": ["check", "--from", _H200, "--gdscheck", "X"],
    "trace --replay": ["trace", "--replay", "X"],
    "explain": ["explain", "X"],
    "diff": ["diff", _H200, "X"],
    "validate --policy": ["validate", "--from", _H200, "--policy", "X"],
    "validate --sweep-results": ["validate", "--from", _H200, "--keep-going", "--sweep-results", "X"],
    "validate --trace-replay": ["validate", "--from", _H200, "--keep-going", "--trace-replay", "X"],
    "report": ["report", "X"],
    "kv --model-config": ["kv", "--model-config", "X", "--gbps", "1"],
    "kv --sweep": ["kv", "--model-config", _QWEN, "--sweep", "X"],
}


@pytest.mark.parametrize("name", sorted(EVERY_INPUT))
@pytest.mark.parametrize("kind", ["eio", "fifo", "directory", "dev-zero-link", "loop"])
def test_every_input_that_is_not_a_readable_regular_file_is_one_line(tmp_path, name, kind):
    """/proc/self/mem is a regular file whose read fails (EIO): most readers ended in 'internal
    error: OSError'. With FIFOs, directories, a link to /dev/zero and a link loop: at once, one
    line, exit 3 (4 for a usage error), for every input of every command."""
    target = {
        "eio": "/proc/self/mem",
        "fifo": str(tmp_path / "fifo"),
        "directory": str(tmp_path),
        "dev-zero-link": str(tmp_path / "zero"),
        "loop": str(tmp_path / "loop"),
    }[kind]
    os.mkfifo(tmp_path / "fifo")
    os.symlink("/dev/zero", tmp_path / "zero")
    os.symlink(tmp_path / "loop", tmp_path / "loop")
    argv = [target if a == "X" else a for a in EVERY_INPUT[name]]
    t = time.monotonic()
    r = subprocess.run([*GDSDIAG, *argv], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert r.returncode in (3, 4), (r.returncode, r.stderr[-300:])
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr, r.stderr[-300:]
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert time.monotonic() - t < 30
