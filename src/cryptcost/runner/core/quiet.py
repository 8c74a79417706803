"""What cryptcost quiets on the host for the length of a measuring run.

Free page reporting: a VM's balloon driver hands the memory its guest
frees back to the host, and memory allocated again then faults in from
the host first. Between two passes of a storage cell cryptcost frees the
file's pages (a cache reset, a deleted file), and the next pass allocates
them again: with reporting on, whether a pass pays the host's fault path
depends on whether the balloon reported its pages in between. Measured
on such a VM (2 GiB, freed and touched again 4 s later): 0.44–1.0 GB/s
first touch with reporting on, 1.6–1.9 GB/s with it held off.

For the run, cryptcost sets the reporting order to one no free block
reaches (the allocator's number of orders), so that nothing is reported;
the old value is journalled first and written back when the run ends, or
by ``cryptcost cleanup`` after a crash (lifecycle.release.SETTINGS). What
was done is stored with the run's host facts (``page_reporting.run``), and,
where the kernel counts what it reported, what was reported during the run
(the run's ``page_reporting_reported_bytes``: 0 when the hold worked), held
or not.
"""

from __future__ import annotations

import ctypes
import mmap
import statistics
import time

from cryptcost.errors import CryptcostError
from cryptcost.host import cpu, kernel
from cryptcost.host.probe import notes
from cryptcost.lifecycle.resources import Resources

CHOICES = ("hold", "keep")

NOISE_COPIES = 10          # memory_noise: this many timed copies...
NOISE_SECONDS = 0.1        # ...of this long each (1 s in all: the quick suite has no more to spare)
NOISE_BYTES = 32 << 20     # the buffer copied, far beyond any CPU cache


def hold_page_reporting(res: Resources, choice: str = "hold") -> dict | None:
    """Hold free page reporting off for the life of ``res`` (``choice``
    ``hold``), or leave it as it is (``keep``); what was done, for the host
    facts, or None where this host reports nothing."""
    now = kernel.page_reporting()
    if not now or not now.get("enabled") or "page_reporting_order" not in now:
        return None
    if choice == "keep":
        return {"held": False, "why": "kept on (--page-reporting keep)",
                "reported_before": kernel.reported_bytes()}
    above = kernel.free_block_orders()
    if above is None:
        return {"held": False,
                "why": "/proc/buddyinfo is unreadable: the largest block order is unknown"}
    try:
        res.setting(kernel.PAGE_REPORTING_ORDER, str(above))
    except (OSError, CryptcostError) as exc:
        why = (f"{kernel.PAGE_REPORTING_ORDER} refused order {above}: "
               f"{getattr(exc, 'strerror', None) or exc}")
        # a kernel that takes no order above its largest: report only blocks of that order
        largest = above - 1
        if largest <= now["page_reporting_order"]:
            return {"held": False, "why": why}
        try:
            res.setting(kernel.PAGE_REPORTING_ORDER, str(largest))
        except (OSError, CryptcostError):
            return {"held": False, "why": why}
        return {"held": False,
                "why": f"{why}; only blocks of order {largest} (the largest) are reported now",
                "order": largest, "was": now["page_reporting_order"],
                "reported_before": kernel.reported_bytes()}
    return {"held": True, "order": above, "was": now["page_reporting_order"],
            "reported_before": kernel.reported_bytes()}


def reported_since(host: dict) -> int | None:
    """Bytes free page reporting handed to the host since the run began (0
    when the hold worked), where the kernel counts them; else None."""
    before = ((host.get("page_reporting") or {}).get("run") or {}).get("reported_before")
    now = kernel.reported_bytes()
    return now - before if before is not None and now is not None else None


def warm_memory(nbytes: int) -> dict:
    """Touch ``nbytes`` of fresh memory and free it: what the VM had never
    touched, or had handed back to its host, faults in from the host once,
    here, rather than in the first passes that allocate page cache (the
    allocator hands the pages just freed out first). One writer per CPU (up
    to four), each a share: faulting in scales with the CPUs (1 GiB the host
    had taken back, here: 0.41 GB/s with one writer, 0.75 with two). What it
    took: bytes, seconds and the rate of that first touch."""
    started = time.monotonic()
    area = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    try:
        cpu.fill(area, nbytes, 0x5A)
    finally:
        area.close()
    seconds = time.monotonic() - started
    return {"bytes": nbytes, "seconds": round(seconds, 3),
            "bytes_per_s": round(nbytes / seconds) if seconds else None}


def memory_noise(copies: int = NOISE_COPIES, seconds: float = NOISE_SECONDS) -> dict:
    """The host's memory bandwidth and how much it moves from moment to
    moment: ``copies`` spells of ``seconds`` each, copying a 32 MiB buffer
    over and over (memmove, far beyond the CPU's caches), timed one by one.
    A figure that moves data at memory speed (a RAM medium read back, a
    FUSE passthrough's copies) can be no steadier than this; on a shared VM
    its neighbours' memory traffic moves it even while the CPU is steady,
    at any spell length. Returns bytes/s (median, min, max) and the coefficient of variation."""
    src = mmap.mmap(-1, NOISE_BYTES, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    dst = mmap.mmap(-1, NOISE_BYTES, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    try:
        a = (ctypes.c_char * NOISE_BYTES).from_buffer(src)
        b = (ctypes.c_char * NOISE_BYTES).from_buffer(dst)
        ctypes.memset(a, 0x5A, NOISE_BYTES)
        ctypes.memset(b, 0xA5, NOISE_BYTES)
        ctypes.memmove(b, a, NOISE_BYTES)                      # warm-up copy, not timed
        rates = []
        for _ in range(copies):
            start, moved = time.perf_counter(), 0
            while (elapsed := time.perf_counter() - start) < seconds:
                ctypes.memmove(b, a, NOISE_BYTES)
                moved += NOISE_BYTES
            rates.append(moved / elapsed)
        del a, b
    finally:
        src.close()
        dst.close()
    mean = statistics.fmean(rates)
    return {"copies": copies, "seconds": seconds, "bytes_per_s": round(statistics.median(rates)),
            "low": round(min(rates)), "high": round(max(rates)),
            "cv": round(statistics.stdev(rates) / mean, 4) if len(rates) > 1 and mean else None}


def quiet_host(res: Resources, host: dict, page_reporting: str = "hold") -> None:
    """Quiet what the run may quiet on the host, for the life of ``res``, and say so in
    ``host``, which is stored with the run."""
    held = hold_page_reporting(res, page_reporting)
    if held is not None:
        host["page_reporting"] = {**host["page_reporting"], "run": held}
        host["notes"] = notes(host)
