"""``gdsdiag cufile``: parse options, render the report of gdsdiag.cufile.report, return it (cli.main exits with its code)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, cast

import click

from ._common import Duration, emit_json, json_option

if TYPE_CHECKING:
    from ..schema.cufile import DriverFailed, DriverOpened


@click.command("cufile")
@click.option("--libcufile", "libcufile_path", metavar="PATH", help="Use this libcufile instead of searching.")
@click.option(
    "--no-open", is_flag=True, help="Do not try cuFileDriverOpen (it runs in a child process with a timeout)."
)
@click.option(
    "--timeout",
    default=30.0,
    show_default=True,
    type=Duration(example="30s"),
    help="Time to wait for cuFileDriverOpen: seconds, or 30s, 2m.",
)
@json_option("gdsdiag.cufile/1")
def cufile_cmd(libcufile_path, no_open, timeout, as_json):
    """libcufile as the bindings see it: where it was found, version, parameters, and whether the
    driver opens (decoded properties) or fails (named error and the cufile.log tail)."""
    from ..cufile.report import cufile_info

    if not no_open and not as_json and sys.stderr.isatty():
        # the open runs in a child that may take the whole timeout: say so before waiting
        click.echo(f"opening the cuFile driver in a child process (at most {timeout:g} s)...", err=True)
    report = cufile_info(libcufile_path, not no_open, timeout)
    doc = report.doc
    if as_json:
        emit_json(doc)
    else:
        v = doc["version"]  # cuFileGetVersion: 1200 is 1.20 (it carries no patch level: 1.15.1 is 1150)
        shown = f"{v // 1000}.{v % 1000 // 10}" if isinstance(v, int) else str(v)
        from ..cufile._lib import LOG_REFUSED

        refused = f" (refused {LOG_REFUSED})" if LOG_REFUSED and doc["log"] == "/dev/null" else ""
        click.echo(f"libcufile {shown} at {doc['library']} (via {doc['found_via']}); log {doc['log']}{refused}")
        d = doc["driver_open"]
        if d is None:
            click.echo("driver open: not tried (--no-open)")
        elif d["ok"]:
            p: dict[str, Any] = cast("DriverOpened", d)["properties"]
            click.echo(
                f"driver open: OK — nvidia-fs {'%d.%d' % (p['nvfs_major'], p['nvfs_minor']) if p['nvfs_loaded'] else 'not loaded (compatibility mode)'}, "
                f"control {', '.join(p['control_flags']) or '-'}, storage {', '.join(p['status_flags']) or '-'}, "
                f"max direct I/O {p['max_direct_io_size_kb']} KiB"
            )
        else:
            failed = cast("DriverFailed", d)
            if failed.get("name") == "NOT_CALLED":
                click.echo(f"driver open: NOT CALLED — {failed['error']}")
            else:
                click.echo(f"driver open: FAILED — {failed['error']}")
                if failed.get("log_tail"):
                    click.echo("cufile.log tail:\n" + failed["log_tail"].rstrip())
        sc = doc["static_config"]
        if sc["enabled"] is not None or sc["present"]:  # (a cufile.json that says nothing of it: no line)
            click.echo(f"static GPU config (GDS 1.20): {sc['summary']}")
    return report
