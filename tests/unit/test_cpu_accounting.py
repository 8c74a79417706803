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
