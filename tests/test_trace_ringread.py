"""ringread.RingReader's record walk over a ring laid out as the kernel lays it out (consumer page,
producer page, data), in memory: committed records in one piece, a record still being written stops
the read, an odd-sized or discarded record is read one by one. (The real ring: test_trace_end.py.)"""

import struct

from gdsdiag.trace.ringread import BUSY, DISCARD, RingReader

PAGE, SIZE, REC = 4096, 1 << 12, 96


def _reader():
    r = RingReader.__new__(RingReader)
    r._cons = bytearray(PAGE)
    r._prod = bytearray(PAGE + 2 * SIZE)
    r._page, r._mask = PAGE, SIZE - 1
    r.stride = (8 + REC + 7) & ~7
    r._want = REC
    r._hdrs = struct.Struct(f"<I{r.stride - 4}x")
    return r


def _put(r, pos, payload, flags=0):
    """A record at ring position POS (written at both mappings of the data, as the kernel's is)."""
    rec = struct.pack("<II", len(payload) | flags, 0) + payload
    rec += b"\0" * (-len(rec) % 8)
    for base in (0, SIZE):
        off = PAGE + base + (pos & (SIZE - 1))
        r._prod[off : off + len(rec)] = rec[: PAGE + 2 * SIZE - off]
    return pos + len(rec)


def _produce(r, pos):
    struct.pack_into("<Q", r._prod, 0, pos)


def test_committed_records_come_in_one_piece_and_a_busy_one_waits():
    r = _reader()
    pos = 0
    for i in range(3):
        pos = _put(r, pos, bytes([i]) * REC)
    busy_at = pos
    pos = _put(r, pos, b"\x09" * REC, BUSY)
    _produce(r, pos)
    blob, n = r.read()
    assert n == 3 and len(blob) == 3 * r.stride and blob[8] == 0 and blob[r.stride + 8] == 1
    assert struct.unpack_from("<Q", r._cons)[0] == busy_at
    assert r.read()[1] == 0  # still busy: nothing
    _put(r, busy_at, b"\x09" * REC)  # committed now
    blob, n = r.read()
    assert n == 1 and blob[8] == 9 and not r.pending()


def test_records_across_the_end_of_the_data_area_are_read_whole():
    r = _reader()
    start = SIZE - r.stride  # the second record wraps around
    struct.pack_into("<Q", r._cons, 0, start)
    pos = _put(r, start, b"\x01" * REC)
    pos = _put(r, pos, b"\x02" * REC)
    _produce(r, pos)
    blob, n = r.read()
    assert n == 2 and blob[r.stride + 8 : 2 * r.stride] == b"\x02" * REC


def test_an_odd_sized_or_discarded_record_is_read_one_by_one():
    r = _reader()
    pos = _put(r, 0, b"\x01" * REC)
    pos = _put(r, pos, b"\x02" * 40)  # shorter: padded to the record size
    pos = _put(r, pos, b"\x03" * REC, DISCARD)  # discarded: skipped
    pos = _put(r, pos, b"\x04" * REC)
    _produce(r, pos)
    blob, n = r.read()
    assert n == 3 and len(blob) == 3 * r.stride
    assert blob[r.stride + 8 : r.stride + 48] == b"\x02" * 40 and blob[r.stride + 48 : 2 * r.stride] == bytes(56)
    assert blob[2 * r.stride + 8] == 4
    assert struct.unpack_from("<Q", r._cons)[0] == pos
