"""External programs: how to find one, its version, and the Debian package
that provides it.

:data:`TOOLS` holds the programs the engines, media and workloads use, and
the filesystems every storage stack shares. A stack that needs a program of
its own declares the :class:`Tool` in its plugin file (``tools = (Tool(...),)``),
so adding a stack touches no file here.

``cryptcost install`` (:mod:`cryptcost.suite.needs`) installs every package named here or by a
stack, for the need that uses it.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from cryptcost import proc
from cryptcost.errors import CryptcostError, Unavailable, UserError


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
        """The tool's path, or :class:`Unavailable` (a UserError) naming the command that
        installs it."""
        found = self.path()
        if not found:
            raise Unavailable(f"{self.binary} is not installed", f"cryptcost install {self.name}")
        return found


TOOLS: dict[str, Tool] = {t.name: t for t in [
    Tool("openssl", "openssl", "openssl", ("openssl", "version")),
    Tool("fio", "fio", "fio", ("fio", "--version")),
    Tool("iperf3", "iperf3", "iperf3", ("iperf3", "--version")),
    Tool("tcpdump", "tcpdump", "tcpdump", ("tcpdump", "--version"),
         r"tcpdump version (\d+(?:\.\d+)+)"),
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
    Tool("rsync", "rsync", "rsync", ("rsync", "--version"), r"version (\S+)"),
    Tool("bonnie++", "bonnie++", "bonnie++", ("bonnie++", "-h"), r"Version: (\S+)"),
    Tool("perf", "perf", "linux-perf", ("perf", "--version"), r"perf version (\S+)"),
    # the throttled medium, and the userspace LUKS stacks' export
    Tool("qemu-storage-daemon", "qemu-storage-daemon", "qemu-system-common",
         ("qemu-storage-daemon", "--version")),
]}


def tool(name: "str | Tool") -> Tool:
    """A tool by name from :data:`TOOLS`; a :class:`Tool` is returned as it is."""
    if isinstance(name, Tool):
        return name
    try:
        return TOOLS[name]
    except KeyError:
        raise CryptcostError(f"internal: no tool named {name!r}") from None


# A JSON file of versions already read from the same programs: `cryptcost vm` writes the host's
# for its guest, which runs the host's own root filesystem (read-only), so each boot under
# emulation does not start some sixty programs again to ask.
KNOWN = "CRYPTCOST_TOOL_VERSIONS"


@lru_cache(maxsize=None)
def _known() -> dict:
    path = os.environ.get(KNOWN)
    try:
        return json.loads(Path(path).read_text()) if path else {}
    except (OSError, ValueError):
        return {}


UNKNOWN = "unknown"     # the tool ran but printed no version its pattern finds
_versions: dict[Tool, str] = {}


def version(name: "str | Tool") -> str | None:
    """The installed version of a tool, or None when absent.

    A version is asked once; "unknown" (the tool ran and printed none) is not kept, here nor
    from the file of versions already read, and is asked again next time: ``zfs version``
    prints none before the module is loaded, and a run's probe asks before a stack's set-up
    loads it."""
    t = tool(name)
    if not t.path():
        return None
    if t in _versions:
        return _versions[t]
    if _known().get(t.name) not in (None, UNKNOWN):
        found = _known()[t.name]
    elif not t.version_argv:
        found = _package_version(t.package)
    else:
        found = _ask(tuple(t.version_argv), t.version_re)
    if found not in (None, UNKNOWN):
        _versions[t] = found
    return found


def forget() -> None:
    """Drop every version asked so far (and the file's), as a test that changes them must."""
    _versions.clear()
    _known.cache_clear()
    _package_version.cache_clear()


@lru_cache(maxsize=None)
def _package_version(package: str) -> str:
    """dpkg's version of a package, whole (several tools of one package ask once): it is a
    version already, and may have no dot (ecryptfs-utils' ``111-6``). Only what dpkg prints
    on success is one: its error ("dpkg-query: no packages found matching …") is not. Without
    its epoch (nfs-kernel-server's ``1:2.6.2-4+deb12u1`` is ``2.6.2-4+deb12u1``), as the tool's
    own version is written and as runs before this one recorded it: an epoch only orders."""
    return _ask(("dpkg-query", "-W", "-f=${Version}", package), r"^(?:\d+:)?(\S+)",
                answered=True)


def _ask(argv: tuple[str, ...], pattern: str, *, answered: bool = False) -> str:
    """The first group of ``pattern`` in what ``argv`` prints (both streams: many tools print
    their version on stderr, or with a failing status, as ``bonnie++ -h``), else "unknown",
    as when the asking program cannot be run. ``answered``: only a successful run's stdout."""
    try:
        done = proc.run(list(argv), timeout=20, check=False)
    except (CryptcostError, UserError):
        return UNKNOWN
    if answered:
        said = done.stdout if done.returncode == 0 else ""
    else:
        said = done.stdout + "\n" + done.stderr
    match = re.search(pattern, said)
    return match.group(1) if match else UNKNOWN


def versions(extra: "tuple[Tool, ...] | list[Tool]" = ()) -> dict[str, str | None]:
    """Versions of every tool in :data:`TOOLS` and ``extra`` (None where not installed)."""
    return {t.name: version(t) for t in [*TOOLS.values(), *extra]}
