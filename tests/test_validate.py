"""gdsdiag validate: policy parsing, and every rule with a pass and a fail case on node trees built from
the GPU machine's real snapshot (check_fixtures.py names the source of every replaced file), the
HGX-class tree from hwloc's DGX-2H capture, the real H200 sweep (sweep_fixture.py) and the real
trace recordings (fixtures/trace/)."""

import json
import os
import shutil

import pytest
from check_fixtures import add_nvidia_fs, copy_tree, set_cufile, set_iommu_translating, set_link, unpack_h200
from conftest import live
from sweep_fixture import h200_sweep_doc

from gdsdiag.check.context import CheckContext
from gdsdiag.errors import GdsdiagError
from gdsdiag.platform.fsroot import FsRoot
from gdsdiag.validate import policy as pol
from gdsdiag.validate.rules import RULES, route_mix
from gdsdiag.validate.runner import run
from gdsdiag.verdicts import Status

HERE = os.path.dirname(os.path.abspath(__file__))
TRACE = os.path.join(HERE, "fixtures", "trace")
PATHMIX = os.path.join(HERE, "fixtures", "gpu-machine", "cufile-pathmix.json")


@pytest.fixture(scope="module")
def h200(tmp_path_factory):
    return unpack_h200(str(tmp_path_factory.mktemp("h200")))


@pytest.fixture
def tree(h200, tmp_path):
    return copy_tree(h200, str(tmp_path / "node"))


def policy_file(tmp_path, text):
    p = tmp_path / "policy.yaml"
    p.write_text(text)
    return str(p)


def validate(root, policy_text=None, tmp_path=None, paths=(), **kw):
    p = pol.load(policy_file(tmp_path, policy_text) if policy_text else None)
    rep = run(CheckContext(FsRoot(root)), p, list(paths), **kw)
    return {r.rule: r for r in rep.results}, rep


def sweep_file(tmp_path, doc=None, name="sweep.json"):
    f = tmp_path / name
    f.write_text(json.dumps(doc or h200_sweep_doc()))
    return str(f)


# ---- policy ----------------------------------------------------------------------------------------


def test_default_policy_loads_and_every_key_is_in_the_schema():
    p = pol.load()
    assert p.source == "default" and p.get("io.max_compat_share") == 0.0
    assert p.get("iommu.allowed") == ["off", "passthrough"]  # YAML 'off' is not read as false
    flat = pol._flatten(p.data)
    assert set(flat) == set(pol.SCHEMA)


def test_user_policy_merges_over_default(tmp_path):
    p = pol.load(policy_file(tmp_path, "version: 1\nio: {max_compat_share: 1.0}\nexpect: {gpus: 8}\n"))
    assert p.get("io.max_compat_share") == 1.0 and p.get("io.max_bounce_share") == 0.0
    assert p.get("expect.gpus") == 8 and p.get("expect.nics") is None


@pytest.mark.parametrize(
    "text,match",
    [
        (
            "io: {max_compat_shar: 0.1}\n",
            "unknown policy key 'io.max_compat_shar' .*did you mean 'io.max_compat_share'",
        ),
        ("io: {max_compat_share: 5}\n", "not a share between 0 and 1"),
        ("routes: {allowed: [NVFS, TELEPORT]}\n", "unknown route"),
        ("pcie: {acs_redirect: maybe}\n", "not one of fail, warn, ignore"),
        ("version: 2\n", "version 2 is not supported"),
        ("sweep: {min_gbps: {huge: 1}}\n", "not a size"),
        ("sweep: {quick: {bs: [1m], turbo: true}}\n", "not a sweep setting"),
        ("mounts: [{allowed: [NVFS]}]\n", "needs a 'path'"),
        ("expect: [1, 2\n", "not valid YAML"),
        ("- a\n- b\n", "must be a mapping"),
    ],
)
def test_bad_policies_are_one_clear_error(tmp_path, text, match):
    with pytest.raises(GdsdiagError, match=match):
        pol.load(policy_file(tmp_path, text))


def test_missing_policy_file(tmp_path):
    with pytest.raises(GdsdiagError, match="cannot read policy"):
        pol.load(str(tmp_path / "nope.yaml"))


# ---- static rules on the real H200 snapshot ---------------------------------------------------------


def test_every_rule_once_in_cost_order(h200, tmp_path):
    res, rep = validate(h200, tmp_path=tmp_path)
    assert [r.rule for r in rep.results] == [r.id for r in RULES]
    stages = [r.stage for r in rep.results]
    assert stages == sorted(stages, key=lambda s: s != "static")  # static before measured
    assert rep.node["snapshot_id"].startswith("sha256:") and rep.node["tool_version"]


def test_h200_baseline(h200, tmp_path):
    res, rep = validate(h200, tmp_path=tmp_path)
    want = {
        "drivers.nvidia": Status.PASS,
        "drivers.libcufile": Status.PASS,
        "container.udev": Status.PASS,
        "cufile.json": Status.PASS,
        "platform.iommu": Status.PASS,
        "pcie.acs": Status.PASS,
        "pcie.downtrained": Status.PASS,
        "cufile.ignored_keys": Status.PASS,
        "cufile.compat_pool": Status.PASS,
        "drivers.nvidia_fs": Status.SKIP,
        "inventory.gpus": Status.SKIP,
        "routes.per_mount": Status.SKIP,
        "io.compat_share": Status.SKIP,
    }
    assert {k: res[k].status for k in want} == want
    assert "580.159.04" in res["drivers.nvidia"].summary


def test_inventory_counts(h200, tmp_path):
    res, _ = validate(h200, "expect: {gpus: 1, nics: 1, nvme: 0}\n", tmp_path)
    assert all(res[k].status == Status.PASS for k in ("inventory.gpus", "inventory.nics", "inventory.nvme"))
    res, _ = validate(h200, "expect: {gpus: 8}\n", tmp_path)
    assert res["inventory.gpus"].status == Status.FAIL and "1 found, 8 expected" in res["inventory.gpus"].summary
    assert "0000:00:06.0" in res["inventory.gpus"].evidence[0].value


def test_nvidia_driver_missing_is_fatal_and_stops_measurement(tree, tmp_path):
    shutil.rmtree(os.path.join(tree, "proc/driver/nvidia"))
    res, rep = validate(tree, tmp_path=tmp_path, sweep_results=[sweep_file(tmp_path)])
    assert res["drivers.nvidia"].status == Status.FAIL
    assert rep.stopped_early and "drivers.nvidia" in rep.stopped_early
    assert res["io.compat_share"].status == Status.SKIP and "fatal" in res["io.compat_share"].summary
    res, rep = validate(tree, tmp_path=tmp_path, sweep_results=[sweep_file(tmp_path, name="s2.json")], keep_going=True)
    assert rep.stopped_early is None and res["io.compat_share"].status == Status.FAIL


def test_nvidia_min_version(h200, tmp_path):
    res, _ = validate(h200, "drivers: {nvidia_min: '999.1'}\n", tmp_path)
    assert res["drivers.nvidia"].status == Status.FAIL and "< 999.1" in res["drivers.nvidia"].summary
    res, _ = validate(h200, "drivers: {nvidia_min: '565.47'}\n", tmp_path)
    assert res["drivers.nvidia"].status == Status.PASS


def test_libcufile(tree, tmp_path):
    res, _ = validate(tree, "drivers: {libcufile_min: '1.17'}\n", tmp_path)
    assert res["drivers.libcufile"].status == Status.FAIL and "1.15.1.6 < 1.17" in res["drivers.libcufile"].summary
    rec = os.path.join(tree, "gdsdiag/libcufile.json")
    d = json.load(open(rec))
    d["path"] = None
    json.dump(d, open(rec, "w"))
    res, _ = validate(tree, tmp_path=tmp_path)
    assert res["drivers.libcufile"].status == Status.FAIL and "not found" in res["drivers.libcufile"].summary


def test_nvidia_fs(tree, tmp_path):
    res, _ = validate(tree, "drivers: {nvidia_fs_required: true}\n", tmp_path)
    assert res["drivers.nvidia_fs"].status == Status.FAIL
    add_nvidia_fs(tree)
    res, _ = validate(tree, "drivers: {nvidia_fs_required: true}\n", tmp_path)
    assert res["drivers.nvidia_fs"].status == Status.PASS and "2.25.7" in res["drivers.nvidia_fs"].summary
    res, _ = validate(tree, "drivers: {nvidia_fs_min: '2.26'}\n", tmp_path)
    assert res["drivers.nvidia_fs"].status == Status.FAIL


def test_iommu_translating_fails(tree, tmp_path):
    set_iommu_translating(tree)
    res, _ = validate(tree, tmp_path=tmp_path)
    assert res["platform.iommu"].status == Status.FAIL and "translated" in res["platform.iommu"].summary
    res, _ = validate(tree, "iommu: {allowed: ['off', passthrough, translated]}\n", tmp_path)
    assert res["platform.iommu"].status == Status.PASS


def test_udev_missing_is_fatal(tree, tmp_path):
    shutil.rmtree(os.path.join(tree, "run/udev"))
    res, _ = validate(tree, tmp_path=tmp_path)
    r = res["container.udev"]
    assert r.status == Status.FAIL and "/run/udev missing" in r.summary and "bind-mount" in r.fix
    res, _ = validate(tree, "container: {require_udev: false}\n", tmp_path)
    assert res["container.udev"].status == Status.WARN


def test_downtrained_gpu_link(tree, tmp_path):
    # a GPU at x8 in its x16 slot (width below max is never an idle power state)
    set_link(tree, "0000:00:06.0", width=8)
    res, _ = validate(tree, tmp_path=tmp_path)
    r = res["pcie.downtrained"]
    assert r.status == Status.FAIL and "x8" in r.evidence[0].value
    res, _ = validate(tree, "pcie: {downtrained: warn}\n", tmp_path)
    assert res["pcie.downtrained"].status == Status.WARN


CORPUS = os.path.join(HERE, "fixtures", "corpus")
GIGABYTE = os.path.join(CORPUS, "lspci-tree", "gigabyte-e251-u70-pex8747-cx6dx-v100-same-switch.txt")


def _first_acsctl(name):
    from gdsdiag.importers.lspci import parse_acsctl

    with open(os.path.join(CORPUS, "lspci-vvv", name)) as f:
        return parse_acsctl(next(line for line in f if "ACSCtl:" in line))


def _gigabyte_inputs(acs):
    """Real topology: a V100 and a ConnectX-6 Dx under one PLX PEX8747 (l2fwd-nv README 'lspci -tv').
    That capture has no ACS state, so each bridge of the GPU↔NIC path gets a real ACSCtl line: the
    redirecting PEX8749 downstream port of the N1SDP capture, or the all-disabled line of the
    ESC8000A capture. (No capture in the corpus has both a GPU↔NIC path and its ACS state.)"""
    from gdsdiag.topology.load import from_lspci
    from gdsdiag.topology.model import Role
    from gdsdiag.topology.pairs import analyse_all
    from gdsdiag.validate.rules import Inputs

    topo = from_lspci([GIGABYTE])
    for d in topo.devices.values():
        if d.role not in (Role.GPU, Role.NIC, Role.NVME):
            d.fn.acs_text = acs
    pairs = analyse_all(topo)
    assert any(p.b.role == Role.NIC for p in pairs)
    return Inputs(pol.load(), None, [], topo=topo, pairs=pairs)


def test_acs_redirect_on_gpu_nic_path():
    from gdsdiag.validate.rules import RULES as R

    rule = next(r for r in R if r.id == "pcie.acs")
    redirect = _first_acsctl("arm-n1sdp-plx-pex8749-acs-redir-on-dsp-lspci-vvxxx.txt")
    disabled = _first_acsctl("asus-esc8000a-e12-acsctl-grep-all-disabled.txt")
    assert redirect.redirects and not disabled.redirects
    r = rule.evaluate(_gigabyte_inputs(redirect))
    assert "ACSCtl" in r.evidence[0].source and "GPU" in r.evidence[0].value
    assert r.status == Status.FAIL and "setpci" in r.fix
    assert rule.evaluate(_gigabyte_inputs(disabled)).status == Status.PASS
    assert rule.evaluate(_gigabyte_inputs(None)).status == Status.SKIP  # lspci -tv alone: ACS unknown
    inp = _gigabyte_inputs(redirect)
    inp.policy = pol.Policy(pol._merge(inp.policy.data, {"pcie": {"acs_redirect": "warn"}}), "t")
    assert rule.evaluate(inp).status == Status.WARN


def test_cufile_json_rules(tree, tmp_path):
    set_cufile(tree, '{"properties": {"max_direct_io_size_kb": "big", "max_direct_io_size_kbb": 16384}}')
    res, _ = validate(tree, tmp_path=tmp_path)
    assert res["cufile.json"].status == Status.FAIL and "max_direct_io_size_kb" in res["cufile.json"].evidence[0].value
    assert res["cufile.ignored_keys"].status == Status.WARN
    assert "did you mean 'properties.max_direct_io_size_kb'" in res["cufile.ignored_keys"].evidence[0].value
    res, _ = validate(tree, "cufile: {ignored_keys: fail}\n", tmp_path)
    assert res["cufile.ignored_keys"].status == Status.FAIL
    os.unlink(os.path.join(tree, "etc/cufile.json"))
    res, _ = validate(tree, tmp_path=tmp_path)
    assert res["cufile.json"].status == Status.WARN
    res, _ = validate(tree, "cufile: {require_file: true}\n", tmp_path)
    assert res["cufile.json"].status == Status.FAIL


def test_key_newer_than_installed_libcufile(tree, tmp_path):
    # gpu_bounce_buffer_slab_config is read from libcufile 1.17; the snapshot's libcufile is 1.15.1.6
    set_cufile(tree, '{"properties": {"gpu_bounce_buffer_slab_config": {"slab_size_kb": [1024], "slab_count": [128]}}}')
    res, _ = validate(tree, tmp_path=tmp_path)
    r = res["cufile.ignored_keys"]
    assert r.status == Status.WARN and "≥ 1.17" in r.evidence[0].value and "1.15.1.6" in r.evidence[0].value


def test_compat_pool(tree, tmp_path):
    res, _ = validate(tree, "cufile: {compat_pool: {concurrent_ios: 128}}\n", tmp_path)
    r = res["cufile.compat_pool"]
    assert r.status == Status.FAIL and "64 × 1024 KiB" in r.summary and "posix_pool_slab_count" in r.fix
    set_cufile(
        tree, '{"properties": {"posix_pool_slab_size_kb": [4, 1024, 16384], "posix_pool_slab_count": [128, 256, 64]}}'
    )
    res, _ = validate(tree, "cufile: {compat_pool: {concurrent_ios: 128}}\n", tmp_path)
    assert res["cufile.compat_pool"].status == Status.PASS
    res, _ = validate(tree, "cufile: {compat_pool: {concurrent_ios: 8, io_size: 64m}}\n", tmp_path)
    assert res["cufile.compat_pool"].status == Status.WARN
    set_cufile(tree, '{"properties": {"allow_compat_mode": false}}')
    res, _ = validate(tree, "cufile: {compat_pool: {concurrent_ios: 128}}\n", tmp_path)
    assert res["cufile.compat_pool"].status == Status.SKIP


def test_routes_per_mount(h200, tmp_path):
    # the snapshot's root filesystem: no nvidia-fs, no P2PDMA → a cuFile I/O there runs in compat mode
    res, _ = validate(h200, tmp_path=tmp_path, paths=["/"])
    r = res["routes.per_mount"]
    assert r.status == Status.FAIL and "COMPAT" in r.summary
    res, _ = validate(h200, "mounts: [{path: /, allowed: [NVFS, COMPAT]}]\n", tmp_path)
    assert res["routes.per_mount"].status == Status.PASS


# ---- measured rules on the real H200 sweep and trace recordings ----------------------------------


def test_sweep_thresholds(h200, tmp_path):
    sw = [sweep_file(tmp_path)]
    res, _ = validate(h200, tmp_path=tmp_path, sweep_results=sw)
    r = res["sweep.min_gbps"]
    # cufile read 1 MiB × 1 thread measured 0.977 GB/s on the H200 VM: below the default 1.0 floor
    assert r.status == Status.FAIL and "0.977 GB/s" in r.evidence[0].value
    assert res["sweep.max_p99"].status == Status.PASS
    res, _ = validate(h200, "sweep: {min_gbps: {1m: 0.5}, max_p99_us: {64k: 500}}\n", tmp_path, sweep_results=sw)
    assert res["sweep.min_gbps"].status == Status.PASS
    r = res["sweep.max_p99"]
    assert r.status == Status.FAIL and any("cufile read bs=64k ×4: p99 623 µs (max 500)" in e.value for e in r.evidence)


def test_failed_point_fails_min_gbps(h200, tmp_path):
    doc = h200_sweep_doc()
    doc["points"].append(
        {
            "mode": "cufile",
            "rw": "read",
            "bs": 1 << 20,
            "threads": 16,
            "summary": {},
            "route": "FAILED",
            "error": "gdsdiag: error: cuFileRead failed",
        }
    )
    res, _ = validate(h200, tmp_path=tmp_path, sweep_results=[sweep_file(tmp_path, doc)])
    assert (
        res["sweep.min_gbps"].status == Status.FAIL and "cuFileRead failed" in res["sweep.min_gbps"].evidence[0].value
    )


def test_compat_share_fails_by_default_and_passes_when_allowed(h200, tmp_path):
    sw = [sweep_file(tmp_path)]
    res, _ = validate(h200, tmp_path=tmp_path, sweep_results=sw)
    r = res["io.compat_share"]
    assert r.status == Status.FAIL and "100.0% COMPAT" in r.summary and "allowed 0%" in r.summary
    assert any("route COMPAT" in e.value for e in r.evidence)
    assert res["io.bounce_share"].status == Status.PASS
    res, _ = validate(h200, "io: {max_compat_share: 1.0}\n", tmp_path, sweep_results=sw)
    assert res["io.compat_share"].status == Status.PASS


def test_trace_shares_from_recordings(h200, tmp_path):
    res, _ = validate(h200, tmp_path=tmp_path, trace_replay=os.path.join(TRACE, "trace-h200-bounce.jsonl.gz"))
    assert (
        res["io.bounce_share"].status == Status.FAIL
        # 16 bounced 1 MiB I/Os; the sweep's 9 pattern-file writes (8 MiB) are HOST I/O, not bounce
        and "trace 18.2% DRAM_BOUNCE (16 I/Os)" in res["io.bounce_share"].summary
    )
    assert res["io.compat_share"].status == Status.PASS
    res, _ = validate(h200, tmp_path=tmp_path, trace_replay=os.path.join(TRACE, "trace-h200-cufile.jsonl.gz"))
    assert res["io.compat_share"].status == Status.FAIL and "(18 I/Os)" in res["io.compat_share"].summary


def test_route_mix_uses_cufile_stats_counts():
    with open(PATHMIX) as f:
        mixdoc = json.loads("".join(line for line in f if not line.startswith("#")))
    stats = mixdoc["path_mix"]["routes"]  # real level-3 counters: 12 posix ops
    doc = {
        "points": [
            {
                "mode": "cufile",
                "rw": "read",
                "bs": 1 << 20,
                "threads": 1,
                "summary": {"bytes": 1000},
                "route": "COMPAT",
                "route_detail": {"cufile_stats": {"routes": stats}},
            },
            {
                "mode": "cufile",
                "rw": "read",
                "bs": 1 << 20,
                "threads": 1,
                "summary": {"bytes": 3000},
                "route": "MIXED(COMPAT=1,NVFS=2)",
                "route_mix": {"COMPAT": 1, "NVFS": 2},  # what the sweep writes beside the label (issue 23)
            },
            {  # a batch point of a document from before route_mix: its batch counters, never its label
                "mode": "cufile-batch",
                "rw": "read",
                "bs": 1 << 20,
                "threads": 1,
                "summary": {"bytes": 200},
                "route": "MIXED(NVFS=1,P2PDMA=1)",
                "route_detail": {
                    "cufile_stats": {"routes": {"NVFS": 0}},
                    "cufile_batch_stats": {"NVFS": 1, "P2PDMA": 1},
                },
            },
            {  # a label with no counts behind it is not parsed: the route is not known
                "mode": "cufile",
                "rw": "read",
                "bs": 1 << 20,
                "threads": 1,
                "summary": {"bytes": 50},
                "route": "MIXED(NVFS=1)",
            },
            {
                "mode": "kvikio",
                "rw": "read",
                "bs": 1 << 20,
                "threads": 1,
                "summary": {"bytes": 500},
                "route": "KVIKIO_POSIX",
            },
            {
                "mode": "bounce",
                "rw": "read",
                "bs": 1 << 20,
                "threads": 1,
                "summary": {"bytes": 9999},
                "route": "DRAM_BOUNCE",
            },
        ]
    }
    mix, _ = route_mix([{"path": "/d", "gpu": 0, "doc": doc}])
    # bounce mode = reference, not counted
    assert mix == {"COMPAT": 2000, "NVFS": 2100, "P2PDMA": 100, "UNKNOWN": 50, "DRAM_BOUNCE": 500}


def test_route_mix_helpers():
    from gdsdiag.routes import Route, mix_json, mix_of, route_of

    assert mix_of({"NVFS": 3, "DYNAMIC_ROUTING": 2, "COMPAT": 0}) == {Route.NVFS: 3, Route.PEER_GPU: 2}
    assert mix_json(mix_of({"P2PDMA": 1, "COMPAT": 4})) == {"COMPAT": 4, "P2PDMA": 1}
    assert route_of("MIXED(NVFS=1)") == Route.UNKNOWN and route_of("KVIKIO_POSIX") == Route.UNKNOWN


def test_a_point_route_reads_from_either_schema():
    # gdsdiag.sweep/2 writes a point's route as a mix of shares; /1 wrote a label beside its counts
    from gdsdiag.routes import Route, label_of, point_label, point_shares, share_json

    C, N = Route.COMPAT, Route.NVFS
    assert point_shares({"COMPAT": 0.25, "NVFS": 0.75}) == {N: 0.75, C: 0.25}
    assert point_shares("MIXED(COMPAT=1,NVFS=3)", {"COMPAT": 1, "NVFS": 3}) == {N: 0.75, C: 0.25}
    assert point_shares("MIXED(COMPAT=1,NVFS=3)") == {Route.UNKNOWN: 1.0}  # a label is never parsed back
    assert point_shares("KVIKIO_POSIX") == {Route.DRAM_BOUNCE: 1.0} == point_shares({"DRAM_BOUNCE": 1.0})
    assert point_shares("ERROR") is None and point_shares(None) is None and point_shares({}) is None
    assert point_shares({"COMPAT": "x", "NVFS": True}) is None  # not numbers: no route
    assert share_json({C: 1, N: 3}) == {"NVFS": 0.75, "COMPAT": 0.25}
    assert label_of({C: 97, N: 3}) == "COMPAT 97% NVFS 3%" and label_of({C: 5}) == "COMPAT"
    assert point_label(None) is None and point_label({"HOST": 1.0}) == "HOST"


def test_route_mix_reads_a_sweep2_document_as_its_sweep1_form():
    # the same points written by gdsdiag.sweep/2 (route = shares) give validate the same bytes per route
    v1 = [
        ({"route": "COMPAT", "route_mix": {"COMPAT": 4}}, 1000),
        ({"route": "MIXED(COMPAT=1,NVFS=3)", "route_mix": {"COMPAT": 1, "NVFS": 3}}, 4000),
        ({"route": "KVIKIO_POSIX", "route_mix": {}}, 500),
    ]
    v2 = [
        ({"route": {"COMPAT": 1.0}, "route_mix": {"COMPAT": 4}}, 1000),
        ({"route": {"NVFS": 0.75, "COMPAT": 0.25}, "route_mix": {"COMPAT": 1, "NVFS": 3}}, 4000),
        ({"route": {"DRAM_BOUNCE": 1.0}, "route_mix": {}}, 500),
    ]

    def doc(points, schema):
        pts = [
            {
                "mode": "cufile" if i < 2 else "kvikio",
                "rw": "read",
                "bs": 1 << 20,
                "threads": 1,
                "summary": {"bytes": n},
                **p,
            }
            for i, (p, n) in enumerate(points)
        ]
        return {"path": "/d", "gpu": 0, "doc": {"schema": schema, "points": pts}}

    want = {"COMPAT": 2000, "NVFS": 3000, "DRAM_BOUNCE": 500}
    assert route_mix([doc(v1, "gdsdiag.sweep/1")])[0] == want == route_mix([doc(v2, "gdsdiag.sweep/2")])[0]


def test_sweep_that_cannot_run_fails_min_gbps(h200, tmp_path, monkeypatch):
    # a cuFile driver that does not open on the node is a failure, not a skipped measurement
    from gdsdiag.errors import GdsdiagError as E
    from gdsdiag.validate import adapters

    def broken(directory, gpu, pts):
        raise E("cuFile driver does not open: 5009 CU_FILE_CUDA_DRIVER_ERROR", "run gdsdiag check")

    monkeypatch.setattr(adapters, "sweep", broken)  # stands in for run_sweep on a GPU node (none here)
    p = pol.load()
    ctx = CheckContext(FsRoot(h200))
    rep = run(ctx, p, [str(tmp_path)], "quick")
    res = {r.rule: r for r in rep.results}
    assert res["sweep.min_gbps"].status == Status.FAIL and "5009" in res["sweep.min_gbps"].evidence[0].value


def test_docs_name_every_rule_and_policy_key():
    with open(os.path.join(os.path.dirname(HERE), "docs", "validate.md")) as f:
        doc = f.read()
    for r in RULES:
        assert f"`{r.id}`" in doc or r.id.startswith("inventory."), r.id
    assert "`inventory.gpus` / `.nics` / `.nvme`" in doc
    for key in pol.SCHEMA:
        assert f"`{key}`" in doc or key.split(".")[-1] in doc, key


@live  # a real trace: root, bcc and a headers tree (it skips with the reason where none can run)
@pytest.mark.slow
def test_full_traced_sweep_on_this_machine(tmp_path):
    """--full end to end where it can run here: root + bcc, a host-mode sweep (no GPU here) run as
    'gdsdiag sweep --json' under gdsdiag trace, through the CLI (--keep-going: this machine has no
    NVIDIA driver). The host I/O is seen by the tracer; it must not count as the node's DRAM bounce.
    (In a subprocess: trace's command gate uses 'read <&N', which dash refuses for N > 9, and a
    pytest process holds many descriptors — noted for the trace module.)"""
    import subprocess
    import sys

    from gdsdiag.validate import adapters

    why = adapters.trace_available()
    if why:
        pytest.skip(f"gdsdiag trace unavailable here: {why}")
    d = tmp_path / "data"
    d.mkdir()
    pf = policy_file(
        tmp_path,
        "sweep: {full: {size: 32m, bs: [1m], threads: [1], rw: [read], modes: [host], seconds: 1}}\n"
        "container: {require_udev: false}\n",
    )
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "gdsdiag",
            "validate",
            "--full",
            "--keep-going",
            "--path",
            str(d),
            "--policy",
            pf,
            "--json",
            "-",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        close_fds=True,
    )
    doc = json.loads(p.stdout)
    assert doc["level"] == "full" and doc["sweeps"][0]["points"][0]["mode"] == "host", p.stderr[-2000:]
    assert doc["trace"] and sum(v["count"] for v in doc["trace"].values()) > 0
    b = next(r for r in doc["rules"] if r["rule"] == "io.bounce_share")
    assert any("not counted here" in e["value"] for e in b["evidence"])
    assert list(os.listdir(d)) == []  # the sweep removed its file


def test_a_missing_sweep_results_or_trace_replay_file_is_named_at_once(tmp_path):
    """Issue 46: --sweep-results /nonexistent ended with exit 2 and no word about the file (a fatal
    rule stopped the run before it was read)."""
    import subprocess

    from conftest import GDSDIAG

    # a path that names nothing: usage (4, docs/json.md's table); one that is no regular file: 3
    nope, folder = str(tmp_path / "nope.json"), str(tmp_path)
    for opt in ("--sweep-results", "--trace-replay"):
        for path, code in ((nope, 4), (folder, 3)):
            r = subprocess.run([*GDSDIAG, "validate", opt, path], capture_output=True, text=True, timeout=60)
            assert r.returncode == code and path in r.stderr and r.stderr.count("\n") == 1, (opt, path, r.stderr)


def test_a_node_without_a_gpu_is_not_swept_on_gpu0(tmp_path):
    """Issue 46: 'sweep GPU0' on a node with 0 GPUs."""
    import subprocess

    from conftest import GDSDIAG

    if os.path.exists("/proc/driver/nvidia/version"):
        pytest.skip("this node has an NVIDIA driver: its GPUs are named")
    r = subprocess.run(
        [*GDSDIAG, "validate", "--quick", "--keep-going", "--path", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert "(no GPU)" in r.stdout + r.stderr and "GPU0" not in r.stdout + r.stderr
