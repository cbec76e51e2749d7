"""What a traced program says on stderr about its data path (trace/model/said.py): the lines are joined from
the probes' parts, only those that name the data path are kept, and a loader's own fallback message is
the decisive fact of its bounced bytes (trace/model/why.py)."""

from gdsdiag.check.facts import NodeFacts
from gdsdiag.routes import Route
from gdsdiag.trace.model.said import LINES_PER_PROCESS, StderrLines, keep
from gdsdiag.trace.model.why import file_why

FST = (
    "/tmp/site/fastsafetensors/copier/gds.py:471: UserWarning: GDS device node /dev/nvidia-fs0 not found; "
    "falling back to nogds copier to avoid cuFileDriverOpen() corrupting fd 0."
)


def test_parts_of_a_write_join_into_its_line_and_only_data_path_lines_are_kept():
    s = StderrLines()
    # (fastsafetensors' warning, cut at 256 bytes by the probe into two parts, after a progress bar)
    out = []
    for i in range(50):
        out += s.feed(7, f"\rLoading shards: {i * 2}%|####      | {i}/50")
    out += s.feed(7, "\n")
    out += s.feed(7, FST[:256])
    out += s.feed(7, FST[256:] + "\n  warnings.warn(\n")
    out += s.feed(7, "loaded 22 tensors in 0.4 s\n")
    assert out == [FST]
    assert s.feed(8, "kvikio: running in compatibility mode") == []  # (no newline yet)
    assert s.flush(8) == ["kvikio: running in compatibility mode"]


def test_a_process_that_keeps_talking_is_capped():
    s = StderrLines()
    got = s.feed(1, "cuFile: retry\n" * (LINES_PER_PROCESS + 10))
    assert len(got) == LINES_PER_PROCESS
    assert s.feed(1, "falling back to POSIX\n") == []
    assert s.feed(2, "falling back to POSIX\n") == ["falling back to POSIX"]


def test_lines_that_do_not_name_the_data_path_are_not_kept():
    for line in ("epoch 1 loss 0.31", "Downloading model.safetensors: 100%", "Traceback (most recent call last):"):
        assert not keep(line), line
    for line in (FST, "cuFileHandleRegister failed: 5027", "KVIKIO_COMPAT_MODE=ON", "O_DIRECT not supported"):
        assert keep(line), line


# (a node with no direct route: COMPAT only, as the GPU machine)
NODE = NodeFacts(
    routes=[Route.COMPAT], summary="COMPAT only", checks={}, cufile_json=None, force_compat=False, allow_compat=None
)


def _row(routes: dict) -> dict:
    return {"path": "/var/tmp/m.safetensors", "routes": routes, "via": ["read"], "how": [], "page_cache_hit": None}


def test_the_loaders_own_fallback_message_is_the_decisive_fact_of_its_bounced_bytes():
    said = [("python3/42", FST)]
    unused = "libcufile loaded, no cuFile I/O: python3/42 loaded libcufile, and read these bytes itself"
    chain, fix = file_why(_row({"DRAM_BOUNCE": 1 << 20}), NODE, unused, said)
    assert (chain[0].fact, chain[0].role, chain[0].source) == ("the program said", "decisive", "stderr of python3/42")
    assert "falling back to nogds" in chain[0].value
    assert [f.fact for f in chain[1:3]] == ["libcufile", "how the bytes moved"]
    assert all(f.role != "decisive" for f in chain[1:])
    # a line that names the path but gives no reason to fall back does not take the lead
    chain, _ = file_why(_row({"DRAM_BOUNCE": 1 << 20}), NODE, unused, [("python3/42", "using kvikio 26.10")])
    assert chain[0].fact == "libcufile" and chain[0].role == "decisive"
    assert any(f.fact == "the program said" for f in chain)
    # without it, the why is what it was
    chain, _ = file_why(_row({"DRAM_BOUNCE": 1 << 20}), NODE, None, None)
    assert chain[0].fact == "how the bytes moved"


def test_a_compat_files_why_keeps_the_nodes_fact_first_and_adds_what_the_program_said():
    chain, _ = file_why(_row({"COMPAT": 1 << 20}), None, None, [("python3/9", "cuFile: running in compatibility mode")])
    assert chain[0].role == "decisive" and chain[0].fact != "the program said"
    assert chain[-1].fact == "the program said"
