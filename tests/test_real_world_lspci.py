"""Issue 12, lspci imports, on the corpus's real captures (tests/fixtures/corpus/, sources in each
file's header). Each test failed before its fix:

- the ASUS ESC8000A-E12 'lspci -tv' with that machine's own 'sudo lspci -vvv | grep ACSCtl': the grep
  file was dropped without a word when given after the tree; now its (uniform, all-off) setting
  answers the ACS question for every bridge.
- the GIGABYTE E251-U70 'lspci -tv': the ACS-unknown finding told the reader to run gdsdiag as root.
- a Sky Lake-E server's plain 'lspci' (corpus/lspci-plain/): the host bridge with a vendor name but no
  device id was judged 'not on the P2PDMA whitelist' (a definite NOT_SUPPORTED) instead of unknown.
"""

from conftest import corpus

from gdsdiag.topology.findings import find
from gdsdiag.topology.load import from_lspci
from gdsdiag.topology.model import Role
from gdsdiag.topology.pairs import P2pDmaMap, analyse_all, host_bridge_allows

ASUS_TREE = corpus("lspci-tree", "asus-esc8000a-e12-highpoint-nvme-switch.txt")
ASUS_GREP = corpus("lspci-vvv", "asus-esc8000a-e12-acsctl-grep-all-disabled.txt")
GIGABYTE = corpus("lspci-tree", "gigabyte-e251-u70-pex8747-cx6dx-v100-same-switch.txt")
SKYLAKE = corpus("lspci-plain", "skylake-e-server-lspci-bus00-excerpt.txt")


def _switch_pairs(topo):
    return [
        p
        for p in analyse_all(topo)
        if p.b.role == Role.NVME
        and p.p2pdma != P2pDmaMap.THRU_HOST_BRIDGE
        and p.path
        and not any(x.startswith("host-bridge") for x in p.path)
    ]


def test_acsctl_grep_next_to_a_tree_is_used_not_dropped():
    for order in ([ASUS_TREE, ASUS_GREP], [ASUS_GREP, ASUS_TREE]):
        topo = from_lspci(order)
        note = [p for p in topo.notes if "ACSCtl lines read" in p]
        assert len(note) == 1 and "SV- TB- RR- CR- UF- EC- DT-" in note[0]
        bridges = [d for d in topo.devices.values() if d.is_bridge]
        assert bridges and all(d.fn.acs_known and not d.fn.acs_control.redirects for d in bridges)
        assert not any(f.id == "acs-unknown" for f in find(topo, analyse_all(topo)))
    # and without the grep the same tree leaves ACS unknown (the pairs below one switch stay UNKNOWN)
    bare = from_lspci([ASUS_TREE])
    assert any(f.id == "acs-unknown" for f in find(bare, analyse_all(bare)))


def test_acs_unknown_fix_speaks_to_whoever_sent_the_text():
    topo = from_lspci([GIGABYTE])
    (f,) = [f for f in find(topo, analyse_all(topo)) if f.id == "acs-unknown"]
    assert "run gdsdiag as root" not in f.fix
    assert "sudo lspci -vvv" in f.fix and "no ACSCtl line" in f.evidence


def test_host_bridge_without_device_id_is_unknown_not_refused():
    # plain lspci names the host bridge 'Intel Corporation Sky Lake-E DMI3 Registers' with no id: the
    # vendor is known, the device id (which the kernel's whitelist is keyed on) is not
    topo = from_lspci([SKYLAKE])
    hb = topo.host_bridges["0000:00"]
    assert hb.vendor == 0x8086 and hb.device is None
    assert host_bridge_allows(topo, "0000:00", "0000:00") is None


def test_tree_without_names_is_said_not_silent():
    # 'lspci -t' without -v (a real report): before, 0 GPUs and no word about why
    topo = from_lspci([corpus("lspci-tree", "club3090-2x5090-threadripper-lspci-t-no-names-excerpt.txt")])
    assert len(topo.devices) > 40 and not topo.by_role(Role.GPU)
    assert any("lspci -t without -v" in p for p in topo.problems)
    assert any(f.id == "read-problem" and "lspci -t without -v" in f.title for f in find(topo, analyse_all(topo)))


def test_old_lspci_tree_nvidia_lowercase_and_domain_in_bus_ranges():
    # a real 'lspci -t -vv' of a CK804 (nForce4) board: 'nVidia Corporation G71 [GeForce 7900 GS]',
    # NVIDIA chipset functions that are not GPUs, and '09.0-[0000:01]--' bus ranges. Before: the file
    # was not recognised as a tree at all ("no lspci tree or device blocks found"); a single-root tree
    # starting '-[0000:00]-+-' was not recognised either.
    topo = from_lspci([corpus("lspci-tree", "ck804-athlon64-geforce7900gs-lspci-t-vv-nvidia-lowercase.txt")])
    (gpu,) = topo.by_role(Role.GPU)
    assert gpu.bdf == "0000:04:00.0" and gpu.parent.bdf == "0000:00:0d.0" and gpu.fn.vendor == 0x10DE
    nics = {d.bdf for d in topo.by_role(Role.NIC)}
    assert nics == {"0000:00:0a.0", "0000:01:0a.0"}  # CK804 Ethernet, Marvell 88E8001
    assert topo.devices["0000:01:07.0"].parent.bdf == "0000:00:09.0"
    assert len(analyse_all(topo)) == 2
