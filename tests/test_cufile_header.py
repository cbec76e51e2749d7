"""Our cdef (csrc/cufile_cdef.h) and error table against NVIDIA's cufile.h from the installed
nvidia-cufile wheel: every function, enum value, struct size and field offset, checked by compiling
the real header with the C compiler."""

import glob
import os
import re
import shutil
import subprocess
import sys

import pytest
from conftest import FIXTURES

pytest.importorskip("cffi")
from gdsdiag.cufile import _lib  # noqa: E402
from gdsdiag.cufile.errors import OP_ERRORS  # noqa: E402


def _header():
    for site in sys.path:
        for sub in ("nvidia/cu13/include/cufile.h", "nvidia/cufile/include/cufile.h"):
            p = os.path.join(site, sub)
            if os.path.exists(p):
                return p
    return None


HEADER = _header()
pytestmark = pytest.mark.skipif(
    HEADER is None, reason="nvidia-cufile wheel (with cufile.h) not installed: pip install '.[test]'"
)


@pytest.fixture(scope="module")
def L():
    return _lib.load()


@pytest.fixture(scope="module")
def ffi():
    import cffi

    f = cffi.FFI()
    f.cdef(_lib.cdef_text())
    return f


def _strip(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def _prototypes(text):
    """name -> (return type, [param types]) of every 'cuFile*' prototype."""
    out = {}
    for m in re.finditer(r"([A-Za-z_][\w \*]*?)\b(cuFile\w+)\s*\(([^;{]*?)\)\s*;", _strip(text), re.S):
        ret, name, params = " ".join(m.group(1).split()), m.group(2), " ".join(m.group(3).split())
        types = []
        for p in [x.strip() for x in params.split(",") if x.strip() and x.strip() != "void"]:
            p = re.sub(r"\s*\*\s*", " * ", p).split()
            # drop the parameter name (last identifier not part of the type)
            if (
                len(p) > 1
                and re.match(r"^\w+$", p[-1])
                and p[-1]
                not in (
                    "int",
                    "long",
                    "unsigned",
                    "char",
                    "size_t",
                    "off_t",
                    "loff_t",
                    "ssize_t",
                    "bool",
                    "void",
                    "CUstream",
                )
            ):
                p = p[:-1]
            types.append(" ".join(p).replace("unsigned int", "unsigned"))
        out[name] = (ret, types)
    return out


# Deliberate, ABI-neutral differences (explained in csrc/cufile_cdef.h).
RENAMED = {"cuFileDriverClose_v2": "cuFileDriverClose"}
VOID_STATS = {
    "cuFileGetStatsL1": "CUfileStatsLevel1_t *",
    "cuFileGetStatsL2": "CUfileStatsLevel2_t *",
    "cuFileGetStatsL3": "CUfileStatsLevel3_t *",
}


def test_every_declared_function_matches_the_header():
    ours = _prototypes(_lib.cdef_text())
    theirs = _prototypes(open(HEADER).read())
    assert len(ours) == 42
    for name, (ret, params) in ours.items():
        hname = RENAMED.get(name, name)
        assert hname in theirs, f"{hname} not in cufile.h"
        hret, hparams = theirs[hname]
        assert ret == hret, (name, ret, hret)
        if name in VOID_STATS:
            assert params == ["void *"] and hparams == [VOID_STATS[name]]
            continue
        assert params == hparams, (name, params, hparams)
    # and nothing the 1.15 header exports is missing from the bindings
    assert set(theirs) - {RENAMED.get(n, n) for n in ours} == set()


def _compile_and_run(tmp_path, body):
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler")
    inc = [f"-I{os.path.dirname(HEADER)}"]
    real = glob.glob("/usr/local/cuda*/include/cuda.h")
    inc.append(f"-I{os.path.dirname(real[0])}" if real else f"-I{os.path.join(FIXTURES, 'cuda_stub')}")
    src = tmp_path / "probe.c"
    src.write_text(
        "#include <stdio.h>\n#include <stddef.h>\n#include <cufile.h>\nint main(void){\n" + body + "\nreturn 0;}\n"
    )
    exe = tmp_path / "probe"
    r = subprocess.run([cc, "-std=gnu11", *inc, str(src), "-o", str(exe)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout


def _fields(ffi, tname, prefix=""):
    t = ffi.typeof(tname)
    out = []
    for name, _field in t.fields:
        out.append(prefix + name)
    return out


HEADER_STRUCTS = [
    "CUfileError_t",
    "CUfileDrvProps_t",
    "cufileRDMAInfo_t",
    "CUfileFSOps_t",
    "CUfileDescr_t",
    "CUfileIOParams_t",
    "CUfileIOEvents_t",
    "CUfileOpCounter_t",
    "CUfileStatsLevel1_t",
    "CUfileStatsLevel2_t",
    "CUfilePerGpuStats_t",
    "CUfileStatsLevel3_t",
]


def test_struct_sizes_and_offsets_equal_the_compiled_header(tmp_path, ffi):
    lines = []
    for t in HEADER_STRUCTS:
        lines.append(f'printf("size {t} %zu\\n", sizeof({t}));')
        for f in _fields(ffi, t):
            lines.append(f'printf("off {t} {f} %zu\\n", offsetof({t}, {f}));')
    for nested in (
        "nvfs.major_version",
        "nvfs.minor_version",
        "nvfs.poll_thresh_size",
        "nvfs.max_direct_io_size",
        "nvfs.dstatusflags",
        "nvfs.dcontrolflags",
    ):
        lines.append(f'printf("off CUfileDrvProps_t {nested} %zu\\n", offsetof(CUfileDrvProps_t, {nested}));')
    for nested in ("u.batch.devPtr_base", "u.batch.file_offset", "u.batch.devPtr_offset", "u.batch.size"):
        lines.append(f'printf("off CUfileIOParams_t {nested} %zu\\n", offsetof(CUfileIOParams_t, {nested}));')
    out = _compile_and_run(tmp_path, "\n".join(lines))
    checked = 0
    for line in out.splitlines():
        kind, t, *rest = line.split()
        if kind == "size":
            assert ffi.sizeof(t) == int(rest[0]), line
        else:
            assert ffi.offsetof(t, *rest[0].split(".")) == int(rest[1]), line
        checked += 1
    assert checked == 131  # 12 sizes + every field offset, nested ones included
    # the 1.19 layouts: level 1 grows by 112 bytes of readv/writev counters (research §1.7, 624/1136/5112)
    assert (
        ffi.sizeof("CUfileStatsLevel1_v1190_t"),
        ffi.sizeof("CUfileStatsLevel2_v1190_t"),
        ffi.sizeof("CUfileStatsLevel3_v1190_t"),
    ) == (624, 1136, 5112)
    assert ffi.offsetof("CUfileStatsLevel3_v1190_t", "per_gpu_stats") == 1144


def test_enum_values_equal_the_header(tmp_path, ffi, L):
    names = [n for n in dir(L.lib) if re.match(r"^(CU_FILE_|CUFILE_)", n)]
    assert len(names) > 50
    out = _compile_and_run(tmp_path, "\n".join(f'printf("{n} %lld\\n", (long long){n});' for n in names))
    for line in out.splitlines():
        n, v = line.split()
        assert getattr(L.lib, n) == int(v), line


def test_error_table_equals_the_header_macro(tmp_path):
    body = (
        '#define CUFILE_OP(code, name, string) printf("%d|%s|%s\\n", code, #name, #string);\n'
        "CUFILEOP_STATUS_ENTRIES\n#undef CUFILE_OP"
    )
    out = _compile_and_run(tmp_path, body)
    theirs = {int(c): (n, s) for c, n, s in (ln.split("|", 2) for ln in out.splitlines())}
    assert theirs == OP_ERRORS


def test_typed_function_table_matches_the_cdef():
    """gdsdiag/cufile/_types.py (what mypy checks call sites against) declares exactly the
    functions of csrc/cufile_cdef.h, each with the matching return type and argument count."""
    import inspect
    import re

    from gdsdiag.cufile._lib import cdef_text
    from gdsdiag.cufile._types import CuFileLib

    decls = re.findall(r"^\s*((?:const\s+)?[A-Za-z_]\w*\s*\**)\s*(cuFile\w+)\s*\(([^)]*)\);", cdef_text(), re.M)
    assert len(decls) >= 40
    ret_map = {"CUfileError_t": "CuFileStatus", "void": "None", "ssize_t": "int", "long": "int"}
    from gdsdiag.cufile import _types

    typed = {n: f for n, f in vars(CuFileLib).items() if n.startswith("cuFile")}
    # functions declared as attributes of a callable Protocol type (one signature, several names)
    for n, ann in CuFileLib.__annotations__.items():
        if n.startswith("cuFile"):
            assert n not in typed, n
            typed[n] = getattr(_types, ann).__call__
    assert set(typed) == {name for _, name, _ in decls}
    for ret, name, args in decls:
        sig = inspect.signature(typed[name])
        nargs = 0 if args.strip() == "void" else len(args.split(","))
        assert len(sig.parameters) - 1 == nargs, name
        assert sig.return_annotation == ret_map[ret.strip()], name
