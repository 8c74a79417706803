"""The dbench engine: dbench's NetBench-like load (R4's mixed load), as one run of N clients
in a directory for a fixed time.

dbench replays its load file (``client.txt``: a Windows client's file operations) in each
client, warms up for a fifth of ``seconds`` (dbench 4.00 has no switch for it), then runs
``seconds`` and prints its throughput: the bytes its reads and writes moved, over its own
clock. Its files are left for the caller to remove outside the clock (``--skip-cleanup``).
It reports no bytes beyond that rate, and the whole run's CPU is what can be counted: a
sample is the whole run, its bytes the rate times the run's wall time (the warm-up replays
the same load, at the same rate). A directory on any mounted filesystem will do: a storage
stack's, or a file share's client mount (NFS).
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass
from pathlib import Path

from cryptcost import proc
from cryptcost.errors import CryptcostError

LOADFILE = "/usr/share/dbench/client.txt"
SECONDS = 10
# what a result's timing says
TIMING = ("dbench's throughput over its timed run; the sample is its whole run, the warm-up's "
          "fifth included, whose bytes are counted at the same rate, as its CPU is")


@dataclass(frozen=True)
class DbenchOutcome:
    bytes_per_s: float            # dbench's "Throughput", MB/s × 10^6
    seconds: float                # the timed run, after dbench's warm-up
    clients: int
    wall_seconds: float = 0.0     # the whole run, its warm-up included

    @property
    def bytes(self) -> int:
        """What the whole run moved, at its throughput."""
        return int(self.bytes_per_s * self.wall_seconds)


def available() -> bool:
    """dbench and its load file are installed (package dbench)."""
    return bool(proc.which("dbench")) and os.path.exists(LOADFILE)


def run(target: Path, clients: int, seconds: int = SECONDS) -> DbenchOutcome:
    """``clients`` dbench clients in ``target`` (made if missing) for ``seconds``."""
    target.mkdir(exist_ok=True)
    start = time.perf_counter()
    done = proc.run(["dbench", "--skip-cleanup", "-D", str(target), "-t", str(seconds), "-c",
                     LOADFILE, str(clients)], timeout=seconds * 10 + 120)
    return parse(done.stdout, clients, seconds, time.perf_counter() - start)


def parse(stdout: str, clients: int, seconds: float, wall: float) -> DbenchOutcome:
    match = re.search(r"Throughput ([\d.]+) MB/sec", stdout)
    if not match:
        raise CryptcostError(f"dbench printed no throughput ({stdout.strip()[-200:]!r})")
    return DbenchOutcome(float(match.group(1)) * 1e6, float(seconds), clients, wall)
