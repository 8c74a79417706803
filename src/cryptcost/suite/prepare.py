"""What ``cryptcost run`` hands down, built once before anything is created or recorded
(:func:`prepare`): the suite or plan file loaded (or a guest's share), cut to what this host can
run, compiled (:mod:`cryptcost.suite.compiled`), its model target read, calibrated on earlier
runs, fitted to a time budget and estimated (:class:`Prepared`), with the guest's shares
beside it (:class:`GuestPlan`)."""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

from cryptcost import units
from cryptcost.engines import perf
from cryptcost.errors import UserError
from cryptcost.suite import budget, ceilings, timing
from cryptcost.suite.budget import Clock
from cryptcost.suite.compiled import CompiledPart, CompiledPlan, compile_plan, profiled
from cryptcost.suite.guest import GuestShare, from_json, share
from cryptcost.suite.here import for_this_host
from cryptcost.suite.resume import Resume, again_cells
from cryptcost.suite.timing import estimate
from cryptcost.workloads.plan import RunPlan, load, only_reports, read_text
from cryptcost.workloads.seeds import parse_only


@dataclass(frozen=True)
class Asked:
    """What the command line asks of a run. ``suite`` or ``plan_file``, or ``parts``: a file of
    a guest's share as :func:`cryptcost.suite.guest.to_json` writes it. ``profile``
    (``--profile``): every storage and network table profiled, and perf must run here; False:
    none; None: each table as its own ``profile`` says, profiled where it says nothing (where
    perf cannot run here, left out and said why). ``link`` ``peer:HOST`` (with ``peer``'s
    ssh_config, peer_sudo, peer_command) measures every network table across that peer instead
    of modelling a link; ``delay_ms`` is added to every network table's round trips. ``vm``: the
    guest runs what this kernel cannot, so a plan with nothing for this host is not refused.
    ``only`` (``--only R4``): the seeds suite's parts of those field reports. ``resume``: the
    parts that run holds whole are left out, here and in each guest share. ``until``: no part
    may end after it by its estimate. ``budget_scale``: the slowdown a guest's host planned its
    share at (with ``parts`` and ``time_budget``)."""

    suite: str | None = None
    plan_file: str | None = None
    parts: str | None = None
    only: str | None = None
    resume: Resume | None = None
    device_speed: str | None = None
    link: str | None = None
    peer: dict | None = None
    delay_ms: float | None = None
    profile: bool | None = None
    time_budget: str | None = None
    budget_scale: float | None = None
    until: str | None = None
    vm: bool = False


class Calibration:
    """What earlier runs of a plan (by its name) took against the model's estimate, here or in
    the guest: the whole run's factor and how many runs it comes from, and each part's own
    (:mod:`cryptcost.suite.budget`). This one has no earlier runs."""

    def factor(self, name: str, guest: bool = False) -> tuple[float, int]:
        return 1.0, 0

    def part_factors(self, name: str, guest: bool = False) -> dict[str, float]:
        return {}


@dataclass(frozen=True)
class GuestPlan:
    """One guest boot of a run --vm: its share, its cipher ceilings' seconds by the model, what
    earlier guest runs of it took against theirs (factor, how many runs), and with
    --time-budget its part of the budget in seconds, its boot included."""

    share: GuestShare
    ceilings: float = 0.0                 # its cipher ceilings' seconds, the model's
    factor: tuple[float, int] = (1.0, 0)
    budget_s: float | None = None
    ceilings_s: float = 0.0               # its cipher ceilings' seconds as planned (× slowdown)

    @property
    def seconds(self) -> float:
        """The model's estimate of the share at this host's speed, its ceilings included."""
        return _there(self.share.plan) + self.ceilings

    @property
    def scale(self) -> float:
        """What the model's estimate is multiplied by for the time it takes (TCG), for a part
        no earlier guest run timed (each part carries its own ``scale``)."""
        return budget.guest_scale(self.factor)

    @property
    def planned(self) -> float:
        """The seconds it is planned to take: each part's estimate × its slowdown."""
        return budget.scaled(_there, self.ceilings_s)(self.share.plan)

    def until_cut(self, until: float, said: str, now: float) -> tuple[float, list[dict]]:
        """Under ``run --until`` (``until``, seconds since the epoch): the seconds its guest may
        plan parts in after its boot, and, when that cannot hold even its shortest part, the
        share left out whole (one skipped entry a part, as a time budget's)."""
        plan = self.share.plan
        left = until - now - budget.GUEST_BOOT_SECONDS
        shortest = min(_there(plan.one(p)) * (p.scale or self.scale) for p in plan.parts)
        if left >= shortest:
            return left, []
        why = (f"left out at run time: the time left before --until {said} after a guest's boot "
               f"({units.duration(max(0.0, left))}) could not hold its shortest part's estimate "
               f"({units.duration(shortest)})")
        return left, [budget.left_out_whole(p, why, guest_share=plan.name) for p in plan.parts]


def _there(plan: CompiledPlan) -> float:
    """The model's estimate of a guest's share, at this host's speed."""
    return estimate(plan, here=False)


@dataclass(frozen=True)
class Prepared:
    """A run's plan, built and validated once, and what was learnt building it."""

    plan: CompiledPlan                    # for this host, fitted to the budget
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
    notes: tuple[str, ...] = ()           # what the run is told before it begins (compile_plan)

    def from_now(self) -> Clock:
        """The run's clock from now: with a budget, no series takes more than its minimum
        number of samples after :data:`budget.DEADLINE_SHARE` of this host's part of it, and no
        part begins that what is left of it cannot hold by its estimate (× ``scale``). With
        ``until``, no part begins that its estimate says would end after it; no series is
        thinned for it (what it leaves out, a later ``--resume`` measures whole)."""
        clock = Clock(scale=self.scale)
        now = time.monotonic()
        if self.budget_s:
            part = self.host_budget_s or self.budget_s
            clock = Clock(spent=now + part, spent_by="what was left of the --time-budget",
                          deadline=now + budget.DEADLINE_SHARE * part, scale=self.scale)
        if self.until is not None:
            by = now + self.until - time.time()
            if clock.spent is None or by < clock.spent:
                clock = replace(clock, spent=by,
                                spent_by=f"the time left before --until {self.until_said}")
        return clock

    def until_fits(self, now: float) -> tuple[list[str], list[str]]:
        """Under ``--until``: this host's parts that would begin, by their planned seconds from
        ``now`` (seconds since the epoch), and those left out, as :func:`run_plan` decides as
        it runs (a part that does not fit is left out, a later shorter one may begin)."""
        parts = [(p.label, estimate(self.plan.one(p)) * (p.scale or self.scale))
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


def prepare(asked: Asked, calibration: Calibration = Calibration()) -> Prepared:
    """Everything bad input can break, before anything is created or recorded: the plan
    loaded and cut to this host, compiled, the model's rate, the budget (see :class:`Asked`)."""
    plan, guests, resume, only = _loaded(asked)
    plan = _for_here(plan, asked, allow_empty=asked.vm and bool(guests) or resume is not None)
    if resume is not None and not plan.parts and not (asked.vm and guests):
        raise UserError(f"run {resume.run_id} holds every part of this plan whole: nothing to "
                        "resume" + (" here; its guest's share is left (add --vm)" if guests
                                    else ""))
    model = _model(plan, asked)
    compiled, notes = compile_plan(plan, fit=True)
    shares = [GuestShare(g.kernel, compile_plan(g.plan)[0]) for g in guests]
    if resume is not None:
        resume = resume.forget(frozenset().union(*(again_cells(resume, p)
                                                   for p in compiled.parts)))
    budget_s = units.parse_duration(asked.time_budget, "--time-budget") \
        if asked.time_budget else None
    factor = calibration.factor(compiled.name)
    # a guest's share is told the slowdown its host planned it at (its own store has no runs),
    # and each of its parts carries its own
    scale = asked.budget_scale or factor[0]
    # the cipher ceilings run first whatever a budget cuts: their time is planned whole
    light = ceilings.light_host()
    ceil = timing.ceilings(compiled, light, have=resume.have if resume else frozenset())
    factors = {} if asked.budget_scale else calibration.part_factors(compiled.name)
    if not asked.budget_scale:
        if asked.until is not None and not factor[1]:
            compiled = _at_most(compiled, factors)
        compiled = budget.with_scales(compiled, factors, scale)
    here = budget.scaled(estimate, ceil * factors.get(ceilings.LABEL, scale))
    compiled, guest, host_budget_s = _fitted(compiled, _guest_plans(shares, calibration, light),
                                             asked, budget_s, here)
    return Prepared(compiled, model, estimate(compiled) + ceil, factor, budget_s, tuple(guest),
                    asked.vm, most_seconds=estimate(compiled, most=True) + ceil,
                    host_budget_s=host_budget_s, scale=scale, planned_s=here(compiled),
                    only=only, resume=resume,
                    until=units.parse_until(asked.until) if asked.until is not None else None,
                    until_said=asked.until or "",
                    timed=tuple(p.label for p in compiled.parts if p.label in factors),
                    notes=tuple(notes))


def _loaded(asked: Asked) -> tuple[RunPlan, list[GuestShare], Resume | None, tuple[str, ...]]:
    """The plan as loaded, cut to ``--only`` and to what ``--resume``'s run lacks; the guest's
    shares of it (each with ``--delay``); the run to resume, and the reports asked."""
    plan = (load(asked.suite, asked.plan_file) if asked.parts is None
            else from_json(read_text(asked.parts), asked.parts))
    only = parse_only(asked.only) if asked.only is not None else ()
    resume = asked.resume
    if resume is not None:
        resume.refuse_another_plan(plan)        # the whole plan: a sitting's --only may differ
    if only:
        plan = only_reports(plan, only)
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
    if asked.delay_ms is not None:
        guests = [GuestShare(g.kernel, _delayed(g.plan, asked.delay_ms)) for g in guests]
    return plan, guests, resume, only


def _for_here(plan: RunPlan, asked: Asked, allow_empty: bool) -> RunPlan:
    """The loaded plan as this host runs it: profiled as asked (where a warm-up round can be, by
    default), cut to what it can run, across ``--link peer:HOST`` and with ``--delay``."""
    if asked.profile:
        perf.require()
    plan = for_this_host(profiled(plan, asked.profile), allow_empty=allow_empty)
    if asked.link and asked.link.startswith("peer:"):
        # a peer, not a link to model: every network table measures across it
        plan = replace(plan, parts=[replace(part, network={**part.network, "link": asked.link,
                                                           **(asked.peer or {})})
                                    if part.network is not None else part
                                    for part in plan.parts])
    if asked.delay_ms is not None:
        plan = _delayed(plan, asked.delay_ms)
    return plan


def _model(plan: RunPlan, asked: Asked) -> dict:
    """The device or link the cost model predicts for: ``--device-speed`` or ``--link``'s (not
    a peer's) over the plan's [model]; its rate validated."""
    model = dict(plan.model)
    if asked.device_speed:
        model = {"device_speed": asked.device_speed}
    if asked.link and not asked.link.startswith("peer:"):
        model = {"link": asked.link}
    units.target_of(model)
    return model


def _guest_plans(shares: list[GuestShare], calibration: Calibration,
                 light: dict) -> list[GuestPlan]:
    """Each guest share planned, the shortest first, and in each the shortest part first (a
    guest killed at its timeout loses the least), at what earlier guest runs of it took."""
    out = []
    for g in sorted((_shortest_first(g) for g in shares), key=lambda g: _there(g.plan)):
        factor = calibration.factor(g.plan.name, guest=True)
        factors = calibration.part_factors(g.plan.name, guest=True)
        scale = budget.guest_scale(factor)
        ceil = timing.ceilings(g.plan, light, here=False)
        out.append(GuestPlan(replace(g, plan=budget.with_scales(g.plan, factors, scale)),
                             ceil, factor,
                             ceilings_s=ceil * factors.get(ceilings.LABEL, scale)))
    return out


def _fitted(plan: CompiledPlan, guest: list[GuestPlan], asked: Asked, budget_s: float | None,
            here) -> tuple[CompiledPlan, list[GuestPlan], float | None]:
    """With ``--time-budget``: this host's plan and the guests' shares fitted to it (shared
    between them with ``--vm``), and this host's part of it."""
    if budget_s and asked.vm and guest:
        (plan, host_budget_s), fitted = budget.split(
            plan, [gp.share.plan for gp in guest], budget_s, here,
            [budget.scaled(_there, gp.ceilings_s) for gp in guest])
        return plan, [replace(gp, share=replace(gp.share, plan=p), budget_s=given)
                      for gp, (p, given) in zip(guest, fitted)], host_budget_s
    if budget_s and not asked.budget_scale:
        # (a guest's share, told its host's slowdown, was fitted there: here it is only held
        # to the budget as it runs, lest an estimate that differs by a second cut a part)
        plan, _ = budget.fit(plan, budget_s, here)
    return plan, guest, budget_s


def _at_most(plan: CompiledPlan, factors: dict[str, float]) -> CompiledPlan:
    """Under ``--until`` with no run of the suite here to calibrate from: each part no run has
    timed (nor its host, for a guest's) planned as if every series took its maximum number of
    samples, lest it begin and end long after (R3's block sizes once took 3.4 times the
    model's minimum)."""
    def most(part: CompiledPart) -> float:
        low = estimate(plan.one(part))
        return estimate(plan.one(part), most=True) / low if low else 1.0
    return replace(plan, parts=[p if p.label in factors or p.scale else replace(p, scale=most(p))
                                for p in plan.parts])


def _shortest_first(g: GuestShare) -> GuestShare:
    """``g`` with its parts in the order of their estimates, shortest first (a part's results
    are whole or absent, and a guest's timeout cuts the last)."""
    return replace(g, plan=replace(g.plan, parts=sorted(g.plan.parts,
                                                        key=lambda p: _there(g.plan.one(p)))))


def _delayed(plan: RunPlan, delay_ms: float) -> RunPlan:
    """``plan`` with ``delay_ms`` more on every network table's round trips."""
    return replace(plan, parts=[replace(part, network={**part.network, "delay_ms": delay_ms})
                                if part.network is not None else part for part in plan.parts])
