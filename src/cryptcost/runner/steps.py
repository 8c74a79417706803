"""One workload step on one storage stack instance, turned into samples.

A step's operations run back to back (write, then read what was written),
each timed by its engine and accounted with the whole system's CPU
(rule 7): ``/proc/stat`` around the operation plus the rusage of the
stack's daemons.
"""

from __future__ import annotations

import io
import os
import random
import re
import tarfile
import time
from dataclasses import dataclass
from pathlib import Path

from cryptcost import proc
from cryptcost.engines import fio
from cryptcost.errors import CryptcostError, DataIntegrityError
from cryptcost.host import cpu
from cryptcost.lifecycle.resources import Resources
from cryptcost.model import Sample
from cryptcost.stacks.fs import StorageStack
from cryptcost.workloads import storage as wl

GiB = 1 << 30
DBENCH_LOADFILE = "/usr/share/dbench/client.txt"
DBENCH_SECONDS = 10
WRITES = ("write", "create", "randwrite")


@dataclass
class Instance:
    """One stack, set up on its own block device. ``role`` says how it got
    into the run: asked for (``measured``) or added as a ``baseline``."""

    stack: StorageStack
    label: str
    role: str
    workdir: Path | None = None
    error: str | None = None


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
        if op.engine == "fio":
            outcome, _ = fio.run(op.fio, inst.workdir, op.file or step.name)
            moved = outcome.io_bytes
            seconds = outcome.runtime_s
            if op.op in WRITES:
                # One clock for every stack: fio's, plus the time until the data is durable.
                metrics["settle_s"] = inst.stack.settle()
                seconds += metrics["settle_s"]
                metrics["timing"] = "fio's runtime + the time until durable on the medium"
            count = outcome.total_ios
            metrics.update(iops=outcome.iops, lat_p50_us=outcome.lat_p50_us,
                           lat_p99_us=outcome.lat_p99_us, fio_version=outcome.extra.get("fio_version"))
            self.check_moved(inst, op, moved, outcome)
        elif op.engine == "untar":
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
