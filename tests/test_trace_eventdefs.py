"""The probes' event ids, record layout and constants come from one Python table
(gdsdiag/trace/model/eventdefs.py): the C programs must not define them by hand, every name they use
must be in the table, and the decoder must read the layout the kernel writes. The first tests
need no compiler; the last one compiles the program with bcc and compares bcc's own view of the
record with the decoder's."""

import ctypes
import os
import re
import subprocess
import sys

import pytest
from conftest import live

from gdsdiag.trace.model import eventdefs
from gdsdiag.trace.model.events import API_NAMES, FD_NAMES, KINDS, KPROBE_NAMES, PROC_NAMES, SYS_NAMES
from gdsdiag.trace.probes.bpf import kprobes_text, probe_source, program_text

TABLE_NAME = re.compile(r"\b(?:EV|API|SYS|FDEV|PROC|K|FD)_[A-Z0-9_]+\b")
# names of that shape that are not ours: the kernel's and C's own
NOT_OURS = {"FD_SETSIZE"}
C_SIZES = {"u64": 8, "s64": 8, "u32": 4, "char": 1}


def _defined(text):
    return re.findall(r"^#define\s+(\w+)", text, re.M)


@pytest.mark.parametrize("name", ["cufile_trace.c", "nvfs_kprobes.c"])
def test_the_probe_sources_define_no_table_name_and_use_only_table_names(name):
    raw = probe_source(name)
    table = {n for n, _ in eventdefs.ALL_NUMBERS}
    handmade = [d for d in _defined(raw) if d in table or TABLE_NAME.fullmatch(d)]
    assert handmade == [], f"{name} defines {handmade} itself: put them in eventdefs.py"
    code = re.sub(r"/\*.*?\*/", "", raw, flags=re.S)  # comments may name anything
    used = set(TABLE_NAME.findall(code)) - NOT_OURS
    assert used - table == set(), f"{name} uses names the table does not define: {sorted(used - table)}"
    assert "struct event_t {" not in raw and "struct kev_t {" not in raw and "struct open_t {" not in raw


def test_generated_program_defines_each_name_once_with_the_tables_value():
    for text in (program_text(block=True), kprobes_text()):
        defs = re.findall(r"^#define\s+(\w+)\s+(\S+)$", text, re.M)
        names = [n for n, _ in defs]
        assert len(names) == len(set(names)), [n for n in names if names.count(n) > 1]
        got = dict(defs)
        for n, v in eventdefs.ALL_NUMBERS:
            assert got[n] == str(v), n
        assert "/*EVENTDEFS*/" not in text


def test_ids_are_unique_per_table_and_the_decoder_names_them_from_the_table():
    for table in (
        eventdefs.KINDS,
        eventdefs.API,
        eventdefs.SYSCALLS,
        eventdefs.FD_EVENTS,
        eventdefs.PROC_EVENTS,
        eventdefs.KPROBE_EVENTS,
    ):
        ids = [v for _, v, _ in table]
        assert len(ids) == len(set(ids))
    assert SYS_NAMES[10] == "read" and API_NAMES[12] == "cuMemcpy" and FD_NAMES[1] == "close"
    assert PROC_NAMES[1] == "fork" and KPROBE_NAMES[4] == "nvfs_get_dma" and KINDS[12] == "fd"
    # the fd-table syscalls stay out of the syscall names (they are sent as EV_FD)
    assert min(v for _, v in eventdefs.FD_SYSCALLS) > max(SYS_NAMES)


def test_the_record_struct_the_c_gets_is_the_one_the_decoder_reads():
    text = program_text()
    m = re.search(r"struct event_t \{ (.*?) \};", text)
    assert m, "no generated struct event_t"
    size = 0
    for decl in m.group(1).split(";"):
        decl = decl.strip()
        if not decl:
            continue
        ctype, field = decl.split()
        n = int(re.search(r"\[(\d+)\]", field).group(1)) if "[" in field else 1
        assert size % min(C_SIZES[ctype], 8) == 0  # no padding the decoder would not expect
        size += C_SIZES[ctype] * n
    assert size == eventdefs.EVENT_SIZE == 96
    assert "struct kev_t { u64 ts;" in kprobes_text()


def test_ebpf_flag_prints_the_program_and_exits_0():
    env = {**os.environ, "PYTHONPATH": os.path.dirname(os.path.dirname(os.path.abspath(__file__)))}
    r = subprocess.run(
        [sys.executable, "-m", "gdsdiag", "trace", "--ebpf", "--per-io", "--", "true"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    assert "#define EV_SYS_EXIT 5" in r.stdout
    # filters and --per-io are not compiled in: the config the program gets at load time is shown
    assert "trace_all=0" in r.stdout and "per_io=1" in r.stdout and "#define PER_IO" not in r.stdout
    assert "TRACEPOINT_PROBE(raw_syscalls, sys_exit)" in r.stdout and "/*EVENTDEFS*/" not in r.stdout


def test_ebpf_needs_no_root_and_no_bcc(monkeypatch):
    """As a user without privileges and without bcc (the root check and the bcc import would fail)."""
    from click.testing import CliRunner

    import gdsdiag.trace.probes.bpf as bpf
    from gdsdiag.commands.trace import trace

    monkeypatch.setattr(os, "geteuid", lambda: 1000)

    def no_bcc():
        raise AssertionError("--ebpf imported bcc")

    monkeypatch.setattr(bpf, "import_bcc", no_bcc)
    r = CliRunner().invoke(trace, ["--ebpf", "--block"])
    assert r.exit_code == 0, r.output
    assert "#define TRACE_BLOCK 1" in r.output and "trace_all=1" in r.output


@pytest.mark.slow
@live
def test_bcc_sees_the_record_layout_the_decoder_reads(probe_program):
    """Compile the generated program: bcc's ctypes class for the events ring (from the C struct it
    compiled) has the decoder's offsets and size."""
    from bcc.table import _get_event_class

    b = probe_program
    cls = _get_event_class(b["events"])
    assert ctypes.sizeof(cls) == eventdefs.EVENT_SIZE
    offsets = [getattr(cls, f).offset for f, *_ in eventdefs.EVENT_FIELDS]
    want, off = [], 0
    for _, ctype, n, _ in eventdefs.EVENT_FIELDS:
        want.append(off)
        off += C_SIZES[ctype] * n
    assert offsets == want
    # the constants the kernel uses are the ones the reader writes into its maps
    assert ctypes.sizeof(b["fdinfo"].Leaf) == 8
