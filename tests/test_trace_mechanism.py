"""What the program did to a file (trace/model/mechanism.py), in an engineer's words, and its rate."""

from gdsdiag.trace.model.mechanism import describe, rate


def test_engines_are_named_once_each_with_o_direct_and_threads():
    assert describe(["io_uring"], (2, 2), 8, False) == "io_uring, O_DIRECT, 8 threads"
    assert describe(["aio"], (1, 1), 1, True) == "libaio, O_DIRECT, libcufile loaded, not used for it"
    assert describe(["pread64", "preadv"], (0, 3), 4, False) == "pread, 4 threads"
    assert describe(["mmap", "read"], (1, 3), 1, False) == "mmap page faults + read, O_DIRECT on 1 of its 3 opens"
    assert describe(["cuFile"], (0, 0), 16, False) == "cuFile, 16 threads"
    assert describe(["read (counted in the kernel)"], (0, 1), 0, False) == "read"
    assert describe([], (0, 0), 0, False) == "no I/O seen"


def test_rate_is_bytes_over_the_span_and_unknown_where_the_span_says_nothing():
    assert rate(2_000_000_000, 1_000_000_000, 2_000_000_000) == 2.0
    assert rate(4096, 5, 5 + 20_000) is None  # (one I/O's latency is not a rate)
    assert rate(1 << 30, 0, 0) is None  # (counted in the kernel: no times)
    assert rate(0, 1, 10**9) is None
