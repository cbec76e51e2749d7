"""Keep bcc's words off stdout.

bcc's C++ loader writes some of its messages with ``std::cout`` (frontends/clang/loader.cc: "Unable to
find kernel headers. Try rebuilding kernel with CONFIG_IKHEADERS=m ..."), that is to fd 1, where
``trace --json`` and ``validate --json -`` promise nothing but their document (docs/json.md). So
fd 1 points at stderr while bcc compiles and loads, and back afterwards.

libstdc++'s ``std::cout`` is synced with C stdio: its text sits in C's ``stdout`` buffer (fully
buffered on a pipe) until a flush, so C stdio is flushed before fd 1 is restored: otherwise the
buffer would reach the real stdout later, at exit, after the document.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import sys
from collections.abc import Iterator


def _flush_c_stdio() -> None:
    try:
        ctypes.CDLL(None).fflush(None)  # fflush(NULL): every C stream, std::cout's text among them
    except (OSError, AttributeError):  # no C library to ask (not Linux): nothing buffered there
        pass


def _flush_python_stdout() -> None:
    try:
        sys.stdout.flush()  # what Python printed before goes to the real stdout, in order
    except (AttributeError, ValueError, OSError):  # stdout closed or replaced: nothing to keep in order
        pass


@contextlib.contextmanager
def stdout_to_stderr() -> Iterator[None]:
    """fd 1 goes to stderr while the block runs (bcc's compile and load), and comes back after it,
    an exception or not. Threads writing to fd 1 meanwhile would land on stderr too: the trace
    compiles before its readers start, so none does."""
    _flush_python_stdout()
    try:
        saved = os.dup(1)
    except OSError:  # fd 1 closed: nothing there to keep clean
        yield
        return
    try:
        os.dup2(2, 1)
    except OSError:  # fd 2 closed: better bcc's words on stdout than none of its output at all
        os.close(saved)
        yield
        return
    try:
        yield
    finally:
        _flush_c_stdio()
        os.dup2(saved, 1)
        os.close(saved)
