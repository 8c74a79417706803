"""Releasing resources: one releaser per resource type, the process sweep,
and ``cleanup`` after a crash.

A releaser is a function of the entry's ``data``, registered by type with
:func:`releaser`; it must be idempotent (the resource may be half-made or
already gone). A stack or link with a resource of its own registers its
releaser in its own module. Every process a run starts carries its
journal's token in :data:`RUN_ENV`, so that nothing it started survives.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import time
from pathlib import Path
from typing import Callable

from cryptcost import proc
from cryptcost.errors import CryptcostError, ProcessError
from cryptcost.lifecycle.journal import Entry, Journal, journals

log = logging.getLogger("cryptcost.release")

RELEASERS: dict[str, Callable[[dict], None]] = {}
# Every process a run starts inherits this variable, set to its journal's
# token, so that cleanup finds them all — even one killed with the run
# before its pid reached the journal, and a workload (fio) left running.
RUN_ENV = "CRYPTCOST_RUN"


def releaser(type_: str):
    """Register the function that releases resources of ``type_``."""
    def register(fn: Callable[[dict], None]):
        RELEASERS[type_] = fn
        return fn
    return register


# --- mount table ------------------------------------------------------------------

def _unescape(path: str) -> str:
    return path.replace("\\040",
                        " ").replace("\\011", "\t").replace("\\012", "\n").replace("\\134", "\\")


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

UMOUNT_SECONDS = 60.0      # all the attempts at one mount together; then it is detached lazily


@releaser("mount")
def release_mount(data: dict) -> None:
    """Unmount, retrying while it is busy, for at most UMOUNT_SECONDS in all (a hung umount
    is killed); then detach it lazily, so that one stuck mount never holds up the others."""
    target = data["target"]
    deadline = time.monotonic() + UMOUNT_SECONDS
    attempt = 0
    while time.monotonic() < deadline:
        if not is_mounted(target):
            return
        try:
            done = proc.run(["umount", target], check=False,
                            timeout=max(1.0, deadline - time.monotonic()))
        except ProcessError:                     # it hung until the deadline: detach it lazily
            break
        if done.returncode == 0:
            return
        attempt += 1
        time.sleep(min(0.1 * attempt, 2.0))
    if not is_mounted(target):
        return
    proc.run(["umount", "-l", target], check=False, timeout=30)
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
        if exe_name is None:
            return True
        # A daemon may rewrite its title (sshd, smbd): its binary or its comm still name it.
        names = {os.path.basename(p.cmdline()[0]) if p.cmdline() else "", p.name()}
        try:
            names.add(os.path.basename(p.exe()))
        except Exception:
            pass
        return exe_name in names or exe_name[:15] in names
    except Exception:
        return False


@releaser("daemon")
def release_daemon(data: dict) -> None:
    """Stop our daemon by pid, after checking the pid was not reused.

    A FUSE daemon whose mount is gone flushes its caches and exits by itself;
    ``graceful`` gives it that long before it is signalled, since a signal
    in the middle of the flush loses data (CryFS does this). One whose mount
    never appeared (still deriving its key) is signalled at once, and a mount
    it made after its mount entry was released is detached.
    """
    _stop_daemon(data)
    mountpoint = data.get("mountpoint")
    if mountpoint and is_mounted(mountpoint):
        # A FUSE daemon that mounted after its mount entry was released (it
        # was still deriving its key) and was then killed leaves a dead mount.
        proc.run(["umount", "-l", mountpoint], check=False, timeout=30)
        log.warning("%s appeared after its release; detached lazily", mountpoint)


def _stop_daemon(data: dict) -> None:
    pid = data.get("pid")
    if not pid or not _process_matches(pid, data.get("started"), data.get("exe")):
        return
    never_mounted = data.get("mountpoint") and not data.get("mounted")
    deadline = time.monotonic() + (0 if never_mounted else data.get("graceful", 0))
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


OWN_PREFIX = "cryptcost-"      # every directory and key file cryptcost makes is named so


def own_path(data: dict) -> Path | None:
    """The entry's path if it can only be one cryptcost made: absolute, and named
    ``cryptcost-…`` (or inside such a directory). Anything else — an empty path,
    which ``Path`` reads as the current directory, a torn journal line — is
    never removed."""
    raw = data.get("path") or ""
    path = Path(raw)
    if not raw or not path.is_absolute() or ".." in path.parts:
        return None
    if not any(part.startswith(OWN_PREFIX) for part in path.parts[1:]):
        return None
    return path


@releaser("dir")
def release_dir(data: dict) -> None:
    path = own_path(data)
    if path is None:
        log.warning("not removing %r: not a directory cryptcost made", data.get("path"))
        return
    if path.is_dir() and not path.is_symlink() and not is_mounted(path):
        shutil.rmtree(path, ignore_errors=True)


@releaser("keyfile")
def release_keyfile(data: dict) -> None:
    """Overwrite the key with zeros before unlinking it."""
    path = own_path(data)
    if path is None:
        log.warning("not wiping %r: not a key file cryptcost made", data.get("path"))
        return
    try:
        size = path.stat().st_size
        with open(path, "r+b") as fh:
            fh.write(b"\0" * size)
            fh.flush()
            os.fsync(fh.fileno())
        path.unlink()
    except FileNotFoundError:
        pass


# System settings cryptcost may change for a run, and only these: restored from the journal.
SETTINGS = ("/sys/devices/virtual/workqueue/cpumask",     # where unbound kernel workqueues may run
            # free page reporting, held off
            "/sys/module/page_reporting/parameters/page_reporting_order")


@releaser("setting")
def release_setting(data: dict) -> None:
    """Write a system setting's old value back."""
    if data.get("path") not in SETTINGS or data.get("old") is None:
        log.warning("not restoring %r: not a setting cryptcost changes", data.get("path"))
        return
    Path(data["path"]).write_text(data["old"])


def processes_of(token: str) -> list[int]:
    """Pids of the processes whose environment carries ``RUN_ENV=token``."""
    needle = f"{RUN_ENV}={token}".encode()
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as fh:
                if needle in fh.read().split(b"\0"):
                    found.append(int(name))
        except OSError:
            continue                      # gone, or not ours to read
    return found


def end_processes(token: str, timeout: float = 10.0) -> list[int]:
    """End every process of run ``token`` (SIGTERM, then SIGKILL) and wait
    until they are gone; return the pids still alive after that."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        pids = processes_of(token)
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + timeout
        while pids and time.monotonic() < deadline:
            for pid in pids:
                try:
                    os.waitpid(pid, os.WNOHANG)          # our own children: reap them
                except ChildProcessError:
                    pass
            pids = [p for p in processes_of(token) if _alive(p)]
            time.sleep(0.05)
        if not pids:
            return []
    return [p for p in processes_of(token) if _alive(p)]


def _alive(pid: int) -> bool:
    """Running, not a zombie waiting to be reaped by someone else."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def release_entry(entry: Entry) -> None:
    fn = RELEASERS.get(entry.type)
    if fn is None:
        raise CryptcostError(f"internal: no releaser for resource type {entry.type!r}")
    fn(entry.data)


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
        # Workloads still running (fio on a mount) would keep mounts busy: end
        # the run's processes that are no journalled daemon first.
        daemons = {e.data.get("pid") for e in journal.entries.values() if e.type == "daemon"}
        for pid in processes_of(journal.token):
            if pid not in daemons:
                _end(pid)
                report.append(f"ended process {pid} of the killed run")
        for entry in journal.pending():
            try:
                release_entry(entry)
                journal._append({"op": "release", "id": entry.id})
                entry.released = True
                report.append(f"released {entry.type} {_describe(entry)}")
            except (CryptcostError, OSError, ProcessError) as exc:
                report.append(f"FAILED to release {entry.type} {_describe(entry)}: {exc}")
        strays = processes_of(journal.token)
        left = end_processes(journal.token)
        report += [f"ended process {pid} of the killed run (its pid never reached the journal)"
                   for pid in strays if pid not in left]
        report += [f"FAILED to end process {pid} of the killed run" for pid in left]
        if not left and journal.remove_if_done():
            report.append(f"{path.name}: done")
    return report


def _end(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _describe(entry: Entry) -> str:
    d = entry.data
    return d.get("target") or d.get("device") or d.get("path") or \
        (f"pid {d.get('pid')} ({d.get('exe')})" if d.get("pid") else str(
            {k: v for k, v in d.items() if not k.startswith("_")}))
