"""Preparing and running a plan.

:func:`~cryptcost.suite.prepare.prepare` builds what ``cryptcost run`` hands down, once: the
suite or plan file loaded, cut to what this host can run, compiled into one frozen record
(:mod:`cryptcost.suite.compiled`), its model target read, fitted to a time budget and estimated
(:class:`~cryptcost.suite.prepare.Prepared`). :func:`run_plan` then runs that record's parts in
order (cipher tables, storage comparisons once per CPU count, network comparisons), all into
one run of the store.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Callable

from cryptcost import units
from cryptcost.errors import CryptcostError, UserError
from cryptcost.lifecycle.resources import Resources
from cryptcost.model import Cell, Result
from cryptcost.runner.ciphers import CipherPlan, run_ciphers
from cryptcost.runner.ciphers.executor import Executor, RealExecutor
from cryptcost.runner.core.scheduler import Progress
from cryptcost.runner.core.sink import Sink
from cryptcost.runner.network import run_network
from cryptcost.runner.storage import run_storage
from cryptcost.suite import budget, ceilings, timing
from cryptcost.suite.budget import Clock
from cryptcost.suite.ceilings import ceiling_cells
from cryptcost.suite.compiled import CompiledPart, CompiledPlan, compile_plan
from cryptcost.suite.here import for_this_host
from cryptcost.suite.prepare import Asked, Calibration, GuestPlan, Prepared, prepare
from cryptcost.suite.timing import estimate

__all__ = ["Asked", "Calibration", "Clock", "CompiledPlan", "GuestPlan", "Hooks", "Prepared",
           "SuiteOutcome", "ceiling_cells", "compile_plan", "estimate", "for_this_host",
           "prepare", "run_plan"]


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


@dataclass(frozen=True)
class Hooks:
    """What a run tells as it goes: a progress display per comparison (``progress(what)``),
    each part's label before it begins (a resumed run drops what it held of it), and the
    outcome so far after each part ends (the run's record of its parts' times)."""

    progress: Callable[[str], Progress | None] = lambda what: None
    before_part: Callable[[str], None] = lambda label: None
    on_part: Callable[[SuiteOutcome], None] = lambda outcome: None


@dataclass
class _Ceilings:
    """The cipher cells the plan's stacks need for their ceilings (rule 8), measured first: in
    the first part's cipher table where it has one (``carrier``), else, or should that part be
    left out, in a table of just those cells (``alone``)."""

    needed: tuple[Cell, ...]
    alone: CompiledPart
    carrier: CompiledPart | None

    @classmethod
    def of(cls, plan: CompiledPlan, host: dict, have: frozenset[Cell]) -> "_Ceilings":
        needed = tuple(c for c in ceiling_cells(plan, host) if c not in have)
        alone = CompiledPart(ceilings.LABEL, plan.policy, ciphers=CipherPlan(
            algorithms=tuple(sorted({c.algorithm for c in needed})), sizes=(), threads=(1,)))
        first = plan.parts[0] if plan.parts and plan.parts[0].ciphers is not None else None
        return cls(needed, alone, first)

    def extra(self, part: CompiledPart) -> tuple[Cell, ...]:
        return self.needed if part.label == ceilings.LABEL or part is self.carrier else ()


def run_plan(plan: CompiledPlan, *, sink: Sink, host: dict, hooks: Hooks = Hooks(),
             clock: Clock = Clock(), executor: Executor | None = None,
             have: frozenset[Cell] = frozenset()) -> SuiteOutcome:
    """Run every part; a part that fails is recorded and the next one runs. With a ``clock``
    whose time is ``spent`` at some point, no part begins that the time left cannot hold by
    its estimate (× the part's ``scale``, else the clock's); a later, shorter one may.
    What the stacks need for their cipher ceilings is measured first (rule 8: before any part a
    budget or ``--until`` may leave out, as the plan's estimate counts them), with the first
    part's cipher table where it has one (one engine run for both: ``gocryptfs -speed``
    measures every Go cipher at once), else in a table of just those cells. A cell in ``have``
    (a resumed run holds it whole), or that an earlier table of this run measured, is not
    measured again."""
    run = _Run(plan, sink, host, hooks, executor or RealExecutor(), set(have))
    ceil = _Ceilings.of(plan, host, have)
    queue = list(plan.parts)
    if ceil.needed and ceil.carrier is None:
        queue.insert(0, ceil.alone)
    while queue:
        part = queue.pop(0)
        began = time.monotonic()
        ceiling = part.label == ceilings.LABEL           # runs first, whatever the budget
        model = (timing.ceilings(plan, host, run.executor, have=have) if ceiling
                 else estimate(plan.one(part), run.executor))
        if model:
            run.out.part_estimates[part.label] = round(model, 1)
        why = None if ceiling else _no_time(part, model, clock, began)
        if why:
            run.out.skipped.append(budget.left_out_whole(part, why))
            if part is ceil.carrier and ceil.needed:
                queue.insert(0, ceil.alone)              # its ceilings are measured all the same
            continue
        hooks.before_part(part.label)
        policy = replace(part.policy, deadline=clock.deadline)
        if part.ciphers is not None:
            run.ciphers(part, replace(part.ciphers, extra_cells=ceil.extra(part)), policy)
        run.comparisons(part, policy)
        run.out.took(part.label, began)
        hooks.on_part(run.out)
    return run.out


def _no_time(part: CompiledPart, model: float, clock: Clock, began: float) -> str | None:
    """Why ``part`` may not begin: the time left on the clock cannot hold its estimate."""
    need = model * (part.scale or clock.scale) if clock.spent is not None else 0.0
    if not need or began + need <= clock.spent:
        return None
    left = max(0.0, clock.spent - began)
    return (f"left out at run time: {clock.spent_by} ({units.duration(left)}) could not hold "
            f"its estimate ({units.duration(need)})")


@dataclass
class _Run:
    """One run of a plan as it goes: where its results go, what it has measured (``measured``:
    a later table measures no cipher cell an earlier one did, nor one a resumed run holds) and
    its outcome so far."""

    plan: CompiledPlan
    sink: Sink
    host: dict
    hooks: Hooks
    executor: Executor
    measured: set[Cell]
    out: SuiteOutcome = field(init=False)

    def __post_init__(self) -> None:
        self.out = SuiteOutcome(skipped=[
            {"stack": c["what"], "reason": c["reason"], "install": c.get("install"),
             "part": c["part"], **{k: c[k] for k in ("budget", "ciphers", "workloads")
                                   if c.get(k) is not None}}
            for c in self.plan.cannot_run])

    def ciphers(self, part: CompiledPart, cp: CipherPlan, policy) -> None:
        """A part's cipher table (and the ceilings it carries)."""
        try:
            co = run_ciphers(cp, self.executor, policy, sink=self.sink,
                             progress=self.hooks.progress(f"{part.label}: ciphers"),
                             cpu_flags=self.host["cpu"]["flags"],
                             measured=frozenset(self.measured))
        except UserError as exc:
            self.out.skipped.append({"part": part.label, "stack": "ciphers", "reason": str(exc)})
            return
        self.measured |= {r.cell for r in co.results}
        self.out.results += co.results
        self.out.skipped += [{**s, "part": part.label} for s in co.skipped]

    def comparisons(self, part: CompiledPart, policy) -> None:
        """Each stack comparison of a part, storage once per CPU count then network, each in
        its own resources (one comparison's stacks are gone before the next is built); one that
        fails is a line of ``failed`` and the next runs."""
        runs = [("storage", sp, run_storage) for sp in part.storage] + \
            [("network", np_, run_network) for np_ in part.network]
        for kind, table, run in runs:
            what = f"{part.label}: {kind}" + (f" on {table.cpus} CPU(s)" if table.cpus else "")
            try:
                with Resources() as res:
                    got = run(table, policy, res=res, sink=self.sink,
                              progress=self.hooks.progress(what))
            except CryptcostError as exc:
                self.out.failed.append(f"{what}: {exc}")
                continue
            self.out.results += got.results
            self.out.skipped += [{**s, "part": part.label} for s in got.skipped]
            self.out.failed += got.failed
