"""cufile-batch: cuFile batch I/O — each operation is one batch of BATCH_DEPTH requests of --bs
over a contiguous region (cuFileBatchIOSubmit + GetStatus until all complete). Python loop."""

from __future__ import annotations

from . import cufile as _cufile
from .base import PointSpec, UsageError
from .cufile import close_point, open_point  # noqa: F401

GPU = True
BATCH_DEPTH = 8


def adapt(spec: PointSpec, size: int) -> PointSpec:
    inner = PointSpec(
        spec.mode,
        spec.rw,
        spec.bs * BATCH_DEPTH,
        spec.threads,
        spec.seconds,
        spec.total_bytes,
        spec.verify,
        spec.gpu,
        task_size=spec.bs,
    )
    if size < inner.bs * spec.threads:
        raise UsageError(
            f"threads × {BATCH_DEPTH} × bs = {inner.bs * spec.threads} exceeds the file size {size}", "raise --size"
        )
    return inner


class Worker(_cufile.Worker):
    def __init__(self, point, idx):
        super().__init__(point, idx)
        self.native = False
        self.batch = None

    def prepare(self):
        super().prepare()
        from ... import cufile

        self.batch = cufile.Batch(BATCH_DEPTH).__enter__()

    def io(self, slot, off):
        from ... import cufile
        from ..files import HEADER_SIZE

        fh, task = self.point.shared["fh"], self.spec.task_size
        op = "read" if self.spec.is_read else "write"
        self.batch.submit(
            [
                cufile.IoRequest(fh, op, self.gbuf, task, HEADER_SIZE + off + i * task, i * task, cookie=i + 1)
                for i in range(BATCH_DEPTH)
            ]
        )
        events = self.batch.wait(BATCH_DEPTH)
        if [e for e in events if e.status != "COMPLETE" or e.ret != task]:
            return sum(max(e.ret, 0) for e in events if e.status == "COMPLETE")
        return task * BATCH_DEPTH

    def close(self):
        if self.batch is not None:
            self.batch.destroy()
            self.batch = None
        super().close()
