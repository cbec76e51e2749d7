"""One place decides: which probe yields which evidence, and which evidence yields which route.

The probe program (probes/cufile_trace.c, attached by bpf.py) reports what fired; the classifier asks
this module what it means. Two tables:

- ``USDT_EVIDENCE`` / ``KPROBE_EVIDENCE`` / ``SYSCALL_EVIDENCE``: a probe (and, for kernel returns, its
  return value) → an evidence *kind* for the cuFile call it fired inside;
- ``ROUTE_RULES``: evidence kinds seen inside one cuFile call → its route, subtype and confidence, the
  first rule that matches wins (strongest first);
- ``HOST_RULES``, beside it: what was found of a file I/O outside cuFile (the data-flow model's
  finding, dataflow.py, or the CUDA copy a write carries, hostio.py) → its route and confidence.

Every route and confidence a verdict of the trace gives is written in these two tables.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...routes import Confidence, Route

# libcufile USDT probe (provider:name, as in .note.stapsdt) → evidence kind. "matched" probes carry the
# file offset (arg 2) and size (arg 3) and are matched to the call covering that offset; the others go
# to the newest call of the process on that thread.
USDT_EVIDENCE: dict[str, tuple[str, bool]] = {
    "cufio_core:cufio_px_read": ("px", True),  # the POSIX (compatibility) path, after its pread64
    "cufio_core:cufio_px_write": ("px", True),
    "cufio_core:cufio_px_io_retry": ("retry", False),
    "cufio_core:cufio_gds_read": ("gds", True),  # nvidia-fs (P2P) path taken
    "cufio_core:cufio_gds_write": ("gds", True),
    "cufio_core:cufio_gds_unaligned_write": ("gds", True),
    "cufio_core:cufio_rdma_read": ("rdma", True),  # userspace RDMA
    "cufio_core:cufio_rdma_write": ("rdma", True),
    "0:cufio-internal-read-bb": ("bb", False),  # libcufile's bounce buffers
    "0:cufio-internal-write-bb": ("bb", False),
    "0:cufio-internal-bb-done": ("bb", False),
    "0:cufio-internal-io-done": ("other", False),
    "0:cufio-internal-map": ("other", False),
    # fires when cuFileDriverOpen fails (its message pointer): lets a GPU-less machine see USDT work
    "cufio_core:cufio_core-1106": ("other", False),
}
# probes named by family rather than one by one (their sets differ between libcufile releases)
USDT_FAMILIES: tuple[tuple[str, str], ...] = (
    ("cufio-dr", "dr"),  # dynamic routing through a peer GPU
    ("cuf-p2p", "p2pdma"),
)
ROUTE_USDT = tuple(USDT_EVIDENCE)  # the USDT probes attached by name (bpf.py)
USDT_ARGS_USED = {"cufio_core:cufio_px_read": 3, "cufio_core:cufio_px_write": 3}  # (offset, size read)
# the POSIX probes a cuFile call's own thread folds into the call's exit record (probes/cufile_trace.c
# fold_usdt), with the syscall each follows: the exit names the probe by its index in ROUTE_USDT
USDT_FOLDED = {"cufio_core:cufio_px_read": "SYS_PREAD64", "cufio_core:cufio_px_write": "SYS_PWRITE64"}


def usdt_kind(name: str) -> tuple[str, bool]:
    """(evidence kind, matched by offset) of a USDT probe that fired."""
    hit = USDT_EVIDENCE.get(name)
    if hit is not None:
        return hit
    for prefix, kind in USDT_FAMILIES:
        if name.startswith(prefix):
            return kind, False
    short = name.split(":", 1)[-1]
    if "-bb" in short:
        return "bb", False
    if "retry" in short:
        return "retry", False
    return "other", False


# kernel return probes (probes/nvfs_kprobes.c) → evidence kind by return value ("" = no evidence)
KPROBE_EVIDENCE = {
    "nvfs_get_dma": lambda ret: "nvfs_k" if ret == 0 else "",  # 0: a GPU BAR address handed to the device
    "nvfs_blk_rq_map_sg": lambda ret: "nvfs_k" if ret > 0 else "cpu_k",  # > 0 GPU pages mapped
    "nvfs_dma_map_sg_attrs": lambda ret: "nvfs_k" if ret > 0 else "cpu_k",
    "nvfs_blk_rq_dma_map_iter_start": lambda ret: "nvfs_k" if ret == 1 else "cpu_k",
    "pci_p2pdma_map_segment": lambda ret: "p2pdma" if ret in (3, 4) else "",  # BUS_ADDR, THRU_HOST_BRIDGE
}

# syscalls inside a cuFile call: libcufile's own POSIX I/O, nvidia-fs ioctls, its AIO batch path
SYSCALL_EVIDENCE = {
    "pread64": "posix",
    "pwrite64": "posix",
    "preadv": "posix",
    "pwritev": "posix",
    "preadv2": "posix",
    "pwritev2": "posix",
    "aio": "posix",
    "ioctl": "nvfs_ioctl",  # NVFS_IOCTL_READ / _WRITE only (events.NVFS_IOCTLS)
    "io_submit": "aio",
    "io_uring_enter": "aio",
}


@dataclass(frozen=True)
class RouteRule:
    any_of: frozenset[str]  # the rule matches when one of these kinds fired inside the call
    route: Route
    subtype: str | None
    confidence: Confidence
    all_of: frozenset[str] = frozenset()  # … and, for its confidence, all of these
    else_confidence: Confidence = Confidence.LOW  # confidence when all_of is not met


ROUTE_RULES: tuple[RouteRule, ...] = (
    RouteRule(frozenset({"gds", "nvfs_k"}), Route.NVFS, "nvidia-fs", Confidence.HIGH),
    RouteRule(frozenset({"nvfs_ioctl"}), Route.NVFS, "nvidia-fs", Confidence.MEDIUM),
    RouteRule(frozenset({"p2pdma"}), Route.P2PDMA, "pci-p2pdma", Confidence.HIGH),
    RouteRule(frozenset({"rdma"}), Route.RDMA, "rdma", Confidence.HIGH),
    RouteRule(frozenset({"dr"}), Route.PEER_GPU, "dynamic-routing", Confidence.MEDIUM),
    RouteRule(
        frozenset({"px", "posix", "aio"}),
        Route.COMPAT,
        None,
        Confidence.HIGH,
        frozenset({"px", "posix"}),
        Confidence.MEDIUM,
    ),
)


def decide(kinds: set[str]) -> tuple[Route, str | None, Confidence, list[str]]:
    """(route, subtype, confidence, notes) of a cuFile call from the evidence kinds that fired in it."""
    notes: list[str] = []
    for rule in ROUTE_RULES:
        if kinds & rule.any_of:
            conf = rule.confidence if rule.all_of <= kinds else rule.else_confidence
            if rule.route == Route.COMPAT and "bb" in kinds:
                notes.append("through libcufile's bounce buffers")
            if "cpu_k" in kinds and rule.route.is_p2p:
                notes.append("some requests mapped CPU pages")
            return rule.route, rule.subtype, conf, notes
    if "bb" in kinds:
        return Route.UNKNOWN, None, Confidence.LOW, ["bounce-buffer probes only"]
    return Route.UNKNOWN, None, Confidence.LOW, ["no route evidence fired inside this call"]


_DECIDED: dict[frozenset[str], tuple[Route, str | None, Confidence, tuple[str, ...]]] = {}


def decide_once(kinds: set[str]) -> tuple[Route, str | None, Confidence, tuple[str, ...]]:
    """``decide``, asked once per set of kinds (a dozen kinds: a few sets ever fire), not per call."""
    key = frozenset(kinds)
    hit = _DECIDED.get(key)
    if hit is None:
        route, sub, conf, notes = decide(kinds)
        hit = _DECIDED[key] = (route, sub, conf, tuple(notes))
    return hit


@dataclass(frozen=True)
class HostRule:
    finding: str  # what was found of the I/O (the name the verdict code asks for)
    route: Route
    confidence: Confidence
    why: str  # (for the reader of this table: what makes it so)


# A file I/O outside cuFile (read, write, io_uring, AIO, in-kernel copies, mmap page-cache fills):
# what was found of its bytes → its route and confidence. hostio.py finds which row applies (the
# data-flow model's Source, a write's copy); counted.py gives the kernel-counted I/O their route.
HOST_RULES: tuple[HostRule, ...] = (
    HostRule(
        "direct", Route.DRAM_BOUNCE, Confidence.HIGH, "a CUDA copy of the I/O's own buffer: the address proves it"
    ),
    HostRule(
        "direct-no-address",
        Route.DRAM_BOUNCE,
        Confidence.MEDIUM,
        "a copy matched by direction and size: the I/O's buffer address was not traced (io_uring, v1 records)",
    ),
    HostRule("staged-checked", Route.DRAM_BOUNCE, Confidence.HIGH, "a staged copy whose source holds the file's bytes"),
    HostRule("staged-by-order", Route.DRAM_BOUNCE, Confidence.LOW, "a staged copy tied to the bytes by order only"),
    HostRule("staged-rivals", Route.DRAM_BOUNCE, Confidence.LOW, "a copy other files' bytes waited for too"),
    HostRule("recopy", Route.DRAM_BOUNCE, Confidence.LOW, "a copy from a buffer whose read's bytes were all taken"),
    HostRule("decoded", Route.DRAM_BOUNCE, Confidence.LOW, "a copy that took other bytes of the file (a decode)"),
    HostRule(
        "write-inferred",
        Route.DRAM_BOUNCE,
        Confidence.MEDIUM,
        "a write after a device-to-host copy of its size into another buffer, or into one of its iovecs",
    ),
    HostRule("not-its-bytes", Route.UNKNOWN, Confidence.LOW, "copies followed, but their content is not these bytes"),
    HostRule("elsewhere", Route.UNKNOWN, Confidence.LOW, "copies of its tree no read explains: maybe these bytes"),
    HostRule(
        "lost-in-kernel",
        Route.UNKNOWN,
        Confidence.LOW,
        "counted by the kernel with its file and bytes, its records dropped (the events ring was full)",
    ),
    HostRule("no-copy", Route.HOST, Confidence.MEDIUM, "no CUDA copy took its bytes"),
    HostRule(
        "no-copy-by-elimination",
        Route.HOST,
        Confidence.LOW,
        "no copy taken, but a copy by order, or a larger copy, could have carried these bytes",
    ),
)
HOST_RULE = {r.finding: r for r in HOST_RULES}
