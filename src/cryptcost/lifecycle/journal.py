"""The resource journal (METHODOLOGY rule 17).

Every mount, loop device, daemon, key and temporary directory is written to
a journal *before* it is created, updated once it exists (the loop device
name, the daemon's pid), and marked released when it is gone. The journal
is an append-only JSON-lines file in the state directory, so that a run
killed with SIGKILL can be cleaned up later by ``cryptcost cleanup``, which
replays the unreleased entries in reverse order.

State directory: ``$CRYPTCOST_STATE_DIR``, else ``/run/cryptcost`` as root,
else ``$XDG_RUNTIME_DIR/cryptcost``.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from cryptcost import faults
from cryptcost.errors import UserError


def state_dir() -> Path:
    env = os.environ.get("CRYPTCOST_STATE_DIR")
    if env:
        return Path(env)
    if os.geteuid() == 0:
        return Path("/run/cryptcost")
    runtime = os.environ.get("XDG_RUNTIME_DIR") or f"/tmp/cryptcost-{os.getuid()}"
    return Path(runtime) / "cryptcost"


def ensure_state_dir() -> Path:
    """The state directory, created 0700 if missing (a one-line error if it cannot be)."""
    directory = state_dir()
    try:
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError as exc:
        raise UserError(f"cannot create the state directory {directory}: {exc.strerror}; "
                        "set CRYPTCOST_STATE_DIR to a writable directory") from None
    return directory


@dataclass
class Entry:
    """One resource: ``type`` selects its releaser; ``data`` is what the
    releaser needs, and never holds a secret."""

    id: int
    type: str
    data: dict
    released: bool = False
    error: str | None = None


@dataclass
class Journal:
    """An append-only journal file owned by one process."""

    path: Path
    owner_pid: int
    entries: dict[int, Entry] = field(default_factory=dict)
    started: float = 0.0
    argv: list[str] = field(default_factory=list)

    @classmethod
    def create(cls, argv: list[str] | None = None) -> "Journal":
        path = ensure_state_dir() / f"journal-{os.getpid()}-{time.time_ns()}.jsonl"
        journal = cls(path, os.getpid(), started=time.time(), argv=list(argv or []))
        journal._append({"op": "open", "pid": journal.owner_pid, "started": journal.started,
                         "argv": journal.argv})
        return journal

    @classmethod
    def load(cls, path: Path) -> "Journal":
        """Replay a journal file (possibly truncated by a crash)."""
        journal = cls(path, owner_pid=-1)
        for line in path.read_text().splitlines():
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                continue                         # a torn last line after a crash
            op = rec.get("op")
            if op == "open":
                journal.owner_pid = rec.get("pid", -1)
                journal.started = rec.get("started", 0.0)
                journal.argv = rec.get("argv", [])
            elif op == "add":
                journal.entries[rec["id"]] = Entry(rec["id"], rec["type"], rec.get("data", {}))
            elif op == "update" and rec["id"] in journal.entries:
                journal.entries[rec["id"]].data.update(rec.get("data", {}))
            elif op == "release" and rec["id"] in journal.entries:
                journal.entries[rec["id"]].released = True
        return journal

    def _append(self, rec: dict) -> None:
        line = json.dumps(rec, sort_keys=True) + "\n"
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line.encode())
            os.fsync(fd)
        finally:
            os.close(fd)

    @property
    def token(self) -> str:
        """What marks this run's processes (``RUN_ENV`` in their environment)."""
        return self.path.stem

    def add(self, type_: str, **data) -> Entry:
        """Record the intent to create a resource; call before creating it."""
        entry = Entry(max(self.entries, default=0) + 1, type_, dict(data))
        self.entries[entry.id] = entry
        self._append({"op": "add", "id": entry.id, "type": type_, "data": entry.data})
        faults.at("setup")                       # journalled, not yet created: tests kill here
        return entry

    def update(self, entry: Entry, **data) -> None:
        entry.data.update(data)
        self._append({"op": "update", "id": entry.id, "data": data})

    def mark_released(self, entry: Entry) -> None:
        entry.released = True
        self._append({"op": "release", "id": entry.id})

    def pending(self) -> list[Entry]:
        """Unreleased entries, newest first (the order to release them in)."""
        return [e for e in sorted(self.entries.values(), key=lambda e: -e.id) if not e.released]

    def owner_alive(self) -> bool:
        if self.owner_pid <= 0:
            return False
        try:
            os.kill(self.owner_pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        # A reused pid is not our owner: compare its start time.
        try:
            import psutil
            return psutil.Process(self.owner_pid).create_time() <= self.started + 1
        except Exception:
            return True

    def remove_if_done(self) -> bool:
        if self.pending():
            return False
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass
        return True


def journals() -> list[Path]:
    directory = state_dir()
    if not directory.is_dir():
        return []
    return sorted(directory.glob("journal-*.jsonl"))
