"""What every command's rendering shares."""

from __future__ import annotations

import gc
import json
import os
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, NoReturn, TypeVar

import click

from .. import docout, jsontext


def json_text(doc: Mapping[str, Any], pretty: bool | None = None) -> str:
    """A JSON document as text: indented for a person at a terminal, one compact line for a
    program (a pipe or a file). Python encodes indented JSON in pure Python and compact JSON in
    C: the 4.5 MB topology of a 1,000-device node takes 0.36 s indented and 0.09 s compact
    (docs/benchmarks-history.md). ``pretty`` None: decide by whether stdout is a terminal."""
    if pretty is None:
        pretty = docout.stream().isatty()
    if pretty:
        return json.dumps(doc, indent=2)
    return jsontext.compact(doc)


def emit_json(doc: Mapping[str, Any]) -> None:
    """A command's JSON document on stdout (schemas in docs/json.md)."""
    docout.stream().write(json_text(doc) + "\n")


@contextmanager
def paused_gc() -> Iterator[None]:
    """The cyclic garbage collector paused while a command builds an object graph it keeps to the
    end (a large node's topology: ~1M objects, which the collector would walk again and again to
    free nothing); restored afterwards, so a caller in the same process (tests) is unaffected."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


# True in the process the console script started (cli.main): there the command's end is the
# process's end. False under click's test runner or a program that embeds the click group.
PROCESS_ENTRY = False


def exit_leaving_heap(code: int) -> NoReturn:
    """``sys.exit(code)`` for a command whose report holds no open file, leaving the process's
    objects to the OS: a large topology is ~1M objects, and the interpreter's last collection and
    its teardown freed them one by one -- 40-80 ms after the output was written (docs/benchmarks-history.md).
    In the console script's own process the exit handlers run and stdout is flushed, then the
    process ends there (``os._exit``); elsewhere the collector is frozen at exit instead."""
    import atexit

    if not PROCESS_ENTRY:
        atexit.register(gc.freeze)
        sys.exit(code)
    try:
        sys.stdout.flush()
    except BrokenPipeError:  # the reader went away: as cli.main answers it
        code = 0
    atexit._run_exitfuncs()
    sys.stderr.flush()
    os._exit(code)


# Options several commands share, written once so that their names, defaults and help agree.
_F = TypeVar("_F", bound=Callable[..., Any])


def node_options(verb: str, root_help: str = "Read sysfs/procfs under this directory.") -> Callable[[_F], _F]:
    """--root DIR and --from FILE: where the command reads the node (platform/roots.node_root)."""

    def deco(f: _F) -> _F:
        f = click.option("--from", "snapshot", metavar="FILE", help=f"{verb} a snapshot made by 'gdsdiag snapshot'.")(f)
        return click.option("--root", default="/", show_default=True, help=root_help)(f)

    return deco


def only_the_document(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    """The callback of every option that writes a JSON document to stdout: for the command's run,
    what anything else prints there (bcc, a library, a child) goes to stderr (docout)."""
    if value is True or value == "-":
        ctx.with_resource(docout.json_document())
    return value


def json_option(schema: str) -> Callable[[_F], _F]:
    """--json: the command's document on stdout (docs/json.md)."""
    return click.option(
        "--json",
        "as_json",
        is_flag=True,
        callback=only_the_document,
        help=f"Write the JSON document (schema {schema}).",
    )


def paths_option(help: str) -> Callable[[_F], _F]:
    """--path DIR, repeatable: directories on the storage the command looks at."""
    return click.option("--path", "paths", multiple=True, metavar="DIR", help=help)


class Duration(click.ParamType):
    """A duration option: '3s', '500ms', '2m' or plain seconds, read by ``units.parse_duration`` as
    every command reads durations (sweep --time too), and more than ``low`` and at most ``high``
    seconds. A bad one is a UsageError (exit 4) naming the option."""

    name = "duration"

    def __init__(self, low: float = 0.0, high: float = 7 * 86400.0, example: str = "10s") -> None:
        self.low, self.high, self.example = low, high, example

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        from ..errors import UsageError
        from ..units import parse_duration

        option = param.opts[0] if param is not None and param.opts else "duration"
        if isinstance(value, float):  # a default, already seconds
            return value
        try:
            seconds = parse_duration(str(value))
        except ValueError as e:
            raise UsageError(f"{option}: {e}", f"e.g. {option} {self.example}") from None
        if not self.low < seconds <= self.high:
            raise UsageError(
                f"{option} {str(value)[:40]!r}: must be more than {self.low:g} s and at most {self.high:g} s",
                f"e.g. {option} {self.example}",
            )
        return seconds
