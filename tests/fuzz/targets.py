"""What the fuzzer drives: each target is one command line a user runs, with the fuzzed file in
the place of the input it reads (the importers and renderers the command runs, not an inner
parse function), and the real captures it mutates."""

from __future__ import annotations

import glob
import gzip
import io
import os
import random
import tarfile
from collections.abc import Callable
from dataclasses import dataclass, field

from . import gen

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
FIX = os.path.join(REPO, "tests", "fixtures")
SHARED = "/work/shared/corpus"  # the team's wider corpus, where this machine has it
H200 = os.path.join(FIX, "snapshots", "h200-vm-2026-11-29.tar.gz")
H200X2 = os.path.join(FIX, "snapshots", "h200x2-vm-snapshot-2026-11-30.tar.gz")
QWEN = os.path.join(FIX, "models", "qwen2.5-1.5b.config.json")


def _files(*patterns: str) -> list[bytes]:
    out = []
    for pat in patterns:
        for base in (FIX, SHARED):
            for p in sorted(glob.glob(os.path.join(base, pat))):
                if os.path.isfile(p) and not p.endswith("README.md"):
                    with open(p, "rb") as f:
                        data = f.read(4 << 20)
                    out.append(gzip.decompress(data) if p.endswith(".gz") else data)
    return out


@dataclass
class Target:
    name: str
    seeds: Callable[[], list[bytes]]
    argv: Callable[[str, int], list[str]]  # (path of the fuzzed file, input index) -> command line
    mutate: Callable[[bytes, random.Random], bytes] = gen.mutate
    suffix: str = ""
    generate: str | None = None  # a grammar of gen.generate to mix in
    _seeds: list[bytes] = field(default_factory=list)

    def inputs(self, rng: random.Random) -> bytes:
        if not self._seeds:
            self._seeds = self.seeds() or [b""]
        if self.generate and rng.random() < 0.25:
            return gen.generate(rng, self.generate)
        return self.mutate(rng.choice(self._seeds), rng)


# -- snapshots: a member's content mutated, the archive written again --------------------------

_members: list[tuple[tarfile.TarInfo, bytes]] = []
HOT = (
    "cpulist",
    "local_cpus",
    "numa_node",
    "cufile.json",
    "libcufile.json",
    "mounts",
    "modules",
    "stats",
    "cmdline",
    "version",
    "max_link",
    "current_link",
    "class",
    "vendor",
    "device",
    "config",
    "uevent",
)


def _snapshot_members() -> list[tuple[tarfile.TarInfo, bytes]]:
    if not _members:
        with tarfile.open(H200) as t:
            for m in t.getmembers():
                data = t.extractfile(m).read() if m.isfile() else b""
                _members.append((m, data))
    return _members


def _snapshot(rng: random.Random, only: str | None = None) -> bytes:
    ms = _snapshot_members()
    files = [i for i, (m, _) in enumerate(ms) if m.isfile()]
    if only:
        chosen = {i for i in files if ms[i][0].name.endswith(only)}
    else:
        hot = [i for i in files if ms[i][0].name.rsplit("/", 1)[-1].endswith(HOT)]
        chosen = {rng.choice(hot if rng.random() < 0.8 else files) for _ in range(rng.randint(1, 3))}
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", compresslevel=1) as t:
        for i, (m, data) in enumerate(ms):
            if i in chosen:
                name = m.name
                data = gen.mutate_json(data, rng) if name.endswith(".json") else gen.mutate(data, rng)
                if name.endswith(("cpulist", "local_cpus")) and rng.random() < 0.5:
                    data = gen.generate(rng, "cpulist")
                m = tarfile.TarInfo(name)
                m.size, m.mode = len(data), 0o644
            t.addfile(m, io.BytesIO(data) if m.isfile() else None)
    return buf.getvalue()


class SnapshotTarget(Target):
    pass


def _snap_target(name: str, argv, only: str | None = None) -> Target:
    t = Target(name, lambda: [b""], argv, suffix=".tar.gz")
    t.inputs = lambda rng: _snapshot(rng, only)  # type: ignore[method-assign]
    return t


def _replay_seeds() -> list[bytes]:
    out = []
    for data in _files("trace/*.jsonl.gz"):
        out.append(b"\n".join(data.split(b"\n")[:300]) + b"\n")
    return out


def _text(kind: str):
    return lambda p, i: ["explain", "--kind", kind, p] + (["--json"] if i % 2 else [])


def _explain_seeds() -> list[bytes]:
    return _files(
        "corpus/cufile-log/*",
        "corpus/gdsio/*",
        "corpus/gdscheck/*",
        "corpus/nvfs-stats/*",
        "explain/*",
    )


TARGETS: list[Target] = [
    Target(
        "explain-cufile-log",
        lambda: _files("corpus/cufile-log/*", "cufile-log/*", "explain/*.cufile.log"),
        _text("cufile-log"),
    ),
    Target("explain-gdsio", lambda: _files("corpus/gdsio/*", "gdsio/*", "explain/*.gdsio.txt"), _text("gdsio")),
    Target("explain-gdscheck", lambda: _files("corpus/gdscheck/*", "gdscheck/*"), _text("gdscheck")),
    Target("explain-nvfs-stats", lambda: _files("corpus/nvfs-stats/*", "nvfs-stats/*"), _text("nvfs-stats")),
    Target("explain-dmesg", lambda: _files("explain/*dmesg*", "explain/*.txt"), _text("dmesg")),
    Target("explain-gds-stats", lambda: _files("corpus/nvfs-stats/*", "nvfs-stats/*"), _text("gds-stats")),
    # no --kind: the kind detector reads the text first (every kind's seeds, mixed)
    Target("explain-detect", _explain_seeds, lambda p, i: ["explain", p] + (["--json"] if i % 2 else ["-v"])),
    Target(
        "topology-lspci",
        lambda: _files("corpus/lspci-vvv/*", "corpus/lspci-plain/*", "corpus/lspci-tree/*", "lspci-vvv/*"),
        lambda p, i: ["topology", "--lspci", p] + (["--json"] if i % 2 else ["--tree", "--matrix", "--findings"]),
    ),
    Target(
        "topology-nvidia-smi",
        lambda: _files("corpus/nvidia-smi-topo/*", "nvidia-smi-topo/*", "nvidia-smi/*topo*"),
        lambda p, i: ["topology", "--from", H200, "--nvidia-smi", p] + (["--json"] if i % 2 else []),
    ),
    Target(
        "check-gdscheck",
        lambda: _files("corpus/gdscheck/*", "gdscheck/*"),
        lambda p, i: ["check", "--from", H200, "--gdscheck", p] + (["--json"] if i % 2 else []),
    ),
    Target(
        "report",
        lambda: _files("gpu-machine/validate-*.json"),
        lambda p, i: ["report", p] + (["--json"] if i % 2 else []),
        gen.mutate_json,
        ".json",
    ),
    Target(
        "kv-model-config",
        lambda: _files("models/*.json"),
        lambda p, i: (
            ["kv", "--model-config", p, "--gbps", "2", "--prefill-tps", "1000"] + (["--json"] if i % 2 else [])
        ),
        gen.mutate_json,
        ".json",
    ),
    Target(
        "kv-sweep",
        lambda: _files("gpu-machine/h10-2026-11-30/*.json"),
        lambda p, i: ["kv", "--model-config", QWEN, "--sweep", p],
        gen.mutate_json,
        ".json",
    ),
    Target(
        "validate-sweep-results",
        lambda: _files("gpu-machine/h10-2026-11-30/*.json"),
        lambda p, i: ["validate", "--from", H200, "--keep-going", "--sweep-results", p],
        gen.mutate_json,
        ".json",
    ),
    Target(
        "policy",
        lambda: [open(os.path.join(REPO, "gdsdiag", "validate", "default_policy.yaml"), "rb").read()],
        lambda p, i: ["validate", "--from", H200, "--policy", p],
        suffix=".yaml",
        generate="yaml",
    ),
    Target(
        "trace-replay",
        _replay_seeds,
        lambda p, i: ["trace", "--replay", p] + (["--json"] if i % 2 else []),
        suffix=".jsonl",
    ),
    Target(
        "validate-trace-replay",
        _replay_seeds,
        lambda p, i: ["validate", "--from", H200, "--keep-going", "--trace-replay", p] + (["-v"] if i % 2 else []),
        suffix=".jsonl",
    ),
    _snap_target("snapshot-check", lambda p, i: ["check", "--from", p] + (["--json"] if i % 2 else [])),
    _snap_target("snapshot-topology", lambda p, i: ["topology", "--from", p] + (["--json"] if i % 2 else [])),
    _snap_target("cufile-json", lambda p, i: ["check", "--from", p], "etc/cufile.json"),
    _snap_target("libcufile-json", lambda p, i: ["check", "--from", p, "--json"], "gdsdiag/libcufile.json"),
    # diff runs topology, check and cufile.json on both sides, then compares and renders them
    _snap_target("diff", lambda p, i: ["diff", H200X2 if i % 3 else H200, p] + (["--json"] if i % 2 else [])),
    _snap_target("snapshot-validate", lambda p, i: ["validate", "--from", p] + (["-v"] if i % 2 else [])),
]
