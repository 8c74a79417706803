"""What of a plan this host can run: every table cut to the stacks, the profile and the delay
that can run here, and the rest listed in ``cannot_run`` with its reason and how to get it."""

from __future__ import annotations

import os
from dataclasses import replace

from cryptcost.engines import perf
from cryptcost.errors import Unavailable, UserError
from cryptcost.host import kernel
from cryptcost.stacks import parse_spec, unavailable_reason
from cryptcost.stacks.base import FEATURE_HINTS
from cryptcost.workloads.plan import RunPlan

NEEDS_ROOT = {"storage": "they need root (loop devices, mounts, FUSE)",
              "network": "they need root (namespaces, tunnels, daemons)"}


def _available(specs: list[str], kind: str, label: str, cannot: list[dict]) -> list[str]:
    """The specs of ``kind`` this host can run; the others go to ``cannot`` with their reasons."""
    keep = []
    for spec in specs:
        pairs = [] if spec == "all" else parse_spec(spec, kind)
        exc = unavailable_reason(pairs[0][0]) if pairs else None
        if pairs and not exc and len(pairs) == 1:          # one variant: its own needs too
            exc = pairs[0][0].variant_unavailable(pairs[0][1])
        if exc:
            cannot.append({"part": label, "what": spec, "reason": exc.reason,
                           "install": exc.install, "guest": exc.guest})
        else:
            keep.append(spec)
    return keep


def for_this_host(plan: RunPlan, allow_empty: bool = False) -> RunPlan:
    """The plan with what this host cannot run moved to ``cannot_run``, each
    with its reason: storage without root, stacks that are unavailable here. A plan left with
    nothing is refused unless ``allow_empty`` (the guest runs the rest)."""
    cannot = list(plan.cannot_run)
    parts = []
    for part in plan.parts:
        tables = {}
        for kind, why in NEEDS_ROOT.items():
            table = getattr(part, kind)
            if table is not None and os.geteuid() != 0:
                cannot.append({"part": part.label, "what": f"{kind} stacks", "reason": why,
                               "install": "run with sudo"})
                table = None
            if table is not None:
                keep = _available(table.get("stacks", ["all"]), kind, part.label, cannot)
                table = {**table, "stacks": keep} if keep else None
            if table and table.get("profile"):
                table = _profile_here(table, kind, part.label, cannot)
            if table and table.get("delay_ms"):
                table = _delay_here(table, part.label, cannot)
            tables[kind] = table
        kept = replace(part, **tables)
        if not kept.empty():
            parts.append(kept)
    if not parts and not allow_empty:
        raise UserError(f"suite {plan.name}: nothing to run on this host: "
                        + "; ".join(f"{c['what']}: {c['reason']}" for c in cannot[:3]))
    return replace(plan, parts=parts, cannot_run=cannot)


def _profile_here(table: dict, kind: str, part: str, cannot: list[dict]) -> dict:
    """A table's profiled round where perf can sample here; else the table without it, and
    why (its verdicts then rest on the ceilings alone)."""
    try:
        perf.require()
    except Unavailable as exc:
        cannot.append({"part": part, "what": f"{kind} profile",
                       "reason": f"{exc.reason}: the bottlenecks are inferred from the "
                                 "ceilings alone",
                       "install": exc.install or ""})
        return {**table, "profile": False}
    return table


def _delay_here(table: dict, part: str, cannot: list[dict]) -> dict | None:
    """A network table with a delay on its link where the kernel has netem; else none, and why
    (its point is the delay)."""
    if kernel.features()["netem"]["present"]:
        return table
    why, how = FEATURE_HINTS["netem"]
    cannot.append({"part": part, "what": f"network stacks with {table['delay_ms']:g} ms more per "
                                         "round trip",
                   "reason": why, "install": f"{how}; or emulated, in cryptcost vm's guest"})
    return None
