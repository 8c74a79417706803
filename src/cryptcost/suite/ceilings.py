"""The cipher ceilings a plan's stacks need (rule 8): each stack's algorithm at its own unit, in
the engine that runs it, measured beside the plan's own cipher tables; what the run and the
model's estimate of it both count."""

from __future__ import annotations

import os

from cryptcost.engines import CIPHER_ENGINES
from cryptcost.host import kernel
from cryptcost.model import Cell
from cryptcost.runner import network as netrun
from cryptcost.runner.storage import resolve
from cryptcost.stacks.base import cipher_threads
from cryptcost.suite.compiled import CompiledPlan
from cryptcost.workloads import network as netwl
from cryptcost.workloads import storage as wl


# the part run_plan runs them in, where the plan has no cipher table of its own
LABEL = "cipher ceilings"


def light_host() -> dict:
    """What :func:`ceiling_cells` reads of a host, without the whole probe: the CPUs this process
    may use and the kernel's crypto drivers (for the estimate before a run)."""
    usable = len(os.sched_getaffinity(0))
    return {"cpu": {"cores": os.cpu_count() or usable, "cores_usable": usable},
            "crypto_drivers": kernel.crypto_drivers()}


def ceiling_cells(plan: CompiledPlan, host: dict, here: bool = True) -> tuple[Cell, ...]:
    """The cipher cells the plan's stacks need for their cipher ceilings
    (rule 8): each stack's algorithm at its own unit, in the engine that
    runs it (OpenSSL stands in for the kernel and for other userspace
    libraries), without acceleration where the kernel's AES is software,
    and with as many threads as the stack runs its cipher with
    (:func:`cipher_threads`). An engine that runs one thread only (Go's)
    gets OpenSSL's cells at 1 and N threads beside it, for the measured gain."""
    soft_kernel_aes = any(d.get("implementation") == "software" for name, d in
                          host.get("crypto_drivers", {}).items() if name in ("aes", "xts(aes)"))
    usable = host.get("cpu", {}).get("cores_usable") or host.get("cpu", {}).get("cores") or 1
    cells = set()
    for stack, cpus, uses in _stacks_and_uses(plan, here):
        ref = stack.cipher_ref()
        if not ref or not 16 <= ref["unit"] <= 64 << 20:
            continue
        threads = {cipher_threads(ref.get("threads"), op, size, depth,
                                  cpus or usable) for op, size, depth in uses} | {1}
        for algorithm in [ref["algorithm"]] + ([ref["then"]] if ref.get("then") else []):
            accels = {stack.accel} | ({False} if ref["where"] == "kernel" and soft_kernel_aes
                                      and algorithm.startswith("aes") else set())
            cells |= _cells(algorithm, ref, accels, threads)
    return tuple(sorted(cells, key=Cell.sort_key))


def _cells(algorithm: str, ref: dict, accels: set[bool], threads: set[int]) -> set[Cell]:
    """One algorithm's ceiling cells, at ``ref``'s unit: in its engine (OpenSSL's where that
    engine lacks it), at each thread count, with OpenSSL's 1 and N beside an engine's cap."""
    engine = "go" if ref["where"] == "go" else "openssl"
    if algorithm not in CIPHER_ENGINES[engine].algorithms:
        engine = "openssl"                  # the nearest: OpenSSL's implementation
    if algorithm not in CIPHER_ENGINES[engine].algorithms:
        return set()
    cap = CIPHER_ENGINES[engine].max_threads
    gain = algorithm in CIPHER_ENGINES["openssl"].algorithms      # else the gain is said as assumed
    cells = set()
    for accel in accels:
        for n in threads:
            if cap is None or n <= cap:
                cells.add(Cell.cipher(engine, algorithm, ref["unit"], n, accel))
                continue
            cells.add(Cell.cipher(engine, algorithm, ref["unit"], cap, accel))
            if gain:
                cells |= {Cell.cipher("openssl", algorithm, ref["unit"], k, accel)
                          for k in (1, n)}
    return cells


def _stacks_and_uses(plan: CompiledPlan, here: bool = True):
    """(stack, CPUs, {(op, request bytes, requests in flight)}) for every
    storage and network stack of the plan (``here=False``: as a kernel that has them all)."""
    for part in plan.parts:
        for sp in part.storage:
            steps = wl.steps(sp.workloads, sp.sized(), False)
            uses = {(op.op, op.block_bytes, op.iodepth) for step in steps for op in step.ops}
            for stack, _ in resolve(sp.stacks, sp.fs, sp.accel, here=here)[0]:
                yield stack, sp.cpus, uses
        for np_ in part.network:
            for stack, _ in netrun.resolve(np_.stacks, np_.link, np_.accel, here=here)[0]:
                ops = netwl.ops(np_.workloads, stack.traffic, streams=np_.streams,
                                clients=np_.clients)
                yield stack, np_.cpus, {(op.op, None,
                                         op.streams) for op in ops} or {("stream", None, 1)}
