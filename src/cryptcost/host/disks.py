"""This host's own disks and links: what the answer predicts each option on.

A disk is a whole block device under ``/sys/block`` (no loop, RAM, zram or device-mapper
device, no partition): its model, whether it spins, its size, and its sequential read speed,
timed with fio reading it for a few seconds with ``--readonly`` (fio's own guard: it refuses to
write) and ``O_DIRECT`` (no page cache between), or, where the device cannot be opened (a
container's device policy), a large file of a filesystem mounted from it read the same way:
nothing is ever written to it. A link is a
network interface with a device behind it (not lo, a bridge, a veth or a tunnel), with the
speed its driver reports, where it reports one (a VM's virtio NIC reports none).
"""

from __future__ import annotations

import json
import os
import re
import stat
from dataclasses import asdict, dataclass
from pathlib import Path

from cryptcost import proc
from cryptcost.host import read_text

SYS_BLOCK = Path("/sys/block")
SYS_NET = Path("/sys/class/net")
MOUNTINFO = Path("/proc/self/mountinfo")
LARGE_FILE = 64 << 20
# where a large file of a filesystem is found soonest (programs' libraries, then the rest)
WHERE_LARGE = ("usr/lib", "usr/share", "opt", "var/lib", "home")
NOT_DISKS = ("loop", "ram", "zram", "dm-", "sr", "fd", "nbd")
READ_SECONDS = 3
VENDORS = {"0x1af4": "virtio (QEMU/KVM)"}


@dataclass(frozen=True)
class Disk:
    name: str
    path: str
    model: str
    rotational: bool | None
    size: int
    read_bytes_per_s: float | None = None
    how: str = ""                       # how the read speed was timed, or why it was not

    @property
    def kind(self) -> str:
        return {True: "spinning disk", False: "solid-state disk"}.get(self.rotational, "disk")

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def of(cls, d: dict) -> "Disk":
        return cls(d.get("name", "?"), d.get("path", ""), d.get("model", ""),
                   d.get("rotational"), d.get("size") or 0, d.get("read_bytes_per_s"),
                   d.get("how", ""))


@dataclass(frozen=True)
class Link:
    name: str
    bytes_per_s: float | None           # None: its driver reports no speed
    driver: str = ""

    def to_dict(self) -> dict:
        return asdict(self)


def disks(root: Path = SYS_BLOCK) -> list[Disk]:
    """This host's whole disks, as the kernel lists them (no speed yet)."""
    out = []
    for dev in sorted(root.glob("*")):
        if dev.name.startswith(NOT_DISKS) or not (dev / "device").exists():
            continue
        vendor = read_text(dev / "device" / "vendor")
        model = read_text(dev / "device" / "model") or VENDORS.get(vendor, "unknown model")
        spins = read_text(dev / "queue" / "rotational")
        sectors = read_text(dev / "size")
        out.append(Disk(dev.name, f"/dev/{dev.name}", model,
                        {"1": True, "0": False}.get(spins), int(sectors or 0) * 512))
    return out


def _fio_read(target: str, seconds: int) -> tuple[float | None, str]:
    """fio reading ``target`` (a device or a file) read-only with O_DIRECT: bytes/s, or None
    and fio's own reason."""
    argv = ["fio", "--readonly", "--name=cc-disk-read", f"--filename={target}", "--rw=read",
            "--bs=1M", "--direct=1", "--ioengine=psync", "--iodepth=1", f"--runtime={seconds}",
            "--time_based", "--output-format=json"]
    if not proc.which("fio"):
        return None, "fio is not installed (cryptcost install run)"
    done = proc.run(argv, timeout=seconds + 60, check=False)
    try:
        job = json.loads(done.stdout[done.stdout.index("{"):])["jobs"][0]
    except (ValueError, KeyError, IndexError):
        said = [line.split("error=", 1)[-1] for line in (done.stderr + done.stdout).splitlines()
                if "error" in line]
        return None, (said[0] if said else f"fio exited {done.returncode}").strip()[:120]
    if job.get("error"):
        return None, os.strerror(job["error"]).lower()
    rate = float(job["read"].get("bw_bytes") or 0)
    return (rate or None), ""


def mounted_from(name: str, mountinfo: Path = MOUNTINFO) -> list[tuple[str, str]]:
    """The filesystems mounted from disk ``name`` or a partition of it: (mount point, type)."""
    out = []
    for line in read_text(mountinfo).splitlines():
        left, _, right = line.partition(" - ")
        fields, more = left.split(), right.split()
        if len(fields) > 4 and len(more) > 1 and re.fullmatch(
                rf"/dev/{re.escape(name)}(p?\d+)?", more[1]):
            out.append((fields[4].replace("\\040", " "), more[0]))
    return out


def large_file(top: str, least: int = LARGE_FILE, entries: int = 30000) -> str | None:
    """A large regular file on ``top``'s filesystem (not crossing into another), found by a
    bounded walk: the first of at least 4 × ``least`` bytes, else the largest of at least
    ``least``; None without one."""
    try:
        dev = os.stat(top).st_dev
    except OSError:
        return None
    best, best_size, seen = None, least - 1, 0
    dirs = [os.path.join(top, d) for d in WHERE_LARGE] + [top]
    for d in dirs:
        for root, subdirs, files in os.walk(d):
            try:
                if os.stat(root).st_dev != dev:
                    subdirs[:] = []
                    continue
            except OSError:
                continue
            subdirs[:] = [s for s in subdirs if not os.path.islink(os.path.join(root, s))]
            for f in files:
                seen += 1
                path = os.path.join(root, f)
                try:
                    st = os.stat(path, follow_symlinks=False)
                except OSError:
                    continue
                if stat.S_ISREG(st.st_mode) and st.st_dev == dev and st.st_size > best_size:
                    best, best_size = path, st.st_size
                    if best_size >= 4 * least:
                        return best
            if seen > entries:
                return best
    return best


def read_speed(disk: Disk, seconds: int = READ_SECONDS) -> tuple[float | None, str]:
    """A disk's sequential read speed, bytes/s: fio reading it with ``--readonly`` and
    ``O_DIRECT`` for ``seconds`` from its start, 1 MiB requests, one at a time. Where the device
    cannot be opened (a container's device policy), a large file of a filesystem mounted from
    it, read the same way: the disk through its filesystem. None and why where neither can."""
    if os.geteuid() != 0:
        return None, "not timed: reading a disk needs root"
    speed, why = _fio_read(disk.path, seconds)
    if speed:
        return speed, (f"fio --readonly, O_DIRECT, 1 MiB sequential reads of {disk.path} for "
                       f"{seconds} s: nothing written")
    for top, fstype in mounted_from(disk.name):
        if (path := large_file(top)) is None:
            continue
        via, _ = _fio_read(path, seconds)
        if via:
            return via, (f"{disk.path} could not be opened ({why}): read through {fstype}, a "
                         f"{os.path.getsize(path) / 1e6:.0f} MB file ({path}) with fio "
                         f"--readonly, O_DIRECT, 1 MiB sequential reads for {seconds} s: "
                         "nothing written")
    return None, f"not timed: fio could not read {disk.path} ({why})"


def measured(found: list[Disk] | None = None, seconds: int = READ_SECONDS) -> list[Disk]:
    """Each disk with its read speed timed (read-only)."""
    out = []
    for d in found if found is not None else disks():
        speed, how = read_speed(d, seconds)
        out.append(Disk(d.name, d.path, d.model, d.rotational, d.size, speed, how))
    return out


def links(root: Path = SYS_NET) -> list[Link]:
    """This host's network interfaces with a device behind them, and their speed."""
    out = []
    for dev in sorted(root.glob("*")):
        if dev.name == "lo" or not (dev / "device").exists():
            continue
        mbit = read_text(dev / "speed")
        speed = int(mbit) * 1e6 / 8 if mbit.lstrip("-").isdigit() and int(mbit) > 0 else None
        driver = Path(os.path.realpath(dev / "device" / "driver")).name \
            if (dev / "device" / "driver").exists() else ""
        out.append(Link(dev.name, speed, driver))
    return out


def survey(storage: bool, network: bool, say=lambda line: None) -> dict:
    """What a run records of this host's places: with ``storage``, each disk timed read-only
    (``say`` is told before each, for the progress a person sees); with ``network``, each link.
    As plain data for the run's record: ``{"disks": [...], "links": [...]}``."""
    found = disks() if storage else []
    timed = []
    for d in found:
        say(f"timing {d.path} ({d.model}) read-only for {READ_SECONDS} s: nothing is written")
        timed += measured([d])
    return {"disks": [d.to_dict() for d in timed],
            "links": [link.to_dict() for link in links()] if network else []}
