"""A few seconds of the project's fuzzer (tests/fuzz) in CI: every target, in process, against
the installed package; any crash, hang or input over 1 GiB fails the test and names the site.
The long mode (python3 -m tests.fuzz: 10,000 inputs per target) is run before resolving an issue
about hostile input; docs/security.md quotes its last counts."""

import os

import pytest

# tests/ is on sys.path (pytest's rootdir conftest), so the fuzzer is the package 'fuzz' here and
# gdsdiag is whichever the suite runs against (the installed wheel under tests/run.sh)
from fuzz.runner import run
from fuzz.targets import TARGETS


@pytest.mark.parametrize("target", TARGETS, ids=[t.name for t in TARGETS])
def test_fuzz_briefly(target):
    res = run([target], None, float(os.environ.get("GDSDIAG_FUZZ_SECONDS", "0.4")), 24, 10.0, say=lambda s: None)
    c = res[target.name]
    assert c.inputs > 0
    assert (c.crashes, c.hangs, c.over_1gib) == (0, 0, 0), c.sites
