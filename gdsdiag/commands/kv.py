"""gdsdiag kv: what the measured storage bandwidth means for a model's KV cache."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from ..errors import EXIT_OK, Outcome, UsageError
from ..units import human_bytes
from ._common import emit_json, json_option
from ._numbers import Amount, Whole

if TYPE_CHECKING:
    from ..schema.kv import KvDoc


def _read_json(path: str, what: str):
    """Through the one bounded reader: a FIFO or /dev/zero is refused at once, nesting, numbers
    and size bounded, errors name the file and line."""
    from ..bounded import MAX_REPORT_JSON, load_user_json

    return load_user_json(path, what, MAX_REPORT_JSON, f"give the {what} as JSON")


def _positive(v: float | None, option: str, most: float) -> None:
    """Every number argument finite and in range before any work ('--gbps nan' printed 'nan ms')."""
    import math

    if v is not None and not (math.isfinite(v) and 0 < v <= most):
        raise UsageError(f"{option} {v!r}: not a number above 0 and at most {most:g}", "see gdsdiag kv --help")


def _ms(s: float | None) -> str:
    return "-" if s is None else f"{s * 1e3:,.2f} ms"


@click.command("kv")
@click.option(
    "--model-config",
    "model_config",
    required=True,
    metavar="config.json",
    help="The model's Hugging Face config.json (a local file).",
)
@click.option(
    "--sweep", "sweep_file", metavar="FILE", help="A 'gdsdiag sweep --json' document: its best GPU read/write GB/s."
)
@click.option(
    "--gbps", type=Amount(0, 1e6), help="Storage bandwidth in GB/s (1e9 B/s) for both directions, instead of --sweep."
)
@click.option("--tokens", type=Whole(1, 10**12), default=4096, show_default=True, help="Prefix length in tokens.")
@click.option(
    "--prefill-tps",
    type=Amount(0, 1e12),
    help="Measured prefill rate (tokens/s) for the recompute time and break-even hit rate.",
)
@click.option("--kv-dtype", help="KV cache dtype when it differs from torch_dtype (e.g. float8_e4m3fn).")
@json_option("gdsdiag.kv/1")
def kv(model_config, sweep_file, gbps, tokens, prefill_tps, kv_dtype, as_json):
    """KV bytes per token of a model, the time to load/store a prefix at the measured bandwidth, the
    time to recompute it, and the prefix hit rate above which offloading pays."""
    from ..kv import estimate, gbps_from_sweep, kv_shape

    _positive(gbps, "--gbps", 1e6)
    _positive(prefill_tps, "--prefill-tps", 1e12)
    _positive(float(tokens), "--tokens", 1e12)
    if (sweep_file is None) == (gbps is None):
        raise UsageError("give exactly one of --sweep FILE and --gbps N", "see gdsdiag kv --help")
    shape = kv_shape(_read_json(model_config, "model config"), kv_dtype, model_config)
    if sweep_file:
        rd, wr, source = gbps_from_sweep(_read_json(sweep_file, "sweep"), sweep_file)
    else:
        rd = wr = gbps
        source = "--gbps"
    est = estimate(shape, tokens, rd, wr, prefill_tps)
    if as_json:
        doc: KvDoc = {
            "schema": "gdsdiag.kv/1",
            "model_config": model_config,
            "shape": shape.to_json(),
            "bandwidth_source": source,
            "estimate": est,
        }
        emit_json(doc)
    else:
        click.echo(
            f"{shape.model}: {shape.attention}, {shape.bytes_per_token:,} B/token ({shape.formula}; {shape.dtype})"
        )
        click.echo(
            f"prefix of {tokens:,} tokens = {human_bytes(est['bytes'], 2, sep=' ', span=('TiB', 'KiB'), word='B', group=True)}"
        )
        click.echo(f"bandwidth: read {rd:.3f} GB/s, write {wr:.3f} GB/s ({source})")
        click.echo(f"load {_ms(est['t_load_s'])}, store {_ms(est['t_store_s'])}, recompute {_ms(est['t_recompute_s'])}")
        click.echo(est["note"])
    return Outcome(EXIT_OK)
