"""explain knows the GDS 1.20 messages: the cuObject/cuFile shared-runtime warnings, the cuObject
config and static GPU config lines, and the labels of 'gdscheck -p --object' — each held against
the exact text libcufile 1.20.0.107 carries (tests/fixtures/libcufile-strings/, from the PyPI
wheel, sha256 named there). No log line is made up: these are the messages without the log prefix,
which is how explain's catalog matches a message."""

import os

import pytest

from gdsdiag.explain import catalog
from gdsdiag.explain.readers import detect

STRINGS = os.path.join(
    os.path.dirname(__file__), "fixtures", "libcufile-strings", "libcufile-1.20.0.107-cuobject-and-static-config.txt"
)


def _lines():
    with open(STRINGS) as f:
        return [ln for ln in f.read().splitlines() if ln and not ln.startswith("#")]


EXPECT = {
    "cuObject initialization requested after cuFile initialized the shared runtime; continuing with the cuFile "
    "configuration": ("shared-runtime-cuobject-after-cufile", "warn"),
    "cuFileDriverOpen requested after cuObject initialized the shared runtime; continuing with the cuObject "
    "configuration": ("shared-runtime-cufile-after-cuobject", "warn"),
    "Setting compat mode to true for userspace RDMA Async Path": ("userspace-rdma-async-compat", "warn"),
    "Static config init failed; falling back to runtime probes for bar/p2pdma": ("static-config-fallback", "info"),
    "failed to load cuObject config:": ("cuobject-config-load-failed", "warn"),
    "Loading static config from:": ("static-config-used", "info"),
    "Empty static config JSON file": ("static-config-bad", "info"),
    "Static config version": ("static-config-used", "info"),
    "Static config P2PDMA cache:": ("static-config-used", "info"),
    "BAR1 size from static config cache:": ("static-config-used", "info"),
    "Static config file path not configured": ("static-config-bad", "info"),
    "Cannot open static config file": ("static-config-bad", "info"),
    "Error parsing static config JSON": ("static-config-bad", "info"),
    "Invalid static config version:": ("static-config-bad", "info"),
    "Static config missing or invalid 'gpu_config' object in": ("static-config-bad", "info"),
    "Static config BAR1 cache complete:": ("static-config-used", "info"),
    "Static config BAR1 cache partial:": ("static-config-used", "info"),
}


def test_every_expected_message_is_in_the_library_text():
    lines = set(_lines())
    assert set(EXPECT) <= lines, set(EXPECT) - lines


@pytest.mark.parametrize("text", sorted(EXPECT))
def test_1_20_message_is_explained_with_sources(text):
    ex = catalog.explain("cufile-log", text)
    want_id, want_sev = EXPECT[text]
    assert ex is not None and ex.id == want_id and ex.severity == want_sev, (text, ex and ex.id)
    assert ex.sources and all(s.startswith("https://") for s in ex.sources)


def test_shared_runtime_explanations_say_which_config_wins():
    a = catalog.explain("cufile-log", next(t for t in EXPECT if t.startswith("cuObject initialization")))
    b = catalog.explain("cufile-log", next(t for t in EXPECT if t.startswith("cuFileDriverOpen requested")))
    assert a is not None and "runs with cufile.json" in a.meaning
    assert b is not None and "runs with cuobj.json" in b.meaning


def test_gdscheck_object_labels_are_recognised():
    assert detect("CUOBJECT CONFIGURATION:\nCUOBJECT ENVIRONMENT:\n") == "gdscheck"
    ex = catalog.explain("gdscheck", "cuObject client release version: 1.4.0")
    assert ex is not None and ex.id == "gdscheck-cuobj-version"
    for var in (x for x in _lines() if x.startswith("CUOBJ_")):
        ex = catalog.explain("gdscheck", f"{var} : 1")
        assert ex is not None and ex.id == "gdscheck-cuobj-env-row" and ex.fields["var"] == var
