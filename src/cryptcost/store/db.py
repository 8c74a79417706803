"""The result store: one SQLite file, ``$XDG_DATA_HOME/cryptcost/results.db``
unless ``--db`` names another.

The schema is versioned (``PRAGMA user_version``) and migrated one step at
a time by :data:`MIGRATIONS`; docs/store-format.md keeps the history.
Samples and results are committed the moment they are added.
"""

from __future__ import annotations

import json
import os
import sqlite3
from datetime import datetime, timezone
from pathlib import Path

from cryptcost import faults
from cryptcost.errors import UserError
from cryptcost.model import Cell, Result, Run, Sample
from cryptcost.store.backfill import add_facts, add_skip_facts

def _backfill_facts(conn: sqlite3.Connection) -> None:
    """3 → 4: every storage result carries its stack's facts (params.facts)."""
    for row in conn.execute("SELECT id, data FROM results WHERE kind = 'storage'").fetchall():
        data = json.loads(row[1])
        if add_facts(data):
            conn.execute("UPDATE results SET data = ? WHERE id = ?", (json.dumps(data), row[0]))
    for row in conn.execute("SELECT id, extra FROM runs").fetchall():
        extra = json.loads(row[1] or "{}")
        if add_skip_facts(extra):
            conn.execute("UPDATE runs SET extra = ? WHERE id = ?", (json.dumps(extra), row[0]))


def _series_by_cell(conn: sqlite3.Connection) -> None:
    """4 → 5: a series is named by its cell (it was the dict of everything the runner
    described, params and all), so that an older run's series read the same as a new one's."""
    for table in ("results", "samples"):
        for row in conn.execute("SELECT id, kind, series, "
                                f"{'data' if table == 'results' else 'NULL'} "
                                f"FROM {table}").fetchall():
            old = row[3] or row[2]
            if not old:
                continue
            try:
                described = {"kind": row[1], **json.loads(old)}
            except (ValueError, TypeError):
                continue
            conn.execute(f"UPDATE {table} SET series = ? WHERE id = ?",
                         (series_key(Cell.of(described)), row[0]))


# Each entry migrates from version i to i+1: SQL, or a function of the
# connection run inside one transaction. Never edit a released step.
MIGRATIONS: list = [
    # 0 → 1: the first schema.
    """
    CREATE TABLE runs (id INTEGER PRIMARY KEY, started TEXT NOT NULL, command TEXT NOT NULL,
                       host TEXT NOT NULL);
    CREATE TABLE results (id INTEGER PRIMARY KEY, run_id INTEGER NOT NULL REFERENCES runs(id),
                          kind TEXT NOT NULL, data TEXT NOT NULL);
    """,
    # 1 → 2: run status and labels; samples saved one by one; results keep
    # their samples' series identity.
    """
    ALTER TABLE runs ADD COLUMN status TEXT NOT NULL DEFAULT 'complete';
    ALTER TABLE runs ADD COLUMN finished TEXT;
    ALTER TABLE runs ADD COLUMN label TEXT;
    ALTER TABLE results ADD COLUMN series TEXT;
    CREATE TABLE samples (id INTEGER PRIMARY KEY, run_id INTEGER NOT NULL REFERENCES runs(id),
                          kind TEXT NOT NULL, series TEXT NOT NULL, idx INTEGER NOT NULL,
                          data TEXT NOT NULL);
    CREATE INDEX samples_run ON samples(run_id);
    CREATE INDEX results_run ON results(run_id);
    """,
    # 2 → 3: what a run could not measure and why, the suite, the cost-model target.
    """
    ALTER TABLE runs ADD COLUMN extra TEXT NOT NULL DEFAULT '{}';
    """,
    # 3 → 4: the facts each stack declares, stored with every result (back-filled).
    _backfill_facts,
    # 4 → 5: series named by their cell.
    _series_by_cell,
    # 5 → 6: series named by their cell's set dimensions only.
    _series_by_cell,
    # 6 → 7: named baselines (store.baselines), each pointing to the run it names.
    """
    CREATE TABLE IF NOT EXISTS baselines (name TEXT PRIMARY KEY,
                                          run_id INTEGER NOT NULL REFERENCES runs(id),
                                          saved TEXT NOT NULL, note TEXT);
    """,
]
SCHEMA_VERSION = len(MIGRATIONS)


def _concurrent(conn: sqlite3.Connection) -> None:
    """Let several processes use one store: readers never block the writer
    (WAL), and a writer waits up to 30 s for another's transaction (busy
    timeout). A store that cannot switch (a read-only directory) keeps its
    rollback journal; the busy timeout still holds."""
    conn.execute("PRAGMA busy_timeout = 30000")
    try:
        conn.execute("PRAGMA journal_mode = WAL")
    except sqlite3.OperationalError:
        pass


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def _start_ticks(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def _owner() -> dict:
    """Who writes a run: enough to tell later whether that process still lives."""
    return {"pid": os.getpid(), "boot_id": _boot_id(), "start": _start_ticks(os.getpid())}


def _alive(owner: dict | None) -> bool:
    """Whether a ``running`` run's process still runs (runs without an owner are taken at their
    word)."""
    if not owner:
        return True
    return (owner.get("boot_id") == _boot_id()
            and _start_ticks(owner.get("pid", -1)) == owner.get("start"))


def default_path() -> Path:
    base = (os.environ.get("XDG_DATA_HOME")
            or os.path.join(os.path.expanduser("~"), ".local", "share"))
    return Path(base) / "cryptcost" / "results.db"


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def series_key(cell: Cell) -> str:
    """How a series is named in the store: its cell's set dimensions, as JSON (a dimension
    added later is unset in older series, and leaves their names as they were)."""
    return json.dumps({"kind": cell.kind, **{k: v for k, v in cell.fields().items()
                                             if v is not None}},
                      sort_keys=True, default=str)


class Store:
    """The result store. Open with :meth:`open`; every write commits."""

    def __init__(self, conn: sqlite3.Connection, path: Path):
        self.conn = conn
        self.path = path

    @classmethod
    def open(cls, path: str | os.PathLike | None = None, *, create: bool = True) -> "Store":
        path = Path(path) if path else default_path()
        if not create and not path.exists():
            raise UserError(f"no result store at {path}: run a benchmark first, or pass --db")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(path, timeout=30)
            conn.row_factory = sqlite3.Row
            conn.execute("PRAGMA foreign_keys = ON")
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version == 0 and conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]:
                raise UserError(f"{path} is an SQLite file but not a cryptcost store: pass "
                                "another --db")
        except sqlite3.DatabaseError as exc:
            raise UserError(f"cannot use {path} as the result store: {exc}; "
                            "pass another --db or move the file away") from None
        except OSError as exc:
            raise UserError(f"cannot create the result store at {path}: {exc.strerror}; "
                            "pass a writable --db") from None
        store = cls(conn, path)
        store.migrate(version)
        _concurrent(conn)                        # only once it is known to be ours, and not newer
        return store

    def migrate(self, version: int) -> None:
        """Bring the schema from ``version`` to :data:`SCHEMA_VERSION`, one step at a time."""
        if version > SCHEMA_VERSION:
            raise UserError(f"{self.path} was written by a newer cryptcost (schema {version} > "
                            f"{SCHEMA_VERSION}): upgrade cryptcost")
        try:
            for step in range(version, SCHEMA_VERSION):
                if callable(MIGRATIONS[step]):
                    with self.conn:
                        MIGRATIONS[step](self.conn)
                        self.conn.execute(f"PRAGMA user_version = {step + 1}")
                    continue
                with self.conn:
                    self.conn.executescript("BEGIN;" + MIGRATIONS[step]
                                            + f"PRAGMA user_version = {step + 1};COMMIT;")
        except sqlite3.DatabaseError as exc:
            raise UserError(f"cannot migrate {self.path}: {exc}; pass another --db") from None
        except sqlite3.OperationalError as exc:
            raise UserError(f"cannot write the result store {self.path}: {exc}; "
                            "pass a writable --db") from None

    def close(self) -> None:
        self.conn.close()

    # --- writing ------------------------------------------------------------------

    def _write(self, sql: str, args: tuple) -> int:
        try:
            with self.conn:
                rowid = self.conn.execute(sql, args).lastrowid
                faults.at("store")                    # inside the transaction: tests kill here
                return rowid
        except sqlite3.OperationalError as exc:
            raise UserError(f"cannot write the result store {self.path}: {exc}") from None

    def begin_run(self, command: str, host: dict, label: str | None = None) -> int:
        run_id = self._write("INSERT INTO runs(started, command, host, status, label) "
                             "VALUES (?,?,?,?,?)",
                             (now(), command, json.dumps(host, default=str), "running", label))
        self.update_extra(run_id, owner=_owner())
        return run_id

    def update_extra(self, run_id: int, **extra) -> None:
        """Merge ``extra`` into the run's extra record (skipped stacks, suite, model)."""
        current = self.run(run_id).extra
        self._write("UPDATE runs SET extra = ? WHERE id = ?",
                    (json.dumps({**current, **extra}, default=str), run_id))

    def resume_run(self, run_id: int) -> None:
        """Run ``run_id`` running again, by this process (``run --resume``)."""
        self._write("UPDATE runs SET status = 'running', finished = NULL WHERE id = ?", (run_id,))
        self.update_extra(run_id, owner=_owner())

    def drop_part(self, run_id: int, label: str, ciphers: bool = False,
                  cells: frozenset[Cell] = frozenset()) -> int:
        """Drop what run ``run_id`` holds of part ``label`` before a resumed run measures it
        again: its results and samples (their cells name the part), and with ``ciphers`` every
        cipher series not whole (a cipher cell names no part; a whole one is not measured
        again), and the cipher series of ``cells`` whole or not (``run --again``: the part's
        cipher table measured anew). How many results were dropped."""
        again = {series_key(c) for c in cells}
        rows = self._query("SELECT id, kind, series, data FROM results WHERE run_id = ?",
                           (run_id,))

        def of_part(series: str | None) -> bool:
            try:
                return json.loads(series or "{}").get("part") == label
            except ValueError:
                return False

        def cut(row) -> bool:
            return row["series"] in again or ciphers and row["kind"] == "cipher" and bool(
                json.loads(row["data"]).get("incomplete"))
        drop = [r["id"] for r in rows if of_part(r["series"]) or cut(r)]
        whole_ciphers = {r["series"] for r in rows if r["kind"] == "cipher" and r["id"] not in drop}
        samples = [r["id"] for r in self._query(
            "SELECT id, kind, series FROM samples WHERE run_id = ?", (run_id,))
            if of_part(r["series"]) or r["series"] in again
            or (ciphers and r["kind"] == "cipher" and r["series"] not in whole_ciphers)]
        with self.conn:
            for table, ids in (("results", drop), ("samples", samples)):
                for i in range(0, len(ids), 500):
                    chunk = ids[i:i + 500]
                    self.conn.execute(f"DELETE FROM {table} WHERE id IN "
                                      f"({','.join('?' * len(chunk))})", chunk)
        return len(drop)

    def finish_run(self, run_id: int, status: str) -> None:
        self._write("UPDATE runs SET status = ?, finished = ? WHERE id = ?",
                    (status, now(), run_id))

    def add_sample(self, run_id: int, cell: Cell, index: int, sample: Sample) -> None:
        self._write("INSERT INTO samples(run_id, kind, series, idx, data) VALUES (?,?,?,?,?)",
                    (run_id, cell.kind, series_key(cell), index, json.dumps(sample.to_dict())))

    def add_result(self, run_id: int, result: Result) -> None:
        self._write("INSERT INTO results(run_id, kind, series, data) VALUES (?,?,?,?)",
                    (run_id, result.kind, series_key(result.cell),
                     json.dumps(result.to_dict(), default=str)))

    def import_run(self, data: dict) -> int:
        """Add a run exported with ``report --format json`` (from any host); its new id."""
        if data.get("format") != "cryptcost-run" or "run" not in data or "results" not in data:
            raise UserError("not a cryptcost run export (want the output of 'cryptcost report "
                            "--format json')")
        r = data["run"]
        add_skip_facts(r.setdefault("extra", {}))       # an export from an older cryptcost
        run_id = self._write("INSERT INTO runs(started, command, host, status, finished, label, "
                             "extra) VALUES (?,?,?,?,?,?,?)",
                             (r.get("started", now()), r.get("command", "import"),
                              json.dumps(data.get("host", {})),
                              r.get("status", "complete"), r.get("finished"), r.get("label"),
                              json.dumps(r.get("extra", {}))))
        for res in data["results"]:
            add_facts(res)                    # an export from an older cryptcost
            self._write("INSERT INTO results(run_id, kind, series, data) VALUES (?,?,?,?)",
                        (run_id, res.get("kind", "?"), series_key(Cell.of(res)),
                         json.dumps(res)))
        for s in data.get("samples") or []:   # show --samples, a baseline's export
            rest = {k: v for k, v in s.items() if k not in ("kind", "series", "index")}
            self._write("INSERT INTO samples(run_id, kind, series, idx, data) VALUES (?,?,?,?,?)",
                        (run_id, s.get("kind", "?"), series_key(Cell.of(s.get("series") or {})),
                         s.get("index", 0), json.dumps(rest)))
        return run_id

    # --- reading ------------------------------------------------------------------

    def _query(self, sql: str, args: tuple = ()) -> list[sqlite3.Row]:
        try:
            return self.conn.execute(sql, args).fetchall()
        except sqlite3.DatabaseError as exc:
            raise UserError(f"cannot read the result store {self.path}: {exc}") from None

    def runs(self) -> list[Run]:
        return [self._run(r) for r in self._query("SELECT * FROM runs ORDER BY id")]

    def run(self, run_id: int | str) -> Run:
        """A run by id; ``latest`` (or ``-1``) is the newest."""
        if str(run_id) in ("latest", "-1"):
            rows = self._query("SELECT * FROM runs ORDER BY id DESC LIMIT 1")
        else:
            try:
                rows = self._query("SELECT * FROM runs WHERE id = ?", (int(run_id),))
            except ValueError:
                raise UserError(f"run id must be a number or 'latest', not {run_id!r}") from None
        if not rows:
            raise UserError(f"no run {run_id} in {self.path}: see 'cryptcost list'")
        return self._run(rows[0])

    @staticmethod
    def _run(row: sqlite3.Row) -> Run:
        extra = json.loads(row["extra"] or "{}")
        status = row["status"]
        if status == "running" and not _alive(extra.get("owner")):
            # its process is gone without finishing it (kill -9, a crash)
            status = "killed"
        return Run(id=row["id"], started=row["started"], command=row["command"],
                   host=json.loads(row["host"]), status=status, finished=row["finished"],
                   label=row["label"], extra=extra)

    def results(self, run_id: int, kind: str | None = None) -> list[dict]:
        sql, args = "SELECT data FROM results WHERE run_id = ?", (run_id,)
        if kind:
            sql, args = sql + " AND kind = ?", (run_id, kind)
        return [json.loads(r["data"]) for r in self._query(sql + " ORDER BY id", args)]

    def samples(self, run_id: int) -> list[dict]:
        rows = self._query("SELECT kind, series, idx, data FROM samples WHERE run_id = "
                           "? ORDER BY id",
                           (run_id,))
        return [{"kind": r["kind"], "series": json.loads(r["series"]), "index": r["idx"],
                 **json.loads(r["data"])} for r in rows]

    def counts(self, run_id: int) -> tuple[int, int]:
        res = self._query("SELECT count(*) FROM results WHERE run_id = ?", (run_id,))[0][0]
        smp = self._query("SELECT count(*) FROM samples WHERE run_id = ?", (run_id,))[0][0]
        return res, smp
