"""Stacks and their baselines, for every kind of stack.

:func:`resolve` expands the user's stack specs into the instances a run
builds: the stacks asked for, and every baseline they declare (rule 1).
:func:`against_baselines` compares one series with the same cell of each of
its stack's baselines, measured in the same run (interleaved, rule 2):
overhead = 1 − stack/baseline, with its interval and significance.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Callable, Mapping

from cryptcost import stats
from cryptcost.model import Cell, Result
from cryptcost.errors import UserError
from cryptcost.stacks import get, of_kind, parse_spec, unavailable_reason
from cryptcost.stacks.base import Stack

if TYPE_CHECKING:
    from cryptcost.runner.core.scheduler import Series

# How a run builds one instance: (class, variant) → Stack (storage stacks need the filesystem).
Make = Callable[[type[Stack], str], Stack]
UNVERIFIED = "acceleration off is unverified: no comparable result with it on"


def resolve(specs: list[str], kind: str, make: Make, *,
            fits: Callable[[type[Stack]], str | None] = lambda cls: None,
            here: bool = True) -> tuple[list[tuple[Stack, str]], list[dict]]:
    """(instances to build with how each got in — ``measured`` or
    ``baseline`` —, stacks skipped because they are unavailable here).

    ``all`` means every available stack of ``kind``; an explicit spec that
    cannot run is a :class:`UserError`. ``fits`` says why a class does not
    fit this run's options (e.g. the filesystem), for ``all``. ``here=False``: as a kernel
    that has every feature sees them (the guest's share, estimated on this host).
    """
    def reason(cls: type[Stack]):
        return unavailable_reason(cls) if here else None
    wanted: list[tuple[type[Stack], str, str]] = []
    skipped: list[dict] = []
    explicit = [s for s in specs if s != "all"]
    if "all" in specs:
        for name, cls in of_kind(kind).items():
            exc = reason(cls)
            why = None if exc else fits(cls)
            if exc:
                skipped.append(_skip(cls, exc.reason, exc.install))
            elif why and name not in {s.partition(":")[0] for s in explicit}:
                skipped.append(_skip(cls, why))
            else:
                wanted += [(cls, v, "measured") for v in cls.default_variants]
    for spec in explicit:
        pairs = parse_spec(spec, kind)
        exc = reason(pairs[0][0])
        if exc:
            raise UserError(f"stack {pairs[0][0].name} is unavailable here: {exc}")
        for cls, v in pairs:
            vexc = cls.variant_unavailable(v) if here else None
            if vexc and len(pairs) == 1:
                raise UserError(f"stack {cls.name}:{v} is unavailable here: {vexc}")
            if vexc:                                      # one of name:*'s variants
                skipped.append({**_skip(cls, vexc.reason, vexc.install),
                                "stack": f"{cls.name}:{v}"})
                continue
            wanted.append((cls, v, "measured"))
    out: dict[str, tuple[Stack, str]] = {}
    queue = list(wanted)
    while queue:
        cls, variant, role = queue.pop(0)
        stack = make(cls, variant)
        if stack.label in out:
            continue
        out[stack.label] = (stack, role)
        for base in stack.baselines:
            bcls, bvariant = parse_spec(base, kind)[0]
            exc = reason(bcls)
            if exc:
                skipped.append({**_skip(bcls, f"baseline of {stack.label}: {exc.reason}",
                                        exc.install),
                                "stack": base})
                continue
            queue.append((bcls, bvariant, "baseline"))
    # in the order asked for, but what must be set up first first (Stack.set_up_first)
    return sorted(out.values(), key=lambda pair: not pair[0].set_up_first()), skipped


def _skip(cls: type[Stack], reason: str, install: str | None = None) -> dict:
    """A stack that was not measured, with what the recommendation needs of it."""
    return {"stack": cls.name, "reason": reason, "install": install, "kind": cls.kind,
            "use_case": cls.use_case, "advice": cls.advice or None}


def baseline_labels(stack: Stack) -> list[str]:
    """The labels the baselines' instances get (``zfs:off``, ``plain``)."""
    return [s if ":" in s else get(s).name for s in stack.baselines]


def against_baselines(stack: Stack, cell: Cell, values: list[float],
                      series: Mapping[Cell, Series]) -> tuple[dict, list[str]]:
    """The overhead of ``values``, measured on ``cell``, against the same cell of each baseline
    in ``series`` (the run's, by cell; a baseline runs with acceleration on). Returns (metrics:
    ``baseline``, ``overhead``, ``overhead_ci95``, ``overhead_significant``, ``vs``), notes)."""
    # a baseline variant is no twin of itself
    bases = [b for b in baseline_labels(stack) if b != stack.label]
    metrics: dict = {"baseline": bases[0] if bases else None, "overhead": None,
                     "overhead_ci95": None}
    notes: list[str] = []
    vs = {}
    for base in bases:
        got = series.get(cell.but(stack=base, accel=True))
        other = got.values() if got is not None and got.samples else None
        if not other:
            notes.append(f"baseline {base} has no samples for this workload")
            continue
        cmp = stats.compare(other, values)
        vs[base] = {"overhead": 1 - cmp.ratio,
                    "overhead_ci95": [1 - cmp.ratio_ci95[1], 1 - cmp.ratio_ci95[0]],
                    "significant": cmp.significant, "verdict": cmp.verdict}
    if bases and bases[0] in vs:
        first = vs[bases[0]]
        metrics.update(overhead=first["overhead"], overhead_ci95=first["overhead_ci95"],
                       overhead_significant=first["significant"])
    metrics["vs"] = vs
    return metrics, notes


def add_accel_off_copies(resolved: list[tuple[Stack, str]], skipped: list[dict], make: Make,
                         accel: tuple[bool, ...]) -> None:
    """With acceleration off asked for (``False`` in ``accel``), a copy of each
    measured stack whose processes run with its crypto library's switch — or,
    where the library cannot be switched, a skip that says so (never an
    unverified "off"). In place."""
    if False not in accel:
        return
    for stack, role in list(resolved):
        if role != "measured":
            continue
        why = stack.accel_switch()
        if why:
            skipped.append({"stack": f"{stack.label}/accel-off", "reason": why, "kind": stack.kind,
                            "accel": "cannot be switched off"})
            continue
        off = make(type(stack), stack.variant)
        off.accel = False
        resolved.append((off, "measured"))


def _accel_on(cell: Cell) -> Cell:
    """The cell of the same stack with acceleration on: what an /accel-off copy is compared with."""
    return cell.but(stack=cell.stack.removesuffix("/accel-off") if cell.stack else None,
                    accel=True)


def accel_check(on: list[float], off: list[float]) -> tuple[bool | None, stats.Comparison, str]:
    """Whether acceleration off (``off``) is significantly slower than on (``on``), the two
    sampled in the same interleaved rounds: paired, so that the host's drift between rounds,
    which moves both, is not counted against the switch. (verified — True, False, or None when
    slower by the interval or the medians but not by the test: too few samples, or too noisy a
    side, to tell —, the comparison, why it is not verified)."""
    cmp = stats.compare_paired(on, off)
    if cmp.significant and cmp.ratio < 1:
        return True, cmp, ""
    if cmp.ratio_ci95[1] < 1 or 0 < cmp.ratio <= 1 / stats.MIN_SLOWDOWN:
        return None, cmp, (f"; slower, but not significantly with {len(on)} and {len(off)} "
                           "samples, so no acceleration-off figure until more show it")
    return False, cmp, ("; the switch did not reach this stack's crypto, or the cipher does not "
                        "limit this cell, so this is no acceleration-off figure")


def accel_undecided(key: object, series: Mapping[Cell, Series]) -> bool:
    """Whether ``key``'s series is an acceleration-off cell whose check against its twin with
    acceleration on (:func:`accel_check`) is undecided, with as many samples on each side:
    more rounds may settle it, so the schedule samples on (up to the maximum)."""
    if not isinstance(key, Cell) or key.accel is not False or key not in series:
        return False
    off = series[key].values()
    twin = series.get(_accel_on(key))
    if twin is None or len(off) < 2 or len(twin.values()) != len(off):
        return False
    return accel_check(twin.values(), off)[0] is None


def verify_accel(results: list[Result]) -> list[Result]:
    """An acceleration-off result counts only if it is significantly slower
    than the same stack and cell with acceleration on (rule 14), round by round
    (:func:`accel_check`)."""
    on = {r.cell: r for r in results if r.cell.accel is not False}
    out = []
    for r in results:
        if r.cell.accel is not False:
            out.append(r)
            continue
        with_on = on.get(_accel_on(r.cell))
        if with_on is None or len(with_on.samples) < 2 or len(r.samples) < 2:
            out.append(replace(r, metrics={**r.metrics, "accel_verified": None},
                               notes=r.notes + (UNVERIFIED,)))
            continue
        verified, cmp, why = accel_check([x.value for x in with_on.samples],
                                         [x.value for x in r.samples])
        note = (f"acceleration off {'verified' if verified else 'NOT verified'}: {cmp.ratio:.2f}× "
                f"the speed with it on ({cmp.verdict}){why}")
        out.append(replace(r, metrics={**r.metrics, "accel_verified": verified,
                                       "accel_speedup": 1 / cmp.ratio if cmp.ratio else None},
                           notes=r.notes + (note,)))
    return out


def failed_series(outcome, label: str, workload: str, series, kind: str) -> bool:
    """Account for a series that failed: with no sample it is skipped (and failed with its
    error); one that failed after some samples keeps them as a result, and is listed as
    failed too, with how many samples it had. Returns whether a result can still be made."""
    error = series.error
    if not series.samples:
        outcome.skipped.append({"stack": label, "workload": workload, "kind": kind,
                                "reason": error or "no samples"})
    line = f"{label} {workload}: {error}" + (f" (after {len(series.samples)} sample(s), "
                                             "which are kept)"
                                              if series.samples else "")
    if error and not any(f.startswith(f"{label} {workload}: {error}") for f in outcome.failed):
        outcome.failed.append(line)
    return bool(series.samples)


def store_results(results: list[Result], sink) -> list[Result]:
    """The results of a run's stacks, acceleration-off copies verified, each handed to the sink."""
    results = verify_accel(results)
    for result in results:
        sink.result(result)
    return results

