"""Fault injection, for the tests that prove cryptcost leaves nothing behind.

``CRYPTCOST_FAULT=POINT:SIGNAL[:N][:group][:delay=S][:again=S]`` makes the process send
itself ``SIGNAL`` the ``N``-th time (default 1) it reaches ``POINT``:

============  ==========================================================
``setup``     a resource (mount, loop, daemon, key, namespace, directory)
              was journalled and is about to be created
``measure``   a measurement has started (the signal arrives ``delay`` s later,
              default 0.3, while the engine runs)
``between``   one measurement ended and the next has not started
``store``     inside the transaction that writes a sample or a result
``teardown``  the first resource of a scope was released, the others not
============  ==========================================================

``group`` sends it to the process group as well, as ``timeout(1)`` and a
terminal's Ctrl-C do (the process then gets it twice, at once); ``again=S``
sends it a second time S seconds later, when release is under way. Unset,
:func:`at` is one dictionary lookup and nothing else.
"""

from __future__ import annotations

import os
import signal
import threading

ENV = "CRYPTCOST_FAULT"
POINTS = ("setup", "measure", "between", "store", "teardown")
_seen: dict[str, int] = {}


def parse(spec: str) -> tuple[str, signal.Signals, int, bool, float, float | None]:
    """``POINT:SIGNAL[:N][:group][:delay=S][:again=S]`` → (point, signal, n, group, delay,
    again)."""
    parts = spec.split(":")
    if len(parts) < 2 or parts[0] not in POINTS:
        raise ValueError(f"{ENV}={spec!r}: expected POINT:SIGNAL[:N][:group][:delay=S], "
                         f"POINT one of {', '.join(POINTS)}")
    name = parts[1].upper()
    sig = signal.Signals[name if name.startswith("SIG") else "SIG" + name]
    n, group, delay, again = 1, False, 0.3 if parts[0] == "measure" else 0.0, None
    for extra in parts[2:]:
        if extra == "group":
            group = True
        elif extra.startswith("delay="):
            delay = float(extra[6:])
        elif extra.startswith("again="):
            again = float(extra[6:])
        else:
            n = int(extra)
    return parts[0], sig, n, group, delay, again


def at(point: str) -> None:
    """Called at each injection point; fires the configured signal once."""
    spec = os.environ.get(ENV)
    if not spec:
        return
    where, sig, n, group, delay, again = parse(spec)
    if where != point:
        return
    _seen[point] = _seen.get(point, 0) + 1
    if _seen[point] != n:
        return

    def fire() -> None:
        os.kill(os.getpid(), sig)
        if group:
            os.killpg(os.getpgrp(), sig)
        if again is not None:
            _later(again, lambda: os.kill(os.getpid(), sig))
    if delay:
        _later(delay, fire)
    else:
        fire()


def _later(seconds: float, action) -> None:
    """``action`` in ``seconds``, unless the process has ended by then (a daemon timer)."""
    timer = threading.Timer(seconds, action)
    timer.daemon = True
    timer.start()
