"""Data integrity through a stack, checked before it is measured.

A stack that returns other bytes than were written must not be measured at
all (qemu 7.2's FUSE export under a direct-I/O loop device writes
concurrent requests at the wrong offsets). :func:`verify_pattern` writes a
random pattern with several threads at interleaved offsets — so that
requests are in flight together — flushes, resets the caches the way a read
of one file is measured (``reset`` is given the file), and compares every
byte.
"""

from __future__ import annotations

import os
import secrets
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable

from cryptcost.errors import DataIntegrityError

CHUNK = 64 * 1024


def verify_pattern(directory: Path, size: int = 16 << 20, threads: int = 4,
                  reset: Callable[[Path], object] | None = None) -> dict:
    """Write, flush, reset, read back, compare; raise DataIntegrityError on any difference."""
    path = directory / ".cryptcost-integrity"
    chunks = size // CHUNK
    # made once: written, then compared (the kernel's CSPRNG)
    pattern = secrets.token_bytes(chunks * CHUNK)

    def block(i: int) -> memoryview:
        return memoryview(pattern)[i * CHUNK:(i + 1) * CHUNK]

    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        def write(worker: int) -> None:
            for i in range(worker, chunks, threads):
                os.pwrite(fd, block(i), i * CHUNK)
        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(write, range(threads)))
        os.fsync(fd)
    finally:
        os.close(fd)
    if reset:
        reset(path)
    bad = []
    with open(path, "rb") as fh:
        for i in range(chunks):
            if fh.read(CHUNK) != block(i):
                bad.append(i)
        tail = fh.read(1)
    path.unlink()
    if bad or tail:
        raise DataIntegrityError("data read back through the stack differs from what was written "
                                 f"({len(bad)} of {chunks} 64 KiB "
                                 f"chunks{', plus extra bytes' if tail else ''}, first at offset "
                                 f"{bad[0] * CHUNK if bad else size}): refusing to measure it")
    return {"checked_bytes": size, "writers": threads, "result": "identical"}
