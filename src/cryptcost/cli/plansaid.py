"""What ``cryptcost run`` says of its plan before it measures: each part in a few words, what
cannot run here and why, what a budget left out, the estimate, the guest's share (``announce``,
on stderr), and the same as data for ``run --dry-run --json`` (``planned``)."""

from __future__ import annotations

import time

from cryptcost import proc, stacks, suite, units
from cryptcost.cli.common import err
from cryptcost.suite.compiled import tables_of


def _extent(plans) -> str:
    """A part's storage or network plans' CPU counts, acceleration and profiled round."""
    first = plans[0]
    out = f" on {[p.cpus for p in plans]} CPU(s)" if first.cpus else ""
    out += ", acceleration on and off" if False in first.accel else ""
    return out + (", profiled (perf)" if first.profile else "")


def _table_said(part) -> list[str]:
    """A part's tables in a few words each."""
    what = []
    if part.ciphers is not None:
        algorithms = ", ".join(part.ciphers.algorithms or ["every algorithm"])
        what.append(f"ciphers ({algorithms[:70]}…)" if len(algorithms) > 70
                    else f"ciphers ({algorithms})")
    if part.storage:
        s = part.storage[0]
        what.append(f"storage {', '.join(s.stacks)} × {', '.join(s.workloads)}"
                    + _extent(part.storage))
    if part.network:
        n = part.network[0]
        what.append(f"network {', '.join(n.stacks)} × {', '.join(n.workloads)} over {n.link}"
                    + (f" with {n.delay_ms:g} ms more per round trip" if n.delay_ms else "")
                    + _extent(part.network))
    return what


def announce(prepared: suite.Prepared) -> None:
    plan, seconds, factor = prepared.plan, prepared.seconds, prepared.factor
    err.print(f"suite {plan.name}" + (f" ({plan.label})" if plan.label else "")
              + (f", the parts of {' and '.join(prepared.only)} only (--only)" if prepared.only
                 else "") + ":")
    for part in plan.parts:
        err.print(f"  {part.label}: " + "; ".join(_table_said(part)))
    for c in plan.cannot_run:
        if c.get("budget") or (prepared.guest and c.get("guest") is not None):
            continue
        err.print(f"  cannot run {c['part']} {c['what']}: {c['reason']}"
                  + (f" (install: {c['install']})" if c.get("install") else ""))
    cut = [c for c in plan.cannot_run if c.get("budget")]
    if cut:
        err.print(f"  {cut[0]['budget']}:")
        for c in cut:
            err.print(f"    {c['part']}: {c['what']}"
                      + (f" ({c['detail']})" if c["detail"] else ""))
    for note in prepared.notes:
        err.print(f"  {note}")
    scale, runs = factor
    timed = len(prepared.timed)
    most = sum(p.scale != scale and p.label not in prepared.timed for p in plan.parts)
    if not plan.parts and not seconds:
        err.print("estimated time here: none: no part of this plan is left for this host"
                  + (" (the guests' shares follow)" if prepared.guest else ""))
    elif runs or timed or most:
        whole = (f" × {scale:.2f}, what the last {runs} complete run(s) of this suite took here "
                 "against theirs" if runs else "")
        err.print(f"estimated time: about {prepared.planned_s / 60:.1f} min (the model's "
                  f"{seconds / 60:.1f} min{whole}" + (
                      f"; {timed} of its {len(plan.parts)} parts each at what earlier runs of "
                      "that part took against its estimate" if timed else "") + (
                      f"; {most} part(s) no run here has timed at their maximum (--until)"
                      if most else "") + ")")
    else:
        most, least = units.duration(prepared.most_seconds), units.duration(seconds)
        # a policy whose minimum is its maximum (the quick suite's 3/3) has no range to state
        err.print(f"estimated time: about {least}" + (
            " (every series takes a fixed number of samples)" if most == least else
            " if every series is stable at its minimum number of samples, up to "
            f"{most} if every series takes its maximum (a step's series sample together, so "
            "one noisy series keeps its step going)") +
            "; no earlier run of this suite here to calibrate from")
    lacks = sorted({c["reason"] for c in plan.cannot_run if c.get("guest") is not None})
    if prepared.guest and lacks:
        err.print(f"this host's kernel lacks what follows: {'; '.join(lacks)}")
    for gp in prepared.guest:
        _announce_guest(prepared, gp)
    if prepared.until is not None:
        _announce_until(prepared)


def _announce_guest(prepared: suite.Prepared, gp) -> None:
    """A guest share: its parts, what its budget left out, its estimate and its budget."""
    first = _guest_install(gp.share.plan)
    intro = "in cryptcost vm's guest" if prepared.vm else (
        f"with --vm{f' (after {first})' if first else ''}, in cryptcost vm's guest")
    err.print(f"{intro} ({gp.share.kernel_said}, emulated):")
    for part in gp.share.plan.parts:
        err.print(f"  {part.label}: " + "; ".join(_table_said(part)))
    cut = [c for c in gp.share.plan.cannot_run if c.get("budget")]
    if cut:
        err.print(f"  {cut[0]['budget']}:")
        for c in cut:
            err.print(f"    {c['part']}: {c['what']}"
                      + (f" ({c['detail']})" if c["detail"] else ""))
    gruns = gp.factor[1]
    timed = [p.label for p in gp.share.plan.parts if p.scale != gp.scale]
    by_part = (f"; {len(timed)} of its {len(gp.share.plan.parts)} parts each at what earlier "
               "guest runs of that part took against its estimate" if timed else "")
    err.print(f"  estimated time: about {gp.planned / 60:.0f} min (the model's "
              f"{gp.seconds / 60:.1f} min at this host's speed × {gp.scale:.1f}, what the last "
              f"{gruns} guest run(s) of this plan took against theirs{by_part})" if gruns else
              f"  estimated time: {gp.seconds / 60:.1f} min at this host's speed; planned at "
              f"{gp.scale:g} times that under TCG (software CPU emulation), as no guest run of "
              f"this plan here has calibrated it yet{by_part}")
    if gp.budget_s:
        err.print(f"  its part of --time-budget: {gp.budget_s / 60:.0f} min, its boot "
                  "included; no part begins that the rest of it cannot hold")


def _announce_until(prepared: suite.Prepared) -> None:
    """Under --until: what would begin, by the estimates."""
    begin, left_out = prepared.until_fits(time.time())
    err.print(f"--until {prepared.until_said} ({prepared.until_at_said()}): no part begins "
              "that its planned time says would end later (with no run of the suite here to "
              "calibrate from, a part is planned at its maximum); nothing is thinned, and a "
              "later run --resume measures what is left out. By the estimates above: "
              + (f"begins {', '.join(begin)}" if begin else "no part of this host begins")
              + (f"; left out {', '.join(left_out)}" if left_out else "")
              + ("; each guest share then gets what is left after its boot" if
                 prepared.vm and prepared.guest else ""))


def _parts_json(parts) -> list[dict]:
    return [{"label": p.label, "said": _table_said(p), **tables_of(p), "planned_scale": p.scale}
            for p in parts]


def planned(prepared: suite.Prepared) -> dict:
    """What ``run --dry-run --json`` prints: what announce says, as data. Estimates are the
    model's seconds; ``calibrated_seconds`` multiplies them by what earlier runs took against
    theirs, where there are any (a guest's are at this host's speed until then)."""
    def estimate(seconds: float, factor: tuple[float, int]) -> dict:
        scale, runs = factor
        return {"estimate_seconds": round(seconds, 1),
                "calibrated_seconds": round(seconds * scale, 1) if runs else None,
                "calibrated_from_runs": runs}
    plan, r = prepared.plan, prepared.resume
    return {"suite": plan.name, "label": plan.label, "parts": _parts_json(plan.parts),
            "only": list(prepared.only),
            "resume": r and {"run": r.run_id, "whole": sorted(r.done), "again": sorted(r.again),
                             "cipher_cells_held": len(r.have),
                             "guest_whole": {gp.share.plan.name: sorted(r.guest_done(
                                 gp.share.plan.name)) for gp in prepared.guest}},
            **estimate(prepared.seconds, prepared.factor),
            "planned_seconds": round(prepared.planned_s, 1),
            "most_seconds": round(prepared.most_seconds, 1),
            "time_budget_seconds": prepared.budget_s,
            "until": prepared.until_at_said(),
            "until_begins": prepared.until_fits(time.time())[0] if prepared.until else None,
            "cannot_run": list(plan.cannot_run),
            "notes": list(prepared.notes),
            "host_budget_seconds": prepared.host_budget_s,
            "guest": [{"kernel": gp.share.kernel or "stock", "kernel_said": gp.share.kernel_said,
                       "runs_with_vm": prepared.vm, "parts": _parts_json(gp.share.plan.parts),
                       "planned_scale": gp.scale, "planned_seconds": round(gp.planned, 1),
                       "budget_seconds": gp.budget_s,
                       "cannot_run": list(gp.share.plan.cannot_run),
                       **estimate(gp.seconds, gp.factor)}
                      for gp in prepared.guest]}


def _guest_install(plan) -> str:
    """The command that installs what a guest share lacks on this host (the guest runs this
    host's own root filesystem): the guest itself, the stacks whose tools are missing."""
    names = {spec.partition(":")[0] for part in plan.parts
             for plans in (part.storage, part.network) for t in plans for spec in t.stacks}
    missing = sorted(n for n in names if n in stacks.registry()
                     and not all(t.path() for t in stacks.get(n).needed_tools()))
    if proc.which("qemu-system-x86_64") and not missing:
        return ""
    return " ".join(["cryptcost install guest", *missing])
