"""The bonnie++ engine: R2's benchmark (R3 ran it too), its block write, rewrite and block
read of one file, each phase timed and its CPU counted from outside.

``bonnie++ -y p`` prints a test's number (``1:``) and waits for a line on its stdin before
each test, so the caller starts each phase itself, with the system's CPU counters read just
before. A phase ends when bonnie++ closes the file, after its fsync: an inotify watch on the
directory sees the close. So each phase is a sample of its own, on the same clock as every
other engine's, and its CPU is the whole system's over exactly that time (rule 7; bonnie++'s
own ``%CP`` is its process's only, which leaves out dm-crypt's workers and a FUSE daemon).

What bonnie++ measures: ``write`` writes the file chunk by chunk; ``rewrite`` reads each chunk,
changes it and writes it back in place (its rate is the file's size over that time, as
bonnie++ reports it, though it moves the file twice); ``read`` reads the file. Each phase ends
with bonnie++'s fsync, so what it wrote is in its time. R2 kept the page cache out with a file
twice its RAM; here the caller evicts the file before the rewrite and the read, outside the
clock, while bonnie++ waits at its prompt. (bonnie++ 2.00's ``-D`` opens only the first phase's
file with O_DIRECT, and reopens it buffered for the others, so it is not used.) Its data is
mostly zeros: a stack that compresses would flatter it. bonnie++'s own figures (its own clock,
KiB/s; ``+++++`` for a phase under half a second) come at its end and are kept beside
cryptcost's.
"""

from __future__ import annotations

import ctypes
import os
import re
import select
import struct
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from cryptcost import proc
from cryptcost.errors import CryptcostError, DataIntegrityError

CHUNK = 8192                  # bonnie++'s default chunk, R2's too
MOST = 1024 << 20             # above 1 GiB bonnie++ splits its file, closing each part in a phase
PHASES = {"write": "1", "rewrite": "2", "read": "4"}
SEEKS = "5"                   # the test after the read: with 0 seeks, it only starts its workers
SEEK_START = 3.0              # which bonnie++ waits for, after the read, before its prompt
# the CSV's fields (bonnie++ 2.00, format 1.98): block write, rewrite, block read (KiB/s)
OWN_FIELDS = {"write": 11, "rewrite": 13, "read": 17}
TIMING = ("bonnie++'s phase, from cryptcost's answer to its prompt until it closed the file "
          "after its fsync")
DATA = ("bonnie++'s own, mostly zeros (compressible, as R2's was; fio's is incompressible): "
        "no figure for a stack that compresses")
IN_CLOSE = 0x00000008 | 0x00000010          # IN_CLOSE_WRITE | IN_CLOSE_NOWRITE


def estimate(phase: str, size: int, rate: float, reset: float) -> float:
    """One phase's seconds at ``rate`` (the rewrite reads and writes the file), with what comes
    around it: bonnie++'s start before the write, the file's eviction (``reset`` seconds)
    before the rewrite and the read, the seek test's start after the read."""
    around = {"write": 0.3, "rewrite": reset, "read": reset + SEEK_START}[phase]
    return (2 if phase == "rewrite" else 1) * size / rate + around


def available() -> bool:
    return bool(proc.which("bonnie++"))


class _Closes:
    """Closes of files in one directory, as inotify reports them."""

    def __init__(self, directory: Path):
        libc = ctypes.CDLL(None, use_errno=True)
        self.fd = libc.inotify_init1(os.O_CLOEXEC | os.O_NONBLOCK)
        if self.fd < 0 or libc.inotify_add_watch(self.fd, os.fsencode(directory), IN_CLOSE) < 0:
            err = ctypes.get_errno()
            if self.fd >= 0:
                os.close(self.fd)
            raise CryptcostError(f"cannot watch {directory} for bonnie++'s closes: "
                                 f"{os.strerror(err)}")

    def drain(self) -> None:
        try:
            while os.read(self.fd, 1 << 16):
                pass
        except BlockingIOError:
            pass

    def wait(self, timeout: float) -> float:
        """When the next close of a file named ``Bonnie.*`` came (time.perf_counter)."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.fd], [], [], left)[0]:
                raise CryptcostError(f"bonnie++ did not finish its phase within {timeout:.0f} s")
            at = time.perf_counter()
            data = os.read(self.fd, 1 << 16)
            while data:
                _, _, _, length = struct.unpack_from("iIII", data)
                name = data[16:16 + length].rstrip(b"\0")
                data = data[16 + length:]
                if name.startswith(b"Bonnie."):
                    return at

    def close(self) -> None:
        os.close(self.fd)


@dataclass
class Phase:
    name: str
    seconds: float
    bytes: int


@dataclass
class Run:
    """One bonnie++ run in ``directory`` of a ``size``-byte file, phase by phase: :meth:`start`,
    then :meth:`phase` for write, rewrite and read in turn (each returns when it ended), then
    :meth:`finish` for bonnie++'s own figures. :meth:`stop` ends it at any point."""

    directory: Path
    size: int
    logfile: str | None = None
    done: list = field(default_factory=list)       # the phases run, in order
    _session: "proc.Session | None" = None
    _closes: _Closes | None = None

    def start(self) -> None:
        if self.size % (1 << 20) or not 0 < self.size <= MOST:
            raise CryptcostError(f"bonnie++'s file must be whole MiB, at most {MOST >> 20} MiB")
        self.directory.mkdir(exist_ok=True)
        self._closes = _Closes(self.directory)
        self._session = proc.session(
            ["bonnie++", "-u", "root", "-d", str(self.directory), "-s",
             f"{self.size >> 20}:{CHUNK}:0", "-r", "0", "-n", "0", "-f", "-y", "p", "-q",
             "-m", "cryptcost"], logfile=self.logfile)
        self._prompt(PHASES["write"], 120)

    def _prompt(self, number: str, timeout: float) -> None:
        """Wait for bonnie++'s prompt before test ``number``."""
        while True:
            line = self._session.recv(timeout)
            if line is None:
                self._session.stop()
                raise CryptcostError(f"bonnie++ ended before its test {number}: "
                                     f"{self._session.output().strip()[-300:] or 'no output'}")
            if line.strip() == f"{number}:":
                return
            if re.fullmatch(r"\d:", line.strip()):
                raise CryptcostError(f"bonnie++ asked for test {line.strip()} where test "
                                     f"{number} was due")

    def phase(self, name: str, timeout: float, before: "Callable[[Path], object] | None" = None
              ) -> Phase:
        """Run phase ``name`` (its prompt already seen), after ``before(file)`` (a cache reset,
        outside the clock): its time until bonnie++ closed the file, and the file's bytes."""
        if before is not None:
            before(self.file())
        self._closes.drain()
        start = time.perf_counter()
        self._session.send("")
        end = self._closes.wait(timeout)
        if name == "write":
            got = self.file().stat().st_size
            if got != self.size:
                raise DataIntegrityError(f"bonnie++ wrote {got} bytes of {self.size}")
        after = {"write": PHASES["rewrite"], "rewrite": PHASES["read"]}.get(name)
        if after:                                   # (after the read: see finish)
            self._prompt(after, timeout + 30)
        self.done.append(name)
        return Phase(name, end - start, self.size)

    def file(self) -> Path:
        """bonnie++'s one file."""
        made = list(self.directory.glob("Bonnie.*"))
        if len(made) != 1:
            raise CryptcostError(f"bonnie++ left {len(made)} files where it writes one")
        return made[0]

    def finish(self, timeout: float = 60) -> dict:
        """After the read: the seek test (no seeks; bonnie++ starts its workers and waits
        :data:`SEEK_START` first), then bonnie++'s own figures (bytes/s, None for ``+++++``)."""
        self._prompt(SEEKS, timeout)
        self._session.send("")
        lines = []
        while (line := self._session.recv(timeout)) is not None:
            lines.append(line)
        self.stop()
        return parse(lines)

    def stop(self) -> None:
        if self._session is not None:
            self._session.stop()
            self._session = None
        if self._closes is not None:
            self._closes.close()
            self._closes = None


def parse(lines: list[str]) -> dict:
    """bonnie++'s own block write, rewrite and read (bytes/s, None where it printed ``+++++``:
    a phase too short for its clock) and its ``%CP`` for each, from its CSV line."""
    rows = [ln.split(",") for ln in lines if ln.count(",") > 20]
    if not rows:
        raise CryptcostError("bonnie++ printed no CSV line")
    row, out = rows[-1], {}
    for name, i in OWN_FIELDS.items():
        rate, cpu = row[i].strip(), row[i + 1].strip()
        out[name] = {"bytes_per_s": float(rate) * 1024 if rate.isdigit() else None,
                     "cpu_percent": float(cpu) if cpu.isdigit() else None}
    out["version"] = row[1]
    return out
