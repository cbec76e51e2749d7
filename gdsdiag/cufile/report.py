"""``gdsdiag cufile``: the libcufile the bindings load, its parameters, and whether
``cuFileDriverOpen`` works (in a child process, with a timeout)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

from ..errors import EXIT_FAIL, EXIT_OK

if TYPE_CHECKING:
    from ..schema import cufile as schema


@dataclass
class CufileReport:
    doc: schema.CufileDoc

    @property
    def exit_code(self) -> int:
        d = self.doc["driver_open"]
        return EXIT_OK if d is None or d["ok"] else EXIT_FAIL


def cufile_info(libcufile_path: str | None = None, try_open: bool = True, timeout: float = 30.0) -> CufileReport:
    from . import all_parameters, load, probe_driver_open

    lib = load(libcufile_path)
    params = all_parameters(lib)
    opened = cast("schema.DriverOpen", probe_driver_open(timeout, lib.path)) if try_open else None
    doc: schema.CufileDoc = {
        "schema": "gdsdiag.cufile/1",
        "library": lib.path,
        "found_via": lib.found_via,
        "version": lib.version,
        "log": lib.log_path,
        "parameters_before_open": params,
        "driver_open": opened,
        "static_config": static_config(),
    }
    return CufileReport(doc)


def static_config() -> schema.StaticConfig:
    """GDS 1.20's static GPU hardware configuration as the cufile.json this process would read
    names it (CUFILE_ENV_PATH_JSON, then /etc/cufile.json): gdsdiag/static_config.py."""
    import os

    from .. import cufile_json
    from .. import static_config as sc
    from ..platform.roots import node_root

    with node_root("/", None) as fs:  # (the node libcufile runs on: its cufile.json, its file)
        return cast("schema.StaticConfig", sc.read(fs, cufile_json.load(fs, dict(os.environ))).to_json())
