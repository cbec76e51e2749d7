"""signals.stopping: the one way a loop (the live trace) hears INT, TERM and HUP as a request to end
at its next turn, with the handlers before put back when it leaves (issue 44 goal 1: no module of
gdsdiag installs handlers of its own)."""

from __future__ import annotations

import os
import signal

import pytest

from gdsdiag import signals


@pytest.mark.parametrize("sig", signals.STOP_SIGNALS)
def test_a_signal_inside_is_handed_to_the_callback_and_raises_nothing(sig):
    heard: list[int] = []
    before = signal.getsignal(sig)
    with signals.stopping(heard.append):
        os.kill(os.getpid(), sig)  # (the handler runs before kill returns: a signal to oneself)
        os.kill(os.getpid(), sig)  # a second one is heard too, never raised
    assert heard == [sig, sig]
    assert signal.getsignal(sig) is before


def test_the_handlers_before_are_back_after_an_error_inside():
    before = {s: signal.getsignal(s) for s in signals.STOP_SIGNALS}
    with pytest.raises(RuntimeError), signals.stopping(lambda s: None):
        raise RuntimeError("inside")
    assert {s: signal.getsignal(s) for s in signals.STOP_SIGNALS} == before


def test_only_signals_py_and_the_sweep_worker_install_handlers():
    # the live trace's own handlers (trace/live.py) and the sweep command's SIGTERM (commands/sweep.py)
    # were regimes of their own until issue 44
    pkg = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "gdsdiag")
    found = set()
    for dirpath, _, files in os.walk(pkg):
        for f in files:
            if f.endswith(".py"):
                path = os.path.join(dirpath, f)
                with open(path, encoding="utf-8") as fh:
                    if "signal.signal(" in fh.read():
                        found.add(os.path.relpath(path, pkg))
    # (the sweep's worker process ignores SIGINT: its parent stops it through a pipe)
    assert found == {"signals.py", "sweep/worker_process.py"}
