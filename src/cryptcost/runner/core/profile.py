"""The profiled round: where each cell's CPU time goes, from a CPU profile.

One run of each instance's steps goes under perf, sampling every CPU during
each pass of each operation (``engines.perf``: the engine's run, and a
write's wait until durable, since a kernel stack may encrypt at writeback):
the last warm-up round where the run has one, whose samples are discarded
anyway, so that the profile costs no pass of its own; else one round after
the measured samples. Either way perf's own cost never reaches a figure, and
the profile is of the same work on the same instance. What each cell gets is
stored with its result as ``profile``: ``analysis.profile`` sorts its rows
into layers, and the report draws its folded stacks as a flame graph per stack.
"""

from __future__ import annotations

import logging
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import replace
from typing import Iterator

from cryptcost.engines import perf
from cryptcost.errors import CryptcostError
from cryptcost.lifecycle.resources import Resources
from cryptcost.model import Cell, Result, Sample
from cryptcost.runner.core.scheduler import Progress

log = logging.getLogger("cryptcost.profile")

SAMPLED = (f"perf record -e cpu-clock -F {perf.FREQ} -a -g, sampling only during each pass "
           "(fio's run from its first I/O, its start-up left out; other engines' whole run; "
           "and a write's wait until durable)")
IN_WARMUP = f"the last warm-up round, whose samples are discarded: {SAMPLED}"
AFTER = f"a profiled round after the measured samples, not counted in them: {SAMPLED}"
ROWS = 40                  # the largest rows kept with a result


def unwatched(inst, op) -> AbstractContextManager:
    """The window of a pass no profiler watches: nothing, and when its work began is ignored."""
    return nullcontext(lambda began: None)


class Profiler:
    """Profiles a run of an (instance, step): a perf recording per cell, switched on around each
    of its passes by the kind's step runner (``runner.window``). A profiler that fails says so
    in the cell's profile; it never fails the work it watches."""

    def __init__(self, res: Resources, runner, cells: dict[tuple, Cell], how: str):
        self.res, self.runner, self.cells, self.how = res, runner, cells, how
        self.tmp = res.tmpdir("cryptcost-perf-")
        self.profiles: dict[Cell, dict] = {}
        self._recordings: dict[Cell, perf.Recording] = {}
        self._errors: dict[Cell, str] = {}
        self._values: dict[Cell, float] = {}

    def _window(self, inst, op) -> AbstractContextManager:
        cell = self.cells[(inst.label, op.key)]
        if cell in self._errors:
            return unwatched(inst, op)
        try:
            if cell not in self._recordings:
                self._recordings[cell] = perf.record(
                    self.res, self.tmp / f"cell-{len(self.profiles) + len(self._recordings)}.data")
            return self._guarded(cell, self._recordings[cell].window())
        except CryptcostError as exc:
            self._errors[cell] = str(exc)
            return unwatched(inst, op)

    @contextmanager
    def _guarded(self, cell: Cell, window: AbstractContextManager) -> Iterator:
        """``window``, with perf's failures kept as the cell's and the pass let run."""
        try:
            starts_at = window.__enter__()
        except CryptcostError as exc:
            self._errors[cell] = str(exc)
            yield lambda began: None
            return
        try:
            yield starts_at
        finally:
            try:
                window.__exit__(None, None, None)
            except CryptcostError as exc:
                self._errors[cell] = str(exc)

    @contextmanager
    def watching(self) -> Iterator[None]:
        """Profile what the step runner does inside."""
        self.runner.window = self._window
        try:
            yield
        finally:
            self.runner.window = unwatched
            for cell, rec in list(self._recordings.items()):
                try:
                    path = rec.close()
                    if cell not in self._errors:
                        self.profiles[cell] = {"how": self.how, **_read(path, rec.spans)}
                except CryptcostError as exc:
                    self._errors[cell] = str(exc)
            self._recordings.clear()
            for cell, error in self._errors.items():
                log.warning("%s: its profile failed: %s", cell.label(), error)
                self.profiles[cell] = {"how": self.how, "error": error}
            self._errors.clear()
            for cell, value in self._values.items():
                if "error" not in self.profiles.get(cell, {"error": 1}):
                    self.profiles[cell]["value"] = value
            self._values.clear()

    def saw(self, got: dict[tuple, Sample]) -> None:
        """The samples of the run being watched (by instance label and op key): how fast the
        profiled passes ran."""
        if self.runner.window == self._window:
            for key, sample in got.items():
                if key in self.cells:
                    self._values[self.cells[key]] = sample.value


def profile_round(profiler: Profiler, work: list[tuple],
                  progress: Progress | None = None) -> dict[Cell, dict]:
    """Run each (instance, step or op) of ``work`` once more, watched; a profile per cell."""
    progress = progress or Progress()
    progress.start(len(work), 0.0)
    try:
        for done, (inst, step) in enumerate(work):
            progress.step(f"profiling {inst.label}: "
                          f"{getattr(step, 'label', getattr(step, 'workload', ''))}",
                          done + 1, len(work))
            try:
                with profiler.watching():
                    profiler.saw(profiler.runner(inst, step))
            except CryptcostError as exc:
                log.warning("%s: the profiled round failed: %s", inst.label, exc)
                for op_cell in [c for (label, _), c in profiler.cells.items()
                                if label == inst.label and c not in profiler.profiles]:
                    profiler.profiles[op_cell] = {"how": profiler.how, "error": str(exc)}
    finally:
        progress.finish()
    return profiler.profiles


def _read(path, spans: list[tuple[float, float]]) -> dict:
    """A closed recording's profile: perf report's rows and the folded call stacks, of the
    samples inside ``spans`` only."""
    rows, samples = perf.top(path, spans=spans)
    return {"seconds": sum(b - a for a, b in spans), "windows": len(spans), "samples": samples,
            "frequency_hz": perf.FREQ, "rows": rows[:ROWS], "folded": perf.folded(path, spans)}


def attach(result: Result, profiles: dict[Cell, dict]) -> Result:
    """The result with its cell's profile, and how fast the profiled round ran against its
    median."""
    p = profiles.get(result.cell)
    if p is None:
        return result
    ran = ({"vs_median": p["value"] / result.summary.median}
           if p.get("value") and result.summary.median else {})
    return replace(result, metrics={**result.metrics, "profile": {**p, **ran}})

