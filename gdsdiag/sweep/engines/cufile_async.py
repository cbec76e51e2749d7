"""cufile-async: stream-ordered cuFile (cuFileReadAsync/WriteAsync on a registered stream per
worker, registered GPU buffer). Python loop: each I/O is issued and its stream synchronised from
Python, so Python's per-I/O cost is in these numbers (the result says ``loop: python``)."""

from __future__ import annotations

from . import cufile as _cufile
from .cufile import close_point, open_point  # noqa: F401  (same shared handle)

GPU = True


class Worker(_cufile.Worker):
    def __init__(self, point, idx):
        super().__init__(point, idx)
        self.native = False
        self.sreg = None

    def prepare(self):
        from ... import cufile

        super().prepare()
        self.sreg = cufile.StreamRegistration(self.stream).register()

    def io(self, slot, off):
        from ..files import HEADER_SIZE

        fh = self.point.shared["fh"]
        fn = fh.read_async if self.spec.is_read else fh.write_async
        op = fn(self.gbuf, self.spec.bs, HEADER_SIZE + off, 0, self.stream)
        self.stream.synchronize()
        return op.result

    def close(self):
        if self.sreg is not None:
            self.sreg.deregister()
            self.sreg = None
        super().close()
