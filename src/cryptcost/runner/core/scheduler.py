"""Run jobs in interleaved rounds until every series is stable.

A :class:`Job` is one measurement action (one program invocation) that
yields a :class:`~cryptcost.model.Sample` for each of its series keys.
:func:`schedule` runs round 1 of every job, then round 2 of every job that
still has an unstable series, and so on (METHODOLOGY rule 2: A B A B, never
A A B B; within a group the order rotates each round), discarding each
job's warm-up rounds (rule 12) and stopping a
series when its CI target is met or the cap is reached (rule 10).

Every sample is handed to ``on_sample`` the moment it exists, so the store
keeps it even when a later job fails.
"""

from __future__ import annotations

import logging
import statistics
import time
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Callable, Hashable

from cryptcost import faults
from cryptcost.errors import CryptcostError
from cryptcost.model import Job, Sample
from cryptcost.stats import HOST_DRIFT, Policy, Summary

log = logging.getLogger("cryptcost.scheduler")


@dataclass
class Series:
    samples: list[Sample] = field(default_factory=list)
    stop_reason: str | None = None
    error: str | None = None

    def values(self) -> list[float]:
        return [s.value for s in self.samples]


class Progress:
    """Callbacks the scheduler reports to; the default does nothing."""

    def start(self, total_steps: int, est_seconds: float, expected_steps: int = 0) -> None: ...
    def step(self, label: str, done: int, total: int, eta: "Eta | None" = None) -> None: ...
    def finish(self) -> None: ...


@dataclass
class Eta:
    """What is left, predicted from what was measured: ``seconds`` and ``steps``
    (each job's remaining rounds — from its series' own spread, see
    Policy.expected_samples — times its measured step time), and the most
    steps the caps allow."""

    seconds: float
    steps: int
    at_most_steps: int


class _Clock:
    """Each job's measured step durations, and the prediction of what is left."""

    def __init__(self, jobs: list[Job], policy: Policy):
        self.jobs, self.policy = jobs, policy
        self.took: dict[int, list[float]] = {}
        self.rounds: dict[int, int] = {}

    def record(self, job: Job, seconds: float) -> None:
        self.took.setdefault(id(job), []).append(seconds)
        self.rounds[id(job)] = self.rounds.get(id(job), 0) + 1

    def _duration(self, job: Job) -> float:
        mine = self.took.get(id(job))
        if mine:
            return statistics.median(mine)
        peers = [t for j in self.jobs if j.group is not None and j.group == job.group
                 for t in self.took.get(id(j), [])]
        return statistics.median(peers) if peers else job.est_seconds

    def eta(self, series: dict[Hashable, "Series"]) -> Eta:
        seconds, steps, most = 0.0, 0, 0
        for job in self.jobs:
            if any(series[k].error for k in job.keys):
                continue
            peers = [j for j in self.jobs
                     if job.group is not None and j.group == job.group] or [job]
            need = max(self.policy.expected_samples(series[k].values())
                       if series[k].stop_reason is None
                       else len(series[k].samples) for j in peers for k in j.keys)
            warm = job.warmups(self.policy.warmup)
            left = max(0, warm + need - self.rounds.get(id(job), 0))
            seconds += left * self._duration(job)
            steps += left
            most += max(0, warm + self.policy.max_samples - self.rounds.get(id(job), 0))
        return Eta(seconds, steps, most)


def schedule(jobs: list[Job], policy: Policy, *,
             on_sample: Callable[[Job, Hashable, int, Sample], None] | None = None,
             on_done: Callable[[Hashable, Series], None] | None = None,
             progress: Progress | None = None,
             yardstick: Callable[[], float] | None = None,
             watch: Callable[[Job], AbstractContextManager] | None = None,
             undecided: Callable[[Hashable, dict[Hashable, Series]], bool] | None = None
             ) -> dict[Hashable, Series]:
    """Run ``jobs`` interleaved until each series stops; return all series.
    ``yardstick`` times a fixed piece of CPU work before every job; each
    sample keeps it (``cpu_ref``), for :func:`host_drift`. ``watch(job)``: what
    a job's last warm-up round runs inside (a profiler), its samples discarded
    like every warm-up's. ``undecided(key, series)``: whether a question a series answers
    beside its own interval (an acceleration switch shown against its twin) is still open
    after a round; such a series, stopped at its interval's target, samples on, up to the
    maximum."""
    run = _Rounds(jobs, policy, progress or Progress(), on_sample, on_done, yardstick, watch)
    for rnd in range(run.rounds):
        if undecided:
            run.reopen(undecided)
        active = rotate([j for j in jobs if _needs_more(j, jobs, run.series)], rnd)
        run.report_finished(active)
        if not active:
            break
        for job in active:
            run.one(job)
    else:
        if undecided:                  # the last round was the maximum's: stopped by the cap
            run.reopen(undecided, "cap_reached")
    run.progress.finish()
    run.report_finished([])
    return run.series


class _Rounds:
    """The state of one :func:`schedule`: each series, each job's warm-up rounds, the clock
    that estimates what is left, and what was said of each ended series."""

    def __init__(self, jobs: list[Job], policy: Policy, progress: Progress, on_sample, on_done,
                 yardstick, watch):
        self.jobs, self.policy, self.progress = jobs, policy, progress
        self.on_sample, self.on_done = on_sample, on_done
        self.yardstick, self.watch = yardstick, watch
        self.series = {k: Series() for j in jobs for k in j.keys}
        self.warm = {id(j): j.warmups(policy.warmup) for j in jobs}
        self.rounds = max(self.warm.values(), default=0) + policy.max_samples
        self.total = sum(w + policy.max_samples for w in self.warm.values())
        expected = sum(w + policy.min_samples for w in self.warm.values())
        progress.start(self.total, sum(j.est_seconds * (self.warm[id(j)] + policy.min_samples)
                                       for j in jobs), expected)
        self.done = 0
        self.reported: set = set()
        self.clock = _Clock(jobs, policy)

    def reopen(self, undecided: Callable[[Hashable, dict[Hashable, Series]], bool],
               then: str | None = None) -> None:
        """Between rounds, when every series has as many samples as its group's: a series
        stopped at its interval's target whose other question is ``undecided`` samples on
        (``then`` None), or, after the last round, was stopped by the cap (``then``). Never
        past the plan's time budget: that stops it as it stops every series."""
        deadline = self.policy.deadline
        if then is None and deadline is not None and time.monotonic() >= deadline:
            return
        for key, s in self.series.items():
            if s.stop_reason == "ci_target_met" and key not in self.reported and \
                    undecided(key, self.series):
                log.info("%s: its interval is within the target, but its check is undecided: %s",
                         getattr(key, "stack", key), then or "sampling on")
                s.stop_reason = then

    def report_finished(self, active: list[Job]) -> None:
        running = {k for j in active for k in j.keys}
        for key, s in self.series.items():
            if key not in running and key not in self.reported:
                self.reported.add(key)
                s.stop_reason = s.stop_reason or "cap_reached"
                if self.on_done:
                    self.on_done(key, s)

    def one(self, job: Job) -> None:
        """One run of ``job``: a warm-up round (watched if it is its last and there is a
        watch), or a sample of each of its series."""
        self.done += 1
        self.progress.step(job.label, self.done, self.total,
                           self.clock.eta(self.series) if self.done > 1 else None)
        faults.at("between")
        started = time.monotonic()
        ran = self.clock.rounds.get(id(job), 0)
        warming = ran < self.warm[id(job)]
        ref = self.yardstick() if self.yardstick and not warming else None
        watched = self.watch and warming and ran == self.warm[id(job)] - 1
        try:
            faults.at("measure")
            with self.watch(job) if watched else nullcontext():
                got = job.measure()
            self.clock.record(job, time.monotonic() - started)
        except CryptcostError as exc:
            log.warning("%s failed: %s", job.label, exc)
            for k in job.keys:
                self.series[k].error = self.series[k].error or str(exc)
                self.series[k].stop_reason = self.series[k].stop_reason or "error"
            return
        if not warming:
            self.keep(job, got, ref)

    def keep(self, job: Job, got: dict, ref: float | None) -> None:
        """A sample of each of ``job``'s series that has not failed; each series' stop."""
        for key in job.keys:
            s = self.series[key]
            if key not in got or s.error:
                continue
            if ref:
                got[key].metrics["cpu_ref"] = ref
            s.samples.append(got[key])
            if self.on_sample:
                self.on_sample(job, key, len(s.samples) - 1, got[key])
            s.stop_reason = self.policy.stop_reason(s.values())


def host_drift(samples: list[Sample]) -> float | None:
    """How far the host's CPU speed moved between ``samples`` (the largest
    over the smallest yardstick timed before each, minus one), or None."""
    refs = [x.metrics["cpu_ref"] for x in samples if x.metrics.get("cpu_ref")]
    return max(refs) / min(refs) - 1 if len(refs) > 1 else None


def drift_cause(samples: list[Sample]) -> str | None:
    """A result's likely cause when the host itself moved, else None."""
    d = host_drift(samples)
    if d is None or d <= HOST_DRIFT:
        return None
    return (f"the host's CPU speed moved by more than {HOST_DRIFT:.0%} between its samples "
            "(host_drift: a fixed SHA-256 timed before each): the host, not the stack")


def mark_unstable(metrics: dict, notes: list[str], summary: Summary, target: float,
                  cause: Callable[[], str]) -> None:
    """Mark a result whose 95 % interval (``summary``, of its samples) is
    still wider than ``target`` of its median after the samples the plan
    allows: ``unstable``, its CV and ``cause()``, the likely reason, in its
    metrics and a note (rule 10)."""
    if summary.n < 2 or summary.rel_half_width <= target:
        return
    metrics.update(unstable=True, cv=summary.cv, likely_cause=cause())
    notes.append(f"unstable: ±{summary.rel_half_width * 100:.1f} % after {summary.n} samples (CV "
                 f"{summary.cv * 100:.1f} %), above the ±{target * 100:g} % target; likely cause: "
                 f"{metrics['likely_cause']}")


def rotate(jobs: list[Job], rnd: int) -> list[Job]:
    """The jobs of round ``rnd``: each group's jobs rotated by one place per
    round (A B C, then B C A, then C A B), so that no stack always runs
    before its baselines, and drift or a cache warmed by the previous job
    falls on each side in turn (rule 2)."""
    groups: dict = {}
    for j in jobs:
        groups.setdefault(j.group if j.group is not None else id(j), []).append(j)
    out: list[Job] = []
    for members in groups.values():
        k = rnd % len(members)
        out += members[k:] + members[:k]
    return out


def _needs_more(job: Job, jobs: list[Job], series: dict[Hashable, Series]) -> bool:
    """A job runs again while one of its series — or one of its group's —
    is unstable; a failed job never runs again."""
    if any(series[k].error for k in job.keys):
        return False
    peers = [j for j in jobs if job.group is not None and j.group == job.group] or [job]
    return any(series[k].stop_reason is None and not series[k].error for j in peers for k in j.keys)

