"""Named baselines in the store: saved, listed, refused when the name is bad or taken, removed,
and an exported baseline imported under its name with its samples; the gate's command line
gives one line and exit 2 on bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from cryptcost.errors import UserError
from cryptcost.model import Cell, Sample
from cryptcost.store import baselines
from cryptcost.store.db import Store

RUN = Path(__file__).resolve().parents[1] / "fixtures" / "runs" / "quick-vm.json"


@pytest.fixture
def store(tmp_path):
    s = Store.open(tmp_path / "r.db")
    data = json.loads(RUN.read_text())
    s.import_run(data)
    s.import_run(data)
    return s


def test_a_baseline_is_saved_listed_shown_and_removed(store):
    saved = baselines.save(store, "nightly", 1, note="image 2026-11")
    assert baselines.get(store, "nightly") == saved and saved.run_id == 1
    with pytest.raises(UserError, match="already names run 1"):
        baselines.save(store, "nightly", 2)
    baselines.save(store, "nightly", 2, replace=True)
    assert [b.run_id for b in baselines.every(store)] == [2]
    baselines.remove(store, "nightly")
    with pytest.raises(UserError, match="no baseline named 'nightly'"):
        baselines.get(store, "nightly")


@pytest.mark.parametrize("name", ["latest", "1", "-x", "a b", "x" * 65, ""])
def test_a_bad_name_is_refused(store, name):
    with pytest.raises(UserError, match="bad baseline name"):
        baselines.save(store, name, 1)


def cli(tmp_path, *args):
    return subprocess.run([sys.executable, "-m", "cryptcost", "--db", str(tmp_path / "r.db"),
                           *args], capture_output=True, text=True, timeout=120)


def test_an_exported_baseline_imports_with_its_name_and_samples(tmp_path, store):
    store.add_sample(1, Cell.of(store.results(1)[0]), 0, Sample(1.0, 1.0))
    baselines.save(store, "nightly", 1)
    done = cli(tmp_path, "baseline", "export", "nightly", "-o", str(tmp_path / "n.json"))
    assert done.returncode == 0, done.stderr
    other = tmp_path / "other"
    other.mkdir()
    done = cli(other, "import", str(tmp_path / "n.json"))
    assert done.returncode == 0 and "baseline nightly" in done.stdout, done.stderr
    there = Store.open(other / "r.db")
    got = baselines.get(there, "nightly")
    assert len(there.results(got.run_id)) == len(store.results(1))
    assert len(there.samples(got.run_id)) == 1
    again = cli(other, "import", str(tmp_path / "n.json"))
    assert again.returncode == 2 and "pass --replace" in again.stderr
    assert len(again.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("args, said", [
    (("check", "--against", "nope"), "no baseline named 'nope'"),
    (("check", "--against", "nightly", "1"), "is baseline nightly itself"),
    (("check", "--against", "nightly", "--threshold", "x"), "bad --threshold"),
    (("baseline", "save", "2bad"), "bad baseline name"),
    (("baseline", "show", "nope"), "no baseline named"),
])
def test_the_gate_refuses_bad_input_in_one_line(tmp_path, store, args, said):
    baselines.save(store, "nightly", 1)
    done = cli(tmp_path, *args)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("error: ") and said in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
