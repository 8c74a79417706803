"""Storage measurement: stacks × workloads on a medium, each stack against
its matched baseline, interleaved.

Flow: :func:`resolve` expands stack specs and adds each stack's baselines;
:func:`run_storage` gives every stack instance a fresh block device from the
medium, builds it, turns each workload step into one job per instance (all
instances of a step in one group, so they stay in step: A B C A B C …),
schedules them, and summarises each series with its overhead against the
baseline. Everything is torn down by the ``Resources`` scope.

Cache mode (rule 4) is chosen once per run, so a stack and its baseline are
always measured alike: O_DIRECT when every stack in the run honours it,
otherwise buffered I/O with fsync at the end of writes and dropped caches
(FUSE stacks: a remount) before reads.
"""

from __future__ import annotations

import io
import logging
import os
import random
import re
import statistics
import tarfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from cryptcost import proc, stats
from cryptcost.engines import fio
from cryptcost.errors import CryptcostError, DataIntegrityError, Unavailable, UserError
from cryptcost.host import cpu
from cryptcost.media import Medium
from cryptcost.model import Result, Sample
from cryptcost.runner.integrity import check_pattern
from cryptcost.runner.resources import Resources
from cryptcost.runner.scheduler import Job, Progress, Series, schedule
from cryptcost.runner.sink import Sink
from cryptcost.stacks import parse_spec, registry, unavailable_reason
from cryptcost.stacks.base import Stack
from cryptcost.workloads import storage as wl

log = logging.getLogger("cryptcost.storage")
GiB = 1 << 30
DBENCH_LOADFILE = "/usr/share/dbench/client.txt"
DBENCH_SECONDS = 10
SHORT_SAMPLE = 0.5          # seconds; below this a sample is mostly timer and start-up


@dataclass
class StoragePlan:
    stacks: list[str]                    # specs: name, name:variant, name:*, or "all"
    medium: Medium
    workloads: list[str] = field(default_factory=lambda: ["quick"])
    size: int | None = None          # per stack instance; None: chosen from the medium's room
    fs: str = "ext4"
    sizes: wl.Sizes | None = None
    cpus: int | None = None          # restrict fio and the stacks' daemons to this many CPUs (rule 15)


@dataclass
class Instance:
    """One stack, set up on its own block device."""

    stack: Stack
    label: str
    role: str                            # "measured" or "baseline"
    workdir: Path | None = None
    error: str | None = None


@dataclass
class StorageOutcome:
    results: list[Result] = field(default_factory=list)
    skipped: list[dict] = field(default_factory=list)
    cache_mode: str = ""
    failed: list[str] = field(default_factory=list)      # measured stacks whose setup failed


def resolve(specs: list[str], fs: str) -> tuple[list[tuple[Stack, str]], list[dict]]:
    """Stack instances to build (measured ones and their baselines) and the
    stacks skipped because they are unavailable here."""
    wanted: list[tuple[type[Stack], str, str]] = []
    skipped: list[dict] = []
    explicit = [s for s in specs if s != "all"]
    if "all" in specs:
        for name, cls in registry().items():
            exc = unavailable_reason(cls)
            if exc:
                skipped.append({"stack": name, "reason": exc.reason, "install": exc.install})
            else:
                wanted += [(cls, v, "measured") for v in cls.default_variants]
    for spec in explicit:
        pairs = parse_spec(spec)
        exc = unavailable_reason(pairs[0][0])
        if exc:
            raise UserError(f"stack {pairs[0][0].name} is unavailable here: {exc}")
        wanted += [(cls, v, "measured") for cls, v in pairs]
    out: dict[str, tuple[Stack, str]] = {}
    queue = list(wanted)
    while queue:
        cls, variant, role = queue.pop(0)
        if fs not in cls.filesystems and "all" in specs and cls.name not in explicit:
            skipped.append({"stack": cls.name, "reason": f"works only on {', '.join(cls.filesystems)}, "
                                                         f"not --fs {fs}"})
            continue
        stack = cls(variant, fs)
        if stack.label in out:
            continue
        out[stack.label] = (stack, role)
        for base in filter(None, (cls.baseline, *cls.extra_baselines)):
            bcls, bvariant = parse_spec(base)[0]
            exc = unavailable_reason(bcls)
            if exc:
                skipped.append({"stack": base, "reason": f"baseline of {stack.label}: {exc.reason}",
                                "install": exc.install})
                continue
            queue.append((bcls, bvariant, "baseline"))
    return list(out.values()), skipped


def make_archive(res: Resources, files: int, seed: int = 1) -> tuple[Path, int]:
    """A tar of a generated source-like tree (random bytes, 1–32 KiB files,
    nested directories) on a private tmpfs: (path, payload bytes)."""
    rng = random.Random(seed)
    root = res.tmpdir("cryptcost-tree-")
    res.tmpfs(root, files * 40 * 1024 + (16 << 20), "0700")
    archive = root / "tree.tar"
    total = 0
    with tarfile.open(archive, "w") as tar:
        for i in range(files):
            size = rng.randint(1024, 32 * 1024)
            info = tarfile.TarInfo(f"src/mod{i % 40:02d}/sub{i % 7}/file{i:05d}.c")
            info.size = size
            info.mtime = 1_700_000_000
            tar.addfile(info, io.BytesIO(os.urandom(size)))
            total += size
    return archive, total



def _daemon_cpu(pids: list[int]) -> float:
    total = 0.0
    try:
        import psutil
        for pid in pids:
            try:
                t = psutil.Process(pid).cpu_times()
                total += t.user + t.system + t.children_user + t.children_system
            except psutil.Error:
                pass
    except ImportError:
        pass
    return total


class StepRunner:
    """Runs one workload step on one instance and turns it into samples."""

    def __init__(self, res: Resources, archive: tuple[Path, int] | None, direct: bool):
        self.res = res
        self.archive = archive
        self.direct = direct

    def __call__(self, inst: Instance, step: wl.Step) -> dict[tuple, Sample]:
        workdir = inst.workdir
        if step.layout:
            fio.run(step.layout, workdir, step.name)
        out = {}
        reset = "fsync"
        try:
            for op in step.ops:
                cache = "direct" if self.direct else "fsync"
                if op.reset_before:
                    reset = "fsync+" + inst.stack.reset_cache(self.res).replace("_", "-")
                    cache = reset
                elif not self.direct and op.op in ("write", "create", "randwrite"):
                    cache = "fsync"
                elif not self.direct and op.op in ("read", "randread", "stat"):
                    cache = reset                     # the step's one reset still holds: nothing read since
                else:
                    cache = "direct" if self.direct else "fsync"
                out[(inst.label, op.key)] = self.measure(inst, op, step, cache)
        finally:
            self.clean(workdir, step)
        return out

    def measure(self, inst: Instance, op: wl.Op, step: wl.Step, cache: str) -> Sample:
        pids = inst.stack.daemon_pids()
        before, dbefore = cpu.stat_snapshot(), _daemon_cpu(pids)
        harness = cpu.harness_cpu()
        metrics: dict = {"cache_mode": cache, "unit": op.unit}
        if op.kind == "fio":
            outcome, wall = fio.run(op.fio, inst.workdir, op.file or step.name)
            moved = outcome.io_bytes
            seconds = outcome.runtime_s
            if inst.stack.writes_complete_on_close and op.op in ("write", "create", "randwrite"):
                seconds = wall                      # the flush happens on close, after fio's clock
                metrics["timing"] = "wall clock including close"
            count = outcome.total_ios
            metrics.update(iops=outcome.iops, lat_p50_us=outcome.lat_p50_us,
                           lat_p99_us=outcome.lat_p99_us, fio_version=outcome.extra.get("fio_version"))
            self.check_moved(inst, op, moved, outcome)
        elif op.kind == "untar":
            moved, count, seconds = self.untar(inst)
        else:
            moved, count, seconds, engine = self.dbench(inst, op, step)
            metrics["engine"] = engine
        metrics["harness_cpu_s"] = cpu.harness_cpu() - harness
        after, dafter = cpu.stat_snapshot(), _daemon_cpu(pids)
        split = cpu.cpu_split(before, after, daemons=max(0.0, dafter - dbefore))
        seconds = max(seconds, 1e-6)
        value = (count / seconds) if op.unit == "ops/s" else moved / seconds
        if op.files > 1:
            metrics["files_per_s"] = op.files / seconds
        if moved:
            metrics["cpu_s_per_gib"] = split.busy / (moved / GiB)
        if count:
            metrics["cpu_us_per_op"] = split.busy / count * 1e6
        return Sample(value=value, seconds=seconds, bytes_moved=moved, cpu=split, metrics=metrics)

    @staticmethod
    def check_moved(inst: Instance, op: wl.Op, moved: int, outcome: fio.FioOutcome) -> None:
        """Rule 5: the bytes moved are the bytes intended."""
        if op.intended_bytes is not None and moved != op.intended_bytes:
            raise DataIntegrityError(f"{inst.label} {op.workload} {op.op}: moved {moved} bytes "
                                     f"of the {op.intended_bytes} intended")
        if op.fio and op.fio.rw not in fio.FILE_OPS and outcome.total_ios * op.block_bytes < moved:
            raise DataIntegrityError(f"{inst.label} {op.op}: fio's byte and request counts disagree")

    def untar(self, inst: Instance) -> tuple[int, int, float]:
        archive, payload = self.archive
        target = inst.workdir / "cc-small-tree"
        target.mkdir(exist_ok=True)
        start = time.perf_counter()
        proc.run(["tar", "-xf", str(archive), "-C", str(target)], timeout=900)
        proc.run(["sync", "-f", str(target)], timeout=900)
        seconds = time.perf_counter() - start
        files = sum(1 for _, _, names in os.walk(target) for _ in names)
        return payload, files, seconds

    def dbench(self, inst: Instance, op: wl.Op, step: wl.Step) -> tuple[int, int, float, str]:
        """dbench's NetBench-like mix (R4) when installed; fio randrw otherwise."""
        if proc.which("dbench") and os.path.exists(DBENCH_LOADFILE):
            target = inst.workdir / "cc-dbench"
            target.mkdir(exist_ok=True)
            seconds = DBENCH_SECONDS
            done = proc.run(["dbench", "-D", str(target), "-t", str(seconds), "-c", DBENCH_LOADFILE,
                             str(op.iodepth)], timeout=seconds * 10 + 120)
            match = re.search(r"Throughput ([\d.]+) MB/sec", done.stdout)
            if not match:
                raise CryptcostError(f"dbench printed no throughput on {inst.label}")
            rate = float(match.group(1)) * 1e6          # dbench's MB is 10^6 bytes
            return int(rate * seconds), 0, float(seconds), f"dbench {op.iodepth} clients"
        outcome, _ = fio.run(op.fio, inst.workdir, step.name)
        return outcome.io_bytes, outcome.total_ios, outcome.runtime_s, "fio randrw 70/30 (no dbench)"

    @staticmethod
    def clean(workdir: Path, step: wl.Step) -> None:
        for path in workdir.glob(f"{step.name}*"):
            if path.is_dir():
                proc.run(["rm", "-rf", "--one-file-system", str(path)], timeout=900)
            else:
                path.unlink(missing_ok=True)


def validate(plan: StoragePlan) -> tuple[list[tuple[Stack, str]], list[dict]]:
    """Everything that can be refused before anything is created or recorded."""
    names = wl.expand(plan.workloads)
    resolved, skipped = resolve(plan.stacks, plan.fs)
    if not any(role == "measured" for _, role in resolved):
        raise UserError("no stack to measure: " + "; ".join(s["reason"] for s in skipped[:3]))
    if os.geteuid() != 0:
        raise UserError("storage stacks need root (loop devices, mounts, FUSE): run with sudo")
    if plan.size is None:
        plan.size = plan.medium.auto_size(len(resolved))
    plan.medium.check(plan.size, len(resolved))
    if names and "smallfiles" in names and not proc.which("tar"):
        raise UserError("the smallfiles workload needs tar: apt-get install tar")
    return resolved, skipped


def describe_plan(plan: StoragePlan, resolved: list[tuple[Stack, str]], skipped: list[dict]) -> list[str]:
    """What will run, in a few lines for people, before anything starts."""
    measured = [s.label for s, role in resolved if role == "measured"]
    baselines = [s.label for s, role in resolved if role == "baseline"]
    direct = all(s.honours_direct for s, _ in resolved)
    steps = wl.build(wl.expand(plan.workloads), wl.Sizes(medium=plan.size or 512 << 20), direct)
    total = plan.size * len(resolved)
    lines = [f"stacks: {', '.join(measured)}" + (f"  (baselines: {', '.join(baselines)})" if baselines else ""),
             f"workloads: {', '.join(wl.expand(plan.workloads))} — {len(steps)} steps × "
             f"{len(resolved)} stacks, each repeated until stable",
             f"medium: {plan.medium.describe()['medium']}, {plan.size >> 20} MiB per stack "
             f"({total / GiB:.1f} GiB in all); cache mode: "
             f"{'O_DIRECT' if direct else 'buffered, fsync after writes, caches dropped before reads'}"]
    for s in skipped:
        lines.append(f"not measured: {s['stack']}: {s['reason']}"
                     + (f" (install: {s['install']})" if s.get("install") else ""))
    return lines


def run_storage(plan: StoragePlan, policy: stats.Policy, *, res: Resources, sink: Sink | None = None,
                progress: Progress | None = None) -> StorageOutcome:
    """Set up, measure, compare. Teardown happens when ``res`` is released.

    With ``plan.cpus`` the process pins itself to that many CPUs first, so
    that fio and every daemon a stack starts inherit the restriction; kernel
    workers (kcryptd, fscrypt's writeback) are not restricted, which each
    result records.
    """
    if plan.cpus:
        return _pinned(plan, policy, res=res, sink=sink, progress=progress)
    return _run_storage(plan, policy, res=res, sink=sink, progress=progress)


def _pinned(plan: StoragePlan, policy: stats.Policy, **kw) -> StorageOutcome:
    allowed = sorted(os.sched_getaffinity(0))
    if plan.cpus > len(allowed):
        raise UserError(f"cpus {plan.cpus} is more than the {len(allowed)} CPUs this process may use")
    os.sched_setaffinity(0, allowed[:plan.cpus])
    try:
        return _run_storage(plan, policy, **kw)
    finally:
        os.sched_setaffinity(0, allowed)


def _run_storage(plan: StoragePlan, policy: stats.Policy, *, res: Resources, sink: Sink | None = None,
                 progress: Progress | None = None) -> StorageOutcome:
    resolved, skipped = validate(plan)
    sizes = plan.sizes or wl.Sizes(medium=plan.size)
    if sizes.medium != plan.size:
        from dataclasses import replace
        sizes = replace(sizes, medium=plan.size)
    names = wl.expand(plan.workloads)
    instances = [Instance(stack, stack.label, role) for stack, role in resolved]
    direct = all(i.stack.honours_direct for i in instances)
    failed: list[str] = []
    for inst in instances:
        try:
            backing = plan.medium.provide(res, plan.size)
            inst.workdir = inst.stack.setup(res, backing)
            inst.stack.integrity = check_pattern(inst.workdir,
                                                 reset=lambda s=inst.stack: s.reset_cache(res))
        except (CryptcostError, OSError) as exc:
            inst.error = str(exc)
            skipped.append({"stack": inst.label, "reason": f"setup failed: {getattr(exc, 'reason', exc)}",
                            "install": getattr(exc, "install", None)})
            if inst.role == "measured" and not isinstance(exc, Unavailable):
                failed.append(f"{inst.label}: {exc}")
            log.warning("%s: setup failed: %s", inst.label, exc)
    ready = [i for i in instances if not i.error]
    archive = make_archive(res, sizes.small_files // 2) if "smallfiles" in names else None
    runner = StepRunner(res, archive, direct)
    steps = wl.build(names, sizes, direct)
    jobs = [Job(label=f"{inst.label}: {step.label}", keys=tuple((inst.label, op.key) for op in step.ops),
                measure=lambda inst=inst, step=step: runner(inst, step), group=step.name,
                est_seconds=2.0 * len(step.ops))
            for step in steps for inst in ready]
    sink = sink or Sink()
    op_of = {op.key: op for step in steps for op in step.ops}
    series = schedule(jobs, policy, progress=progress, on_sample=lambda job, key, i, s: sink.sample(
        "storage", _fields(_inst(ready, key[0]), op_of[key[1]], plan), i, s))
    outcome = StorageOutcome(skipped=skipped, cache_mode="direct" if direct else "buffered+fsync",
                             failed=failed)
    for inst in ready:
        for step in steps:
            for op in step.ops:
                s = series.get((inst.label, op.key))
                if s is None:
                    continue
                if not s.samples:
                    outcome.skipped.append({"stack": inst.label, "workload": op.workload,
                                            "reason": s.error or "no samples"})
                    if s.error and f"{inst.label} {op.workload}: {s.error}" not in outcome.failed:
                        outcome.failed.append(f"{inst.label} {op.workload}: {s.error}")
                    continue
                result = _result(inst, op, s, series, plan)
                sink.result(result)
                outcome.results.append(result)
    return outcome


def _inst(instances: list[Instance], label: str) -> Instance:
    return next(i for i in instances if i.label == label)


def _fields(inst: Instance, op: wl.Op, plan: StoragePlan) -> dict:
    fields = {"stack": inst.label, "params": inst.stack.describe(),
              "medium": plan.medium.describe()["medium"], "fs": inst.stack.fs, "workload": op.workload,
              "op": op.op, "block_bytes": op.block_bytes, "iodepth": op.iodepth}
    if plan.cpus:
        fields["cpus"] = plan.cpus
        fields["params"]["affinity"] = "fio and stack daemons pinned; kernel workers not"
    return fields


def _median_metric(samples: list[Sample], name: str):
    values = [s.metrics.get(name) for s in samples if isinstance(s.metrics.get(name), (int, float))]
    return statistics.median(values) if values else None


def _result(inst: Instance, op: wl.Op, s: Series, series: dict, plan: StoragePlan) -> Result:
    samples = s.samples
    cpu_mean = {k: statistics.fmean(getattr(x.cpu, k) for x in samples if x.cpu)
                for k in ("user", "system", "iowait", "softirq", "irq", "daemons", "max_core_busy")}
    metrics = {
        "unit": op.unit, "role": inst.role,
        "iops": _median_metric(samples, "iops"),
        "lat_p50_us": _median_metric(samples, "lat_p50_us"),
        "lat_p99_us": _median_metric(samples, "lat_p99_us"),
        "cpu_s_per_gib": _median_metric(samples, "cpu_s_per_gib"),
        "cpu_us_per_op": _median_metric(samples, "cpu_us_per_op"),
        "files_per_s": _median_metric(samples, "files_per_s"),
        "cpu": cpu_mean,
        "bytes_moved": samples[-1].bytes_moved,
        "cache_mode": samples[-1].metrics.get("cache_mode"),
        "engine": samples[-1].metrics.get("engine", "fio"),
    }
    notes = [s.error] if s.error else []
    short = statistics.median(x.seconds for x in samples)
    if short < SHORT_SAMPLE:
        notes.append(f"each sample lasted only {short * 1000:.0f} ms, where fio's 1 ms timer and "
                     "start-up weigh several percent: pass a larger --size")
    if samples[-1].metrics.get("timing"):
        metrics["timing"] = samples[-1].metrics["timing"]
    stack = inst.stack
    if stack.security:
        metrics["security"] = list(stack.security)
    bases = [b for b in (stack.baseline, *stack.extra_baselines) if b]
    metrics["baseline"] = bases[0] if bases else None
    metrics.update(overhead=None, overhead_ci95=None)
    comparisons = {}
    for base in bases:
        bs = series.get((base, op.key))
        if bs is None or not bs.samples:
            notes.append(f"baseline {base} has no samples for this workload")
            continue
        cmp = stats.compare(bs.values(), s.values())
        comparisons[base] = {"overhead": 1 - cmp.ratio,
                             "overhead_ci95": [1 - cmp.ratio_ci95[1], 1 - cmp.ratio_ci95[0]],
                             "significant": cmp.significant, "verdict": cmp.verdict}
    if bases and bases[0] in comparisons:
        metrics.update(overhead=comparisons[bases[0]]["overhead"],
                       overhead_ci95=comparisons[bases[0]]["overhead_ci95"],
                       overhead_significant=comparisons[bases[0]]["significant"])
    metrics["vs"] = comparisons
    return Result(kind="storage", fields=_fields(inst, op, plan), summary=stats.summarize(s.values()),
                  stop_reason=s.stop_reason or "cap_reached", samples=tuple(samples), metrics=metrics,
                  notes=tuple(notes))
