"""Numbers on the command line, checked before any work (docs/security.md, "Bounded readers").

click's INTEGER and FLOAT take what int() and float() take: '١٢' (Arabic-Indic digits), '1_000',
' 5', 'inf', 'nan', '1e400' (inf) and 4,300-digit integers. An option given one of these went on
to run a trace for 'inf' seconds, wait 'nan' seconds for a driver, or crash. These types take
ASCII digits only (bounded.ascii_int / ascii_number), finite, inside a stated range; anything else
is a usage error naming the option and the range: one line, exit 4 (a gdsdiag UsageError, not
click's three-line usage text)."""

from __future__ import annotations

import click

from ..bounded import ascii_int, ascii_number
from ..errors import UsageError


def _fail(value, need: str, param, ctx):
    option = param.opts[0] if param is not None and param.opts else "a value"
    command = f"gdsdiag {ctx.info_name}" if ctx is not None else "gdsdiag"
    raise UsageError(f"{option} {_shown(value)}: {need}", f"see '{command} --help'")


class Whole(click.ParamType):
    """A whole number ``low``..``high`` in ASCII digits."""

    name = "integer"

    def __init__(self, low: int, high: int):
        self.low, self.high = low, high

    def convert(self, value, param, ctx):
        if isinstance(value, int) and not isinstance(value, bool):  # a default
            v: int | None = value
        else:
            v = ascii_int(str(value))
        if v is None or not self.low <= v <= self.high:
            _fail(value, f"must be a whole number from {self.low} to {self.high} (ASCII digits)", param, ctx)
        return v


class Amount(click.ParamType):
    """A finite decimal number above ``low`` (or from it, ``low_open=False``) and at most ``high``."""

    name = "number"

    def __init__(self, low: float, high: float, low_open: bool = True, unit: str = ""):
        self.low, self.high, self.low_open, self.unit = low, high, low_open, unit

    def convert(self, value, param, ctx):
        if isinstance(value, (int, float)) and not isinstance(value, bool):  # a default
            v: float | None = float(value)
        else:
            v = ascii_number(str(value))
        ok = v is not None and (v > self.low if self.low_open else v >= self.low) and v <= self.high
        if not ok:
            low = f"> {self.low:g}" if self.low_open else f">= {self.low:g}"
            _fail(value, f"must be a number {low} and <= {self.high:g}{self.unit} (ASCII digits)", param, ctx)
        return v


def _shown(value) -> str:
    s = str(value)
    return repr(s if len(s) <= 40 else s[:40] + "...")


# (durations -- '3s', '2m' or seconds -- are commands/_common.Duration, through units.parse_duration)
PID = Whole(1, 4_194_304)  # Linux's PID_MAX_LIMIT
PORT = Whole(0, 65_535)  # 0: any free port
GPU_INDEX = Whole(0, 4_095)
