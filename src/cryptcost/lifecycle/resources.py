"""Creating and releasing resources, always through the journal.

Stacks and media never mount, attach or spawn anything themselves: they
ask :class:`Resources`, which journals the intent, creates the resource,
and releases everything in reverse order when its ``with`` block ends —
on success, on error, on Ctrl-C and on SIGTERM. After a crash,
:func:`cleanup` replays the journal with the same releasers.

A releaser is a function of the entry's ``data``, registered by type with
:func:`releaser`; it must be idempotent (the resource may be half-made or
already gone). A stack with a resource of its own registers its releaser
in its own module.
"""

from __future__ import annotations

import logging
import os
import secrets
import shutil
import signal
import tempfile
import time
from pathlib import Path
from typing import Callable

from cryptcost import proc
from cryptcost.errors import CryptcostError, ProcessError
from cryptcost.lifecycle.journal import Entry, Journal, journals

log = logging.getLogger("cryptcost.resources")

RELEASERS: dict[str, Callable[[dict], None]] = {}


def releaser(type_: str):
    """Register the function that releases resources of ``type_``."""
    def register(fn: Callable[[dict], None]):
        RELEASERS[type_] = fn
        return fn
    return register


class Terminated(BaseException):
    """SIGTERM or SIGHUP arrived; unwinds like Ctrl-C so teardown runs."""


def install_signal_handlers() -> None:
    """Turn SIGTERM/SIGHUP into :class:`Terminated` so ``finally`` blocks run."""
    def handler(signum, frame):
        raise Terminated(signal.Signals(signum).name)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, handler)


# --- mount table ------------------------------------------------------------------

def _unescape(path: str) -> str:
    return path.replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n").replace("\\134", "\\")


def mounts() -> dict[str, str]:
    """Mount points → filesystem type, from /proc/self/mountinfo."""
    table = {}
    with open("/proc/self/mountinfo") as fh:
        for line in fh:
            left, _, right = line.partition(" - ")
            table[_unescape(left.split()[4])] = right.split()[0]
    return table


def is_mounted(path: str | os.PathLike) -> bool:
    return os.path.realpath(path) in mounts() or str(path) in mounts()


# --- releasers ---------------------------------------------------------------------

@releaser("mount")
def release_mount(data: dict) -> None:
    target = data["target"]
    for attempt in range(20):
        if not is_mounted(target):
            return
        done = proc.run(["umount", target], check=False, timeout=60)
        if done.returncode == 0:
            return
        time.sleep(0.1 * (attempt + 1))
    proc.run(["umount", "-l", target], check=False, timeout=60)
    log.warning("%s was busy; detached lazily", target)


@releaser("loop")
def release_loop(data: dict) -> None:
    device, backing = data.get("device"), os.path.realpath(data["backing"])
    candidates = [device] if device else []
    if not device:       # crashed between attach and journal update: find it by backing file
        done = proc.run(["losetup", "-j", backing, "-O", "NAME", "-n"], check=False, timeout=30)
        candidates = done.stdout.split()
    for dev in candidates:
        name = os.path.basename(dev)
        try:
            current = Path(f"/sys/block/{name}/loop/backing_file").read_text().strip()
        except OSError:
            continue                                   # already detached
        if os.path.realpath(current.removesuffix(" (deleted)")) != backing:
            continue                                   # reused by someone else: not ours
        proc.run(["losetup", "-d", dev], check=False, timeout=30)


def _process_matches(pid: int, started: float | None, exe_name: str | None) -> bool:
    try:
        import psutil
        p = psutil.Process(pid)
        if started is not None and abs(p.create_time() - started) > 1.0:
            return False
        return exe_name is None or os.path.basename(p.cmdline()[0]) == exe_name
    except Exception:
        return False


@releaser("daemon")
def release_daemon(data: dict) -> None:
    """Stop our daemon by pid, after checking the pid was not reused.

    A FUSE daemon whose mount is gone flushes its caches and exits by itself;
    ``graceful`` gives it that long before it is signalled, since a signal
    in the middle of the flush loses data (CryFS does this).
    """
    pid = data.get("pid")
    if not pid or not _process_matches(pid, data.get("started"), data.get("exe")):
        return
    deadline = time.monotonic() + data.get("graceful", 0)
    while time.monotonic() < deadline:
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass
        if not _process_matches(pid, data.get("started"), data.get("exe")):
            return
        time.sleep(0.02)
    for sig, wait in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(pid, sig) if data.get("group", True) else os.kill(pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if not _process_matches(pid, data.get("started"), data.get("exe")):
                return
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass
            time.sleep(0.05)


@releaser("dir")
def release_dir(data: dict) -> None:
    path = Path(data["path"])
    if path.is_dir() and not is_mounted(path):
        shutil.rmtree(path, ignore_errors=True)


@releaser("keyfile")
def release_keyfile(data: dict) -> None:
    """Overwrite the key with zeros before unlinking it."""
    path = Path(data["path"])
    try:
        size = path.stat().st_size
        with open(path, "r+b") as fh:
            fh.write(b"\0" * size)
            fh.flush()
            os.fsync(fh.fileno())
        path.unlink()
    except FileNotFoundError:
        pass


def release_entry(entry: Entry) -> None:
    fn = RELEASERS.get(entry.type)
    if fn is None:
        raise CryptcostError(f"internal: no releaser for resource type {entry.type!r}")
    fn(entry.data)


# --- the creator -------------------------------------------------------------------

class Resources:
    """Journalled creation, reverse-order release. Use as a context manager."""

    def __init__(self, journal: Journal | None = None, base: str | None = None):
        self.journal = journal or Journal.create()
        self.base = Path(base or tempfile.gettempdir())
        self._keydir: Path | None = None
        self.failures: list[str] = []

    def __enter__(self) -> "Resources":
        return self

    def __exit__(self, *exc) -> None:
        self.release_all()

    # generic -----------------------------------------------------------------------
    def track(self, type_: str, create: Callable[[Entry], object] | None = None, **data):
        """Journal a resource of ``type_``, then create it with ``create(entry)``."""
        entry = self.journal.add(type_, **data)
        if create is None:
            return entry
        try:
            return create(entry)
        except BaseException:
            self.release(entry)
            raise

    def release(self, entry: Entry) -> None:
        if entry.released:
            return
        try:
            release_entry(entry)
        except (CryptcostError, OSError) as exc:
            self.failures.append(f"{entry.type} {entry.data}: {exc}")
            log.error("could not release %s %s: %s", entry.type, entry.data, exc)
            return
        self.journal.mark_released(entry)

    def release_all(self) -> None:
        """Release every resource, newest first; never stops half-way."""
        for entry in self.journal.pending():
            self.release(entry)
        self.journal.remove_if_done()

    # specific ----------------------------------------------------------------------
    def tmpdir(self, prefix: str = "cryptcost-") -> Path:
        entry = self.journal.add("dir", path="")
        path = Path(tempfile.mkdtemp(prefix=prefix, dir=self.base))
        self.journal.update(entry, path=str(path))
        return path

    def mount(self, source: str, target: str | Path, fstype: str | None = None,
              options: str | None = None) -> None:
        argv = ["mount"] + (["-t", fstype] if fstype else []) + (["-o", options] if options else [])
        self.track("mount", lambda e: proc.run(argv + [source, str(target)], timeout=120),
                   target=str(target), source=source, fstype=fstype)

    def tmpfs(self, target: str | Path, size_bytes: int, mode: str = "0700") -> None:
        self.mount("tmpfs", target, "tmpfs", f"size={size_bytes},mode={mode}")

    def loop(self, backing: str | Path, direct_io: bool = False, offset: int = 0,
             size: int | None = None) -> str:
        """Attach ``backing`` (or a slice of it) to a free loop device; returns /dev/loopN."""
        def create(entry: Entry) -> str:
            extra = (["--offset", str(offset)] if offset else []) + \
                    (["--sizelimit", str(size)] if size else [])
            done = proc.run(["losetup", "--find", "--show", f"--direct-io={'on' if direct_io else 'off'}"]
                            + extra + [str(backing)], timeout=60)
            device = done.stdout.strip()
            self.journal.update(entry, device=device)
            return device
        return self.track("loop", create, backing=os.path.realpath(backing), direct_io=direct_io)

    def daemon(self, argv: list[str], *, env: dict | None = None, logfile: str | None = None,
               cwd: str | None = None, stdin_file: str | Path | None = None,
               graceful: float = 0) -> proc.Daemon:
        """Start a background process whose pid the journal keeps.

        ``stdin_file`` feeds a file (a passphrase on the key tmpfs) to its stdin.
        """
        def create(entry: Entry) -> proc.Daemon:
            if stdin_file is None:
                d = proc.spawn(argv, env=env, logfile=logfile, cwd=cwd)
            else:
                with open(stdin_file, "rb") as fh:
                    d = proc.spawn(argv, env=env, logfile=logfile, cwd=cwd, stdin=fh)
            try:
                import psutil
                started = psutil.Process(d.pid).create_time()
            except Exception:
                started = None
            self.journal.update(entry, pid=d.pid, started=started)
            return d
        return self.track("daemon", create, argv0=argv[0], exe=os.path.basename(argv[0]), graceful=graceful)

    def fuse(self, argv: list[str], mountpoint: str | Path, *, env: dict | None = None,
             logfile: str | None = None, timeout: float = 60, cwd: str | None = None,
             stdin_file: str | Path | None = None, exits_on_unmount: bool = True) -> proc.Daemon:
        """Start a foreground FUSE daemon and wait for its mount to appear.

        Journal order is daemon, then mount, so release unmounts first and
        then stops the daemon — after letting it exit by itself when it
        ``exits_on_unmount`` (most FUSE filesystems; not qemu-storage-daemon).
        """
        daemon = self.daemon(argv, env=env, logfile=logfile, cwd=cwd, stdin_file=stdin_file,
                             graceful=30.0 if exits_on_unmount else 0.0)
        self.track("mount", target=str(mountpoint), source=argv[0], fstype="fuse")
        proc.wait_for(lambda: is_mounted(mountpoint), timeout=timeout, daemon=daemon,
                      what=f"mount at {mountpoint}")
        return daemon

    def keydir(self) -> Path:
        """A private 0700 tmpfs for key files, so keys never touch a disk."""
        if self._keydir is None:
            path = self.tmpdir("cryptcost-keys-")
            self.tmpfs(path, 1 << 20, "0700")
            self._keydir = path
        return self._keydir

    def keyfile(self, nbytes: int = 32, *, text: bool = False, name: str | None = None) -> tuple[Path, bytes]:
        """A fresh random key in a 0600 file on the key tmpfs: (path, key).

        ``text`` makes the key a hex string (for tools that want a
        passphrase). The key is returned so a stack can hand it to a
        kernel interface; it must never be logged or stored.
        """
        key = secrets.token_bytes(nbytes)
        if text:
            key = key.hex().encode()
        return self.secret_file(key, name), key

    def secret_file(self, content: bytes, name: str | None = None) -> Path:
        """``content`` (a key, or a config that holds one) in a new 0600 file on
        the key tmpfs, journalled so it is zeroed and removed at release."""
        path = self.keydir() / (name or f"key-{secrets.token_hex(4)}")
        entry = self.journal.add("keyfile", path=str(path))
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as fh:
                fh.write(content)
        except BaseException:
            self.release(entry)
            raise
        return path


def cleanup(force: bool = False) -> list[str]:
    """Release what killed runs left behind; returns what was done, line by line."""
    report = []
    for path in journals():
        try:
            journal = Journal.load(path)
        except OSError as exc:
            report.append(f"{path}: unreadable ({exc.strerror})")
            continue
        if journal.owner_alive() and not force:
            report.append(f"{path.name}: run {journal.owner_pid} is still alive; left alone "
                          "(stop it first, or pass --force)")
            continue
        for entry in journal.pending():
            try:
                release_entry(entry)
                journal._append({"op": "release", "id": entry.id})
                entry.released = True
                report.append(f"released {entry.type} {_describe(entry)}")
            except (CryptcostError, OSError, ProcessError) as exc:
                report.append(f"FAILED to release {entry.type} {_describe(entry)}: {exc}")
        if journal.remove_if_done():
            report.append(f"{path.name}: done")
    return report


def _describe(entry: Entry) -> str:
    d = entry.data
    return d.get("target") or d.get("device") or d.get("path") or \
        (f"pid {d.get('pid')} ({d.get('exe')})" if d.get("pid") else str(
            {k: v for k, v in d.items() if not k.startswith("_")}))
