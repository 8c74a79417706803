"""External programs: how to find one, its version, and the Debian package
that provides it.

:data:`TOOLS` holds the programs the engines, media and workloads use, and
the filesystems every storage stack shares. A stack that needs a program of
its own declares the :class:`Tool` in its plugin file (``tools = (Tool(...),)``),
so adding a stack touches no file here.

``packaging/debian-packages.txt`` (what ``make`` installs) must list every
package named here or by a stack; a test checks that they agree.
"""

from __future__ import annotations

import os
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
        """Where the tool is; a ``binary`` given as an absolute path is a file
        that must exist (a plugin), not a program on PATH."""
        if os.path.isabs(self.binary):
            return self.binary if os.path.exists(self.binary) else None
        return proc.which(self.binary)

    def require(self) -> str:
        """The tool's path, or a :class:`UserError` naming its package."""
        return proc.require(self.binary, self.package)


TOOLS: dict[str, Tool] = {t.name: t for t in [
    Tool("openssl", "openssl", "openssl", ("openssl", "version")),
    Tool("fio", "fio", "fio", ("fio", "--version")),
    Tool("iperf3", "iperf3", "iperf3", ("iperf3", "--version")),
    Tool("tcpdump", "tcpdump", "tcpdump", ("tcpdump", "--version"), r"tcpdump version (\d+(?:\.\d+)+)"),
    Tool("ip", "ip", "iproute2", ("ip", "-V"), r"iproute2-(?:ss)?([\w.]+)"),
    Tool("cryptsetup", "cryptsetup", "cryptsetup-bin", ("cryptsetup", "--version")),
    Tool("gocryptfs", "gocryptfs", "gocryptfs", ("gocryptfs", "-version")),
    Tool("mkfs.ext4", "mkfs.ext4", "e2fsprogs", ("mkfs.ext4", "-V")),
    Tool("mkfs.xfs", "mkfs.xfs", "xfsprogs", ("mkfs.xfs", "-V")),
    Tool("mkfs.btrfs", "mkfs.btrfs", "btrfs-progs", ("mkfs.btrfs", "--version")),
    Tool("losetup", "losetup", "mount", ("losetup", "--version")),
    Tool("wipefs", "wipefs", "util-linux", ("wipefs", "--version")),
    Tool("dbench", "dbench", "dbench", ("dbench", "--help"), r"version (\d+(?:\.\d+)+)"),
    Tool("keyctl", "keyctl", "keyutils", ("keyctl", "--version")),
    Tool("tar", "tar", "tar", ("tar", "--version")),
    Tool("perf", "perf", "linux-perf", ("perf", "--version"), r"perf version (\S+)"),
]}


def tool(name: "str | Tool") -> Tool:
    """A tool by name from :data:`TOOLS`; a :class:`Tool` is returned as it is."""
    if isinstance(name, Tool):
        return name
    try:
        return TOOLS[name]
    except KeyError:
        raise CryptcostError(f"internal: no tool named {name!r}") from None


@lru_cache(maxsize=None)
def version(name: "str | Tool") -> str | None:
    """The installed version of a tool, or None when absent."""
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


def versions(extra: "tuple[Tool, ...] | list[Tool]" = ()) -> dict[str, str | None]:
    """Versions of every tool in :data:`TOOLS` and ``extra`` (None where not installed)."""
    return {t.name: version(t) for t in [*TOOLS.values(), *extra]}
