"""How long a plan takes, by the model: each series at its minimum number of samples (or, with
``most``, its maximum), each sample's set-up, reset and start-up counted; ``suite.budget``
calibrates it on earlier runs."""

from __future__ import annotations

from cryptcost.engines import bonnie, dbench
from cryptcost.runner import network as netrun
from cryptcost.runner.ciphers import build_cells
from cryptcost.runner.ciphers.executor import Executor, RealExecutor
from cryptcost.runner.core import quiet
from cryptcost.runner.network import NetworkPlan
from cryptcost.runner.storage import resolve
from cryptcost.runner.storage.steps import MIN_SAMPLE_SECONDS, SAMPLE_BUDGET, StepRunner
from cryptcost.suite.ceilings import ceiling_cells
from cryptcost.runner.ciphers import CipherPlan
from cryptcost.suite.compiled import CompiledPart, CompiledPlan
from cryptcost.workloads import network as netwl
from cryptcost.workloads import storage as wl


def estimate(plan: CompiledPlan, executor: Executor | None = None, here: bool = True,
             most: bool = False) -> float:
    """Seconds the plan takes if every series is stable after the minimum
    number of samples (a lower bound, printed before the run); ``most``: if every series takes
    the maximum (a step's series sample together until each is stable or at the cap, so one
    noisy baseline keeps its whole group going). ``here=False``: the stacks as a kernel that
    has them all runs them (a guest's share), at this host's speed. Each part is estimated at
    its own sampling."""
    executor = executor or RealExecutor()
    return sum(part_seconds(p, executor, here, most) for p in plan.parts)


def part_seconds(part: CompiledPart, executor: Executor, here: bool = True,
                 most: bool = False) -> float:
    """One part's seconds, as :func:`estimate` counts them."""
    pol = part.policy
    samples = pol.max_samples if most else pol.min_samples
    total = 0.0
    if part.ciphers is not None:
        total += _cipher_seconds(part.ciphers, executor, pol, samples)
    for sp in part.storage:
        taken = sp.samples or samples                 # storage.samples, whatever the policy's
        total += _storage_seconds(sp, pol.warmup + taken + int(sp.profile and not pol.warmup),
                                  here)
    for np_ in part.network:
        # a profiled round of its own only where no warm-up round can be profiled
        rounds = pol.warmup + samples + int(np_.profile and not pol.warmup)
        resolved, _ = netrun.resolve(np_.stacks, np_.link, np_.accel, here=here)
        names = netrun.wl.expand(np_.workloads)
        for stack, _ in resolved:
            total += 4 + (3 if stack.traffic == "files" else 1)       # setup, canary, verify
            ops = netrun.wl.ops(names, stack.traffic, clients=np_.clients)
            total += rounds * sum(_net_op_seconds(op, np_) for op in ops)
    return total


def _cipher_seconds(cp: CipherPlan, executor: Executor, pol, samples: int) -> float:
    cells, _ = build_cells(cp, executor)
    per_engine = {e: [c for c in cells if c.engine == e] for e in {c.engine for c in cells}}
    return sum(j.est_seconds * (j.warmups(pol.warmup) + samples)
               for engine, cs in per_engine.items()
               for j in executor.cipher_jobs(engine, cs, cp.seconds))


def _storage_seconds(sp, rounds: int, here: bool) -> float:
    """One storage plan's seconds at ``rounds`` runs of each step (a profiled one of its own
    counted)."""
    resolved, _ = resolve(sp.stacks, sp.fs, sp.accel, here=here)
    steps = wl.steps(sp.workloads, sp.sized(), False)
    total = quiet.NOISE_COPIES * quiet.NOISE_SECONDS         # the memory's noise floor
    for stack, _ in resolved:
        plaintext = stack.variant_role() == "baseline" and stack.layer == "kernel"
        rate = 600e6 if plaintext else 120e6
        total += 3 + stack.remount_seconds * 2                # setup + integrity check
        least = max(sp.sample_minimum, stack.sample_floor)      # plain keeps its floor
        for step in steps:
            total += rounds * sum(_op_seconds(op, rate, stack, least) for op in step.ops)
    return total


def ceilings(plan: CompiledPlan, host: dict, executor: Executor | None = None,
             here: bool = True, have: frozenset = frozenset()) -> float:
    """Seconds the cipher ceilings of the plan's stacks take (``suite.run_plan`` measures them
    before the first part, in a table of their own) at the plan's minimum number of
    samples; ``host`` as :func:`~cryptcost.suite.ceilings.ceiling_cells` reads it; the cells in
    ``have`` (a resumed run's) are not measured again."""
    executor = executor or RealExecutor()
    cells = [c for c in ceiling_cells(plan, host, here) if c not in have]
    if not cells:
        return 0.0
    pol = plan.policy
    return sum(j.est_seconds * (j.warmups(pol.warmup) + pol.min_samples)
               for engine in sorted({c.engine for c in cells})
               for j in executor.cipher_jobs(engine, [c for c in cells if c.engine == engine],
                                             CipherPlan.seconds))


# one dbench run: its warm-up (a fifth of its time), its run, start-up and clean-up
DBENCH_RUN = dbench.SECONDS * 1.2 + 2


def _net_op_seconds(op: netwl.NetOp, plan: NetworkPlan) -> float:
    """One sample of ``op``: a stream's seconds, dbench's run (its warm-up is a fifth of it,
    then its clean-up), or about a second of file copies and their checks."""
    if op.traffic == "stream":
        return plan.seconds + 1.5
    return DBENCH_RUN if op.workload == "dbench" else 2.5


def _op_seconds(op: wl.Op, rate: float, stack, minimum: float = MIN_SAMPLE_SECONDS) -> float:
    """One sample of ``op``: at least ``minimum`` (the plan's) of measured passes, within the
    sample budget, plus its cache reset (of the one file it reads, or of the stack) and
    start-up."""
    if op.engine == "dbench":
        return DBENCH_RUN
    if op.engine == "bonnie":
        return bonnie.estimate(op.op, op.intended_bytes, rate, stack.forget_seconds)
    size = op.intended_bytes or 32 << 20
    one = size / rate
    measured = min(max(one, minimum), max(one, SAMPLE_BUDGET))
    reset = stack.forget_seconds if StepRunner.repeatable(op) else stack.remount_seconds
    return measured + op.reset_before * reset + 0.3
