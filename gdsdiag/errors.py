"""The exit codes, the one error hierarchy and the one shape of a command's result.

Every error gdsdiag raises on purpose is a ``GdsdiagError`` carrying the exit code it ends the
command with; ``gdsdiag.cli.main`` is the one place that turns it into a line on stderr and that
code (never a traceback). cuFile failures (``gdsdiag.cufile.errors.CuFileError``) and
data-verification failures are subclasses, so they end the same way. A command that runs to its
end returns a ``Report`` (anything with an ``exit_code``), and ``cli.main`` exits with that code:
no command prints an error or exits by itself."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

# Exit codes, documented in docs/json.md and README: stable across releases.
EXIT_OK = 0
EXIT_WARN = 1
EXIT_FAIL = 2
EXIT_TOOL_ERROR = 3
EXIT_USAGE = 4
EXIT_INTERRUPTED = 130  # SIGINT, as shells report it (128 + 2)


# What every --help ends with (cli.EPILOG; tests/test_exit_path.py checks each command's help).
EXIT_CODES_HELP = (
    "Exit codes: 0 ok, 1 warnings, 2 failures, 3 gdsdiag could not do its job (unreadable or bad input), "
    "4 usage error, 130/143/129 interrupted (docs/json.md)."
)


class Report(Protocol):
    """What a command returns to ``cli.main``: the code the process exits with. ``leave_heap``
    (optional, default False): the process leaves its objects to the OS at exit
    (``commands/_common.exit_leaving_heap``), for reports of a million objects."""

    @property
    def exit_code(self) -> int: ...


@dataclass(frozen=True)
class Outcome:
    """The report of a command whose work has no report object of its own to carry the code (kv,
    report, exporter, and sweep and trace, whose codes the command decides from their results)."""

    exit_code: int
    leave_heap: bool = False


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
    """The command line is wrong, found before any work: exit 4. An option missing, two that
    exclude each other, a value not of its kind (a number, size, duration) or out of range, a path
    that names nothing there (or not the directory an option needs). A file that is there but
    cannot be read, or is not what it should be, is a plain GdsdiagError (exit 3)."""

    exit_code = EXIT_USAGE


def refuse_existing(path: str, option: str) -> None:
    """gdsdiag never overwrites a file: every output path (given with ``option``) must be new."""
    import os

    if os.path.lexists(path):
        raise GdsdiagError(f"{path} exists", f"choose another {option} path; gdsdiag never overwrites files")
