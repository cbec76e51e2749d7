"""cuFileRead/Write calls paired in bulk, straight from the ring's bytes, before any Event exists.

Why: a COMPAT stream is two records a call (the enter, and the exit carrying the evidence its own
thread gave: record version 4), and the classifier decides such a call at its exit from that fold
alone (calls.CallMatcher.whole_verdict). Decoding both records into Events, keeping the call on
its thread's stack and among the calls in flight, and popping it again cost most of the ~20 µs a
verdict the GPU machine measured: a third of the 100k verdicts/s the trace is meant to follow
(docs/benchmarks.md, "How far Python alone can go"). Here numpy pairs the two records of such
calls in one pass over the records' columns, and the classifier builds each verdict straight from
the pair (Classifier.feed_whole), through the same fold-shape table and the same io line.

Which calls, so that the verdict is the one the event-by-event path gives (tests/test_trace_
wholecalls.py holds the two paths to the same verdicts, file account and counts):
- a process is taken only if every record of it in reach is a cuFileRead/Write enter or exit, and
  the classifier holds nothing of it (no call in flight, no event held back for reordering): then
  no other evidence can have joined its calls while they ran, as the classifier's own rule asks;
- on each of its threads the records alternate enter, exit of the same call, and every exit is a
  whole one (USDT bytes folded into it equal to its positive result); anything else gives the
  whole process back to the event-by-event path;
- a pair is taken once its exit is older than the reorder cut (Probes.poll: what may still arrive
  out of order is younger than it), so records of other CPUs that could join it have arrived and
  been seen; the rest of the thread waits here (``carry``) for the next poll, in ring order.
What is given back goes to the event-by-event path in ring order, carried records first (older).
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

from ..model.content import FLAG_CHANGED
from ..model.eventdefs import API, EVENT_FIELDS, KINDS, SYSCALLS

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping

    # (processes that could have bounce pairs taken, the processes whose copies go the event path's
    # way, each (pid, host address, time, later than a read of its process here) of the copies before
    # their thread's first read) -> those of the first that may (Classifier.bounce_ok)
    BounceOk = Callable[[list[int], list[int], list[tuple[int, int, int, bool]]], set[int]]

_KIND = {n: v for n, v, *_ in KINDS}
_API = {n: v for n, v, *_ in API}
_SYS = {n: v for n, v, *_ in SYSCALLS}
ENTER, EXIT, SYS_EXIT = _KIND["EV_API_ENTER"], _KIND["EV_API_EXIT"], _KIND["EV_SYS_EXIT"]
READ, WRITE, MEMCPY = _API["API_READ"], _API["API_WRITE"], _API["API_MEMCPY"]
# the reads a bounce pair starts with: those with their file offset in the record (classify.POSITIONED)
POSITIONED_READS = (_SYS["SYS_PREAD64"], _SYS["SYS_PREADV"], _SYS["SYS_PREADV2"])
H2D = 1  # a cuMemcpy record's a3: host to device
HEADER = 8  # the ring's length word and padding before each struct event_t (ringread.py)
_SIZES = {"u64": 8, "u32": 4, "s64": 8, "char": 1}
# where struct event_t's type field lies (its low byte: every record kind is below 256)
_TYPE_AT = sum(_SIZES[c] * n for _, c, n, _ in EVENT_FIELDS[: [f[0] for f in EVENT_FIELDS].index("type")])


# A BLAS library loaded with numpy starts a worker thread per CPU that spins ~0.1 s before it sleeps:
# 2 s of the tracer's CPU on 16 CPUs (measured on the GPU machine: its 100-call trace cost 3.1 s of CPU
# against 1.3 s without the pairing). The pairing does no linear algebra: one thread is asked for.
_BLAS_THREADS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def import_numpy():
    """numpy, its BLAS asked for one thread. The variables are set only while it loads (the library
    reads them then) and put back after, so a program the trace starts later sees the user's own."""
    if "numpy" in sys.modules:
        return sys.modules["numpy"]
    saved = {k: os.environ.get(k) for k in _BLAS_THREADS}
    for k in _BLAS_THREADS:
        os.environ.setdefault(k, "1")
    try:
        import numpy
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return numpy


def record_dtype(stride: int):
    """numpy's view of one ring record (header, struct event_t, padding): its columns by name."""
    np = import_numpy()
    codes = {"u64": "<u8", "u32": "<u4", "s64": "<i8"}
    names: list[str] = []
    formats: list = []
    offsets: list[int] = []
    off = HEADER
    for name, ctype, count, _ in EVENT_FIELDS:
        names.append(name)
        offsets.append(off)
        if ctype == "char":
            formats.append(f"S{count}")
        else:
            formats.append((codes[ctype], (count,)) if count > 1 else codes[ctype])
        off += _SIZES[ctype] * count
    return np.dtype({"names": names, "formats": formats, "offsets": offsets, "itemsize": stride})


class WholeCalls:
    """Splits the ring's records into whole sync cuFile calls (pairs) and the rest. Once a batch
    holds a cuFile call, records wait here until they are older than the reorder cut (``unseen``),
    and are looked at once, at most every EVERY_NS: on the GPU machine the live loop polls every
    millisecond or so under load, and numpy's fixed cost per look (~0.1 ms), paid per poll over the
    50 ms of records not yet old enough, cost 42 µs a verdict."""

    EVERY_NS = 10_000_000  # one look at the records at most this often (but for a backlog)
    CARRY_NS = 100_000_000  # a bounce pair's read waits this long here for its copy, then goes on
    BACKLOG = 16_384  # records waiting that are looked at whatever the time (Probes.DECODE_MAX)

    def __init__(self, stride: int):
        self._np = None  # numpy, imported with the first batch that holds a cuFile call (~0.1 s)
        self.stride = stride
        self.dtype = None
        self.carry = b""  # old records of threads whose call's exit is not here yet, in ring order
        self.unseen: list[tuple[bytes, int]] = []  # (records not looked at yet, their oldest time)
        self._unseen_n = 0
        self._looked = 0  # when the records were last looked at (the probes' clock)
        self.taken = 0  # records handed out as pairs

    def hold_ts(self) -> int | None:
        """The oldest time among the records waiting unseen here (the event path has not had them:
        Probes.poll keeps its complete time below it), or None."""
        return min(t for _, t in self.unseen) if self.unseen else None

    def split(
        self,
        buf: bytes,
        cut: int,
        gate: Callable[[int], tuple[Mapping[int, int], Iterable[int], BounceOk | None, Mapping[int, int]]],
        final: bool = False,
        now: int | None = None,
    ) -> tuple[bytes, list, list]:
        """(the records for the event-by-event path, as bytes in ring order, all older than CUT;
        the whole calls taken, each a tuple (enter ts, pid, tid, comm bytes, api id, handle, size,
        offset, exit ts, ret, exit a1..a6); the bounce pairs taken (_bounces)). CUT: younger records
        wait here; GATE(CUT): asked only when the records are looked at, (processes the event path
        holds other events of, each with the time of the oldest: all their records go there if one
        is that old; threads whose call it has open: their exit, the first record here, goes there;
        which processes may have bounce pairs taken, or None: none; the processes held back from
        bounce pairs, as the first); FINAL: everything is handed out (a thread's last enter to the
        event path);
        NOW: the probes' clock (None: look now)."""
        if not self.unseen and not self.carry:
            if not buf:
                return b"", [], []
            # (a batch with no enter or exit record at all, most batches of most traces, costs one
            # byte-slice, the low byte of each record's type, and goes on as it came)
            kinds = buf[HEADER + _TYPE_AT :: self.stride]
            if ENTER not in kinds and EXIT not in kinds:
                return buf, [], []
        np = self._np
        if np is None:
            np = self._np = import_numpy()
            self.dtype = record_dtype(self.stride)
        if buf:
            self.unseen.append((buf, int(np.frombuffer(buf, dtype="<u8")[HEADER // 8 :: self.stride // 8].min())))
            self._unseen_n += len(buf) // self.stride
        if not final and now is not None and now - self._looked < self.EVERY_NS and self._unseen_n < self.BACKLOG:
            return b"", [], []
        self._looked = now if now is not None else 0
        work = self.carry + b"".join(b for b, _ in self.unseen)
        self.carry, self.unseen, self._unseen_n = b"", [], 0
        if not work:
            return b"", [], []
        rec = np.frombuffer(work, dtype=self.dtype)
        raw = np.frombuffer(work, dtype=f"V{self.stride}")
        old = np.ones(len(rec), dtype=bool) if final else rec["ts"] <= np.uint64(max(cut, 0))
        if not old.all():  # (the young wait, in ring order)
            young = raw[~old].tobytes()
            self.unseen.append((young, int(rec["ts"][~old].min())))
            self._unseen_n = len(young) // self.stride
        veto, open_tids, bounce_ok, bveto = gate(cut if not final else 1 << 63)  # (final: all is handed out)
        out, pairs, rest = self._pairs(rec, old, list(self._vetoed(rec, old, veto)), open_tids, final)
        bounces: list = []
        if bounce_ok is not None:
            if out is old:
                out = old.copy()
            bounces, waits = self._bounces(
                rec, old, out, self._vetoed(rec, old, bveto), bounce_ok, now if now is not None else cut, final
            )
            if len(waits):
                rest = np.sort(np.concatenate((rest, waits)))
        if len(rest):
            self.carry = raw[rest].tobytes()
        return raw[out].tobytes(), pairs, bounces

    def _vetoed(self, rec, old, veto: Mapping[int, int]) -> dict[int, int]:
        """The processes VETO (pid -> the time from which its records are the event path's) holds
        back, with their times: those with an OLD record at or after their time."""
        np = self._np
        assert np is not None
        if not veto:
            return {}
        pid, ts = rec["pid"], rec["ts"]
        vp = np.fromiter(veto.keys(), dtype=np.uint32, count=len(veto))
        vt = np.fromiter(veto.values(), dtype=np.uint64, count=len(veto))
        mine = old & np.isin(pid, vp)
        if not mine.any():
            return {}
        u = np.unique(pid[mine])
        newest = np.zeros(len(u), dtype=np.uint64)
        np.maximum.at(newest, np.searchsorted(u, pid[mine]), ts[mine])
        keep = np.isin(vp, u)
        vp, vt = vp[keep], vt[keep]
        hit = vt <= newest[np.searchsorted(u, vp)]
        return dict(zip(vp[hit].tolist(), vt[hit].tolist()))

    def _pairs(self, rec, old, veto: Iterable[int], open_tids: Iterable[int], final: bool):
        """(which OLD records go to the event path, the pairs taken, the indices of those that wait:
        a thread's call whose exit is not here yet, in ring order)."""
        np = self._np
        assert np is not None
        typ, rid, pid = rec["type"], rec["id"], rec["pid"]
        call = old & ((typ == ENTER) | (typ == EXIT)) & ((rid == READ) | (rid == WRITE))
        none = np.zeros(0, dtype=np.intp)
        if not call.any():
            return old, [], none
        vetoed = np.fromiter(veto, dtype=np.uint32)
        others = np.unique(pid[old & ~call])
        bad = np.union1d(others, vetoed) if len(vetoed) else others
        idx = np.flatnonzero(call & ~np.isin(pid, bad)) if len(bad) else np.flatnonzero(call)
        if not len(idx):
            return old, [], none
        out = old.copy()  # records for the event-by-event path
        # each thread's records in ring order, threads one after another
        order = idx[np.argsort(rec["tid"][idx], kind="stable")]
        tid = rec["tid"][order]
        n = len(order)
        starts = np.flatnonzero(np.r_[True, tid[1:] != tid[:-1]])
        lengths = np.diff(np.r_[starts, n])
        k = np.arange(n) - np.repeat(starts, lengths)  # position within its thread
        opened = np.fromiter(open_tids, dtype=np.uint32)
        if len(opened):  # (the event path's open call: the thread's first record is its exit)
            k -= np.isin(tid, opened)
        t, a, ids = rec["type"][order], rec["a"][order], rec["id"][order]
        is_exit = (k & 1) == 1
        ok = np.where(k < 0, t == EXIT, np.where(is_exit, t == EXIT, t == ENTER))
        prev_id = np.r_[np.uint32(0), ids[:-1]]
        ret = a[:, 0]
        whole = (a[:, 4] != 0) & (ret > 0) & (a[:, 5] == ret) & (ids == prev_id)
        ok &= ~is_exit | (k < 0) | whole
        if not ok.all():  # a thread out of step: its whole process goes the event-by-event way
            keep = ~np.isin(rec["pid"][order], np.unique(rec["pid"][order[~ok]]))
            order, k, is_exit, tid = order[keep], k[keep], is_exit[keep], tid[keep]
            n = len(order)
            if not n:
                return old, [], none
            starts = np.flatnonzero(np.r_[True, tid[1:] != tid[:-1]])
            lengths = np.diff(np.r_[starts, n])
        # every record here is older than the cut: an enter is taken with its exit when that is here
        # too; on each thread the pairs taken are a prefix, and what follows waits in the carry
        has_exit = is_exit | (np.r_[is_exit[1:], False] & np.r_[tid[1:] == tid[:-1], False])
        ready = (k >= 0) & has_exit
        # a prefix per thread: a record is taken only if every record before it on its thread is
        not_ready = np.cumsum(~ready & (k >= 0))
        before = np.repeat(np.r_[0, not_ready[starts[1:] - 1]], lengths)
        take = ((not_ready - before) == 0) & ready
        wait = ~take & (k >= 0)  # (k < 0: the event path's exit, handed to it)
        taken, rest = order[take], order[wait]
        out[taken] = False
        if final:  # (a thread's last enter, its exit never seen, goes on)
            rest = none
        else:
            out[rest] = False
            rest.sort()
        pairs = []
        if len(taken):
            en, ex = taken[0::2], taken[1::2]
            ea, xa = rec["a"][en], rec["a"][ex]
            pairs = list(
                zip(
                    rec["ts"][en].tolist(), rec["pid"][en].tolist(), rec["tid"][en].tolist(),
                    rec["comm"][en].tolist(), rec["id"][en].tolist(), ea[:, 0].tolist(), ea[:, 2].tolist(),
                    ea[:, 3].tolist(), rec["ts"][ex].tolist(), xa[:, 0].tolist(), xa[:, 1].tolist(),
                    xa[:, 2].tolist(), xa[:, 3].tolist(), xa[:, 4].tolist(), xa[:, 5].tolist(), xa[:, 6].tolist(),
                )
            )  # fmt: skip
            self.taken += len(taken)
        return out, pairs, rest

    def _bounces(self, rec, old, out, veto: Mapping[int, int], bounce_ok: BounceOk, ref: int, final: bool):
        """Bounce pairs: a positioned read (pread64, preadv, preadv2) on a thread, then a CUDA copy to
        the device of exactly its buffer and bytes on the same thread, before the thread's next read.
        The event path decides such a pair at the copy, from the read alone (dataflow.DataFlow._direct:
        DRAM_BOUNCE, high): taken here, the classifier builds the same verdict from the pair
        (Classifier.feed_whole). Which, so that nothing else could have joined the two:
        - a process's OLD records are looked at up to its first record of another kind, or its
          VETO time (an event of it the probes hold): that one and all after it are the event
          path's, fed after its pairs; before it, on each thread, they must alternate read, its copy
          (copies before the thread's first read are the event path's: they are fed first, and one
          later than a read of its process must find its own read in the data-flow model), else
          the whole process goes the event path's way; the classifier then says which may go
          (BOUNCE_OK: nothing of them held there, no copy of another process of their job going the
          event path's way);
        - a process's pairs are taken up to the first read whose copy is not here yet (on any of
          its threads): every record left is younger than every copy taken, so no copy taken could
          have found it. What is left waits here (ring order) while it is younger than CARRY_NS
          (REF: the probes' clock), else goes to the event path with the rest of its process.
        OUT (records for the event path) is updated; returns (the pairs, each (read ts, pid, tid,
        comm bytes, syscall id, read a0..a6, copy ts, copy a0..a6, the time its process's pairs are
        fed at, whether it is the newest read of its process into its buffer's page here), sorted by
        the read's time; the indices of the records that wait)."""
        np = self._np
        assert np is not None
        typ, rid, pid, tid, ts = rec["type"], rec["id"], rec["pid"], rec["tid"], rec["ts"]
        none = np.zeros(0, dtype=np.intp)
        is_copy = old & (typ == ENTER) & (rid == MEMCPY)
        if not is_copy.any():
            return [], none
        is_read = old & (typ == SYS_EXIT) & np.isin(rid, POSITIONED_READS)
        both = is_read | is_copy
        never = np.uint64(np.iinfo(np.uint64).max)
        # a process's records from its first other record here (or its first event the probes hold,
        # VETO) on are the event path's: its pairs before that time can be taken, the rest is fed
        # after them, in time order (nothing of such a process waits here)
        other = old & ~both
        sp = np.unique(np.r_[pid[other], np.fromiter(veto.keys(), dtype=pid.dtype, count=len(veto))])
        stop = self._least(sp, pid[other], ts[other])
        if len(sp):
            for p, t in veto.items():
                at = np.searchsorted(sp, p)
                stop[at] = min(int(stop[at]), t)
        rec_stop = np.full(len(pid), never, dtype=np.uint64)  # (each record's process's)
        if len(sp):
            pos = np.minimum(np.searchsorted(sp, pid), len(sp) - 1)
            hit = sp[pos] == pid
            rec_stop[hit] = stop[pos[hit]]
        idx = np.flatnonzero(both & out & (ts < rec_stop))
        if not len(idx):
            return [], none
        order = idx[np.argsort(tid[idx], kind="stable")]  # each thread's records in ring order
        a = rec["a"]

        def threads(order):
            t = tid[order]
            n = len(order)
            starts = np.flatnonzero(np.r_[True, t[1:] != t[:-1]])
            lengths = np.diff(np.r_[starts, n])
            return starts, lengths, np.arange(n) - np.repeat(starts, lengths)

        # copies before their thread's first read here are the event path's (of a read it had in an
        # earlier look, or staged), fed before this process's pairs (see below)
        starts, lengths, _ = threads(order)
        seen = np.cumsum(is_read[order])
        lead = seen == np.repeat(np.r_[0, seen[starts[1:] - 1]], lengths)
        led = np.zeros(len(rec), dtype=bool)
        led[order[lead]] = True
        order = order[~lead]
        starts, lengths, k = threads(order)
        odd = (k & 1) == 1
        prev = np.r_[order[:1], order[:-1]]
        # a copy (odd place) of its read's buffer, its bytes, to the device; a read at even places
        # (not where the probe saw the buffer hold other bytes than the read put there: content.py's
        # FLAG_CHANGED in the copy's a6, bits 60-61; the event path decides what those bytes were)
        mine = (a[order, 1] == a[prev, 1]) & (a[order, 2] == a[prev, 5]) & (a[order, 3] == H2D)
        mine &= (a[order, 6] >> 60) != FLAG_CHANGED
        ok = np.where(odd, is_copy[order] & mine, is_read[order])
        if not ok.all():  # (out of step: the whole process goes the event path's way)
            order = order[~np.isin(pid[order], np.unique(pid[order[~ok]]))]
        clash = self._shared_buffers(rec, order)
        if len(clash):
            order = order[~np.isin(pid[order], clash)]
        li = np.flatnonzero(led)
        if len(li) and len(order):
            order = order[~np.isin(pid[order], self._shadowed(rec, order, li))]
        cand = np.unique(pid[order])
        while len(cand):  # (a process refused makes its copies the event path's: ask again)
            firsts = self._least(cand, pid[order], ts[order])  # each one's first read here
            lp = li[np.isin(pid[li], cand)]
            late = ts[lp] >= firsts[np.searchsorted(cand, pid[lp])]
            leads = list(zip(pid[lp].tolist(), a[lp, 1].tolist(), ts[lp].tolist(), late.tolist()))
            # (the copies the event path gets: of the processes not taken, and of those taken from
            # their stop time on)
            copiers = np.unique(pid[is_copy & (~np.isin(pid, cand) | (ts >= rec_stop))])
            allowed = bounce_ok(cand.tolist(), copiers.tolist(), leads)
            if len(allowed) == len(cand):
                break
            cand = np.array(sorted(allowed), dtype=pid.dtype)
            order = order[np.isin(pid[order], cand)]
        if not len(cand):
            return [], none
        starts, lengths, k = threads(order)
        n = len(order)
        odd = (k & 1) == 1
        ts_o, pid_o = ts[order], pid[order]
        has_copy = ~odd & np.r_[odd[1:] & (k[1:] > 0), False]  # a read with its copy after it
        copy_ts = np.r_[ts_o[1:], ts_o[-1:]]
        take = np.zeros(n, dtype=bool)
        limit = first_limit = rec_stop[order]
        while True:
            # pairs up to the first read not taken on each thread, and only copies older than every
            # process's first read not taken (on any of its threads)
            ready = has_copy & (copy_ts < limit)
            not_ready = np.cumsum(~ready & ~odd)
            before = np.repeat(np.r_[0, not_ready[starts[1:] - 1]], lengths)
            take = ((not_ready - before) == 0) & ready
            take |= odd & np.r_[False, take[:-1]]
            left = ~take & ~odd  # the reads left: the first of each thread limits its process
            if not left.any():
                break
            new = np.minimum(self._least(cand, pid_o[left], ts_o[left])[np.searchsorted(cand, pid_o)], first_limit)
            if (new == limit).all():
                break
            limit = new
        # a process's pairs are fed as one event after its lead copies (Classifier._feed_bounces):
        # at the later of its first read and its last lead copy, which must be older than every
        # record of it left here, else all of it goes the event path's way
        at = self._least(cand, pid_o[take], ts_o[take])
        lp = li[np.isin(pid[li], cand)]
        if len(lp):
            last = np.zeros(len(cand), dtype=np.uint64)
            np.maximum.at(last, np.searchsorted(cand, pid[lp]), ts[lp] + np.uint64(1))
            at = np.where(at == never, never, np.maximum(at, last))
        # (LEFT: the reads the loop's last pass left)
        before = np.minimum(self._least(cand, pid_o[left], ts_o[left]), self._least(cand, pid_o, first_limit))
        late = cand[(at != never) & (at >= before)]
        if len(late):
            take &= ~np.isin(pid_o, late)
        wait = order[~take & ~np.isin(pid_o, late) & (first_limit == never)]
        if len(wait) and not final:
            # a process with a record left this old: what is left of it goes the event path's way
            stale = np.unique(pid[wait[ts[wait] + np.uint64(self.CARRY_NS) < np.uint64(max(ref, 0))]])
            if len(stale):
                wait = wait[~np.isin(pid[wait], stale)]
            out[wait] = False
        else:
            wait = none
        taken = order[take]
        out[taken] = False
        if not len(taken):
            return [], wait
        rd, cp = taken[0::2], taken[1::2]
        by_time = np.argsort(ts[rd], kind="stable")
        rd, cp = rd[by_time], cp[by_time]
        ra, ca = a[rd], a[cp]
        self.taken += len(taken)
        # the newest read of each process into each page here (the one its buffer's page names),
        # by (process, page) in time order: the last of each run (no packed key: addresses of 57 bits,
        # LA57, leave no room for a pid beside the page number)
        rp, page = pid[rd], ra[:, 1].astype(np.uint64) >> np.uint64(12)
        o = np.lexsort((np.arange(len(rd)), page, rp))
        last = np.ones(len(o), dtype=bool)
        last[:-1] = (rp[o][1:] != rp[o][:-1]) | (page[o][1:] != page[o][:-1])
        newest = np.zeros(len(rd), dtype=bool)
        newest[o[last]] = True
        pairs = list(
            zip(
                ts[rd].tolist(), pid[rd].tolist(), tid[rd].tolist(), rec["comm"][rd].tolist(), rid[rd].tolist(),
                *(ra[:, j].tolist() for j in range(7)), ts[cp].tolist(), *(ca[:, j].tolist() for j in range(7)),
                at[np.searchsorted(cand, pid[rd])].tolist(), newest.tolist(),
            )
        )  # fmt: skip
        return pairs, np.sort(wait)

    def _least(self, keys, of, values):
        """Per key of KEYS (sorted, distinct): the least of VALUES whose key (OF, each one of KEYS)
        it is; where none is, the largest time."""
        np = self._np
        assert np is not None
        out = np.full(len(keys), np.iinfo(np.uint64).max, dtype=np.uint64)
        np.minimum.at(out, np.searchsorted(keys, of), values)
        return out

    def _shadowed(self, rec, order, li):
        """The processes with a copy at LI (one before its thread's first read here: the event
        path's) whose page a read of ORDER (the process's pairs) went into before it: the event path
        finds a copy's read by the page its buffer starts in, newest first, so fed after the pairs
        the copy could find that read instead of the one it found at its own time."""
        np = self._np
        assert np is not None
        ts, a, pid = rec["ts"], rec["a"], rec["pid"]
        rd = order[rec["type"][order] == SYS_EXIT]
        if not len(rd):
            return np.zeros(0, dtype=pid.dtype)
        # (a process's pages, packed for 48-bit addresses: with LA57 two pages may meet in a key, and a
        # copy then counts as shadowed when it is not: its process goes the event path's way, no other verdict)
        shift = np.uint64(36)

        def key(p, addr):
            return (p.astype(np.uint64) << shift) | (addr.astype(np.uint64) >> np.uint64(12))

        keys = key(pid[rd], a[rd, 1])
        u = np.unique(keys)
        first = self._least(u, keys, ts[rd])
        lk = key(pid[li], a[li, 1])
        at = np.minimum(np.searchsorted(u, lk), len(u) - 1)
        hit = (u[at] == lk) & (first[at] < ts[li])
        return np.unique(pid[li][hit])

    def _shared_buffers(self, rec, order):
        """The processes (among ORDER's, each thread's records read, copy, read…) where one
        thread's read landed in a buffer another thread's pair was using, between that pair's read
        and its copy: the event path gives such a copy the newest read of the buffer, whichever
        thread made it, so these are its to decide. Each process's pairs are sorted by buffer start,
        then time: any overlap of two buffers shows between neighbours in that order; buffers that
        overlap from different starts are left to the event path whatever their times."""
        np = self._np
        assert np is not None
        ts, a, pid = rec["ts"], rec["a"], rec["pid"]
        typ, tid = rec["type"][order], rec["tid"][order]
        k = np.flatnonzero(typ[:-1] == SYS_EXIT)  # reads, and their copies right after them
        k = k[(typ[k + 1] == ENTER) & (tid[k + 1] == tid[k])]
        rd, cp = order[k], order[k + 1]
        if len(rd) < 2:
            return np.zeros(0, dtype=pid.dtype)
        lo = a[rd, 1]
        hi = lo + np.maximum(a[rd, 5], 1)
        p, tr, tc = pid[rd], ts[rd], ts[cp]
        o = np.lexsort((tr, lo, p))
        p, lo, hi, tr, tc = p[o], lo[o], hi[o], tr[o], tc[o]
        near = (p[1:] == p[:-1]) & (lo[1:] < hi[:-1])  # neighbours whose buffers overlap
        clash = near & ((lo[1:] != lo[:-1]) | (tr[1:] < tc[:-1]))
        return np.unique(p[1:][clash])
