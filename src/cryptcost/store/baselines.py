"""Named baselines: a name for a run of the store, that a later run is checked against
(``cryptcost baseline``, ``cryptcost check --against NAME``). Each lives in the store's
``baselines`` table beside the run it points to; an exported baseline (``baseline export``)
carries its name and its samples, and ``cryptcost import`` saves it under that name."""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass

from cryptcost.errors import UserError
from cryptcost.store.db import Store, now

NAME = re.compile(r"^[A-Za-z][A-Za-z0-9._-]{0,63}$")
RESERVED = {"latest"}


@dataclass(frozen=True)
class Baseline:
    name: str
    run_id: int
    saved: str
    note: str | None = None

    def to_dict(self) -> dict:
        return {"name": self.name, "run": self.run_id, "saved": self.saved, "note": self.note}


def valid_name(name: str) -> str:
    if not NAME.match(name) or name in RESERVED:
        raise UserError(f"bad baseline name {name!r}: a letter, then up to 63 letters, digits, "
                        "'.', '_' or '-' (not 'latest')")
    return name


def save(store: Store, name: str, run_id: int, *, replace: bool = False,
         note: str | None = None) -> Baseline:
    """Name run ``run_id``; a name already taken is refused unless ``replace``."""
    valid_name(name)
    old = find(store, name)
    if old and not replace:
        raise UserError(f"baseline {name} already names run {old.run_id} (saved {old.saved}): "
                        "pass --replace to point it at another run, or choose another name")
    baseline = Baseline(name, run_id, now(), note)
    try:
        with store.conn:
            store.conn.execute("INSERT OR REPLACE INTO baselines(name, run_id, saved, note) "
                               "VALUES (?,?,?,?)", (name, run_id, baseline.saved, note))
    except sqlite3.DatabaseError as exc:
        raise UserError(f"cannot write the result store {store.path}: {exc}") from None
    return baseline


def find(store: Store, name: str) -> Baseline | None:
    rows = store._query("SELECT * FROM baselines WHERE name = ?", (name,))
    return _of(rows[0]) if rows else None


def get(store: Store, name: str) -> Baseline:
    """The baseline named ``name``, or one line saying which names there are."""
    found = find(store, name)
    if found is None:
        names = [b.name for b in every(store)]
        raise UserError(f"no baseline named {name!r} in {store.path}"
                        + (f"; there are: {', '.join(names)}" if names else
                           ": save one with 'cryptcost baseline save NAME [RUN]'"))
    return found


def every(store: Store) -> list[Baseline]:
    return [_of(r) for r in store._query("SELECT * FROM baselines ORDER BY name")]


def of_run(store: Store, run_id: int) -> list[Baseline]:
    return [_of(r) for r in store._query("SELECT * FROM baselines WHERE run_id = ? ORDER BY "
                                         "name", (run_id,))]


def remove(store: Store, name: str) -> Baseline:
    found = get(store, name)
    with store.conn:
        store.conn.execute("DELETE FROM baselines WHERE name = ?", (name,))
    return found


def _of(row) -> Baseline:
    return Baseline(row["name"], row["run_id"], row["saved"], row["note"])
