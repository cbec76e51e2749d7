"""Every third-party module the package imports is installed by a requirement or named by an extra of
setup.py (or is a distribution package the README installs), and the README, the error messages and
the container name those extras: a command that needs an optional module must be installable by a
name the user is told."""

import ast
import glob
import os
import re
import shutil
import subprocess
import sys

import pytest
from conftest import REPO

# import name -> the distributions that provide it (PyPI names; "apt:" = a Debian/Ubuntu package).
# A new third-party import fails test_every_import_has_a_requirement_or_an_extra until it is added
# here and to setup.py.
PROVIDERS = {
    "click": ["click"],
    "rich": ["rich"],
    "psutil": ["psutil"],
    "pyudev": ["pyudev"],
    "cffi": ["cffi"],
    "numpy": ["numpy"],
    "yaml": ["PyYAML"],
    "matplotlib": ["matplotlib"],
    "prometheus_client": ["prometheus-client"],
    "pynvml": ["nvidia-ml-py"],
    "cupy": ["cupy-cuda12x", "cupy-cuda13x"],
    "kvikio": ["kvikio-cu12", "kvikio-cu13"],
    "bcc": ["apt:python3-bpfcc"],  # not on PyPI: the README's apt-get line installs it
}
# the extra that must name each optional import, as the README and the error messages call it
EXTRA_OF = {"matplotlib": "plot", "prometheus_client": "exporter", "pynvml": "nvml", "cupy": "cu13", "kvikio": "cu13"}


def _setup_kwargs() -> dict:
    tree = ast.parse(open(os.path.join(REPO, "setup.py"), encoding="utf-8").read())
    call = next(n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "setup")
    out = {}
    for kw in call.keywords:
        if kw.arg in ("install_requires", "extras_require"):
            out[kw.arg] = ast.literal_eval(kw.value)
    return out


def _name(req: str) -> str:
    return re.split(r"[<>=!~\[; ]", req, maxsplit=1)[0].lower().replace("_", "-")


def _third_party_imports() -> dict[str, list[str]]:
    """top-level module -> the files importing it (absolute imports outside the stdlib and gdsdiag)."""
    found: dict[str, list[str]] = {}
    for path in glob.glob(os.path.join(REPO, "gdsdiag", "**", "*.py"), recursive=True):
        tree = ast.parse(open(path, encoding="utf-8").read(), path)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                mods = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                mods = [node.module]
            else:
                continue
            for m in mods:
                top = m.split(".")[0]
                if top == "gdsdiag" or top in sys.stdlib_module_names:
                    continue
                found.setdefault(top, []).append(os.path.relpath(path, REPO))
    return found


def test_every_import_has_a_requirement_or_an_extra():
    kw = _setup_kwargs()
    required = {_name(r) for r in kw["install_requires"]}
    extras = {e: {_name(r) for r in reqs} for e, reqs in kw["extras_require"].items()}
    imports = _third_party_imports()
    assert {"click", "matplotlib", "pynvml", "prometheus_client"} <= set(imports)  # the walk sees the package
    unknown = sorted(set(imports) - set(PROVIDERS))
    assert not unknown, f"third-party imports with no entry in PROVIDERS (and setup.py): {unknown} in " + str(
        {m: imports[m] for m in unknown}
    )
    for mod in imports:
        dists = [d.lower() for d in PROVIDERS[mod] if not d.startswith("apt:")]
        if not dists:
            continue
        if any(d in required for d in dists):
            continue
        extra = EXTRA_OF.get(mod)
        assert extra, f"{mod} is neither required nor given an extra (imported in {imports[mod]})"
        assert set(dists) & extras.get(extra, set()), f"extra [{extra}] does not install {mod} ({dists})"


def test_gpu_extras_carry_nvml_and_libcufile():
    extras = {e: {_name(r) for r in reqs} for e, reqs in _setup_kwargs()["extras_require"].items()}
    for gpu in ("cu12", "cu13"):
        assert "nvidia-ml-py" in extras[gpu], gpu  # test_nvlink_live.py runs on a GPU machine
        assert any(d.startswith("nvidia-cufile") for d in extras[gpu]), gpu
    assert "nvidia-cufile" in extras["cufile"]


def test_readme_names_every_extra():
    readme = open(os.path.join(REPO, "README.md"), encoding="utf-8").read()
    for extra in _setup_kwargs()["extras_require"]:
        if extra != "test":
            assert f"[{extra}]" in readme, f"README.md does not name the extra [{extra}]"


def test_error_messages_name_the_extra():
    """The message a command prints when an optional module is missing names the extra to install."""
    src = {
        p: open(p, encoding="utf-8").read()
        for p in glob.glob(os.path.join(REPO, "gdsdiag", "**", "*.py"), recursive=True)
    }
    for mod, extra in EXTRA_OF.items():
        if mod in ("cupy", "kvikio"):
            continue  # a GPU machine's extra: the sweep names [cu13] (or [cu12])
        users = [p for p, s in src.items() if re.search(rf"^\s*(import|from) {mod}\b", s, re.M)]
        assert users, mod
        said = (f'install_command("{extra}")', f"install_command('{extra}')")
        assert any(x in src[p] for p in users for x in said), (
            f"no file importing {mod} names its extra through extras.install_command('{extra}'): {users}"
        )
    # no fix text names gdsdiag on PyPI (it is not there) or a bare pip (a Debian box has none)
    for p, s in src.items():
        if p.endswith(os.path.join("gdsdiag", "extras.py")):
            continue  # the one place that builds the command
        for m in re.finditer(r"[\"'][^\"'\n]*pip install[^\"'\n]*", s):
            assert "gdsdiag[" not in m.group(0) and not re.search(r"[\"'(]pip install", m.group(0)), (p, m.group(0))


def test_container_installs_the_extras_its_commands_need():
    text = open(os.path.join(REPO, "deploy", "Dockerfile"), encoding="utf-8").read()
    m = re.search(r"pip install [^\n]*'/src/gdsdiag\[([^\]]+)\]'", text)
    assert m, "deploy/Dockerfile installs gdsdiag with no extras"
    have = set(m.group(1).split(","))
    assert {"exporter", "plot", "nvml"} <= have or ({"exporter", "plot"} <= have and have & {"cu12", "cu13"}), have


def _readme_install_command() -> str:
    readme = open(os.path.join(REPO, "README.md"), encoding="utf-8").read()
    return next(ln.strip() for ln in readme.splitlines() if ln.startswith("    apt-get update") and "venv" in ln)


def test_readme_install_uses_the_distribution_python_and_puts_gdsdiag_on_path():
    cmd = _readme_install_command()
    assert "/usr/bin/python3 -m venv --system-site-packages ~/.gdsdiag" in cmd  # not a pyenv python3 first on PATH
    assert "ln -sf ~/.gdsdiag/bin/gdsdiag /usr/local/bin/gdsdiag" in cmd
    assert cmd.endswith("&& gdsdiag topology")  # run by name, as every doc example does
    # a headers tree for bcc where this kernel has none (tests/test_trace_fresh_box.py runs its fix)
    assert "&& ~/.gdsdiag/bin/python3 -m gdsdiag.trace.probes.headers --run &&" in cmd


@pytest.mark.slow
def test_readme_install_command_leaves_gdsdiag_runnable_in_a_new_shell(tmp_path):
    """The README's command (less its apt-get, which CI's setup has done) in a private mount namespace
    whose /usr/local/bin is an empty tmpfs and a fresh HOME; then a new login shell with a clean
    environment runs `gdsdiag` by name. Needs root (unshare, mount) and PyPI for the install's deps."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare (a private /usr/local/bin)")
    if not os.access("/usr/bin/python3", os.X_OK):
        pytest.skip("no distribution /usr/bin/python3")
    cmd = _readme_install_command()
    cmd = cmd[cmd.index("/usr/bin/python3") :]  # after the apt-get install
    src = tmp_path / "src"
    src.mkdir()
    for name in ("setup.py", "README.md", "pyproject.toml", "gdsdiag", "csrc", "probes"):
        p = os.path.join(REPO, name)
        (shutil.copytree if os.path.isdir(p) else shutil.copy)(p, src / name)
    home = tmp_path / "home"
    home.mkdir()
    script = (
        f"mount -t tmpfs none /usr/local/bin && cd {src} && ({cmd}) >{tmp_path}/install.log 2>&1"
        f" && env -i HOME={home} bash -lc 'command -v gdsdiag && gdsdiag --version'"
    )
    r = subprocess.run(
        ["unshare", "-m", "--propagation", "private", "bash", "-c", script],
        env=dict(os.environ, HOME=str(home)),
        capture_output=True,
        text=True,
        timeout=600,
    )
    log = (tmp_path / "install.log").read_text() if (tmp_path / "install.log").exists() else ""
    assert r.returncode == 0, r.stdout + r.stderr + log[-3000:]
    assert r.stdout.splitlines()[0] == "/usr/local/bin/gdsdiag"
    assert "gdsdiag, version" in r.stdout
