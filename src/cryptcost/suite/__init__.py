"""Preparing and running a :class:`~cryptcost.workloads.plan.RunPlan`.

:func:`prepare` builds what ``cryptcost run`` hands down, once: the suite
or plan file loaded, cut to what this host can run, validated, its model
target read, fitted to a time budget and estimated (:class:`Prepared`).
:func:`run_plan` then runs its parts in order (cipher tables, storage
comparisons once per CPU count, network comparisons), all into one run of
the store.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Callable

from cryptcost import stats, units
from cryptcost.engines import perf
from cryptcost.errors import CryptcostError, UserError
from cryptcost.lifecycle.resources import Resources
from cryptcost.model import Cell, Result
from cryptcost.runner.ciphers import run_ciphers
from cryptcost.runner.ciphers.executor import Executor, RealExecutor
from cryptcost.runner.core.sink import Sink
from cryptcost.runner.network import run_network
from cryptcost.runner.storage import run_storage
from cryptcost.suite import budget
from cryptcost.suite.guest import GuestShare, from_json, share
from cryptcost.suite.resume import Resume, again_cells
from cryptcost.suite.tables import (cipher_plan, network_plans, part_plan, policy_of,
                                    storage_plans, validate_plan)
from cryptcost.suite import ceilings, tables, timing
from cryptcost.suite.ceilings import ceiling_cells, light_host
from cryptcost.suite.timing import estimate
from cryptcost.workloads.plan import Part, RunPlan, load, only_reports, read_text
from cryptcost.workloads.seeds import parse_only
from cryptcost.suite.here import for_this_host


@dataclass(frozen=True)
class GuestPlan:
    """One guest boot of a run --vm: its share, the model's estimate of it at this host's speed,
    what earlier guest runs of it took against theirs (factor, how many runs), and with
    --time-budget its part of the budget in seconds, its boot included."""

    share: GuestShare
    seconds: float                        # the model's, at this host's speed, ceilings included
    factor: tuple[float, int] = (1.0, 0)
    budget_s: float | None = None
    ceilings_s: float = 0.0               # its cipher ceilings' seconds as planned (× slowdown)

    @property
    def scale(self) -> float:
        """What the model's estimate is multiplied by for the time it takes (TCG), for a part
        no earlier guest run timed (each part carries its own ``scale``)."""
        return budget.guest_scale(self.factor)

    @property
    def planned(self) -> float:
        """The seconds it is planned to take: each part's estimate × its slowdown."""
        return budget.scaled(lambda p: estimate(p, here=False), self.ceilings_s)(self.share.plan)

    def until_cut(self, until: float, said: str, now: float) -> tuple[float, list[dict]]:
        """Under ``run --until`` (``until``, seconds since the epoch): the seconds its guest may
        plan parts in after its boot, and, when that cannot hold even its shortest part, the
        share left out whole (one skipped entry a part, as a time budget's)."""
        left = until - now - budget.GUEST_BOOT_SECONDS
        shortest = min(estimate(replace(self.share.plan, parts=[p]), here=False)
                       * (p.scale or self.scale) for p in self.share.plan.parts)
        if left >= shortest:
            return left, []
        why = (f"left out at run time: the time left before --until {said} after a guest's boot "
               f"({units.duration(max(0.0, left))}) could not hold its shortest part's estimate "
               f"({units.duration(shortest)})")
        return left, [budget.left_out_whole(p, why, guest_share=self.share.plan.name)
                      for p in self.share.plan.parts]


@dataclass(frozen=True)
class Prepared:
    """A run's plan, built and validated once, and what was learnt building it."""

    plan: RunPlan                         # for this host, fitted to the budget
    model: dict                           # the device or link the cost model predicts for
    seconds: float                        # the model's estimate of the plan
    factor: tuple[float, int]             # earlier runs here: measured/estimated, how many
    budget_s: float | None = None         # --time-budget, in seconds
    # what cryptcost vm's guest can run of what this host cannot, shortest first; run with --vm
    guest: tuple[GuestPlan, ...] = ()
    vm: bool = False
    most_seconds: float = 0.0             # the model's, if every series takes its maximum
    host_budget_s: float | None = None    # this host's part of the budget (all without guests)
    scale: float = 1.0                    # what the model's estimates are multiplied by here
    planned_s: float = 0.0                # the plan's seconds: each part's × its own slowdown
    only: tuple[str, ...] = ()            # run --only: the field reports whose parts it runs
    resume: Resume | None = None          # run --resume: what the run holds already
    until: float | None = None            # run --until: no part begins that would end later
    until_said: str = ""                  # as given
    timed: tuple[str, ...] = ()           # the parts earlier runs here timed (their own slowdown)
    notes: tuple[str, ...] = ()           # what the run is told before it begins (validate_plan)

    def from_now(self) -> RunPlan:
        """The plan as it runs from now: with a budget, no series takes more than its minimum
        number of samples after :data:`budget.DEADLINE_SHARE` of this host's part of it, and no
        part begins that what is left of it cannot hold by its estimate (× ``scale``). With
        ``until``, no part begins that its estimate says would end after it; no series is
        thinned for it (what it leaves out, a later ``--resume`` measures whole)."""
        if not self.budget_s and self.until is None:
            return self.plan
        now = time.monotonic()
        policy = {**self.plan.policy, "scale": self.scale}
        if self.budget_s:
            part = self.host_budget_s or self.budget_s
            policy.update(deadline=now + budget.DEADLINE_SHARE * part, spent=now + part,
                          spent_by="what was left of the --time-budget")
        if self.until is not None:
            by = now + self.until - time.time()
            if by < policy.get("spent", by + 1):
                policy.update(spent=by,
                              spent_by=f"the time left before --until {self.until_said}")
        return replace(self.plan, policy=policy)

    def until_fits(self, now: float) -> tuple[list[str], list[str]]:
        """Under ``--until``: this host's parts that would begin, by their planned seconds from
        ``now`` (seconds since the epoch), and those left out, as :func:`run_plan` decides as
        it runs (a part that does not fit is left out, a later shorter one may begin)."""
        parts = [(p.label, estimate(replace(self.plan, parts=[p])) * (p.scale or self.scale))
                 for p in self.plan.parts]
        at = now + self.planned_s - sum(s for _, s in parts)      # the cipher ceilings first
        begin, left_out = [], []
        for label, seconds in parts:
            if self.until is not None and at + seconds > self.until:
                left_out.append(label)
            else:
                begin.append(label)
                at += seconds
        return begin, left_out

    def until_at_said(self) -> str | None:
        """``until`` as the run records it (local time, with its offset), or None."""
        if self.until is None:
            return None
        return time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(self.until))


def prepare(suite: str | None, plan_file: str | None, *, device_speed: str | None = None,
            link: str | None = None, peer: dict | None = None, delay_ms: float | None = None,
            time_budget: str | None = None, budget_scale: float | None = None,
            profile: bool | None = None, vm: bool = False, parts: str | None = None,
            only: str | None = None, resume: Resume | None = None, until: str | None = None,
            calibrate: Callable[..., tuple[float, int]] = lambda name, guest=False: (1.0, 0),
            part_factors: Callable[..., dict[str, float]] = lambda name, guest=False: {}
            ) -> Prepared:
    """Everything bad input can break, before anything is created or recorded: the plan
    loaded and cut to this host, the model's rate, the plan's tables, the budget. ``profile``
    (``run --profile``): every storage and network table gets its profiled round, and perf
    must be able to run here; False (``--no-profile``): none does; None: each table as its own
    ``profile`` says, profiled where it says nothing (where perf cannot run here, left out and
    said why). ``link`` ``peer:HOST`` (with ``peer``'s ssh_config, peer_sudo and
    peer_command) measures every network table across that peer instead of modelling a link;
    ``delay_ms`` is added to every network table's round trips (its link must be netns).
    ``vm``: what this host's kernel cannot run and Debian's stock kernel can is run in
    cryptcost vm's guest too (:mod:`cryptcost.suite.guest`), so a plan with nothing for this
    host is not refused when the guest has a share. ``parts``: a file of a guest's share as
    :func:`cryptcost.suite.guest.to_json` writes it, instead of a suite or plan file. ``only``
    (``run --only R4``): the seeds suite's parts of those field reports alone. ``resume``
    (``run --resume RUN``): the parts that run holds whole are left out, here and in each guest
    share (:mod:`cryptcost.suite.resume`). ``until`` (``run --until 05:30``): the time after
    which no part may end by its estimate (:meth:`Prepared.from_now`)."""
    plan = load(suite, plan_file) if parts is None else from_json(read_text(parts), parts)
    asked = parse_only(only) if only is not None else ()
    if resume is not None:
        resume.refuse_another_plan(plan)        # the whole plan: a sitting's --only may differ
    if asked:
        plan = only_reports(plan, asked)
    guests = share(plan)
    if resume is not None:
        plan = resume.drop(plan)
        guests = [GuestShare(g.kernel, replace(g.plan, parts=left))
                  for g in guests if (left := [p for p in g.plan.parts
                                               if p.label not in resume.guest_done(g.plan.name)])]
        planned = {p.label for p in plan.parts} | {p.label for g in guests for p in g.plan.parts}
        if resume.again - planned:
            raise UserError(f"--again names parts this sitting leaves out (--only): "
                            f"{', '.join(sorted(resume.again - planned))}")
        resume = resume.forget(frozenset().union(*(again_cells(resume, p) for p in plan.parts)))
    if delay_ms is not None:
        guests = [GuestShare(g.kernel, _delayed(g.plan, delay_ms)) for g in guests]
    if profile:
        perf.require()
    plan = tables.profiled(plan, profile)       # where a warm-up round can be, by default
    plan = for_this_host(plan, allow_empty=vm and bool(guests) or resume is not None)
    if resume is not None and not plan.parts and not (vm and guests):
        raise UserError(f"run {resume.run_id} holds every part of this plan whole: nothing to "
                        "resume" + (" here; its guest's share is left (add --vm)" if guests
                                    else ""))
    model = dict(plan.model)
    if device_speed:
        model = {"device_speed": device_speed}
    if link and link.startswith("peer:"):
        # a peer, not a link to model: every network table measures across it
        plan = replace(plan, parts=[replace(part, network={**part.network, "link": link,
                                                           **(peer or {})})
                                    if part.network else part for part in plan.parts])
    elif link:
        model = {"link": link}
    if delay_ms is not None:
        plan = _delayed(plan, delay_ms)
    units.target_of(model)                      # validates the rate
    notes = validate_plan(plan)
    budget_s = units.parse_duration(time_budget, "--time-budget") if time_budget else None
    until_at = units.parse_until(until) if until is not None else None
    factor = calibrate(plan.name)
    # a guest's share is told the slowdown its host planned it at (its own store has no runs),
    # and each of its parts carries its own
    scale = budget_scale or factor[0]
    # the cipher ceilings run first whatever a budget cuts: their time is planned whole
    light = light_host()
    have = resume.have if resume is not None else frozenset()
    ceil = timing.ceilings(plan, light, have=have)
    factors: dict[str, float] = {}
    if not budget_scale:
        factors = part_factors(plan.name)
        if until is not None and not factor[1]:
            plan = _at_most(plan, factors)
        plan = budget.with_scales(plan, factors, scale)
        ceil_planned = ceil * factors.get(ceilings.LABEL, scale)
    else:
        ceil_planned = ceil * scale
    # the shortest share first, and in each the shortest part first: a guest killed at its
    # timeout loses the least
    shares = sorted(((_shortest_first(g), estimate(g.plan, here=False)) for g in guests),
                    key=lambda x: x[1])
    guest, guest_ceilings = [], []
    for g, seconds in shares:
        factor_g = calibrate(g.plan.name, guest=True)
        factors_g = part_factors(g.plan.name, guest=True)
        scale_g = budget.guest_scale(factor_g)
        ceil_g = timing.ceilings(g.plan, light, here=False)
        guest_ceilings.append(ceil_g)
        guest.append(GuestPlan(replace(g, plan=budget.with_scales(g.plan, factors_g, scale_g)),
                               seconds + ceil_g, factor_g,
                               ceilings_s=ceil_g * factors_g.get(ceilings.LABEL, scale_g)))
    host_budget_s = budget_s
    here = budget.scaled(estimate, ceil_planned)
    if budget_s and vm and guest:
        (plan, host_budget_s), fitted_guests = budget.split(
            plan, [gp.share.plan for gp in guest], budget_s, here,
            [budget.scaled(lambda p: estimate(p, here=False), gp.ceilings_s) for gp in guest])
        guest = [replace(gp, share=replace(gp.share, plan=p),
                         seconds=estimate(p, here=False) + ceil_g, budget_s=given)
                 for gp, (p, given), ceil_g in zip(guest, fitted_guests, guest_ceilings)]
    elif budget_s and not budget_scale:
        # (a guest's share, told its host's slowdown, was fitted there: here it is only held
        # to the budget as it runs, lest an estimate that differs by a second cut a part)
        plan, _ = budget.fit(plan, budget_s, here)
    return Prepared(plan, model, estimate(plan) + ceil, factor, budget_s, tuple(guest), vm,
                    most_seconds=estimate(plan, most=True) + ceil, host_budget_s=host_budget_s,
                    scale=scale, planned_s=here(plan),
                    only=asked, resume=resume, until=until_at, until_said=until or "",
                    timed=tuple(p.label for p in plan.parts if p.label in factors),
                    notes=tuple(notes))


def _at_most(plan: RunPlan, factors: dict[str, float]) -> RunPlan:
    """Under ``--until`` with no run of the suite here to calibrate from: each part no run has
    timed (nor its host, for a guest's) planned as if every series took its maximum number of
    samples, lest it begin and end long after (R3's block sizes once took 3.4 times the
    model's minimum)."""
    def most(part: Part) -> float:
        one = replace(plan, parts=[part])
        low = estimate(one)
        return estimate(one, most=True) / low if low else 1.0
    return replace(plan, parts=[p if p.label in factors or p.scale else replace(p, scale=most(p))
                                for p in plan.parts])


def _shortest_first(g: GuestShare) -> GuestShare:
    """``g`` with its parts in the order of their estimates, shortest first (a part's results
    are whole or absent, and a guest's timeout cuts the last)."""
    def part_s(part: Part) -> float:
        return estimate(replace(g.plan, parts=[part]), here=False)
    return replace(g, plan=replace(g.plan, parts=sorted(g.plan.parts, key=part_s)))


def _delayed(plan: RunPlan, delay_ms: float) -> RunPlan:
    """``plan`` with ``delay_ms`` more on every network table's round trips."""
    return replace(plan, parts=[replace(part, network={**part.network, "delay_ms": delay_ms})
                                if part.network else part for part in plan.parts])


@dataclass
class SuiteOutcome:
    results: list[Result] = field(default_factory=list)
    skipped: list[dict] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    # wall-clock seconds each part took (set-up, measuring and teardown), by its label
    part_seconds: dict[str, float] = field(default_factory=dict)
    # the model's estimate of each part, by its label: what its time is calibrated against
    part_estimates: dict[str, float] = field(default_factory=dict)

    def took(self, label: str, since: float) -> None:
        self.part_seconds[label] = round(self.part_seconds.get(label, 0.0)
                                         + time.monotonic() - since, 1)


def _comparisons(part: Part, policy: stats.Policy, sink: Sink, progress_factory):
    """(what, measure(res)) for each stack comparison of a part: storage once per CPU count, then
    network."""
    for sp in storage_plans(part.storage, part.label) if part.storage else []:
        what = f"{part.label}: storage" + (f" on {sp.cpus} CPU(s)" if sp.cpus else "")
        yield what, lambda res, sp=sp, what=what: run_storage(sp, policy, res=res, sink=sink,
                                                               progress=progress_factory(what))
    for np_ in network_plans(part.network, part.label) if part.network else []:
        what = f"{part.label}: network" + (f" on {np_.cpus} CPU(s)" if np_.cpus else "")
        yield what, lambda res, np_=np_, what=what: run_network(np_, policy, res=res, sink=sink,
                                                                 progress=progress_factory(what))


def run_plan(plan: RunPlan, *, sink: Sink, progress_factory, host: dict,
             executor: Executor | None = None, have: frozenset[Cell] = frozenset(),
             before_part: Callable[[str], None] = lambda label: None,
             on_part: Callable[[SuiteOutcome], None] = lambda outcome: None) -> SuiteOutcome:
    """Run every part; a part that fails is recorded and the next one runs; ``on_part`` is
    called with the outcome so far after each part (the run's record of its parts' times).
    With a budget (the policy's ``spent``, a ``time.monotonic()``), no part begins that the
    time left cannot hold by its estimate (× the part's ``scale``, else the policy's); a later,
    shorter one may.
    What the stacks need for their cipher ceilings is measured first (rule 8: before any part a
    budget or ``--until`` may leave out, as the plan's estimate counts them): with the first
    part's cipher table where it has one (one engine run for both: ``gocryptfs -speed``
    measures every Go cipher at once), else, or should that part be left out, in a table of
    just those cells. A cell in ``have`` (a resumed run holds it whole), or that an earlier
    table of this run measured, is not measured again. ``before_part`` is called with each
    part's label before it begins (a resumed run drops what it held of it)."""
    executor = executor or RealExecutor()
    policy = policy_of(plan)
    needed = tuple(c for c in ceiling_cells(plan, host) if c not in have)
    alone = Part(ceilings.LABEL, ciphers={"algorithms": sorted({c.algorithm for c in needed}),
                                          "sizes": [], "threads": [1]})
    carrier = plan.parts[0] if plan.parts and plan.parts[0].ciphers is not None else None
    if needed and carrier is None:
        plan = replace(plan, parts=[alone, *plan.parts])
    out = SuiteOutcome(skipped=[{"stack": c["what"], "reason": c["reason"],
                                 "install": c.get("install"), "part": c["part"],
                                 **{k: c[k] for k in ("budget", "ciphers", "workloads")
                                    if c.get(k) is not None}}
                                for c in plan.cannot_run])
    spent, scale = plan.policy.get("spent"), plan.policy.get("scale", 1.0)
    measured = set(have)                # a later table measures no cell an earlier one did
    queue = list(plan.parts)
    while queue:
        part = queue.pop(0)
        began = time.monotonic()
        ceiling = part.label == ceilings.LABEL           # runs first, whatever the budget
        model = (timing.ceilings(plan, host, executor, have=have) if ceiling
                 else estimate(part_plan(plan, part), executor))
        sampled = policy_of(part_plan(plan, part)) if part.policy else policy
        if model:
            out.part_estimates[part.label] = round(model, 1)
        need = model * (part.scale or scale) if spent is not None and not ceiling else 0.0
        if need and began + need > spent:
            left = max(0.0, spent - began)
            by = plan.policy.get("spent_by", "what was left of the --time-budget")
            why = (f"left out at run time: {by} "
                   f"({units.duration(left)}) could not hold its estimate "
                   f"({units.duration(need)})")
            out.skipped.append(budget.left_out_whole(part, why))
            if part is carrier and needed:
                queue.insert(0, alone)                   # its ceilings are measured all the same
            continue
        before_part(part.label)
        if part.ciphers is not None:
            cp = replace(cipher_plan(part.ciphers),
                         extra_cells=needed if ceiling or part is carrier else (),
                         measured=frozenset(measured))
            try:
                co = run_ciphers(cp, executor, sampled, sink=sink,
                                 progress=progress_factory(f"{part.label}: ciphers"),
                                 cpu_flags=host["cpu"]["flags"])
                measured |= {r.cell for r in co.results}
                out.results += co.results
                out.skipped += [{**s, "part": part.label} for s in co.skipped]
            except UserError as exc:
                out.skipped.append({"part": part.label, "stack": "ciphers", "reason": str(exc)})
        for what, measure in _comparisons(part, sampled, sink, progress_factory):
            try:
                with Resources() as res:
                    got = measure(res)
            except CryptcostError as exc:
                out.failed.append(f"{what}: {exc}")
                continue
            out.results += got.results
            out.skipped += [{**s, "part": part.label} for s in got.skipped]
            out.failed += got.failed
        out.took(part.label, began)
        on_part(out)
    return out
