"""Shared by ``luks-userspace`` and its baseline ``qemu-raw``: a block
device opened by qemu-storage-daemon, exported through FUSE as a file,
attached to a loop device, with a filesystem on top.

The loop device on the FUSE export is buffered: with ``--direct-io=on``
qemu 7.2's FUSE export writes concurrent requests at the wrong offsets
(data corruption), which the stack tests check byte for byte.
"""

from __future__ import annotations

import time
from pathlib import Path

from cryptcost import proc
from cryptcost.errors import ProcessError
from cryptcost.media import Backing
from cryptcost.lifecycle.resources import Resources
from cryptcost.host import tools
from cryptcost.host.tools import Tool
from cryptcost.stacks.fs import StorageStack, evict_pages, make_fs

QSD = tools.tool("qemu-storage-daemon")
QEMU_IMG = Tool("qemu-img", "qemu-img", "qemu-utils", ("qemu-img", "--version"))


class QemuExportStack(StorageStack):
    """Base: subclasses give ``format_args`` (the format layer over ``file0``)."""

    layer = "userspace"
    tools = (QSD, "mkfs.ext4")
    features = ("fuse", "loop")

    def prepare(self, res: Resources, backing: Backing, workdir: Path) -> list[str]:
        """Format ``backing`` if needed; return the qsd arguments that open the
        format layer as node ``fmt0`` on top of node ``file0``."""
        raise NotImplementedError

    def setup(self, res: Resources, backing: Backing) -> Path:
        work = res.tmpdir(f"cryptcost-{self.name}-")
        fmt_args = self.prepare(res, backing, work)
        self.export = export = work / "export"
        export.touch()
        argv = ["qemu-storage-daemon",
                "--blockdev", f"driver=host_device,node-name=file0,filename={backing.device},"
                              "cache.direct=on",
                *fmt_args,
                "--export", f"type=fuse,id=exp0,node-name=fmt0,mountpoint={export},writable=on"]
        # qemu-storage-daemon outlives its export's unmount: stop it straight away.
        self.daemon = res.fuse(argv, export, logfile=str(work / "qsd.log"), exits_on_unmount=False,
                               env=self.accel_env() or None)
        loop = res.loop(export, direct_io=False)          # never direct: see module docstring
        mnt = make_fs(res, loop, self.fs)
        self.workdir = mnt / "data"
        self.workdir.mkdir()
        return self.workdir

    def forget(self, res: Resources, path: Path) -> str:
        """The file's pages, then those of the export the buffered loop
        device reads through: the only caches a read of one file meets
        (qemu-storage-daemon opens the medium with cache.direct=on), so no
        global drop_caches is needed. A stack test compares the two."""
        evict_pages(path)
        evict_pages(self.export)
        return "fadvise_dontneed+export"

    evicts_one_file = True

    def daemon_pids(self) -> list[int]:
        return [self.daemon.pid] if getattr(self, "daemon", None) else []

    def describe(self) -> dict:
        d = super().describe()
        d["loop_on_export"] = "buffered"
        return d


# The cipher backend QEMU was built with (its crypto/ layer picks one of them at build time),
# told apart by a function each one's cipher code imports.
BACKENDS = {"nettle": b"\0nettle_xts_encrypt_message\0", "gnutls": b"\0gnutls_cipher_encrypt2\0",
            "gcrypt": b"\0gcry_cipher_encrypt\0"}


def cipher_backend(binary: str | None) -> str | None:
    """Which library does the ciphers of a QEMU binary: ``nettle``, ``gnutls``
    or ``gcrypt`` by the symbols it imports; None when none is found (QEMU's
    own built-in AES, or an unreadable binary). Debian 12's qemu uses Nettle
    for ciphers, GnuTLS only for TLS."""
    try:
        data = Path(binary).read_bytes() if binary else b""
    except OSError:
        return None
    found = [name for name, symbol in BACKENDS.items() if symbol in data]
    return found[0] if len(found) == 1 else None


def qemu_run(argv: list[str], tries: int = 8) -> proc.Completed:
    """qemu-img, retried: its PBKDF timing sometimes measures no CPU time
    and fails with 'Unable to get accurate CPU usage' (a QEMU bug, fixed
    upstream in 9.2.1 as "crypto: fix bogus error benchmarking pbkdf on
    fast machines"); a pause between tries lets the clock tick."""
    for attempt in range(tries):
        done = proc.run(argv, timeout=120, check=False)
        if done.returncode == 0:
            return done
        if "accurate CPU usage" not in done.stderr or attempt == tries - 1:
            raise ProcessError(done.argv, done.returncode, done.stdout, done.stderr)
        time.sleep(0.2 * (attempt + 1))
    raise AssertionError("unreachable")
