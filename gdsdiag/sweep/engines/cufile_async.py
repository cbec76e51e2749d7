"""cufile-async: stream-ordered cuFile, ``--iodepth`` registered streams per worker (see cufile.py)."""

from __future__ import annotations

from .cufile import CufileAsyncEngine

ENGINE = CufileAsyncEngine()
