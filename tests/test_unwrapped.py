"""Output meant to be copied is never wrapped: every fix a command prints (check, topology, explain,
validate) is one whole line in a pipe, even at 40 columns, where rich would otherwise fold a table
cell or break a line (which cut ``options nvidia NVreg_RegistryDwords="…"`` in two). The fixes
compared are the ones the same command gives in --json, on committed fixtures."""

import json
import os
import subprocess

import pytest
from conftest import CORPUS, FIXTURES, GDSDIAG, REPO

SNAP = os.path.join(FIXTURES, "snapshots", "h200-vm-2026-11-29.tar.gz")
ACS_GREP = os.path.join(CORPUS, "lspci-vvv", "nccl-629-acsctl-grep-mixed-redirect.txt")
EXPLAIN = os.path.join(FIXTURES, "explain", "gds-nvidia-fs-62-new-fs-udev-dm.cufile.log")


def _run(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, COLUMNS="40", NO_COLOR="1", TERM="dumb")
    return subprocess.run([*GDSDIAG, *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)


def _whole(fixes: list[str], text: str) -> None:
    assert fixes, "no fix to compare: the fixture no longer exercises this"
    lines = text.splitlines()
    for fix in fixes:
        assert any(fix in ln for ln in lines), f"fix not on one line at 40 columns:\n{fix}\n---\n{text}"


def test_check_fixes_are_whole_lines_at_40_columns():
    doc = json.loads(_run("check", "--from", SNAP, "--json").stdout)
    fixes = [r["fix"] for r in doc["checks"] if r["fix"] and r["status"] != "PASS"]
    assert any("NVreg_RegistryDwords=" in f for f in fixes)
    _whole(fixes, _run("check", "--from", SNAP).stdout)


def test_check_verbose_evidence_is_whole_lines_at_40_columns():
    """Issue 46: piped, `check -v` broke an evidence value mid-path (`libcufile.so.` / `0`)."""
    doc = json.loads(_run("check", "--from", SNAP, "--json").stdout)
    shown = [f"{e['source']}: {e['value']}" for r in doc["checks"] for e in r["evidence"] if e["value"]]
    shown += [f"{r['id']}: {r['why']}" for r in doc["checks"] if r["why"]]
    assert any(len(s) > 40 for s in shown)
    _whole(shown, _run("check", "--from", SNAP, "-v").stdout)


def test_topology_fixes_are_whole_lines_at_40_columns():
    doc = json.loads(_run("topology", "--lspci", ACS_GREP, "--json").stdout)
    fixes = [f["fix"] for f in doc["findings"] if f.get("fix")]
    _whole(fixes, _run("topology", "--lspci", ACS_GREP, "--findings").stdout)


def test_explain_fixes_are_whole_lines_at_40_columns():
    doc = json.loads(_run("explain", EXPLAIN, "--json").stdout)
    fixes = [m["fix"] for m in doc["messages"] if m.get("fix") not in (None, "", "—")]
    _whole(fixes, _run("explain", EXPLAIN).stdout)


def test_validate_fixes_are_whole_lines_at_40_columns(tmp_path):
    # a policy the H200 VM fails: it has one GPU and no nvidia-fs
    policy = tmp_path / "strict.yaml"
    policy.write_text("version: 1\nexpect: {gpus: 8}\ndrivers: {nvidia_fs_required: true}\n")
    out = tmp_path / "v.json"
    _run("validate", "--from", SNAP, "--policy", str(policy), "--json", str(out))
    doc = json.loads(out.read_text())
    fixes = [r["fix"] for r in doc["rules"] if r.get("fix") and r["status"] in ("FAIL", "WARN")]
    assert len(fixes) >= 2
    _whole(fixes, _run("validate", "--from", SNAP, "--policy", str(policy)).stdout)


def test_topology_tree_names_the_warning_it_exits_1_for():
    """--tree shows no findings; the warning that sets exit 1 is still named, with where to see it."""
    r = _run("topology", "--lspci", ACS_GREP, "--tree")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "findings not shown: 1 warning (acs-grep-redirect; --findings lists them)" in r.stdout
    full = _run("topology", "--lspci", ACS_GREP, "--findings")
    assert full.returncode == 1 and "WARN acs-grep-redirect:" in full.stdout


@pytest.mark.parametrize("view", ["--tree", "--matrix"])
def test_topology_view_without_warnings_adds_no_note(view):
    r = _run("topology", "--from", SNAP, view)
    assert r.returncode == 0 and "findings not shown" not in r.stdout  # the INFO finding sets no exit code
