"""CPU accounting and the device guard: the figures behind CPU-s/GiB, the
busiest-core symptom, and the refusal of a device something sits on."""

import os

import time

import pytest

from cryptcost.host import cpu
from cryptcost.media import guard
from cryptcost.model import CpuSplit
from tests.conftest import skip_or_fail


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
        skip_or_fail("plain", "fio is not installed (apt-get install fio)")
    stat_dir, data = tmp_path / "stat", tmp_path / "data"
    stat_dir.mkdir()
    data.mkdir()
    before, boot = cpu.stat_snapshot(), time.clock_gettime(time.CLOCK_BOOTTIME)
    outcome, wall = fio.run(
        fio.FioJob("write", 1 << 20, 64 << 20, end_fsync=True), data, "j", stat_dir=stat_dir
    )
    after, ended = cpu.stat_snapshot(), time.clock_gettime(time.CLOCK_BOOTTIME)
    # the boot clock at the first I/O (what a profile's window starts from): inside the run, after
    # its start-up (/proc/uptime counts in 10 ms steps, rounded down)
    assert boot - 0.01 <= outcome.first_io <= ended and outcome.first_io - boot > 0.02, (
        boot,
        outcome,
    )
    pre = cpu.stat_snapshot(outcome.stat)
    assert list(stat_dir.iterdir()) == []                          # read, then removed
    started = sum(b - a for a, b in zip(before["cpu"], pre["cpu"]))
    window = sum(b - a for a, b in zip(pre["cpu"], after["cpu"]))
    assert started > 0 and window > 0  # after fio's start, before its end
    assert outcome.io_bytes == 64 << 20


def fio_installed() -> bool:
    import shutil
    return shutil.which("fio") is not None


def test_a_device_with_a_mapping_on_top_is_in_use(tmp_path):
    """/sys/class/block/X/holders (dm-crypt, LVM, MD on the disk or a partition) counts as in
    use."""
    sysfs = tmp_path / "block"
    for name in ("sdz", "sdz1", "sdz/sdz1"):  # real sysfs nests partitions under the disk too
        (sysfs / name / "holders").mkdir(parents=True)
    os.symlink("../../dm-3", sysfs / "sdz1" / "holders" / "dm-3")
    used = guard._holders("/dev/sdz", sysfs=str(sysfs))
    assert used == ["/dev/dm-3 (built on sdz1)"]
    os.unlink(sysfs / "sdz1" / "holders" / "dm-3")
    assert guard._holders("/dev/sdz", sysfs=str(sysfs)) == []


def test_a_cpu_window_too_short_for_proc_stats_ticks_counts_no_cpu_rather_than_zero():
    """/proc/stat counts in ticks (10 ms here): a 24 ms pass of 25 MiB on plain showed 0 busy
    ticks, and CPU-s/GiB came out 0.0. Below 0.1 s of window nothing is counted, and the sample
    says why; passes that add up to 0.1 s are counted together."""
    from cryptcost.runner.storage import passes
    from cryptcost.model import Sample
    from cryptcost.workloads import storage as wl

    two_cpus = lambda ticks: cpu.stat_snapshot(
        f"cpu {ticks} 0 0 0 0 0 0 0\ncpu0 {ticks} 0 0 0 0 0 0 0\ncpu1 0 0 0 0 0 0 0 0\n"
    )
    assert cpu.window_seconds(two_cpus(0), two_cpus(200)) == pytest.approx(200 / cpu.CLK_TCK / 2)
    short = {"cpu_window_s": 0.024}
    passes.cpu_per_unit(short, CpuSplit(), 25 << 20, 25)
    assert "cpu_s_per_gib" not in short and "cpu_us_per_op" not in short
    assert "24 ms" in short["cpu_unmeasured"] and "too coarse" in short["cpu_unmeasured"]
    long = {"cpu_window_s": 0.5}
    passes.cpu_per_unit(long, CpuSplit(system=0.25), 1 << 30, 1000)
    assert long["cpu_s_per_gib"] == pytest.approx(0.25) and "cpu_unmeasured" not in long
    op = wl.seq_steps(wl.Sizes(medium=512 << 20), (1 << 20,), False)[0].ops[1]
    two = [Sample(value=1e9, seconds=0.05, bytes_moved=50 << 20, cpu=CpuSplit(user=0.01),
                     metrics={**short, "cpu_window_s": 0.06}) for _ in range(2)]
    both = passes.combine(two, op)
    assert both.metrics["cpu_window_s"] == pytest.approx(0.12)
    assert (
        both.metrics["cpu_s_per_gib"] == pytest.approx(0.02 / (100 / 1024))
        and "cpu_unmeasured" not in both.metrics
    )


def test_the_ram_medium_is_written_once_in_full(tmp_path):
    """Every chunk of the medium's file is written (a sparse file ends fully allocated), the
    last one cut to the size."""
    from cryptcost.media import touch
    image = tmp_path / "medium.img"
    size = (3 << 20) + 4096
    with open(image, "wb") as fh:
        fh.truncate(size)
    assert os.stat(image).st_blocks * 512 < size
    touch(image, size)
    assert os.stat(image).st_size == size
    assert os.stat(image).st_blocks * 512 >= size
