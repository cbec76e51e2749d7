"""Sweep engines, one module per mode behind one interface (``Engine``, base.py), and the table of
them (``ENGINES``, fio's ioengine_ops list): ``run_point`` runs one point of any mode;
``verify_written`` reads back what a write point wrote."""

from __future__ import annotations

import os
import time

from ...errors import GdsdiagError
from ..files import IoBuffer
from . import bounce, cufile, cufile_async, cufile_batch, host, kvikio
from .base import MIN_OPS, Engine, PointError, PointResult, PointSpec, VerifyError, validate  # noqa: F401

# the modes, in the order the help and the errors list them
ENGINES: dict[str, Engine] = {
    e.mode: e
    for e in (cufile.ENGINE, cufile_async.ENGINE, cufile_batch.ENGINE, kvikio.ENGINE, bounce.ENGINE, host.ENGINE)
}
ALL_MODES = tuple(ENGINES)


def engine(mode: str) -> Engine:
    return ENGINES[mode]


def run_point(spec: PointSpec, sf, progress=None) -> PointResult:
    from .base import run_workers

    eng = engine(spec.mode)
    validate(spec, sf.size)
    if spec.workers == "process":
        from .processes import run_processes

        return run_processes(eng, eng.adapt(spec, sf.size), sf, progress)
    return run_workers(eng, eng.adapt(spec, sf.size), sf, progress)


def written_ranges(bitmap, bs: int) -> list[tuple[int, int]]:
    """Merged (data offset, length) ranges of the blocks set in a written-blocks bitmap."""
    import numpy as np

    if bitmap is None:
        return []
    bits = np.unpackbits(bitmap, bitorder="little")
    idx = np.flatnonzero(bits)
    if idx.size == 0:
        return []
    breaks = np.flatnonzero(np.diff(idx) != 1)
    starts = np.concatenate(([idx[0]], idx[breaks + 1]))
    ends = np.concatenate((idx[breaks], [idx[-1]])) + 1
    return [(int(s) * bs, int(e - s) * bs) for s, e in zip(starts, ends)]


def verify_written(sf, ranges: list, chunk: int = 8 << 20) -> tuple[int, int | None, float]:
    """Read back (host, O_DIRECT, the sweep's own descriptor) every range a write point wrote;
    (bytes checked, first bad data offset or None, seconds it took)."""
    from .. import pattern
    from ..files import HEADER_SIZE
    from ..native import load

    t = time.perf_counter()
    if not ranges:
        return 0, None, 0.0
    lib, _ = load()
    iob = IoBuffer(chunk)
    checked = 0
    f = None
    if lib is not None:
        from ..native import ffi

        f = ffi()
        cbuf = iob.cdata(f)
    try:
        for start, length in ranges:
            pos, end = start, start + length
            while pos < end:
                n = min(chunk, end - pos)
                view = iob.view[:n]
                try:
                    got = os.preadv(sf.fd, [view], HEADER_SIZE + pos)
                    if got != n:
                        return checked, pos, time.perf_counter() - t
                    if lib is not None:
                        bad = lib.gd_check(cbuf, n, pos, sf.seed)
                        bad = None if bad < 0 else int(bad)
                    else:
                        bad = pattern.host_first_mismatch(view, pos, sf.seed)
                except OSError as e:
                    raise GdsdiagError(f"reading back {sf.path}: {e.strerror}", "check the storage (dmesg)") from None
                finally:
                    view.release()
                if bad is not None:
                    return checked, bad, time.perf_counter() - t
                checked += n
                pos += n
    finally:
        if f is not None:
            iob.release(f)
        iob.close()
    return checked, None, time.perf_counter() - t
