"""Issue 42, item 8: crash sites and leftovers. Each input that ended a command with an internal
error (exit 3, "internal error: TypeError…") now ends with a finding or one clear line; `trace -o`
on a full disk leaves no empty file to block the rerun; `--comm ''` is a usage error. (A sweep
document's route_mix of the wrong shape: test_hostile_forged.py; U+202E: test_hostile_terminal.py.)"""

import glob
import json
import os
import re
import resource
import shutil
import signal
import subprocess
import sys

import pytest
from check_fixtures import unpack_h200
from conftest import CORPUS, FIXTURES

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RECORDING = os.path.join(FIXTURES, "trace", "trace-h200-cufile.jsonl.gz")


def gdsdiag(*args, env=None, preexec_fn=None):
    return subprocess.run(
        [sys.executable, "-m", "gdsdiag", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        env=env,
        preexec_fn=preexec_fn,
    )


def _clean(p):
    assert "internal error" not in p.stderr and "Traceback" not in p.stderr, p.stderr[-400:]


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    return unpack_h200(str(tmp_path_factory.mktemp("h200")))


@pytest.mark.parametrize("value", [5, "10.0.0.1", {"a": 1}, [1, [2]]], ids=["int", "text", "object", "nested"])
@pytest.mark.parametrize("key", ["rdma_dev_addr_list", "rdma_dynamic_routing_order"])
def test_a_cufile_json_list_of_the_wrong_type_is_a_finding(tree, key, value):
    with open(os.path.join(tree, "etc", "cufile.json"), "w") as f:
        json.dump({"properties": {key: value, "rdma_dynamic_routing": True}}, f)
    p = gdsdiag("check", "--root", tree, "--json")
    _clean(p)
    checks = {c["id"]: c for c in json.loads(p.stdout)["checks"]}
    assert checks["cufile.json"]["status"] == "FAIL", checks["cufile.json"]


def _lspci(tmp_path, pattern, repl):
    src = sorted(glob.glob(os.path.join(CORPUS, "lspci-vvv", "*.txt")))[0]
    with open(src) as f:
        text = f.read()
    f = tmp_path / "lspci.txt"
    f.write_text(re.sub(pattern, repl, text, count=1))
    return str(f)


@pytest.mark.parametrize(
    "pattern, repl",
    [(r"Width x\d+", "Width x" + "9" * 5000), (r"Speed [0-9.]+GT/s", "Speed 2.5.5GT/s")],
    ids=["width-5000-digits", "speed-2.5.5"],
)
def test_an_lspci_link_that_is_no_link_is_unknown(tmp_path, pattern, repl):
    p = gdsdiag("topology", "--lspci", _lspci(tmp_path, pattern, repl), "--json")
    _clean(p)
    assert p.returncode in (0, 1, 2)


def test_an_empty_comm_is_a_usage_error():
    for name in ("", " "):
        p = gdsdiag("trace", "--comm", name, "--duration", "1")
        assert p.returncode == 4 and "--comm: an empty process name" in p.stderr, p.stderr
        assert p.stderr.count("\n") == 1


def _full_disk():
    """What a full disk does to a write, as this kernel does it: a file-size limit of 0 bytes
    (EFBIG instead of ENOSPC; the same path through the writer)."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))


def test_trace_output_on_a_full_disk_leaves_nothing_to_block_the_rerun(tmp_path):
    out = tmp_path / "verdicts.txt"
    p = gdsdiag("trace", "--replay", RECORDING, "-o", str(out), preexec_fn=_full_disk)
    _clean(p)
    assert p.returncode == 3 and f"cannot write {out}" in p.stderr, p.stderr
    assert not out.exists()  # (a 0-byte file was left: the rerun refused to overwrite it)
    p = gdsdiag("trace", "--replay", RECORDING, "-o", str(out))
    assert p.returncode in (0, 1), p.stderr
    assert out.stat().st_size > 0


def test_a_libcufile_without_cufilegetversion_is_one_line(tmp_path):
    if shutil.which("cc") is None:
        pytest.skip("no C compiler")
    src = tmp_path / "empty.c"
    src.write_text("int not_cufile(void) { return 0; }\n")
    lib = tmp_path / "libcufile.so.0"
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(lib), str(src)], check=True)
    env = dict(os.environ, GDSDIAG_LIBCUFILE=str(lib), GDSDIAG_LOG_DIR=str(tmp_path / "log"))
    p = gdsdiag("cufile", "--no-open", env=env)
    _clean(p)
    assert p.returncode == 3 and "libcufile version unknown" in p.stderr and "no cuFileGetVersion" in p.stderr
    assert p.stderr.count("\n") == 1
