"""Config-space decoding against bytes laid out as the PCIe spec / pci_regs.h define them, and
against real hex dumps from the corpus (lspci -vvxxx)."""

import struct

from hypothesis import given, settings
from hypothesis import strategies as st

from gdsdiag.pci.config_space import PortType, decode, lane_gbytes_per_s


def make_config(port_type=4, lnkcap=(4, 16), lnksta=(3, 8), devctl=0x2830, acs_ctl=None, size=4096):
    b = bytearray(size)
    struct.pack_into("<HH", b, 0, 0x10B5, 0x8749)
    struct.pack_into("<H", b, 6, 0x10)  # status: capabilities list
    b[0x09:0x0C] = bytes([0x00, 0x04, 0x06])  # class 0x060400
    b[0x0E] = 0x01  # type 1 header
    b[0x19] = 0x05  # secondary bus
    b[0x34] = 0x40
    b[0x40], b[0x41] = 0x01, 0x68  # PM cap -> next 0x68
    b[0x68], b[0x69] = 0x10, 0x00  # PCIe cap, end of list
    struct.pack_into("<H", b, 0x6A, (port_type << 4) | 2)
    struct.pack_into("<I", b, 0x6C, 0x2)  # devcap: MPS supported 512
    struct.pack_into("<H", b, 0x70, devctl)
    struct.pack_into("<I", b, 0x74, lnkcap[0] | lnkcap[1] << 4)
    struct.pack_into("<H", b, 0x7A, lnksta[0] | lnksta[1] << 4)
    if size >= 4096:
        # AER at 0x100 -> ACS at 0x148 -> end
        struct.pack_into("<I", b, 0x100, 0x0001 | 1 << 16 | 0x148 << 20)
        if acs_ctl is not None:
            struct.pack_into("<I", b, 0x148, 0x000D | 1 << 16)
            struct.pack_into("<HH", b, 0x14C, 0x7F, acs_ctl)
    return bytes(b)


def test_pcie_capability_decoded():
    cs = decode(make_config())
    assert cs.vendor == 0x10B5 and cs.device == 0x8749 and cs.class_code == 0x060400
    assert cs.secondary_bus == 5
    p = cs.pcie
    assert p.port_type == PortType.ROOT_PORT
    assert (p.link_cap_speed_gts, p.link_cap_width) == (16.0, 16)
    assert (p.link_speed_gts, p.link_width) == (8.0, 8)
    # devctl 0x2830: MRRS code 2 (512), MPS code 1 (256), relaxed ordering bit 4 set
    assert (p.max_payload, p.max_read_request, p.relaxed_ordering) == (256, 512, True)
    assert p.max_payload_supported == 512
    assert cs.capabilities == [0x01, 0x10]


def test_acs_redirect_bits():
    cs = decode(make_config(acs_ctl=0b0011101))  # SV RR CR UF
    assert cs.has_acs is True
    a = cs.acs_control
    assert a.source_validation and a.request_redirect and a.completion_redirect and a.upstream_forwarding
    assert not a.translation_blocking and not a.egress_control and not a.direct_translated
    assert a.redirects
    assert decode(make_config(acs_ctl=0b0000001)).acs_control.redirects is False  # SV only
    assert decode(make_config(acs_ctl=0b0100000)).acs_control.redirects is True  # EC alone redirects
    assert cs.ext_capabilities == [0x0001, 0x000D]


def test_no_acs_capability_is_known_absent():
    cs = decode(make_config(acs_ctl=None))
    assert cs.has_acs is False and cs.acs_control is None


def test_unprivileged_64_bytes_says_acs_unknown():
    cs = decode(make_config()[:64])
    assert cs.has_acs is None and cs.pcie is None
    assert cs.class_code == 0x060400
    assert any("beyond the 64 readable bytes" in p for p in cs.problems)


def test_256_bytes_reports_acs_needs_root():
    cs = decode(make_config()[:256])
    assert cs.pcie is not None and cs.has_acs is None
    assert "ACS unknown: extended config space needs root" in cs.problems


def test_capability_loop_detected():
    b = bytearray(make_config())
    b[0x69] = 0x40  # PCIe cap points back to PM
    cs = decode(bytes(b))
    assert any("loops" in p for p in cs.problems)


def test_extended_loop_detected():
    b = bytearray(make_config(acs_ctl=1))
    struct.pack_into("<I", b, 0x148, 0x000D | 1 << 16 | 0x100 << 20)
    cs = decode(bytes(b))
    assert any("extended capability list loops" in p for p in cs.problems)


def test_lane_rates_match_hwloc():
    # hwloc's pci_link_speed for 8 GT/s x4 in its corpus XML is 3.938462 GB/s
    assert abs(lane_gbytes_per_s(8.0) * 4 - 3.938462) < 1e-6
    assert lane_gbytes_per_s(2.5) == 0.25
    assert abs(lane_gbytes_per_s(32.0) * 16 - 63.015) < 0.001


@settings(max_examples=400, deadline=None)
@given(st.binary(min_size=0, max_size=4096))
def test_fuzz_random_bytes_never_raise(data):
    cs = decode(data)
    assert isinstance(cs.problems, list)


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 4095), st.integers(0, 255), st.sampled_from([64, 256, 4096]))
def test_fuzz_mutated_real_layout(pos, val, size):
    b = bytearray(make_config(acs_ctl=0x1D))
    b[pos] = val
    decode(bytes(b[:size]))
