"""Creating resources, always through the journal.

Stacks, media and links never mount, attach or spawn anything themselves:
they ask :class:`Resources`, which journals the intent, creates the
resource, and releases everything in reverse order when its ``with`` block
ends — on success, on error, on Ctrl-C and on SIGTERM — with the releasers
of :mod:`cryptcost.lifecycle.release`, which ``cleanup`` replays after a
crash.
"""

from __future__ import annotations

import logging
import os
import secrets
import signal
import tempfile
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Callable

from cryptcost import faults, proc
from cryptcost.errors import CryptcostError
from cryptcost.lifecycle.journal import Entry, Journal
from cryptcost.lifecycle.release import RUN_ENV, SETTINGS, end_processes, is_mounted, release_entry

log = logging.getLogger("cryptcost.resources")


class Terminated(BaseException):
    """SIGTERM or SIGHUP arrived; unwinds like Ctrl-C so teardown runs."""


def install_signal_handlers() -> None:
    """Turn SIGTERM/SIGHUP into :class:`Terminated` so ``finally`` blocks run."""
    def handler(signum, frame):
        raise Terminated(signal.Signals(signum).name)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, handler)


_deferring = False


@contextmanager
def signals_deferred(pending: int, doing: str | None = None):
    """SIGINT, SIGTERM and SIGHUP wait while resources are released (or what ``doing``
    says is done), then act.

    A run is often signalled twice: ``timeout(1)`` signals its child and then
    the child's whole process group, and Ctrl-C reaches every process of the
    terminal's group. A second signal raised inside release would stop it
    half-way and leave the rest to ``cleanup``; instead it is held, and
    raised once release is over (each release step has its own timeout)."""
    global _deferring
    if _deferring or threading.current_thread() is not threading.main_thread():
        # already held by an outer release, or not the main thread
        yield
        return
    held: list[int] = []

    def hold(signum, frame):
        if not held:
            log.warning("%s: %s first", signal.Signals(signum).name,
                        doing or f"releasing {pending} resource(s)")
        held.append(signum)
    watched = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    before = {sig: signal.signal(sig, hold) for sig in watched}
    _deferring = True
    try:
        yield
    finally:
        _deferring = False
        for sig, handler in before.items():
            signal.signal(sig, handler)
    if held:
        if held[0] == signal.SIGINT:
            raise KeyboardInterrupt
        raise Terminated(signal.Signals(held[0]).name)


# --- the creator -------------------------------------------------------------------

class Resources:
    """Journalled creation, reverse-order release. Use as a context manager."""

    def __init__(self, journal: Journal | None = None, base: str | None = None):
        self.journal = journal or Journal.create()
        # inherited by every process started from here on
        os.environ[RUN_ENV] = self.journal.token
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
        """Release one resource; a signal arriving meanwhile waits until it is released
        (a cache reset releases a mount and a daemon in the middle of a run)."""
        if entry.released:
            return
        with signals_deferred(1):
            try:
                release_entry(entry)
            except (CryptcostError, OSError) as exc:
                self.failures.append(f"{entry.type} {entry.data}: {exc}")
                log.error("could not release %s %s: %s", entry.type, entry.data, exc)
                return
            self.journal.mark_released(entry)

    def release_all(self) -> None:
        """Release every resource, newest first; never stops half-way, not even
        for a second signal (see :func:`signals_deferred`). Then end any
        process of this run still alive, and wait until it is gone."""
        with signals_deferred(len(self.journal.pending())):
            for n, entry in enumerate(self.journal.pending()):
                self.release(entry)
                if n == 0:
                    faults.at("teardown")
            left = end_processes(self.journal.token)
            if left:
                self.failures.append(f"processes {left} of this run did not end")
                log.error("processes %s of this run did not end", left)
            self.journal.remove_if_done()

    # specific ----------------------------------------------------------------------
    def tmpdir(self, prefix: str = "cryptcost-") -> Path:
        """A new private directory under the base. Its full path is chosen and
        journalled before it is made, so that release never has to guess it."""
        while True:
            path = self.base.resolve() / f"{prefix}{secrets.token_hex(6)}"
            if not path.exists():
                break
        self.track("dir", lambda e: path.mkdir(mode=0o700), path=str(path))
        return path

    def setting(self, path: str, value: str) -> Entry:
        """Change a system setting (one of ``release.SETTINGS``); its old value
        is journalled first and written back at release, or by ``cleanup``."""
        if path not in SETTINGS:
            raise CryptcostError(f"{path} is not a setting cryptcost changes")
        old = Path(path).read_text().strip()
        return self.track("setting", lambda e: (Path(path).write_text(value), e)[1], path=path,
                          old=old)

    def mount(self, source: str, target: str | Path, fstype: str | None = None,
              options: str | None = None, via: list[str] = (), helper: bool = True) -> Entry:
        """Mount ``source`` on ``target``. ``via`` runs mount(8) through another
        command, e.g. ``nsenter --net=…`` (a network filesystem's socket lives in
        the mounting process's network namespace); ``helper=False`` hands the
        options to the kernel as they are (mount -i: no /sbin/mount.TYPE)."""
        argv = [*via, "mount"] + ([] if helper else ["-i"]) + (["-t", fstype] if fstype else []) \
            + (["-o", options] if options else [])
        return self.track("mount", lambda e: (proc.run(argv + [source, str(target)], timeout=120),
                                              e)[1],
                          target=str(target), source=source, fstype=fstype)

    def tmpfs(self, target: str | Path, size_bytes: int, mode: str = "0700") -> None:
        self.mount("tmpfs", target, "tmpfs", f"size={size_bytes},mode={mode}")

    def loop(self, backing: str | Path, direct_io: bool = False, offset: int = 0,
             size: int | None = None) -> str:
        """Attach ``backing`` (or a slice of it) to a free loop device; returns /dev/loopN."""
        def create(entry: Entry) -> str:
            extra = (["--offset", str(offset)] if offset else []) + \
                    (["--sizelimit", str(size)] if size else [])
            done = proc.run(["losetup", "--find", "--show",
                             f"--direct-io={'on' if direct_io else 'off'}"]
                            + extra + [str(backing)], timeout=60)
            device = done.stdout.strip()
            self.journal.update(entry, device=device)
            return device
        return self.track("loop", create, backing=os.path.realpath(backing), direct_io=direct_io)

    def daemon(self, argv: list[str], *, env: dict | None = None, logfile: str | None = None,
               cwd: str | None = None, stdin_file: str | Path | None = None,
               graceful: float = 0, mountpoint: str | Path | None = None,
               session: bool = False) -> proc.Daemon:
        """Start a background process whose pid the journal keeps.

        ``stdin_file`` feeds a file (a passphrase on the key tmpfs) to its stdin;
        ``session`` makes it a :class:`proc.Session` (lines on its stdin and stdout).
        """
        def create(entry: Entry) -> proc.Daemon:
            if session:
                d = proc.session(argv, env=env, logfile=logfile)
            elif stdin_file is None:
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
            d.entry = entry
            return d
        # `ip netns exec NS PROGRAM …` becomes PROGRAM: the pid check at release must expect that
        # name.
        program = proc.program(argv)
        extra = {"mountpoint": str(mountpoint)} if mountpoint else {}
        return self.track("daemon", create, argv0=program, exe=os.path.basename(program),
                          graceful=graceful,
                          **extra)

    def stop(self, daemon: proc.Daemon, timeout: float = 10) -> int | None:
        """Stop a daemon started by :meth:`daemon` before the scope ends; its entry is released."""
        code = daemon.stop(timeout)
        entry = getattr(daemon, "entry", None)
        if entry is not None and not entry.released:
            self.journal.mark_released(entry)
        return code

    def fuse(self, argv: list[str], mountpoint: str | Path, *, env: dict | None = None,
             logfile: str | None = None, timeout: float = 60, cwd: str | None = None,
             stdin_file: str | Path | None = None, exits_on_unmount: bool = True,
             wait: bool = True) -> proc.Daemon:
        """Start a foreground FUSE daemon and, unless not to ``wait``, wait for its mount to appear.

        Journal order is daemon, then mount, so release unmounts first and
        then stops the daemon — after letting it exit by itself when it
        ``exits_on_unmount`` (most FUSE filesystems; not qemu-storage-daemon).
        """
        daemon = self.daemon(argv, env=env, logfile=logfile, cwd=cwd, stdin_file=stdin_file,
                             graceful=30.0 if exits_on_unmount else 0.0, mountpoint=mountpoint)
        self.track("mount", target=str(mountpoint), source=argv[0], fstype="fuse")
        if wait:
            self.fuse_mounted(daemon, mountpoint, timeout)
        return daemon

    def fuse_mounted(self, daemon: proc.Daemon, mountpoint: str | Path,
                     timeout: float = 60) -> None:
        """Wait for the mount of a daemon started by :meth:`fuse`, and journal
        that it appeared: a daemon that never mounted has nothing to flush, so
        its release signals it at once rather than after ``graceful``."""
        proc.wait_for(lambda: is_mounted(mountpoint), timeout=timeout, daemon=daemon,
                      what=f"mount at {mountpoint}")
        if getattr(daemon, "entry", None) is not None:
            self.journal.update(daemon.entry, mounted=True)

    def keydir(self) -> Path:
        """A private 0700 tmpfs for key files, so keys never touch a disk."""
        if self._keydir is None:
            path = self.tmpdir("cryptcost-keys-")
            self.tmpfs(path, 1 << 20, "0700")
            self._keydir = path
        return self._keydir

    def keyfile(self, nbytes: int = 32, *, text: bool = False,
                name: str | None = None) -> tuple[Path, bytes]:
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
        the key tmpfs, journalled so it is zeroed and removed at release.
        ``name`` is a readable suffix; the path returned is unique."""
        token = secrets.token_hex(4)
        # never two at one path
        path = self.keydir() / (f"{token}-{name}" if name else f"key-{token}")
        entry = self.journal.add("keyfile", path=str(path))
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as fh:
                fh.write(content)
        except BaseException:
            self.release(entry)
            raise
        return path
