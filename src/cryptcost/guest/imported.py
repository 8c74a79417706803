"""A guest's runs brought into this host's store: every run of the guest's own store imported,
marked emulated (its CPU was qemu's), also what a guest stopped early had stored."""

from __future__ import annotations

from pathlib import Path

from cryptcost.guest import GuestCut
from cryptcost.store.db import Store
from cryptcost.store.exchange import run_dict


def keep_killed(store: Store, exc: GuestCut) -> tuple[list[int], str]:
    """What a guest that ended early (killed at its timeout, stopped, crashed) had stored,
    imported as emulated runs; their ids, and the error saying so."""
    ids = import_guest_runs(store, exc.partial, exc.emulated)
    return ids, cut_said(exc, ids)


def cut_said(exc: GuestCut, ids: list[int]) -> str:
    """Why a guest ended early, and the runs what it measured until then was imported as."""
    return str(exc) + (f"; what it measured until then is imported as emulated run(s) "
                       f"{', '.join(map(str, ids))}" if ids else "")


def import_guest_runs(store: Store, guest_store: Path | None, emulated: dict) -> list[int]:
    """Copy every run of the guest's store into ``store``, marked emulated."""
    if guest_store is None:
        return []
    guest = Store.open(guest_store, create=False)
    ids = []
    try:
        for run in guest.runs():
            data = run_dict(run, guest.results(run.id))
            data["host"] = {**data["host"], "emulated": emulated}
            data["run"]["extra"] = {**data["run"]["extra"], "emulated": emulated}
            ids.append(store.import_run(data))
    finally:
        guest.close()
    for suffix in ("", "-wal", "-shm"):
        Path(f"{guest_store}{suffix}").unlink(missing_ok=True)
    return ids
