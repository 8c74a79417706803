"""One measuring run per host at a time.

Two runs at once would measure each other (they share the CPUs, the page
cache and the memory bus) and would race for loop devices and ports. So
every command that measures takes ``lock`` in the state directory with
``flock``: a second one refuses at once and names the run that holds it.
The kernel drops the lock when its holder ends, even by SIGKILL, so a crash
never leaves a stale lock; the file keeps only who held it last.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from contextlib import contextmanager

from cryptcost.errors import UserError
from cryptcost.lifecycle.journal import ensure_state_dir, state_dir


def _holder(path) -> str:
    try:
        info = json.loads(path.read_text() or "{}")
    except (OSError, ValueError):
        return "another cryptcost run"
    since = time.strftime("%H:%M:%S", time.localtime(info.get("since", 0)))
    return (f"cryptcost run pid {info.get('pid', '?')} ('cryptcost "
            f"{' '.join(info.get('argv', []))[:80]}', since {since})")


def _refuse(path) -> UserError:
    return UserError(f"{_holder(path)} is measuring on this host; two runs at once would "
                     "measure each other: wait for it to end, then retry")


def require_free() -> None:
    """Refuse at once if a run holds the lock. Creates nothing: :func:`run_lock` takes it."""
    path = state_dir() / "lock"
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        raise _refuse(path) from None
    finally:
        os.close(fd)


@contextmanager
def run_lock(argv: list[str] | None = None):
    """Hold the host's run lock for the ``with`` block, or refuse (exit 2)."""
    path = ensure_state_dir() / "lock"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)          # not inherited by children
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise _refuse(path) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps({"pid": os.getpid(), "argv": list(argv or []),
                                  "since": time.time()}).encode(), 0)
        yield
    finally:
        os.close(fd)                                             # drops the lock
