"""The result store: round trip, step-wise migration, bad files."""

import json
import sqlite3

import pytest

from cryptcost.errors import UserError
from cryptcost.model import Cell, CpuSplit, Result, Sample
from cryptcost.stats import summarize
from cryptcost.store.db import MIGRATIONS, SCHEMA_VERSION, Store


def _result():
    samples = (Sample(1e9, 1.0, 10**9, CpuSplit(user=0.5, system=0.25)), Sample(1.1e9, 1.0))
    return Result(
        Cell.cipher("openssl", "aes-256-xts", 4096, 1, True), summarize([s.value for s in samples]),
        "ci_target_met", samples=samples, metrics={"accel_verified": None}, notes=("a note",),
    )


def test_round_trip(tmp_path):
    store = Store.open(tmp_path / "r.db")
    run = store.begin_run("ciphers", {"hostname": "h", "cpu": {"model": "x"}})
    r = _result()
    for i, s in enumerate(r.samples):
        store.add_sample(run, r.cell, i, s)
    store.add_result(run, r)
    store.finish_run(run, "complete")
    again = Store.open(tmp_path / "r.db")
    got = again.run(run)
    assert got.status == "complete" and got.host["hostname"] == "h"
    [res] = again.results(run)
    assert res["algorithm"] == "aes-256-xts" and res["samples"] == 2 and res["notes"] == ["a note"]
    samples = again.samples(run)
    assert [s["index"] for s in samples] == [0, 1]
    assert Sample.from_dict(samples[0]).cpu.busy == pytest.approx(0.75)
    assert again.run("latest").id == run


def test_migration_from_the_first_schema(tmp_path):
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path)
    conn.executescript(MIGRATIONS[0] + "PRAGMA user_version = 1;")
    conn.execute("INSERT INTO runs(started, command, host) VALUES ('2026-01-01', 'ciphers', '{}')")
    conn.execute("INSERT INTO results(run_id, kind, data) VALUES (1, 'cipher', ?)",
                 (json.dumps({"algorithm": "aes-128-gcm"}),))
    conn.commit()
    conn.close()
    store = Store.open(path)
    assert store.conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    run = store.run(1)
    assert run.status == "complete"                       # the default the migration gives old runs
    assert store.results(1) == [{"algorithm": "aes-128-gcm"}]
    assert store.samples(1) == []


def test_corrupt_file_is_a_user_error(tmp_path):
    bad = tmp_path / "bad.db"
    bad.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(UserError, match="cannot use"):
        Store.open(bad)


def test_foreign_sqlite_file_is_refused(tmp_path):
    other = tmp_path / "other.db"
    sqlite3.connect(other).execute("CREATE TABLE t(x)").connection.commit()
    with pytest.raises(UserError, match="not a cryptcost store"):
        Store.open(other)


def test_newer_schema_is_refused(tmp_path):
    path = tmp_path / "new.db"
    Store.open(path).close()
    sqlite3.connect(path).execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    c = sqlite3.connect(path)
    c.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    c.commit()
    with pytest.raises(UserError, match="newer cryptcost"):
        Store.open(path)


def test_unknown_run(tmp_path):
    store = Store.open(tmp_path / "r.db")
    with pytest.raises(UserError, match="no run 42"):
        store.run(42)
    with pytest.raises(UserError, match="must be a number"):
        store.run("abc")
