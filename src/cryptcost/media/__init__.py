"""Media: what a storage stack sits on. Every medium hands a stack a block
device of the requested size, so that every stack is built the same way
on RAM, in a directory, or on a named device.

* ``ram`` (default) — a preallocated file on a private tmpfs, written once
  so that every page of it is in memory, attached as a loop device: no disk
  in the picture, only the cost of the stack (R3).
* ``dir:PATH`` — a preallocated file in a scratch directory on the user's
  filesystem, attached as a loop device.
* ``device:/dev/X`` — the named block device itself; destructive, guarded
  by :mod:`cryptcost.media.guard`.
* ``throttled:RATE`` — RAM behind qemu-storage-daemon's throttle: a device
  of a known speed, to check the cost model (:mod:`cryptcost.media.throttled`).
"""

from __future__ import annotations

import mmap
import os
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path

from cryptcost import proc
from cryptcost.errors import UserError
from cryptcost.host import cpu
from cryptcost.lifecycle.resources import Resources

RAM_HEADROOM = 0.5          # never take more than half the available memory
AUTO_MIN, AUTO_MAX, AUTO_STEP = 128 << 20, 512 << 20, 64 << 20
# how a size that does not fit is made smaller, for cryptcost storage and for a plan
SMALLER = "pass a smaller --size (cryptcost storage) or [storage] size (a plan file)"


@dataclass(frozen=True)
class Backing:
    """A block device for one stack instance, and where it came from."""

    device: str
    size: int
    medium: str
    file: str | None = None
    cached: bool = False        # a page cache sits below the device (a buffered loop device)


class Medium(ABC):
    """Call order: ``require_room(size, count)`` before anything is created, then
    ``provide(res, size)`` once per stack instance."""

    @property
    def spec(self) -> str:
        """The medium as a plan's table or --medium names it (what :func:`parse_medium`
        reads)."""
        return self.name

    name: str

    @abstractmethod
    def require_room(self, size: int, count: int) -> None:
        """Refuse (UserError) when ``count`` instances of ``size`` cannot fit."""

    @abstractmethod
    def provide(self, res: Resources, size: int) -> Backing:
        """A fresh block device of ``size`` bytes."""

    def room(self) -> int:
        """Bytes this medium can give in all."""
        return AUTO_MAX * 64

    def auto_size(self, count: int) -> int:
        """The size per stack instance when the user names none: the room
        shared among ``count`` instances, 128 … 512 MiB in 64 MiB steps."""
        return self.fitted(AUTO_MAX, count)

    def fitted(self, size: int, count: int) -> int:
        """``size``, or the room shared among ``count`` instances in 64 MiB steps if that is
        smaller (never under 128 MiB, which :meth:`require_room` may still refuse): what a
        suite's own size becomes on a host with less room than it was written for."""
        share = self.room() // max(count, 1) // AUTO_STEP * AUTO_STEP
        return min(size, max(AUTO_MIN, share))

    def describe(self) -> dict:
        return {"medium": self.name}


class RamMedium(Medium):
    """A preallocated file on a private tmpfs, attached as a loop device.

    The file is allocated up front (fallocate) and then written once
    (:func:`touch`), so that no page of it is first touched inside a
    measured window: fallocate on tmpfs takes pages without writing them,
    and on a VM the first write to such a page faults it in from the host.
    The loop device uses direct I/O where the kernel allows it, so its data
    is not cached twice.
    """

    name = "ram"

    def room(self) -> int:
        return int(cpu.memory()["available"] * RAM_HEADROOM)

    def require_room(self, size: int, count: int) -> None:
        avail = cpu.memory()["available"]
        need = size * count
        if need > avail * RAM_HEADROOM:
            raise UserError(f"the ram medium needs {need / 2**30:.2f} GiB ({count} × "
                            f"{size / 2**20:.0f} MiB) but only {avail * RAM_HEADROOM / 2**30:.2f} "
                            "GiB (half the available memory) may be used: " + SMALLER)

    def image(self, res: Resources, size: int) -> Path:
        """A preallocated file of ``size`` bytes on a private tmpfs of its own."""
        root = res.tmpdir(f"cryptcost-{self.name}-")
        res.tmpfs(root, size + (8 << 20), "0700")
        image = root / "medium.img"
        preallocate(image, size)
        touch(image, size)
        return image

    def provide(self, res: Resources, size: int) -> Backing:
        image = self.image(res, size)
        device, cached = _attach(res, image)
        return Backing(device, size, self.name, str(image), cached=cached)


class DirMedium(Medium):
    """A preallocated file in the user's scratch directory, as a loop device."""

    name = "dir"

    def __init__(self, path: str):
        self.path = Path(path)

    @property
    def spec(self) -> str:
        return f"dir:{self.path}"

    def room(self) -> int:
        try:
            free = os.statvfs(self.path)
        except OSError:
            return 0
        return int(free.f_bavail * free.f_frsize * 0.9)

    def require_room(self, size: int, count: int) -> None:
        if not self.path.is_dir():
            raise UserError(f"dir:{self.path} is not a directory: create it or name another")
        if not os.access(self.path, os.W_OK):
            raise UserError(f"dir:{self.path} is not writable")
        free = os.statvfs(self.path)
        avail = free.f_bavail * free.f_frsize
        if size * count > avail * 0.9:
            raise UserError(f"dir:{self.path} has {avail / 2**30:.1f} GiB free but {count} × "
                            f"{size / 2**20:.0f} MiB are needed: " + SMALLER)

    def provide(self, res: Resources, size: int) -> Backing:
        res.base = self.path
        root = res.tmpdir("cryptcost-dir-")
        image = root / "medium.img"
        preallocate(image, size)
        device, cached = _attach(res, image)
        return Backing(device, size, self.name, str(image), cached=cached)

    def describe(self) -> dict:
        return {"medium": f"dir:{self.path}"}


def preallocate(image: Path, size: int) -> None:
    proc.run(["fallocate", "-l", str(size), str(image)], timeout=300)


def touch(image: Path, size: int) -> None:
    """Write every page of ``image`` once (zeros), outside any measurement.
    A medium that was only fallocated had its pages written for the first
    time by the passes that happened to land on them: on a VM that faults
    them in from the host, the first measured round's writes ran a third
    to a half slower than the later ones (1 MiB writes through a libfuse
    passthrough 388, 706, 838 MB/s; touched first, 820, 794, 789).

    Through a shared mapping, one writer per CPU, each a share: faulting
    pages in from the host scales with the CPUs there, where writes to one
    file take turns on its inode's lock (512 MiB the host had taken back,
    on 2 CPUs: 1.5–2.1 s mapped with two writers, 2.9–3.5 s with one;
    3.1–3.4 s by ``pwrite`` with two, as with one)."""
    fd = os.open(image, os.O_RDWR)
    try:
        area = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
    finally:
        os.close(fd)
    try:
        cpu.fill(area, size, 0)
        area.flush()
    finally:
        area.close()


def _attach(res: Resources, image: Path) -> tuple[str, bool]:
    """A loop device on ``image``, and whether the image's page cache sits
    below it (only when the image's filesystem refuses direct I/O)."""
    try:
        return res.loop(image, direct_io=True), False
    except Exception:
        return res.loop(image, direct_io=False), True


def parse_medium(spec: str, *, destroy: str | None = None, force: bool = False) -> Medium:
    """``ram``, ``dir:PATH``, ``throttled:RATE`` or ``device:/dev/X`` (guarded)."""
    if spec == "ram":
        return RamMedium()
    if spec.startswith("dir:") and len(spec) > 4:
        return DirMedium(spec[4:])
    if spec.startswith("throttled:") and len(spec) > 10:
        from cryptcost.media.throttled import ThrottledMedium
        return ThrottledMedium(spec[10:])
    if spec.startswith("device:") and len(spec) > 7:
        from cryptcost.media.guard import DeviceMedium
        return DeviceMedium(spec[7:], destroy=destroy, force=force)
    raise UserError(f"bad --medium {spec!r}: use ram, dir:PATH, device:/dev/X or throttled:RATE")
