"""The Go engine: ``gocryptfs -speed``, the Go crypto gocryptfs itself uses.

One invocation measures every cipher at gocryptfs' 4 KiB block on one
thread, for about a second each. Acceleration off is ``GODEBUG=cpu.aes=off``;
gocryptfs then prints ``no AES acceleration``, which :func:`parse_speed`
reads so that the result can say whether the switch took effect.
"""

from __future__ import annotations

import re

from cryptcost import proc
from cryptcost.host import cpu
from cryptcost.engines.base import Algorithm, CipherEngine
from cryptcost.model import Cell
from cryptcost.errors import ProcessError
from cryptcost.model import Sample
from cryptcost.model import Job

# gocryptfs' row name → cryptcost's algorithm name. Only the "-Go" rows:
# the "-OpenSSL" rows are OpenSSL through cgo, which the OpenSSL engine
# measures directly.
ROWS = {"AES-GCM-256-Go": "aes-256-gcm",
        "AES-SIV-512-Go": "aes-256-siv",
        "XChaCha20-Poly1305-Go": "xchacha20-poly1305"}

ALGORITHMS = {
    "aes-256-gcm": Algorithm("aes-256-gcm", "AES-GCM-256-Go", "aead", ("aes", "pclmulqdq")),
    "aes-256-siv": Algorithm("aes-256-siv", "AES-SIV-512-Go", "aead", ("aes",)),
    "xchacha20-poly1305": Algorithm("xchacha20-poly1305", "XChaCha20-Poly1305-Go", "aead"),
}

BLOCK = 4096
_ROW = re.compile(r"^(\S+)\s+([\d.]+)\s+MB/s")


def parse_speed(text: str) -> tuple[dict[str, float], bool | None]:
    """({algorithm: bytes/s}, whether gocryptfs saw AES acceleration)."""
    rates = {}
    accel = None
    for line in text.splitlines():
        if line.startswith("cpu:"):
            accel = "with AES acceleration" in line
        match = _ROW.match(line.strip())
        if match and match.group(1) in ROWS:
            rates[ROWS[match.group(1)]] = float(match.group(2)) * 1e6   # gocryptfs' MB is 10^6
    if not rates:
        raise ValueError("no cipher rows in gocryptfs -speed output")
    return rates, accel


class GoEngine(CipherEngine):
    """``gocryptfs -speed``: 4096-byte blocks, one thread."""

    name = "go"
    tool = "gocryptfs"
    algorithms = ALGORITHMS
    sizes = (BLOCK,)
    max_threads = 1

    def measure(self, cells: list[Cell], accel: bool) -> dict[Cell, Sample]:
        env = {} if accel else {"GODEBUG": "cpu.aes=off"}
        harness = cpu.harness_cpu()
        done = proc.run(["gocryptfs", "-speed"], env=env, timeout=120)
        harness = cpu.harness_cpu() - harness
        try:
            rates, seen_accel = parse_speed(done.stdout + done.stderr)
        except ValueError as exc:
            raise ProcessError(done.argv, done.returncode, done.stdout, done.stderr,
                               why=str(exc)) from None
        out = {}
        for cell in cells:
            if cell.algorithm in rates:
                out[cell] = Sample(value=rates[cell.algorithm], seconds=done.seconds,
                                   metrics={"engine_saw_accel": seen_accel,
                                            "harness_cpu_s": harness / len(cells)})
        return out

    def jobs(self, cells: list[Cell], seconds: int) -> list[Job]:
        """One ``gocryptfs -speed`` per acceleration setting. No warm-up round:
        each of its benchmarks is Go's ``testing.Benchmark``, which runs the
        cipher with growing counts until a run lasts a second and reports
        that run alone, so the shorter runs before it are the warm-up."""
        jobs = []
        for accel in (True, False):
            mine = [c for c in cells if c.accel == accel]
            if mine:
                jobs.append(Job(label=f"gocryptfs -speed{'' if accel else ' accel-off'}",
                                keys=tuple(mine), est_seconds=6.0, warmup=0,
                                measure=lambda mine=mine, accel=accel: self.measure(mine, accel)))
        return jobs
