"""Raw cipher throughput: engines × algorithms × buffers × threads × accel.

:func:`run_ciphers` validates a :class:`CipherPlan`, builds the cells,
schedules them interleaved, summarises each series into a
:class:`~cryptcost.model.Result`, and checks that acceleration-off really
slowed the hardware-accelerated algorithms down (METHODOLOGY rule 14).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from typing import Hashable

from cryptcost import stats
from cryptcost.engines import CIPHER_ENGINES
from cryptcost.model import Cell
from cryptcost.errors import Unavailable, UserError
from cryptcost.host import cpu
from cryptcost.model import Result
from cryptcost.runner.ciphers.executor import Executor
from cryptcost.lifecycle.resources import signals_deferred
from cryptcost.runner.core.flow import cut_cause, cut_short
from cryptcost.runner.core.scheduler import Progress, Series, drift_cause, mark_unstable, schedule
from cryptcost.runner.core.sink import Seen, Sink

log = logging.getLogger("cryptcost.ciphers")

DEFAULT_SIZES = (4096,)
UNMISTAKABLE = 2.0          # … or, with a single sample a side, at least twice as slow


@dataclass(frozen=True)
class CipherPlan:
    """What to measure. ``algorithms`` None means every algorithm of each engine."""

    engines: tuple[str, ...] = tuple(CIPHER_ENGINES)
    algorithms: tuple[str, ...] | None = None
    sizes: tuple[int, ...] = DEFAULT_SIZES
    threads: tuple[int, ...] = (1,)
    accel: tuple[bool, ...] = (True,)
    seconds: int = 1
    engines_explicit: bool = False
    # single cells beyond the product (the stacks' cipher ceilings)
    extra_cells: tuple[Cell, ...] = ()

    def product(self, engines: tuple[str, ...] | None = None) -> list[Cell]:
        """The table's product, in order: ``engines`` (all of the plan's by default) × their
        algorithms × sizes × threads × acceleration, whatever this host can measure of it; not
        its ``extra_cells``."""
        return [Cell.cipher(e, a, s, t, x)
                for e in (self.engines if engines is None else engines) if e in CIPHER_ENGINES
                for a in (self.algorithms or CIPHER_ENGINES[e].algorithms)
                if a in CIPHER_ENGINES[e].algorithms      # another engine measures it
                for s in self.sizes for t in self.threads for x in self.accel]

    def cells(self) -> frozenset[Cell]:
        """Every cell of the table's product (:meth:`product`)."""
        return frozenset(self.product())

    def validate(self) -> None:
        unknown = [e for e in self.engines if e not in CIPHER_ENGINES]
        if unknown:
            raise UserError(f"unknown engine {unknown[0]!r}; choose from "
                            f"{', '.join(CIPHER_ENGINES)}")
        if self.algorithms is not None:
            known = sorted({a for e in self.engines for a in CIPHER_ENGINES[e].algorithms})
            for alg in self.algorithms:
                if alg not in known:
                    raise UserError(f"unknown algorithm {alg!r} for engines "
                                    f"{','.join(self.engines)}; choose from {', '.join(known)}")
        for size in self.sizes:
            if not 16 <= size <= 64 * 1024 * 1024:
                raise UserError(f"buffer size {size} is out of range: use 16 B … 64 MiB")
        for t in self.threads:
            if t < 1 or t > 1024:
                raise UserError(f"threads must be 1 … 1024, not {t}")
        if not 1 <= self.seconds <= 600:
            raise UserError(f"--seconds must be 1 … 600, not {self.seconds}")


@dataclass
class CipherOutcome:
    results: list[Result] = field(default_factory=list)
    skipped: list[dict] = field(default_factory=list)     # {engine, algorithm?, reason, install?}
    # always empty: a failed cell is in skipped, with why
    failed: list[str] = field(default_factory=list)


def build_cells(plan: CipherPlan, executor: Executor, measured: frozenset[Cell] = frozenset()
                ) -> tuple[list[Cell], list[dict]]:
    """The measurable cells, and what was skipped and why; none of ``measured`` (a resumed run
    holds them whole, or an earlier table of the run measured them)."""
    cells, skipped = [], []
    for name in plan.engines:
        try:
            executor.require_engine(name)
        except Unavailable as exc:
            if plan.engines_explicit:
                raise UserError(f"engine {name} is unavailable: {exc}") from None
            skipped.append({"engine": name, "reason": exc.reason, "install": exc.install})
            continue
        for cell in plan.product((name,)):
            if cell in measured:
                continue
            why = executor.unsupported(cell)
            if why:
                skipped.append({"engine": name, "algorithm": cell.algorithm,
                                "buffer_bytes": cell.buffer_bytes, "threads": cell.threads,
                                "accel": cell.accel, "reason": why})
            else:
                cells.append(cell)
    for cell in plan.extra_cells:
        if cell not in cells and cell not in measured and cell.engine in plan.engines \
                and not executor.unsupported(cell):
            try:
                executor.require_engine(cell.engine)
            except Unavailable:
                continue
            cells.append(cell)
    return cells, skipped


def _accelerated(cells: list[Cell]) -> list[Cell]:
    """The accelerated cells needed to verify accel-off cells, not already planned."""
    have = set(cells)
    refs = {replace(c, accel=True) for c in cells if not c.accel}
    return sorted((r for r in refs if r not in have), key=Cell.sort_key)


def run_ciphers(plan: CipherPlan, executor: Executor, policy: stats.Policy, *,
                sink: Sink | None = None, progress: Progress | None = None,
                cpu_flags: dict[str, bool] | None = None,
                measured: frozenset[Cell] = frozenset()) -> CipherOutcome:
    """Measure ``plan``, but none of ``measured``; every sample and result goes to ``sink`` as
    it exists."""
    plan.validate()
    cells, skipped = build_cells(plan, executor, measured)
    if not cells and measured:
        return CipherOutcome(skipped=skipped)          # a resumed run holds them all
    if not cells:
        raise UserError("nothing to measure: " + "; ".join(s["reason"] for s in skipped[:3]))
    refs = _accelerated(cells)
    jobs = []
    for engine in dict.fromkeys(c.engine for c in cells + refs):
        jobs += executor.cipher_jobs(engine, [c for c in cells + refs if c.engine == engine],
                                     plan.seconds)
    sink = sink or Sink()
    all_series: dict[Hashable, Series] = {}

    def done(key: Hashable, series: Series) -> None:
        all_series[key] = series

    seen = Seen(sink)
    try:
        schedule(jobs, policy, on_sample=lambda job, key, i, s: seen.sample(key, i, s),
                 on_done=done, progress=progress)
    except BaseException as exc:
        with signals_deferred(0, "storing the results measured so far"):
            _keep_cut(cells, seen.series, cpu_flags or {}, policy.target, sink, cut_cause(exc))
        raise
    outcome = CipherOutcome(skipped=skipped)
    for cell in cells:
        series = all_series[cell]
        if not series.samples:
            outcome.skipped.append({**cell.fields(), "reason": series.error or "no samples"})
            continue
        result = _result(cell, series, all_series, cpu_flags or {}, policy.target)
        sink.result(result)
        outcome.results.append(result)
    return outcome


def _keep_cut(cells: list[Cell], seen: dict, cpu_flags: dict[str, bool], target: float,
              sink: Sink, cause: str) -> None:
    """A cipher table cut before its series ended (see :func:`flow.keep_cut`): each sampled
    cell is stored as an incomplete result, never ranked."""
    for cell in cells:
        s = seen.get(cell)
        if s is None or not s.samples:
            continue
        why = cut_short(cause)
        cut = Series(samples=list(s.samples), stop_reason="interrupted", error=why)
        try:
            r = _result(cell, cut, seen, cpu_flags, target)
            sink.result(replace(r, metrics={**r.metrics, "incomplete": why}))
        except Exception as exc:                          # noqa: BLE001 -- the cut's cause wins
            log.error("%s: its samples are stored, its result could not be made: %s",
                      cell.algorithm, exc)


def _result(cell: Cell, series: Series, all_series: dict, cpu_flags: dict[str, bool],
            target: float = 0.03) -> Result:
    alg = CIPHER_ENGINES[cell.engine].algorithms[cell.algorithm]
    metrics = {"family": alg.family, "accel_verified": None}
    summary = stats.summarize(series.values())
    notes = [series.error] if series.error else []
    if alg.warning:
        metrics["warning"] = alg.warning
    drivers = [s.metrics["kernel_drivers"] for s in series.samples
               if s.metrics.get("kernel_drivers")]
    if drivers:
        # which driver /proc/crypto shows once it served
        metrics["kernel_drivers"] = drivers[-1]
    first = [s.metrics["first_run_bytes_per_s"] for s in series.samples
             if s.metrics.get("first_run_bytes_per_s")]
    # the engine's untimed first run (the kernel engine's start-up)
    if first:
        metrics["first_run_bytes_per_s"] = first[0]
        if first[0] < 0.5 * summary.median:
            notes.append(f"the first run of this cipher ran {first[0] / 1e6:.1f} MB/s against a "
                         f"median of {summary.median / 1e6:.1f}: a one-time start-up, run untimed "
                         "before the samples")
    saw = {s.metrics.get("engine_saw_accel") for s in series.samples} - {None}
    if saw:
        metrics["engine_saw_accel"] = saw.pop()
    mark_unstable(metrics, notes, summary, target, lambda: likely_cause(cell, series.samples))
    if not cell.accel:                                 # (its note last: the cipher table shows it)
        verified, note, on_speed = _verify_off(cell, series, all_series, alg.hw, cpu_flags)
        metrics["accel_verified"] = verified
        metrics["accel_on_bytes_per_s"] = on_speed
        notes.append(note)
    return Result(cell=cell, summary=summary,
                  stop_reason=series.stop_reason or "cap_reached", samples=tuple(series.samples),
                  metrics=metrics, notes=tuple(n for n in notes if n))


def likely_cause(cell: Cell, samples) -> str:
    """Why a cipher cell's samples spread: a cipher depends on nothing but
    the CPU, so on the host's speed, or on the threads sharing its cores."""
    cores = cpu.usable_cores()
    if cell.threads >= cores:
        return (f"{cell.threads} thread(s) on {cores} core(s): every other process on the machine "
                "takes their time")
    return (drift_cause(samples)
            or "the host's CPU itself (other work on its cores, the hypervisor's scheduling)")


def _verify_off(cell: Cell, series: Series, all_series: dict, hw: tuple[str, ...],
                cpu_flags: dict[str, bool]) -> tuple[bool | None, str, float | None]:
    """Did acceleration-off take effect? (verified, sentence, accelerated speed)."""
    if not hw:
        return None, f"{cell.algorithm} has no hardware path that acceleration-off removes", None
    if cpu_flags and not any(cpu_flags.get(f) for f in hw):
        return None, f"this CPU has none of {', '.join(hw)}: on and off are the same code", None
    on = all_series.get(replace(cell, accel=True))
    if on is None or not on.samples:
        return None, "its accelerated cell could not be measured", None
    cmp = stats.compare_paired(on.values(), series.values())     # the same rounds: paired
    on_speed = stats.summarize(on.values()).median
    slowdown = 1 / cmp.ratio if cmp.ratio > 0 else 0
    if cmp.significant and slowdown >= stats.MIN_SLOWDOWN:
        return True, f"acceleration off: {slowdown:.1f}× slower than on", on_speed
    if min(len(on.samples), len(series.samples)) < 2:
        # No significance test with one sample a side; a drop this large is no noise.
        if slowdown >= UNMISTAKABLE:
            return (True, f"acceleration off: {slowdown:.1f}× slower than on (one sample a side)",
                    on_speed)
        if slowdown >= stats.MIN_SLOWDOWN:
            return (None, f"acceleration off: {slowdown:.2f}× slower, too few samples to tell",
                    on_speed)
    return False, (f"acceleration-off did NOT take effect: {slowdown:.2f}× vs on "
                   f"({cmp.verdict}); the engine ignored the switch"), on_speed
