"""The dbench engine: dbench's NetBench-like load (R4's mixed load), as one run of N clients
in a directory for a fixed time.

dbench replays its load file (``client.txt``: a Windows client's file operations) in each
client, warms up, then runs ``seconds`` and prints its throughput: the bytes its reads and
writes moved, over its own clock. It reports no bytes of its own beyond that rate, so a
sample's bytes are the rate times its time. A directory on any mounted filesystem will do:
a storage stack's, or a file share's client mount (NFS).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from cryptcost import proc
from cryptcost.errors import CryptcostError

LOADFILE = "/usr/share/dbench/client.txt"
SECONDS = 10


@dataclass(frozen=True)
class DbenchOutcome:
    bytes_per_s: float            # dbench's "Throughput", MB/s × 10^6
    seconds: float                # the timed run, after dbench's warm-up
    clients: int

    @property
    def bytes(self) -> int:
        return int(self.bytes_per_s * self.seconds)


def available() -> bool:
    """dbench and its load file are installed (package dbench)."""
    return bool(proc.which("dbench")) and os.path.exists(LOADFILE)


def run(target: Path, clients: int, seconds: int = SECONDS) -> DbenchOutcome:
    """``clients`` dbench clients in ``target`` (made if missing) for ``seconds``."""
    target.mkdir(exist_ok=True)
    done = proc.run(["dbench", "-D", str(target), "-t", str(seconds), "-c", LOADFILE,
                     str(clients)], timeout=seconds * 10 + 120)
    return parse(done.stdout, clients, seconds)


def parse(stdout: str, clients: int, seconds: float) -> DbenchOutcome:
    match = re.search(r"Throughput ([\d.]+) MB/sec", stdout)
    if not match:
        raise CryptcostError(f"dbench printed no throughput ({stdout.strip()[-200:]!r})")
    return DbenchOutcome(float(match.group(1)) * 1e6, float(seconds), clients)
