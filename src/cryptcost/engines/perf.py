"""perf: where the CPU time of a measured window goes, on every CPU.

:func:`record` starts ``perf record -e cpu-clock -a -g`` with its events
off and a control FIFO (``--control``, ``-D -1``), so that perf's own
start-up is never sampled; :meth:`Recording.window` turns sampling on for
the code inside it and off after, as often as the work has passes, and
keeps each window's span on the boot clock (``-k boottime``, the clock of
``/proc/uptime``), which the code inside may start later: fio's first I/O,
so that its start-up is left out. The readers take only the windows' spans;
:meth:`Recording.close` ends perf (SIGTERM: it writes its file and exits).
:func:`stacks` reads the file once with ``perf script`` (each sample's time,
command and call stack); :func:`rows` counts them by their leaf — the
command, the shared object and the symbol, as ``perf report --no-children
--sort comm,dso,sym`` does — into the rows the analysis sorts into layers
(``analysis.profile``); :func:`fold` folds them (``command;outer;…;leaf`` →
samples) for the report's flame graphs. One recording serves many cells:
each takes the samples inside its own spans (:func:`inside`). ``cpu-clock`` is a
software event: it works in a VM without a PMU, and idle CPUs show as
samples in the idle loop, so a row's share is of all CPU time.
"""

from __future__ import annotations

import os
import re
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

from cryptcost import proc
from cryptcost.engines import gosyms
from cryptcost.errors import Unavailable
from cryptcost.host.tools import tool
from cryptcost.lifecycle.resources import Resources

PERF = tool("perf")
FREQ = 499                   # samples per second per CPU: off the timer's beat, and cheap
ACK_TIMEOUT = 10.0
# perf's start-up (reading every process and the kernel's symbols) before it answers at all: a
# fraction of a second here, tens of seconds in an emulated guest
READY_TIMEOUT = 180.0
# The sampling event, switched on and off by name: a bare "disable" would switch off perf's
# tracking event too, and a process or thread born while it is off (a FUSE daemon remounted
# between passes) would have no name and no mappings in the samples after.
EVENT = b"cpu-clock"
_ADDRESS = re.compile(r"^0x[0-9a-f]+$")


def require() -> None:
    """Raise :class:`Unavailable` saying why perf cannot profile here."""
    if not PERF.path():
        raise Unavailable("perf is not installed", install="cryptcost install perf")
    if os.geteuid() != 0:
        paranoid = Path("/proc/sys/kernel/perf_event_paranoid")
        if paranoid.exists() and int(paranoid.read_text().split()[0] or 2) > -1:
            raise Unavailable("perf needs root to sample every CPU "
                              "(kernel.perf_event_paranoid > -1)",
                              install="run with sudo")


def by_default(warmup: int) -> tuple[bool, str]:
    """Whether a table profiles when nothing asks either way, and why not: only where the
    profile costs nothing (a ``warmup`` round to watch) and says something of this hardware
    (not in an emulated guest, whose CPU is software)."""
    from cryptcost.host.probe import emulation
    if warmup < 1:
        return False, ("no profile: --warmup 0 leaves no warm-up round to watch, and a round of "
                       "its own would lengthen the run (--profile adds one)")
    if emulation():
        return False, ("no profile: this guest's CPU is emulated, and where it goes says nothing "
                       "of hardware (--profile asks for one)")
    return True, ""


def wanted(asked: bool | None, warmup: int = 1) -> tuple[bool, str]:
    """Whether a table profiles: ``asked`` True (``--profile``) needs perf here and raises
    :class:`Unavailable` without it; False (``--no-profile``) does not; None, the default,
    profiles as :func:`by_default` says where perf can, and else says why not (its verdicts
    then rest on the ceilings and the host's facts)."""
    if asked is not None:
        if asked:
            require()
        return asked, ""
    free, why = by_default(warmup)
    if not free:
        return False, why
    try:
        require()
    except Unavailable as exc:
        return False, (f"no profile: {exc.reason}; each verdict rests on the ceilings and the "
                       f"host's facts" + (f" ({exc.install})" if exc.install else ""))
    return True, ""


@dataclass
class Recording:
    """One ``perf record`` process, sampling only inside :meth:`window`."""

    path: Path
    daemon: proc.Daemon
    ctl: int
    ack: int
    res: Resources = field(repr=False)
    spans: list[tuple[float, float]] = field(default_factory=list)    # boot clock, seconds

    def _say(self, command: bytes, timeout: float = ACK_TIMEOUT) -> None:
        os.write(self.ctl, command + b"\n")
        deadline = time.monotonic() + timeout
        got = b""
        while not got.startswith(b"ack"):
            if time.monotonic() > deadline or not self.daemon.alive():
                raise self.daemon.fail(f"perf did not acknowledge {command.decode()!r}")
            try:
                got += os.read(self.ack, 16)
            except BlockingIOError:
                time.sleep(0.005)

    @contextmanager
    def window(self) -> Iterator[Callable[[float | None], None]]:
        """Sampling on for the code inside. What it is given, called with a time on the boot
        clock, says the work began only then: what ran before (a tool's start-up) is left out
        of the window's span."""
        self._say(b"enable " + EVENT)
        start = time.clock_gettime(time.CLOCK_BOOTTIME)
        began = [start]

        def starts_at(t: float | None) -> None:
            if t is not None and t > start:
                began[0] = t
        try:
            yield starts_at
        finally:
            stop = time.clock_gettime(time.CLOCK_BOOTTIME)
            self.spans.append((min(began[0], stop), stop))
            self._say(b"disable " + EVENT)

    def close(self) -> Path:
        """End perf; the file it wrote."""
        self.res.stop(self.daemon, timeout=30)
        for fd in (self.ctl, self.ack):
            os.close(fd)
        if not self.path.exists():
            raise self.daemon.fail("perf record wrote no file")
        return self.path


def record(res: Resources, path: Path) -> Recording:
    """Start perf, sampling nothing until a :meth:`Recording.window`."""
    require()
    ctl, ack = path.with_suffix(".ctl"), path.with_suffix(".ack")
    for fifo in (ctl, ack):
        os.mkfifo(fifo, 0o600)
    # O_RDWR: opening a FIFO for reading or writing alone would wait for the other end
    ctl_fd, ack_fd = os.open(ctl, os.O_RDWR), os.open(ack, os.O_RDWR | os.O_NONBLOCK)
    daemon = res.daemon(["perf", "record", "-e", EVENT.decode(), "-F", str(FREQ), "-a", "-g",
                         "-k", "boottime", "-D", "-1",
                         "--control", f"fifo:{ctl},{ack}", "-o", str(path)],
                        logfile=str(path.with_suffix(".log")))
    rec = Recording(path, daemon, ctl_fd, ack_fd, res)
    # answered once perf has started: then it is ready to sample
    rec._say(b"ping", timeout=READY_TIMEOUT)
    return rec


def within(spans: list[tuple[float, float]] | None) -> list[str]:
    """perf script's option for samples inside ``spans`` only."""
    return ["--time", " ".join(f"{a:.6f},{b:.6f}" for a, b in spans)] if spans else []


@dataclass(frozen=True)
class Stack:
    """One sample: when (the boot clock), the command, its frames (symbol, shared object)
    leaf first."""

    time: float
    comm: str
    frames: tuple[tuple[str, str], ...]


_HEAD = re.compile(r"^(.*?)\s+(\d+\.\d+):\s*$")


def parse_script(text: str) -> list[Stack]:
    """``perf script -F comm,time,ip,sym,dso`` (or without ``time``) as samples."""
    out: list[Stack] = []
    head: tuple[str, float] | None = None
    frames: list[tuple[str, str]] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        if line[0].isspace():
            if m := _FRAME.match(line):
                frames.append((_named(m.group(2), m.group(3), m.group(1)), m.group(3)))
            continue
        if head is not None:
            out.append(Stack(head[1], head[0], tuple(frames)))
        m = _HEAD.match(line)
        head, frames = (m.group(1).strip(), float(m.group(2))) if m else (line.strip(), 0.0), []
    if head is not None:
        out.append(Stack(head[1], head[0], tuple(frames)))
    return out


def stacks(path: Path, spans: list[tuple[float, float]] | None = None) -> list[Stack]:
    """The recording's samples (inside ``spans``, where given), read once."""
    done = proc.run(["perf", "script", "-i", str(path), "-F", "comm,time,ip,sym,dso",
                     *within(spans)], timeout=300)
    return parse_script(done.stdout)


def inside(samples: list[Stack], spans: list[tuple[float, float]]) -> list[Stack]:
    """The samples taken inside ``spans`` (perf stamps a sample to the microsecond)."""
    return [x for x in samples if any(a - 1e-6 <= x.time <= b + 1e-6 for a, b in spans)]


def _kernel(dso: str) -> bool:
    return dso.startswith("[") and dso not in _USER_SPECIAL or dso.endswith(".ko")


def rows(samples: list[Stack]) -> tuple[list[dict], int]:
    """(rows: each leaf's ``samples`` and ``share`` of all, ``comm``, ``dso`` (a shared
    object's file name, the kernel's ``[kernel.kallsyms]``), ``sym``, ``where`` (kernel or
    user), largest first; the number of samples) — ``perf report --no-children --sort
    comm,dso,sym``'s rows. A program's code without symbols (a stripped Go binary) is one
    row, ``sym`` "(no symbols)": each address alone is below any cut, together they are the
    program's own code."""
    counts: dict[tuple, int] = {}
    for x in samples:
        sym, dso = x.frames[0] if x.frames else ("[unknown]", "[unknown]")
        kernel = _kernel(dso)
        name = (f"[{os.path.basename(dso).split('.ko')[0]}]" if dso.endswith(".ko")
                else dso if kernel or dso.startswith("[") else os.path.basename(dso))
        if not kernel and (sym == "[unknown]" or _ADDRESS.match(sym)):
            sym = "(no symbols)"
        key = (x.comm, name, sym, "kernel" if kernel else "user")
        counts[key] = counts.get(key, 0) + 1
    total = sum(counts.values())
    out = [{"samples": n, "share": n / total, "comm": c, "dso": d, "sym": s, "where": w}
           for (c, d, s, w), n in counts.items()]
    return sorted(out, key=lambda r: (-r["samples"], r["comm"], r["dso"], r["sym"])), total


STACKS = 300            # folded stacks kept per profile, the most sampled first; the rest summed
DEPTH = 40              # frames kept per stack, nearest the leaf
_USER_SPECIAL = {"[unknown]", "[vdso]", "[vsyscall]", "[heap]", "[stack]", "[anon]"}
_FRAME = re.compile(r"^\s+([0-9a-f]+)\s+(.*?)\s+\((.*)\)$")


def _named(sym: str, dso: str, ip: str) -> str:
    """A frame's symbol: perf's, or, where perf has none in a stripped Go program, the function
    its own table names (:mod:`cryptcost.engines.gosyms`)."""
    if (sym == "[unknown]" or _ADDRESS.match(sym)) and dso.startswith("/"):
        table = gosyms.table(dso)
        name = table.at_offset(int(ip, 16)) if table else None
        if name:
            return name
    return sym


def _frame(sym: str, dso: str) -> str | None:
    """A frame's name: ``sym_[k]`` in the kernel, the symbol in user space, or ``[library]``
    where perf has no symbol (a stripped binary); None for a frame perf could not place."""
    if _kernel(dso):                                                          # kernel, module
        name = f"{sym}_[k]" if sym != "[unknown]" else None
    elif sym == "[unknown]" or _ADDRESS.match(sym):
        name = f"[{os.path.basename(dso)}]" if dso != "[unknown]" else None
    else:
        name = sym
    return name.replace(";", ":") if name else None


def fold(samples: str | list[Stack], keep: int = STACKS, depth: int = DEPTH) -> dict[str, int]:
    """Samples (or ``perf script -F comm,ip,sym,dso``'s text) as folded stacks:
    ``command;outermost;…;leaf`` → the samples that ended in it, the most sampled ``keep``
    (the rest under ``command;(rarer stacks)``), each cut to its ``depth`` frames nearest the
    leaf (``…`` marks the cut). Consecutive frames in one library perf could not name are one."""
    if isinstance(samples, str):
        samples = parse_script(samples)
    counts: dict[str, int] = {}
    for x in samples:
        chain = [name for sym, dso in reversed(x.frames) if (name := _frame(sym, dso))]
        chain = [f for i, f in enumerate(chain)
                 if i == 0 or f != chain[i - 1] or not f.startswith("[")]
        if len(chain) > depth:
            chain = ["…"] + chain[-depth:]
        key = ";".join([x.comm.replace(";", ":") or "?"] + chain)
        counts[key] = counts.get(key, 0) + 1
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    out = dict(ranked[:keep])
    for key, n in ranked[keep:]:
        rest = key.split(";", 1)[0] + ";(rarer stacks)"
        out[rest] = out.get(rest, 0) + n
    return out
