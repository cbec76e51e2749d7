"""The trace's answer for bytes it cannot see, end to end on this kernel (check/why.py untraced_why,
trace/live.py): a program that maps libcuda (the stand-in built by test_trace_content_live.py) and
does no file I/O makes the trace wait for the node's facts, and the summary carries `untraced` —
null here: this VM's NVMe-less PCI tree has no kernel-bypass driver and no cuObject endpoint
(tests/test_untraced.py holds the answer on a node that has them)."""

import json
import subprocess

from conftest import GDSDIAG, LIVE_MARKS
from test_trace_content_live import fake_cuda, fake_cuda_env  # noqa: F401  (fake_cuda: the stand-in libcuda fixture)

pytestmark = [*LIVE_MARKS]
PY = "/usr/bin/python3"


def test_a_gpu_program_with_no_file_io_gets_the_nodes_answer(fake_cuda):  # noqa: F811
    prog = f"import ctypes; ctypes.CDLL({fake_cuda!r})"
    r = subprocess.run(
        [*GDSDIAG, "trace", "--json", "--", PY, "-c", prog],
        capture_output=True,
        text=True,
        timeout=300,
        env={**fake_cuda_env(fake_cuda), "GDSDIAG_NODE_FACTS_WAIT_S": "60"},
    )
    assert r.returncode == 0, r.stderr
    summary = next(json.loads(x) for x in r.stdout.splitlines() if '"type": "summary"' in x)
    assert any(x["kind"] == "libcuda" and x["pids"] for x in summary["libraries"]), summary["libraries"]
    assert summary["files"] == [] and "untraced" in summary
    from gdsdiag.check.report import check

    assert check("/").untraced == [] and summary["untraced"] is None
