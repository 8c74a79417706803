"""The CPU: model, cores, the crypto-relevant flags, governor and clock;
and system-wide CPU accounting from /proc/stat."""

from __future__ import annotations

import ctypes
import hashlib
import mmap
import os
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

from cryptcost.errors import UserError
from cryptcost.host import key_value_blocks, read_text

from cryptcost.model import CPU_FIELDS, CpuSplit

# Flags that decide cipher speed (METHODOLOGY rule 13).
CRYPTO_FLAGS = ("aes", "vaes", "pclmulqdq", "vpclmulqdq", "avx2", "avx512f", "avx512vl", "sha_ni")
# VIA PadLock (R5): shown only on CPUs that have it.
PADLOCK_FLAGS = ("ace", "ace_en", "ace2", "ace2_en", "phe", "phe_en", "pmm", "pmm_en")

CLK_TCK = os.sysconf("SC_CLK_TCK")


def usable_cores() -> int:
    """The CPUs this process (and so everything it starts) may run on: a
    pass on N CPUs (:func:`pinned`) narrows them."""
    return len(os.sched_getaffinity(0))


def memory_writers() -> int:
    """How many threads fill memory together (a medium's pages, the memory warmed before a
    storage comparison): one per usable CPU, up to four. Faulting pages in from a VM's host
    scales with the CPUs."""
    return max(1, min(usable_cores(), 4))


def fill(area: mmap.mmap, nbytes: int, byte: int) -> None:
    """Write ``byte`` over the first ``nbytes`` of ``area``, one writer per CPU
    (:func:`memory_writers`), each a share: what faults memory in from a VM's host as fast as
    its CPUs let it (ctypes' memset runs without the GIL)."""
    view = (ctypes.c_char * nbytes).from_buffer(area)
    try:
        base, writers = ctypes.addressof(view), memory_writers()
        share = -(-nbytes // writers)
        with ThreadPoolExecutor(writers) as pool:
            list(pool.map(lambda at: ctypes.memset(base + at, byte, min(share, nbytes - at)),
                          range(0, nbytes, share)))
    finally:
        del view


def validate_cpu_count(n: int | None) -> None:
    """Refuse a CPU count this process cannot be pinned to (R3's cores pass)."""
    allowed = usable_cores()
    if n is not None and not 1 <= n <= allowed:
        raise UserError(f"cpus {n}: this process may use 1 … {allowed} CPU(s)")


@contextmanager
def pinned(n: int | None):
    """This process, and every process it starts meanwhile (fio, iperf3, the
    stacks' daemons), restricted to its first ``n`` allowed CPUs; all of
    them again afterwards. Kernel threads are not restricted here
    (:mod:`cryptcost.runner.core.pinning` confines the unbound workqueues too, and
    results say what was pinned). ``None``: no restriction."""
    if not n:
        yield
        return
    validate_cpu_count(n)
    allowed = sorted(os.sched_getaffinity(0))
    os.sched_setaffinity(0, allowed[:n])
    try:
        yield
    finally:
        os.sched_setaffinity(0, allowed)


def _cpuinfo(text: str | None = None) -> list[dict[str, str]]:
    return key_value_blocks(text if text is not None else Path("/proc/cpuinfo").read_text())


def cpu_info(cpuinfo_text: str | None = None) -> dict:
    """Model, logical cores, crypto flags, governor and clock (MHz)."""
    blocks = _cpuinfo(cpuinfo_text)
    first = blocks[0] if blocks else {}
    flags = set(first.get("flags", "").split())
    mhz = [float(b["cpu MHz"]) for b in blocks if b.get("cpu MHz")]
    return {
        "model": first.get("model name", first.get("cpu model", "unknown")),
        "cores": os.cpu_count() or len(blocks),
        "cores_usable": usable_cores(),
        "flags": {**{f: f in flags for f in CRYPTO_FLAGS},
                  **{f"padlock_{f}": True for f in PADLOCK_FLAGS if f in flags}},
        "governor": read_text(Path(CPUFREQ, "scaling_governor")) or None,
        "mhz": round(sum(mhz) / len(mhz), 1) if mhz else None,
        "max_mhz": _khz_to_mhz(read_text(Path(CPUFREQ, "cpuinfo_max_freq"))),
    }


CPUFREQ = "/sys/devices/system/cpu/cpu0/cpufreq"


def _khz_to_mhz(value: str | None) -> float | None:
    return round(int(value) / 1000, 1) if value and value.isdigit() else None


_YARDSTICK: list[bytes] = []


def yardstick_speed(rounds: int = 4) -> float:
    """Bytes/s of a fixed piece of CPU work, SHA-256 over 4 MiB four times
    (about 10 ms): timed before every sample, so that a result can say
    whether the host's CPU speed moved between its samples."""
    if not _YARDSTICK:
        _YARDSTICK.append(os.urandom(4 << 20))
    data = _YARDSTICK[0]
    start = time.perf_counter()
    for _ in range(rounds):
        hashlib.sha256(data).digest()
    return rounds * len(data) / (time.perf_counter() - start)


def harness_cpu() -> float:
    """CPU seconds cryptcost's own process has used (children excluded)."""
    import resource
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def memory() -> dict:
    """Total and available memory in bytes."""
    info = {}
    for line in Path("/proc/meminfo").read_text().splitlines():
        key, _, rest = line.partition(":")
        info[key] = int(rest.split()[0]) * 1024
    return {"total": info.get("MemTotal"), "available": info.get("MemAvailable")}


def stat_snapshot(text: str | None = None) -> dict[str, list[int]]:
    """Per-CPU tick counters from /proc/stat: {"cpu": [...], "cpu0": [...], …}."""
    text = text if text is not None else Path("/proc/stat").read_text()
    snap = {}
    for line in text.splitlines():
        if line.startswith("cpu"):
            parts = line.split()
            snap[parts[0]] = [int(x) for x in parts[1:1 + len(CPU_FIELDS)]]
    return snap


def cpu_split(before: dict[str, list[int]], after: dict[str, list[int]],
              daemons: float = 0.0) -> CpuSplit:
    """System-wide CPU seconds spent between two snapshots, by category."""
    total = [(a - b) / CLK_TCK for a, b in zip(after["cpu"], before["cpu"])]
    busiest = 0.0
    for name, ticks in after.items():
        if name == "cpu" or name not in before:
            continue
        delta = [a - b for a, b in zip(ticks, before[name])]
        span = sum(delta)
        idle = delta[3] + delta[4] + (delta[7] if len(delta) > 7 else 0)     # idle, iowait, steal
        if span > 0:
            busiest = max(busiest, (span - idle) / span)
    return CpuSplit(**dict(zip(CPU_FIELDS, total)), daemons=daemons, max_core_busy=busiest)


def window_seconds(before: dict[str, list[int]], after: dict[str, list[int]]) -> float:
    """The wall time two snapshots span, as /proc/stat counts it: its ticks
    over every CPU, per CPU (``CLK_TCK`` a second, 100 here: a window of a
    few ticks counts a process's CPU to within whole ticks, not percent)."""
    cpus = max(1, sum(1 for name in after if name != "cpu"))
    return (sum(after["cpu"]) - sum(before["cpu"])) / CLK_TCK / cpus


def process_cpu(pids: list[int]) -> dict[int, float]:
    """CPU-seconds (user + system) of each process and all its descendants:
    the live ones directly, the exited ones through their parent's
    ``children_*`` times (a daemon that forks a child per connection, like
    sshd or smbd, is counted whole). A process that is gone counts 0."""
    import psutil
    out = {}
    for pid in pids:
        total = 0.0
        try:
            root = psutil.Process(pid)
            family = [root] + root.children(recursive=True)
        except psutil.Error:
            out[pid] = 0.0
            continue
        for p in family:
            try:
                t = p.cpu_times()
                total += t.user + t.system + t.children_user + t.children_system
            except psutil.Error:
                pass
        out[pid] = total
    return out


def children_cpu() -> float:
    """CPU-seconds of this process's children that have exited and been waited for."""
    import resource
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime
