"""A failing fio job says why, in fio's own words; and every pass cryptcost plans for
fio is whole blocks that were written, whatever size the medium has."""

import shutil

import pytest

from cryptcost.engines import fio
from cryptcost.errors import ProcessError
from cryptcost.workloads import storage as wl
from tests.conftest import skip_or_fail

MiB = 1 << 20
# What fio 3.33 printed on stdout (stderr empty) when a direct random read ran past the end of its
# file.
SHORT_READ = """fio: pid=17446, err=5/file:backend.c:471, func=full resid, error=Input/output error
{
  "fio version" : "fio-3.33",
  "jobs" : [
    {
      "jobname" : "cc-rand4k",
      "error" : 5
    }
  ]
}
"""


def test_fio_reason_is_its_own_line_not_the_last_line_of_its_json():
    assert fio.failure(SHORT_READ, "") == (
        "fio: pid=17446, err=5/file:backend.c:471, func=full resid, error=Input/output error"
    )
    exc = ProcessError(["fio"], 1, SHORT_READ, "", reason=fio.failure(SHORT_READ, ""))
    assert str(exc).endswith("error=Input/output error") and not str(exc).endswith("}")


def test_fio_reason_from_the_jobs_errno_when_no_line_came():
    text = SHORT_READ.split("\n", 1)[1]
    assert fio.failure(text, "") == "fio job error 5 (Input/output error)"
    assert fio.failure("not json", "") == ""


def test_a_failing_fio_job_reason_reaches_the_error(tmp_path):
    """For real: a direct random read of more than the file holds, as the rand4k layout
    written in 1 MiB blocks used to leave at medium sizes that are not whole MiB."""
    if shutil.which("fio") is None:
        skip_or_fail("plain", "fio is not installed (apt-get install fio)")
    fio.run(fio.FioJob("write", MiB, 25 * MiB, direct=True, end_fsync=True), tmp_path, "short")
    with pytest.raises(ProcessError) as caught:
        fio.run(fio.FioJob("randread", 4096, 25 * MiB + 640 * 1024, direct=True), tmp_path, "short")
    assert "Input/output error" in str(caught.value), caught.value
    assert str(caught.value).startswith("fio failed (exit code 1): fio: ")


@pytest.mark.parametrize(
    "medium", [64 * MiB, 96 * MiB, 100_000_000, 200 * MiB, 256 * MiB, 384 * MiB + 4096]
)
def test_every_planned_fio_job_is_whole_blocks_and_reads_what_was_written(medium):
    sizes = wl.Sizes(medium=medium)
    for names in (["seq-1m", "rand4k"], ["seq-quick"], ["bigfile"], ["seq"]):
        for step in wl.steps(names, sizes, direct=False):
            if step.layout:
                assert step.layout.size % step.layout.bs == 0, step
            for op in step.ops:
                assert op.fio.size % op.fio.bs == 0, (step.label, op)
                if step.layout and op.op.startswith("rand"):
                    assert op.fio.size <= step.layout.size, (step.label, op)


def test_workloads_that_measure_the_same_cell_are_refused():
    from cryptcost.errors import UserError
    with pytest.raises(UserError, match="seq-1m and seq-quick both measure seq write 1 MiB"):
        wl.steps(["seq-1m", "seq-quick"], wl.Sizes(medium=128 * MiB), direct=True)
