"""Every external program cryptcost can use: how to find it, its version,
and the Debian package that provides it.

``packaging/debian-packages.txt`` (what ``make`` installs) must list every
package named here; a test checks that the two agree.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from cryptcost import proc
from cryptcost.errors import CryptcostError, UserError


@dataclass(frozen=True)
class Tool:
    """An external program. ``version_argv`` prints a version that
    ``version_re`` (first group) extracts."""

    name: str
    binary: str
    package: str
    version_argv: tuple[str, ...]          # empty: ask dpkg for the package version
    version_re: str = r"(\d+(?:\.\d+)+[\w.+~-]*)"

    def path(self) -> str | None:
        return proc.which(self.binary)

    def require(self) -> str:
        """The tool's path, or a :class:`UserError` naming its package."""
        return proc.require(self.binary, self.package)


TOOLS: dict[str, Tool] = {t.name: t for t in [
    Tool("openssl", "openssl", "openssl", ("openssl", "version")),
    Tool("fio", "fio", "fio", ("fio", "--version")),
    Tool("iperf3", "iperf3", "iperf3", ("iperf3", "--version")),
    Tool("cryptsetup", "cryptsetup", "cryptsetup-bin", ("cryptsetup", "--version")),
    Tool("gocryptfs", "gocryptfs", "gocryptfs", ("gocryptfs", "-version")),
    Tool("cryfs", "cryfs", "cryfs", ("cryfs", "--version")),
    Tool("securefs", "securefs", "securefs", ()),            # prints no version of its own
    Tool("encfs", "encfs", "encfs", ("encfs", "--version")),
    Tool("rclone", "rclone", "rclone", ("rclone", "version")),
    Tool("qemu-img", "qemu-img", "qemu-utils", ("qemu-img", "--version")),
    Tool("qemu-storage-daemon", "qemu-storage-daemon", "qemu-system-common",
         ("qemu-storage-daemon", "--version")),
    Tool("bindfs", "bindfs", "bindfs", ("bindfs", "--version")),
    Tool("mkfs.ext4", "mkfs.ext4", "e2fsprogs", ("mkfs.ext4", "-V")),
    Tool("mkfs.xfs", "mkfs.xfs", "xfsprogs", ("mkfs.xfs", "-V")),
    Tool("mkfs.btrfs", "mkfs.btrfs", "btrfs-progs", ("mkfs.btrfs", "--version")),
    Tool("losetup", "losetup", "mount", ("losetup", "--version")),
    Tool("wipefs", "wipefs", "util-linux", ("wipefs", "--version")),
    Tool("dbench", "dbench", "dbench", ("dbench", "--help"), r"version (\d+(?:\.\d+)+)"),
    Tool("keyctl", "keyctl", "keyutils", ("keyctl", "--version")),
    Tool("fusermount3", "fusermount3", "fuse3", ("fusermount3", "--version")),
    Tool("zfs", "zfs", "zfsutils-linux (contrib, with zfs-dkms)", ("zfs", "version")),
    Tool("dmsetup", "dmsetup", "dmsetup", ("dmsetup", "--version")),
    Tool("tar", "tar", "tar", ("tar", "--version")),
]}


def tool(name: str) -> Tool:
    try:
        return TOOLS[name]
    except KeyError:
        raise CryptcostError(f"internal: no tool named {name!r}") from None


@lru_cache(maxsize=None)
def version(name: str) -> str | None:
    """The installed version of tool ``name``, or None when absent."""
    t = tool(name)
    if not t.path():
        return None
    argv = list(t.version_argv) or ["dpkg-query", "-W", "-f=${Version}", t.package]
    try:
        done = proc.run(argv, timeout=20, check=False)
    except (CryptcostError, UserError):
        return None
    text = done.stdout + "\n" + done.stderr
    match = re.search(t.version_re, text)
    return match.group(1) if match else "unknown"


def versions() -> dict[str, str | None]:
    """Versions of every known tool (None where not installed)."""
    return {name: version(name) for name in TOOLS}
