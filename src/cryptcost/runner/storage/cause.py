"""Why a storage result spread as it did: the most likely source of its samples' spread, from
what is known of the samples, the stack and the host, named beside an unstable result."""

from __future__ import annotations

import statistics

from cryptcost import stats
from cryptcost.host import cpu
from cryptcost.model import Sample
from cryptcost.runner.core.scheduler import drift_cause
from cryptcost.runner.storage.steps import MIN_SAMPLE_SECONDS, Instance
from cryptcost.workloads import storage as wl

# a result whose CV is within this multiple of the memory's own is no wider than it
MEMORY_COVERS = 1.5


def likely_cause(inst: Instance, op: wl.Op, samples: list[Sample], cv: float | None = None,
                 memory: dict | None = None, planned: float = MIN_SAMPLE_SECONDS) -> str:
    """The most likely source of a result's spread (``cv``, of its
    samples), from what is known of it; ``memory`` is the host's memory
    bandwidth spread measured before the first sample
    (:func:`runner.core.quiet.memory_noise`); ``planned``, the plan's minimum sample
    (``storage.sample_minimum``)."""
    moved = drift_cause(samples)
    if moved:
        return moved
    short = next((x.metrics["short_because"] for x in samples if x.metrics.get("short_because")),
                 None)
    if short:
        return f"samples shorter than {planned:g} s: {short}"
    seconds = statistics.median(x.seconds for x in samples)
    least = min(x.metrics.get("min_seconds", planned) for x in samples)
    if least < planned:
        return (f"samples of {seconds * 1000:.0f} ms, the series' shorter minimum ({least:g} s: "
                "a pass or a few, each as noisy as a whole sample)")
    if seconds < planned - 0.01:
        return f"samples of {seconds * 1000:.0f} ms, too short for the timer and start-up to vanish"
    floor = (memory or {}).get("cv")
    if floor and cv is not None and floor > stats.STEADY_MEMORY and cv <= MEMORY_COVERS * floor:
        return (f"the host's memory bandwidth, which moved {floor:.0%} (CV) between "
                f"{memory['seconds']:g} s copies before the first sample: this result's spread is "
                f"no wider than {MEMORY_COVERS:g}× that, and a figure that moves data at memory "
                "speed is no steadier than the memory")
    if inst.stack.layer == "fuse":
        return f"the FUSE daemon's threads competing with fio for {cpu.usable_cores()} core(s)"
    if op.op in ("write", "randwrite", "create") and inst.stack.layer == "kernel":
        return "the RAM medium's writeback: the kernel flushes dirty pages at its own pace"
    return "the machine itself (other work on its cores, the hypervisor)"
