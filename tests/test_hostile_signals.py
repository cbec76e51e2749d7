"""Signals at every phase (issue 13): documented exit codes for INT/TERM/HUP in every command
(130/143/129, docs/security.md), temporary files removed on TERM as on INT, and a traced program
that never runs untraced when gdsdiag is stopped or killed before its probes are live."""

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
from conftest import FIXTURES, GDSDIAG, live

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
H200 = os.path.join(FIXTURES, "snapshots", "h200-vm-2026-11-29.tar.gz")
RECORDING = os.path.join(FIXTURES, "trace", "trace-h200-cufile.jsonl.gz")
CODES = {signal.SIGINT: 130, signal.SIGTERM: 143, signal.SIGHUP: 129}


def run_with_signal_at(phase: str, sig: int, argv: list[str], cwd: str):
    """Run the CLI in a child whose function ``phase`` (module:attr) sends ``sig`` to the process
    when it is reached: a real signal, delivered at a chosen point of the run (the commands finish
    in well under a second, so a timer from outside would miss the phase)."""
    mod, attr = phase.split(":")
    code = textwrap.dedent(f"""
        import importlib, os, signal, sys, time
        m = importlib.import_module({mod!r})
        real = getattr(m, {attr!r})
        def hooked(*a, **kw):
            os.kill(os.getpid(), {int(sig)})
            time.sleep(5)           # the signal arrives here, in the middle of the phase
            return real(*a, **kw)
        setattr(m, {attr!r}, hooked)
        sys.argv = ["gdsdiag"] + {argv!r}
        from gdsdiag.cli import main
        main()
    """)
    tmpdir = os.path.join(cwd, ".tmp")  # the child's TMPDIR: must be empty afterwards
    os.mkdir(tmpdir)
    env = dict(os.environ, PYTHONPATH=REPO, TMPDIR=tmpdir)
    t = time.monotonic()
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=cwd, env=env, timeout=60)
    assert os.listdir(tmpdir) == [], "temporary files left behind: %s" % os.listdir(tmpdir)
    os.rmdir(tmpdir)
    return r, time.monotonic() - t


PHASES = [
    ("topology --from", "gdsdiag.topology.load:build", ["topology", "--from", H200]),
    (
        "topology --lspci",
        "gdsdiag.importers.lspci:parse_vvv",
        [
            "topology",
            "--lspci",
            os.path.join(FIXTURES, "corpus", "lspci-vvv", "asus-esc8000a-e12-gpu0-rtx6000ada-endpoint.txt"),
        ],
    ),
    ("check --from", "gdsdiag.check.runner:decide", ["check", "--from", H200]),
    ("trace --replay", "gdsdiag.trace.events:read_record", ["trace", "--replay", RECORDING]),
    ("snapshot", "gdsdiag.snapshot:_add_kallsyms", ["snapshot", "-o", "out.tar.gz"]),
]


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP], ids=["INT", "TERM", "HUP"])
@pytest.mark.parametrize("name,phase,argv", PHASES, ids=[p[0] for p in PHASES])
def test_exit_code_for_each_signal_in_each_command(tmp_path, name, phase, argv, sig):
    r, secs = run_with_signal_at(phase, sig, argv, str(tmp_path))
    assert r.returncode == CODES[sig], (r.returncode, r.stderr)
    assert (
        r.stderr.strip().splitlines()[-1]
        == f"gdsdiag: interrupted ({signal.Signals(sig).name}); files it created were removed"
    )
    assert "Traceback" not in r.stderr and secs < 5
    assert os.listdir(tmp_path) == []  # snapshot: no .partial left, no output either


# -- trace -- CMD: never untraced -----------------------------------------------------------------


def test_closed_gate_never_runs_the_command(tmp_path):
    """The gate's pipe closing without "go" (gdsdiag stopped or SIGKILLed while probes compile)
    used to fall through to exec CMD: it now exits 125 and CMD never runs."""
    from gdsdiag.trace.live import _gate_child

    marker = tmp_path / "ran"
    tree, gate = _gate_child(["sh", "-c", f"touch {marker}"])
    os.close(gate)
    assert tree.proc.wait(10) == 125
    assert not marker.exists()
    tree.done()
    tree, gate = _gate_child(["sh", "-c", f"touch {marker}"])
    os.write(gate, b"go\n")
    os.close(gate)
    assert tree.proc.wait(10) == 0 and marker.exists()
    tree.done()


SLOW_PROBES = textwrap.dedent("""
    import sys, time
    import gdsdiag.trace.bpf as bpf
    # Stands in for the BPF compile (30+ s of clang here): the phase under test is "probes not
    # live yet", which the real compile cannot hold still for a test.
    bpf.preflight = lambda: None
    marker = sys.argv[-1]
    class SlowProbes:
        def __init__(self, *a, **kw):
            open(marker + ".compiling", "w").close()
            time.sleep(60)
    bpf.Probes = SlowProbes
    sys.argv = ["gdsdiag", "trace", "--libcufile", "/nonexistent/libcufile.so", "--", "sh", "-c", "touch " + marker]
    from gdsdiag.cli import main
    main()
""")


@pytest.mark.parametrize(
    "sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGKILL], ids=["TERM", "INT", "HUP", "KILL"]
)
def test_trace_stopped_before_probes_are_live_never_runs_cmd(tmp_path, sig):
    marker = tmp_path / "cmd-ran"
    p = subprocess.Popen(
        [sys.executable, "-c", SLOW_PROBES, str(marker)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ, PYTHONPATH=REPO),
    )
    deadline = time.monotonic() + 30
    while not os.path.exists(str(marker) + ".compiling") and time.monotonic() < deadline:
        time.sleep(0.02)
    p.send_signal(sig)
    out, err = p.communicate(timeout=30)
    assert os.path.exists(str(marker) + ".compiling"), err
    time.sleep(1.0)  # time for an escaped gate child to have run CMD
    assert not marker.exists(), "the traced command ran untraced"
    assert p.returncode == (-9 if sig == signal.SIGKILL else CODES[sig]), err
    # no gate shell left waiting either
    left = [pid for pid in os.listdir("/proc") if pid.isdigit() and str(marker) in _cmdline(pid)]
    assert left == []


def _cmdline(pid: str) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().decode(errors="replace")
    except OSError:
        return ""


@live  # real BPF probes (root, bcc, headers): run with the other live tests, skipped with the reason
def test_ctrl_c_mid_trace_exits_130_with_summary(tmp_path):
    started = tmp_path / "started"
    p = subprocess.Popen(
        [*GDSDIAG, "trace", "--", "sh", "-c", f"touch {started}; sleep 60"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120
    while not started.exists() and time.monotonic() < deadline and p.poll() is None:
        time.sleep(0.1)
    if not started.exists():
        p.kill()
        out, err = p.communicate(timeout=60)
        pytest.fail(f"the traced program never started (rc {p.returncode}): {out}{err}")
    time.sleep(0.5)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 130, err
    assert "events" in out + err  # the summary is still printed
