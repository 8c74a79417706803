"""Storage stacks: a :class:`~cryptcost.stacks.base.Stack` that sits on a
medium and gives workloads a directory.

Call order, after the common ones: ``setup(res, backing)`` builds the stack on
the block device ``backing`` and returns the directory workloads run in
(a runner setting up several stacks calls ``begin`` on each, then ``ready``
on each, so that what one stack leaves running in the background, such as a
FUSE daemon deriving its key, overlaps the others' set-up);
``reset_cache(res)`` before every read phase makes the next read come from
the medium and returns the cache mode it achieved.

``settle()`` after every write returns once what was written is durable on
the medium (ciphertext included, for a stack that encrypts after close):
its time is added to the engine's clock, the same way for every stack.

Storage facts, besides the common ones: ``filesystems`` it works on,
``honours_direct`` (O_DIRECT reaches the medium).

Reference implementation: :mod:`cryptcost.stacks.plain`.
"""

from __future__ import annotations

import ctypes
import os
import stat
import time
from abc import abstractmethod
from pathlib import Path
from typing import ClassVar

from cryptcost import proc
from cryptcost.errors import UserError
from cryptcost.host import kernel
from cryptcost.lifecycle.resources import Resources
from cryptcost.media import Backing
from cryptcost.stacks.base import Stack

FILESYSTEMS = ("ext4", "xfs", "btrfs")
# The smallest medium each filesystem is made on, room for a LUKS header included (mkfs.xfs
# refuses a filesystem under 300 MB).
MIN_MEDIUM = {"xfs": 320 << 20}
# No discard at mkfs: each mkfs discards the whole device by default, which on
# a loop device punches the medium's preallocated file full of holes (a 512 MiB
# tmpfs image kept 25 MiB), so every block's first write allocated a page (on
# a VM, faulted in from its host) inside the measured window, and a pass was
# slow or fast as it met new blocks or reused ones.
MKFS = {"ext4": ["mkfs.ext4", "-F", "-q", "-E", "lazy_itable_init=0,lazy_journal_init=0,nodiscard"],
        "xfs": ["mkfs.xfs", "-f", "-q", "-K"],
        "btrfs": ["mkfs.btrfs", "-f", "-q", "--nodiscard"]}


def syncfs(path: Path | str) -> None:
    """syncfs(2) on the filesystem holding ``path``: its dirty data reaches the device."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        if _LIBC.syncfs(fd) != 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err), str(path))
    finally:
        os.close(fd)


_LIBC = ctypes.CDLL(None, use_errno=True)


def drop_caches() -> None:
    """sync, then drop the page cache, dentries and inodes (needs root)."""
    os.sync()
    try:
        with open("/proc/sys/vm/drop_caches", "w") as fh:
            fh.write("3\n")
    except OSError as exc:
        raise UserError(f"cannot drop caches ({exc.strerror}): run as root") from None


FORGET_SECONDS = 0.02          # evicting a file's pages, for the time estimate


def evict_pages(path: Path | str) -> None:
    """Evict one file's pages from the page cache: an fdatasync, so none is
    dirty, then posix_fadvise DONTNEED. Anything but a regular file (a
    symbolic link is not followed) is left alone."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return
        os.fdatasync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def log_tail(path: str | None, lines: int = 3) -> str | None:
    """The last ``lines`` non-empty lines of a daemon's log, on one line."""
    try:
        with open(path or "", errors="replace") as fh:
            last = [ln.strip() for ln in fh.read()[-4000:].splitlines() if ln.strip()][-lines:]
    except OSError:
        return None
    return " | ".join(last) or None


def make_fs(res: Resources, device: str, fs: str, *, encrypt: bool = False) -> Path:
    """mkfs ``fs`` on ``device`` and mount it on a fresh directory.

    ``encrypt``: ext4 with the ``encrypt`` feature, which fscrypt needs.
    Only fscrypt and the ``plain:encrypt-feature`` baseline ask for it: the
    feature costs files that are not encrypted too (since Linux 6.16 ext4
    gives no file of such a filesystem large folios, which halves 1 MiB
    buffered writes to ``plain`` on a RAM medium), so every other
    stack, and ``plain``, get ext4 as mkfs makes it by default.
    """
    if fs not in MKFS:
        raise UserError(f"unknown filesystem {fs!r}; choose from {', '.join(FILESYSTEMS)}")
    argv = list(MKFS[fs])
    if fs == "ext4" and encrypt:
        argv += ["-O", "encrypt"]
    proc.run(argv + [device], timeout=300)
    mnt = res.tmpdir(f"cryptcost-{fs}-")
    res.mount(device, mnt, fs)
    return mnt


class StorageStack(Stack):
    """A storage stack. See the module docstring for the call order."""

    kind = "storage"
    filesystems: ClassVar[tuple[str, ...]] = FILESYSTEMS
    # Whether O_DIRECT reaches the medium (otherwise: fsync and dropped caches).
    honours_direct: ClassVar[bool] = False

    def direct_unit(self) -> int:
        """The smallest direct I/O the stack's device takes (its logical sector): a smaller
        one is refused (EINVAL)."""
        return 512
    remount_seconds: ClassVar[float] = 0.1       # a cache reset, for the time estimate
    # Every cache a read of one file meets is that file's own page cache (no
    # page cache of a layer below, no daemon): evicting it resets them all.
    file_cache_only: ClassVar[bool] = False
    # Sequential passes sized by the last sample's rate (runner.storage.steps); a
    # stack that misbehaves with files of changing sizes says False and why.
    sized_by_time: ClassVar[bool] = True
    # Why a sample may take only one write pass on this stack (a stack that fails when
    # a file is written again under its name within a sample says why); None: passes
    # are added until the sample lasts its minimum time.
    one_write_pass: ClassVar[str | None] = None
    # The shortest sample (seconds of passes) this stack's figures hold at, whatever shorter
    # minimum a plan asks (storage.sample_minimum): 0, none of its own.
    sample_floor: float = 0.0
    # Workloads (their names) the stack cannot run, each with why, as seen: a step of one is not
    # measured on it, and the run says why (runner.storage.unfit).
    unfit_workloads: ClassVar[dict[str, str]] = {}

    def __init__(self, variant: str | None = None, fs: str = "ext4"):
        super().__init__(variant)
        if fs not in self.filesystems:
            raise UserError(f"stack {self.name} works only on "
                            f"{', '.join(self.filesystems)}, not {fs}")
        self.fs = fs
        self.workdir: Path | None = None

    @abstractmethod
    def setup(self, res: Resources, backing: Backing) -> Path:
        """Build the stack on ``backing``; return the directory workloads use."""

    def begin(self, res: Resources, backing: Backing) -> None:
        """The first half of :meth:`setup`: all of it, unless the stack can
        leave its slowest part running while other stacks are set up."""
        self.workdir = self.setup(res, backing)

    def ready(self, res: Resources) -> Path:
        """The second half of :meth:`setup`: wait for what :meth:`begin`
        left running; return the directory workloads use."""
        return self.workdir

    def reset_cache(self, res: Resources) -> str:
        """Make the next read come from the medium; return the cache mode."""
        drop_caches()
        return "drop_caches"

    @property
    def evicts_one_file(self) -> bool:
        """Whether :meth:`forget` makes a read of one file cold by evicting
        pages alone — that file's, and what the stack keeps of it below —
        with no remount and no global drop_caches: no daemon keeps data of
        its own, on the medium or elsewhere. Such a stack's sequential
        passes may then fill the larger room (``workloads.storage.ROOM_FRACTION``)."""
        return self.file_cache_only

    @property
    def resets_open_files(self) -> bool:
        """Whether :meth:`forget` works while a program holds the file open in the mount
        (it evicts pages or drops caches; no remount): bonnie++ keeps its file open between
        its phases."""
        return True

    @property
    def forget_seconds(self) -> float:
        """What :meth:`forget` takes, for the time estimate."""
        return FORGET_SECONDS if self.evicts_one_file else self.remount_seconds

    def last_words(self) -> str | None:
        """What the stack's daemon last logged, for a failure's message, or None."""
        return None

    def forget(self, res: Resources, path: Path) -> str:
        """Make the next read of the file ``path`` come from the medium; return
        the cache mode. Where the file's page cache is the only cache, evicting
        its pages is enough, and costs none of drop_caches' global sync and scan."""
        if not self.file_cache_only:
            return self.reset_cache(res)
        evict_pages(path)
        return "fadvise_dontneed"

    def settle(self) -> float:
        """Make what was written durable on the medium; return the seconds it took."""
        start = time.perf_counter()
        syncfs(self.workdir)
        return time.perf_counter() - start

    def describe(self) -> dict:
        d = {**super().describe(), "fs": self.fs, "integrity": getattr(self, "integrity", None)}
        ref = self.cipher_ref()
        if ref and ref["where"] == "kernel":
            d["kernel_drivers"] = kernel.drivers_for(ref["algorithm"])
        return d


class FuseStack(StorageStack):
    """A FUSE overlay on a plain filesystem: ``lower`` holds the ciphertext,
    ``mnt`` shows the plaintext. Subclasses give :meth:`mount_argv` (a
    foreground daemon) and, when the encrypted directory must be created
    first, :meth:`init`."""

    layer = "fuse"
    baselines = ("fuse-passthrough", "plain")
    # The FUSE library the daemon is built on, and the options it asks the
    # kernel for that change request sizes (libfuse 2 splits writes into
    # 4 KiB requests without big_writes). The first baseline is a
    # passthrough on the same library with the same options.
    fuse_library: ClassVar[str] = "libfuse 2"
    fuse_options: ClassVar[tuple[str, ...]] = ()
    use_case = "any-filesystem"
    features = ("fuse",)
    mount_timeout: ClassVar[float] = 60
    remount_seconds = 0.4
    # Whether the daemon keeps file data between one open and the next (a
    # block cache), which only a remount empties. A daemon that keeps none
    # says False: the reset before a read of one file then evicts that file's
    # pages and those of every file under ``lower`` (its ciphertext), with no
    # remount's key derivation and no global drop_caches. A stack test checks
    # that reads after it are no faster than after a remount.
    daemon_caches: ClassVar[bool] = True
    # Whether the daemon's first mount is slow enough (a key derivation of
    # seconds) to leave running while the other stacks are set up.
    mounts_in_background: ClassVar[bool] = False

    def setup(self, res: Resources, backing: Backing) -> Path:
        self.begin(res, backing)
        return self.ready(res)

    def begin(self, res: Resources, backing: Backing) -> None:
        self.root = make_fs(res, backing.device, self.fs)
        self.lower = self.root / "lower"
        self.mnt = self.root / "mnt"
        self.home = self.root / "home"          # some tools write under $HOME
        for d in (self.lower, self.mnt, self.home):
            d.mkdir()
        self.logfile = str(self.root / f"{self.name}.log")
        self.init(res)
        self._mount(res, wait=not self.mounts_in_background)

    def ready(self, res: Resources) -> Path:
        if self._mounting:
            res.fuse_mounted(self.daemon, self.mnt, self.mount_timeout)
            self._mounting = False
        self.workdir = self.mnt
        return self.mnt

    def facts(self) -> dict:
        return {**super().facts(), "fuse_library": self.fuse_library,
                "fuse_options": list(self.fuse_options)}

    def env(self) -> dict[str, str]:
        """The FUSE daemon's environment: a private home, and the crypto library's switch when accel
        is off."""
        return {"HOME": str(self.home), "XDG_CONFIG_HOME": str(self.home / ".config"),
                "XDG_CACHE_HOME": str(self.home / ".cache"), **self.accel_env()}

    def init(self, res: Resources) -> None:
        """Create the encrypted directory in ``self.lower`` (nothing by default)."""

    @abstractmethod
    def mount_argv(self, res: Resources) -> list[str]:
        """The argv of a daemon that mounts ``self.lower`` on ``self.mnt`` in the foreground."""

    def stdin_file(self) -> str | None:
        """A file whose content the daemon reads on stdin (a passphrase), if any."""
        return None

    def _mount(self, res: Resources, wait: bool = True) -> None:
        """Start the daemon; unless told not to ``wait``, until its mount appears (:meth:`ready`
        waits)."""
        first = max(res.journal.entries, default=0) + 1
        self.daemon = res.fuse(self.mount_argv(res), self.mnt, env=self.env(), logfile=self.logfile,
                               stdin_file=self.stdin_file(), timeout=self.mount_timeout, wait=wait)
        self._mounting = not wait
        self._mount_entries = [e for i, e in res.journal.entries.items() if i >= first]

    def reset_cache(self, res: Resources) -> str:
        """Unmount and remount, so no daemon-side cache survives; drop caches."""
        for entry in reversed(self._mount_entries):
            res.release(entry)
        self.unmounted()
        drop_caches()
        self._mount(res)
        return "remount"

    def forget(self, res: Resources, path: Path) -> str:
        """A remount where the daemon may cache file data; else the file's
        pages and those of the ciphertext below it evicted."""
        if self.daemon_caches:
            return self.reset_cache(res)
        evict_pages(path)
        for d, _, files in os.walk(self.lower):
            for name in files:
                try:
                    evict_pages(os.path.join(d, name))
                except OSError:              # gone since, or a symbolic link
                    pass
        return "fadvise_dontneed+lower"

    @property
    def evicts_one_file(self) -> bool:
        return not self.daemon_caches

    @property
    def resets_open_files(self) -> bool:
        return not self.daemon_caches            # else a remount, refused while a file is open

    def unmounted(self) -> None:
        """Between the unmount and the next mount of a cache reset (nothing by default)."""

    def last_words(self) -> str | None:
        tail = log_tail(getattr(self, "logfile", None))
        return f"the {self.name} daemon's log ends: {tail}" if tail else None

    def settle(self) -> float:
        """The FUSE filesystem, then the lower filesystem holding its ciphertext."""
        start = time.perf_counter()
        syncfs(self.mnt)
        syncfs(self.root)
        return time.perf_counter() - start

    def daemon_pids(self) -> list[int]:
        return [self.daemon.pid] if getattr(self, "daemon", None) else []
