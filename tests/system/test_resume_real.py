"""``cryptcost run --resume``, for real and as root: a run of a real stack stopped by SIGTERM in
the middle of its storage comparison is resumed into the same run, which ends complete with
every series whole, its cut series dropped, its whole cipher cells not measured again, and
nothing left behind. A minute of two real sittings: in CI's second step with the fault matrix
(``make test`` holds the same mechanism to a fake executor and a real store, in
tests/unit/test_resume.py)."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from tests.conftest import assert_bad_input
from tests.system.conftest import leftovers, need_root
from tests.system.test_faults import STACK, _available, _cryptcost, _env, _leaked, _tmpdirs

PLAN = f"""
network = false

[ciphers]
engines = ["openssl"]
algorithms = ["aes-128-gcm"]
sizes = [4096]

[storage]
stacks = ["{STACK}"]
workloads = ["seq-1m"]
size = "64M"

[policy]
min_samples = 2
max_samples = 2
warmup = 0
"""


def _storage_samples(db) -> int:
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as conn:
            return conn.execute("SELECT count(*) FROM samples WHERE kind = 'storage'").fetchone()[0]
    except sqlite3.Error:                   # not made yet
        return 0


@pytest.mark.root
@pytest.mark.fault_matrix
def test_a_run_stopped_in_its_storage_comparison_is_resumed_whole(tmp_path):
    need_root()
    _available(STACK)
    workdir = tmp_path / "cwd"                  # where _cryptcost runs cryptcost from
    workdir.mkdir()
    plan = tmp_path / "plan.toml"
    plan.write_text(PLAN)
    before, dirs = set(leftovers([])), _tmpdirs()
    db = tmp_path / "data" / "cryptcost" / "results.db"
    first = subprocess.Popen([sys.executable, "-m", "cryptcost", "run", "--plan", str(plan),
                              "--no-report"], env=_env(tmp_path), cwd=workdir,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while _storage_samples(db) < 1 and first.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    first.send_signal(signal.SIGTERM)
    _, err = first.communicate(timeout=300)
    assert first.returncode == 130, err[-2000:]
    cut = json.loads(_cryptcost(tmp_path, "show", "1", "--json").stdout)
    assert cut["run"]["status"] == "interrupted"
    ciphers = [r for r in cut["results"] if r["kind"] == "cipher"]
    held = [r for r in cut["results"] if r["kind"] == "storage" and r.get("incomplete")]
    assert ciphers and not any(r.get("incomplete") for r in ciphers), ciphers
    assert held, "the signal found no storage series to cut"

    again = _cryptcost(tmp_path, "run", "--plan", str(plan), "--resume", "1", "--no-report")
    assert again.returncode == 0, again.stderr[-3000:]
    assert "resuming run 1" in again.stderr and \
        f"{len(ciphers)} cipher cell(s) held whole are not measured again" in again.stderr
    assert "(sitting 2)" in again.stdout
    whole = json.loads(_cryptcost(tmp_path, "show", "1", "--json", "--samples").stdout)
    run = whole["run"]
    assert run["status"] == "complete"
    results = whole["results"]
    assert not any(r.get("incomplete") for r in results), [r for r in results
                                                           if r.get("incomplete")]
    # the cipher cells are the first sitting's very results; the storage ones are new and whole
    assert [r for r in results if r["kind"] == "cipher"] == ciphers
    storage = [r for r in results if r["kind"] == "storage"]
    assert storage and all(r["stop_reason"] != "interrupted" for r in storage)
    keys = [(r["stack"], r.get("op"), r.get("accel")) for r in storage]
    assert len(keys) == len(set(keys)), keys
    # every series' samples come from one sitting: no index twice
    idx = [(json.dumps(s["series"], sort_keys=True), s["index"]) for s in whole["samples"]]
    assert len(idx) == len(set(idx))
    sittings = run["extra"]["sittings"]
    assert len(sittings) == 2 and sittings[1]["parts"] == ["custom"]
    assert sittings[1]["dropped_results"] == {"custom": len(held)}
    assert sittings[0]["wall_seconds"] > 0 and run["extra"]["part_seconds"]["custom"] > 0
    assert _leaked(tmp_path, before, dirs) == []
    # the run is whole now: resuming it again is refused, as is a run of another plan
    assert_bad_input(_cryptcost(tmp_path, "run", "--plan", str(plan), "--resume", "1",
                                "--no-report"))
    assert_bad_input(_cryptcost(tmp_path, "run", "--suite", "quick", "--resume", "1",
                                "--no-report"))
