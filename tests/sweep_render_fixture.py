"""A SweepReport from a sweep's JSON document (what the text renderer reads), for tests of the table.
Fields a rebuilt document lacks (sweep_fixture's, from the GPU machine's CSV) take the defaults."""

import dataclasses

from gdsdiag.sweep.runner import PointRecord, SweepConfig, SweepReport


def report_from_doc(doc: dict) -> SweepReport:
    c = doc["config"]
    cfg = SweepConfig(
        c["dir"], c.get("size", 4 << 30), c.get("bs", []), c.get("threads", []), c.get("rw", []), c["modes"],
        c.get("gpu", 0), c.get("seconds"), c.get("bytes"), c.get("verify", True), c.get("iodepth", 1),
        c.get("compare_fio", False), c.get("fio_jobs") or "match", c.get("workers", "thread"),
    )  # fmt: skip
    known = {f.name for f in dataclasses.fields(PointRecord)}
    points = [PointRecord(**{k: v for k, v in p.items() if k in known}) for p in doc["points"]]
    return SweepReport(cfg, points, doc.get("ceilings", {}), "", doc["machine"], doc.get("prepare_seconds", 0.0))
