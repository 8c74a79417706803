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
ROWS = 60                  # the largest rows kept with a result (a Go daemon: many functions)


def unwatched(inst, op) -> AbstractContextManager:
    """The window of a pass no profiler watches: nothing, and when its work began is ignored."""
    return nullcontext(lambda began: None)


class Profiler:
    """Profiles runs of (instance, step)s: one perf recording for them all, switched on around
    each watched pass by the kind's step runner (``runner.window``), each cell keeping the
    spans of its own passes; :meth:`finish` reads the file once. perf ends once the
    ``runs`` runs it watches are done (the warm-up round ends before any measured sample), so
    that no perf process runs beside a measured sample. A profiler that fails says so in the
    cells' profiles; it never fails the work it watches."""

    def __init__(self, res: Resources, runner, cells: dict[tuple, Cell], how: str, runs: int):
        self.res, self.runner, self.cells, self.how = res, runner, cells, how
        self._runs_left = runs
        self._recording: perf.Recording | None = None
        self._path = None                      # the file perf wrote, once it has ended
        self._spans: dict[Cell, list[tuple[float, float]]] = {}
        self._errors: dict[Cell, str] = {}
        self._values: dict[Cell, float] = {}

    def _window(self, inst, op) -> AbstractContextManager:
        cell = self.cells[(inst.label, op.key)]
        if cell in self._errors:
            return unwatched(inst, op)
        try:
            if self._recording is None:
                self._recording = perf.record(
                    self.res, self.res.tmpdir("cryptcost-perf-") / "round.data")
            return self._guarded(cell, self._recording)
        except CryptcostError as exc:
            self._errors[cell] = str(exc)
            return unwatched(inst, op)

    @contextmanager
    def _guarded(self, cell: Cell, rec: perf.Recording) -> Iterator:
        """``rec``'s window for ``cell``'s pass, its span kept as the cell's; perf's failures
        kept as the cell's, and the pass let run."""
        window = rec.window()
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
                self._spans.setdefault(cell, []).append(rec.spans[-1])
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
            self._runs_left -= 1
            if self._runs_left <= 0:
                self._end()

    def _end(self) -> None:
        """End perf (its file kept for :meth:`finish`)."""
        if self._recording is not None and self._path is None:
            try:
                self._path = self._recording.close()
            except CryptcostError as exc:
                for cell in self._spans:
                    self._errors.setdefault(cell, str(exc))
                self._recording = None

    def saw(self, got: dict[tuple, Sample]) -> None:
        """The samples of the run being watched (by instance label and op key): how fast the
        profiled passes ran."""
        if self.runner.window == self._window:
            for key, sample in got.items():
                if key in self.cells:
                    self._values[self.cells[key]] = sample.value

    def finish(self) -> dict[Cell, dict]:
        """End perf and read its file once: a profile per cell watched."""
        profiles: dict[Cell, dict] = {}
        self._end()
        if self._path is not None:
            try:
                everything = perf.stacks(self._path, sorted(s for ss in self._spans.values()
                                                            for s in ss))
                for cell, spans in self._spans.items():
                    if cell not in self._errors:
                        profiles[cell] = {"how": self.how,
                                          **_read(perf.inside(everything, spans), spans)}
            except CryptcostError as exc:
                for cell in self._spans:
                    self._errors.setdefault(cell, str(exc))
        for cell, error in self._errors.items():
            log.warning("%s: its profile failed: %s", cell.label(), error)
            profiles[cell] = {"how": self.how, "error": error}
        for cell, value in self._values.items():
            if cell in profiles and "error" not in profiles[cell]:
                profiles[cell]["value"] = value
        return profiles


def profile_round(profiler: Profiler, work: list[tuple],
                  progress: Progress | None = None) -> dict[Cell, dict]:
    """Run each (instance, step or op) of ``work`` once more, watched; a profile per cell."""
    progress = progress or Progress()
    progress.start(len(work), 0.0)
    failed: dict[str, str] = {}
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
                failed[inst.label] = str(exc)
    finally:
        progress.finish()
    profiles = profiler.finish()
    for (label, _), cell in profiler.cells.items():
        if label in failed and cell not in profiles:
            profiles[cell] = {"how": profiler.how, "error": failed[label]}
    return profiles


def _read(samples: list[perf.Stack], spans: list[tuple[float, float]]) -> dict:
    """A cell's profile from the samples inside its spans: perf's rows (the largest) and the
    folded call stacks."""
    rows, total = perf.rows(samples)
    return {"seconds": sum(b - a for a, b in spans), "windows": len(spans), "samples": total,
            "frequency_hz": perf.FREQ, "rows": rows[:ROWS], "folded": perf.fold(samples)}


def attach(result: Result, profiles: dict[Cell, dict]) -> Result:
    """The result with its cell's profile, and how fast the profiled round ran against its
    median."""
    p = profiles.get(result.cell)
    if p is None:
        return result
    ran = ({"vs_median": p["value"] / result.summary.median}
           if p.get("value") and result.summary.median else {})
    return replace(result, metrics={**result.metrics, "profile": {**p, **ran}})

