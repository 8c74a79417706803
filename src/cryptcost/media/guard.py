"""The destructive medium: a named block device (METHODOLOGY rule 16).

A device is used only when the user names it twice — ``--medium
device:/dev/X`` and ``--destroy-data-on /dev/X`` — and it is refused when

* it is mounted, or holds a mounted partition, or is in use as swap, or a
  device-mapper, MD or loop device sits on it (``/sys/class/block/X/holders``,
  also of its partitions) — even with ``--force``;
* it carries a filesystem, RAID, LVM or partition-table signature, unless
  ``--force``.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from cryptcost import proc
from cryptcost.errors import UserError
from cryptcost.media import Backing, Medium
from cryptcost.lifecycle.resources import Resources


def _holders(device: str, sysfs: str = "/sys/class/block") -> list[str]:
    """What uses this device or one of its partitions: mounts, swap, and the
    kernel devices built on it (dm-crypt, LVM, MD, loop: its ``holders``)."""
    real = os.path.realpath(device)
    name = os.path.basename(real)
    parts = {real} | {f"/dev/{p.name}" for p in Path(f"{sysfs}/{name}").glob(f"{name}*")}
    used = [f"/dev/{h.name} (built on {os.path.basename(part)})"
            for part in sorted(parts)
            for h in sorted(Path(f"{sysfs}/{os.path.basename(part)}/holders").glob("*"))]
    with open("/proc/self/mountinfo") as fh:
        for line in fh:
            source = line.partition(" - ")[2].split()[1]
            if os.path.realpath(source) in parts:
                used.append(source)
    try:
        swaps = Path("/proc/swaps").read_text().splitlines()[1:]
        used += [s.split()[0] for s in swaps if os.path.realpath(s.split()[0]) in parts]
    except OSError:
        pass
    return used


def signatures(device: str) -> list[str]:
    """Filesystem/partition signatures ``wipefs`` finds (it only reads)."""
    done = proc.run(["wipefs", "--no-act", "--noheadings", "--output", "TYPE", device],
                    check=False, timeout=30)
    if done.returncode != 0:
        raise UserError(f"cannot inspect {device}: {done.stderr.strip()}")
    return [t for t in done.stdout.split() if t]


class DeviceMedium(Medium):
    """A whole block device, destroyed. Only one stack instance fits on it."""

    name = "device"

    def __init__(self, device: str, *, destroy: str | None, force: bool):
        self.device = device
        self.destroy = destroy
        self.force = force
        self._next = 0

    @property
    def spec(self) -> str:
        return f"device:{self.device}"

    def room(self) -> int:
        try:
            name = os.path.basename(os.path.realpath(self.device))
            return int(Path(f"/sys/class/block/{name}/size").read_text()) * 512
        except OSError:
            return 0

    def require_room(self, size: int, count: int) -> None:
        dev = self.device
        if self.destroy is None or os.path.realpath(self.destroy) != os.path.realpath(dev):
            raise UserError(f"device:{dev} destroys every byte on {dev}: confirm with "
                            f"--destroy-data-on {dev}")
        try:
            mode = os.stat(dev).st_mode
        except OSError:
            raise UserError(f"{dev} does not exist") from None
        if not stat.S_ISBLK(mode):
            raise UserError(f"{dev} is not a block device")
        held = _holders(dev)
        if held:
            raise UserError(f"{dev} is in use ({', '.join(held)}: mounted, swap or a device on "
                            "top): refused even with --force; unmount it first")
        found = signatures(dev)
        if found and not self.force:
            raise UserError(f"{dev} carries {', '.join(found)} signature(s): it holds data; "
                            "refused without --force")
        capacity = int(Path(f"/sys/class/block/{os.path.basename(os.path.realpath(dev))}/size")
                       .read_text()) * 512
        if size * count > capacity:
            raise UserError(f"{dev} holds {capacity / 2**30:.1f} GiB, less than {count} × --size "
                            "(a stack and its baselines each get a slice)")

    def provide(self, res: Resources, size: int) -> Backing:
        """The next ``size``-byte slice of the device, as a loop device with an offset."""
        offset = self._next
        self._next += size
        device = res.loop(self.device, direct_io=True, offset=offset, size=size)
        return Backing(device, size, self.name)

    def describe(self) -> dict:
        return {"medium": f"device:{self.device}"}
