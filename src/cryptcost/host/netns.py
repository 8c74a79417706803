"""Look into a network namespace from this process, without starting one.

``ip netns exec NS CMD`` is two process starts: nearly free on hardware, a
second or more for a Python probe in an emulated guest, where a network row
asked its namespaces a few dozen such questions. :func:`joined` runs a
function on a thread of this process that has entered the namespace
(``setns(2)`` moves only the calling thread): the sockets it makes are the
namespace's, and ``/proc/thread-self/net`` lists the namespace's sockets.
The thread ends with the function, and the namespace with it.
"""

from __future__ import annotations

import ctypes
import os
import socket
import statistics
import threading
import time
from typing import Callable, TypeVar

T = TypeVar("T")
CLONE_NEWNET = 0x40000000
NETNS_DIR = "/run/netns"           # where ip netns add binds a namespace
_LISTEN, _UNCONN = "0A", "07"      # /proc/net/tcp's and /proc/net/udp's st column


def inside(name: str, argv: list[str]) -> list[str]:
    """``argv`` run in network namespace ``name``: an ``ip`` or ``tc`` command names it itself
    (``ip -n NS …``, one process start), any other through ``ip netns exec NS …`` (two)."""
    if argv[:1] in (["ip"], ["tc"]):
        return [argv[0], "-n", name, *argv[1:]]
    return ["ip", "netns", "exec", name, *argv]


def joined(name: str | None, fn: Callable[[], T]) -> T:
    """``fn()`` inside network namespace ``name`` (``ip netns``'s name; None: this process's
    own namespace, called here)."""
    if name is None:
        return fn()
    out: dict = {}

    def body() -> None:
        try:
            fd = os.open(os.path.join(NETNS_DIR, name), os.O_RDONLY | os.O_CLOEXEC)
            try:
                libc = ctypes.CDLL(None, use_errno=True)
                if libc.setns(fd, CLONE_NEWNET) != 0:
                    err = ctypes.get_errno()
                    raise OSError(err, f"setns into network namespace {name}: "
                                       f"{os.strerror(err)}")
            finally:
                os.close(fd)
            out["value"] = fn()
        except BaseException as exc:      # handed to the caller's thread, raised there
            out["error"] = exc

    thread = threading.Thread(target=body, name=f"netns-{name}", daemon=True)
    thread.start()
    thread.join()
    if "error" in out:
        raise out["error"]
    return out["value"]


def listening(port: int, udp: bool = False) -> bool:
    """Whether a TCP socket listens (or a UDP socket is bound) on ``port``, IPv4 or IPv6, in
    the calling thread's network namespace: ``ss -Hltn sport = :PORT``'s question, read from
    ``/proc/thread-self/net``. Call it through :func:`joined`."""
    state = _UNCONN if udp else _LISTEN
    want = f"{port:04X}"
    for table in (("udp", "udp6") if udp else ("tcp", "tcp6")):
        try:
            with open(f"/proc/thread-self/net/{table}") as fh:
                next(fh, None)                                  # the header
                for line in fh:
                    cols = line.split()
                    if len(cols) > 3 and cols[1].rsplit(":", 1)[-1] == want and cols[3] == state:
                        return True
        except FileNotFoundError:                               # no IPv6 in this kernel
            continue
    return False


def round_trip(addr: str, port: int, *, accepted: bool = False, tries: int = 5) -> float | None:
    """The median of ``tries`` TCP connects to ``addr:port``, in milliseconds, each one round
    trip: refused at once where nothing listens (a SYN and its reset), or, with ``accepted``,
    a handshake with what listens there; None if any connect ended otherwise. Call it through
    :func:`joined` for a namespace's view."""
    times = []
    for _ in range(tries):
        s = socket.socket(socket.AF_INET6 if ":" in addr else socket.AF_INET)
        s.settimeout(5)
        start = time.perf_counter()
        try:
            s.connect((addr, port))
            answer = "accepted"
        except ConnectionRefusedError:
            answer = "refused"
        except OSError:
            answer = None
        took = (time.perf_counter() - start) * 1e3
        s.close()
        if answer != ("accepted" if accepted else "refused"):
            return None
        times.append(took)
    return round(statistics.median(times), 3)
