"""perf: where the CPU time of a measured window goes, on every CPU.

:func:`record` starts ``perf record -e cpu-clock -a -g`` with its events
off and a control FIFO (``--control``, ``-D -1``), so that perf's own
start-up is never sampled; :meth:`Recording.window` turns sampling on for
the code inside it and off after, as often as the work has passes, and
keeps each window's span on the boot clock (``-k boottime``, the clock of
``/proc/uptime``), which the code inside may start later: fio's first I/O,
so that its start-up is left out. The readers take only the windows' spans;
:meth:`Recording.close` ends perf (SIGTERM: it writes its file and exits).
:func:`top` reads the file with ``perf report`` into rows — the share of
all samples, the command, the shared object and the symbol — that the
analysis sorts into layers (``analysis.profile``); :func:`folded` reads its
call stacks with ``perf script``, folded (``command;outer;…;leaf`` → samples),
for the report's flame graphs. ``cpu-clock`` is a
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
from cryptcost.errors import ProcessError, Unavailable
from cryptcost.host.tools import tool
from cryptcost.lifecycle.resources import Resources

PERF = tool("perf")
FREQ = 499                   # samples per second per CPU: off the timer's beat, and cheap
ACK_TIMEOUT = 10.0
_ADDRESS = re.compile(r"^0x[0-9a-f]+$")


def require() -> None:
    """Raise :class:`Unavailable` saying why perf cannot profile here."""
    if not PERF.path():
        raise Unavailable("perf is not installed", install=PERF.package)
    if os.geteuid() != 0:
        paranoid = Path("/proc/sys/kernel/perf_event_paranoid")
        if paranoid.exists() and int(paranoid.read_text().split()[0] or 2) > -1:
            raise Unavailable("perf needs root to sample every CPU "
                              "(kernel.perf_event_paranoid > -1)",
                              install="run with sudo")


@dataclass
class Recording:
    """One ``perf record`` process, sampling only inside :meth:`window`."""

    path: Path
    daemon: proc.Daemon
    ctl: int
    ack: int
    res: Resources = field(repr=False)
    spans: list[tuple[float, float]] = field(default_factory=list)    # boot clock, seconds

    @property
    def windows(self) -> int:
        return len(self.spans)

    @property
    def seconds(self) -> float:
        """The time the windows span."""
        return sum(b - a for a, b in self.spans)

    def _say(self, command: bytes) -> None:
        os.write(self.ctl, command + b"\n")
        deadline = time.monotonic() + ACK_TIMEOUT
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
        self._say(b"enable")
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
            self._say(b"disable")

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
    daemon = res.daemon(["perf", "record", "-e", "cpu-clock", "-F", str(FREQ), "-a", "-g",
                         "-k", "boottime", "-D", "-1",
                         "--control", f"fifo:{ctl},{ack}", "-o", str(path)],
                        logfile=str(path.with_suffix(".log")))
    return Recording(path, daemon, ctl_fd, ack_fd, res)


def within(spans: list[tuple[float, float]] | None) -> list[str]:
    """perf report's and perf script's option for samples inside ``spans`` only."""
    return ["--time", " ".join(f"{a:.6f},{b:.6f}" for a, b in spans)] if spans else []


def top(path: Path, min_share: float = 0.001,
        spans: list[tuple[float, float]] | None = None) -> tuple[list[dict], int]:
    """(rows of ``perf report``: ``share`` of all samples (from its ``samples``, not perf's
    rounded percentage), ``comm``, ``dso``, ``sym``, ``where`` (kernel or user), largest
    first, down to ``min_share`` of all samples; the number of samples). The addresses of
    a program without symbols (a stripped Go binary) are one row, ``sym`` "(no symbols)":
    each alone is below the cut, together they are the program's own code."""
    done = proc.run(["perf", "report", "-i", str(path), "--stdio", "--no-children", "-g", "none",
                     "-n",
                     "--sort", "comm,dso,sym", "--percent-limit", "0", "-t", "\t", *within(spans)],
                    timeout=300)
    rows, total = parse_report(done.stdout)
    return [r for r in rows if r["share"] >= min_share], total


def parse_report(text: str) -> tuple[list[dict], int]:
    """perf report's rows, read with ``--percent-limit 0``: every sample is in a row, so the
    rows' exact counts sum to the total (the header rounds it: ``1K``)."""
    rows = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split("\t")]
        if (line.startswith("#") or len(parts) < 5 or not parts[0].endswith("%")
                or not parts[1].isdigit()):
            continue
        sym = parts[4]
        rows.append({"samples": int(parts[1]), "comm": parts[2],
                     "dso": parts[3], "sym": sym[3:].strip() if sym[:3] in ("[k]", "[.]") else sym,
                     "where": "kernel" if sym.startswith("[k]") else "user"})
    if not rows:
        if re.search(r"^# Samples: [1-9]", text, re.M):
            raise ProcessError(["perf", "report"], 0, text[-2000:], "",
                               why="perf report gave no rows")
        return [], 0
    total = sum(r["samples"] for r in rows)
    merged: dict[tuple, dict] = {}
    for r in rows:
        if _ADDRESS.match(r["sym"]):
            r["sym"] = "(no symbols)"
        key = (r["comm"], r["dso"], r["sym"], r["where"])
        if key in merged:
            merged[key]["samples"] += r["samples"]
        else:
            merged[key] = r
    for r in merged.values():
        r["share"] = r["samples"] / total
    return sorted(merged.values(), key=lambda r: -r["samples"]), total


STACKS = 300            # folded stacks kept per profile, the most sampled first; the rest summed
DEPTH = 40              # frames kept per stack, nearest the leaf
_USER_SPECIAL = {"[unknown]", "[vdso]", "[vsyscall]", "[heap]", "[stack]", "[anon]"}
_FRAME = re.compile(r"^\s+[0-9a-f]+\s+(.*?)\s+\((.*)\)$")


def folded(path: Path, spans: list[tuple[float, float]] | None = None) -> dict[str, int]:
    """The recording's call stacks, folded (see :func:`fold`)."""
    done = proc.run(["perf", "script", "-i", str(path), "-F", "comm,ip,sym,dso",
                     *within(spans)], timeout=300)
    return fold(done.stdout)


def _frame(sym: str, dso: str) -> str | None:
    """A frame's name: ``sym_[k]`` in the kernel, the symbol in user space, or ``[library]``
    where perf has no symbol (a stripped binary); None for a frame perf could not place."""
    if dso.startswith("[") and dso not in _USER_SPECIAL or dso.endswith(".ko"):   # kernel, module
        name = f"{sym}_[k]" if sym != "[unknown]" else None
    elif sym == "[unknown]" or _ADDRESS.match(sym):
        name = f"[{os.path.basename(dso)}]" if dso != "[unknown]" else None
    else:
        name = sym
    return name.replace(";", ":") if name else None


def fold(text: str, keep: int = STACKS, depth: int = DEPTH) -> dict[str, int]:
    """``perf script -F comm,ip,sym,dso`` as folded stacks: ``command;outermost;…;leaf`` → the
    samples that ended in it, the most sampled ``keep`` (the rest under ``command;(rarer
    stacks)``), each cut to its ``depth`` frames nearest the leaf (``…`` marks the cut).
    Consecutive frames in one library perf could not name are one."""
    counts: dict[str, int] = {}
    comm, frames = None, []

    def flush() -> None:
        if comm is None:
            return
        chain = [f for f in reversed(frames)]
        chain = [f for i, f in enumerate(chain)
                 if i == 0 or f != chain[i - 1] or not f.startswith("[")]
        if len(chain) > depth:
            chain = ["…"] + chain[-depth:]
        key = ";".join([comm] + chain)
        counts[key] = counts.get(key, 0) + 1
    for line in text.splitlines():
        if not line.strip():
            continue
        if not line[0].isspace():
            flush()
            comm, frames = line.strip().replace(";", ":") or "?", []
            continue
        m = _FRAME.match(line)
        if m and (name := _frame(m.group(1), m.group(2))):
            frames.append(name)
    flush()
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    out = dict(ranked[:keep])
    for key, n in ranked[keep:]:
        rest = key.split(";", 1)[0] + ";(rarer stacks)"
        out[rest] = out.get(rest, 0) + n
    return out
