"""The fix for a missing extra names the pip of the environment this gdsdiag runs in and what
gdsdiag can be installed from (gdsdiag is not on PyPI; a Debian box has no global pip)."""

import shlex
import subprocess
import sys

from conftest import INSTALLED, REPO

from gdsdiag import extras


def test_this_environments_pip_and_the_checkout_or_wheel():
    cmd = extras.install_command("plot")
    assert cmd.startswith(f"{shlex.quote(sys.executable)} -m pip install "), cmd
    target = shlex.split(cmd)[-1]
    assert target.endswith("[plot]") and "gdsdiag[plot]" != target
    src = target[: -len("[plot]")]
    if not INSTALLED:  # from the checkout: the checkout itself
        assert src == REPO
    assert subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True).returncode == 0


def test_where_the_source_is_gone_the_extras_requirements(monkeypatch):
    monkeypatch.setattr(extras, "install_source", lambda: None)
    monkeypatch.setattr(extras, "_externally_managed", lambda: False)
    cmd = extras.install_command("exporter")
    assert cmd.startswith(f"{shlex.quote(sys.executable)} -m pip install 'prometheus-client>=0.16'"), cmd
    assert "[exporter]" in cmd


def test_the_installed_source_from_direct_url(monkeypatch, tmp_path):
    monkeypatch.setattr(extras, "PACKAGE_DIR", str(tmp_path / "site-packages" / "gdsdiag"))
    whl = tmp_path / "gdsdiag-0.1-py3-none-any.whl"
    whl.write_bytes(b"")
    monkeypatch.setattr(extras, "_direct_url", lambda: {"url": f"file://{whl}", "archive_info": {}})
    assert extras.install_source() == str(whl)
    monkeypatch.setattr(extras, "_direct_url", lambda: {"url": f"file://{tmp_path}/gone", "dir_info": {}})
    assert extras.install_source() is None


def test_the_distributions_python_is_told_the_venv(monkeypatch):
    monkeypatch.setattr(extras, "_externally_managed", lambda: True)
    text = extras.install_command("plot")
    assert "venv" in text and "[plot]" in text and "-m pip install" not in text
