"""The storage operations a program other than fio measures, each timed until what it wrote is
durable: tar's unpacking of a source tree (R3), rsync's copy of a large file into the stack
(R1) and dbench's mix (R4). Each returns (bytes, count, seconds, metrics)."""

from __future__ import annotations

import os
import time
from pathlib import Path

from cryptcost import proc
from cryptcost.engines import dbench, fio
from cryptcost.errors import DataIntegrityError
from cryptcost.lifecycle.resources import Resources
from cryptcost.stacks.fs import StorageStack
from cryptcost.workloads import storage as wl

CHUNK = 4 << 20              # what one read or write of rsync's source moves
Outcome = tuple[int, int, float, dict]


def untar(workdir: Path, archive: tuple[Path, int]) -> Outcome:
    """The generated tree unpacked into the stack with tar, until synced."""
    path, payload = archive
    target = workdir / "cc-small-tree"
    target.mkdir(exist_ok=True)
    start = time.perf_counter()
    proc.run(["tar", "-xf", str(path), "-C", str(target)], timeout=900)
    proc.run(["sync", "-f", str(target)], timeout=900)
    seconds = time.perf_counter() - start
    files = sum(1 for _, _, names in os.walk(target) for _ in names)
    return payload, files, seconds, {}


class Sources:
    """Files of random bytes outside every stack, for :func:`rsync` to copy: each size made
    once, then read through before each copy, outside the clock, so the copy reads it from the
    page cache and its time is the stack's writing. (R1 dropped every cache between copies: its
    source, on the same disk, was read from the disk too.) They sit under the resources' base:
    on a ``dir:`` medium, beside the medium's file, on the same disk, as R1's did."""

    def __init__(self, res: Resources):
        self.res = res
        self.made: dict[int, Path] = {}

    def __call__(self, n: int) -> Path:
        path = self.made.get(n)
        if path is None:
            path = self.res.tmpdir("cryptcost-rsync-") / f"source-{n}.dat"
            with open(path, "wb") as out:
                for left in range(n, 0, -CHUNK):
                    out.write(os.urandom(min(CHUNK, left)))
            self.made[n] = path
        with open(path, "rb") as src:
            while src.read(CHUNK):
                pass
        return path


def rsync(label: str, stack: StorageStack, target: Path, source: Path) -> Outcome:
    """R1's copy: ``rsync`` of ``source`` to ``target`` in the stack, until durable on the
    medium (the stack's own :meth:`~StorageStack.settle`, as for fio's writes)."""
    size = source.stat().st_size
    start = time.perf_counter()
    proc.run(["rsync", "--whole-file", str(source), str(target)], timeout=size / 1e6 + 300)
    seconds = time.perf_counter() - start + stack.settle()
    got = target.stat().st_size
    if got != size:
        raise DataIntegrityError(f"{label} rsync: copied {got} bytes of {size}")
    return got, 1, seconds, {"cache_mode": "fsync", "engine": "rsync",
                             "timing": "rsync's copy (its source read from the page cache) + "
                                       "the time until durable on the medium"}


def mix(workdir: Path, op: wl.Op, name: str) -> Outcome:
    """dbench's NetBench-like mix (R4) with ``op.iodepth`` clients when installed; fio randrw
    otherwise."""
    if dbench.available():
        # its files are removed with the step's (StepRunner.clean), outside the clock
        done = dbench.run(workdir / f"{name}-dbench", op.iodepth)
        return done.bytes, 0, done.wall_seconds, {"engine": f"dbench {op.iodepth} clients",
                                                   "timing": dbench.TIMING}
    outcome, _ = fio.run(op.fio, workdir, name)
    return (outcome.io_bytes, outcome.total_ios, outcome.runtime_s,
            {"engine": "fio randrw 70/30 (no dbench)"})
