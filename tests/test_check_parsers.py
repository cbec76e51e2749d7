"""Parsers behind gdsdiag check, on real captures: nvidia-fs stats, gdscheck -p in every format of
the corpus, NVIDIA's cufile.json from the GPU machine, libcufile's USDT notes, driver procfs."""

import gzip
import os
import re
import tarfile

import pytest
from conftest import FIXTURES, corpus
from hypothesis import given, settings
from hypothesis import strategies as st

from gdsdiag import cufile_json
from gdsdiag.importers import gdscheck
from gdsdiag.platform import nvfs_proc, nvidia_proc
from gdsdiag.platform.libcufile import locate, read_usdt_notes

H200 = os.path.join(FIXTURES, "snapshots", "h200-vm-2026-11-29.tar.gz")


def _body(path):
    return "".join(open(path).readlines()[3:])


def _from_h200(member):
    with tarfile.open(H200) as t:
        return t.extractfile(member).read().decode()


def test_nvfs_stats_corpus_field_by_field():
    s = nvfs_proc.parse_stats(_body(corpus("nvfs-stats", "stelline-gds1.14-nvfs2.25.7-after-gdsio-write.txt")))
    assert (s.gds_version, s.stats_version, s.driver_version) == ("1.14.0.31", "4.0", "2.25.7")
    assert (s.peer_direct, s.io_stats, s.peer_io_stats, s.log_level) == (True, False, False, "info")
    assert (s.active_shadow_mib, s.active_process) == (0, 0)
    assert s.counters == {
        "Reads": {"err": 0, "io_state_err": 0},
        "Sparse Reads": {"n": 0, "io": 0, "holes": 0, "pages": 0},
        "Writes": {"err": 0, "io_state_err": 0, "pg-cache": 0, "pg-cache-fail": 0, "pg-cache-eio": 0},
        "Mmap": {"n": 1, "ok": 1, "err": 0, "munmap": 2},
        "Bar1-map": {"n": 1, "ok": 1, "err": 0, "free": 1, "callbacks": 0, "active": 0, "delay-frees": 0},
        "Error": {"cpu-gpu-pages": 0, "sg-ext": 0, "dma-map": 0, "dma-ref": 0},
        "Ops": {"Read": 0, "Write": 0, "BatchIO": 0},
    }
    assert s.gpus == [
        {
            "bdf": "0000:01:00.0",
            "uuid": "fb1e6550-2a78-d767-1f0d-7512eb8c552d",
            "Registered_MiB": 0,
            "Cache_MiB": 0,
            "max_pinned_MiB": 1,
        }
    ]
    assert s.unparsed == []


def test_nvfs_stats_rw_enabled_format_from_source():
    # the [rw] lines of gds-nvidia-fs src/nvfs-stat.c, values from issue #46's sample shape
    text = (
        "Reads\t\t\t\t: n=10 ok=9 err=1 readMiB=640 io_state_err=0\n"
        "Reads\t\t\t\t: Bandwidth(MiB/s)=1200 Avg-Latency(usec)=850\n"
        "GPU 0000:8b:00.0  uuid:4964db7b-bd9e-ca3a-1111-222233334444 : Registered_MiB=64 Cache_MiB=0 max_pinned_MiB=64 cross_root_port(%)=25\n"
    )
    s = nvfs_proc.parse_stats(text)
    assert s.counters["Reads"] == {
        "n": 10,
        "ok": 9,
        "err": 1,
        "readMiB": 640,
        "io_state_err": 0,
        "Bandwidth(MiB/s)": 1200,
        "Avg-Latency(usec)": 850,
    }
    assert s.gpus[0]["cross_root_port(%)"] == 25


def test_nvfs_peer_files_formats_from_source():
    # nvfs-pci.c nvfs_peer_distance_show / nvfs_peer_affinity_show format strings
    pd = (
        "gpu\t\tpeer\t\tpeerrank\tp2pdist\tlink\tgen\tnuma\tnp2p\tclass\n"
        "0000:ca:00.0 \t0000:cb:00.0 \t0x00000001\t0x0002\t0x10\t0x04\t0x01\t12\tnvme\n"
    )
    assert nvfs_proc.parse_peer_distance(pd) == [
        {
            "gpu": "0000:ca:00.0",
            "peer": "0000:cb:00.0",
            "peerrank": 1,
            "p2pdist": 2,
            "link": 16,
            "gen": 4,
            "numa": 1,
            "np2p": 12,
            "class": "nvme",
        }
    ]
    pa = (
        "GPU P2P DMA distribution based on pci-distance\n\n(last column indicates p2p via root complex)\nGPU :0000:ca:00.0 :"
        + " 0" * 32
        + " 5\n"
    )
    assert nvfs_proc.parse_peer_affinity(pa) == {"0000:ca:00.0": [0] * 32 + [5]}
    assert nvfs_proc.parse_modules("nvme: (null)\nwekafsio: 1\n") == {"nvme": "(null)", "wekafsio": "1"}
    assert nvfs_proc.parse_version("version: 2.28\n") == "2.28"


GDSCHECK = {
    "asus-esc8000a-e12-gds1.14-iommu-off.txt": dict(
        release="1.14.0.30",
        nvfs="2.24",
        lib="2.12",
        gpus=4,
        verification="succeeded",
        iommu="disabled",
        nvme=["supported"],
        p2pdma=["unsupported"],
        compat="false",
    ),
    "puget-wrx90-gds1.14-iommu-off.txt": dict(
        release="1.14.0.30", verification="succeeded", iommu="disabled", nvme=["supported"]
    ),
    "kvm-guest-quadro-p400-nvme-passthrough-gds1.1.0.37.txt": dict(
        release="1.1.0.37",
        nvfs="2.8",
        lib="2.4",
        gpus=1,
        verification="succeeded",
        iommu="disabled",
        nvme=["supported"],
        p2pdma=None,
    ),
    "optiplex3050-quadro-k1200-gds-beta-verification-failed.txt": dict(
        release="0.9.1.5", beta=True, gpus=1, verification="failed", nvme=["supported"], compat="0"
    ),
    "optiplex3050-quadro-p1000-gds1.0.0.82.txt": dict(
        release="1.0.0.82", nvfs="2.7", gpus=1, verification="succeeded", iommu="disabled"
    ),
    "optiplex3050-quadro-p400-gds-beta0.9.1.5.txt": dict(
        release="0.9.1.5", beta=True, nvfs="2.4", gpus=1, verification="succeeded", iommu="disabled", nvme=["supported"]
    ),
    "stelline-docs-gds1.14-partial-no-indent.txt": dict(
        release="1.14.0.30", nvfs="2.25", verification=None, gpus=0, nvme=["supported"], p2pdma=["unsupported"]
    ),
}


@pytest.mark.parametrize("name", sorted(GDSCHECK))
def test_gdscheck_corpus(name):
    exp = GDSCHECK[name]
    g = gdscheck.parse(_body(corpus("gdscheck", name)))
    assert g.release == exp["release"]
    assert g.beta == exp.get("beta", False)
    if "nvfs" in exp:
        assert g.nvfs_version == exp["nvfs"]
    if "lib" in exp:
        assert g.libcufile_version == exp["lib"]
    if "gpus" in exp:
        assert len(g.gpus) == exp["gpus"]
    assert g.verification == exp["verification"]
    if "iommu" in exp:
        assert g.iommu == exp["iommu"]
    if "nvme" in exp:
        assert g.drivers["NVMe"] == exp["nvme"]
    if "p2pdma" in exp:
        assert g.drivers.get("NVMe P2PDMA") == exp["p2pdma"]
    if "compat" in exp:
        assert g.config["properties.use_compat_mode"] == exp["compat"]
    assert "NVMeOF" in g.drivers and all(isinstance(v, list) for v in g.drivers.values())


def test_gdscheck_details():
    g = gdscheck.parse(_body(corpus("gdscheck", "asus-esc8000a-e12-gds1.14-iommu-off.txt")))
    assert g.gpus[0] == {
        "index": 0,
        "name": "NVIDIA RTX 6000 Ada Generation",
        "bar_mib": 65536,
        "supports_gds": True,
        "iommu_state": "Disabled",
    }
    assert g.rdma["Mellanox PeerDirect"] == "Enabled" and g.cuda_driver == "12090"
    assert g.platform.startswith("ESC8000A-E12, Arch: x86_64")
    assert g.config["fs.lustre.posix_gds_min_kb"] == "0"
    beta = gdscheck.parse(_body(corpus("gdscheck", "optiplex3050-quadro-k1200-gds-beta-verification-failed.txt")))
    assert beta.drivers["ScaleFlux CSD"] == ["unsupported"] and beta.drivers["Lustre"] == ["unsupported"]
    assert beta.gpus[0]["supports_gds"] is False and any("not supported" in e for e in beta.errors)
    new = gdscheck.parse("NVMe               : nvfs, compat\nNVMeOF             : p2pdma, compat\n")
    assert new.drivers == {"NVMe": ["nvfs", "compat"], "NVMeOF": ["p2pdma", "compat"]}


def test_nvidia_cufile_json_from_gpu_machine_is_clean():
    text = _from_h200("etc/cufile.json")
    assert "//" in text  # NVIDIA's file carries comments
    cfg = cufile_json.parse(text, "/etc/cufile.json")
    assert cfg.parse_error is None and cfg.issues == []
    assert cfg.get("properties.allow_compat_mode") is True and cfg.get("execution.max_io_threads") == 4
    assert cfg.get("properties.posix_pool_slab_size_kb") == [4, 1024, 16384]


def test_cufile_json_problems():
    cfg = cufile_json.parse(
        '{"properties": {"use_poll_mode": "no", "posix_pool_slab_size_kb": [4, 1024], '
        '"posix_pool_slab_count": [1], "per_buffer_cache_size_kb": 100000, "rdma_dev_addr_list": ["10.0.0.300"]},'
        ' "profile": {"cufile_stats": 5}, "propertes": {}, "blacklist": {"drivers": []},'
        ' "logging": {"level": "INFO"}, "logging": {"level": "TRACE"}}'
    )
    msgs = {i.message for i in cfg.issues}
    assert 'properties.use_poll_mode must be bool, got "no" (str)' in msgs
    assert any("posix_pool_slab_size_kb has 2 entries but" in m for m in msgs)
    assert any("per_buffer_cache_size_kb = 100000 is out of range" in m for m in msgs)
    assert any("'10.0.0.300' is not an IP address" in m for m in msgs)
    assert any("profile.cufile_stats = 5 is out of range (0..3)" in m for m in msgs)
    assert any("unknown key 'propertes'" in m and "did you mean 'properties'" in m for m in msgs)
    assert "'blacklist' is the old name: libcufile reads 'denylist'" in msgs
    assert any("appears twice" in m for m in msgs)
    assert cufile_json.strip_comments('{"a": "http://x/*y*/"} // c') == '{"a": "http://x/*y*/"} '


@settings(max_examples=300, deadline=None)
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=8),
        lambda ch: (
            st.lists(ch, max_size=3)
            | st.dictionaries(
                st.sampled_from(
                    [
                        "properties",
                        "use_poll_mode",
                        "fs",
                        "nfs",
                        "logging",
                        "level",
                        "x",
                        "slab_count",
                        "rdma_dev_addr_list",
                        "rdma_dynamic_routing_order",
                        "posix_pool_slab_size_kb",
                    ]
                ),
                ch,
                max_size=4,
            )
        ),
        max_leaves=12,
    )
)
def test_fuzz_cufile_json_never_raises(value):
    import json

    cufile_json.parse(json.dumps(value))
    cufile_json.parse(json.dumps(value)[:-1] + "/*")


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=500))
def test_fuzz_proc_and_gdscheck_parsers(text):
    nvfs_proc.parse_stats(text)
    nvfs_proc.parse_peer_distance(text)
    nvfs_proc.parse_peer_affinity(text)
    gdscheck.parse(text)
    nvidia_proc.parse_params(text)
    nvidia_proc.parse_version(text)


def test_driver_procfs_from_gpu_machine():
    version, is_open, line = nvidia_proc.parse_version(_from_h200("proc/driver/nvidia/version"))
    assert (version, is_open) == ("580.159.04", True)
    params = nvidia_proc.parse_params(_from_h200("proc/driver/nvidia/params"))
    assert params["RegistryDwords"] == "" and params["EnableResizableBar"] == "0"
    assert nvidia_proc.parse_registry_dwords("RMForceStaticBar1=1;RmForceDisableIomapWC=1;") == {
        "RMForceStaticBar1": "1",
        "RmForceDisableIomapWC": "1",
    }


def test_usdt_notes_of_the_real_libcufile_match_readelf_on_the_gpu_machine():
    info = locate()
    if info.path is None:
        pytest.skip("nvidia-cufile wheel not installed (pip install '.[test]' installs it)")
    if info.version != "1.15.1.6":
        pytest.skip(f"capture is of 1.15.1.6, installed {info.version}")
    probes = read_usdt_notes(info.path)
    with gzip.open(os.path.join(FIXTURES, "gpu-machine", "libcufile-1.15.1.6-readelf-n.txt.gz"), "rt") as f:
        text = f.read()
    readelf = set(zip(re.findall(r"Provider: (\S+)", text), re.findall(r"Name: (\S+)", text)))
    assert {(p.provider, p.name) for p in probes} == readelf
    assert len(probes) == len(re.findall(r"Name: ", text)) == 1297
    px = [p for p in probes if p.key == "cufio_core:cufio_px_read"]
    assert px and len(px[0].args.split()) == 6  # six arguments, as observed under bcc on the GPU machine
    assert info.trace_probes_present[:4] == [
        "cufio_core:cufio_gds_read",
        "cufio_core:cufio_gds_write",
        "cufio_core:cufio_px_read",
        "cufio_core:cufio_px_write",
    ]


def test_usdt_reader_rejects_non_elf(tmp_path):
    p = tmp_path / "x"
    p.write_bytes(b"not an elf")
    with pytest.raises(ValueError):
        read_usdt_notes(str(p))
