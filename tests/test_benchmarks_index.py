"""benchmarks/README.md is the index a developer reads to tell the benchmarks of record from the
reproductions that served one fix (issue 44): every script in benchmarks/ and benchmarks/history/
is listed there, every file it lists is there, and every benchmark of record has its latest figure
on the user's page, docs/benchmarks.md."""

from __future__ import annotations

import os
import re

from conftest import REPO

BENCH = os.path.join(REPO, "benchmarks")
README = os.path.join(BENCH, "README.md")
PAGE = os.path.join(REPO, "docs", "benchmarks.md")
SCRIPT = re.compile(r"\.(py|sh|c)$")


def _read(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()


def _scripts(folder: str) -> set[str]:
    return {f for f in os.listdir(os.path.join(BENCH, folder)) if SCRIPT.search(f)}


def _named(text: str) -> set[str]:
    """The script paths a text names in backquotes, relative to benchmarks/."""
    return {m for m in re.findall(r"`((?:history/)?[\w.-]+\.(?:py|sh|c))`", text)}


def _record_rows() -> set[str]:
    """The scripts of the README's "Benchmarks of record" table (its second column)."""
    text = _read(README).split("## Benchmarks of record", 1)[1].split("\n## ", 1)[0]
    return {s for row in text.splitlines() if row.startswith("| ") for s in _named(row.split("|")[2])}


def test_every_script_is_in_the_index_and_every_listed_one_exists():
    named = _named(_read(README))
    present = _scripts(".") | {f"history/{f}" for f in _scripts("history")}
    assert present - named == set(), f"benchmarks/README.md does not list: {sorted(present - named)}"
    assert named - present == set(), f"benchmarks/README.md lists what is not there: {sorted(named - present)}"


def test_the_reproductions_are_under_history_and_the_benchmarks_of_record_are_not():
    record = _record_rows()
    assert len(record) >= 10, record  # the table parses: one row per capability
    assert not {s for s in record if s.startswith("history/")}, record


def test_every_benchmark_of_record_has_its_figure_on_the_users_page():
    page = _read(PAGE)
    helpers = {"exact_reader.c", "sweep_fio_table.py", "sweep_goal_table.py", "fresh_box.sh"}
    missing = {s for s in _record_rows() - helpers if f"benchmarks/{s}" not in page}
    assert not missing, f"docs/benchmarks.md has no figure for: {sorted(missing)}"
