"""Issue 42, item 2: the O_DIRECT probe of `check / validate / exporter --path DIR` creates its file
once (O_CREAT|O_EXCL|O_NOFOLLOW, relative to the directory's descriptor) and does all its I/O on
that descriptor, so another user who can write DIR and swaps a symlink in never gets the target
written; the name is removed only while it is still the probe's file."""

import glob
import os
import threading

from gdsdiag.platform import mounts

VICTIM_TEXT = b"root's file\n" * 100


def _victim(tmp_path):
    victim = tmp_path / "victim"
    victim.write_bytes(VICTIM_TEXT)
    return victim


def _swap_for_link(directory, victim):
    """What the attacker does: every probe file in the directory becomes a link to the victim."""
    for name in glob.glob(os.path.join(directory, "gdsdiag-check-*.tmp")):
        os.rename(name, name + ".moved")
        os.symlink(victim, name)


def test_a_link_swapped_in_after_the_create_is_never_written_through(tmp_path, monkeypatch):
    """The round-2 probe closed its file and re-opened it by name to add O_DIRECT: the window. Here
    the swap happens deterministically right after every open of a probe name."""
    shared = tmp_path / "shared"
    shared.mkdir()
    victim = _victim(tmp_path)
    real_open = os.open

    def open_then_swap(path, flags, *args, **kwargs):
        fd = real_open(path, flags, *args, **kwargs)
        if "gdsdiag-check-" in os.fspath(path):
            _swap_for_link(shared, victim)
        return fd

    monkeypatch.setattr(os, "open", open_then_swap)
    probe = mounts.odirect_probe(str(shared))
    monkeypatch.undo()
    assert probe.ok, probe.detail  # the probe's own file took the I/O
    assert victim.read_bytes() == VICTIM_TEXT
    (link,) = [n for n in os.listdir(shared) if not n.endswith(".moved")]
    assert os.path.islink(shared / link)  # the attacker's name is not ours to remove


def test_a_planted_link_under_the_probe_name_is_refused(tmp_path, monkeypatch):
    shared = tmp_path / "shared"
    shared.mkdir()
    victim = _victim(tmp_path)
    monkeypatch.setattr(os, "getpid", lambda: 4242)
    monkeypatch.setattr("secrets.token_hex", lambda n: "00" * n)
    os.symlink(victim, shared / "gdsdiag-check-4242-00000000.tmp")
    probe = mounts.odirect_probe(str(shared))
    assert not probe.ok and probe.errno_name == "EEXIST", probe.detail
    assert victim.read_bytes() == VICTIM_TEXT
    assert os.path.islink(shared / "gdsdiag-check-4242-00000000.tmp")


def test_a_racing_swapper_never_reaches_the_target(tmp_path):
    """A thread that swaps links in as fast as it can, while 300 probes run."""
    shared = tmp_path / "shared"
    shared.mkdir()
    victim = _victim(tmp_path)
    stop = threading.Event()

    def attacker():
        while not stop.is_set():
            try:
                _swap_for_link(shared, victim)
            except OSError:
                pass  # the probe removed its file first: try again

    t = threading.Thread(target=attacker)
    t.start()
    try:
        for _ in range(300):
            mounts.odirect_probe(str(shared))
    finally:
        stop.set()
        t.join()
    assert victim.read_bytes() == VICTIM_TEXT


def test_the_probe_leaves_nothing_behind(tmp_path):
    probe = mounts.odirect_probe(str(tmp_path))
    assert probe.ok, probe.detail
    assert os.listdir(tmp_path) == []
