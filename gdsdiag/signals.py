"""How gdsdiag stops when asked to (docs/security.md, "Signals").

SIGINT raises KeyboardInterrupt as Python always does; SIGTERM and SIGHUP raise ``Stopped``, a
KeyboardInterrupt too, so every cleanup written for Ctrl-C (temporary files, probes detached,
the traced program killed) also runs for them. main() turns each into its exit code: the shell's
convention of 128 + the signal number.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Callable, Iterator

EXIT_INTERRUPTED = 130  # SIGINT (Ctrl-C)
EXIT_TERMINATED = 143  # SIGTERM
EXIT_HANGUP = 129  # SIGHUP
EXIT_FOR_SIGNAL: dict[int, int] = {
    signal.SIGINT: EXIT_INTERRUPTED,
    signal.SIGTERM: EXIT_TERMINATED,
    signal.SIGHUP: EXIT_HANGUP,
}


class Stopped(KeyboardInterrupt):
    """Raised in the main thread when SIGTERM or SIGHUP arrives."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name


def _raise(signum, frame):
    if not _deferred(signum):
        raise Stopped(signum)


def _interrupt(signum, frame):
    """SIGINT: KeyboardInterrupt, as Python's own handler (but deferred like the others)."""
    if not _deferred(signum):
        raise KeyboardInterrupt


_in_hook = 0  # > 0 while _unraisable runs: an exception raised there would be dropped too


def _deferred(signum: int) -> bool:
    """Inside _unraisable a signal is sent again later instead of raising (True)."""
    if _in_hook:
        _send_later(signum)
        return True
    return False


def _send_later(signum: int) -> None:
    import threading

    again = threading.Timer(0.005, os.kill, (os.getpid(), signum))
    again.daemon = True
    again.start()


def install() -> None:
    """The command's handlers: SIGINT raises KeyboardInterrupt, SIGTERM/SIGHUP ``Stopped``."""
    signal.signal(signal.SIGINT, _interrupt)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _raise)
    if sys.unraisablehook is not _unraisable:
        global _previous_unraisable
        _previous_unraisable = sys.unraisablehook
        sys.unraisablehook = _unraisable


_previous_unraisable = sys.unraisablehook


def _unraisable(u) -> None:
    """A signal's exception raised where Python cannot pass it on (a weakref callback, such as the
    import system's module-lock cleanup, or a __del__) is printed as "Exception ignored" and the
    signal lost: the command went on as if it never came (CI saw it on Python 3.12, a signal 0.16 s
    into start-up). The signal is sent again instead, 5 ms later from a helper thread (sent
    from this hook, its handler would run inside the hook and be dropped the same way), so the
    handler runs in ordinary code and the command stops as for any other signal."""
    global _in_hook
    exc = u.exc_value
    if isinstance(exc, KeyboardInterrupt):
        _in_hook += 1  # (a signal that lands in here is deferred again: _deferred)
        try:
            _send_later(exc.signum if isinstance(exc, Stopped) else signal.SIGINT)
        finally:
            _in_hook -= 1
        return
    _previous_unraisable(u)


def exit_now(code: int, name: str, note: str = "") -> None:
    """One line and the exit code, at once: no handler of the command is left to run."""
    try:
        os.write(2, f"gdsdiag: interrupted ({name}){note}\n".encode())
    except OSError:
        pass
    os._exit(code)


def _exit_at_once(signum, frame):
    exit_now(EXIT_FOR_SIGNAL.get(signum, 128 + signum), signal.Signals(signum).name, "; nothing was left behind")


def before_start() -> None:
    """Handlers for the time before the command runs and after it ended (gdsdiag/__main__.py):
    INT, TERM and HUP end the process at once with their exit code, no traceback."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        try:
            signal.signal(sig, _exit_at_once)
        except ValueError:  # not the main thread (an embedding program): leave its handlers alone
            return


def _behind(exc: BaseException | None, kind: type) -> BaseException | None:
    """The first exception of KIND in EXC's chain of causes (at most 10 links), or None."""
    for _ in range(10):
        if exc is None or isinstance(exc, kind):
            return exc
        exc = exc.__cause__ or exc.__context__
    return None


def interruption_in(exc: BaseException | None) -> KeyboardInterrupt | None:
    """The KeyboardInterrupt (a signal) behind ``exc``, if one is: Python 3.10/3.11 wrap an
    exception raised while a class body is finished (``__set_name__``, e.g. a signal arriving
    while ``ipaddress`` is imported) in a RuntimeError whose cause is the signal's exception;
    that is an interruption, not a bug in gdsdiag."""
    found = _behind(exc, KeyboardInterrupt)
    return found if isinstance(found, KeyboardInterrupt) else None


def exit_code(exc: BaseException | None) -> int:
    """The exit code for an interruption, looking through click's Abort at its cause."""
    stopped = _behind(exc, Stopped)
    return (
        EXIT_FOR_SIGNAL.get(stopped.signum, 128 + stopped.signum) if isinstance(stopped, Stopped) else EXIT_INTERRUPTED
    )


def signal_name(exc: BaseException | None) -> str:
    stopped = _behind(exc, Stopped)
    return stopped.name if isinstance(stopped, Stopped) else "SIGINT"


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@contextlib.contextmanager
def stopping(on_stop: Callable[[int], None]) -> Iterator[None]:
    """While inside, INT, TERM and HUP call ON_STOP(signum) instead of raising: a loop that asks
    between its turns ends at the next one, and what it does after (a trace's summary, its probes'
    detach) is never cut short by a second signal. The handlers before are put back on leaving."""
    old = {sig: signal.signal(sig, lambda signum, frame: on_stop(signum)) for sig in STOP_SIGNALS}
    try:
        yield
    finally:
        for sig, h in old.items():
            signal.signal(sig, h)


@contextlib.contextmanager
def term_exits() -> Iterator[None]:
    """While inside, SIGTERM raises SystemExit(143) (a sweep: its file is removed as on Ctrl-C); the
    handler before is put back on leaving. Outside the main thread (an embedding program) nothing changes."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_term(signum, frame):
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, on_term)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
