"""``gdsdiag.cufile/1`` (docs/json.md)."""

from __future__ import annotations

from typing import TypedDict


class DriverOpened(TypedDict):
    ok: bool  # True
    hung: bool
    library: str
    version: int | None
    use_count: int
    properties: dict[str, object]  # the decoded CUfileDrvProps_t (cufile/driver.py)


class _DriverFailed(TypedDict):
    ok: bool  # False
    hung: bool
    error: str


class DriverFailed(_DriverFailed, total=False):
    code: int  # a CU_FILE_* error: its code, name and the cufile.log tail
    name: str
    log_tail: str
    library: str  # when libcufile loaded before the failure
    version: int | None


DriverOpen = DriverOpened | DriverFailed


class StaticConfig(TypedDict):
    """GDS 1.20's static GPU hardware configuration (gdsdiag/static_config.py)."""

    cufile_json: str | None  # the cufile.json in effect; None: none read
    enabled: bool | None  # miscellaneous.enable_static_config (None: unset)
    path: str | None  # miscellaneous.static_config_filepath (None: unset)
    present: bool | None  # the file exists (None: no path)
    bytes: int | None
    format: str  # "format not documented by NVIDIA: its contents are not read"
    summary: str


class CufileDoc(TypedDict):
    schema: str
    library: str
    found_via: str
    version: int | None
    log: str
    parameters_before_open: dict[str, object]
    driver_open: DriverOpen | None  # None with --no-open
    static_config: StaticConfig
