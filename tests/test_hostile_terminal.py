"""Issue 24, item 5 (rich markup and control sequences from data): text from the node or from a
file a stranger sent -- hostnames, mount paths, cufile.json keys and values, PCI device names,
NIC names, process names and file paths in a recording, a model's name, a report's hostnames and
evidence, log lines -- is shown and never obeyed. Each command runs on inputs carrying an OSC 8
hyperlink, a screen clear, BEL, a C1 CSI and rich markup ('[bold]', '[link=…]', '[/]'), once to a
pipe and once as to a terminal (FORCE_COLOR: rich's own colours on); the data's sequences never
reach the output, rich's markup in data is printed literally, and no command crashes."""

import glob
import gzip
import json
import os
import shutil
import subprocess
import tarfile

import pytest
from conftest import FIXTURES, GDSDIAG

# (U+202E and U+2066 reorder what follows them as a terminal draws it: issue 42, printed raw)
P = "PWN\x1b]8;;http://evil\x07X\x1b]8;;\x07[bold]B[/bold][link=http://evil]L[/link]\x1b[2J\x9bZ\u202etxt.exe\u2066"
H200 = os.path.join(FIXTURES, "snapshots", "h200-vm-2026-11-29.tar.gz")


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    d = tmp_path_factory.mktemp("hostile")
    root = d / "root"
    root.mkdir()
    with tarfile.open(H200) as t:
        # (our own committed snapshot; extraction filters exist from Python 3.11.4 / 3.10.12 only)
        t.extractall(root, **({"filter": "tar"} if hasattr(tarfile, "tar_filter") else {}))
    (root / "proc" / "sys" / "kernel").mkdir(parents=True, exist_ok=True)
    (root / "proc" / "sys" / "kernel" / "hostname").write_text(P + "\n")
    with open(root / "proc" / "mounts", "a") as f:
        f.write("/dev/nvme0n1 /mnt/" + P.replace(" ", "") + " ext4 rw 0 0\n")
    cfg = {P: P, "logging": {"dir": P}, "properties": {"max_direct_io_size_kb": P}}
    (root / "etc" / "cufile.json").write_text(json.dumps(cfg))
    snap = d / "hostile.tar.gz"
    with tarfile.open(snap, "w:gz") as t:
        for name in sorted(os.listdir(root)):
            t.add(root / name, arcname=name)
    shutil.rmtree(root)
    lspci = open(sorted(glob.glob(os.path.join(FIXTURES, "corpus", "lspci-vvv", "*")))[0]).read().splitlines()
    (d / "lspci.txt").write_text(
        "\n".join(ln + " " + P if ln and not ln[0].isspace() and ":" in ln[:8] else ln for ln in lspci) + "\n"
    )
    lines = gzip.open(os.path.join(FIXTURES, "trace", "trace-h200-cufile.jsonl.gz"), "rt").read().splitlines()
    out = [lines[0]]
    for ln in lines[1:]:
        e = json.loads(ln)
        if isinstance(e, list) and len(e) == 8:
            e[6] = P if isinstance(e[6], str) else e[6]
            e[7] = "/data/" + P if isinstance(e[7], str) else e[7]
        out.append(json.dumps(e))
    (d / "rec.jsonl").write_text("\n".join(out) + "\n")
    m = json.load(open(os.path.join(FIXTURES, "models", "qwen2.5-1.5b.config.json")))
    m.update(model_type=P, architectures=[P], _name_or_path=P)
    (d / "model.json").write_text(json.dumps(m))
    v = json.load(open(os.path.join(FIXTURES, "gpu-machine", "validate-default.json")))

    def walk(x):
        if isinstance(x, dict):
            return {
                k: P if k in ("hostname", "summary", "evidence", "fix") and isinstance(y, str) else walk(y)
                for k, y in x.items()
            }
        return [walk(i) for i in x] if isinstance(x, list) else x

    (d / "validate.json").write_text(json.dumps(walk(v)))
    (d / "dmesg.txt").write_text("[  1.0] nvidia-fs: " + P + "\n[ 2.0] " + P + "\n")
    smi = open(sorted(glob.glob(os.path.join(FIXTURES, "corpus", "nvidia-smi-topo", "*")))[0]).read()
    (d / "smi.txt").write_text(smi + "\n  NIC9: " + P.replace(" ", "") + "\n")
    return d


CASES = {
    "check --from -v": lambda d: ["check", "--from", str(d / "hostile.tar.gz"), "-v"],
    "validate --from -v": lambda d: ["validate", "--from", str(d / "hostile.tar.gz"), "-v"],
    "diff": lambda d: ["diff", H200, str(d / "hostile.tar.gz")],
    "topology --lspci": lambda d: ["topology", "--lspci", str(d / "lspci.txt"), "--tree"],
    "topology --nvidia-smi": lambda d: ["topology", "--from", H200, "--nvidia-smi", str(d / "smi.txt")],
    "trace --replay": lambda d: ["trace", "--replay", str(d / "rec.jsonl")],
    "trace --replay --interval": lambda d: ["trace", "--replay", str(d / "rec.jsonl"), "--interval", "1"],
    "kv": lambda d: ["kv", "--model-config", str(d / "model.json"), "--gbps", "2"],
    "report": lambda d: ["report", str(d / "validate.json")],
    "explain -v": lambda d: ["explain", "-v", str(d / "dmesg.txt"), str(d / "lspci.txt")],
    "error line": lambda d: ["topology", "--lspci", str(d) + "/" + P.replace("/", "")],
}


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("terminal", [False, True], ids=["pipe", "terminal"])
def test_data_never_drives_the_terminal(hostile, name, terminal):
    env = dict(os.environ, COLUMNS="200")
    env.pop("NO_COLOR", None)
    if terminal:
        env["FORCE_COLOR"] = "1"
    else:
        env.pop("FORCE_COLOR", None)
    r = subprocess.run([*GDSDIAG, *CASES[name](hostile)], capture_output=True, env=env, timeout=120)
    out = r.stdout + r.stderr
    text = out.decode("utf-8", "replace")
    assert r.returncode in (0, 1, 2, 3, 4), (r.returncode, text[-500:])
    assert "Traceback" not in text and "internal error" not in text, text[-500:]
    assert "PWN" in text, "the hostile value is not shown at all: the test proves nothing"
    assert b"http://evil\x07" not in out and b"\x1b]8;;http://evil" not in out and b"\x1b[2J" not in out
    assert "\x9b" not in text and b"\x07" not in out
    assert "\u202e" not in text and "\u2066" not in text, "a bidi control was printed as it is"
    if not terminal:
        assert b"\x1b" not in out  # nothing of rich's either, on a pipe
    assert ";;BL" not in text and "X?]8;;B" not in text, "markup in the data was obeyed"


def test_junit_and_prometheus_outputs_of_hostile_data_stay_well_formed(hostile, tmp_path):
    """ElementTree writes ESC, BEL and NUL into XML as they are: a hostname or a cufile.json key
    carrying one made `validate --junit` a file every JUnit parser refuses ("not well-formed")."""
    import xml.etree.ElementTree as ET

    junit, prom = tmp_path / "v.xml", tmp_path / "v.prom"
    r = subprocess.run(
        [*GDSDIAG, "validate", "--from", str(hostile / "hostile.tar.gz"), "--junit", str(junit), "--prom", str(prom)],
        capture_output=True,
        timeout=120,
    )
    assert r.returncode in (0, 1, 2), r.stderr[-500:]
    ET.parse(junit)  # well-formed
    assert "PWN" in junit.read_text()
    text = prom.read_bytes()
    assert b"\x1b" not in text and b"\x07" not in text
    for line in text.decode().splitlines():  # every sample line is 'name{labels} value'
        assert line.startswith("#") or line.startswith("gdsdiag_"), line
