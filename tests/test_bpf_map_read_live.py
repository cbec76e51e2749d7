"""trace/probes/bpf.py _all_items reads a whole BPF hash map in batches (BPF_MAP_LOOKUP_BATCH, its own
loop: bcc's items_lookup_batch shares one variable between the batch token and the count): on this
kernel, against real maps from empty to full, it must give exactly what bcc's key-by-key items()
gives -- the trace's counted host I/O is read through it."""

import pytest
from conftest import LIVE_MARKS

pytestmark = [*LIVE_MARKS]


@pytest.mark.parametrize("filled", [0, 1, 777, 4096])
def test_a_batched_read_of_a_hash_map_is_the_whole_map(filled):
    from gdsdiag.trace.probes.bpf import _all_items, import_bcc

    bcc = import_bcc()
    b = bcc.BPF(text="BPF_HASH(h, u64, u64, 4096);")
    try:
        t = b["h"]
        for k in range(filled):
            t[t.Key(k * 2654435761 % 2**40)] = t.Leaf(k + 1)
        want = sorted((k.value, v.value) for k, v in t.items())
        got = sorted((k.value, v.value) for k, v in _all_items(t))
        assert len(want) == filled and got == want, (len(got), len(want))
    finally:
        b.cleanup()
