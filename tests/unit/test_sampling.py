"""How samples are sized and warmed: per-job warm-up, passes sized by
time, the bytes-moved check for a pass cut at its time, and an upload that
stalls."""

import os
import shutil

import pytest

from cryptcost.engines import fio
from cryptcost.model import Cell
from cryptcost.engines.go import GoEngine
from cryptcost.engines.openssl import OpenSSLEngine
from cryptcost.errors import CryptcostError, DataIntegrityError
from cryptcost.model import Job, Sample
from cryptcost.runner.core.scheduler import schedule
from cryptcost.runner.storage import programs
from cryptcost.runner.storage import likely_cause
from cryptcost.runner.storage.passes import (READ_PASSES, first_pass, largest_pass, read_floor,
                                             verify_moved)
from cryptcost.runner.storage.steps import (
    FIRST_PASS_BYTES, MAX_PASSES, SIZE_MARGIN, Instance, StepRunner,
)
from cryptcost.stacks.rclone_crypt import RcloneCrypt, ciphertext_size
from cryptcost.stats import Policy
from cryptcost.workloads import storage as wl
from tests.conftest import skip_or_fail

MiB = 1 << 20


def test_a_job_may_need_fewer_warm_ups_than_the_policy():
    log, got = [], {}

    def job(name, values, warmup=None):
        it = iter(values)

        def measure():
            log.append(name)
            return {name: Sample(next(it), 1.0)}
        return Job(name, (name,), measure, warmup=warmup)
    jobs = [job("A", [1, 100, 100, 100]), job("B", [50, 50, 50], warmup=0)]
    schedule(jobs, Policy(3, 3, 0.03, warmup=1),
             on_sample=lambda j, k, i, s: got.setdefault(k, []).append(s.value))
    assert got == {"A": [100, 100, 100], "B": [50, 50, 50]}     # A's first run discarded, B's kept
    assert log == ["A", "B", "A", "B", "A", "B", "A"]


def test_cipher_engines_warm_up_once_or_not_at_all():
    cells = [
        Cell.cipher("openssl", alg, 4096, 1, True)
        for alg in ("aes-256-gcm", "aes-256-xts", "chacha20-poly1305")
    ]
    jobs = OpenSSLEngine().jobs(cells, 1)
    assert [j.warmups(1) for j in jobs] == [1, 0, 0]
    go = GoEngine().jobs([Cell.cipher("go", "aes-256-gcm", 4096, 1, True)], 1)
    assert [j.warmups(2) for j in go] == [0]          # testing.Benchmark warms itself up


def test_fio_cap_stops_issuing_without_looping():
    argv = fio.FioJob("write", MiB, 64 * MiB, end_fsync=True, cap=1.0).argv("/d", "n")
    assert "--runtime=1000ms" in argv and not any(a.startswith("--time_based") for a in argv)
    assert "--clocksource=clock_gettime" in argv
    assert not any(a.startswith("--runtime") for a in fio.FioJob("read", MiB, MiB).argv("/d", "n"))


class _Stack:
    name = "x"
    sized_by_time = True
    file_cache_only = False
    evicts_one_file = False
    one_write_pass = None
    sample_floor = 0.0


def _seq(tmp_path):
    step = wl.seq_steps(wl.Sizes(medium=512 * MiB), (MiB,), direct=False)[0]
    inst = Instance(stack=_Stack(), label="x", role="measured", workdir=tmp_path)
    return step, inst, StepRunner(res=None, archive=None, direct=False)


def _later(runner, inst, op, step):
    """``op``'s job for a pass after the sample's first."""
    key = (inst.label, op.key)
    runner.passing.add(key)
    try:
        return runner.job(inst, op, step)
    finally:
        runner.passing.discard(key)


def test_sequential_passes_are_sized_by_the_last_samples_rate(tmp_path):
    step, inst, runner = _seq(tmp_path)
    write, read = step.ops
    assert write.by_time and read.by_time and write.fio.size == 204 * MiB
    first = runner.job(inst, write, step)
    assert (
        first.size == FIRST_PASS_BYTES < write.fio.size and first.cap is None
    )  # no rate yet: enough to find it
    cold = StepRunner(res=None, archive=None, direct=False, warm_up=False)
    assert (
        cold.job(inst, write, step).size == write.fio.size
    )  # no warm-up: the first pass is a sample
    assert runner.job(inst, read, step).cap == 1.0                     # a read also stops at 1 s
    runner.rate[("x", write.key)] = 80e6                               # a slow stack: 80 MB/s
    sized = runner.job(inst, write, step)
    assert sized.size == int(80e6 * SIZE_MARGIN) // MiB * MiB          # about 1.2 s of it
    runner.rate[("x", write.key)] = 2e9
    assert (
        _later(runner, inst, write, step).size == write.fio.size
    )  # a fast one: the file, in passes,
    assert runner.job(inst, write, step).size == 44 * MiB  # after what 11 of them leave of 2.4 GB
    (tmp_path / f"{runner.stem(inst, read, step)}.dat").write_bytes(b"\0" * (3 * MiB + 5))
    assert runner.job(inst, read, step).size == 3 * MiB                # reads what the write left
    assert runner.stem(inst, write, step) == runner.stem(inst, read, step) == f"{step.name}-r0"
    runner.rounds[("x", step.name)] = 2
    assert runner.stem(inst, write, step) == f"{step.name}-r2"  # a new file each round
    inst.stack = RcloneCrypt()  # whole files, one name: see its class
    assert (
        runner.job(inst, write, step) is write.fio and runner.stem(inst, write, step) == step.name
    )


def _fake_passes(runner, seconds, gap=0.05):
    """Passes that last ``seconds`` in turn (the last one repeated), each moving
    100 MiB or, for a read cut at its time, what that time allows; the ``left``
    each pass was given, and the gaps, are logged."""
    log = {"left": [], "between": 0}
    times = iter(seconds)
    last = [seconds[-1]]

    def one_pass(inst, op, step, cache, left=None):
        log["left"].append(left)
        t = whole = next(times, last[0])
        job = runner.job(inst, op, step, left)
        if job.cap:
            t = min(t, job.cap)
        moved = int(100 * MiB * t / whole)
        return Sample(value=moved / t, seconds=t, bytes_moved=moved,
                      metrics={"count": 100, "cut_by_time": t < whole})

    def between(inst, op, step):
        log["between"] += 1
        return gap
    runner.one_pass, runner.between = one_pass, between
    return log


def test_a_sample_takes_passes_until_it_lasts_the_minimum_time(tmp_path):
    """A sample is at least a second of measured time even when the cell runs
    faster than the round before: passes are added until the time is reached
    (a count planned from the last sample came short: 0.66 s for plain's read),
    and a read's last pass stops when the sample's time is up."""
    step, inst, runner = _seq(tmp_path)
    write, read = step.ops
    log = _fake_passes(runner, [0.3])
    first = runner.measure(inst, write, step, "fsync")
    assert first.metrics["passes"] == 1  # the warm-up round: one pass finds the rate
    got = runner.measure(inst, write, step, "fsync")
    assert got.seconds >= 1.0 and got.metrics["passes"] == 4 and "short_because" not in got.metrics
    log = _fake_passes(runner, [0.2])  # faster than the last sample's 0.3 s passes
    got = runner.measure(inst, write, step, "fsync")
    assert got.seconds >= 1.0 - 1e-9 and got.metrics["passes"] == 5
    log = _fake_passes(runner, [0.35, 0.2, 0.5])                 # then uneven
    got = runner.measure(inst, write, step, "fsync")
    assert got.seconds >= 1.0 and got.metrics["passes"] == 3
    log = _fake_passes(runner, [0.3])
    runner.gaps[("x", read.key)] = 0.05
    got = runner.measure(inst, read, step, "fsync+fadvise-dontneed")
    assert [round(x, 2) for x in log["left"]] == [1.0, 0.7, 0.4, 0.1]
    assert (
        got.metrics["passes"] == 4 and abs(got.seconds - 1.0) < 1e-9
    )  # the last pass cut at 0.1 s
    cold = StepRunner(res=None, archive=None, direct=False, warm_up=False)
    _fake_passes(cold, [0.3])
    got = cold.measure(inst, write, step, "fsync")  # no warm-up: one pass of the whole file,
    assert (
        got.metrics["passes"] == 1 and "without a warm-up round" in got.metrics["short_because"]
    )  # said
    assert (
        cold.measure(inst, write, step, "fsync").metrics["passes"] == 4
    )  # then passes to the second


def test_a_read_at_memory_speed_keeps_the_whole_minimum(tmp_path):
    """A buffered read whose passes take 50 ms (plain on a RAM medium) takes passes until its
    sample lasts the second, as every other read and write does: a minimum of 0.25 s for such
    reads had doubled their intervals in whole runs (docs/methodology.md). Its sample says no
    other minimum, and is not short."""
    step, inst, runner = _seq(tmp_path)
    write, read = step.ops
    key = ("x", read.key)
    runner.gaps[key] = 0.01                             # after the warm-up round
    runner.rate[key] = largest_pass(inst, read) / 0.05  # 20 passes to a second
    assert runner.minimum(inst, read, key) == 1.0
    log = _fake_passes(runner, [0.05], gap=0.01)
    got = runner.measure(inst, read, step, "fsync+fadvise-dontneed")
    assert got.metrics["passes"] == 20 and got.seconds >= 0.99, log
    assert "min_seconds" not in got.metrics and "short_because" not in got.metrics


def test_a_series_given_a_shorter_minimum_takes_it_in_whole_passes_and_says_so(tmp_path):
    """A series may be given its own minimum (``StepRunner.least``, as bench/read_minimum gives
    one side's reads): its passes are whole, none cut at the sample's time (a pass cut after
    tens of ms is mostly its cold start), its samples carry the minimum, and a result whose
    spread is unexplained names the shorter samples as its likely cause."""
    step, inst, runner = _seq(tmp_path)
    write, read = step.ops
    key = ("x", read.key)
    runner.gaps[key] = 0.05
    runner.rate[key] = largest_pass(inst, read) / 0.1
    runner.least[key] = 0.25
    assert runner.minimum(inst, read, key) == 0.25
    log = _fake_passes(runner, [0.1])
    got = runner.measure(inst, read, step, "fsync+fadvise-dontneed")
    assert got.metrics["min_seconds"] == 0.25 and got.metrics["passes"] == 3, log
    assert log["left"] == [None, None, None] and abs(got.seconds - 0.3) < 1e-9
    assert runner.minimum(inst, write, ("x", write.key)) == 1.0
    samples = [Sample(value=v, seconds=0.25, metrics={"min_seconds": 0.25}) for v in (1, 2, 3)]
    assert "the series' shorter minimum (0.25 s" in likely_cause(inst, read, samples)


def test_a_plans_shorter_minimum_sizes_passes_and_samples_by_it(tmp_path):
    """A plan's ``storage.sample_minimum`` (here 0.5 s) is each sample's minimum:
    passes are added until it, and a pass is sized by the rate to it, a read at memory speed's
    as every other; a sample of the plan's minimum is neither
    short nor "too short", and its result carries the minimum (``sample_minimum``)."""
    step, inst, _ = _seq(tmp_path)
    write, read = step.ops
    runner = StepRunner(res=None, archive=None, direct=False, min_seconds=0.5)
    _fake_passes(runner, [0.2])
    assert runner.measure(inst, write, step, "fsync").metrics["passes"] == 1   # warm-up
    got = runner.measure(inst, write, step, "fsync")
    assert got.metrics["passes"] == 3 and got.seconds >= 0.5 and got.seconds < 1.0
    assert "short_because" not in got.metrics and "min_seconds" not in got.metrics
    runner.rate[("x", write.key)] = 80e6                               # a slow stack: 80 MB/s
    assert runner.job(inst, write, step).size == int(80e6 * 0.5 * SIZE_MARGIN) // MiB * MiB
    most = largest_pass(inst, read)
    key = ("x", read.key)
    runner.gaps[key] = 0.05
    runner.rate[key] = most / 0.4                       # 2.5 passes a second
    assert runner.minimum(inst, read, key) == 0.5
    runner.rate[key] = most / 0.05                      # 20 a second: at memory speed
    assert runner.minimum(inst, read, key) == 0.5
    samples = [Sample(value=v, seconds=s, metrics={}) for v, s in ((1, 0.5), (2, 0.495), (3, 0.6))]
    memory = {"cv": 0.2, "seconds": 0.1}                # a spread the memory's own covers
    assert likely_cause(inst, read, samples, 0.1, memory, planned=0.5).startswith(
        "the host's memory bandwidth")
    assert "too short" in likely_cause(inst, read, samples, 0.1, memory)   # at rule 10's second


def test_a_stack_that_fails_a_file_written_again_takes_one_write_pass_and_says_so(tmp_path):
    """rclone: a second write under the name it had just uploaded failed with EIO on a
    128 MiB medium, whose files take under a second; its reads still take passes."""
    step, inst, runner = _seq(tmp_path)
    write, read = step.ops
    inst.stack = RcloneCrypt()
    assert inst.stack.one_write_pass and "EIO" in inst.stack.one_write_pass
    runner.gaps[("x", write.key)] = 0.05
    runner.gaps[("x", read.key)] = 0.05
    _fake_passes(runner, [0.3])
    got = runner.measure(inst, write, step, "fsync")
    assert got.metrics["passes"] == 1 and got.metrics["short_because"].startswith(
        "one write pass a sample on rclone-crypt: a file written again")
    assert runner.measure(inst, read, step, "fsync+remount").metrics["passes"] == 4


def test_a_write_whose_second_does_not_fit_the_file_starts_with_what_full_files_leave(tmp_path):
    """gocryptfs at 470 MB/s in a 384 MiB file: full files took 0.86 s a pass, so a sample
    was one slow pass or two (1.7 s), and the two kinds differed by 12 %. A first pass of
    what full files leave carries the second and its margin whatever the pass's speed, and
    the last file, which the read reads, is full."""
    step, inst, runner = _seq(tmp_path)
    write, _ = step.ops
    inst.stack = type("Own", (_Stack,), {"evicts_one_file": True})()
    inst.free = 480 * MiB
    runner.rate[("x", write.key)] = 470e6
    first, then = runner.job(inst, write, step).size, _later(runner, inst, write, step).size
    assert then == 384 * MiB and first < then and first % MiB == 0
    assert first + then == int(470e6 * SIZE_MARGIN) // MiB * MiB            # 1.2 s, not 1.7
    runner.gaps[("x", write.key)] = 0.05
    runner.between = lambda inst, op, step: 0.05

    def one_pass(inst, op, step, cache, left=None):
        size = runner.job(inst, op, step, left).size
        return Sample(value=470e6, seconds=size / 470e6, bytes_moved=size, metrics={"count": 1})
    runner.one_pass = one_pass
    sample = runner.measure(inst, write, step, "fsync")
    assert sample.metrics["passes"] == 2 and 1.0 <= sample.seconds < 1.25
    assert first_pass(1000, 300, 10) == 100 and first_pass(1001, 300, 10) == 110
    assert first_pass(600, 300, 10) == 300 and first_pass(601, 300, 10) == 10


def test_write_passes_take_the_stacks_floor_and_the_last_passs_rate(tmp_path):
    """plain (a floor of 0.5 s under the quick suite's 0.25) after a first measured write
    that a cold page cache held to 150 MB/s where it writes at 1.6 GB/s: its next sample took
    25 passes of 48 MiB (sized by that rate, for 0.25 s), and the read of the last 32 passes.
    Passes are sized for the stack's own minimum, and after a sample's first pass by the rate
    the pass before found: three passes, the last a full file."""
    step, inst, _ = _seq(tmp_path)
    write, _ = step.ops
    runner = StepRunner(res=None, archive=None, direct=False, min_seconds=0.25)
    inst.stack = type("Own", (_Stack,), {"evicts_one_file": True, "sample_floor": 0.5})()
    inst.free = 480 * MiB
    key = ("x", write.key)
    runner.rate[key], runner.gaps[key] = 150e6, 0.05
    runner.between = lambda inst, op, step: 0.05
    sizes = []

    def one_pass(inst, op, step, cache, left=None):
        size = runner.job(inst, op, step, left).size
        sizes.append(size)
        return Sample(value=1.6e9, seconds=size / 1.6e9, bytes_moved=size, metrics={"count": 1})
    runner.one_pass = one_pass
    sample = runner.measure(inst, write, step, "fsync")
    assert sizes == [int(150e6 * 0.5 * SIZE_MARGIN) // MiB * MiB, 384 * MiB, 384 * MiB]
    assert sample.metrics["passes"] == 3 and 0.5 <= sample.seconds < 0.6
    assert runner.rate[key] == 1.6e9 and key not in runner.passing
    # the next sample plans on the rate found: what full files leave, then full files
    assert runner.job(inst, write, step).size == first_pass(
        int(1.6e9 * 0.5 * SIZE_MARGIN) // MiB * MiB, 384 * MiB, MiB)


def test_a_write_leaves_its_fast_read_a_file_of_a_few_passes(tmp_path):
    """bindfs under the quick suite's 0.25 s: it writes at 0.2 GB/s and reads at 2.5, so a
    write of its quarter second left 57 MiB, which the read took 11 passes to read for its
    own. The write now leaves what the read moves in READ_PASSES passes (within the file)."""
    step, inst, _ = _seq(tmp_path)
    write, read = step.ops
    runner = StepRunner(res=None, archive=None, direct=False, min_seconds=0.25)
    runner.rate[("x", write.key)] = 205e6
    alone = int(205e6 * 0.25 * SIZE_MARGIN) // MiB * MiB
    assert runner.job(inst, write, step).size == alone                  # no read rate yet
    runner.rate[("x", read.key)] = 2.5e9
    floor = read_floor(2.5e9, 0.25, SIZE_MARGIN, MiB)
    assert floor == int(2.5e9 * 0.25 * SIZE_MARGIN / READ_PASSES) // MiB * MiB > alone
    assert runner.job(inst, write, step).size == floor
    runner.rate[("x", read.key)] = 20e9                                 # never past the file
    assert runner.job(inst, write, step).size == write.fio.size
    runner.rate[("x", read.key)] = 100e6                                # a slow read: its own
    assert runner.job(inst, write, step).size == alone


def test_a_sample_whose_passes_do_not_fit_its_budget_says_why(tmp_path):
    step, inst, runner = _seq(tmp_path)
    read = step.ops[1]
    runner.gaps[("x", read.key)] = 0.5
    _fake_passes(runner, [0.45], gap=0.5)                        # rclone: a remount between passes
    got = runner.measure(inst, read, step, "fsync+remount")
    assert got.metrics["passes"] == 2 and got.seconds < 1.0
    assert (
        "0.5 s between passes (cache reset or fresh file) left room for 2 pass(es) of 450 ms in "
        "the 2 s "
        "budget" == got.metrics["short_because"]
    )
    _fake_passes(runner, [0.001])
    got = runner.measure(inst, read, step, "fsync")
    assert (
        got.metrics["passes"] == MAX_PASSES
        and "the most one sample takes" in got.metrics["short_because"]
    )


def test_a_write_whose_first_pass_was_short_predicts_its_next_by_a_full_one(tmp_path):
    """A write's first pass may be only what the full files after it leave: the mean of
    that and a full pass had let a third full pass start past the 2 s budget."""
    step, inst, runner = _seq(tmp_path)
    write = step.ops[0]
    runner.gaps[("x", write.key)] = 0.2
    _fake_passes(runner, [0.05, 0.9], gap=0.2)
    got = runner.measure(inst, write, step, "fsync")
    assert got.metrics["passes"] == 2 and got.seconds + 0.2 <= 2.0
    assert "left room for 2 pass(es) of 900 ms" in got.metrics["short_because"]


def test_a_fast_stack_whose_only_cache_is_the_files_own_moves_more_per_pass(tmp_path):
    """plain, fscrypt, a FUSE stack whose daemon keeps no data, a qemu export at 2 GB/s:
    passes up to 3/4 of the medium (as the free space allows) rather than 40 %, so fewer
    of fio's fixed start-ups per sample; a daemon with a cache of its own (CryFS, rclone),
    or a medium with a page cache below it, keeps the 40 %."""
    from cryptcost.stacks import get
    assert get("plain")().evicts_one_file and get("qemu-raw")().evicts_one_file
    assert get("gocryptfs")().evicts_one_file and get("fuse-passthrough")().evicts_one_file
    assert not get("cryfs")().evicts_one_file and not get("rclone-crypt")().evicts_one_file
    step, inst, runner = _seq(tmp_path)
    write, read = step.ops
    runner.rate[("x", write.key)] = runner.rate[("x", read.key)] = 2e9
    inst.stack = type("Own", (_Stack,), {"evicts_one_file": True})()
    inst.free = 480 * MiB
    assert write.room == 384 * MiB and _later(runner, inst, write, step).size == 384 * MiB
    assert runner.job(inst, write, step).size == 368 * MiB  # 6 passes of 2.4 GB, not 12
    inst.free = 300 * MiB
    assert _later(runner, inst, write, step).size == 270 * MiB  # 90 % of what is free
    inst.free = 300 * MiB + 12345  # 90 % of it is no whole MiB
    assert _later(runner, inst, write, step).size == 270 * MiB            # whole blocks of it
    assert runner.job(inst, write, step).size % MiB == 0
    inst.free = 300 * MiB
    runner.rate[("x", write.key)] = 100e6
    del runner.rate[("x", read.key)]                    # (a read's rate raises it: below)
    assert (
        runner.job(inst, write, step).size == int(100e6 * SIZE_MARGIN) // MiB * MiB
    )  # a slow one: ~1.2 s
    runner.rate[("x", write.key)] = 2e9
    inst.cached_below = True
    assert _later(runner, inst, write, step).size == write.fio.size  # the throttled medium: 40 %
    inst.cached_below, inst.stack = False, _Stack()
    assert _later(runner, inst, write, step).size == write.fio.size      # a daemon's cache: 40 %
    together = wl.steps(["seq-quick"], wl.Sizes(medium=512 * MiB), False)[0]
    assert {op.block_bytes: op.room for op in together.ops} == {
        MiB: 192 * MiB,  # two files share the room
        4096: 128 * MiB,
    }  # 32768 requests at most


def test_bigfile_keeps_its_sizes(tmp_path):
    step = wl.steps(["bigfile"], wl.Sizes(medium=512 * MiB), False)[-1]
    runner = StepRunner(res=None, archive=None, direct=False)
    inst = Instance(stack=_Stack(), label="x", role="measured", workdir=tmp_path)
    runner.rate[("x", step.ops[0].key)] = 1e6
    assert runner.job(inst, step.ops[0], step) is step.ops[0].fio     # R1 is about the file size


def test_r1_files_are_its_own_sizes_where_the_medium_holds_them():
    small = wl.r1_files(wl.Sizes(medium=512 * MiB))
    assert [(n, b) for _, n, b in small] == [("bigfile-20M", 20 * MiB), ("bigfile-102M", 102 * MiB),
                                             ("bigfile-204M", 204 * MiB)]  # 1:5:10 of 40 %
    own = wl.r1_files(wl.Sizes(medium=32 << 30))                     # a dir: or device: medium
    assert [n for _, n, _ in own] == ["bigfile-1024M", "bigfile-5120M", "bigfile-10240M"]
    assert [b for _, _, b in wl.r1_files(wl.Sizes(medium=25 << 30))] == [1 << 30, 5 << 30, 10 << 30]
    assert wl.r1_files(wl.Sizes(medium=24 << 30))[-1][2] < 10 << 30  # 40 % of it: scaled down


def test_rsync_copies_each_r1_size_into_the_stack_and_counts_what_arrived(tmp_path):
    sizes = wl.Sizes(medium=64 * MiB)
    steps = wl.steps(["bigfile", "rsync"], sizes, False)
    copies = [st for st in steps if st.ops[0].op == "rsync"]
    assert [st.ops[0].workload for st in copies] == [n for _, n, _ in wl.r1_files(sizes)]
    assert all(st.ops[0].engine == "rsync" and st.ops[0].intended_bytes for st in copies)

    class Res:
        def tmpdir(self, prefix):
            path = tmp_path / f"{prefix}{len(list(tmp_path.iterdir()))}"
            path.mkdir()
            return path

    class Stack(_Stack):
        def settle(self):
            return 0.0
    work = tmp_path / "work"
    work.mkdir()
    sources = programs.Sources(Res())
    n = copies[0].ops[0].intended_bytes
    source = sources(n)
    assert sources(n) == source and source.stat().st_size == n          # made once per size
    copied = work / "copy.dat"
    moved, count, seconds, said = programs.rsync("x", Stack(), copied, source)[:4]
    assert moved == n == copied.stat().st_size and count == 1 and seconds > 0
    assert copied.read_bytes() == source.read_bytes() and source.parent != work
    assert said["engine"] == "rsync" and said["cache_mode"] == "fsync"
    short = Stack()                                            # a copy short of its source fails
    short.settle = lambda: copied.write_bytes(b"x") and 0.0
    with pytest.raises(DataIntegrityError, match="copied 1 bytes"):
        programs.rsync("x", short, copied, source)


def _outcome(moved, seconds):
    return fio.FioOutcome(io_bytes=moved, runtime_s=seconds, bw_bytes=0, iops=0,
                          total_ios=moved // MiB, lat_p50_us=None, lat_p99_us=None)


def test_a_pass_cut_at_its_time_moved_whole_blocks_and_only_then(tmp_path):
    step, inst, runner = _seq(tmp_path)
    write, read = step.ops
    job = runner.job(inst, read, step)
    verify_moved(inst.label, read, job.size, _outcome(job.size, 0.3), job)  # the whole file
    verify_moved(inst.label, read, 50 * MiB, _outcome(50 * MiB, 1.0), job)      # cut at 1 s
    with pytest.raises(DataIntegrityError):
        verify_moved(inst.label, read, 50 * MiB, _outcome(50 * MiB, 0.5), job
        )  # short, in time
    wjob = runner.job(inst, write, step)
    with pytest.raises(DataIntegrityError):
        verify_moved(inst.label, write, 50 * MiB, _outcome(50 * MiB, 1.0), wjob
        )  # writes are never cut


def test_a_direct_read_is_one_fio_process_reading_its_file_over_for_the_samples_time(tmp_path):
    """With O_DIRECT no cache sits between passes, so a sample's read is one fio process
    (time-based) over the file the write left, not one process a pass; a random read too.
    A re-read is whole blocks, for all of its time."""
    step = wl.seq_steps(wl.Sizes(medium=512 * MiB), (MiB,), direct=True)[0]
    inst = Instance(stack=_Stack(), label="x", role="measured", workdir=tmp_path)
    runner = StepRunner(res=None, archive=None, direct=True)
    write, read = step.ops
    (tmp_path / f"{runner.stem(inst, read, step)}.dat").write_bytes(b"\0" * (3 * MiB + 5))
    job = runner.job(inst, read, step)
    assert (job.runtime, job.cap, job.size) == (1.0, None, 3 * MiB)
    assert "--time_based=1" in job.argv(tmp_path, "n") and "--runtime=1000ms" in job.argv(
        tmp_path, "n")
    assert runner.job(inst, read, step, 0.25).runtime == 0.25         # what the sample still needs
    assert runner.job(inst, write, step).runtime is None               # a write: fresh files
    verify_moved(inst.label, read, 40 * MiB, _outcome(40 * MiB, 1.0), job)  # 13 times over
    verify_moved(inst.label, read, MiB, _outcome(MiB, 1.0), job)   # a slow stack: part of it
    for moved, seconds in ((40 * MiB, 0.5), (40 * MiB + 512, 1.0), (0, 1.0)):
        with pytest.raises(DataIntegrityError):
            verify_moved(inst.label, read, moved, _outcome(moved, seconds), job)
    rand = wl.steps(["rand4k"], wl.Sizes(medium=512 * MiB), direct=True)[0]
    rread = next(op for op in rand.ops if op.op == "randread")
    assert runner.job(inst, rread, rand).runtime == 1.0
    assert not StepRunner(res=None, archive=None, direct=False).rereads(read)   # buffered: resets


def test_a_re_read_for_real_reads_its_file_over_in_one_process(tmp_path):
    """For real, with O_DIRECT: fio's time-based read of a 4-MiB file moves it many times over
    in its 0.3 s, in whole blocks."""
    if shutil.which("fio") is None:
        skip_or_fail("plain", "fio is not installed (apt-get install fio)")
    fio.run(fio.FioJob("write", MiB, 4 * MiB, direct=True), tmp_path, "again")
    outcome, _ = fio.run(fio.FioJob("read", MiB, 4 * MiB, direct=True, runtime=0.3), tmp_path,
                         "again")
    assert outcome.io_bytes > 2 * 4 * MiB and outcome.io_bytes % MiB == 0, outcome
    assert 0.29 <= outcome.runtime_s <= 0.4, outcome


def test_an_rclone_upload_that_stops_fails_the_sample_quickly(tmp_path):
    stack = RcloneCrypt("default", "ext4")
    stack.mnt, stack.lower, stack.logfile = (
        tmp_path / "mnt", tmp_path / "lower", str(tmp_path / "r.log"),
    )
    stack.mnt.mkdir(), stack.lower.mkdir()
    (stack.mnt / "f").write_bytes(b"x" * 1000)
    (stack.lower / "part").write_bytes(b"y" * 100)                   # some of it, then nothing
    stack.stall_seconds = 0.2
    with pytest.raises(
        CryptcostError, match=f"100 of {ciphertext_size(1000)} bytes in 1 of 1 files.*no change"
    ):
        stack.settle()
    assert os.path.exists(stack.mnt / "f")
    (stack.lower / "part").write_bytes(b"y" * ciphertext_size(1000))
    (stack.lower / "old").write_bytes(b"z" * 50)                     # a deleted file's leftover
    with pytest.raises(CryptcostError, match="in 2 of 1 files"):
        stack.settle()  # the total alone is not enough


def test_a_read_pass_forgets_one_file_only_where_no_cache_sits_below(tmp_path):
    class Stack(_Stack):
        def forget(self, res, path):
            return "fadvise_dontneed"

        def reset_cache(self, res):
            return "drop_caches"
    step, inst, runner = _seq(tmp_path)
    inst.stack = Stack()
    read = step.ops[1]
    (tmp_path / f"{runner.stem(inst, read, step)}.dat").write_bytes(b"x")
    assert runner.reset(inst, read, step) == "fadvise_dontneed"
    inst.cached_below = True               # a buffered loop (the throttled medium): its cache stays
    assert runner.reset(inst, read, step) == "drop_caches"


def test_a_fuse_stack_remounts_before_a_read_unless_its_daemon_caches_no_data(tmp_path):
    from cryptcost.stacks import get
    from cryptcost.stacks.fs import FuseStack
    remounts = []
    stack = get("gocryptfs")()
    stack.reset_cache = lambda res: remounts.append(res) or "remount"
    stack.lower = tmp_path / "lower"
    (stack.lower / "sub").mkdir(parents=True)
    (stack.lower / "sub" / "ciphertext").write_bytes(b"c" * 8192)
    os.mkfifo(stack.lower / "fifo")                                   # never opened: it would block
    os.symlink("/etc/passwd", stack.lower / "link")                   # never followed
    plaintext = tmp_path / "f.dat"
    plaintext.write_bytes(b"p" * 8192)
    assert not stack.daemon_caches and stack.forget_seconds < 0.1
    assert stack.forget("res", plaintext) == "fadvise_dontneed+lower" and not remounts
    cryfs = get("cryfs")()
    assert cryfs.daemon_caches and cryfs.forget_seconds == cryfs.remount_seconds
    cryfs.reset_cache = lambda res: remounts.append(res) or "drop_caches+idle"
    assert FuseStack.forget(cryfs, "res", plaintext) == "drop_caches+idle" and remounts == ["res"]


def test_a_failed_step_says_what_the_fuse_daemon_last_logged(tmp_path):
    from cryptcost.stacks import get
    stack = get("securefs")()
    stack.logfile = str(tmp_path / "securefs.log")
    (tmp_path / "securefs.log").write_text(
        "mounted\n\nERROR: cannot read block 7: Input/output error\n"
    )
    step, inst, runner = _seq(tmp_path)
    inst.stack, inst.label = stack, stack.label

    def broken(i, s):
        raise OSError(5, "Input/output error", "f.dat")
    runner._step = broken
    with pytest.raises(CryptcostError) as err:
        runner(inst, step)
    msg = str(err.value)
    assert msg.startswith("securefs:lite: [Errno 5]") and msg.count("\n") == 0
    assert msg.endswith(
        "the securefs daemon's log ends: mounted | ERROR: cannot read block 7: Input/output error"
    )


def test_a_samples_pass_size_is_its_largest_passs_not_its_cut_last_ones(tmp_path):
    """A read's last pass stops when the sample's second is up: the sample's
    pass_bytes (which bench/storage_vs_fio sizes its fio run by) is the full pass's."""
    from cryptcost.runner.storage.passes import combine
    step, _, _ = _seq(tmp_path)
    full = Sample(
        value=1.0, seconds=0.45, bytes_moved=384 * MiB,
        metrics={"pass_bytes": 384 * MiB, "count": 384, "cut_by_time": False},
    )
    last = Sample(
        value=1.0, seconds=0.1, bytes_moved=80 * MiB,
        metrics={"pass_bytes": 80 * MiB, "count": 80, "cut_by_time": True},
    )
    got = combine([full, full, last], step.ops[1])
    assert got.metrics["pass_bytes"] == 384 * MiB and got.metrics["cut_by_time"] is True


def test_plain_keeps_its_floor_where_a_plan_asks_less():
    """``plain``'s passes at memory speed fall in two speeds: it takes half a second (its
    ``sample_floor``) under a plan's shorter minimum, its encrypt-feature twin and the other
    stacks take the plan's, and a series given its own minimum (``bench/read_minimum``) keeps
    it."""
    from cryptcost.stacks.plain import Plain
    from cryptcost.stacks.fuse_passthrough import FusePassthrough
    runner = StepRunner(res=None, archive=None, direct=False, min_seconds=0.25)
    op = wl.write_read("seq", 1 << 20, 64 << 20, False)[1]
    for stack, want in ((Plain(), 0.5), (Plain("encrypt-feature"), 0.25),
                        (FusePassthrough(), 0.25)):
        inst = Instance(stack, stack.label, "baseline")
        assert runner.minimum(inst, op, (inst.label, op.key)) == want, stack.label
    inst = Instance(Plain(), "plain", "baseline")
    runner.least[("plain", op.key)] = 0.25
    assert runner.minimum(inst, op, ("plain", op.key)) == 0.25
    assert StepRunner(res=None, archive=None, direct=False, min_seconds=2).minimum(
        inst, op, ("plain", op.key)) == 2


def test_a_results_sample_minimum_is_the_one_its_samples_took():
    """A result says the minimum its samples took: the plan's, or its stack's floor above it."""
    from cryptcost.runner.storage import Conditions, StoragePlan, _params
    from cryptcost.stacks.plain import Plain
    quick = StoragePlan(sample_minimum=0.25)
    for stack, want in ((Plain(), 0.5), (Plain("encrypt-feature"), 0.25)):
        got = _params(Instance(stack, stack.label, "baseline"), quick, Conditions())
        assert got.get("sample_minimum") == want, stack.label
