"""The storage stack plugin interface.

One stack = one small class in one file of this package. Call order:

1. ``check()`` — class method; raises :class:`~cryptcost.errors.Unavailable`
   naming the missing program or kernel feature and how to get it. It
   touches nothing.
2. ``Stack(variant)`` — picks one of ``variants`` (cipher, mode …).
3. ``setup(res, backing, fs)`` — builds the stack on the block device
   ``backing`` using only :class:`~cryptcost.runner.resources.Resources`
   (which journals everything) and returns the directory workloads run in.
4. ``reset_cache(res)`` — before every read phase: flush, drop caches, and
   for FUSE stacks remount; returns the cache mode it achieved.
5. ``daemon_pids()`` — processes whose CPU time the stack adds (rule 7).
6. Teardown is the ``Resources`` scope ending: reverse order, always.

``describe()`` records exact parameters and tool versions with every result.

Reference implementation: :mod:`cryptcost.stacks.plain`.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from pathlib import Path
from typing import ClassVar

from cryptcost import proc
from cryptcost.errors import Unavailable, UserError
from cryptcost.host import kernel, tools
from cryptcost.media import Backing
from cryptcost.runner.resources import Resources

FILESYSTEMS = ("ext4", "xfs", "btrfs")
MKFS = {"ext4": ["mkfs.ext4", "-F", "-q", "-E", "lazy_itable_init=0,lazy_journal_init=0"],
        "xfs": ["mkfs.xfs", "-f", "-q"],
        "btrfs": ["mkfs.btrfs", "-f", "-q"]}

# Use-case names the recommendation groups stacks by.
WHOLE_DISK, PER_DIRECTORY, ANY_FILESYSTEM, BASELINE = ("whole-disk", "per-directory",
                                                       "any-filesystem", "baseline")


def ref(algorithm: str, where: str, unit: int = 4096, exact: bool = True) -> dict:
    """A :meth:`Stack.cipher_ref` value."""
    return {"algorithm": algorithm, "where": where, "unit": unit, "exact": exact}


def drop_caches() -> None:
    """sync, then drop the page cache, dentries and inodes (needs root)."""
    os.sync()
    try:
        with open("/proc/sys/vm/drop_caches", "w") as fh:
            fh.write("3\n")
    except OSError as exc:
        raise UserError(f"cannot drop caches ({exc.strerror}): run as root") from None


def make_fs(res: Resources, device: str, fs: str, *, encrypt: bool = True) -> Path:
    """mkfs ``fs`` on ``device`` and mount it on a fresh directory.

    ext4 always gets the ``encrypt`` feature, so that the plain baseline and
    the fscrypt stack sit on identical filesystems.
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


class Stack(ABC):
    """One storage stack. See the module docstring for the call order."""

    name: ClassVar[str]
    kind: ClassVar[str] = "storage"
    description: ClassVar[str] = ""
    baseline: ClassVar[str | None] = "plain"      # the matched plaintext twin
    extra_baselines: ClassVar[tuple[str, ...]] = ()
    use_case: ClassVar[str] = BASELINE
    tools: ClassVar[tuple[str, ...]] = ()
    features: ClassVar[tuple[str, ...]] = ()
    variants: ClassVar[dict[str, dict]] = {"default": {}}
    default_variants: ClassVar[tuple[str, ...]] = ("default",)
    fuse: ClassVar[bool] = False
    # Whether O_DIRECT reaches the medium; None: the kernel falls back to buffered I/O.
    honours_direct: ClassVar[bool] = False
    filesystems: ClassVar[tuple[str, ...]] = FILESYSTEMS
    security: ClassVar[tuple[str, ...]] = ()       # facts a recommendation must repeat
    writes_complete_on_close: ClassVar[bool] = False

    def __init__(self, variant: str | None = None, fs: str = "ext4"):
        variant = variant or self.default_variants[0]
        if variant not in self.variants:
            raise UserError(f"stack {self.name} has no variant {variant!r}; choose from "
                            f"{', '.join(self.variants)}")
        if fs not in self.filesystems:
            raise UserError(f"stack {self.name} works only on {', '.join(self.filesystems)}, not {fs}")
        self.variant = variant
        self.params = dict(self.variants[variant])
        self.fs = fs
        self.workdir: Path | None = None

    @property
    def label(self) -> str:
        return self.name if self.variant == "default" else f"{self.name}:{self.variant}"

    @classmethod
    def check(cls) -> None:
        """Raise :class:`Unavailable` when a program or kernel feature is missing."""
        for name in cls.tools:
            t = tools.tool(name)
            if not t.path():
                raise Unavailable(f"{t.binary} is not installed", t.package)
        present = kernel.features()
        for feat in cls.features:
            if not present.get(feat, {}).get("present"):
                raise Unavailable(*FEATURE_HINTS.get(feat, (f"the kernel lacks {feat}", None)))

    @abstractmethod
    def setup(self, res: Resources, backing: Backing) -> Path:
        """Build the stack on ``backing``; return the directory workloads use."""

    def reset_cache(self, res: Resources) -> str:
        """Make the next read come from the medium; return the cache mode."""
        drop_caches()
        return "drop_caches"

    def daemon_pids(self) -> list[int]:
        return []

    def cipher_ref(self) -> dict | None:
        """The raw cipher this stack runs, for its cipher ceiling: ``algorithm``
        as the cipher engines name it, ``where`` (kernel, go or userspace),
        ``unit`` (bytes the stack encrypts at once), ``exact`` (False: the
        nearest algorithm the engines measure, e.g. AES-256 for AES-192)."""
        return None

    def describe(self) -> dict:
        """Exact parameters and tool versions, stored with every result."""
        return {"stack": self.name, "variant": self.variant, "fs": self.fs, **self.params,
                "versions": {t: tools.version(t) for t in self.tools},
                "integrity": getattr(self, "integrity", None), "cipher_ref": self.cipher_ref()}


FEATURE_HINTS = {
    "dm-crypt": ("the kernel has no device-mapper crypt target (dm-crypt): no /dev/mapper/control, "
                 "no dm_crypt module", "a kernel with CONFIG_DM_CRYPT (Debian's stock kernel has it)"),
    "device-mapper": ("the kernel has no device-mapper (no /dev/mapper/control)",
                      "a kernel with CONFIG_BLK_DEV_DM"),
    "fuse": ("the kernel has no FUSE (/dev/fuse missing)", "a kernel with CONFIG_FUSE_FS"),
    "loop": ("the kernel has no loop devices (/dev/loop-control missing)", "a kernel with CONFIG_BLK_DEV_LOOP"),
    "fscrypt": ("ext4 in this kernel has no encryption support (/sys/fs/ext4/features/encryption)",
                "a kernel with CONFIG_FS_ENCRYPTION"),
    "zfs": ("the ZFS kernel module is not loaded or installable",
            "zfs-dkms and zfsutils-linux from Debian contrib (builds an out-of-tree module)"),
    "af_alg": ("the kernel has no AF_ALG crypto user API", "a kernel with CONFIG_CRYPTO_USER_API_SKCIPHER"),
    "ecryptfs": ("the kernel has no eCryptfs", "a kernel with CONFIG_ECRYPT_FS, and ecryptfs-utils"),
}


class FuseStack(Stack):
    """A FUSE overlay on a plain filesystem: ``lower`` holds the ciphertext,
    ``mnt`` shows the plaintext. Subclasses give ``init_argv`` (create the
    encrypted directory, once) and ``mount_argv`` (a foreground daemon)."""

    fuse = True
    baseline = "fuse-passthrough"
    extra_baselines = ("plain",)
    use_case = ANY_FILESYSTEM
    features = ("fuse",)
    mount_timeout: ClassVar[float] = 60

    def setup(self, res: Resources, backing: Backing) -> Path:
        self.root = make_fs(res, backing.device, self.fs)
        self.lower = self.root / "lower"
        self.mnt = self.root / "mnt"
        self.home = self.root / "home"          # some tools write under $HOME
        for d in (self.lower, self.mnt, self.home):
            d.mkdir()
        self.logfile = str(self.root / f"{self.name}.log")
        self.init(res)
        self._mount(res)
        self.workdir = self.mnt
        return self.mnt

    def env(self) -> dict[str, str]:
        return {"HOME": str(self.home), "XDG_CONFIG_HOME": str(self.home / ".config"),
                "XDG_CACHE_HOME": str(self.home / ".cache")}

    def init(self, res: Resources) -> None:
        """Create the encrypted directory in ``self.lower`` (nothing by default)."""

    @abstractmethod
    def mount_argv(self, res: Resources) -> list[str]:
        """The argv of a daemon that mounts ``self.lower`` on ``self.mnt`` in the foreground."""

    def stdin_file(self) -> str | None:
        """A file whose content the daemon reads on stdin (a passphrase), if any."""
        return None

    def _mount(self, res: Resources) -> None:
        first = max(res.journal.entries, default=0) + 1
        self.daemon = res.fuse(self.mount_argv(res), self.mnt, env=self.env(), logfile=self.logfile,
                               stdin_file=self.stdin_file(), timeout=self.mount_timeout)
        self._mount_entries = [e for i, e in res.journal.entries.items() if i >= first]

    def reset_cache(self, res: Resources) -> str:
        """Unmount and remount, so no daemon-side cache survives; drop caches."""
        for entry in reversed(self._mount_entries):
            res.release(entry)
        drop_caches()
        self._mount(res)
        return "remount"

    def daemon_pids(self) -> list[int]:
        return [self.daemon.pid] if getattr(self, "daemon", None) else []
