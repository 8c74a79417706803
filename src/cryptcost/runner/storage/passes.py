"""One sample made of passes: how large its passes are, the cache reset
between two reads, the passes summed into one sample, the CPU per byte and per operation a
sample (or a pass) may claim, and whether a pass moved what it was meant
to (rule 5).

CPU comes from ``/proc/stat``, which counts in ticks (``CLK_TCK`` a
second): a window of a few ticks counts whole ticks, not percent. A pass
of 25 MiB on ``plain`` lasted 24 ms and showed 0 busy ticks; its CPU-s/GiB
came out 0.0. Below :data:`MIN_CPU_WINDOW` nothing is counted, and the
sample says why.
"""

from __future__ import annotations

import statistics
from pathlib import Path

from cryptcost import proc
from cryptcost.engines import fio
from cryptcost.errors import DataIntegrityError
from cryptcost.host import cpu
from cryptcost.model import CpuSplit, Sample
from cryptcost.workloads import storage as wl

GiB = 1 << 30
MIN_CPU_WINDOW = 0.1         # seconds of /proc/stat ticks below which CPU per byte is not counted


def largest_pass(inst, op: wl.Op) -> int:
    """The most one sequential pass of ``op`` moves on ``inst`` (a steps.Instance): its file,
    or the larger room of a stack whose only cache is the file's own, where evicting its
    pages makes a read cold."""
    job = op.fio
    own = inst.stack.evicts_one_file and not inst.cached_below
    room = min(op.room or 0, int((inst.free or 0) * 0.9)) // job.bs * job.bs if own else 0
    return max(job.size, room)


def reset_one_file(res, inst, path: Path) -> str:
    """The cache reset before a read of the one file ``path``: the stack's
    own (``forget``: its pages, and those of whatever the stack keeps of it
    below) where no page cache sits below the stack's block device (a
    buffered loop, as on the throttled medium), else the whole stack's."""
    if not inst.cached_below and path.exists():
        return inst.stack.forget(res, path)
    return inst.stack.reset_cache(res)


def first_pass(want: int, most: int, block: int) -> int:
    """The size of a sample's first pass when its ``want`` bytes do not fit
    one file of at most ``most``: what the full files after it leave, in
    whole blocks, so that the sample's passes carry ``want`` and the last
    file, the one its read reads, is full. Full files alone put a sample
    whose file holds a little less than its second at one pass or at two: a
    slower pass ends the sample at one and a faster one leads to two, and
    the two kinds of sample differ by more than the noise."""
    rest = want - (-(-want // most) - 1) * most
    return min(most, max(block, -(-rest // block) * block))


READ_PASSES = 4     # a write's file holds what the read after it moves in this many passes


def read_floor(rate: float | None, minimum: float, margin: float, block: int) -> int:
    """The least file a by-time write leaves for the read after it, whose last pass moved
    ``rate``: what that read moves in its ``minimum`` (× ``margin``) in :data:`READ_PASSES`
    passes, in whole blocks; 0 before the read has a rate. A read far faster than its write
    (bindfs: 2.5 GB/s against 0.2) read the file of its write's quarter second in 11 passes,
    a fio start-up each."""
    return int((rate or 0) * minimum * margin / READ_PASSES) // block * block


def clean_step(workdir: Path, step: wl.Step) -> None:
    """Remove the step's files and directories from ``workdir``."""
    for path in workdir.glob(f"{step.name}*"):
        if path.is_dir():
            proc.run(["rm", "-rf", "--one-file-system", str(path)], timeout=900)
        else:
            path.unlink(missing_ok=True)


def combine(passes: list[Sample], op: wl.Op) -> Sample:
    """The passes of one sample as one: bytes, operations, measured seconds
    and CPU summed; latency figures are the passes' medians."""
    if len(passes) == 1:
        return passes[0]
    seconds = sum(p.seconds for p in passes)
    moved = sum(p.bytes_moved or 0 for p in passes)
    cpus = [p.cpu for p in passes if p.cpu]
    split = CpuSplit(**{f: sum(getattr(c, f) for c in cpus) for f in
                        ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal",
                         "daemons")},
                     max_core_busy=max((c.max_core_busy for c in cpus), default=0.0))
    metrics = dict(passes[-1].metrics)
    for name in ("iops", "lat_p50_us", "lat_p99_us"):
        values = [p.metrics[name] for p in passes if isinstance(p.metrics.get(name), (int, float))]
        if values:
            metrics[name] = statistics.median(values)
    # The pass size is the largest pass's: a read's last pass stops when the sample's
    # second is up, and may move only what was left of it.
    sizes = [p.metrics["pass_bytes"] for p in passes if p.metrics.get("pass_bytes")]
    if sizes:
        metrics["pass_bytes"] = max(sizes)
        metrics["cut_by_time"] = any(p.metrics.get("cut_by_time") for p in passes)
    for name in ("settle_s", "harness_cpu_s"):
        if any(name in p.metrics for p in passes):
            metrics[name] = sum(p.metrics.get(name, 0.0) for p in passes)
    count = sum(p.metrics.get("count", 0) for p in passes)
    value = (count / seconds) if op.unit == "ops/s" else moved / seconds
    metrics["cpu_window_s"] = sum(p.metrics.get("cpu_window_s", 0.0) for p in passes)
    cpu_per_unit(metrics, split, moved, count)
    return Sample(value=value, seconds=seconds, bytes_moved=moved, cpu=split, metrics=metrics)


def cpu_per_unit(metrics: dict, split: CpuSplit, moved: int, count: int) -> None:
    """CPU-s per GiB and µs per operation into ``metrics``, where the CPU
    window (``cpu_window_s``) is long enough for /proc/stat's ticks to count
    it; else why not (``cpu_unmeasured``), never a 0 that was not measured."""
    metrics.pop("cpu_unmeasured", None)
    if metrics.get("cpu_window_s", MIN_CPU_WINDOW) < MIN_CPU_WINDOW:
        metrics.pop("cpu_s_per_gib", None)
        metrics.pop("cpu_us_per_op", None)
        metrics["cpu_unmeasured"] = (f"a CPU window of {metrics['cpu_window_s'] * 1000:.0f} ms: "
                                     f"/proc/stat counts in ticks of {1000 / cpu.CLK_TCK:.0f} ms, "
                                     "too coarse to count it")
        return
    if moved:
        metrics["cpu_s_per_gib"] = split.busy / (moved / GiB)
    if count:
        metrics["cpu_us_per_op"] = split.busy / count * 1e6


def verify_moved(label: str, op: wl.Op, moved: int, outcome: fio.FioOutcome,
                 job: fio.FioJob | None = None) -> None:
    """Rule 5: the bytes moved are the bytes intended — or, for a pass
    cut at its time, whole blocks of them, and only once the time is up."""
    if op.fio and op.fio.rw not in fio.FILE_OPS and outcome.total_ios * op.block_bytes < moved:
        raise DataIntegrityError(f"{label} {op.op}: fio's bytes and requests disagree")
    if job is not None and job.runtime:
        # a re-read for the sample's time: whole blocks, for all of it
        if moved <= 0 or moved % job.bs or outcome.runtime_s < job.runtime * 0.99:
            raise DataIntegrityError(
                f"{label} {op.workload} {op.op}: {moved} bytes in "
                f"{outcome.runtime_s:.3f} s of a read meant to last {job.runtime:.3f} s")
        return
    if op.intended_bytes is None:
        return
    intended = job.size if job is not None and (job.size < op.intended_bytes or op.by_time) \
        else op.intended_bytes
    cut = job is not None and job.cap and outcome.runtime_s >= job.cap * 0.99 \
        and 0 < moved < intended and moved % job.bs == 0
    if moved != intended and not cut:
        raise DataIntegrityError(f"{label} {op.workload} {op.op}: moved {moved} bytes "
                                 f"of the {intended} intended")

