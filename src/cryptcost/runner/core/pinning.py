"""A pass on N CPUs (R3's cores, METHODOLOGY rule 15).

cryptcost pins itself, so that fio, iperf3 and every daemon a stack starts
inherit the CPUs; and, where the kernel lets it, the kernel's unbound
workqueues (dm-crypt's kcryptd, loop's workers, fscrypt's read
decryption, writeback) through the workqueue cpumask: a system setting,
journalled with its old value and restored when the pass ends (or by
``cryptcost cleanup``). Per-CPU kernel work (softirq, bound kworkers) runs
where it is raised. Every result of the pass records what was pinned.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from typing import Iterator

from cryptcost.errors import CryptcostError
from cryptcost.host import cpu
from cryptcost.lifecycle.release import SETTINGS
from cryptcost.lifecycle.resources import Resources

WORKQUEUE_MASK = SETTINGS[0]


@contextmanager
def pinned(res: Resources, n: int | None) -> Iterator[str | None]:
    """Run the body on ``n`` CPUs; yields what was pinned (None without ``n``)."""
    with cpu.pinned(n):
        if not n:
            yield None
            return
        mask = format(sum(1 << c for c in os.sched_getaffinity(0)), "x")
        try:
            entry = res.setting(WORKQUEUE_MASK, mask)
        except (OSError, CryptcostError) as exc:
            why = getattr(exc, "strerror", None) or str(exc)
            yield (f"cryptcost's processes pinned to {n} CPU(s); the kernel's unbound workqueues "
                   f"not ({WORKQUEUE_MASK}: {why}); per-CPU kernel work (softirq) runs where "
                   "it is raised")
            return
        try:
            yield ("cryptcost's processes and the kernel's unbound workqueues (kcryptd, loop, "
                   f"fscrypt, writeback) pinned to {n} CPU(s); per-CPU kernel work (softirq) runs "
                   "where it is raised")
        finally:
            res.release(entry)
