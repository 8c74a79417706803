"""CPU accounting and the device guard: the figures behind CPU-s/GiB, the
busiest-core symptom, and the refusal of a device something sits on."""

import os

import pytest

from cryptcost.host import cpu
from cryptcost.media import guard
from cryptcost.model import CpuSplit


def _stat(user, system, idle, steal):
    line = f"{user} 0 {system} {idle} 0 0 0 {steal} 0 0"
    return cpu.stat_snapshot(f"cpu {line}\ncpu0 {line}\n")


def test_steal_is_not_counted_as_the_stacks_work():
    split = cpu.cpu_split(_stat(0, 0, 0, 0), _stat(100, 100, 0, 800))
    assert split.steal > 0
    assert split.busy == pytest.approx(200 / cpu.CLK_TCK)          # user + system, not steal
    assert split.max_core_busy == pytest.approx(0.2)               # a stolen core is not a busy one


def test_busy_of_a_stored_split_leaves_steal_out():
    assert CpuSplit(user=1, system=1, steal=5).busy == 2


def test_fio_reads_proc_stat_when_its_job_starts(tmp_path):
    """The snapshot fio takes comes after its start-up (about 0.3 s here),
    inside the wall time of the run."""
    from cryptcost.engines import fio
    if not fio_installed():
        pytest.skip("fio is not installed")
    stat_dir, data = tmp_path / "stat", tmp_path / "data"
    stat_dir.mkdir()
    data.mkdir()
    before = cpu.stat_snapshot()
    outcome, wall = fio.run(fio.FioJob("write", 1 << 20, 64 << 20, end_fsync=True), data, "j", stat_dir=stat_dir)
    after = cpu.stat_snapshot()
    pre = cpu.stat_snapshot(outcome.stat)
    assert list(stat_dir.iterdir()) == []                          # read, then removed
    started = sum(b - a for a, b in zip(before["cpu"], pre["cpu"]))
    window = sum(b - a for a, b in zip(pre["cpu"], after["cpu"]))
    assert started > 0 and window > 0                              # after fio's start, before its end
    assert outcome.io_bytes == 64 << 20


def fio_installed() -> bool:
    import shutil
    return shutil.which("fio") is not None


def test_a_device_with_a_mapping_on_top_is_in_use(tmp_path):
    """/sys/class/block/X/holders (dm-crypt, LVM, MD on the disk or a partition) counts as in use."""
    sysfs = tmp_path / "block"
    for name in ("sdz", "sdz1", "sdz/sdz1"):         # real sysfs nests partitions under the disk too
        (sysfs / name / "holders").mkdir(parents=True)
    os.symlink("../../dm-3", sysfs / "sdz1" / "holders" / "dm-3")
    used = guard._holders("/dev/sdz", sysfs=str(sysfs))
    assert used == ["/dev/dm-3 (built on sdz1)"]
    os.unlink(sysfs / "sdz1" / "holders" / "dm-3")
    assert guard._holders("/dev/sdz", sysfs=str(sysfs)) == []
