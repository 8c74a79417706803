"""How long a run will take, and how to fit it into a time budget.

The model (``suite.estimate``) counts each series at its minimum number of
samples, so alone it is a lower bound. Earlier complete runs of the same
suite on this host say how far off it was: their measured wall time over
their estimate is the factor the next estimate is multiplied by.

``run --time-budget`` then plans the run so that it fits: it takes out
extra samples first, then whole parts, then the acceleration-off copies,
workloads, CPU counts, threads and block sizes, then the third sample, and
last whole kinds (network, then storage), re-estimating after each cut.
Everything left out goes to the run's "not measured" list with the
reason, so the report says so. At run time, after 85 % of the budget, no
series takes more samples than its minimum.
"""

from __future__ import annotations

import copy
import statistics
from dataclasses import replace
from typing import Callable

from cryptcost import units
from cryptcost.errors import UserError
from cryptcost.workloads.plan import DEFAULT_POLICY, RunPlan

HISTORY = 5          # the last N comparable runs calibrate the estimate
DEADLINE_SHARE = 0.85  # after this share of the budget, no series takes more than its minimum


def calibration(runs, suite: str, hostname: str | None) -> tuple[float, int]:
    """(factor, how many runs it comes from): median of wall / estimate over the
    last complete runs of ``suite`` on this host; (1.0, 0) without any."""
    ratios = []
    for run in sorted(runs, key=lambda r: r.id, reverse=True):
        extra = run.extra
        if (run.command == "run" and run.status == "complete" and extra.get("suite") == suite
                and extra.get("estimate_seconds") and extra.get("wall_seconds")
                and run.host.get("hostname") == hostname and not extra.get("time_budget")):
            ratios.append(extra["wall_seconds"] / extra["estimate_seconds"])
        if len(ratios) == HISTORY:
            break
    return (statistics.median(ratios), len(ratios)) if ratios else (1.0, 0)


Cut = tuple[Callable[[RunPlan], RunPlan], dict]


def _policy(**values) -> Callable[[RunPlan], RunPlan]:
    return lambda p: replace(p, policy={**p.policy, **values})


def _drop_part(label: str) -> Callable[[RunPlan], RunPlan]:
    return lambda p: replace(p, parts=[x for x in p.parts if x.label != label] or p.parts)


def _drop_value(label: str, kind: str, key: str, value) -> Callable[[RunPlan], RunPlan]:
    def cut(p: RunPlan) -> RunPlan:
        parts = []
        for part in p.parts:
            table = getattr(part, kind)
            if (part.label == label and table and value in (table.get(key) or [])
                    and len(table[key]) > 1):
                part = replace(part, **{kind: {**copy.deepcopy(table),
                                               key: [v for v in table[key] if v != value]}})
            parts.append(part)
        return replace(p, parts=parts)
    return cut


def _drop_kind(label: str, kind: str) -> Callable[[RunPlan], RunPlan]:
    def cut(p: RunPlan) -> RunPlan:
        parts = [replace(x, **{kind: None})
                 if x.label == label and not replace(x, **{kind: None}).empty()
                 else x for x in p.parts]
        return replace(p, parts=parts)
    return cut


def _cuts(plan: RunPlan) -> list[Cut]:
    """Every reduction, gentlest first: samples beyond the minimum, later parts, then the
    first part's acceleration-off copies, workloads, CPU counts, threads and block sizes;
    only then two samples per series (a 95 % interval from two samples is about ten
    times wider than from three: fewer cells rather than noisier ones), then whole kinds."""
    pol = {**DEFAULT_POLICY, **plan.policy}
    cuts: list[Cut] = []
    if pol["max_samples"] > pol["min_samples"]:
        cuts.append((_policy(max_samples=pol["min_samples"]),
                     {"part": plan.name, "what": "samples beyond the minimum",
                      "detail": f"each series stops at {pol['min_samples']} samples, "
                                "stable or not"}))
    cuts += [(_drop_part(p.label), {"part": p.label, "what": "the whole part", "detail": ""})
             for p in reversed(plan.parts[1:])]
    first = plan.parts[0]
    for kind, key in (("network", "accel"), ("network", "workloads"), ("network", "cpus"),
                      ("storage", "cpus"),
                      ("storage", "accel"), ("storage", "workloads"), ("ciphers", "accel"),
                      ("ciphers", "threads"), ("ciphers", "sizes")):
        values = (getattr(first, kind) or {}).get(key)
        if isinstance(values, list):
            cuts += [(_drop_value(first.label, kind, key, v),
                      {"part": first.label, "what": f"{kind} {key} {v}",
                       "detail": ""}) for v in reversed(values[1:])]
    if pol["min_samples"] > 2:
        cuts.append((_policy(min_samples=2, max_samples=2),
                     {"part": plan.name, "what": "samples beyond two",
                      "detail": "each series has 2 samples"}))
    cuts += [(_drop_kind(first.label, kind),
              {"part": first.label, "what": f"every {kind} stack", "detail": ""})
             for kind in ("network", "storage") if getattr(first, kind)]
    return cuts


def _apply(plan: RunPlan, cuts: list[Cut]) -> RunPlan:
    for cut, _ in cuts:
        plan = cut(plan)
    return plan


def fit(plan: RunPlan, budget: float,
        estimate: Callable[[RunPlan], float]) -> tuple[RunPlan, float]:
    """The plan cut down until its estimate fits ``budget`` seconds, and that estimate.

    Cuts are taken gentlest first until the plan fits; then each cut but the last is
    given back if the plan still fits without it (the last cut may have freed more time
    than needed). Refuses (exit 2) when even the smallest plan does not fit."""
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
        raise UserError(f"--time-budget {units.duration(budget)} is too short: even the smallest "
                        f"part of this plan takes about {units.duration(seconds)} here")
    for cut in list(reversed(taken[:-1])):
        without = [c for c in taken if c is not cut]
        if estimate(_apply(plan, without)) <= budget:
            taken = without
    fitted = _apply(plan, taken)
    why = (f"left out to fit --time-budget {units.duration(budget)} (the whole plan: about "
           f"{units.duration(whole)})")
    cannot = [{"part": c["part"], "what": c["what"], "budget": why, "detail": c["detail"],
               "reason": why + (f": {c['detail']}" if c["detail"] else "")} for _, c in taken]
    return replace(fitted, cannot_run=plan.cannot_run + cannot), estimate(fitted)
