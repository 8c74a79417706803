"""The storage operations a program other than fio measures, each timed until what it wrote is
durable: tar's unpacking of a source tree (R3), rsync's copy of a large file into the stack
(R1), bonnie++'s block write, rewrite and read (R2) and dbench's mix (R4). Each returns one
:class:`Pass`, as fio's pass does (runner.storage.steps)."""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import NamedTuple

from cryptcost import proc
from cryptcost.engines import bonnie, dbench, fio
from cryptcost.errors import CryptcostError, DataIntegrityError
from cryptcost.lifecycle.resources import Resources
from cryptcost.stacks.fs import StorageStack, drop_caches
from cryptcost.workloads import storage as wl

log = logging.getLogger("cryptcost.storage")
CHUNK = 4 << 20              # what one read or write of rsync's source moves


class Pass(NamedTuple):
    """What one pass of any engine did: the bytes it moved, the operations (or files) it
    counted, its seconds, what it says of itself (metrics), and the CPU snapshot its window
    begins at where that is not when the pass began (fio's first I/O)."""

    moved: int
    count: int
    seconds: float
    said: dict
    cpu_from: object | None = None


def untar(stack: StorageStack, workdir: Path, archive: tuple[Path, int]) -> Pass:
    """The generated tree unpacked into the stack with tar, until durable on the medium (the
    stack's own :meth:`~StorageStack.settle`: a FUSE stack's lower filesystem too, rclone's
    upload of every file)."""
    path, payload = archive
    target = workdir / "cc-small-tree"
    target.mkdir(exist_ok=True)
    start = time.perf_counter()
    proc.run(["tar", "-xf", str(path), "-C", str(target)], timeout=900)
    seconds = time.perf_counter() - start + stack.settle()
    files = sum(1 for _, _, names in os.walk(target) for _ in names)
    return Pass(payload, files, seconds, {"timing": "tar's unpacking + the time until durable "
                                                    "on the medium"})


class Programs:
    """The engines other than fio, each as one pass ``(inst, op, step, left)`` inside the
    profiler's ``window`` (runner.storage.steps): tar into the stack from ``archive``, rsync
    from a source file made once per size, bonnie++ phase by phase, dbench's mix."""

    def __init__(self, res: Resources, archive: tuple[Path, int] | None):
        self.archive = archive
        self.sources = Sources(res)                  # rsync's source files
        self.bonnie = Bonnies(res)                   # bonnie++ runs, phase by phase

    def passes(self, window) -> dict:
        def inside(run, before=lambda op: None):
            """``run(inst, op, step, ready)`` inside the window; ``before(op)`` readies what
            it needs outside it (rsync's source, read into the page cache)."""
            def one(inst, op: wl.Op, step: wl.Step, left: float | None) -> Pass:
                ready = before(op)
                with window(inst, op):
                    return run(inst, op, step, ready)
            return one
        return {
            "bonnie": inside(lambda inst, op, step, _: self.bonnie.phase(inst, op, step)),
            "untar": inside(lambda inst, op, step, _: untar(inst.stack, inst.workdir,
                                                            self.archive)),
            "rsync": inside(lambda inst, op, step, source: rsync(
                inst.label, inst.stack, inst.workdir / f"{step.name}.dat", source),
                before=lambda op: self.sources(op.intended_bytes or 1)),
            "dbench": inside(lambda inst, op, step, _: mix(inst.stack, inst.workdir, op,
                                                           step.name))}


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


def rsync(label: str, stack: StorageStack, target: Path, source: Path) -> Pass:
    """R1's copy: ``rsync`` of ``source`` to ``target`` in the stack, until durable on the
    medium (the stack's own :meth:`~StorageStack.settle`, as for fio's writes)."""
    size = source.stat().st_size
    start = time.perf_counter()
    proc.run(["rsync", "--whole-file", str(source), str(target)], timeout=size / 1e6 + 300)
    seconds = time.perf_counter() - start + stack.settle()
    got = target.stat().st_size
    if got != size:
        raise DataIntegrityError(f"{label} rsync: copied {got} bytes of {size}")
    return Pass(got, 1, seconds, {"cache_mode": "fsync", "engine": "rsync",
                                  "timing": "rsync's copy (its source read from the page cache) "
                                            "+ the time until durable on the medium"})


class Bonnies:
    """bonnie++ runs, one per instance at a time: a step's write starts one, each op runs its
    phase, and :meth:`end` collects bonnie++'s own figures once the step's last sample was
    counted (after the read, bonnie++ starts its seek test's workers and sleeps: that is no
    sample's time, nor its CPU)."""

    def __init__(self, res: Resources):
        self.res = res
        self.runs: dict[str, bonnie.Run] = {}
        self._log: Path | None = None

    def phase(self, inst, op: wl.Op, step: wl.Step) -> Pass:
        """``op``'s phase of the instance's bonnie++ run; before a rewrite or a read, the file
        is evicted, outside the clock, where the stack can while bonnie++ holds it open (its
        own :meth:`~StorageStack.forget`; with a page cache below the device, every clean page
        dropped)."""
        if op.op == "write":
            self.end(inst.label)
            if self._log is None and self.res is not None:
                self._log = self.res.tmpdir("cryptcost-bonnie-") / "bonnie.log"
            run = bonnie.Run(inst.workdir / step.name, op.intended_bytes,
                             str(self._log) if self._log else None)
            self.runs[inst.label] = run
            run.start()
        run = self.runs.get(inst.label)
        if run is None:
            raise CryptcostError(f"{inst.label}: bonnie++'s {op.op} without its write")
        timeout = op.intended_bytes / 1e6 + 300
        said = {"cache_mode": "fsync", "engine": "bonnie++", "data": bonnie.DATA,
                "timing": bonnie.TIMING + (
            "; it reads each chunk and writes it back, and its rate is the file's size over "
            "that time, as bonnie++'s own" if op.op == "rewrite" else "")}
        before = None
        if op.op != "write" and inst.stack.resets_open_files:
            def before(path: Path) -> None:
                if inst.cached_below:
                    drop_caches()
                    mode = "drop_caches"
                else:
                    mode = inst.stack.forget(self.res, path)
                said["cache_mode"] = "fsync+" + mode.replace("_", "-")
        elif op.op != "write":
            said["cache_mode"] = "warm"
            said["warm_because"] = (f"{inst.stack.name}'s cache reset is a remount, which "
                                    "bonnie++'s open file refuses: this phase may read from its "
                                    "cache")
        done = run.phase(op.op, timeout, before)
        if op.op in ("write", "rewrite"):
            # bonnie++ fsynced the file; a stack's own writeback below it is in the clock too
            done.seconds += inst.stack.settle()
        if done.seconds < 1.0:
            said["short_because"] = (f"bonnie++'s {op.op} of its {done.bytes >> 20} MiB file, as "
                                     "large as the medium allows, took "
                                     f"{done.seconds * 1000:.0f} ms")
        return Pass(done.bytes, done.bytes // bonnie.CHUNK, done.seconds, said)

    def end(self, label: str) -> dict | None:
        """End the instance's run: bonnie++'s own figures when its read was done, else None
        (a run cut short is stopped)."""
        run = self.runs.pop(label, None)
        if run is None:
            return None
        if run.done != list(bonnie.PHASES):
            run.stop()
            return None
        try:
            return run.finish()
        except CryptcostError as exc:          # its phases were measured: only its own figures lost
            run.stop()
            log.warning("%s: bonnie++'s own figures: %s", label, exc)
            return None


def mix(stack: StorageStack, workdir: Path, op: wl.Op, name: str) -> Pass:
    """dbench's NetBench-like mix (R4) with ``op.iodepth`` clients when installed; fio randrw
    otherwise. After dbench, the stack is made durable (its :meth:`~StorageStack.settle`)
    outside dbench's figure but inside the sample's CPU window: what a stack writes back later
    (a FUSE stack's lower filesystem, the kernel's writeback of encrypted pages) is counted in
    the sample's CPU, not left to the next step, its time recorded as ``settled_after_s``."""
    if dbench.available():
        # its files are removed with the step's (passes.clean_step), outside the clock
        done = dbench.run(workdir / f"{name}-dbench", op.iodepth)
        after = stack.settle()
        return Pass(done.bytes, 0, done.wall_seconds, {
            "engine": f"dbench {op.iodepth} clients", "settled_after_s": round(after, 3),
            "timing": dbench.TIMING + "; then, outside it, the time until durable on the medium "
                                      "(settled_after_s), whose CPU the sample counts"})
    outcome, _ = fio.run(op.fio, workdir, name)
    return Pass(outcome.io_bytes, outcome.total_ios, outcome.runtime_s,
                {"engine": "fio randrw 70/30 (no dbench)"})
