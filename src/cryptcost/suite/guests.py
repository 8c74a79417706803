"""A run --vm's guest shares, each in its own boot of cryptcost vm's guest after this host's
share (:func:`run_guests`): its runs imported as emulated and linked to the host's run."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from cryptcost.errors import CryptcostError
from cryptcost.guest import XCHG, GuestCut, VmOptions, run_guest
from cryptcost.guest.imported import cut_said, import_guest_runs
from cryptcost.lifecycle.lock import run_lock
from cryptcost.lifecycle.resources import Resources
from cryptcost.suite import SuiteOutcome
from cryptcost.suite import guest as guest_share
from cryptcost.suite.budget import GUEST_BOOT_SECONDS, GUEST_TIMEOUT
from cryptcost.suite.prepare import GuestPlan, Prepared
from cryptcost.suite.resume import Sitting


@dataclass
class Guests:
    """Where the guests' runs go and what is said of them: the host's run in ``store``, this
    sitting, ``timeout`` (run --vm-timeout; None: from each share's estimate), ``say`` for
    what a person reads (stderr) and each guest's ``cpus`` (run --vm-cpus; None: the vm's
    default)."""

    store: object
    run_id: int
    sitting: Sitting
    timeout: float | None
    say: Callable[[str], None]
    cpus: int | None = None


def run_guests(prepared: Prepared, to: Guests, so_far: SuiteOutcome) -> list[int]:
    """Each guest share in its own boot: its runs imported as emulated and linked to the run
    (``guest_runs``). A guest that fails is one more line in ``so_far.failed`` (and in the
    run's record); what it measured before is kept. What this sitting's guests' budgets left
    out as they ran joins ``so_far.skipped`` (an earlier sitting's guest runs are in the run's
    record already, less the parts measured since)."""
    linked: list[int] = list(to.sitting.base().get("guest_runs", []))
    earlier = set(linked)          # an earlier sitting's guest runs: their record is in the base
    for gp in prepared.guest:
        command, timeout = _command(prepared, gp, to, so_far)
        if command is None:
            continue
        try:
            _boot(gp, command, timeout, to, so_far, linked)
        finally:
            for rid in (r for r in linked if r not in earlier):
                g = to.store.run(str(rid)).extra
                so_far.skipped += [t for s in g.get("skipped", []) if s.get("budget")
                                   and (t := {**s, "guest_share": g.get("suite")})
                                   not in so_far.skipped]
            # linked as each guest ends: a run stopped in a later guest keeps the earlier ones
            to.store.update_extra(to.run_id, guest_runs=linked, failed=so_far.failed,
                                  skipped=so_far.skipped)
    return linked


def _said(gp: GuestPlan) -> str:
    return f"guest ({gp.share.kernel_said}, emulated)"


def _command(prepared: Prepared, gp: GuestPlan, to: Guests, so_far: SuiteOutcome
             ) -> tuple[list[str] | None, float]:
    """The guest's ``cryptcost run --parts`` command and its timeout; no command where
    ``--until`` leaves no time for even its shortest part after a boot (left out, said)."""
    timeout = to.timeout or max(1800.0, gp.seconds * (
        3 * gp.scale if gp.factor[1] else GUEST_TIMEOUT))
    left = None
    if prepared.until is not None:
        left, cut = gp.until_cut(prepared.until, prepared.until_said, time.time())
        if cut:
            to.say(f"— {_said(gp)}: {cut[0]['reason']}")
            so_far.skipped += cut
            to.store.update_extra(to.run_id, skipped=so_far.skipped)
            return None, timeout
    to.say(f"— {_said(gp)}: {'; '.join(p.label for p in gp.share.plan.parts)} "
           f"(stopped after {timeout / 60:.0f} min)")
    command = ["run", "--parts", f"{XCHG}/parts.json", "--no-report"]
    if gp.budget_s:
        command += ["--time-budget", f"{max(60.0, gp.budget_s - GUEST_BOOT_SECONDS):.0f}s",
                    "--budget-scale", f"{gp.scale:.3f}"]
    if left is not None:
        command += ["--until", f"{left:.0f}s"]
    return command, timeout


def _boot(gp: GuestPlan, command: list[str], timeout: float, to: Guests,
          so_far: SuiteOutcome, linked: list[int]) -> None:
    """One guest's boot: the runs it stored, imported and added to ``linked``; what went
    wrong, a line of ``so_far.failed``; Ctrl-C or a signal ends the run once what it measured
    is imported and linked."""
    what = _said(gp)
    to.sitting.drop_guest(to.store, gp.share.plan)     # what earlier guest runs held of it
    opts = VmOptions(timeout=timeout, kernel=gp.share.kernel or None,
                     memory_mib=guest_memory_mib(), cpus=to.cpus or VmOptions.cpus)
    cut = None
    try:
        with run_lock(["run", "--vm"]), Resources() as res:
            outcome = run_guest(res, command, opts, Path(to.store.path).parent / "vm-logs",
                                stdout=sys.stderr.buffer,
                                files={"parts.json": guest_share.to_json(gp.share.plan)})
        stored, emulated = outcome.store, outcome.emulated
    except GuestCut as exc:                  # what it stored until then is imported all the same
        cut, stored, emulated = exc, exc.partial, exc.emulated
    except CryptcostError as exc:
        so_far.failed.append(f"{what}: {exc}")
        return
    ids = import_guest_runs(to.store, stored, emulated)
    linked += ids
    if cut is not None:
        said = cut_said(cut, ids)
        so_far.failed.append(f"{what}: {said}")
        if cut.interrupt is not None:       # imported and linked; the run ends
            to.say(f"{what}: {said}")
            raise cut.interrupt from None
    elif outcome.returncode != 0:
        so_far.failed.append(f"{what}: the guest's run ended with exit code "
                             f"{outcome.returncode} (console log {outcome.console}; its results "
                             f"are kept in run(s) {', '.join(map(str, ids)) or 'none'})")


def guest_memory_mib() -> int:
    """The guest's memory: half of what this host has free, between 2 and 8 GiB (its RAM media,
    up to 320 MiB a stack, and their page cache live in it)."""
    import psutil
    return int(min(8192, max(2048, psutil.virtual_memory().available / 2**20 / 2)))
