"""The comparison every kind of stack runs once its instances are set up.

Storage and network differ in how an instance is built and how one step is
measured (``runner.storage.steps``, ``runner.network.steps``); from there on the flow is
one: a job per instance and step, the instances of a step in one group so
that a stack and its baselines stay in step (rule 2), the interleaved
schedule, the optional profiled round, and each series summarised against
its baselines, the acceleration-off copies verified, and every result handed
to the sink. :func:`compare` is that flow, written once; each kind answers
it through one interface (:class:`Kind`): its steps' ops, each cell, one
sample of a step, how a series becomes a result, and each step's job.
"""

from __future__ import annotations

import logging
import statistics
from dataclasses import dataclass, field
from typing import Any, Callable, Hashable, Mapping, Sequence

from cryptcost import stats
from cryptcost.errors import CryptcostError, Unavailable
from cryptcost.host import cpu
from cryptcost.lifecycle.resources import Resources, Terminated, signals_deferred
from cryptcost.model import Cell, Job, Result, Sample, metric_median
from cryptcost.runner.core import pairing
from cryptcost.runner.core.profile import AFTER, IN_WARMUP, Profiler, attach, profile_round
from cryptcost.runner.core.scheduler import Progress, Series, host_drift, mark_unstable, schedule
from cryptcost.runner.core.sink import Seen, Sink

log = logging.getLogger("cryptcost.flow")


@dataclass
class Outcome:
    """What a kind's run gives back: its results, what was not measured and why, and the
    measured stacks whose set-up or series failed."""

    results: list[Result] = field(default_factory=list)
    skipped: list[dict] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)


def setup_failed(outcome: Outcome, inst: Any, exc: Exception, kind: str,
                 log: logging.Logger) -> None:
    """An instance whose set-up failed: skipped with the reason, and a failure of the run
    when it is a measured stack that should have worked (not one found unavailable)."""
    inst.error = str(exc)
    outcome.skipped.append({"stack": inst.label, "kind": kind,
                            "reason": f"setup failed: {getattr(exc, 'reason', exc)}",
                            "install": getattr(exc, "install", None)})
    if inst.role == "measured" and not isinstance(exc, Unavailable):
        outcome.failed.append(f"{inst.label}: setup failed: {exc}")
    log.warning("%s: setup failed: %s", inst.label, exc)


SETUP_ERRORS = (CryptcostError, OSError)


@dataclass(frozen=True)
class StepJob:
    """How one step is scheduled: its job's label (after the instance's), the group whose
    instances stay in step, and the seconds a run of it is expected to take."""

    label: str
    group: Hashable
    est_seconds: float


class Kind:
    """What a kind of stack tells the flow of its comparison. ``runner`` is its step runner:
    ``runner(inst, step)`` measures one sample of each of the step's ops, by ``(label,
    op.key)`` (the profiler wraps its ``window``)."""

    kind = ""
    runner: Any = None

    def ops(self, step: Any) -> Sequence[Any]:
        """The operations one step measures, each a series."""
        raise NotImplementedError

    def cell(self, inst: Any, op: Any) -> Cell:
        raise NotImplementedError

    def result(self, inst: Any, op: Any, series: Series, every: Mapping[Cell, Series]) -> Result:
        """A series as a result, set against the others (``every``, by cell)."""
        raise NotImplementedError

    def job(self, step: Any) -> StepJob:
        raise NotImplementedError

    def cells(self, pairs: Sequence[tuple[Any, Any]]) -> dict[tuple, Cell]:
        """Every (instance, step) pair's cells, by ``(label, op.key)``."""
        return {(inst.label, op.key): self.cell(inst, op) for inst, step in pairs
                for op in self.ops(step)}


def compare(pairs: Sequence[tuple[Any, Any]], spec: Kind, *, outcome: Outcome,
            policy: stats.Policy, res: Resources, sink: Sink | None,
            progress: Progress | None, profile: bool) -> None:
    """Measure every (instance, step) of ``pairs``, in that order within each round, and add
    each series' result to ``outcome``, instance by instance, as ``spec`` (the kind) says."""
    sink = sink or Sink()
    cell = spec.cells(pairs)
    profiler = None
    if profile and pairs:
        profiler = Profiler(res, spec.runner, cell, IN_WARMUP if policy.warmup else AFTER,
                            runs=len(pairs))

    def measure(inst: Any, step: Any) -> dict[Cell, Sample]:
        got = spec.runner(inst, step)
        if profiler:
            profiler.saw(got)
        return {cell[k]: sample for k, sample in got.items()}
    jobs = []
    for inst, step in pairs:
        how = spec.job(step)
        jobs.append(Job(label=f"{inst.label}: {how.label}",
                        keys=tuple(cell[(inst.label, op.key)] for op in spec.ops(step)),
                        measure=lambda inst=inst, step=step: measure(inst, step),
                        group=how.group, est_seconds=how.est_seconds))
    # with a warm-up round, its last run of each job is profiled: no pass of its own
    watch = (lambda j: profiler.watching()) if profiler and policy.warmup else None
    seen = Seen(sink)
    series = None
    try:
        series = schedule(jobs, policy, progress=progress, yardstick=cpu.yardstick_speed,
                          on_sample=lambda job, key, i, s: seen.sample(key, i, s), watch=watch,
                          undecided=pairing.accel_undecided)
        profiles = {}
        if profiler:
            profiles = (profiler.finish() if watch else
                        profile_round(profiler, list(pairs), progress))
    except BaseException as exc:
        with signals_deferred(0, "storing the results measured so far"):
            if series is None:
                keep_cut(pairs, spec, seen.series, sink, cut_cause(exc))
            else:                               # cut in the profiled round: the series ended
                _finish(pairs, spec, series, {}, outcome, sink)
        raise
    _finish(pairs, spec, series, profiles, outcome, sink)


def _finish(pairs, spec: Kind, series: Mapping[Cell, Series], profiles: dict, outcome: Outcome,
            sink: Sink) -> None:
    """Each ended series as a result, instance by instance, with its profile; acceleration-off
    copies verified; all handed to the sink and added to ``outcome``."""
    results = []
    instances: list = []
    for inst, _ in pairs:                                              # each instance, in order
        if not any(inst is x for x in instances):
            instances.append(inst)
    for inst in instances:
        for step in (s for i, s in pairs if i is inst):
            for op in spec.ops(step):
                s = series.get(spec.cell(inst, op))
                if s is None:
                    continue
                if not pairing.failed_series(outcome, inst.label, op.workload, s, spec.kind):
                    continue
                results.append(attach(spec.result(inst, op, s, series), profiles))
    outcome.results += pairing.store_results(results, sink)


def cut_cause(exc: BaseException) -> str:
    """Why a comparison ended before its series did, in a few words."""
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted"
    if isinstance(exc, Terminated):
        return f"stopped by a signal ({exc})" if str(exc) else "stopped by a signal"
    if isinstance(exc, CryptcostError):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


def cut_short(cause: str) -> str:
    """What a series cut short says, as its ``incomplete``."""
    return f"the run ended before this series did: {cause}"


def keep_cut(pairs: Sequence[tuple[Any, Any]], spec: Kind, seen: Mapping[Cell, Series],
             sink: Sink, cause: str) -> None:
    """A comparison cut before its series ended (Ctrl-C, SIGTERM, a guest stopped at its
    timeout): every series with samples is handed to the sink as an incomplete result (never
    ranked), summarised and set against its baselines' samples so far, so that the run keeps
    what it measured as results and not only as samples. Nothing here may hide the cause:
    a result that cannot be made is logged and left out."""
    results = []
    why = cut_short(cause)
    cut = {key: Series(samples=list(s.samples), stop_reason="interrupted", error=why)
           for key, s in seen.items() if s.samples}
    for inst, step in pairs:
        for op in spec.ops(step):
            s = cut.get(spec.cell(inst, op))
            if s is None:
                continue
            try:
                results.append(spec.result(inst, op, s, cut))
            except Exception as exc:                      # noqa: BLE001 -- the cut's cause wins
                log.error("%s %s: its samples are stored, its result could not be made: %s",
                          inst.label, op.workload, exc)
    try:
        pairing.store_results(results, sink)
    except Exception as exc:                              # noqa: BLE001
        log.error("the cut comparison's results could not all be stored: %s", exc)


@dataclass
class Own:
    """What a kind says of one result itself: its ``metrics`` and ``attrs``, ``notes`` said
    before the unstable mark and ``after`` it, and the likely cause of its spread
    (``cause(cv)``)."""

    metrics: dict
    attrs: dict
    cause: Callable[[float | None], str]
    notes: Sequence[str] = ()
    after: Sequence[str] = ()


def summarise(stack: Any, cell: Cell, s: Series, series: Mapping[Cell, Series], *, target: float,
              own: Own) -> Result:
    """A series as a result, alike for every kind: its summary, a failure after some samples
    kept (``incomplete``, never ranked), the samples' length and the host's drift between them,
    the unstable mark with ``own.cause(cv)``, the stack's security facts, and its overhead
    against each baseline's same cell; what the kind says of it itself in ``own``."""
    samples = s.samples
    metrics, attrs, notes, after, cause = own.metrics, own.attrs, own.notes, own.after, own.cause
    summary = stats.summarize(s.values())
    said = ([s.error] if s.error else []) + list(notes)
    if s.error:                          # the series failed after these samples: kept, never ranked
        metrics["incomplete"] = s.error
    metrics["sample_seconds"] = statistics.median(x.seconds for x in samples)
    metrics["host_drift"] = host_drift(samples)
    metrics["yardstick"] = metric_median(samples, "cpu_ref")
    mark_unstable(metrics, said, summary, target, lambda: cause(summary.cv))
    said += after
    if stack.security:
        metrics["security"] = list(stack.security)
    paired, more = pairing.against_baselines(stack, cell, s.values(), series)
    metrics.update(paired)
    return Result(cell=cell, attrs=attrs, summary=summary,
                  stop_reason=s.stop_reason or "cap_reached", samples=tuple(samples),
                  metrics=metrics, notes=tuple(said + more))
