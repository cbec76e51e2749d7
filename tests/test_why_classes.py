"""Each class of node where P2P is possible and something else decides the route gives its own
decisive fact and fix, the same in `validate --proof`'s JSON and text and in `sweep`'s (issue 45 item 3),
and every why in --json is the structured list docs/json.md describes: {fact, value, source, role},
one decisive fact, first.

The nodes are test_why_measured.py's, each from a committed capture (sources there and in
tests/check_fixtures.py): the GPU machine's snapshot with nvidia-fs loaded and a GDS-aware nvme (P2P
possible on the node) — its /var/tmp on ext4 over virtio (an unsupported file system for GDS), then
the IOMMU translating, then NVIDIA's own cufile.json template with force_compat_mode true; and the
GPU machine as it is with kvikio-zarr-v3's real cufile.json (allow_compat_mode false: no route). The
measured runs are the GPU machine's real proof cell and sweep points. Beside them: NVIDIA's template
with a denylist key filled in (a reason of its own; deciding where the mount would go direct), and ACS
redirect on the DGX-2H's real tree (tests/hgx_fixture.py) deciding where node and mount allow P2P.
No capture holds a GDS-served mount (an NVMe namespace nvidia-fs serves, NFS over RDMA): where a test
needs one it says so and gives the mount's route as check would give it."""

from __future__ import annotations

import json
import os
import re
import shutil

import check_fixtures as cf
import pytest
from rich.console import Console
from test_why_measured import (
    KVIKIO_ZARR,
    SWEEP_DIR,
    _cell,
    _proof_cell,
    _run,
    _sweep_doc,
    _tree,
    _tree_plain,
)

from gdsdiag.render.sweep_out import why_lines
from gdsdiag.routes import Route
from gdsdiag.sweep.runner import PointRecord, add_whys
from gdsdiag.validate import proof, proof_out

DOCS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs", "json.md")


def _force_compat(root):
    p = os.path.join(root, "etc", "cufile.json")
    text = open(p).read()
    with open(p, "w") as f:
        f.write(text.replace('"allow_compat_mode": true,', '"allow_compat_mode": true, "force_compat_mode": true,'))


def _kvikio_zarr(root):
    shutil.copy(KVIKIO_ZARR, os.path.join(root, "etc", "cufile.json"))


# class -> (how its node is made, the proof's result, decisive (fact, value prefix, source prefix), fix prefix)
CLASSES = {
    "unsupported file system": (
        lambda tmp: _tree(tmp),
        "compat",
        ("its mount", "ext4 on virtio: not an NVMe namespace", "gdsdiag check's route rules"),
        "move the file to a mount GDS serves",
    ),
    "IOMMU on": (
        lambda tmp: _tree(tmp, cf.set_iommu_translating),
        "compat",
        ("IOMMU", "translated", "/sys/kernel/iommu_groups"),
        "boot with iommu=pt or turn the IOMMU off",
    ),
    "compat forced in cufile.json": (
        lambda tmp: _tree(tmp, _force_compat),
        "compat",
        ("cufile.json force_compat_mode", "true", "/etc/cufile.json"),
        "set properties.force_compat_mode to false in /etc/cufile.json",
    ),
    # (the variable alone, no key in the file: it was reported as cufile.json's force_compat_mode)
    "compat forced by CUFILE_FORCE_COMPAT_MODE": (
        lambda tmp: _tree(tmp, env={"CUFILE_FORCE_COMPAT_MODE": "true"}),
        "compat",
        ("CUFILE_FORCE_COMPAT_MODE", "CUFILE_FORCE_COMPAT_MODE=true in the environment", "environment of gdsdiag"),
        "unset CUFILE_FORCE_COMPAT_MODE",
    ),
    "allow_compat_mode false, no nvidia-fs": (
        lambda tmp: _tree_plain(tmp, _kvikio_zarr),
        "no_route",
        ("nvidia-fs", "nvidia-fs is not loaded", "/proc/modules"),
        "install the nvidia-fs package",
    ),
}


def _shape(chain: list[dict]) -> None:
    """docs/json.md's why: {fact, value, source, role}, role decisive | contributing, one decisive, first."""
    assert chain, "an empty why"
    for x in chain:
        assert set(x) == {"fact", "value", "source", "role"} and x["role"] in ("decisive", "contributing"), x
        assert all(isinstance(x[k], str) and x[k] for k in ("fact", "value", "source")), x
    assert [x["role"] for x in chain].count("decisive") == 1 and chain[0]["role"] == "decisive", chain


@pytest.mark.parametrize("name", list(CLASSES))
def test_each_class_gives_its_own_decisive_fact_and_fix_in_json_and_text(name, tmp_path):
    make, result, (fact, value, source), fix = CLASSES[name]
    node = make(tmp_path)
    real = _proof_cell()
    if result == "no_route":  # (the configured run is the real run that had compat forbidden: 5001)
        cell = _cell(node, _run(real["compat_forbidden"]), None)
    else:
        cell = _cell(node, _run(real["configured"]), _run(real["compat_forbidden"]))
    j = cell.to_json()
    assert j["result"] == result
    _shape(j["why_chain"])
    lead = j["why_chain"][0]
    assert lead["fact"] == fact and lead["value"].startswith(value) and lead["source"].startswith(source), lead
    assert j["fix"].startswith(fix), j["fix"]
    # the text: the decisive fact with its source on one line, the fix on the next
    con = Console(record=True, width=400)
    proof_out.render(con, proof.ProofMatrix([("GPU0", "0000:00:06.0")], [cell.target], [cell], 16 << 20, 1 << 20, 60.0))
    text = con.export_text()
    why = re.search(r"^  why: (.*)$", text, re.M)
    assert why is not None and why.group(1) == f"{lead['fact']}: {lead['value']} ({lead['source']})"
    assert f"\n  fix: {j['fix']}\n" in text

    # sweep: the GPU machine's real cuFile points, on that node
    if result == "no_route":
        return  # (its points ran with compat allowed: they are the classes above)
    recs = [
        PointRecord(**{k: p[k] for k in PointRecord.__dataclass_fields__ if k in p})
        for p in _sweep_doc("smoke.json")["points"]
    ]
    add_whys(recs, SWEEP_DIR, node_facts=lambda: node)
    for r in recs:
        pj = r.to_json()
        _shape(pj["why_chain"])
        if r.route == Route.COMPAT.value:
            assert pj["why_chain"][0]["fact"] == fact and pj["fix"].startswith(fix), (r.mode, pj["why_chain"][0])
    lines = why_lines(recs)
    assert f"why cufile (2 points): {fact}: " in lines[0] and lines[1].startswith(f"fix cufile: {fix}")


def test_docs_json_md_says_why_is_that_structured_list():
    text = open(DOCS, encoding="utf-8").read()
    assert "`{fact, value, source, role}`, the `decisive` fact\nfirst" in text
    roles = [m.group(1) for m in re.finditer(r'"source": "[^"]*", "role": "(\w+)"\}', text)]
    assert len(roles) >= 3 and set(roles) <= {"decisive", "contributing"}, roles


def _denylist(key: str, values: list[str]):
    """NVIDIA's own cufile.json template (the GPU machine's /etc/cufile.json) with one denylist key
    filled in, as its comments show (e.g. "mounts": ["/mnt/test"])."""

    def edit(root):
        p = os.path.join(root, "etc", "cufile.json")
        text = open(p).read()
        old = f'"{key}": [ ]' if key != "drivers" else '"drivers":  [ ]'
        assert text.count(old) == 1, old
        with open(p, "w") as f:
            f.write(text.replace(old, f'"{key}": {json.dumps(values)}'))

    return edit


def test_a_denylisted_mount_is_a_reason_of_its_own_and_decides_where_the_mount_would_go_p2p(tmp_path):
    from gdsdiag.check.paths import DENYLIST, _denylisted, file_route
    from gdsdiag.platform import mounts

    node = _tree(tmp_path, _denylist("mounts", ["/"]))
    assert Route.NVFS in node.routes  # (P2P possible on the node)
    route, reasons, _ = file_route(node._ctx, "/var/tmp/x.bin", node.routes)
    # the virtio disk already keeps GDS off this mount: the listing is one more reason, after it
    assert route == Route.COMPAT and reasons[0].startswith("ext4 on virtio")
    assert reasons[1] == f"{DENYLIST}mounts lists /: cuFile does not use GDS for it"
    j = _cell(node, _run(_proof_cell()["configured"]), _run(_proof_cell()["compat_forbidden"])).to_json()
    assert j["why_chain"][0]["fact"] == "its mount" and j["why_chain"][0]["value"].startswith("ext4 on virtio")
    assert ("its mount", reasons[1]) in [(x["fact"], x["value"]) for x in j["why_chain"]]
    # where the mount would take a direct route (an NVMe namespace nvidia-fs serves), the listing takes it away
    ctx = node._ctx
    m = mounts.mount_for("/var/tmp", ctx.mounts)
    chain = mounts.block_chain(ctx.fs, m.dev)
    route, why = _denylisted(ctx, m, chain, node.routes, Route.NVFS, ["NVMe namespace with a GDS-aware nvme driver"])
    assert route == Route.COMPAT and why[0] == f"{DENYLIST}mounts lists /: cuFile does not use GDS for it"
    node.files["/var/tmp"] = (route, why, "ext4 /dev/vda on /")  # (the proof target's route, as if direct before)
    cell = _cell(node, _run(_proof_cell()["configured"]), _run(_proof_cell()["compat_forbidden"]))
    lead = cell.to_json()["why_chain"][0]
    assert (lead["fact"], lead["value"], lead["role"]) == ("its mount", why[0], "decisive")
    assert cell.fix == "take / out of denylist.mounts in /etc/cufile.json"


@pytest.mark.parametrize(
    "key,values,said",
    [
        ("filesystems", ["ext4"], "filesystems lists ext4"),
        ("devices", ["/dev/vda"], "devices lists /dev/vda"),
    ],
)
def test_a_denylisted_file_system_or_device_is_named(tmp_path, key, values, said):
    from gdsdiag.check.paths import DENYLIST, file_route

    node = _tree(tmp_path, _denylist(key, values))
    _, reasons, _ = file_route(node._ctx, "/var/tmp/x.bin", node.routes)
    assert f"{DENYLIST}{said}: cuFile does not use GDS for it" in reasons


def test_acs_redirect_on_the_path_decides_where_node_and_mount_both_allow_p2p(tmp_path):
    """The DGX-2H's PCIe tree from hwloc's real XML (tests/hgx_fixture.py), its switch ports with ACS
    redirect as Linux sets it once an IOMMU driver asks for ACS: check's platform.acs fails on 28
    bridges. No capture holds that node's mounts or nvidia-fs, so its direct route and a mount that
    takes it (an NVMe namespace nvidia-fs serves) are given here, as check would give them there: the
    only fact left between them is ACS, and it is the decisive one, with check's fix."""
    import dataclasses

    from hgx_fixture import build_dgx2h

    from gdsdiag.check.context import CheckContext
    from gdsdiag.check.facts import NodeFacts
    from gdsdiag.check.why import route_why
    from gdsdiag.platform.roots import node_root
    from gdsdiag.sweep.why import point_why

    root = str(tmp_path / "dgx2h")
    build_dgx2h(root, acs_redirect=True)
    with node_root(root) as fs:
        real = NodeFacts.collect(CheckContext(fs, env={}))
    status, summary, source, fix = real.checks["platform.acs"]
    assert status.value == "FAIL" and summary == "28 bridge(s) redirect peer traffic"
    # (hwloc's capture has no /proc: the NVIDIA driver and nvidia-fs are given with the direct route)
    checks = {k: v for k, v in real.checks.items() if not k.startswith(("nvidia.", "nvfs."))}
    node = dataclasses.replace(real, routes=[Route.NVFS, Route.COMPAT], checks=checks, blockers={})
    node.files["/raid"] = (
        Route.NVFS,
        ["NVMe namespace with a GDS-aware nvme driver and nvidia-fs loaded"],
        "ext4 on /raid",
    )
    from gdsdiag.check.facts import Fact

    facts, got_fix = route_why(
        Route.COMPAT, Fact("cuFile's counters", "COMPAT 32 of 32 I/O", "cuFileGetStats"), node, "/raid"
    )
    assert (facts[0].fact, facts[0].value, facts[0].source, facts[0].role) == (
        "ACS redirect on GPU paths",
        summary,
        source,
        "decisive",
    )
    assert got_fix == fix == "disable ACS redirect on these ports (BIOS, or setpci at boot)"
    # a sweep point there says the same
    pfacts, pfix = point_why("cufile", "COMPAT", {"COMPAT": 10}, None, node, "/raid")
    assert pfacts[0].fact == "ACS redirect on GPU paths" and pfix == fix
    _shape([f.to_json() for f in facts])
