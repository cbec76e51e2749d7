"""Issue 42, item 6: linear in the input, bounded at the documented limits. explain's nvidia-fs
stats error pattern was quadratic (a 200 KB paste: 33 CPU s); `trace --replay` of a crafted
recording grew past 3 GiB (a real one of 2,000,000 events needs 112 MB). docs/security.md states
the bounds: a replay follows at most 65,536 processes and stops with one line once its memory has
grown by 512 MiB."""

import json
import os
import resource
import subprocess
import sys
import time

import pytest

from gdsdiag.errors import GdsdiagError

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_a_200_kb_nvfs_stats_paste_is_explained_in_linear_time(tmp_path):
    """An upper-case word and 200,000 spaces: the name group of nvfs-stats-errors backtracked
    through every split of the spaces."""
    from gdsdiag.explain import explain_paths

    f = tmp_path / "stats.txt"
    f.write_text("NVFS statistics(ver: 2.0)\n" + "A" + " " * 200_000 + "x\n")
    t = time.process_time()
    rep = explain_paths([str(f)], kind="nvfs-stats")
    assert time.process_time() - t < 2.0  # 33 CPU s before; ~0.1 s now
    assert rep.files[0].lines == 2


# --- trace --replay: crafted recordings


def _recording(path, n, line):
    with open(path, "w") as f:
        f.write(json.dumps({"gdsdiag_trace_record": 1}) + "\n")
        for i in range(n):
            f.write(json.dumps(line(i), separators=(",", ":")) + "\n")
    return str(path)


def _calls_that_never_end(i):
    """A cuFile call entered on a new thread each line and never left: state kept per call."""
    return [i + 1, 5, 100 + i, "api_enter", "cuFileRead", [i, 139668410597376, 8388608, 0, 0, 0, 0], "c", None]


def _new_process_each_line(i):
    return [i + 1, 1000 + i, 1000 + i, "sys_exit", "pread64", [3, 1 << 40, 4096, 64, 0, 4096, 2070], "c", "/f"]


def test_a_replay_whose_state_outgrows_its_budget_ends_with_one_line(tmp_path, monkeypatch):
    from gdsdiag.trace import live

    monkeypatch.setattr(live, "REPLAY_MEMORY", 32 << 20)
    rec = _recording(tmp_path / "r.jsonl", 100_000, _calls_that_never_end)
    with pytest.raises(GdsdiagError, match="took more than 32 MiB of memory") as e:
        live.replay(rec, None, lambda v: None)
    assert "\n" not in e.value.line()


def test_a_replay_of_one_instant_is_held_to_the_same_budget(tmp_path, monkeypatch):
    """Every line at one timestamp: nothing is held back for order (the replay's events are ordered
    already), so the classifier's state is measured as it grows, not only after the last line."""
    from gdsdiag.trace import live

    monkeypatch.setattr(live, "REPLAY_MEMORY", 32 << 20)
    rec = _recording(tmp_path / "r.jsonl", 100_000, lambda i: [7, *_calls_that_never_end(i)[1:]])
    with pytest.raises(GdsdiagError, match="took more than 32 MiB of memory"):
        live.replay(rec, None, lambda v: None)


def test_a_replay_follows_a_bounded_number_of_processes(tmp_path, monkeypatch):
    from gdsdiag.trace import live

    monkeypatch.setattr(live, "MAX_REPLAY_PROCS", 100)
    rec = _recording(tmp_path / "r.jsonl", 1_000, _new_process_each_line)
    res = live.replay(rec, None, lambda v: None)
    beyond = [r for r in res.unclassified_by_process if r["pid"] == 0]
    assert beyond and beyond[0]["events"] == 900 and beyond[0]["ios"] == 900
    assert len(res.processes) <= 100
    assert all(len(f["pids"]) <= 256 for f in res.files)


@pytest.mark.slow  # (~30 s: 2,000,000 events written, then replayed until the budget ends it)
@pytest.mark.parametrize("shape", [_calls_that_never_end, _new_process_each_line], ids=["calls", "processes"])
def test_a_crafted_recording_at_the_event_limit_stays_within_the_memory_bound(tmp_path, shape):
    """At the documented limit (2,000,000 events): the replay ends, with its summary or one line,
    its peak memory within the 512 MiB budget above its start (plus the interpreter's own)."""
    from gdsdiag.trace.live import REPLAY_MEMORY
    from gdsdiag.trace.recording import MAX_REPLAY_EVENTS

    rec = _recording(tmp_path / "r.jsonl", MAX_REPLAY_EVENTS, shape)
    code = (
        "import resource, subprocess, sys\n"
        "r = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)\n"
        "print(r.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, repr(r.stderr))\n"
    )
    p = subprocess.run(
        [sys.executable, "-c", code, sys.executable, "-m", "gdsdiag", "trace", "--replay", rec, "--json"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=600,
    )
    rc, maxrss_kib, err = p.stdout.split(" ", 2)
    assert rc in ("0", "3"), err
    if rc == "3":
        assert "took more than 512 MiB" in err and err.count("\\n") == 1, err
    assert int(maxrss_kib) << 10 < REPLAY_MEMORY + (160 << 20), maxrss_kib
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # (the test's own process: untouched)


def test_a_replay_never_probes_or_loads_a_library_its_recording_names(tmp_path):
    """A replay is a TraceSession over offline probes: the live loop's step probes each libcuda or
    libcufile a process opens (and a libcuda's cuGetProcAddress answers come from a child that loads
    it). In a replay those paths are the recording's words: a planted libcuda.so.1 named by an open,
    an exec and a mapping must never be read, probed or loaded; its constructor would run as root."""
    import shutil
    import subprocess

    from conftest import GDSDIAG

    if shutil.which("gcc") is None:
        pytest.skip("needs gcc to build the planted library")
    lib_dir = tmp_path / "planted"
    lib_dir.mkdir()
    mark = tmp_path / "ran"
    src = lib_dir / "p.c"
    src.write_text(
        "#include <stdio.h>\n__attribute__((constructor)) static void planted(void) "
        f'{{ FILE *f = fopen("{mark}", "w"); if (f) fclose(f); }}\n'
    )
    lib = lib_dir / "libcuda.so.1"
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(lib), str(src)], check=True, timeout=60)
    rec = _recording(
        tmp_path / "r.jsonl",
        3,
        lambda i: [
            [1, 5, 5, "open", "openat", [3], "c", str(lib)],
            [2, 5, 5, "proc", "exec", [5], "c", str(lib)],
            [3, 5, 5, "fd", "mmap", [3, 1 << 40, 4096], "c", str(lib)],
        ][i],
    )
    r = subprocess.run([*GDSDIAG, "trace", "--replay", rec, "--json"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert not mark.exists(), "the replay loaded the library its recording named"
