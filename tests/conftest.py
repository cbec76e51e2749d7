import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
# GDSDIAG_TEST_INSTALLED=1 (set by tests/run.sh): the suite runs against the installed wheel, from a
# directory outside the checkout, and the CLI is the installed `gdsdiag` console script.
INSTALLED = os.environ.get("GDSDIAG_TEST_INSTALLED") == "1"


def _gdsdiag_argv() -> list[str]:
    if not INSTALLED:  # a developer's run from the checkout: the checkout's code
        return [sys.executable, "-m", "gdsdiag"]
    script = os.path.join(os.path.dirname(sys.executable), "gdsdiag")
    if not os.access(script, os.X_OK):
        raise RuntimeError(f"the gdsdiag console script is missing beside {sys.executable}")
    return [script]


# The suite's live traces assert the node's side of each file's why (its ceiling, nvidia-fs, P2PDMA),
# read by the trace's `gdsdiag check --json` child. Its default wait (0.5 s after the program) is for
# users; on a CI box running the host and live suites side by side on 2 cores that child once answered
# later than that, and a file's ceiling was None. A test of the wait itself sets its own value.
os.environ.setdefault("GDSDIAG_NODE_FACTS_WAIT_S", "60")

GDSDIAG = _gdsdiag_argv()  # how every test runs the command line: the console script users run
FIXTURES = os.path.join(HERE, "fixtures")
CORPUS = os.path.join(FIXTURES, "corpus")  # verbatim copy of ../shared/corpus (see its README)


def bcc_unavailable() -> str | None:
    """Why the live eBPF tests cannot run here (None: they can)."""
    if os.geteuid() != 0:
        return "needs root"
    try:
        from gdsdiag.trace.probes.bpf import import_bcc

        import_bcc()
    except Exception as e:
        return f"bcc unavailable: {e}"
    from gdsdiag.trace.probes.headers import fix_command, has_tree

    if not has_tree():  # the fix the trace itself would give: the README's set-up runs it
        return f"no kernel headers tree at /lib/modules/$(uname -r)/build; as root: {fix_command()}"
    return None


_NO_BCC = bcc_unavailable()
# Live eBPF tests: marked 'live' (pytest -m "not live" skips them) and skipped where they cannot run.
LIVE_MARKS = [pytest.mark.live, pytest.mark.skipif(_NO_BCC is not None, reason=str(_NO_BCC))]


def live(test):
    for mark in LIVE_MARKS:
        test = mark(test)
    return test


def pytest_collection_modifyitems(config, items):
    """tests/run.sh runs the live tests on pytest-xdist workers (--dist load), which hands out two
    tests to each worker first, then one at a time, in collection order. So the two tests that use
    probe_program go first (one worker: one compile), then the one that runs three traces (two of
    them compiling), so it does not end last. Order only: every test still runs."""
    items.sort(
        key=lambda item: (
            0 if "probe_program" in getattr(item, "fixturenames", ()) else 1 if item.name in LONGEST_LIVE else 2
        )
    )


LONGEST_LIVE = {"test_second_start_loads_the_compiled_program_from_the_cache"}


@pytest.fixture(scope="session")
def probe_program():
    """The generated probe program (no CUDA doors: program_text()) compiled by bcc once per
    run: clang takes ~8 s of CPU for it here, and two tests only look at what it compiled to
    (its record layout, and that its programs pass the verifier)."""
    from gdsdiag.trace.probes.bpf import CFLAGS, import_bcc, program_text

    bcc = import_bcc()
    b = bcc.BPF(text=program_text(), cflags=list(CFLAGS))
    yield b
    b.cleanup()


def corpus(*parts: str) -> str:
    return os.path.join(CORPUS, *parts)


class _Trees(dict):
    """name -> a fresh ArchiveRoot per lookup (each test sees only its own problems)."""

    def __getitem__(self, name):
        return dict.__getitem__(self, name).fresh()


@pytest.fixture(scope="session")
def hwloc_trees():
    """hwloc's real Linux sysfs snapshots, read straight from their archives (nothing unpacked:
    36k entries written to disk used to take 70-266 s here): name -> root."""
    from gdsdiag.platform.archroot import ArchiveRoot

    out = _Trees()
    d = corpus("hwloc-sysfs")
    for f in sorted(os.listdir(d)):
        if f.endswith(".tar.bz2"):
            name = f[: -len(".tar.bz2")]
            root = ArchiveRoot(os.path.join(d, f))
            (top,) = root.listdir("/")  # each archive holds one top directory
            dict.__setitem__(out, name, root.within(top))
    return out
