"""One workload step on one storage stack instance, turned into samples.

A step's operations run back to back (write, then read what was written),
each timed by its engine and accounted with the whole system's CPU
(rule 7): ``/proc/stat`` around the operation plus the rusage of the
stack's daemons.

A sample lasts at least :data:`MIN_SAMPLE_SECONDS` of measured time (rule 10; a plan's
``storage.sample_minimum``), whatever the medium's size: it is as many *passes* of the operation
as that takes, each on a fresh file (writes) or after a cache reset (reads), with what happens
between passes outside the clock. A read with O_DIRECT has no cache to reset: its sample is one
fio process reading the file over and over for the sample's time (:meth:`StepRunner.reread`).
Every sample of a series has the same minimum, a read at memory speed's too: a minimum of
0.25 s for such reads (one to three passes) had doubled their intervals
(``bench/stability_compare``, docs/methodology.md); a series may be given another in
:attr:`StepRunner.least` (``bench/read_minimum`` does), taken in whole passes and said in its
samples.
Passes are added until their measured time reaches the minimum — not a
count planned from the last sample, which came short whenever the cell
ran faster than the round before — within :data:`SAMPLE_BUDGET` seconds
of passes and resets, so a stack whose reset is expensive (CryFS
derives its key at every mount) says why its samples stay short
(``short_because``). A cell's first round takes one pass: as the
discarded warm-up it only finds the cell's rate; without a warm-up
(``--warmup 0``, which the system tests use to show what works) it is a
sample of one pass of the whole file, and says so when that is short.
A sequential operation is also sized by time the other way: a pass
moves what the last sample moved in the minimum time, a fifth more (a
read also stops once the sample's time is up), so a stack slower than
the file's size allows needs one pass of about a second rather than one
of many; the read then reads what was written. A cell's first write,
which has no rate to go by, moves at most :data:`FIRST_PASS_BYTES` when
it is the discarded warm-up round's, and the whole file when there is no
warm-up.
"""

from __future__ import annotations

import statistics
import time
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

from cryptcost.engines import fio
from cryptcost.errors import CryptcostError
from cryptcost.host import cpu
from cryptcost.lifecycle.resources import Resources
from cryptcost.model import Sample
from cryptcost.runner.core.profile import unwatched
from cryptcost.runner.storage import programs
from cryptcost.runner.storage.passes import (clean_step, combine, cpu_per_unit, first_pass,
                                             largest_pass, read_floor, reset_one_file,
                                             verify_moved)
from cryptcost.stacks.fs import StorageStack
from cryptcost.workloads import storage as wl

WRITES = ("write", "create", "randwrite")
MIN_SAMPLE_SECONDS = 1.0     # measured time per sample
SAMPLE_BUDGET = 2.0          # wall seconds one sample may take, passes and resets included
MAX_PASSES = 32
# a pass sized by time moves this much more than the minimum time's worth
SIZE_MARGIN = 1.2
FIRST_PASS_BYTES = 64 << 20  # a sequential write's first pass, which only finds the cell's rate


@dataclass
class Instance:
    """One stack, set up on its own block device. ``role`` says how it got
    into the run: asked for (``measured``) or added as a ``baseline``."""

    stack: StorageStack
    label: str
    role: str
    workdir: Path | None = None
    error: str | None = None
    cached_below: bool = False        # its medium has a page cache below the block device
    free: int | None = None           # bytes free in its workdir after setup


def _daemon_cpu(pids: list[int]) -> float:
    return sum(cpu.process_cpu(pids).values()) if pids else 0.0


class StepRunner:
    """Runs one workload step on one instance and turns it into samples."""

    def __init__(self, res: Resources, archive: tuple[Path, int] | None, direct: bool,
                 min_seconds: float = MIN_SAMPLE_SECONDS, budget: float = SAMPLE_BUDGET,
                 warm_up: bool = True):
        self.res = res
        self.warm_up = warm_up          # each cell's first round is a discarded warm-up
        self.archive = archive
        self.direct = direct
        self.min_seconds = min_seconds
        self.budget = budget
        self.gaps: dict[tuple, float] = {}                     # cell → seconds between passes
        self.rate: dict[tuple, float] = {}                     # cell → bytes/s of its last pass
        self.least: dict[tuple, float] = {}                    # cell → its samples' minimum
        self.passing: set[tuple] = set()                       # cells whose sample has a pass
        self.rounds: dict[tuple, int] = {}                     # (instance, step) → times it ran
        self._stat_dir: Path | None = None
        self.programs = programs.Programs(res, archive)       # the engines other than fio
        # What each pass's engine runs inside (a profiler's sampling window); nothing by default.
        self.window: "Callable[[Instance, wl.Op], AbstractContextManager]" = unwatched

    def stat_dir(self) -> Path | None:
        """A private directory where fio leaves /proc/stat as it was at its
        job's first I/O (:func:`cryptcost.engines.fio.run`); none without
        resources (unit tests)."""
        if self._stat_dir is None and self.res is not None:
            self._stat_dir = self.res.tmpdir("cryptcost-fio-")
        return self._stat_dir

    def __call__(self, inst: Instance, step: wl.Step) -> dict[tuple, Sample]:
        """The step's samples; a stack whose daemon died, or whose mount broke, fails this
        step with the reason (the scheduler then marks the configuration failed) instead of
        ending the run."""
        try:
            return self._step(inst, step)
        except (CryptcostError, OSError) as exc:
            why, words = inst.stack.dead(), inst.stack.last_words()
            if why or words or isinstance(exc, OSError):
                lead = why or (inst.label if isinstance(exc, OSError) else None)
                said = f"{lead}: {exc}" if lead else str(exc)
                raise CryptcostError("; ".join(x for x in (said, words) if x)) from None
            raise

    def stem(self, inst: Instance, op: wl.Op, step: wl.Step) -> str:
        """The file-name stem of ``op``'s file: a sequential file sized by
        time gets a new name each round, so a file of another size never
        takes the name of one just deleted, in any stack's cache."""
        name = op.file or step.name
        return (f"{name}-r{self.rounds.get((inst.label, step.name), 0)}" if self.by_time(inst, op)
                else name)

    @staticmethod
    def by_time(inst: Instance, op: wl.Op) -> bool:
        return op.by_time and op.fio is not None and inst.stack.sized_by_time

    def _step(self, inst: Instance, step: wl.Step) -> dict[tuple, Sample]:
        self.rounds[(inst.label, step.name)] = self.rounds.get((inst.label, step.name), 0) + 1
        workdir = inst.workdir
        if step.layout:
            fio.run(step.layout, workdir, step.name)
        out = {}
        reset = "fsync"
        try:
            for op in step.ops:
                cache = "direct" if self.direct else "fsync"
                if op.reset_before:
                    reset = "fsync+" + self.reset(inst, op, step).replace("_", "-")
                    cache = reset
                elif not self.direct and op.op in ("write", "create", "randwrite"):
                    cache = "fsync"
                elif not self.direct and op.op in ("read", "randread", "stat"):
                    # the step's one reset still holds: nothing read since
                    cache = reset
                else:
                    cache = "direct" if self.direct else "fsync"
                out[(inst.label, op.key)] = self.measure(inst, op, step, cache)
        finally:
            own = self.programs.bonnie.end(inst.label)   # after its last phase's CPU was counted
            clean_step(workdir, step)
        for (_, key), sample in out.items():
            if own and key[:2] == ("bonnie", "read"):
                sample.metrics["bonnie_own"] = own
        return out

    @staticmethod
    def repeatable(op: wl.Op) -> bool:
        """A single-file fio operation can be repeated within one sample."""
        return op.engine == "fio" and op.fio is not None and op.fio.nrfiles == 1 and \
            op.op in ("write", "read", "randread", "randwrite")

    def between(self, inst: Instance, op: wl.Op, step: wl.Step) -> float:
        """Prepare the next pass, outside the clock; return the seconds it took."""
        start = time.perf_counter()
        if op.op == "write":
            name = self.stem(inst, op, step)
            for path in inst.workdir.glob(f"{name}.*"):
                path.unlink()
            inst.stack.settle()
        elif op.op in ("read", "randread") and not self.direct:
            self.reset(inst, op, step)
        return time.perf_counter() - start

    def reset(self, inst: Instance, op: wl.Op, step: wl.Step) -> str:
        """The cache reset before a read: of the one file where the
        operation reads one file (:func:`reset_one_file`), else of the whole
        stack."""
        if self.repeatable(op):
            return reset_one_file(self.res, inst, inst.workdir / f"{self.stem(inst, op, step)}.dat")
        return inst.stack.reset_cache(self.res)

    def measure(self, inst: Instance, op: wl.Op, step: wl.Step, cache: str) -> Sample:
        """One sample: passes of ``op`` until their measured time reaches the
        minimum, or until the next would not fit the sample's budget (then
        the sample says why it is short)."""
        key = (inst.label, op.key)
        first = key not in self.gaps          # the warm-up round's, or without one the first sample
        warm_up = self.warm_up and first
        least = self.minimum(inst, op, key)
        once = inst.stack.one_write_pass if op.op in WRITES else None
        most = MAX_PASSES if self.repeatable(op) and not first and not once else 1
        samples: list[Sample] = []
        gaps: list[float] = []
        short = None
        self.passing.discard(key)
        while True:
            if samples:
                gaps.append(self.between(inst, op, step))
            # a series' shorter minimum takes whole passes: one cut short is mostly its cold start
            left = None if least < self.min_seconds else least - sum(x.seconds for x in samples)
            samples.append(self.one_pass(inst, op, step, cache, left))
            self.passing.add(key)
            if self.by_time(inst, op) and samples[-1].bytes_moved:
                # the next pass is sized by this one's rate, not by a rate a sample before
                # found (a cold page cache once made it a seventh of this one's)
                self.rate[key] = samples[-1].bytes_moved / samples[-1].seconds
            measured = sum(x.seconds for x in samples)
            # (a pass cut at the minimum time counts as done, whatever its clock's last ms says)
            if measured >= least - 0.01 or len(samples) >= most:
                if measured < least - 0.01 and most > 1:
                    short = (f"{most} passes of {measured / most * 1000:.0f} ms, the most one "
                             "sample takes")
                elif measured < least - 0.01 and self.repeatable(op) and not warm_up:
                    short = (f"one write pass a sample on {inst.stack.name}: {once}"
                             if once and not first else
                             "the cell's first sample, without a warm-up round: one pass of the "
                             "whole file (no rate yet to size passes by)")
                break
            # the next pass is full: a write's first may not be
            one = max(x.seconds for x in samples)
            gap = statistics.fmean(gaps) if gaps else self._known_gap(inst, op, key)
            if measured + sum(gaps) + gap + one > self.budget:
                short = (f"{gap:.1f} s between passes (cache reset or fresh file) left room for "
                         f"{len(samples)} pass(es) of {one * 1000:.0f} ms in the "
                         f"{self.budget:g} s budget")
                break
        self.passing.discard(key)
        one = statistics.fmean(x.seconds for x in samples)
        self.gaps[key] = statistics.fmean(gaps) if gaps else self.gaps.get(key, 0.0)
        sample = combine(samples, op)
        if sample.bytes_moved:
            self.rate[key] = sample.bytes_moved / sample.seconds
        sample.metrics.update(passes=len(samples), pass_seconds=one)
        if least != self.min_seconds:
            sample.metrics["min_seconds"] = least
        if short:
            sample.metrics["short_because"] = short
        return sample

    def minimum(self, inst: Instance, op: wl.Op, key: tuple) -> float:
        """The sample's minimum measured time: the series' own where one was given
        (:attr:`least`), else :data:`MIN_SAMPLE_SECONDS` or the plan's (rule 10), but no
        shorter than the stack's floor (``sample_floor``)."""
        return self.least.get(key, max(self.min_seconds, inst.stack.sample_floor))

    def _known_gap(self, inst: Instance, op: wl.Op, key: tuple) -> float:
        """The time between passes: as measured before, else the stack's estimate."""
        if self.gaps.get(key):
            return self.gaps[key]
        if op.op in ("read", "randread") and not self.direct:
            return (inst.stack.forget_seconds if self.repeatable(op) and not inst.cached_below
                    else inst.stack.remount_seconds)
        return 0.05 if op.op == "write" else 0.0

    def one_pass(self, inst: Instance, op: wl.Op, step: wl.Step, cache: str,
                 left: float | None = None) -> Sample:
        """One pass, by the op's engine (:meth:`passes`); a read sized by time stops once
        ``left`` seconds (what the sample still needs) are up."""
        pids = inst.stack.daemon_pids()
        before, dbefore = cpu.stat_snapshot(), _daemon_cpu(pids)
        harness = cpu.harness_cpu()
        got = self.passes()[op.engine](inst, op, step, left)
        before = got.cpu_from or before
        metrics: dict = {"cache_mode": cache, "unit": op.unit, **got.said}
        metrics["harness_cpu_s"] = cpu.harness_cpu() - harness
        after, dafter = cpu.stat_snapshot(), _daemon_cpu(pids)
        split = cpu.cpu_split(before, after, daemons=max(0.0, dafter - dbefore))
        metrics["cpu_window_s"] = cpu.window_seconds(before, after)
        seconds = max(got.seconds, 1e-6)
        value = (got.count / seconds) if op.unit == "ops/s" else got.moved / seconds
        if op.files > 1:
            metrics["files_per_s"] = op.files / seconds
        cpu_per_unit(metrics, split, got.moved, got.count)
        metrics["count"] = got.count
        return Sample(value=value, seconds=seconds, bytes_moved=got.moved, cpu=split,
                      metrics=metrics)

    def passes(self) -> dict[str, Callable[..., programs.Pass]]:
        """Each engine a storage op names, as one pass ``(inst, op, step, left)`` of it inside
        the profiler's window."""
        return {"fio": self.fio_pass, **self.programs.passes(self.window)}

    def fio_pass(self, inst: Instance, op: wl.Op, step: wl.Step,
                 left: float | None) -> programs.Pass:
        job = self.job(inst, op, step, left)
        # a write's window holds its writeback too: fscrypt encrypts there
        with self.window(inst, op) as starts_at:
            outcome, _ = fio.run(job, inst.workdir, self.stem(inst, op, step),
                                 stat_dir=self.stat_dir())
            starts_at(outcome.first_io)      # a profile leaves fio's start-up out
            settled = inst.stack.settle() if op.op in WRITES else 0.0
        said: dict = {}
        seconds = outcome.runtime_s
        if outcome.stat:
            # The CPU from fio's first I/O on, not from its start-up (rule 7; engines.fio).
            said["cpu_window"] = "from fio's first I/O until " + (
                "durable" if op.op in WRITES else "fio exited")
        if op.op in WRITES:
            # One clock for every stack: fio's, plus the time until the data is durable.
            said["settle_s"] = settled
            seconds += settled
            said["timing"] = "fio's runtime + the time until durable on the medium"
        said.update(iops=outcome.iops, lat_p50_us=outcome.lat_p50_us,
                    lat_p99_us=outcome.lat_p99_us, fio_version=outcome.extra.get("fio_version"))
        verify_moved(inst.label, op, outcome.io_bytes, outcome, job)
        if self.by_time(inst, op):
            said.update(pass_bytes=outcome.io_bytes,
                        cut_by_time=bool(job.cap) and outcome.io_bytes < job.size)
        if job.runtime:
            # how many times over the re-read read its file
            said.update(file_reads=outcome.io_bytes / job.size, timing="one fio process reading "
                        "its file over for the sample's time (O_DIRECT: no cache between)")
        return programs.Pass(outcome.io_bytes, outcome.total_ios, seconds, said,
                             cpu.stat_snapshot(outcome.stat) if outcome.stat else None)

    def job(self, inst: Instance, op: wl.Op, step: wl.Step,
            left: float | None = None) -> fio.FioJob:
        """``op``'s fio job for one pass. A sequential one is sized by time:
        it moves what the cell's last pass moved in the sample's minimum time
        (:meth:`minimum`, the stack's floor included; a fifth more,
        :data:`SIZE_MARGIN`, so that one pass rarely falls short of it) when
        that is less than the file (the op's larger ``room`` where evicting
        pages makes a read cold, so no daemon's cache shares the medium: fewer
        of fio's start-ups); a write that needs more than the file starts the
        sample with what full files leave (:func:`~cryptcost.runner.storage.passes.first_pass`)
        and goes on in full files, the last of which the read reads; a read
        also stops once the sample's time is up (``left`` of it, by default
        all). A write is not cut at a time: its flush may come after (fscrypt
        encrypts at writeback), and rclone's upload of a write cut short by
        fio failed now and then ("remove …: no such file", then EIO)."""
        job = op.fio
        if self.rereads(op):
            return self.reread(inst, op, step, left)
        if not self.by_time(inst, op):
            return job
        if op.op != "write":
            job = replace(job, cap=max(0.05, self.min_seconds if left is None else left))
        key = (inst.label, op.key)
        rate = self.rate.get(key)
        if rate:
            need = self.minimum(inst, op, key)
            want = max(job.bs, int(rate * need * SIZE_MARGIN) // job.bs * job.bs)
            most = largest_pass(inst, op)
            if op.op == "write" and want > most and key not in self.passing:
                want = first_pass(want, most, job.bs)      # the sample's first pass
            elif op.op == "write":                          # and what its read needs
                for read in (o for o in step.ops if o.op == "read" and o.file == op.file):
                    rkey = (inst.label, read.key)
                    want = max(want, read_floor(self.rate.get(rkey), self.minimum(inst, read, rkey),
                                                SIZE_MARGIN, job.bs))
            job = replace(job, size=min(want, most))
        elif self.warm_up and op.op == "write" and job.size > FIRST_PASS_BYTES:
            # The cell's first pass, the warm-up round's, only finds its rate: a slow
            # stack need not spend seconds writing the whole file for that. Without a
            # warm-up the first pass is a sample, and moves the whole file.
            job = replace(job, size=FIRST_PASS_BYTES)
        if op.op == "read":
            path = inst.workdir / f"{self.stem(inst, op, step)}.dat"
            have = path.stat().st_size // job.bs * job.bs if path.exists() else job.size
            if 0 < have < job.size:
                job = replace(job, size=have)
        return job

    def rereads(self, op: wl.Op) -> bool:
        """A read with O_DIRECT has no cache to reset between its passes: one fio process reads
        its file over and over for the sample's time (:meth:`reread`)."""
        return self.direct and op.op in ("read", "randread") and self.repeatable(op)

    def reread(self, inst: Instance, op: wl.Op, step: wl.Step,
               left: float | None = None) -> fio.FioJob:
        """The sample's read as one fio process (``time_based``): the file the write before it
        left (a random read: its layout), from its start again each time fio reaches its end,
        until ``left`` seconds (by default the sample's minimum) are up: one fio start-up a
        sample (:mod:`cryptcost.engines.fio` says what one costs), not one a pass."""
        job = replace(op.fio, cap=None, runtime=max(0.05, self.min_seconds if left is None
                                                    else left))
        path = inst.workdir / f"{self.stem(inst, op, step)}.dat"
        have = path.stat().st_size // job.bs * job.bs if path.exists() else 0
        if have and (op.by_time or have < job.size):
            job = replace(job, size=have)
        return job
