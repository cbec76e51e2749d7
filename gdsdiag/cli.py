"""Command line: the click group, command registration and the one exit path. Heavy modules
(cupy, kvikio, bcc, cffi) are imported inside commands only, so ``gdsdiag --help`` and
``gdsdiag topology`` answer at once on a bare node."""

from __future__ import annotations

import sys
from typing import cast

import click

from . import __version__
from .errors import (
    EXIT_CODES_HELP,
    EXIT_OK,
    EXIT_TOOL_ERROR,
    EXIT_USAGE,
    GdsdiagError,
    Report,
)

# The CLI layer: one module per command under gdsdiag/commands (parse, render, exit); the work
# is done by the report functions of the packages they call. A command's module is imported when
# that command runs (or --help lists them all): `gdsdiag topology` need not load the sweep's or
# the exporter's options, a tenth of its start-up (docs/benchmarks-history.md).
COMMANDS = {  # name -> (module under gdsdiag.commands, the click command in it)
    "topology": ("topology", "topology"),
    "check": ("check", "check"),
    "cufile": ("cufile", "cufile_cmd"),
    "sweep": ("sweep", "sweep"),
    "trace": ("trace", "trace"),
    "snapshot": ("snapshot", "snapshot"),
    "explain": ("explain", "explain"),
    "diff": ("diff", "diff"),
    "validate": ("validate", "validate"),
    "report": ("report", "report"),
    "exporter": ("exporter", "exporter"),
    "kv": ("kv", "kv"),
}


class _ReaderGone(Exception):
    """stdout's reader went away (``| head``): click answers a broken pipe with exit 1 before
    main() sees it, which reads as "warnings"; this carries it past click to main's answer."""


class _Commands(click.Group):
    """The commands of COMMANDS, each imported at its first use."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except BrokenPipeError as e:
            raise _ReaderGone from e

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        where = COMMANDS.get(cmd_name)
        if where is None:
            return None
        import importlib

        command = getattr(importlib.import_module(f"gdsdiag.commands.{where[0]}"), where[1])
        assert isinstance(command, click.Command) and command.name == cmd_name, (cmd_name, command)
        command.epilog = EXIT_CODES_HELP  # every --help names the exit codes, in the same words
        return command


@click.group(cls=_Commands, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="gdsdiag")
@click.option(
    "--allow-user-files",
    is_flag=True,
    help="As root, use the files and programs the environment names (GDSDIAG_LIBCUFILE, CUDA_HOME, CC, "
    "GDSDIAG_FIO, CUFILE_ENV_PATH_JSON, CUFILE_LOGFILE_PATH) even where another user owns or can write "
    "them; each use is said on stderr (docs/security.md). Same as GDSDIAG_ALLOW_USER_FILES=1.",
)
def cli(allow_user_files: bool) -> None:
    """Diagnose the GPUDirect Storage data path: PCIe topology, drivers, and the route I/O takes."""
    if allow_user_files:
        from .envtrust import allow_user_files as allow

        allow()


def exit_code_of(result: object) -> int:
    """The code a command's result ends the process with: a report's ``exit_code``; click's own
    ends (--help, --version) come back as the int code."""
    if result is None or isinstance(result, int):
        return int(result or EXIT_OK)
    code = cast(Report, result).exit_code
    assert isinstance(code, int), (type(result).__name__, code)  # a command returned no report
    return code


def _reader_gone_is_a_broken_pipe() -> None:
    """rich answers a broken pipe itself (``Console.on_broken_pipe``: stdout onto /dev/null, then
    ``SystemExit(1)``), so ``gdsdiag check | head -1`` ended with 1, "warnings", where click's own
    writes end with 0 (docs/json.md; issue 46). rich's console is made quiet and the error goes on
    as the BrokenPipeError main() answers."""
    import errno

    from rich.console import Console

    def on_broken_pipe(self: Console) -> None:
        self.quiet = True
        raise BrokenPipeError(errno.EPIPE, "stdout's reader went away")

    Console.on_broken_pipe = on_broken_pipe


def _echo_never_drives_the_terminal() -> None:
    """click.echo (the plain-text renderers: diff, kv, explain, error lines) with data's control
    characters replaced (gdsdiag/terminal.py); here, as only the command line imports click."""
    import click.utils

    from .terminal import filtered

    click.echo = click.utils.echo = filtered(click.echo)


def main() -> None:
    """The one exit path: a command returns its report and the process exits with the report's
    code; every GdsdiagError (usage, cuFile and verification errors included) becomes one line on
    stderr and the exit code it carries. Nothing else in gdsdiag prints an error or exits."""
    from . import signals
    from .commands import _common

    _common.PROCESS_ENTRY = True  # the process ends with the command (_common.exit_leaving_heap)
    try:
        signals.install()  # SIGTERM/SIGHUP clean up like Ctrl-C; exit 143/129 (docs/security.md)
        _reader_gone_is_a_broken_pipe()
        _echo_never_drives_the_terminal()
        result = cli.main(standalone_mode=False)
    except GdsdiagError as e:
        click.echo(e.line(), err=True)
        sys.exit(e.exit_code)
    except click.exceptions.Exit as e:
        sys.exit(e.exit_code)
    except click.ClickException as e:
        e.show()
        sys.exit(EXIT_USAGE)
    except (click.exceptions.Abort, KeyboardInterrupt) as e:
        click.echo(f"gdsdiag: interrupted ({signals.signal_name(e)}); files it created were removed", err=True)
        sys.exit(signals.exit_code(e))
    except (BrokenPipeError, _ReaderGone):
        # nothing more can be written there: what stdout still buffers goes nowhere (no second
        # error at exit), and the command's end is a normal one (a traced tree was stopped with it)
        import os

        try:
            sys.stdout = open(os.devnull, "w")
        except OSError:
            pass
        sys.exit(EXIT_OK)
    except Exception as e:  # a bug in gdsdiag itself: one line, exit 3, details on request
        import os

        if signals.interruption_in(e) is not None:  # a signal inside an import, wrapped by Python
            click.echo(f"gdsdiag: interrupted ({signals.signal_name(e)}); files it created were removed", err=True)
            sys.exit(signals.exit_code(e))

        if os.environ.get("GDSDIAG_DEBUG"):
            raise
        click.echo(
            f"gdsdiag: internal error: {type(e).__name__}: {e} (set GDSDIAG_DEBUG=1 for the traceback)", err=True
        )
        sys.exit(EXIT_TOOL_ERROR)
    code = exit_code_of(result)
    if getattr(result, "leave_heap", False):
        _common.exit_leaving_heap(code)
    sys.exit(code)
