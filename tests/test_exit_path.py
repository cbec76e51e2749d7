"""Issue 23, one exit path: every command returns a report and cli.main alone prints errors and
exits; every --help names the exit codes; every usage error exits 4 with one line; durations read
the same everywhere. The usage errors run the real console script (what a user types)."""

from __future__ import annotations

import ast
import os
import subprocess

import click
import pytest
from click.testing import CliRunner
from conftest import FIXTURES, GDSDIAG, REPO

from gdsdiag.cli import cli, exit_code_of
from gdsdiag.errors import EXIT_CODES_HELP, EXIT_USAGE, Outcome

PKG = os.path.join(REPO, "gdsdiag")
SNAP = os.path.join(FIXTURES, "snapshots", "h200-vm-2026-11-29.tar.gz")
MODEL = os.path.join(FIXTURES, "models", "llama-3.1-70b.config.json")
LSPCI = os.path.join(FIXTURES, "corpus", "lspci-tree", "asus-esc8000a-e12-highpoint-nvme-switch.txt")
RECORDING = os.path.join(FIXTURES, "trace", "trace-h200-cufile.jsonl.gz")


def _commands() -> list[str]:
    return cli.list_commands(click.Context(cli))


@pytest.mark.parametrize("command", _commands())
def test_every_help_names_the_exit_codes(command):
    r = CliRunner().invoke(cli, [command, "--help"], terminal_width=400)
    assert r.exit_code == 0, r.output
    assert " ".join(EXIT_CODES_HELP.split()) in " ".join(r.output.split()), r.output


# (argv, what the one line says): each is a command line that cannot be right, refused before any work
USAGE_ERRORS = [
    (["kv", "--model-config", MODEL], "exactly one of --sweep FILE and --gbps N"),
    (["kv", "--model-config", MODEL, "--gbps", "1", "--sweep", MODEL], "exactly one of"),
    (["kv", "--model-config", MODEL, "--gbps", "-1"], "--gbps"),
    (["kv", "--model-config", "/nonexistent/config.json", "--gbps", "1"], "No such file"),
    (["check", "--path", "/nonexistent"], "--path /nonexistent does not exist"),
    (["check", "--from", SNAP, "--path", "/tmp"], "--path cannot be probed inside a snapshot"),
    (["sweep", "--dir", "/nonexistent"], "/nonexistent is not a directory"),
    (["sweep", "--dir", "/tmp", "--size", "4x"], "not a size"),
    (["sweep", "--dir", "/tmp", "--time", "3x"], "not a duration"),
    (["exporter", "--port", "99999"], "must be a whole number from 0 to 65535"),
    (["exporter", "--interval", "0"], "--interval '0': must be more than 0 s"),
    (["exporter", "--top-pods", "0"], "--top-pods '0': must be a whole number from 1 to 1000"),
    (["trace", "--duration", "-1"], "--duration '-1': must be more than 0 s"),
    (["trace", "--duration", "3x"], "not a duration"),
    (["trace", "--interval", "0.01", "--replay", RECORDING], "--interval"),
    (["trace", "--replay", "/nonexistent.jsonl"], "No such file"),
    (["trace", "--replay", RECORDING, "--record", "/tmp/never-written.jsonl"], "--record with --replay"),
    (["topology", "--root", "/nonexistent"], "--root /nonexistent: no such directory"),
    (["topology", "--from", "/nonexistent.tar.gz"], "not found"),
    (["topology", "--lspci", "/nonexistent.txt"], "No such file"),
    (["topology", "--lspci", LSPCI, "--numa", "bad"], "bad --numa entry"),
    (["diff", "/nonexistent", "/"], "/nonexistent not found"),
    (["explain", "/nonexistent.log"], "No such file"),
    (["validate", "--from", SNAP, "--path", "/tmp"], "need the node itself"),
    (["validate", "--proof", "--path", "/tmp", "--proof-timeout", "0"], "--proof-timeout"),
    (["cufile", "--timeout", "1x"], "not a duration"),
    (["report", "/nonexistent.json"], "No such file"),
    (["topology", "--no-such-option"], "No such option"),
    (["sweep"], "Missing option '--dir'"),
]


@pytest.mark.parametrize("argv,says", USAGE_ERRORS, ids=[" ".join(a)[:60] for a, _ in USAGE_ERRORS])
def test_usage_errors_exit_4_with_one_line(argv, says):
    r = subprocess.run([*GDSDIAG, *argv], capture_output=True, text=True, timeout=60, cwd=REPO)
    assert r.returncode == EXIT_USAGE, (r.returncode, r.stderr)
    assert says in r.stderr, r.stderr
    assert r.stdout == "" and "Traceback" not in r.stderr
    if not says.startswith(("No such option", "Missing option", "99999")):  # click's own usage text
        assert r.stderr.count("\n") == 1 and r.stderr.startswith("gdsdiag: error: "), r.stderr


def test_durations_read_the_same_everywhere():
    """'3s' is 3 seconds for trace --duration as for sweep --time (units.parse_duration both)."""
    from gdsdiag.commands._common import Duration
    from gdsdiag.units import parse_duration

    for text in ("3s", "3", "500ms", "2m", "1.5s"):
        assert Duration().convert(text, None, None) == parse_duration(text)
    r = subprocess.run([*GDSDIAG, "trace", "--duration", "3s", "--ebpf"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "TRACEPOINT_PROBE" in r.stdout, r.stderr


def test_a_report_carries_the_exit_code_the_process_ends_with():
    assert exit_code_of(Outcome(2)) == 2 and exit_code_of(0) == 0 and exit_code_of(None) == 0
    # a real report: the h200x2 snapshot's check fails (udev missing in the container), exit 2
    snap = os.path.join(FIXTURES, "snapshots", "h200x2-vm-snapshot-2026-11-30.tar.gz")
    r = CliRunner().invoke(cli, ["check", "--from", snap, "--json"], standalone_mode=False)
    assert r.exception is None, r.output
    assert r.return_value.exit_code == 2
    p = subprocess.run([*GDSDIAG, "check", "--from", snap, "--json"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 2


# Where a process may end other than through cli.main, and why
EXITS_ALLOWED = {
    "gdsdiag/cli.py": "the one exit path",
    "gdsdiag/commands/_common.py": "exit_leaving_heap, which cli.main calls for reports that ask for it",
    "gdsdiag/trace/tree.py": "the forked child of 'trace -- CMD' when its exec fails (os._exit before exec)",
    "gdsdiag/sweep/worker_process.py": "a --workers process worker: a program of its own that reports over its "
    "pipe, then ends with os._exit (its resources released, CUDA's teardown skipped)",
    "gdsdiag/trace/probes/headers.py": "python -m gdsdiag.trace.probes.headers, the README's headers step: a program of its own "
    "(stdlib only: it needs nothing of gdsdiag's dependencies)",
    "gdsdiag/signals.py": "a signal before the command's own handlers are in place (start-up imports): one "
    "line and the signal's code at once, nothing else can run yet; SIGTERM during a sweep (term_exits) "
    "raises SystemExit(143) so the sweep's file is removed",
}


def _calls(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
            owner = f.value.id if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) else ""
            yield node, owner, name


def test_only_cli_main_exits_or_prints_errors():
    exits, prints = [], []
    for dirpath, _, files in os.walk(PKG):
        for fn in files:
            if not fn.endswith(".py"):
                continue
            path = os.path.join(dirpath, fn)
            rel = os.path.relpath(path, REPO)
            with open(path, encoding="utf-8") as f:
                tree = ast.parse(f.read())
            for node, owner, name in _calls(tree):
                ends = (owner, name) in (("sys", "exit"), ("os", "_exit")) or name in (
                    "exit_leaving_heap",
                    "SystemExit",
                )
                if ends and rel not in EXITS_ALLOWED:
                    exits.append(f"{rel}:{node.lineno}")
                # an error line written out ('click.echo(e.line(), err=True)') anywhere but cli.main
                if name in ("echo", "print") and rel != "gdsdiag/cli.py":
                    for arg in node.args:
                        if (
                            isinstance(arg, ast.Call)
                            and isinstance(arg.func, ast.Attribute)
                            and arg.func.attr == "line"
                        ):
                            prints.append(f"{rel}:{node.lineno}")
    assert not exits, f"return a report (errors.Outcome) instead of exiting: {exits}"
    assert not prints, f"raise the GdsdiagError instead of printing it: {prints}"


@pytest.mark.parametrize(
    "args",
    [
        ["trace", "--replay", RECORDING, "--json"],  # click.echo's writes
        # rich's: its Console.on_broken_pipe ended them with exit 1 (issue 46, `check -v | head -1`)
        ["trace", "--replay", RECORDING],
        ["check", "--from", SNAP, "-v"],
        ["topology", "--from", SNAP],
        ["validate", "--from", SNAP],
    ],
    ids=lambda a: " ".join(x for x in a if not x.startswith("/")),
)
def test_a_reader_that_went_away_is_a_normal_end(args):
    """`gdsdiag ... | head` whose reader has gone: click answered the broken pipe with exit 1 (read as
    "warnings") before cli.main could; it is exit 0 and no word on stderr, as cli.main intends
    (docs/json.md)."""
    r, w = os.pipe()
    os.close(r)  # (the reader is gone before the first byte: every write is a broken pipe)
    try:
        p = subprocess.run(GDSDIAG + args, stdout=w, stderr=subprocess.PIPE, timeout=120)
    finally:
        os.close(w)
    assert p.returncode == 0, p.stderr
    assert p.stderr == b"", p.stderr
