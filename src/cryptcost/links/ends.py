"""The ends of a link: where a network stack's commands run, its files live
and its CPU is counted.

A stack never asks where an end is. It asks the end, ``link.at("b")``, to
run a command, start a daemon, make a directory, write or read a file,
keep a secret, or count its processes' CPU:

* :class:`LocalEnd` is this host (in one of its network namespaces): the
  run's own :class:`~cryptcost.lifecycle.resources.Resources` journals
  what it creates.
* a peer's end (:mod:`cryptcost.links.peer`) forwards each request to the
  worker on that host, which journals and releases on its own host with
  the very same :class:`LocalEnd`.
"""

from __future__ import annotations

import os
import stat
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Callable

from cryptcost import proc
from cryptcost.host import cpu, kernel, netns
from cryptcost.lifecycle.release import releaser
from cryptcost.lifecycle.resources import Resources


@releaser("address")
def release_address(data: dict) -> None:
    """Remove an address an end added (where its interface and namespace still exist): the
    journalled ``undo`` command, which names the end's namespace (a journal written before there
    was one has the namespace's ``prefix``, for a crashed run's ``cleanup``)."""
    proc.run(data.get("undo") or [*data.get("prefix", []), "ip", "addr", "del", data["cidr"],
                                  "dev", data["dev"]], check=False, timeout=30)


@releaser("iface")
def release_iface(data: dict) -> None:
    """Delete a network interface an end created (in its namespace, where that still exists)."""
    proc.run(data.get("undo") or [*data.get("prefix", []), "ip", "link", "delete", data["dev"]],
             check=False, timeout=30)


class End(ABC):
    """One end of a link. ``machine`` names the machine it runs on: ends on
    one machine share its CPU counters (both ends of ``netns``)."""

    machine: str = "local"

    # whether this end's files are this host's (a namespace of it): then a path at this end can
    # be read and written here directly; at another machine, only through its operations
    local: bool = False

    @abstractmethod
    def run(self, argv: list[str], *, timeout: float = 120, check: bool = True,
            input: bytes | None = None, env: dict | None = None) -> proc.Completed:
        """Run ``argv`` at this end to completion (``env``: added to its environment)."""

    @abstractmethod
    def daemon(self, argv: list[str], *, env: dict | None = None,
               logfile: str | None = None):
        """Start a daemon at this end, journalled there: an object with
        ``pid``, ``argv``, ``alive()``, ``returncode``, ``output()`` and ``fail(why)``."""

    @abstractmethod
    def stop(self, daemon, timeout: float = 10) -> int | None:
        """Stop a daemon :meth:`daemon` started, before the run ends."""

    @abstractmethod
    def tmpdir(self, prefix: str) -> Path:
        """A private directory at this end, removed at release."""

    @abstractmethod
    def tmpfs(self, path: Path, size_bytes: int, mode: str = "0700") -> None:
        """A tmpfs on ``path`` (a :meth:`tmpdir`) at this end, unmounted at release."""

    @abstractmethod
    def write(self, path: Path, data: bytes, mode: int = 0o644) -> None:
        """Write a file at this end (never a key: :meth:`secret_file`)."""

    @abstractmethod
    def read(self, path: Path) -> bytes:
        """A file at this end ("" where it does not exist)."""

    @abstractmethod
    def secret_file(self, content: bytes, name: str | None = None) -> Path:
        """``content`` in a 0600 file on this end's key tmpfs, zeroed at release."""

    @abstractmethod
    def keydir(self) -> Path:
        """This end's key tmpfs (for programs that write their own keys)."""

    @abstractmethod
    def process_cpu(self, pids: list[int]) -> dict[int, float]:
        """CPU-seconds of each of this end's processes, children included."""

    @abstractmethod
    def stat(self) -> dict[str, list[int]]:
        """This end's machine's /proc/stat tick counters."""

    @abstractmethod
    def interface(self, dev: str, argv: list[str]) -> None:
        """Create network interface ``dev`` at this end with ``argv``, journalled
        there, so that release deletes it (a kernel WireGuard device)."""

    @abstractmethod
    def address(self, cidr: str, dev: str) -> None:
        """Add address ``cidr`` to ``dev`` at this end, journalled there (a tunnel's inner
        address on ``lo``), so that release removes it."""

    @abstractmethod
    def kernel_features(self) -> dict[str, bool]:
        """Which kernel features this end's machine has (:func:`cryptcost.host.kernel.features`)."""

    def listening(self, port: int, udp: bool = False) -> bool:
        """Whether a TCP (or UDP) socket listens on ``port`` at this end."""
        done = self.run(["ss", "-Hl" + ("u" if udp else "t") + "n", f"sport = :{port}"],
                        check=False, timeout=10)
        return bool(done.stdout.strip())

    def read_text(self, path: Path) -> str:
        return self.read(path).decode(errors="replace")

    def is_socket(self, path: Path) -> bool:
        """Whether a Unix socket is at ``path`` at this end (a daemon's control socket)."""
        if self.local:        # this host's files: no process to start (dear in an emulated guest)
            try:
                return stat.S_ISSOCK(os.stat(path).st_mode)
            except OSError:
                return False
        return self.run(["test", "-S", str(path)], check=False, timeout=10).returncode == 0


class LocalEnd(End):
    """An end on this host: every command goes through ``wrap`` (``ip netns
    exec NS …`` for a namespace), every resource through ``res``."""

    def __init__(self, res: Resources, wrap: Callable[[list[str]], list[str]] = list,
                 netns: str | None = None):
        self.res, self.wrap, self.netns = res, wrap, netns     # netns: None is this process's
        self.daemons: dict[int, proc.Daemon] = {}

    local = True

    def run(self, argv, *, timeout=120, check=True, input=None, env=None) -> proc.Completed:
        return proc.run(self.wrap(list(argv)), timeout=timeout, check=check, input=input,
                        env={**os.environ, **env} if env else None)

    def daemon(self, argv, *, env=None, logfile=None) -> proc.Daemon:
        d = self.res.daemon(self.wrap(list(argv)), env=env, logfile=logfile)
        self.daemons[d.pid] = d
        return d

    def stop(self, daemon, timeout=10) -> int | None:
        self.daemons.pop(daemon.pid, None)
        return self.res.stop(daemon, timeout=timeout)

    def tmpdir(self, prefix: str) -> Path:
        return self.res.tmpdir(prefix)

    def tmpfs(self, path, size_bytes, mode="0700") -> None:
        self.res.tmpfs(path, size_bytes, mode)

    def write(self, path, data, mode=0o644) -> None:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)

    def read(self, path) -> bytes:
        try:
            return Path(path).read_bytes()
        except FileNotFoundError:
            return b""

    def secret_file(self, content, name=None) -> Path:
        return self.res.secret_file(content, name)

    def keydir(self) -> Path:
        return self.res.keydir()

    def interface(self, dev: str, argv: list[str]) -> None:
        self.res.track("iface", lambda e: self.run(argv, timeout=30), dev=dev,
                       undo=self.wrap(["ip", "link", "delete", dev]))

    def address(self, cidr: str, dev: str) -> None:
        self.res.track("address", lambda e: self.run(["ip", "addr", "add", cidr, "dev", dev],
                                                      timeout=30),
                       cidr=cidr, dev=dev, undo=self.wrap(["ip", "addr", "del", cidr, "dev", dev]))

    def kernel_features(self) -> dict[str, bool]:
        return {name: f["present"] for name, f in kernel.features().items()}

    def listening(self, port: int, udp: bool = False) -> bool:
        """Read from the end's namespace's ``/proc/thread-self/net`` by a thread of this process
        (:mod:`cryptcost.host.netns`): ``ss`` through ``ip netns exec`` was two process starts a
        poll."""
        return netns.joined(self.netns, lambda: netns.listening(port, udp))

    def process_cpu(self, pids) -> dict[int, float]:
        return cpu.process_cpu(list(pids))

    def stat(self) -> dict[str, list[int]]:
        return cpu.stat_snapshot()
