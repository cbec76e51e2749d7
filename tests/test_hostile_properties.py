"""Property-based adversarial tests (hypothesis): generated archives, link graphs, JSON, recordings
and command output. The properties: every parser ends in bounded time with a result or one
GdsdiagError (never another exception), and an archive root only ever serves bytes that are in
the archive and only paths inside it. benchmarks/fuzz_parsers.py runs the same targets for
>=100k inputs each; the default run here keeps to a few hundred."""

import io
import json
import os
import random
import tarfile

from conftest import corpus
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gdsdiag import cufile_json
from gdsdiag.bounded import loads_json
from gdsdiag.errors import GdsdiagError
from gdsdiag.importers import gdscheck, lspci, nvidia_smi
from gdsdiag.platform.archroot import OUTSIDE, ArchiveRoot, Limits
from gdsdiag.topology.build import build
from gdsdiag.topology.model import CpuInfo, IommuInfo, PciFunction

FAST = settings(
    max_examples=int(os.environ.get("GDSDIAG_FUZZ_EXAMPLES", "150")),
    deadline=5000,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# -- archives --------------------------------------------------------------------------------------

component = st.sampled_from(["sys", "proc", "etc", "a", "b", "..", ".", "", "cufile.json", "d" * 200, "x y", "\\"])
name = st.lists(component, min_size=1, max_size=8).map("/".join) | st.lists(component, min_size=1, max_size=6).map(
    lambda c: "/" + "/".join(c)
)
member = st.one_of(
    st.tuples(st.just("file"), name, st.binary(max_size=64)),
    st.tuples(st.just("dir"), name, st.just(b"")),
    st.tuples(st.just("sym"), name, name),
    st.tuples(st.just("hard"), name, name),
    st.tuples(st.just("fifo"), name, st.just(b"")),
)


def make_tar(members) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for kind, n, extra in members:
            ti = tarfile.TarInfo(n or ".")
            if kind == "file":
                ti.size = len(extra)
                tar.addfile(ti, io.BytesIO(extra))
                continue
            ti.type = {
                "dir": tarfile.DIRTYPE,
                "sym": tarfile.SYMTYPE,
                "hard": tarfile.LNKTYPE,
                "fifo": tarfile.FIFOTYPE,
            }[kind]
            if kind in ("sym", "hard"):
                ti.linkname = extra
            tar.addfile(ti)
    return buf.getvalue()


@FAST
@given(st.lists(member, max_size=25), st.lists(name, min_size=1, max_size=10))
def test_archive_root_serves_only_archive_bytes_and_inside_paths(tmp_path_factory, members, queries):
    d = tmp_path_factory.mktemp("arch")
    p = d / "a.tar"
    p.write_bytes(make_tar(members))
    before = sorted(os.listdir(d))
    try:
        fs = ArchiveRoot(str(p), Limits(members=100))
    except GdsdiagError:
        return
    payloads = {extra for kind, _, extra in members if kind == "file"}
    for q in queries:
        try:
            r = fs.resolve(q)
        except OSError:
            continue
        assert r.startswith("/")
        if not r.startswith(OUTSIDE):
            assert ".." not in r.split("/") and "//" not in r
        data = fs.read_bytes(q)
        assert data is None or data in payloads  # never a host file's bytes
        fs.listdir(q)
        fs.exists(q)
        fs.readlink_name(q)
    assert sorted(os.listdir(d)) == before  # nothing written next to it either


@FAST
@given(st.integers(1, 60), st.integers(0, 2))
def test_symlink_chains_end_within_the_hop_limit(n, kind):
    """Chains, loops and the CVE-2025-4517 climb: resolution ends (ELOOP or a named escape)."""
    members = []
    for i in range(n):
        target = {0: f"l{i + 1}", 1: "../" * (i % 5) + f"l{(i + 1) % n}", 2: f"/l{i + 1}/../.."}[kind]
        members.append(("sym", f"l{i}", target))
    members.append(("file", f"l{n}", b"end"))
    buf = make_tar(members)
    import tempfile

    with tempfile.NamedTemporaryFile(suffix=".tar") as f:
        f.write(buf)
        f.flush()
        fs = ArchiveRoot(f.name)
    try:
        r = fs.resolve("/l0/x")
    except OSError:
        return
    assert r.startswith("/")


# -- JSON, cufile.json -------------------------------------------------------------------------------

json_text = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=30,
).map(lambda v: json.dumps(v))
noise = st.text(alphabet='[]{}",:0123456789eE.-+ \\/*\nnultrfa', max_size=400)


@FAST
@given(json_text | noise | st.integers(1, 200_000).map(lambda n: "[" * n))
def test_loads_json_only_raises_value_error(text):
    try:
        loads_json(text)
    except ValueError:
        pass


@FAST
@given(
    json_text
    | noise
    | st.dictionaries(
        st.sampled_from(sorted(cufile_json.SCHEMA)),
        st.integers() | st.text(max_size=5) | st.lists(st.integers(), max_size=3),
    ).map(json.dumps)
)
def test_cufile_json_parse_never_raises(text):
    cfg = cufile_json.parse(text, "cufile.json")
    assert cfg.parse_error is None or isinstance(cfg.parse_error, str)


# -- recordings ---------------------------------------------------------------------------------------

HEADER = json.dumps({"gdsdiag_trace_record": 1}) + "\n"
event_value = st.one_of(
    st.integers(-(2**70), 2**70),
    st.text(max_size=8),
    st.none(),
    st.floats(),
    st.booleans(),
    st.lists(st.integers() | st.text(max_size=3), max_size=3),
)


@FAST
@given(st.lists(st.lists(event_value, min_size=0, max_size=9).map(json.dumps) | noise, max_size=20))
def test_replay_reader_returns_events_or_names_the_line(tmp_path_factory, lines):
    from gdsdiag.trace.model.classify import classify
    from gdsdiag.trace.recording import read_record as read_recording

    p = tmp_path_factory.mktemp("rec") / "r.jsonl"
    p.write_text(HEADER + "\n".join(lines) + "\n")
    try:
        header, events = read_recording(str(p))
    except GdsdiagError as e:
        assert "line" in e.cause
        return
    classify(events)  # typed events never crash the classifier


# -- command output -----------------------------------------------------------------------------------

CAPTURES = [corpus("lspci-vvv", f) for f in sorted(os.listdir(corpus("lspci-vvv")))] + [
    corpus("lspci-tree", f) for f in sorted(os.listdir(corpus("lspci-tree")))
]
SMI = [corpus("nvidia-smi-topo", f) for f in sorted(os.listdir(corpus("nvidia-smi-topo")))]
GDSCHECK = [corpus("gdscheck", f) for f in sorted(os.listdir(corpus("gdscheck")))]


def mutate(text: str, seed: int) -> str:
    """Real capture text, cut, spliced, duplicated and with characters changed."""
    rnd = random.Random(seed)
    lines = text.splitlines(keepends=True)
    for _ in range(rnd.randint(1, 8)):
        op = rnd.randrange(5)
        if not lines:
            break
        i = rnd.randrange(len(lines))
        if op == 0:
            del lines[i]
        elif op == 1:
            lines.insert(rnd.randrange(len(lines) + 1), lines[i])
        elif op == 2:
            s = lines[i]
            j = rnd.randrange(len(s) + 1)
            lines[i] = (
                s[:j]
                + rnd.choice(["", "0", "ff", "\t", " ", ":", "[", "-", "+", "\\", "x", "\ufffd", "99999999999"])
                + s[j:]
            )
        elif op == 3:
            lines = lines[:i]
        else:
            lines[i] = lines[i].replace(rnd.choice("0123456789abcdef"), rnd.choice("0123456789abcdef"))
    return "".join(lines)


def _read(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


@FAST
@given(st.sampled_from(CAPTURES), st.integers(0, 2**32))
def test_lspci_parsers_on_mutated_real_captures(path, seed):
    text = mutate(_read(path), seed)
    try:
        fns = list(lspci.parse_vvv(text).values()) + lspci.parse_tree(text)
    except GdsdiagError:
        return
    for f in fns:
        f.host_bridge = f.host_bridge or f.bdf[:7]
    build(list({f.bdf: f for f in fns}.values()), {}, IommuInfo(mode="unknown"), CpuInfo())


@FAST
@given(st.sampled_from(SMI), st.integers(0, 2**32))
def test_nvidia_smi_parser_on_mutated_real_captures(path, seed):
    try:
        nvidia_smi.parse(mutate(_read(path), seed))
    except GdsdiagError:
        pass


@FAST
@given(st.sampled_from(GDSCHECK), st.integers(0, 2**32))
def test_gdscheck_parser_on_mutated_real_captures(path, seed):
    gdscheck.parse(mutate(_read(path), seed))


# -- graph walks ----------------------------------------------------------------------------------------


@FAST
@given(st.lists(st.integers(0, 11), min_size=1, max_size=12))
def test_any_parent_graph_builds_without_looping(parents):
    """Random parent pointers (cycles included): build() ends and every ancestor chain is finite."""
    fns = []
    for i, p in enumerate(parents):
        f = PciFunction(
            bdf=f"0000:{i:02x}:00.0",
            host_bridge="0000:00",
            parent_bdf=f"0000:{p:02x}:00.0" if p < len(parents) and p != i else None,
        )
        f.class_code = 0x060400
        fns.append(f)
    topo = build(fns, {}, IommuInfo(mode="unknown"), CpuInfo())
    for d in topo.devices.values():
        assert len(d.ancestors()) < len(parents)
