"""cufile-batch: cuFile batch I/O, ``--iodepth`` requests in flight per worker (see cufile.py)."""

from __future__ import annotations

from .cufile import CufileBatchEngine

ENGINE = CufileBatchEngine()
