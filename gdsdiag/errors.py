"""The one error hierarchy: every error gdsdiag raises on purpose is a ``GdsdiagError`` carrying the
exit code it ends the command with; ``gdsdiag.cli.main`` is the one place that turns it into a line
on stderr and that code (never a traceback). cuFile failures (``gdsdiag.cufile.errors.CuFileError``)
and data-verification failures are subclasses, so they end the same way."""

from __future__ import annotations

# Exit codes, documented in docs/json.md and README: stable across releases.
EXIT_OK = 0
EXIT_WARN = 1
EXIT_FAIL = 2
EXIT_TOOL_ERROR = 3
EXIT_USAGE = 4
EXIT_INTERRUPTED = 130  # SIGINT, as shells report it (128 + 2)


class GdsdiagError(Exception):
    """A problem with input or environment: ``cause`` says what, ``fix`` says what to do."""

    exit_code = EXIT_TOOL_ERROR

    def __init__(self, cause: str, fix: str = ""):
        super().__init__(cause)
        self.cause = cause
        self.fix = fix

    def line(self) -> str:
        # One line whatever the cause text holds (library messages can be multi-line).
        text = f"gdsdiag: error: {self.cause}" + (f" — {self.fix}" if self.fix else "")
        return " ".join(text.split())


class UsageError(GdsdiagError):
    """Bad arguments (a count < 1, a size that is not aligned…), found before any work: exit 4."""

    exit_code = EXIT_USAGE


def refuse_existing(path: str, option: str) -> None:
    """gdsdiag never overwrites a file: every output path (given with ``option``) must be new."""
    import os

    if os.path.lexists(path):
        raise GdsdiagError(f"{path} exists", f"choose another {option} path; gdsdiag never overwrites files")
