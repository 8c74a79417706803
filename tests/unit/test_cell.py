"""One identity for a measurement: a result of each kind, built by its runner,
is stored, paired, compared and analysed on the same :class:`Cell`."""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

import pytest

from cryptcost import stats
from cryptcost.analysis import analyze
from cryptcost.links import parse_link
from cryptcost.media import RamMedium
from cryptcost.model import Cell, CpuSplit, Sample
from cryptcost.record import Stored
from cryptcost.report import compare
from cryptcost.runner import network, storage
from cryptcost.runner.ciphers import CipherPlan, run_ciphers
from cryptcost.runner.ciphers.executor import FakeExecutor
from cryptcost.runner.network.steps import NetInstance
from cryptcost.runner.core.scheduler import Series
from cryptcost.runner.core.sink import StoreSink
from cryptcost.stacks import get
from cryptcost.store.db import MIGRATIONS, Store, series_key
from cryptcost.workloads import network as netwl, storage as wl

SRC = Path(__file__).resolve().parents[2] / "src" / "cryptcost"


def _series(values, moved=1 << 30):
    return Series(
        [
            Sample(v, moved / v, moved, CpuSplit(user=0.5, system=0.5), {"cpu_s_per_gib": 1.0})
            for v in values
        ],
        stop_reason="ci_target_met",
    )


def _storage_results():
    """fscrypt and its two baselines on one cell, through the storage runner's own functions,
    the series keyed as the run keys them."""
    plan = storage.StoragePlan(stacks=["fscrypt"], medium=RamMedium(), part="r1", cpus=1)
    op = wl.Op("seq", "write", 1 << 20)
    insts = [
        storage.Instance(get(name)(variant), label, role)
        for name, variant, label, role in (
            ("fscrypt", None, get("fscrypt")().label, "measured"),
            ("plain", "encrypt-feature", "plain:encrypt-feature", "baseline"),
            ("plain", None, "plain", "baseline"),
        )
    ]
    values = {"plain": [1000e6, 1010e6, 990e6], "plain:encrypt-feature": [900e6, 905e6, 895e6]}
    series = {
        storage._cell(i, op, plan): _series(values.get(i.label, [600e6, 610e6, 590e6]))
        for i in insts
    }
    return [storage._result(i, op, series[storage._cell(i, op, plan)], series, plan,
                            storage.Conditions()) for i in insts]


def _network_results():
    plan = network.NetworkPlan(stacks=["wireguard"])
    op = netwl.NetOp("send", "stream")
    link = parse_link("netns")
    insts = [NetInstance(get("wireguard")(), "wireguard", "measured", link),
             NetInstance(get("tcp")(), "tcp", "baseline", link)]
    series = {
        network._cell(i, op, plan): _series(
            [3e9, 3.1e9, 2.9e9] if i.label == "tcp" else [1e9, 1.01e9, 0.99e9]
        )
        for i in insts
    }
    return [
        network._result(i, op, series[network._cell(i, op, plan)], series, plan, None, 0.03)
        for i in insts
    ]


def test_one_definition_of_a_cell():
    """The identity is a dataclass in model.py; nothing else lists its fields or builds a key of
    its own."""
    sources = {p: p.read_text() for p in SRC.rglob("*.py")}
    assert [p.name for p, text in sources.items() if re.search(r"^class Cell\b", text, re.M)] == [
        "model.py"
    ]
    for p, text in sources.items():
        assert not re.search(
            r"^(CELL|IDENTITY)\s*=|def (cell_key|series_key)\(.*dict|def _cell\(r", text, re.M
        ), p
        # a tuple naming three of the cell's dimensions in a row is a copy of it
        assert not re.search(r'"block_bytes",\s*"iodepth",\s*"(cpus|medium|part)"', text), p


def test_each_kind_is_stored_paired_compared_and_analysed_on_its_cell(tmp_path):
    store = Store.open(tmp_path / "r.db")
    run = store.begin_run("run", {"cpu": {}})
    sink = StoreSink(store, run)
    ciphers = run_ciphers(
        CipherPlan(engines=("openssl",), algorithms=("aes-256-gcm",), accel=(True, False)),
        FakeExecutor(), stats.Policy(min_samples=3, max_samples=3, warmup=0), sink=sink,
    ).results
    built = ciphers + _storage_results() + _network_results()
    for r in built[len(ciphers):]:
        for i, s in enumerate(r.samples):
            sink.sample(r.cell, i, s)
        sink.result(r)
    assert {r.kind for r in built} == {"cipher", "storage", "network"}
    stored = store.results(run)
    assert len(stored) == len(built)
    rows = store.conn.execute(
        "SELECT series FROM results WHERE run_id = ? ORDER BY id", (run,)
    ).fetchall()
    samples = {
        row[0] for row in store.conn.execute("SELECT series FROM samples WHERE run_id = ?", (run,))
    }
    for r, d, (series,) in zip(built, stored, rows):
        assert Cell.of(d) == r.cell, d  # the JSON reads back as the same cell
        assert (
            series == series_key(r.cell) and series in samples
        )  # a result and its samples: one name
        assert compare.key(Stored.of(d)) == r.cell.but(
            part=None
        )  # across runs: the same cell, whatever the part
        assert Stored.of(d).paired() == r.cell.but(
            accel=None
        )  # paired in the analysis: the same cell
        assert "params" not in json.loads(series)            # what describes a stack is no identity
    fscrypt, twin, plain = (d for d in stored if d["kind"] == "storage")
    # paired in the runner on the cell: against each baseline's same cell, no other
    assert fscrypt["baseline"] == "plain:encrypt-feature" and set(fscrypt["vs"]) == {
        "plain:encrypt-feature",
        "plain",
    }
    assert fscrypt["overhead"] == pytest.approx(1 - 600 / 900, abs=0.01)
    wg = next(d for d in stored if d.get("stack") == "wireguard")
    assert wg["baseline"] == "tcp" and wg["overhead"] == pytest.approx(1 - 1 / 3, abs=0.01)
    # the analysis finds the baselines by the same cell: fscrypt's split runs through its twin to
    # plain
    a = analyze(stored, {"cpu": {}})
    [split] = a.split
    assert (split.stack, split.twin, split.reference) == (
        fscrypt["stack"], "plain:encrypt-feature", "plain",
    )
    # and compare pairs a run with itself result for result, every kind
    assert len({compare.key(Stored.of(d)) for d in stored}) == len(stored)
    flows = [d for d in stored if d["kind"] != "cipher"]  # the analysis pairs stacks' results
    assert len({Stored.of(d).paired() for d in flows}) == len(flows)
    rows = compare.compare_runs(stored, stored)
    assert len(rows) == len(stored) and all(not x["significant"] for x in rows)
    assert any(x["result"] == "wireguard send" for x in rows), [x["result"] for x in rows]
    assert any(x["result"].startswith(f"{fscrypt['stack']} seq write 1 MiB on 1 CPU") for x in rows)


def test_a_cell_reads_only_its_kinds_dimensions():
    """A storage result's JSON carries ``engine`` (fio): how it was measured, not what."""
    d = {
        "kind": "storage", "stack": "plain", "workload": "seq", "op": "read", "engine": "fio",
        "block_bytes": 4096, "iodepth": 1, "medium": "ram", "fs": "ext4", "size": 1 << 28,
        "accel": True,
    }
    c = Cell.of(d)
    assert (
        c.engine is None
        and c.stack == "plain"
        and c.fields() == {k: v for k, v in d.items() if k not in ("kind", "engine")}
    )
    assert Cell.of({"kind": "cipher", "engine": "openssl", "stack": "x"}).stack is None
    assert sorted([c.but(block_bytes=None), c], key=Cell.sort_key) == [c, c.but(block_bytes=None)]


def test_older_series_are_renamed_by_their_cell(tmp_path):
    """Schema 4 named a series by everything its runner described, params included;
    migrated, an older run's series read as a new one's do."""
    path = tmp_path / "v4.db"
    conn = sqlite3.connect(path)
    for step in MIGRATIONS[:4]:
        conn.executescript(step) if isinstance(step, str) else step(conn)
    conn.execute("PRAGMA user_version = 4")
    described = {
        "stack": "plain", "accel": True, "params": {"facts": {"role": "baseline"}}, "medium": "ram",
        "fs": "ext4", "workload": "seq", "op": "read", "block_bytes": 4096, "iodepth": 1,
        "size": 1 << 28,
    }
    conn.execute("INSERT INTO runs(started, command, host) VALUES ('2026-01-01', 'storage', '{}')")
    conn.execute("INSERT INTO results(run_id, kind, data, series) VALUES (1, 'storage', ?, ?)",
                 (json.dumps({"kind": "storage", **described, "median_bytes_per_s": 1e9}),
                  json.dumps(described, sort_keys=True)))
    conn.execute(
        "INSERT INTO samples(run_id, kind, series, idx, data) VALUES (1, 'storage', ?, 0, '{}')",
        (json.dumps(described, sort_keys=True),),
    )
    conn.commit()
    conn.close()
    store = Store.open(path)
    want = series_key(Cell.of({"kind": "storage", **described}))
    assert [r[0] for r in store.conn.execute("SELECT series FROM results")] == [want]
    assert [s["series"] for s in store.samples(1)] == [json.loads(want)]
