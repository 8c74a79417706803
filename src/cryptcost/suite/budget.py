"""How long a run will take, and how to fit it into a time budget.

The model (``suite.timing.estimate``) counts each series at its minimum number of
samples, so alone it is a lower bound. Earlier complete runs of the same
suite on this host say how far off it was: their measured wall time over
their estimate is the factor the next estimate is multiplied by.

Each run also records each part's estimate beside its time, and a part
earlier runs timed is planned at its own factor (:func:`part_factors`:
``CompiledPart.scale``); the cipher ceilings, measured first whatever is cut, are
planned whole.

``run --time-budget`` then plans the run so that it fits: it takes out
extra samples first; then it thins every part (block sizes, threads,
workloads, CPU counts and last the acceleration-off copies, beyond each
list's first, one dimension at a time across the parts), so each part
keeps some cells; then whole later parts, then the third sample, and last
whole kinds (network, then storage), re-estimating after each cut.
Everything left out goes to the run's "not measured" list with the
reason, so the report says so. At run time, after 85 % of the budget, no
series takes more samples than its minimum, and no part begins that what
is left of the budget cannot hold by its estimate (each is listed as left
out at run time).

With ``--vm`` the budget covers the guest's shares too (:func:`split`):
each share's estimate is scaled by what earlier guest runs of its plan took
against theirs (TCG runs the guest's CPU in software), or by
:data:`UNCALIBRATED_GUEST` without any, plus a boot; the budget is shared
in proportion (none below its smallest plan), each share is fitted to its
own part of it, and what the cut shares leave unused is offered to each in
turn.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, replace
from typing import Callable

from cryptcost import units
from cryptcost.errors import UserError
from cryptcost.suite.compiled import CompiledPart, CompiledPlan
from cryptcost.workloads import network as netwl
from cryptcost.workloads import storage as wl
from cryptcost.workloads.plan import THINNED

HISTORY = 5          # the last N comparable runs calibrate the estimate
DEADLINE_SHARE = 0.85  # after this share of the budget, no series takes more than its minimum
# A guest's share with no earlier guest run of its plan to calibrate from is planned at this many
# times the model's estimate at this host's speed (TCG: the guest's CPU in software; the seeds
# suite's guest parts took 5-6 times theirs on the development host, docs/plans.md), and killed
# after GUEST_TIMEOUT times it
UNCALIBRATED_GUEST = 6.0
GUEST_TIMEOUT = 10.0
GUEST_BOOT_SECONDS = 120.0  # a guest's boot, its image and its results' import, under TCG


@dataclass(frozen=True)
class Clock:
    """A run's time, as it runs: after ``deadline`` (a ``time.monotonic()``) no series takes
    more than its minimum number of samples; no part begins that the time left before ``spent``
    cannot hold by its estimate × its ``scale`` (else this one); ``spent_by`` says whose time
    that is. Without either, a run takes what it takes."""

    spent: float | None = None
    spent_by: str = "what was left of the --time-budget"
    deadline: float | None = None
    scale: float = 1.0


def calibration(runs, suite: str, hostname: str | None) -> tuple[float, int]:
    """(factor, how many runs it comes from): median of wall / estimate over the
    last complete runs of ``suite`` on this host; (1.0, 0) without any. A run its budget
    shortened is left out: one that reached its deadline, or left anything out to fit; so is a
    resumed one (its sittings measured different cuts of the plan). Other
    suites' runs are no guide: a guest ran a small test plan at twice its estimate, and the
    seeds suite's parts at five to six times theirs."""
    ratios = []
    for run in sorted(runs, key=lambda r: r.id, reverse=True):
        extra = run.extra
        if (run.command == "run" and run.status == "complete" and extra.get("suite") == suite
                and extra.get("estimate_seconds") and extra.get("wall_seconds")
                and run.host.get("hostname") == hostname and not _shortened(extra)
                and not extra.get("sittings")):
            ratios.append(extra["wall_seconds"] / extra["estimate_seconds"])
        if len(ratios) == HISTORY:
            break
    return (statistics.median(ratios), len(ratios)) if ratios else (1.0, 0)


def part_factors(runs, suite: str, hostname: str | None) -> dict[str, float]:
    """Per part label, the median of measured over estimated seconds in the last runs of
    ``suite`` here that timed it (``part_seconds`` beside ``part_estimates``, a part's own
    time: under TCG one part took 1.2 times its estimate and another 7 times in one guest
    share, so one factor a share plans some parts long and others short)."""
    seen: dict[str, list[float]] = {}
    for run in sorted(runs, key=lambda r: r.id, reverse=True):
        extra = run.extra
        if run.command != "run" or extra.get("suite") != suite \
                or run.host.get("hostname") != hostname:
            continue
        took, est = extra.get("part_seconds") or {}, extra.get("part_estimates") or {}
        for label, seconds in took.items():
            if est.get(label) and len(seen.setdefault(label, [])) < HISTORY:
                seen[label].append(seconds / est[label])
    return {label: statistics.median(xs) for label, xs in seen.items() if xs}


def with_scales(plan: CompiledPlan, factors: dict[str, float], default: float) -> CompiledPlan:
    """``plan`` with each part's slowdown: its own from ``factors``, else the one it was given
    (a guest's share, by its host), else ``default``."""
    return replace(plan, parts=[replace(p, scale=factors.get(p.label, p.scale or default))
                                for p in plan.parts])


def scaled(estimate: Callable[[CompiledPlan], float], fixed: float = 0.0
           ) -> Callable[[CompiledPlan], float]:
    """An estimate of a plan as long as it will take: each part's by its ``scale``, plus
    ``fixed`` seconds (the cipher ceilings, which any cut of the plan still measures first)."""
    return lambda plan: fixed + sum(estimate(plan.one(p)) * (p.scale or 1.0)
                                    for p in plan.parts)


def _shortened(extra: dict) -> bool:
    """Whether a run's budget made it shorter than its plan: it ran past the deadline (after
    which no series takes more than its minimum), or something was left out to fit (a time
    budget, or ``--until``)."""
    budget = extra.get("time_budget")
    return (bool(budget) and extra["wall_seconds"] >= DEADLINE_SHARE * budget) \
        or any(s.get("budget") for s in extra.get("skipped") or [])


def guest_scale(factor: tuple[float, int]) -> float:
    """What a guest share's model estimate is multiplied by: earlier guest runs' factor, or
    :data:`UNCALIBRATED_GUEST` without any."""
    scale, runs = factor
    return scale if runs else UNCALIBRATED_GUEST


Cut = tuple[Callable[[CompiledPlan], CompiledPlan], dict]


def _samples(least: int | None, most: int | None) -> Callable[[CompiledPlan], CompiledPlan]:
    """Every series of the plan at most at ``most`` samples (None: at its minimum), and at
    least at ``least`` (None: as it was); with ``least``, a storage table's own number of samples
    (``storage.samples``) gives way to it too."""
    def policy(pol):
        low = pol.min_samples if least is None else least
        return replace(pol, min_samples=low, max_samples=low if most is None else most)

    def storage(x: CompiledPart) -> tuple:
        return x.storage if least is None else tuple(replace(sp, samples=None) for sp in x.storage)
    return lambda p: replace(p, policy=policy(p.policy),
                             parts=[replace(x, policy=policy(x.policy), storage=storage(x))
                                    for x in p.parts])


def _drop_part(label: str) -> Callable[[CompiledPlan], CompiledPlan]:
    return lambda p: replace(p, parts=[x for x in p.parts if x.label != label] or p.parts)


def _values(part: CompiledPart, kind: str, key: str) -> list:
    """The values a part's ``kind`` table lists for ``key`` (THINNED's names)."""
    if kind == "ciphers":
        return list(getattr(part.ciphers, key)) if part.ciphers is not None else []
    plans = getattr(part, kind)
    if key == "cpus":
        return [p.cpus for p in plans] if plans and plans[0].cpus is not None else []
    return list(getattr(plans[0], key)) if plans else []


def _said(key: str, value) -> str:
    return ("on" if value else "off") if key == "accel" else str(value)


def _thinned(part: CompiledPart, kind: str, key: str, value) -> CompiledPart:
    """``part`` without ``value`` in its ``kind`` table's ``key``."""
    def without(plan):
        return replace(plan, **{key: tuple(v for v in getattr(plan, key) if v != value)})
    if kind == "ciphers":
        return replace(part, ciphers=without(part.ciphers))
    plans = getattr(part, kind)
    return replace(part, **{kind: tuple(p for p in plans if p.cpus != value) if key == "cpus"
                            else tuple(without(p) for p in plans)})


def _drop_value(label: str, kind: str, key: str, value) -> Callable[[CompiledPlan], CompiledPlan]:
    def cut(p: CompiledPlan) -> CompiledPlan:
        return replace(p, parts=[_thinned(part, kind, key, value)
                                 if part.label == label and value in (vs := _values(part, kind,
                                                                                   key))
                                 and len(vs) > 1 else part for part in p.parts])
    return cut


def _drop_kind(label: str, kind: str) -> Callable[[CompiledPlan], CompiledPlan]:
    def cut(p: CompiledPlan) -> CompiledPlan:
        parts = [replace(x, **{kind: ()})
                 if x.label == label and not replace(x, **{kind: ()}).empty()
                 else x for x in p.parts]
        return replace(p, parts=parts)
    return cut


def left_out_whole(part: CompiledPart, why: str, **more) -> dict:
    """The record's ``skipped`` entry of a part a time budget (or ``--until``) left out whole
    as the run went: the reason, and what the part measures (:func:`measures`)."""
    return {"part": part.label, "stack": "the whole part", "budget": why, "reason": why,
            **more, **measures(part)}


def measures(part: CompiledPart) -> dict:
    """What a part's cells are, for a report to tell which of its rows a part's cut took:
    whether it has a cipher table, its cells' workloads, and the stacks it names (a guest's
    share of a report's part measures only the stacks this host cannot), and its storage
    cells' block sizes."""
    ops = [op for sp in part.storage
           for step in wl.steps(sp.workloads, sp.sized(), False) for op in step.ops]
    names = {op.workload for op in ops}
    names |= {w for np_ in part.network for w in netwl.expand(np_.workloads)}
    stacks = {str(s) for plans in (part.storage, part.network) if plans
              for s in plans[0].stacks}
    return {"ciphers": part.ciphers is not None, "workloads": sorted(names),
            "stacks": sorted(stacks), "block_bytes": sorted({op.block_bytes for op in ops})}


def _cuts(plan: CompiledPlan) -> list[Cut]:
    """Every reduction, gentlest first: samples beyond the minimum; then every part thinned,
    one dimension at a time across all parts (the latest part first; ``THINNED``'s order:
    block sizes, threads, workloads, dbench's client counts, CPU counts and last the
    acceleration-off copies, each beyond its list's first; what a part keeps, such as R5's
    directions, last), so that each part keeps some of its cells (a suite's part is often one
    report's table, and a thin table says more than none); then the later parts whole; only then
    two samples per series (a 95 % interval from two samples is about ten times wider than
    from three: fewer cells rather than noisier ones); then the first part's whole kinds."""
    pol = plan.policy
    cuts: list[Cut] = []
    if any(p.policy.max_samples > p.policy.min_samples for p in plan.parts):
        cuts.append((_samples(None, None),
                     {"part": plan.name, "what": "samples beyond the minimum",
                      "detail": f"each series stops at {pol.min_samples} samples, "
                                "stable or not"}))

    def thinned(kept: bool) -> list[Cut]:
        return [(_drop_value(part.label, kind, key, v),
                 {"part": part.label, "what": f"{kind} {key} {_said(key, v)}", "detail": ""})
                for dim in THINNED for kind, key in [dim.split(".")]
                for part in reversed(plan.parts)
                if (dim in part.keep) is kept
                for v in reversed(_values(part, kind, key)[1:])]
    cuts += thinned(False) + thinned(True)
    cuts += [(_drop_part(p.label), {"part": p.label, "what": "the whole part", "detail": "",
                                    **measures(p)})
             for p in reversed(plan.parts[1:])]
    first = plan.parts[0]
    if any(p.policy.min_samples > 2 or any((sp.samples or 0) > 2 for sp in p.storage)
           for p in plan.parts):
        cuts.append((_samples(2, 2),
                     {"part": plan.name, "what": "samples beyond two",
                      "detail": "each series has 2 samples"}))
    cuts += [(_drop_kind(first.label, kind),
              {"part": first.label, "what": f"every {kind} stack", "detail": ""})
             for kind in ("network", "storage") if getattr(first, kind)]
    return cuts


def _apply(plan: CompiledPlan, cuts: list[Cut]) -> CompiledPlan:
    for cut, _ in cuts:
        plan = cut(plan)
    return plan


def fit(plan: CompiledPlan, budget: float, estimate: Callable[[CompiledPlan], float],
        whose: str = "", of: float | None = None) -> tuple[CompiledPlan, float]:
    """The plan cut down until its estimate fits ``budget`` seconds, and that estimate.
    ``whose`` and ``of``: the plan is a share (``whose``, e.g. "the guest's") of a budget of
    ``of`` seconds, as what was left out says.

    Cuts are taken gentlest first until the plan fits; then each cut is given back if the
    plan still fits without it, the latest taken first (the last cut may have freed more time
    than needed, and a part left out whole may come back thinned). Refuses (exit 2) when even
    the smallest plan does not fit."""
    whole = estimate(plan)
    if whole <= budget:
        return plan, whole
    taken: list[Cut] = []
    seconds = whole
    for cut in _cuts(plan):
        taken.append(cut)
        seconds = estimate(_apply(plan, taken))
        if seconds <= budget:
            break
    else:
        given = (f"--time-budget {units.duration(budget)}" if of is None else
                 f"--time-budget {units.duration(of)} ({whose} share: {units.duration(budget)})")
        raise UserError(f"{given} is too short: even the smallest part of "
                        f"{'this plan' if of is None else whose + ' plan'} takes about "
                        f"{units.duration(seconds)} here")
    # what the plan fits without is given back, the latest taken (the most kept) first
    for cut in list(reversed(taken)):
        without = [c for c in taken if c is not cut]
        if estimate(_apply(plan, without)) <= budget:
            taken = without
    fitted = _apply(plan, taken)
    why = (f"left out to fit --time-budget {units.duration(budget)} (the whole plan: about "
           f"{units.duration(whole)})" if of is None else
           f"left out to fit {whose} {units.duration(budget)} of --time-budget "
           f"{units.duration(of)} ({whose} whole plan: about {units.duration(whole)})")
    cannot = [{**c, "budget": why,
               "reason": why + (f": {c['detail']}" if c["detail"] else "")} for _, c in taken]
    return replace(fitted, cannot_run=plan.cannot_run + tuple(cannot)), estimate(fitted)


def smallest(plan: CompiledPlan, estimate: Callable[[CompiledPlan], float]) -> float:
    """The estimate of ``plan`` with every cut :func:`fit` may take."""
    return estimate(_apply(plan, _cuts(plan)))


def _shares(budget: float, wholes: list[float], floors: list[float]) -> list[float]:
    """``budget`` shared in proportion to ``wholes``, but none below its floor (the smallest
    its plan can be cut to): a share whose part would be smaller gets its floor, and the rest
    is shared among the others, again in proportion. Where the floors are more than the
    budget, their proportional parts (the fit then refuses the one that does not hold)."""
    if sum(floors) > budget:
        return [budget * w / sum(wholes) for w in wholes]
    fixed: dict[int, float] = {}
    while True:
        rest = budget - sum(fixed.values())
        free = [i for i in range(len(wholes)) if i not in fixed]
        weight = sum(wholes[i] for i in free)
        given = [fixed[i] if i in fixed else rest * wholes[i] / weight
                 for i in range(len(wholes))]
        short = [i for i in free if given[i] < floors[i]]
        if not short:
            return given
        fixed.update({i: floors[i] for i in short})


def split(host: CompiledPlan | None, guests: list[CompiledPlan], budget: float,
          host_estimate: Callable[[CompiledPlan], float],
          guest_estimates: list[Callable[[CompiledPlan], float]]
          ) -> tuple[tuple[CompiledPlan, float] | None, list[tuple[CompiledPlan, float]]]:
    """``budget`` seconds shared between this host's plan (None: nothing runs here) and the
    guests' shares, in proportion to their whole estimates (each guest's with its boot,
    :data:`GUEST_BOOT_SECONDS`), also where they all fit (each then has room to run late), but
    none below what its smallest plan takes (:func:`_shares`); each is fitted to its own part
    (:func:`fit`), and what the cut ones leave unused is offered to each in turn, largest
    first, the parts together staying within the budget. Returns each plan, fitted, with its
    part of the budget in seconds (a guest's with its boot): what no part may begin after. A
    share even its smallest plan does not fit in is refused (exit 2)."""
    items = ([(host, host_estimate, 0.0, "this host's")] if host is not None else []) + \
        [(g, est, GUEST_BOOT_SECONDS, "the guest's") for g, est in zip(guests, guest_estimates)]
    wholes = [est(p) + boot for p, est, boot, _ in items]
    floors = [min(whole, smallest(p, est) + boot + 1e-6)
              for (p, est, boot, _), whole in zip(items, wholes)]
    given = _shares(budget, wholes, floors)

    def fitted(i: int, seconds: float) -> tuple[CompiledPlan, float]:
        plan, est, boot, whose = items[i]
        if wholes[i] <= seconds:
            return plan, wholes[i]
        if seconds <= boot:
            raise UserError(f"--time-budget {units.duration(budget)} is too short: {whose} "
                            f"share ({units.duration(seconds)}) does not cover its boot "
                            f"(about {units.duration(boot)})")
        got, used = fit(plan, seconds - boot, est,
                        *((whose, budget) if len(items) > 1 else ()))
        return got, used + boot
    done = [fitted(i, g) for i, g in enumerate(given)]
    # a cut share rarely uses all of its part (a part goes whole): what is left over goes to the
    # cut shares in turn, the largest first, each taking what it can use of it
    slack = budget - sum(used for _, used in done)
    for i in sorted(range(len(items)), key=lambda i: -wholes[i]):
        if slack <= 0 or done[i][1] >= wholes[i]:
            continue
        more = fitted(i, done[i][1] + slack)
        if more[1] > done[i][1]:
            slack -= more[1] - done[i][1]
            done[i] = more
            given[i] = max(given[i], more[1])
    # what a share handed on is no longer its own: the parts together stay within the budget
    excess = sum(given) - budget
    for i in sorted(range(len(items)), key=lambda i: done[i][1] - given[i]):
        take = min(max(excess, 0.0), given[i] - done[i][1])
        if take > 0:
            given[i] -= take
            excess -= take
    out = [(p, g) for (p, _), g in zip(done, given)]
    return (out.pop(0) if host is not None else None), out
