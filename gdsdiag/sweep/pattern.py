"""The data pattern every sweep file holds, and its verification on the host (numpy) or the GPU (cupy).

Word ``w`` (8 bytes, little endian) of the data region is ``(w * 0x9E3779B97F4A7C15) ^ seed`` modulo
2**64: cheap to generate for any offset range, different in every word of a 4 GiB file, and a
misplaced block (wrong offset) fails as surely as a flipped bit.
"""

from __future__ import annotations

GOLDEN = 0x9E3779B97F4A7C15


GOLDEN_INV = pow(GOLDEN, -1, 1 << 64)  # GOLDEN is odd, so the pattern can be run backwards


def word_origin(word: int, seed: int) -> int:
    """The data offset whose pattern word ``word`` is (any 8 bytes map to one; it is the sweep's own
    data only if it falls inside the data region)."""
    return (((word ^ seed) * GOLDEN_INV) & ((1 << 64) - 1)) * 8


def host_fill(buf, data_offset: int, seed: int) -> None:
    """Fill a writable buffer (len multiple of 8) with the pattern of data offset ``data_offset``."""
    import numpy as np

    words = np.frombuffer(buf, dtype="<u8")
    first = data_offset // 8
    idx = np.arange(first, first + words.size, dtype=np.uint64)
    np.multiply(idx, np.uint64(GOLDEN), out=words)
    np.bitwise_xor(words, np.uint64(seed), out=words)


def host_first_mismatch(buf, data_offset: int, seed: int) -> int | None:
    """Byte offset (in the data region) of the first wrong byte, or None."""
    import numpy as np

    got = np.frombuffer(buf, dtype="<u8")
    first = data_offset // 8
    idx = np.arange(first, first + got.size, dtype=np.uint64)
    expect = idx * np.uint64(GOLDEN) ^ np.uint64(seed)
    bad = np.flatnonzero(got != expect)
    if bad.size == 0:
        return None
    w = int(bad[0])
    a = got[w : w + 1].view(np.uint8)
    b = expect[w : w + 1].view(np.uint8)
    byte = int(np.flatnonzero(a != b)[0])
    return data_offset + w * 8 + byte


_GPU_KERNELS: dict = {}


def _kernels():
    import cupy as cp

    if not _GPU_KERNELS:
        _GPU_KERNELS["fill"] = cp.ElementwiseKernel(
            "uint64 first, uint64 seed",
            "uint64 out",
            f"out = ((first + (unsigned long long)i) * {GOLDEN}ULL) ^ seed",
            "gdsdiag_pattern_fill",
        )
        _GPU_KERNELS["diff"] = cp.ElementwiseKernel(
            "uint64 got, uint64 first, uint64 seed",
            "bool bad",
            f"bad = got != (((first + (unsigned long long)i) * {GOLDEN}ULL) ^ seed)",
            "gdsdiag_pattern_diff",
        )
    return _GPU_KERNELS


def gpu_fill(arr_u8, data_offset: int, seed: int) -> None:
    """Fill a cupy uint8 array (size multiple of 8) on the GPU."""
    import cupy as cp

    words = arr_u8.view(cp.uint64)
    _kernels()["fill"](cp.uint64(data_offset // 8), cp.uint64(seed), words)


def gpu_first_mismatch(arr_u8, data_offset: int, seed: int) -> int | None:
    import cupy as cp

    words = arr_u8.view(cp.uint64)
    bad = _kernels()["diff"](words, cp.uint64(data_offset // 8), cp.uint64(seed))
    if not bool(bad.any()):
        return None
    w = int(cp.argmax(bad))
    host = cp.asnumpy(arr_u8[w * 8 : (w + 1) * 8]).tobytes()
    import numpy as np

    exp = np.array([((data_offset // 8 + w) * GOLDEN) & (2**64 - 1) ^ seed], dtype="<u8").tobytes()
    byte = next(i for i in range(8) if host[i] != exp[i])
    return data_offset + w * 8 + byte


class HostVerifier:
    """Per-thread verifier for blocks of a fixed size: the word multiples ``i * GOLDEN`` are computed
    once, so checking a block is an add, a xor and a compare (modular arithmetic:
    (first + i) * G = first * G + i * G mod 2**64), fast enough to check every 4 KiB read inline."""

    def __init__(self, nbytes: int, seed: int):
        import numpy as np

        self.np = np
        self.base = np.arange(nbytes // 8, dtype=np.uint64) * np.uint64(GOLDEN)
        self.tmp = np.empty_like(self.base)
        self.seed = np.uint64(seed)
        self.seed_int = seed

    def first_mismatch(self, buf, data_offset: int) -> int | None:
        np = self.np
        got = np.frombuffer(buf, dtype="<u8")
        np.add(self.base, np.uint64((data_offset // 8 * GOLDEN) & 0xFFFFFFFFFFFFFFFF), out=self.tmp)
        np.bitwise_xor(self.tmp, self.seed, out=self.tmp)
        if np.array_equal(got, self.tmp):
            return None
        return host_first_mismatch(buf, data_offset, self.seed_int)

    def fill(self, buf, data_offset: int) -> None:
        np = self.np
        words = np.frombuffer(buf, dtype="<u8")
        np.add(self.base, np.uint64((data_offset // 8 * GOLDEN) & 0xFFFFFFFFFFFFFFFF), out=words)
        np.bitwise_xor(words, self.seed, out=words)
