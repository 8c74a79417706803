"""Storage workloads, and the named sets of them (quick, seeds, full).

A workload is built into :class:`Step` objects for a given medium size. One
step is one scheduled job on one stack: its operations run back to back
(write, then read what was written) and each yields one sample.

Random I/O is size-based, not time-based: every block is touched exactly
once, so a stack that does not honour O_DIRECT cannot serve repeated reads
from the page cache.
"""

from __future__ import annotations

import io
import os
import random
import tarfile
from dataclasses import dataclass
from pathlib import Path

from cryptcost import units
from cryptcost.engines import bonnie
from cryptcost.engines.fio import FioJob
from cryptcost.errors import UserError
from cryptcost.lifecycle.resources import Resources

KiB, MiB = 1024, 1024 * 1024
R3_SIZES = (512, 1 * KiB, 2 * KiB, 4 * KiB, 8 * KiB, 16 * KiB, 32 * KiB)
SEQ_SWEEP = R3_SIZES + (128 * KiB, MiB)
DATA_FRACTION = 0.4     # of the medium a workload may fill (FUSE caches sit on the same medium)
# Of the medium one pass sized by time may fill on a stack whose read is made cold by
# evicting pages alone (plain, fscrypt, a FUSE daemon that keeps no data, a qemu
# export: StorageStack.evicts_one_file), so no daemon's cache shares the medium:
# fewer, longer passes, so fewer of fio's fixed ~0.25 s start-ups (library loading,
# clock calibration, a 100 ms wait for its job).
ROOM_FRACTION = 0.75


@dataclass(frozen=True)
class Op:
    """One measured operation. ``unit`` is bytes/s or ops/s."""

    workload: str
    op: str
    block_bytes: int
    iodepth: int = 1
    fio: FioJob | None = None
    engine: str = "fio"                  # fio | untar (tar) | dbench | rsync | bonnie (bonnie++)
    unit: str = "bytes/s"
    reset_before: bool = False           # drop caches / remount first (reads)
    intended_bytes: int | None = None    # what must be moved (rule 5)
    files: int = 1
    file: str | None = None              # fio file-name stem; default: the step's
    by_time: bool = False                # each pass stops after the sample's minimum time
    # by time: the largest pass where the file's cache is the only one
    room: int | None = None

    @property
    def key(self) -> tuple:
        return (self.workload, self.op, self.block_bytes, self.iodepth)


@dataclass(frozen=True)
class Step:
    label: str
    name: str                            # file-name stem, unique per step
    ops: tuple[Op, ...]
    layout: FioJob | None = None         # written, untimed, before the ops


@dataclass(frozen=True)
class Sizes:
    """How big things are, from the medium size and the suite."""

    medium: int
    seq_cap: int = 256 * MiB             # at most this much per sequential op
    ops_cap: int = 32768                 # and at most this many requests
    rand_file: int = 64 * MiB
    small_files: int = 2000

    def seq_bytes(self, bs: int) -> int:
        limit = min(self.seq_cap, int(self.medium * DATA_FRACTION), bs * self.ops_cap)
        return max(bs, limit // bs * bs)

    def seq_room(self, bs: int, files: int = 1) -> int:
        """The largest pass sized by time, on a stack whose only cache is the
        file's own, when ``files`` such files share the medium."""
        limit = min(int(self.medium * ROOM_FRACTION) // files, bs * self.ops_cap)
        return max(bs, limit // bs * bs)


def write_read(workload: str, bs: int, n: int, direct: bool, *, reset: bool = True,
               file: str | None = None, by_time: bool = False,
               room: int | None = None) -> tuple[Op, Op]:
    """A sequential write of ``n`` bytes (flushed when buffered) and the read
    of the same file (after a cache reset when buffered and ``reset``).
    ``by_time``: each pass moves at most ``n`` bytes and stops after the
    sample's minimum time, so a slow stack's sample lasts a second, not
    ``n`` bytes' worth (the read then reads what the write wrote); ``room``:
    what a pass may move instead of ``n`` where the file's cache is the only one."""
    write = Op(workload, "write", bs,
               fio=FioJob("write", bs, n, direct=direct, end_fsync=not direct),
               intended_bytes=n, file=file, by_time=by_time, room=room)
    read = Op(workload, "read", bs, fio=FioJob("read", bs, n, direct=direct), intended_bytes=n,
              reset_before=reset and not direct, file=file, by_time=by_time, room=room)
    return write, read


def seq_steps(sizes: Sizes, blocks: tuple[int, ...], direct: bool, name: str = "seq") -> list[Step]:
    """One step per block size: write, then (caches reset) read the same file."""
    return [Step(f"{name} {bs} B", f"cc-{name}-{bs}",
                 write_read(name, bs, sizes.seq_bytes(bs), direct, by_time=True,
                            room=sizes.seq_room(bs)))
            for bs in blocks]


def _seq_together(sizes: Sizes, blocks: tuple[int, ...], direct: bool) -> list[Step]:
    """Sequential writes at every block size, one cache reset, then the reads:
    one remount per round instead of one per block size (the quick suite)."""
    # every file is on the medium at once
    share = int(sizes.medium * DATA_FRACTION) // len(blocks)
    pairs = [write_read("seq", bs, max(bs, min(sizes.seq_bytes(bs), share) // bs * bs), direct,
                        reset=(i == 0), file=f"cc-seq-{bs}", by_time=True,
                        room=sizes.seq_room(bs, len(blocks)))
             for i, bs in enumerate(blocks)]
    ops = tuple(w for w, _ in pairs) + tuple(r for _, r in pairs)
    return [Step("seq " + ", ".join(str(b) for b in blocks), "cc-seq", ops)]


def _rand4k(sizes: Sizes, direct: bool, depths: tuple[int, ...] = (1, 32)) -> list[Step]:
    # whole blocks of the layout's writes, so the random jobs read only what was written
    n = max(MiB, min(sizes.rand_file, int(sizes.medium * DATA_FRACTION)) // MiB * MiB)
    ops = []
    for rw in ("randread", "randwrite"):
        for qd in depths:
            ops.append(Op("rand4k", rw, 4 * KiB, qd,
                          fio=FioJob(rw, 4 * KiB, n, iodepth=qd, direct=direct,
                                     end_fsync=(rw == "randwrite" and not direct)),
                          intended_bytes=n, reset_before=(rw == "randread" and not direct)))
    return [Step("rand4k", "cc-rand4k", tuple(ops),
                 layout=FioJob("write", MiB, n, direct=direct, end_fsync=True))]


R1_RATIOS = (1, 5, 10)      # R1 copied files of 1, 5 and 10 GB
R1_GIB = 1 << 30            # its GB: dd's bs=1G, and 5120 and 10240 MiB


def r1_files(sizes: Sizes) -> list[tuple[int, str, int]]:
    """R1's large files as (ratio, workload name, bytes): its own 1, 5 and 10 GiB where the
    medium holds them (a medium of 25 GiB or more), else 1 : 5 : 10 with the largest at
    40 % of the medium; one workload name per size (``bigfile-409M``) so their results stay
    apart, and each size's write, read and copy are one row."""
    largest = int(sizes.medium * DATA_FRACTION)
    if largest >= R1_RATIOS[-1] * R1_GIB:
        largest = R1_RATIOS[-1] * R1_GIB
    out = []
    for ratio in R1_RATIOS:
        n = max(MiB, largest * ratio // R1_RATIOS[-1] // MiB * MiB)
        out.append((ratio, f"bigfile-{n // MiB}M", n))
    return out


def _bigfile(sizes: Sizes, direct: bool) -> list[Step]:
    """R1's large files, written and (caches reset) read by fio in 1 MiB blocks."""
    return [Step(name, f"cc-big-{ratio}", write_read(name, MiB, n, direct))
            for ratio, name, n in r1_files(sizes)]


def _rsync(sizes: Sizes, direct: bool) -> list[Step]:
    """R1's own copy: rsync of a random file of each of R1's sizes from outside the stack
    into it, until durable (runner.storage.steps.StepRunner.rsync)."""
    return [Step(f"{name} rsync", f"cc-rsync-{ratio}",
                 (Op(name, "rsync", 0, engine="rsync", intended_bytes=n),))
            for ratio, name, n in r1_files(sizes)]


def _smallfiles(sizes: Sizes, direct: bool) -> list[Step]:
    n = sizes.small_files
    mean = 34 * KiB                    # 4–64 KiB uniform: fio draws each file's size
    total = n * mean
    common = dict(nrfiles=n, filesize="4k:64k")
    return [Step(f"smallfiles ×{n}", "cc-small", (
        Op("smallfiles", "create", 4 * KiB, files=n,
           fio=FioJob("write", 4 * KiB, total, end_fsync=True, **common)),
        Op("smallfiles", "read", 4 * KiB, files=n, reset_before=True,
           fio=FioJob("read", 4 * KiB, total, **common)),
        # one cold pass: caches reset (FUSE remounted), so every stat reaches the stack
        Op("smallfiles", "stat", 0, unit="ops/s", files=n, reset_before=True,
           fio=FioJob("filestat", 4 * KiB, total, **common)),
        Op("smallfiles", "delete", 0, unit="ops/s", files=n,
           fio=FioJob("filedelete", 4 * KiB, total, **common)),
        Op("smallfiles", "untar", 0, engine="untar", files=n)))]


def _bonnie(sizes: Sizes, direct: bool) -> list[Step]:
    """R2's bonnie++: its block write, rewrite and block read of one file in 8 KiB chunks, as
    large as a sequential file (40 % of the medium, at most ``seq_cap``) and never split
    (engines.bonnie)."""
    n = max(MiB, min(sizes.seq_bytes(MiB), bonnie.MOST) // MiB * MiB)
    return [Step(f"bonnie++ {units.size(n)}", "cc-bonnie", tuple(
        Op("bonnie", op, bonnie.CHUNK, engine="bonnie", intended_bytes=n)
        for op in bonnie.PHASES))]


def _mixed(sizes: Sizes, direct: bool) -> list[Step]:
    return [Step("mixed", "cc-mixed", (
        Op("mixed", "dbench", 0, engine="dbench", iodepth=2,
           fio=FioJob("randrw", 4 * KiB, 64 * MiB, rwmixread=70, end_fsync=True)),))]


BUILDERS = {
    "seq": lambda s, d: seq_steps(s, SEQ_SWEEP, d),
    "seq-quick": lambda s, d: _seq_together(s, (4 * KiB, MiB), d),
    "seq-1m": lambda s, d: seq_steps(s, (MiB,), d),
    "rand4k": _rand4k,
    "bigfile": _bigfile,
    "rsync": _rsync,
    "bonnie": _bonnie,
    "smallfiles": _smallfiles,
    "mixed": _mixed,
}
SETS = {
    "quick": ("seq-quick", "rand4k"),
    "seeds": ("seq", "bigfile", "rsync", "smallfiles", "mixed"),
    "full": ("seq", "rand4k", "bigfile", "rsync", "bonnie", "smallfiles", "mixed"),
}
WORKLOADS = tuple(BUILDERS)   # seq-1m: the quick suite's cell; seq-quick: 4 KiB and 1 MiB


def expand(names: list[str]) -> list[str]:
    """Workload names and set names → workload names, in order, once each."""
    out: list[str] = []
    for name in names:
        if name in SETS:
            out += SETS[name]
        elif name in BUILDERS:
            out.append(name)
        else:
            raise UserError(f"unknown workload {name!r}; choose from {', '.join(WORKLOADS)} "
                            f"or a set: {', '.join(SETS)}")
    return list(dict.fromkeys(out))


def steps(names: list[str], sizes: Sizes, direct: bool) -> list[Step]:
    """The steps of the named workloads. Two workloads that measure the same
    cell (``seq-1m`` and ``seq-quick`` both write and read 1 MiB blocks) are
    refused: their samples would join one series that neither planned."""
    steps: list[Step] = []
    owner: dict[tuple, str] = {}
    for name in expand(names):
        for step in BUILDERS[name](sizes, direct):
            for op in step.ops:
                if owner.setdefault(op.key, name) != name:
                    raise UserError(f"workloads {owner[op.key]} and {name} both measure "
                                    f"{op.workload} {op.op} {units.size(op.block_bytes)}: "
                                    "choose one of them")
            steps.append(step)
    return steps


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
