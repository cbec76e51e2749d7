#!/usr/bin/env bash
# The README's test command. Tests what users install: builds the wheel, installs it into a fresh
# virtual environment of the distribution's Python (its site packages visible, for python3-bpfcc),
# and runs the suite against that install from a directory outside the checkout, through the
# installed `gdsdiag` console script (tests/conftest.py: GDSDIAG_TEST_INSTALLED=1).
#   PYTHON=/path/to/python3 bash tests/run.sh [pytest args]   # another interpreter (no bcc unless it sees one)
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
py=${PYTHON:-/usr/bin/python3}
command -v "$py" >/dev/null || { echo "tests/run.sh: $py not found (set PYTHON=)" >&2; exit 2; }
work=$(mktemp -d "${TMPDIR:-/tmp}/gdsdiag-test.XXXXXX")
trap 'rm -rf "$work"' EXIT
site=--system-site-packages
[ -n "${GDSDIAG_TEST_ISOLATED:-}" ] && site=
"$py" -m venv $site "$work/venv" || {
  echo "tests/run.sh: '$py -m venv' failed: on Debian/Ubuntu install python3-venv (apt-get install python3-venv)" >&2; exit 2; }
vpy="$work/venv/bin/python"
echo "tests/run.sh: $("$vpy" -c 'import sys; print(sys.version.split()[0])') in $work/venv; building the wheel"
"$vpy" -m pip wheel -q --no-deps -w "$work/dist" "$repo"
wheel=$(ls "$work"/dist/gdsdiag-*.whl)
# --no-compile: pip would byte-compile every file of numpy, matplotlib, hypothesis... (~20 s of the
# setup here); Python compiles what the suite imports on first import instead, as for any install
"$vpy" -m pip install -q --no-compile "$wheel[test]"
# Test paths given relative to the checkout (tests/test_cli.py) are mapped into it; the default is all.
args=(); paths=0
for a in "$@"; do
  if [[ "$a" != -* && -e "$repo/${a%%::*}" ]]; then args+=("$repo/$a"); paths=1; else args+=("$a"); fi
done
[ "$paths" = 1 ] || args+=("$repo/tests")
# The whole suite runs on pytest-xdist workers (the "test" extra): one runs the host tests one after
# another, the others the live eBPF tests, which mostly wait on the kernel (tests/conftest.py says
# why). A run of named test files stays in one process; GDSDIAG_TEST_WORKERS=N sets the count
# (0: one process, e.g. for --pdb).
workers=${GDSDIAG_TEST_WORKERS:-$([ "$paths" = 1 ] && echo 0 || echo 4)}
xdist=(); [ "$workers" -gt 0 ] && xdist=(-n "$workers" --dist loadgroup)
cd "$work"
GDSDIAG_TEST_INSTALLED=1 GDSDIAG_WHEEL="$wheel" \
  "$vpy" -m pytest -q -p no:cacheprovider "${xdist[@]}" "${args[@]}"
