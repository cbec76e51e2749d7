"""cufile-batch: cuFile batch I/O, ``--iodepth`` requests in flight per worker (see cufile.py)."""

from __future__ import annotations

from . import cufile as _cufile
from .cufile import close_point, open_point  # noqa: F401  (the same registered file handle)

GPU = True


class Worker(_cufile.Worker):
    api = "batch"
