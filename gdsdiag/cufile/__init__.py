"""Thin, typed cffi bindings over libcufile (ABI mode; importable without cupy or CUDA).

    from gdsdiag.cufile import Driver, FileHandle, BufferRegistration
    with Driver() as drv, FileHandle("/mnt/nvme/f", "r") as fh:
        n = fh.read(cupy_array, nbytes, file_offset=0)

docs/cufile.md documents every call with an example.
"""

from . import stats
from ._lib import Library, load, log_tail
from .driver import (
    Driver,
    DriverProperties,
    all_parameters,
    get_parameter,
    parameter_range,
    posix_pool_slabs,
    set_parameter,
    set_posix_pool_slabs,
    version,
)
from .errors import ERRORS, OP_ERRORS, CuFileError, CuFileOSError, error_for
from .io import AsyncOp, Batch, BufferRegistration, FileHandle, IoEvent, IoRequest, StreamRegistration, device_pointer
from .probe import probe_driver_open
from .stats import PathMix, path_mix

__all__ = [
    "Library",
    "load",
    "log_tail",
    "Driver",
    "DriverProperties",
    "all_parameters",
    "get_parameter",
    "parameter_range",
    "posix_pool_slabs",
    "set_parameter",
    "set_posix_pool_slabs",
    "version",
    "ERRORS",
    "OP_ERRORS",
    "CuFileError",
    "CuFileOSError",
    "error_for",
    "AsyncOp",
    "Batch",
    "BufferRegistration",
    "FileHandle",
    "IoEvent",
    "IoRequest",
    "StreamRegistration",
    "device_pointer",
    "probe_driver_open",
    "PathMix",
    "path_mix",
    "stats",
]
