"""``gdsdiag cufile``: the libcufile the bindings load, its parameters, and whether
``cuFileDriverOpen`` works (in a child process, with a timeout)."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import EXIT_FAIL, EXIT_OK


@dataclass
class CufileReport:
    doc: dict  # the gdsdiag.cufile/1 document

    @property
    def exit_code(self) -> int:
        d = self.doc["driver_open"]
        return EXIT_OK if d is None or d["ok"] else EXIT_FAIL


def cufile_info(libcufile_path: str | None = None, try_open: bool = True, timeout: float = 30.0) -> CufileReport:
    from . import all_parameters, load, probe_driver_open

    lib = load(libcufile_path)
    doc = {
        "schema": "gdsdiag.cufile/1",
        "library": lib.path,
        "found_via": lib.found_via,
        "version": lib.version,
        "log": lib.log_path,
        "parameters_before_open": all_parameters(lib),
    }
    doc["driver_open"] = probe_driver_open(timeout, lib.path) if try_open else None
    return CufileReport(doc)
