#!/usr/bin/env bash
# The README's test command. Tests what users install: builds the wheel, installs it into a fresh
# virtual environment of the distribution's Python (its site packages visible, for python3-bpfcc),
# and runs the suite against that install from a directory outside the checkout, through the
# installed `gdsdiag` console script (tests/conftest.py: GDSDIAG_TEST_INSTALLED=1).
#   PYTHON=/path/to/python3 bash tests/run.sh [pytest args]   # another interpreter (no bcc unless it sees one)
#   GDSDIAG_TEST_WORKERS=0 bash tests/run.sh --pdb             # the whole suite in one process
#   bash tests/run.sh -m "not slow"                             # without the tests over ~10 s (pytest.ini)
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
# The whole suite (no test paths, no -m given) runs as two pytest processes side by side: the host
# tests one after another in this one (CPU-bound: on 2 cores more processes only add contention),
# the live eBPF tests on pytest-xdist workers (the "test" extra) beside it, as they mostly wait on
# the kernel: each probe a trace detaches waits for an RCU grace period (~0.2 s here, ~60 probes
# a trace). Their report follows the host tests'. GDSDIAG_TEST_WORKERS=N sets the live workers
# (0: everything in one process, e.g. for --pdb); a run of named tests, -m or -k stays in one.
split=1
for a in "$@"; do [[ "$a" == -m* || "$a" == -k* ]] && split=0; done
[ "$paths" = 1 ] && split=0
workers=${GDSDIAG_TEST_WORKERS:-2}
[ "$workers" -gt 0 ] || split=0
cd "$work"
export GDSDIAG_TEST_INSTALLED=1 GDSDIAG_WHEEL="$wheel"
# -rs: every skipped test and its reason in the closing summary (GPU, root and bcc tests skip here)
pytest=("$vpy" -m pytest -q -rs -p no:cacheprovider)
if [ "$split" = 0 ]; then
  "${pytest[@]}" "${args[@]}"
  exit 0
fi
"${pytest[@]}" --basetemp "$work/tmp-live" -n "$workers" -m live "${args[@]}" >"$work/live.log" 2>&1 &
live=$!
rc=0
"${pytest[@]}" --basetemp "$work/tmp-host" -m "not live" "${args[@]}" || rc=$?
lrc=0
wait "$live" || lrc=$?
echo "== the live eBPF tests (pytest -m live -n $workers, run beside the above)"
cat "$work/live.log"
[ "$rc" != 0 ] && exit "$rc"
exit "$lrc"
