"""The profiled round: where each cell's CPU time goes, from a CPU profile.

After the measured samples, each instance's steps run once more with perf
sampling every CPU during each pass of each operation (``engines.perf``:
the engine's run, and a write's wait until durable, since a kernel stack
may encrypt at writeback). The round's samples are discarded: perf's own
cost never reaches a figure, and the profile is of the same work on the
same instance, warm. What each cell gets is stored with its result as
``profile``: ``analysis.profile`` sorts its rows into layers, and the
report draws its folded stacks as a flame graph per stack.
"""

from __future__ import annotations

import logging
from contextlib import AbstractContextManager, nullcontext
from dataclasses import replace

from cryptcost.engines import perf
from cryptcost.errors import CryptcostError
from cryptcost.lifecycle.resources import Resources
from cryptcost.model import Cell, Result
from cryptcost.runner.core.scheduler import Progress

log = logging.getLogger("cryptcost.profile")

HOW = ("a profiled round after the measured samples, not counted in them: perf record -e "
       f"cpu-clock -F {perf.FREQ} -a -g, sampling only during each pass (fio's run from its "
       "first I/O, its start-up left out; other engines' whole run; and a write's wait until "
       "durable)")
ROWS = 40                  # the largest rows kept with a result


def unwatched(inst, op) -> AbstractContextManager:
    """The window of a pass no profiler watches: nothing, and when its work began is ignored."""
    return nullcontext(lambda began: None)


def profile_round(res: Resources, runner, work: list[tuple], cells: dict[tuple, Cell],
                  progress: Progress | None = None) -> dict[Cell, dict]:
    """Run each (instance, step or op) of ``work`` once more under perf; a profile per cell.
    ``runner`` is the kind's step runner (its ``window`` is what a pass runs inside; it returns
    samples by (instance label, op key), which ``cells`` maps to their cells). Each profile also
    says how fast the profiled pass ran (``value``), so that perf's own weight on the work
    it watched can be read against the measured median."""
    tmp = res.tmpdir("cryptcost-perf-")
    out: dict[Cell, dict] = {}
    recordings: dict[Cell, perf.Recording] = {}

    def window(inst, op):
        cell = cells[(inst.label, op.key)]
        if cell not in recordings:
            recordings[cell] = perf.record(res, tmp / f"cell-{len(out) + len(recordings)}.data")
        return recordings[cell].window()

    runner.window = window
    progress = progress or Progress()
    progress.start(len(work), 0.0)
    try:
        for done, (inst, step) in enumerate(work):
            progress.step(f"profiling {inst.label}: "
                          f"{getattr(step, 'label', getattr(step, 'workload', ''))}",
                          done + 1, len(work))
            try:
                got = runner(inst, step)
            except CryptcostError as exc:
                log.warning("%s: the profiled round failed: %s", inst.label, exc)
                for cell in list(recordings):
                    out[cell] = {"how": HOW, "error": str(exc)}
                    recordings.pop(cell).close()
                continue
            for cell in list(recordings):
                out[cell] = _read(recordings.pop(cell))
            for key, sample in got.items():
                if cells.get(key) in out:
                    out[cells[key]]["value"] = sample.value
    finally:
        progress.finish()
        runner.window = unwatched
        for rec in recordings.values():
            rec.close()
    return out


def _read(rec: perf.Recording) -> dict:
    path = rec.close()
    rows, samples = perf.top(path, spans=rec.spans)
    return {"how": HOW, "seconds": rec.seconds, "windows": rec.windows, "samples": samples,
            "frequency_hz": perf.FREQ, "rows": rows[:ROWS], "folded": perf.folded(path, rec.spans)}


def attach(result: Result, profiles: dict[Cell, dict]) -> Result:
    """The result with its cell's profile, and how fast the profiled round ran against its
    median."""
    p = profiles.get(result.cell)
    if p is None:
        return result
    ran = ({"vs_median": p["value"] / result.summary.median}
           if p.get("value") and result.summary.median else {})
    return replace(result, metrics={**result.metrics, "profile": {**p, **ran}})

