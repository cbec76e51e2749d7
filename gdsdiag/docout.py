"""Where a ``--json`` document goes: stdout, and nothing else there.

docs/json.md promises that stdout carries only the document. What gdsdiag writes it controls; what a
library writes it does not: bcc's C++ loader (``std::cout``), bcc's Python (``print`` of "Error
adding module to build sym cache", perf.py's warnings), a CUDA or cuFile library's ``printf``, a
child process that inherits fd 1. So for a command's JSON run fd 1 itself points at stderr, and the
document is written to a copy of the original fd 1 that only gdsdiag holds: whatever else is
printed, by Python or C, in this process or a child, lands on stderr.

``json_document()`` is entered by the ``--json`` option of each command (commands/_common) and left
when the command ends; ``stream()`` is the document's stream (sys.stdout outside a JSON run, or
where sys.stdout is no file at fd 1: a test runner's capture, trace ``-o``'s redirect).
``child_stdout()`` is the fd a traced program is given, so that it keeps sharing the user's stdout
as docs/trace.md says; ``redirect_to(f)`` sends the document to a file instead (trace ``-o``).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import sys
from collections.abc import Iterator
from typing import IO

_doc: IO[str] | None = None  # where the document goes while a JSON run holds fd 1 on stderr
_user_fd: int | None = None  # the original stdout's copy, for a child that shares it


def stream() -> IO[str]:
    """The stream a document is written to."""
    return _doc if _doc is not None else sys.stdout


def child_stdout() -> int | None:
    """The fd a child that shares the user's stdout gets (None: inherit fd 1 as is)."""
    return _user_fd


@contextlib.contextmanager
def redirect_to(f: IO[str]) -> Iterator[None]:
    """The document goes to ``f`` for the block (and what Python prints there still does not)."""
    global _doc
    was = _doc
    _doc = f
    try:
        yield
    finally:
        _doc = was


def _fd1_is_sys_stdout() -> bool:
    try:
        return sys.stdout is not None and sys.stdout.fileno() == 1
    except (AttributeError, ValueError, OSError):  # a test runner's capture, a closed stream
        return False


def _flush_c_stdio() -> None:
    """C's stdout buffer holds what a library printf'd (fully buffered on a pipe): out now, while fd 1
    is still the one it was meant for (stderr inside the block)."""
    try:
        ctypes.CDLL(None).fflush(None)
    except (OSError, AttributeError):  # no C library to ask: nothing buffered there
        pass


@contextlib.contextmanager
def json_document() -> Iterator[None]:
    """fd 1 on stderr for the block, the document on a private copy of the original stdout."""
    global _doc, _user_fd
    if _user_fd is not None or not _fd1_is_sys_stdout():
        yield  # nested, or stdout is not the process's fd 1: nothing to move
        return
    try:
        sys.stdout.flush()
        saved = os.dup(1)
        os.set_inheritable(saved, False)  # a child gets fd 1 (stderr), never the document's copy
        os.dup2(2, 1)
    except OSError:  # fd 1 or 2 closed: nothing to keep apart
        yield
        return
    doc = os.fdopen(saved, "w", encoding=sys.stdout.encoding or "utf-8", errors="strict", closefd=True)
    _doc, _user_fd = doc, saved
    failed: BaseException | None = None
    try:
        yield
    finally:
        _doc, _user_fd = None, None
        try:
            sys.stdout.flush()  # a library's Python prints: to stderr, where fd 1 points now
        except (ValueError, OSError):
            pass
        _flush_c_stdio()
        try:
            doc.flush()
        except BrokenPipeError as e:  # the reader went away: answered by cli.main as for any write
            failed = e
        except (ValueError, OSError):
            pass
        os.dup2(saved, 1)
        try:
            doc.close()
        except (BrokenPipeError, ValueError, OSError):
            pass
    if failed is not None:  # (reached only when the block itself raised nothing)
        raise failed
