"""Storage measurement: stacks × workloads on a medium, each stack against
its matched baseline, interleaved.

Flow: :func:`resolve` expands stack specs and adds each stack's baselines;
:func:`run_storage` gives every stack instance a fresh block device from the
medium, builds it, turns each workload step into one job per instance (all
instances of a step in one group, so they stay in step: A B C A B C …),
schedules them, and summarises each series with its overhead against the
baseline. Everything is torn down by the ``Resources`` scope.

Cache mode (rule 4) is chosen once per run, so a stack and its baseline are
always measured alike: O_DIRECT when every stack in the run honours it,
otherwise buffered I/O with fsync at the end of writes and dropped caches
(FUSE stacks: a remount) before reads.
"""

from __future__ import annotations

import logging
import os
import shutil
import statistics
from dataclasses import dataclass, field, replace

from cryptcost import proc, stats
from cryptcost.engines import perf
from cryptcost.errors import UserError
from cryptcost.host import cpu
from cryptcost.lifecycle.resources import Resources
from cryptcost.media import Medium, parse_medium
from cryptcost.model import Cell, Result, metric_median as median
from cryptcost.record import CpuUse
from cryptcost.runner.core import flow, pairing, pinning, quiet
from cryptcost.runner.storage.integrity import verify_pattern
from cryptcost.runner.core.scheduler import Progress, Series
from cryptcost.runner.core.sink import Sink
from cryptcost.runner.storage.cause import likely_cause
from cryptcost.runner.storage.passes import reset_one_file
from cryptcost.runner.storage.steps import MIN_SAMPLE_SECONDS, Instance, StepRunner
from cryptcost.stacks.fs import MIN_MEDIUM, StorageStack
from cryptcost.workloads import storage as wl

log = logging.getLogger("cryptcost.storage")
GiB = 1 << 30
SHORT_SAMPLE = 0.5          # seconds; a sample shorter than this and than its plan asked is noted
# what a plan's storage.sample_minimum may be: a quarter second is a few whole passes of a read at
# memory speed, which the quick suite takes four samples of (storage.samples, docs/methodology.md),
# and one past a minute is a soak, not a sample
MIN_SAMPLE_MINIMUM, MAX_SAMPLE_MINIMUM = 0.25, 60.0


@dataclass(frozen=True)
class StoragePlan:
    """One storage comparison, as a plan's table or ``cryptcost storage`` asks it; each field's
    default is the table's (``[storage]`` with nothing in it)."""

    stacks: tuple[str, ...] = ("all",)   # specs: name, name:variant, name:*, or "all"
    medium: Medium = field(default_factory=lambda: parse_medium("ram"))
    workloads: tuple[str, ...] = ("quick",)
    size: int | None = 512 << 20     # per stack instance; None: chosen from the medium's room
    # a size the plan did not name (a suite's own): made smaller where the medium cannot give
    # every stack instance that much, the size asked kept in ``size_asked``
    fit_size: bool = False
    size_asked: int | None = None
    fs: str = "ext4"
    sizes: wl.Sizes | None = None    # None: the workloads' own (wl.Sizes) on ``size``
    # restrict fio and the stacks' daemons to this many CPUs (rule 15)
    cpus: int | None = None
    # the run plan's part this belongs to (results are paired within it)
    part: str | None = None
    # (True, False): each measured stack also with acceleration off
    accel: tuple[bool, ...] = (True,)
    # a profiled round: where each cell's CPU goes (perf)
    profile: bool = False
    # each sample's measured time at least, in seconds (rule 10), a read at memory speed's too
    sample_minimum: float = MIN_SAMPLE_SECONDS
    # each series' number of samples, whatever the policy's minimum and maximum (None: theirs)
    samples: int | None = None

    def policy(self, policy: stats.Policy) -> stats.Policy:
        """The sampling ``policy`` as this plan's series take it."""
        return replace(policy, min_samples=self.samples, max_samples=self.samples) \
            if self.samples else policy

    def sized(self) -> wl.Sizes:
        """The workloads' sizes on this plan's medium size."""
        sizes = self.sizes or wl.Sizes(medium=self.size or 512 << 20)
        return sizes if sizes.medium == self.size or self.size is None \
            else replace(sizes, medium=self.size)


@dataclass
class Conditions:
    """What a storage run learns of its host as it goes, recorded beside each result: what the
    pass on ``cpus`` pinned, the memory touched before the first sample, and the memory's
    bandwidth and its spread then."""

    affinity: str | None = None                 # runner.core.pinning
    warmed: dict | None = None                  # runner.core.quiet.warm_memory
    memory_noise: dict | None = None            # runner.core.quiet.memory_noise


@dataclass
class StorageOutcome(flow.Outcome):
    cache_mode: str = ""


def resolve(specs: list[str], fs: str, accel: tuple[bool, ...] = (True,), here: bool = True
            ) -> tuple[list[tuple[StorageStack, str]], list[dict]]:
    """Storage stack instances to build (measured ones and their baselines,
    and acceleration-off copies when asked) and the stacks skipped because
    they are unavailable here (``here=False``: see :func:`pairing.resolve`)."""
    def fits(cls) -> str | None:
        return (None if fs in cls.filesystems
                else f"works only on {', '.join(cls.filesystems)}, not --fs {fs}")

    def make(cls, variant: str) -> StorageStack:
        return cls(variant, fs)
    resolved, skipped = pairing.resolve(specs, "storage", make, fits=fits, here=here)
    pairing.add_accel_off_copies(resolved, skipped, make, accel)
    return resolved, skipped


def validate(plan: StoragePlan
             ) -> tuple[StoragePlan, list[tuple[StorageStack, str]], list[dict]]:
    """Everything that can be refused before anything is created or recorded; the plan with its
    size fitted to the medium's room (chosen from it, or made smaller with ``fit_size``)."""
    names = wl.expand(plan.workloads)
    wl.steps(names, wl.Sizes(medium=plan.size or 512 << 20), False)   # workloads that share a cell
    resolved, skipped = resolve(plan.stacks, plan.fs, plan.accel)
    if not any(role == "measured" for _, role in resolved):
        raise UserError("no stack to measure: " + "; ".join(s["reason"] for s in skipped[:3]))
    if os.geteuid() != 0:
        raise UserError("storage stacks need root (loop devices, mounts, FUSE): run with sudo")
    cpu.validate_cpu_count(plan.cpus)
    if plan.samples is not None and not 1 <= plan.samples <= 1000:
        raise UserError(f"storage.samples must be 1–1000, not {plan.samples}")
    if not MIN_SAMPLE_MINIMUM <= plan.sample_minimum <= MAX_SAMPLE_MINIMUM:
        raise UserError(f"--sample-minimum (storage.sample_minimum) must be "
                        f"{MIN_SAMPLE_MINIMUM:g}–{MAX_SAMPLE_MINIMUM:g} s, "
                        f"not {plan.sample_minimum:g}")
    least = MIN_MEDIUM.get(plan.fs, 0)
    if plan.size is not None and plan.size < least:
        raise UserError(f"--fs {plan.fs} needs a medium of at least {least >> 20} MiB "
                        f"(mkfs.{plan.fs} refuses a smaller filesystem), not {plan.size >> 20} "
                        "MiB: pass a larger --size")
    if plan.profile:
        perf.require()
    if plan.size is None:
        plan = replace(plan, size=max(plan.medium.auto_size(len(resolved)), least))
    elif plan.fit_size and (fitted := max(plan.medium.fitted(plan.size, len(resolved)),
                                          least)) < plan.size:
        plan = replace(plan, size_asked=plan.size_asked or plan.size, size=fitted)
    plan.medium.require_room(plan.size, len(resolved))
    for workload, program in (("smallfiles", "tar"), ("rsync", "rsync"), ("bonnie", "bonnie++")):
        if workload in names and not proc.which(program):
            raise UserError(f"the {workload} workload needs {program}: cryptcost install "
                            f"{program}")
    return plan, resolved, skipped


def fitted_said(plan: StoragePlan) -> str:
    """Why a plan's stacks get less than its size (after :func:`validate`), or nothing."""
    if not plan.size_asked:
        return ""
    return (f", not the {plan.size_asked >> 20} MiB asked: the {plan.medium.name} medium "
            f"cannot give each of its stacks that much")


def describe_plan(plan: StoragePlan, resolved: list[tuple[StorageStack, str]],
                  skipped: list[dict]) -> list[str]:
    """What will run, in a few lines for people, before anything starts."""
    measured = [s.label for s, role in resolved if role == "measured"]
    baselines = [s.label for s, role in resolved if role == "baseline"]
    direct = all(s.honours_direct for s, _ in resolved)
    steps = wl.steps(wl.expand(plan.workloads), wl.Sizes(medium=plan.size or 512 << 20), direct)
    total = plan.size * len(resolved)
    lines = [f"stacks: {', '.join(measured)}" + (f"  (baselines: {', '.join(baselines)})"
                                                 if baselines else ""),
             f"workloads: {', '.join(wl.expand(plan.workloads))} — {len(steps)} steps × "
             f"{len(resolved)} stacks, each repeated until stable",
             f"medium: {plan.medium.describe()['medium']}, {plan.size >> 20} MiB per stack "
             f"({total / GiB:.1f} GiB in all{fitted_said(plan)}); cache mode: "
             + ("O_DIRECT" if direct
                else "buffered, fsync after writes, caches dropped before reads")]
    for s in skipped:
        lines.append(f"not measured: {s['stack']}: {s['reason']}"
                     + (f" (install: {s['install']})" if s.get("install") else ""))
    return lines


def run_storage(plan: StoragePlan, policy: stats.Policy, *, res: Resources,
                sink: Sink | None = None,
                progress: Progress | None = None) -> StorageOutcome:
    """Set up, measure, compare. Teardown happens when ``res`` is released.

    With ``plan.cpus`` the pass runs on that many CPUs: fio, every daemon a
    stack starts and, where the kernel allows, its unbound workqueues
    (:mod:`cryptcost.runner.core.pinning`); each result records what was pinned.
    """
    seen = Conditions()
    with pinning.pinned(res, plan.cpus) as seen.affinity:
        return _run_storage(plan, policy, seen, res=res, sink=sink, progress=progress)


def _run_storage(plan: StoragePlan, policy: stats.Policy, seen: Conditions, *, res: Resources,
                 sink: Sink | None = None,
                 progress: Progress | None = None) -> StorageOutcome:
    plan, resolved, skipped = validate(plan)
    policy, sizes = plan.policy(policy), plan.sized()
    names = wl.expand(plan.workloads)
    instances = [Instance(stack, stack.label, role) for stack, role in resolved]
    direct = all(i.stack.honours_direct for i in instances)
    outcome = StorageOutcome(skipped=skipped, cache_mode="direct" if direct else "buffered+fsync")
    # Every stack's set-up begins before any is waited for: a daemon deriving
    # its key (CryFS's scrypt) then overlaps the others' set-up.
    for inst in instances:
        try:
            backing = plan.medium.provide(res, plan.size)
            inst.cached_below = backing.cached
            inst.stack.begin(res, backing)
        except flow.SETUP_ERRORS as exc:
            flow.setup_failed(outcome, inst, exc, "storage", log)
    for inst in instances:
        if inst.error:
            continue
        try:
            inst.workdir = inst.stack.ready(res)
            inst.free = shutil.disk_usage(inst.workdir).free
            inst.stack.integrity = verify_pattern(
                inst.workdir, reset=lambda path, i=inst: reset_one_file(res, i, path))
        except flow.SETUP_ERRORS as exc:
            flow.setup_failed(outcome, inst, exc, "storage", log)
    ready = [i for i in instances if not i.error]
    archive = wl.make_archive(res, sizes.small_files // 2) if "smallfiles" in names else None
    runner = StepRunner(res, archive, direct, min_seconds=plan.sample_minimum,
                        warm_up=policy.warmup > 0)
    steps = wl.steps(names, sizes, direct)
    if ready:
        seen.warmed = quiet.warm_memory(warm_bytes(plan.size))
        log.info("memory warmed before the first sample: %s", seen.warmed)
        seen.memory_noise = quiet.memory_noise()
        log.info("the host's memory bandwidth before the first sample: %s", seen.memory_noise)
    pairs = []
    for step in steps:
        for inst in ready:
            why = unfit(inst.stack, step, direct)
            if why:
                outcome.skipped.append({"stack": inst.label, "workload": step.label,
                                        "kind": "storage", "reason": why})
            else:
                pairs.append((inst, step))
    flow.compare(pairs, _Storage(runner, plan, seen, policy.target), outcome=outcome,
                 policy=policy, res=res, sink=sink, progress=progress, profile=plan.profile)
    return outcome


class _Storage(flow.Kind):
    """A storage comparison as the flow reads it: a step is a workload's ops, run by the step
    runner on each instance's mount."""

    kind = "storage"

    def __init__(self, runner: StepRunner, plan: StoragePlan, seen: Conditions, target: float):
        self.runner, self.plan, self.seen, self.target = runner, plan, seen, target

    def ops(self, step: wl.Step) -> list[wl.Op]:
        return step.ops

    def cell(self, inst: Instance, op: wl.Op) -> Cell:
        return _cell(inst, op, self.plan)

    def result(self, inst: Instance, op: wl.Op, series: Series, every: dict) -> Result:
        return _result(inst, op, series, every, self.plan, self.seen, self.target)

    def job(self, step: wl.Step) -> flow.StepJob:
        return flow.StepJob(step.label, step.name, 2.0 * len(step.ops))


def unfit(stack: StorageStack, step: wl.Step, direct: bool) -> str | None:
    """Why ``stack`` cannot run ``step`` (a workload the stack says it cannot run, a direct
    I/O smaller than its device's sector), or None."""
    said = [stack.unfit_workloads[w] for w in sorted({op.workload for op in step.ops})
            if w in stack.unfit_workloads]
    if said:
        return said[0]
    unit = stack.direct_unit()
    small = sorted({op.block_bytes for op in step.ops
                    if direct and op.engine == "fio" and op.block_bytes < unit})
    if not small:
        return None
    return (f"its device has {unit}-byte sectors: a direct I/O of {small[0]} B is refused "
            "(EINVAL), so it is not measured")


def warm_bytes(size: int) -> int:
    """How much memory to touch before the first sample: what one pass's
    page cache may take at every layer it crosses, with room to spare — a
    file of 75 % of ``size`` on a stack whose file is its only cache, or two
    of 40 % (the file and what a FUSE stack or an export keeps below it) —
    2 × ``size``, but at most a quarter of the memory available."""
    return min(2 * size, (cpu.memory().get("available") or 8 * size) // 4)


def _cell(inst: Instance, op: wl.Op, plan: StoragePlan) -> Cell:
    return Cell(kind="storage", stack=inst.label, accel=inst.stack.accel,
                medium=plan.medium.describe()["medium"],
                fs=inst.stack.fs, workload=op.workload, op=op.op, block_bytes=op.block_bytes,
                iodepth=op.iodepth, size=plan.size, part=plan.part or None, cpus=plan.cpus or None)


def _params(inst: Instance, plan: StoragePlan, seen: Conditions) -> dict:
    """What describes the instance and the run's conditions, beside its cell."""
    params = inst.stack.describe()
    if plan.cpus:
        params["affinity"] = seen.affinity
    if plan.size_asked:
        params["size_asked"] = plan.size_asked      # the medium gave less (fitted_said)
    least = max(plan.sample_minimum, inst.stack.sample_floor)   # as the samples took it
    if least != MIN_SAMPLE_SECONDS:
        params["sample_minimum"] = least                    # not rule 10's second
    if seen.warmed:
        params["memory_warmed"] = seen.warmed
    if seen.memory_noise:
        params["memory_noise"] = seen.memory_noise
    return params


def _result(inst: Instance, op: wl.Op, s: Series, series: dict, plan: StoragePlan,
            seen: Conditions, target: float = 0.03) -> Result:
    samples = s.samples
    stack = inst.stack
    metrics = {
        "unit": op.unit, "role": stack.variant_role(),
        "iops": median(samples, "iops"),
        "lat_p50_us": median(samples, "lat_p50_us"),
        "lat_p99_us": median(samples, "lat_p99_us"),
        "cpu_s_per_gib": median(samples, "cpu_s_per_gib"),
        "cpu_us_per_op": median(samples, "cpu_us_per_op"),
        "files_per_s": median(samples, "files_per_s"),
        "cpu": CpuUse.mean(samples).to_dict(),
        "bytes_moved": samples[-1].bytes_moved,
        "cache_mode": samples[-1].metrics.get("cache_mode"),
        "engine": samples[-1].metrics.get("engine", "fio"),
    }
    notes, after = [], []
    unmeasured = [x.metrics["cpu_unmeasured"] for x in samples if x.metrics.get("cpu_unmeasured")]
    if metrics["cpu_s_per_gib"] is None and metrics["cpu_us_per_op"] is None and unmeasured:
        metrics["cpu_unmeasured"] = unmeasured[0]
        notes.append(f"CPU not counted: {unmeasured[0]} (a longer sample counts it)")
    metrics["passes"] = statistics.median(x.metrics.get("passes", 1) for x in samples)
    if any("file_reads" in x.metrics for x in samples):       # a re-read (steps.StepRunner.reread)
        metrics["file_reads"] = median(samples, "file_reads")
    if any("settled_after_s" in x.metrics for x in samples):   # dbench's (storage.programs.mix)
        metrics["settled_after_s"] = median(samples, "settled_after_s")
    short = statistics.median(x.seconds for x in samples)
    if short < min(SHORT_SAMPLE, plan.sample_minimum) - 0.01:   # one cut at its minimum is done
        after.append(f"each sample lasted only {short * 1000:.0f} ms, where fio's 1 ms timer and "
                     "start-up weigh several percent: pass a larger --size")
    if samples[-1].metrics.get("timing"):
        metrics["timing"] = samples[-1].metrics["timing"]
    for key in ("warm_because", "bonnie_own", "data"):   # the bonnie workload's (storage.programs)
        if samples[-1].metrics.get(key):
            metrics[key] = samples[-1].metrics[key]
    return flow.summarise(stack, _cell(inst, op, plan), s, series, target=target,
                          own=flow.Own(metrics, {"params": _params(inst, plan, seen)},
                                       cause=lambda cv: likely_cause(inst, op, samples, cv,
                                                                     seen.memory_noise,
                                                                     plan.sample_minimum),
                                       notes=notes, after=after))
