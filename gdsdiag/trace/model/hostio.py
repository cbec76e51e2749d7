"""The verdicts of file I/O outside cuFile: a read the data-flow model (dataflow.py) decided, a
mapped file's bytes a copy took, a page-cache fill, or a write with the CUDA copy that filled its
buffer. What was found picks a row of evidence.HOST_RULES (its route and confidence); this module
writes the evidence that says why. Reads the process state (procstate.py) and the data-flow model;
each verdict goes back to the dispatcher (classify.Classifier), which emits it. Pure: no I/O."""

from __future__ import annotations

from collections import deque
from collections.abc import Container, Sequence
from typing import TYPE_CHECKING

from ...routes import Confidence, Route
from .content import HASH_MASK, ContentCheck
from .dataflow import RETAIN_NS, DataFlow, MappedFile, Source, Taken, TakenRead, staged_ok
from .events import SYS_NAMES, Event
from .evidence import HOST_RULE
from .procstate import ProcState
from .records import COPY_WINDOW_NS, IN_KERNEL, VFORMS, Batched, HostIo, io_line

if TYPE_CHECKING:
    from ...schema import trace as schema

# the rows of evidence.HOST_RULES this module picks
_DIRECT = HOST_RULE["direct"]
_DIRECT_NO_ADDRESS = HOST_RULE["direct-no-address"]
_STAGED_CHECKED = HOST_RULE["staged-checked"]
_STAGED_BY_ORDER = HOST_RULE["staged-by-order"]
_STAGED_RIVALS = HOST_RULE["staged-rivals"]
_RECOPY = HOST_RULE["recopy"]
_DECODED = HOST_RULE["decoded"]
_WRITE_INFERRED = HOST_RULE["write-inferred"]
_NOT_ITS_BYTES = HOST_RULE["not-its-bytes"]
_ELSEWHERE = HOST_RULE["elsewhere"]
_NO_COPY = HOST_RULE["no-copy"]
_NO_COPY_ELIMINATED = HOST_RULE["no-copy-by-elimination"]
_BOUNCE = _DIRECT  # (a bounce pair: a read, then a copy of exactly its buffer)


def _rivals_text(rivals: tuple[str, ...]) -> str:
    """The evidence note of bytes a staged copy took while bytes of other files waited too."""
    names = ", ".join(r.rsplit("/", 1)[-1] for r in rivals)
    return (
        f"inferred from order: bytes of other files were waiting for this copy too ({names}); which file's "
        "bytes it took is not known"
    )


def _checked_text(offset: int) -> str:
    """The evidence note of a staged copy whose source was seen to hold the file's bytes."""
    return (
        f"checked by content: the copy's source holds this file's bytes at offset {offset} (fingerprints of "
        "its first bytes and of the file's, compared)"
    )


_BY_ORDER = "inferred from order, the oldest file bytes not yet copied: not checked by content ({})"
_BY_ORDER_TEXTS = (
    _BY_ORDER.format("this recording has no content checks (made before gdsdiag compared them)"),
    _BY_ORDER.format("the probe could not read the copy's source"),
    _BY_ORDER.format("the file's bytes could not be compared (unreadable, changed since, or too uniform to tell)"),
)


def _by_order_text(c: Sequence[int], checking: bool) -> str:
    """Why a staged copy's bytes are tied to the file by order only (low confidence)."""
    if not checking:
        return _BY_ORDER_TEXTS[0]
    sampled = len(c) > 6 and (c[6] >> 30) & HASH_MASK  # (the probe's hash of the source's first bytes)
    return _BY_ORDER_TEXTS[2 if sampled else 1]


def _copy_brief(c: Sequence[int], t: int) -> str:
    return f"CUDA copy host {c[3]:#x} -> GPU {c[2]:#x}, {c[4]} bytes, {(c[0] - t) / 1e6:+.3f} ms after it"


def _differs_text(src: Source, t: int) -> str:
    """Why a read no copy took is UNKNOWN although copies followed it: they did not carry its bytes."""
    if src.changed is not None:
        return (
            f"its buffer was copied to the GPU ({_copy_brief(src.changed, t)}) after other bytes were written into "
            "it (the probe saw the buffer differ from what this read put there): these bytes may have been "
            "transformed in place, or replaced; the trace cannot tell which"
        )
    c = src.differs
    assert c is not None
    return (
        f"a CUDA copy from another buffer followed ({_copy_brief(c, t)}), but not of these bytes (checked by "
        "content: its source's fingerprint differs from this file's bytes): the program decoded or converted "
        "them, or copied other data; the trace cannot tell which"
    )


class HostVerdicts:
    """The CUDA copies of each process (``memcpy``), and the verdicts of host I/O against them."""

    def __init__(self, state: ProcState, flow: DataFlow):
        self.state, self.flow = state, flow
        self.content = ContentCheck()  # (Classifier.use_content sets the one in use)
        self.memcpy: dict[int, deque] = {}  # pid -> recent cuMemcpy events
        # (pid, tid, ts) of the device-to-host copies whose bytes a write was inferred to carry
        # (copy_of: one copy's bytes go to the file once, as a read's bytes are taken once)
        self.copy_taken: set[tuple[int, int, int]] = set()
        # processes that made a CUDA copy other than host to device: a later write may be matched to
        # it (copy_of), so their copies are never taken in bulk (Classifier.bounce_ok)
        self.copied_back: set[int] = set()

    def note_copy(self, e: Event) -> None:
        """A cuMemcpy of E's process, kept for the writes to come (copy_of)."""
        q = self.memcpy.get(e.pid)
        if q is None:
            q = self.memcpy[e.pid] = deque(maxlen=4096)
        q.append(e)
        a = e.args
        if (a[3] if len(a) > 3 else 0) != 1:
            self.copied_back.add(e.pid)

    def bounces(self, e: Event, out: list) -> tuple[Batched, int]:
        """One process's bounce pairs (_feed_bounces), each decided as _on_syscall, _host_io and
        DataFlow._direct decide it at the copy (evidence.HOST_RULES "direct"), through the same evidence
        text and io line: each line into OUT. Returns their bytes per (file, route, api) for the
        file account (records.Batched) and the last copy's time."""
        pairs = e.args
        pid, comm, procs, flow = e.pid, e.comm, self.state.procs, self.flow
        route, conf = _BOUNCE.route, _BOUNCE.confidence
        # with file bytes of the process waiting for a copy, a read taken stays in the data-flow model
        # behind them (a later copy of its buffer finds it there, taken, and adds nothing); a process
        # whose page fills come absorbs them into its reads (DataFlow.add_read)
        modelled = pid in flow.by_pid or pid in flow.fill_pids
        by_page = flow.by_page
        job = self.state.job_of(pid)
        account = Batched()  # (path, route, api) -> [verdicts, bytes, end]
        taken: list[Source] = []  # (modelled: the reads, for DataFlow.add_taken)
        ok_path, ok = None, False  # (modelled: the last read's file, staged_ok of it)
        p = procs.get(pid)
        if p is None or (comm and not p["comm"]):
            p = self.state.proc(pid, comm)
        for path, pr in pairs:
            ts, _, tid, _, sys_id, fd, buf, _, off, _, ret, lat, t_copy, dst, src, n = pr[:16]
            api = SYS_NAMES[sys_id]
            head = f"{api} fd {fd} into host memory {buf:#x}" if buf else f"{api} fd {fd}"
            if t_copy > ts:  # (copy_text's words for a copy after its read, without its list)
                # (%-formatting: the same text as the f-string of copy_text, in two thirds of its time)
                ev = [
                    head,
                    "CUDA copy host %#x -> GPU %#x, %d bytes, %+.3f ms after it" % (src, dst, n, (t_copy - ts) / 1e6),
                ]
            else:
                ev = [head, self.copy_text([t_copy, pid, dst, src, n, 1], ts, "direct")]
            out.append(io_line(ts, pid, tid, comm, api, "read", path, off, ret, ret, lat, route, None, conf, ev))
            if modelled:  # (DataFlow.add_read, then _consume of all of it, its verdict made here)
                if path is not ok_path:  # (a batch's pairs read one file or a few: asked once a run)
                    ok_path, ok = path, staged_ok(path)
                taken.append(TakenRead(pid, job, ts, path, off, ret, buf, t_copy, dst, src, ok))
            else:
                flow.reads += 1  # (DataFlow.add_read numbers every read)
                if pr[21]:  # (the newest read into its buffer's page here: found by it, RETAIN_NS)
                    by_page[(pid, buf >> 12)] = Taken(pid, buf, ret, ts, t_copy + RETAIN_NS)
            account.add((path, route, api), ret, off + ret if off >= 0 else 0, ts, ts + (lat or 0), tid)
        if taken:
            flow.add_taken(taken)
        p["ios"] += len(pairs)
        last = pairs[-1][1]
        flow.by_job.setdefault(job, set()).add(pid)
        flow.copying_jobs.add(job)  # (as DataFlow.copy does at each pair's copy)
        q = self.memcpy.get(pid)
        if q is None:
            q = self.memcpy[pid] = deque(maxlen=4096)
        # (only copies other than host to device are ever matched from here, and this process made
        # none: its last copy stands for the ones taken, as "the process made a CUDA copy")
        q.append(Event(last[12], pid, last[2], "api_enter", "cuMemcpy", list(last[13:20]), comm))
        return account, last[12]

    def copy_text(self, c: Sequence[int], t: int, how: str, link: str = "", checked: int = -1) -> str:
        ts, pid, dst, src, n = c[:5]
        dt = (ts - t) / 1e6
        when = (
            "which took these bytes of the mapping"
            if t == ts
            else f"{dt:+.3f} ms after it"
            if dt >= 0
            else f"started {-dt:.3f} ms before (it faulted these pages in)"
        )
        text = f"CUDA copy host {src:#x} -> GPU {dst:#x}, {n} bytes, {when}"
        if how == "staged":
            text += " from another host buffer (staged through host memory; the CPU copy into it is not traced)"
        elif how == "job":
            comm = self.state.proc(pid)["comm"] or "?"
            text += f" by {comm}/{pid}, another process of the same traced tree; {link}"
        if how in ("staged", "job"):
            text += "; " + (
                _checked_text(checked)
                if checked >= 0
                else _by_order_text(c, self.content.live or bool(self.content.recorded))
            )
        return text

    def _elsewhere_text(self, c: list, left: int, t: int, text: bool = False) -> str:
        """Why a read is UNKNOWN (DataFlow.unexplained): the first copy of its job after it that no
        read explained, and those copies' bytes. TEXT: a text file (dataflow.text_data) no staged
        copy takes; else a process without CUDA."""
        who = self.state.proc(c[1])["comm"] or "?"
        copy = (
            f"{who}/{c[1]} copied host {c[3]:#x} -> GPU {c[2]:#x}, {c[4]} bytes, {(c[0] - t) / 1e6:+.3f} ms after "
            f"it, and the job's copies in its window {left} bytes from memory no traced read explains"
        )
        if text:
            return (
                f"a text file, which no copy is paired with by order (configs and vocabularies are read by every "
                f"program), but {copy}: a parse of this text may have made them, or not; the trace cannot tell"
            )
        return (
            f"this process loaded no CUDA library, but in its traced tree {copy}: these bytes may have reached "
            "it through shared memory or a pipe, or not at all; the trace cannot tell (a process without CUDA is "
            "not paired with copies by order)"
        )

    def copied_elsewhere(
        self, pid: int, first_ts: int, path: str, nbytes: int, writers: Container[int] = ()
    ) -> str | None:
        """For I/O the kernel counted (counted.CountedIo: a process without CUDA), why its route is
        UNKNOWN rather than HOST: copies of its job after its first such I/O that no traced read
        explained, at least 1/16 of its NBYTES (DataFlow.unexplained; the per-I/O reads of such a
        process, and text files' reads, end the same way). None: HOST, as for a process that writes
        data files (cp, tar: a host tool whose bytes went to a file; WRITERS: the processes the kernel
        counted writes of)."""
        if self._host_tool(pid, writers):
            return None
        hit = self.flow.elsewhere(pid, self.state.job_of(pid), path, first_ts, 1 << 63, nbytes)
        if hit is None:
            return None
        c, left = hit
        return self._elsewhere_text(c, left, first_ts, text=not staged_ok(path))

    def _host_tool(self, pid: int, writers: Container[int] = ()) -> bool:
        """A process without CUDA that wrote data files (WRITERS: those the kernel counted writes
        of): a copy or archive tool (cp, tar), whose reads stay HOST where DataFlow.elsewhere would
        make them UNKNOWN."""
        return pid not in self.state.cuda_procs and (pid in self.state.wrote_data or pid in writers)

    def source_verdict(self, src: Source) -> tuple:
        io = src.payload
        assert isinstance(io, HostIo)
        e = io.e
        head = f"{io.api} fd {e.args[0]} into host memory {io.buf:#x}" if io.buf else f"{io.api} fd {e.args[0]}"
        ev = [head + f" ({io.note})" if io.note else head]
        # a copy from the read's own buffer ties it to the GPU whatever part it copied (the address proves
        # it); an inferred (staged) tie needs at least half of its bytes taken
        if src.copy is not None and (src.how == "direct" or src.consumed * 2 >= max(src.size, 1)):
            ev.append(self.copy_text(src.copy, e.ts, src.how, src.link, src.checked))
            if src.copies > 1 or src.consumed < src.size:
                ev.append(f"{src.consumed} of its {src.size} bytes taken by {src.copies} CUDA copies")
            # High where the address or the bytes prove it. A staged pairing not checked by content is
            # inferred from order and sizes, and a program that reads 4 MiB chunks only to sum them
            # while it copies other 4 MiB buffers to the GPU makes the same order and sizes (held-out
            # host-stats, issue 43's checksum loop): low.
            if src.how == "direct":
                # (no buffer address traced: io_uring, version-1 records of the v-forms)
                rule = _DIRECT if io.buf is not None else _DIRECT_NO_ADDRESS
            else:
                rule = _STAGED_CHECKED if src.checked >= 0 else _STAGED_BY_ORDER
                if src.how == "staged" and src.exact and src.checked < 0:
                    ev.append("one read, then one copy of exactly its size: paired one to one")
            how = src.how
            if src.rivals:
                rule = _STAGED_RIVALS
                ev.append(_rivals_text(src.rivals))
        elif src.changed is not None or src.differs is not None:  # (content: copies that were not its bytes)
            rule, how = _NOT_ITS_BYTES, ""
            ev.append(_differs_text(src, e.ts))
        elif src.recopy is not None:  # (DataFlow.recopies: which bytes that copy carried is not known)
            rule, how = _RECOPY, "staged"
            c = src.recopy
            ev.append(
                _copy_brief(c, e.ts)
                + ", from a buffer whose read's bytes copies had all taken already: either these bytes, put there by "
                "the CPU (a reused buffer: decoded or gathered, not traced), or the same bytes again (to a second "
                "GPU); inferred from order, no copy took this read's bytes otherwise"
            )
        elif src.with_file is not None:  # (DataFlow.staged_files: a decode changes sizes)
            rule, how = _DECODED, "staged"
            ev.append(
                self.copy_text(src.with_file, e.ts, "staged")
                + "; it took other bytes of this file, read before it: a decode changes sizes (text parsed into "
                "numbers), so this read's bytes may be behind it too; inferred from order"
            )
        elif src.elsewhere is not None and not self._host_tool(e.pid):  # (DataFlow.elsewhere)
            rule, how = _ELSEWHERE, ""
            c, left = src.elsewhere
            ev.append(self._elsewhere_text(c, left, e.ts, text=not src.ok))
        else:
            rule, how = _NO_COPY, ""
            if src.consumed:
                ev.append(f"only {src.consumed} of its {src.size} bytes were followed by a CUDA copy")
            ev.append(
                "host I/O, not on the GPU data path: "
                + ("no CUDA copy took its bytes" if self.memcpy.get(e.pid) else "the process made no CUDA copy")
            )
            if src.passed_over:
                rule = _NO_COPY_ELIMINATED
                ev.append(
                    "HOST by elimination: a CUDA copy from a staging buffer took file bytes of this job while "
                    "this read waited, inferred from order among several files; they could have been these"
                )
        route = rule.route
        inferred = (
            bool(src.rivals)
            or src.passed_over
            or src.recopy is not None
            or src.with_file is not None
            or route == Route.UNKNOWN
            or (route == Route.DRAM_BOUNCE and rule.confidence == Confidence.LOW)  # (staged, by order only)
        )
        return self._host_line(io, route, rule.confidence, ev), 0, 0, how, inferred

    def chunk_verdict(self, ch) -> tuple:
        mf: MappedFile = ch.mf
        size = ch.hi - ch.lo
        filled = mf.filled.overlap(ch.lo, ch.hi)
        cached = size - filled
        addr = next((a + ch.lo - off for a, ln, off in mf.maps if off <= ch.lo < off + ln), None)
        ev = [
            "mmap'd file" + (f" at host {addr:#x}" if addr is not None else ""),
            (
                "page cache, no device I/O"
                if not filled
                else f"{filled} bytes filled from the device during the trace"
                + (f", {cached} from the page cache" if cached else "")
            ),
            self.copy_text(ch.copy, ch.ts, ch.how, ch.link, ch.lo if ch.checked else -1),
        ]
        rule = _DIRECT if ch.how == "direct" else _STAGED_CHECKED if ch.checked else _STAGED_BY_ORDER
        if ch.rivals:
            rule = _STAGED_RIVALS
            ev.append(_rivals_text(ch.rivals))
        conf = rule.confidence
        p = self.state.proc(mf.pid)
        p["ios"] += 1
        line = io_line(
            ch.ts,
            mf.pid,
            mf.pid,
            p["comm"] or "",
            "mmap",
            "read",
            mf.path,
            ch.lo,
            size,
            size,
            None,
            rule.route,
            "page-cache" if not filled else None,
            conf,
            ev,
        )
        return line, cached, filled, ch.how, bool(ch.rivals) or conf == Confidence.LOW

    def fill_verdict(self, mf, path: str, pid: int, ts: int, lo: int, hi: int, lat: int, e: Event) -> tuple:
        what = (
            "page-cache fill of a mmap'd file"
            if mf is not None
            else "page-cache fill with no read or mapping of it in this process (readahead or fadvise "
            "no read followed, or a mapping made before the trace)"
        )
        ev = [what, "host I/O, not on the GPU data path: no CUDA copy took these bytes"]
        p = self.state.proc(pid, e.comm)
        p["ios"] += 1
        line = io_line(
            ts,
            pid,
            e.tid,
            e.comm or p["comm"] or "",
            "mmap",
            "read",
            path,
            lo,
            hi - lo,
            hi - lo,
            lat,
            _NO_COPY.route,
            None,
            _NO_COPY.confidence,
            ev,
        )
        return line, 0, hi - lo, ""

    def _copy_of(self, io: HostIo, now: int) -> tuple[Event | None, str]:
        """The device-to-host CUDA copy whose bytes this write put in the file: into its buffer before
        it (the nearest wins: a buffer reused is filled again); with the buffer address unknown
        (io_uring, version-1 records of the v-forms) or in a later iovec, by direction and size; else a
        copy of its size into another buffer (staged). Reads are the data-flow model's (dataflow.py).
        With it, how it was matched: "buffer", "size" (the buffer's address not traced), "iovec" or
        "staged"."""
        copies = self.memcpy.get(io.e.pid)
        if not copies or io.op != "write" or io.api in IN_KERNEL:
            return None, ""
        t = io.e.ts
        lo = t - COPY_WINDOW_NS
        end = io.buf + max(io.size, 1) if io.buf is not None else None
        best = None
        for c in copies:
            if not lo <= c.ts <= t:
                continue
            dst, src, n, d = (c.args + [0, 0, 0, 0])[:4]
            if d not in (2, 0) or n <= 0:
                continue
            if io.buf is not None:
                if dst < end and io.buf < dst + n and (best is None or c.ts > best.ts):
                    best = c
            elif d == 2 and n == io.size and best is None:
                best = c
        if best is not None:
            return best, "buffer" if io.buf is not None else "size"
        # What follows is inferred, not seen: each copy's bytes are given to one write only (a copy
        # of 1 MiB made 20 writes of 1 MiB of host data DRAM_BOUNCE before), the nearest first.
        taken = self.copy_taken
        # a v-form with several iovecs: only the first one's base is traced (torch.save writes a zip
        # header and the tensor's bytes in one writev); a copy that fits in the I/O's bytes, the nearest
        if io.api in VFORMS and len(io.e.args) > 2 and io.e.args[2] > 1:
            fits = [
                c
                for c in copies
                if lo <= c.ts <= t
                and (c.args + [0] * 4)[3] == 2
                and 0 < c.args[2] <= io.size
                and (c.pid, c.tid, c.ts) not in taken
            ]
            if fits:
                return self._take_copy(max(fits, key=lambda c: c.ts), now), "iovec"
        staged = [
            c
            for c in copies
            if lo <= c.ts <= t
            and (c.args + [0] * 4)[3] == 2
            and (c.args + [0] * 3)[2] == io.size
            and (c.pid, c.tid, c.ts) not in taken
        ]
        if staged:
            return self._take_copy(max(staged, key=lambda c: c.ts), now), "staged"
        return None, ""

    def _take_copy(self, c: Event, now: int) -> Event:
        """C's bytes are spoken for by the write an inference gave them to (bounded: only copies
        within COPY_WINDOW_NS of a write are ever asked about)."""
        taken = self.copy_taken
        if len(taken) >= 65_536:
            old = now - COPY_WINDOW_NS
            taken.difference_update([k for k in taken if k[2] < old])
        taken.add((c.pid, c.tid, c.ts))
        return c

    def host_verdict(self, io: HostIo, now: int) -> schema.IoLine:
        """The verdict of a write (or an in-kernel copy) held for libcufile's call, which did not
        claim it: the CUDA copy that filled its buffer, if one did (copy_of); NOW, the stream's time."""
        e = io.e
        # (the held I/O are writes and in-kernel copies: reads with a buffer are the data-flow model's)
        ev = [f"{io.api} fd {e.args[0]}" + (f" from host memory {io.buf:#x}" if io.buf else "")]
        if io.note:
            ev.append(io.note)
        c, match = self._copy_of(io, now)
        if c is not None:
            dst, src, n, d = (c.args + [0, 0, 0, 0])[:4]
            dt = (c.ts - e.ts) / 1e6
            how = {
                "buffer": "",
                "size": " (buffer address not traced: matched by direction and size)",
                "iovec": f" from one of its {e.args[2]} iovecs (only the first one's address is traced: matched by "
                "direction and a size within the I/O's)",
                "staged": " into another host buffer of the same size (staged, e.g. through pinned memory)",
            }[match]
            ev.append(f"CUDA copy GPU {src:#x} -> host {dst:#x}, {n} bytes, {-dt:.3f} ms before it{how}")
            rule = _DIRECT if match == "buffer" else _DIRECT_NO_ADDRESS if match == "size" else _WRITE_INFERRED
        else:
            rule = _NO_COPY
            ev.append(
                "host I/O, not on the GPU data path: "
                + ("no CUDA copy of its buffer" if self.memcpy.get(e.pid) else "the process made no CUDA copy")
            )
            big = self._larger_copy(io)
            if big is not None:
                # (a GPU buffer brought to the host whole and written out in pieces from another buffer:
                # only a copy of the write's own size is inferred to be it, so this is not known)
                rule = _NO_COPY_ELIMINATED
                ev.append(
                    f"a CUDA copy GPU -> host {big.args[0]:#x} of {big.args[2]} bytes, "
                    f"{(e.ts - big.ts) / 1e6:.3f} ms before it, went to no write: this write's bytes may be "
                    "part of it (a copy is matched to a write from another buffer only by the same size)"
                )
        return self._host_line(io, rule.route, rule.confidence, ev)

    def _larger_copy(self, io: HostIo):
        """The nearest device-to-host copy of this process in the window before write IO, larger
        than it, into another buffer, whose bytes no write was inferred to carry; or None."""
        copies = self.memcpy.get(io.e.pid)
        if not copies or io.op != "write":
            return None
        t, taken = io.e.ts, self.copy_taken
        lo = t - COPY_WINDOW_NS
        best = None
        for c in copies:
            a = c.args
            if (
                lo <= c.ts <= t
                and len(a) > 3
                and a[3] == 2
                and a[2] > io.size
                and (c.pid, c.tid, c.ts) not in taken
                and (best is None or c.ts > best.ts)
            ):
                best = c
        return best

    def _host_line(self, io: HostIo, route: Route, conf: Confidence, ev: list[str]) -> schema.IoLine:
        """The verdict line of a host I/O (a read the data-flow model decided, or a write)."""
        e = io.e
        p = self.state.procs.get(e.pid)
        if p is None or (e.comm and not p["comm"]):
            p = self.state.proc(e.pid, e.comm)
        p["ios"] += 1
        return io_line(
            e.ts,
            e.pid,
            e.tid,
            e.comm,
            io.api,
            io.op,
            io.path,
            io.offset,
            io.size,
            io.ret,
            io.latency,
            route,
            None,
            conf,
            ev,
        )
