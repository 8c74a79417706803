"""The fleet report: several stored runs side by side, the differences that matter named in
sentences, and a recommendation per host where they differ (a real quick-suite run kept as a
fixture, and the same run as a host without AES-NI whose fscrypt costs more)."""

import csv
import io
import json
import re

import pytest

from cryptcost.cli import main
from cryptcost.report.fleet import SPREAD, build, sentences
from cryptcost.store.db import Store
from tests.conftest import FIXTURES

RUN = FIXTURES / "runs" / "quick-vm.json"


def _no_aes(data: dict) -> dict:
    """The same run on a host without AES-NI, on another kernel, whose fscrypt costs 30 points
    more (significant) and whose every other figure is the same."""
    host = json.loads(json.dumps(data["host"]))
    host["hostname"] = "old-box"
    host["cpu"]["flags"]["aes"] = False
    host["kernel"]["release"] = "5.10.0-old"
    results = []
    for r in data["results"]:
        if (r.get("stack") or "").startswith("fscrypt") and r.get("overhead") is not None:
            r = dict(r, overhead=r["overhead"] + 0.30, overhead_significant=True)
        results.append(r)
    return {**data, "host": host, "results": results}


@pytest.fixture
def fleet(tmp_path):
    data = json.loads(RUN.read_text())
    db = tmp_path / "f.db"
    store = Store.open(db)
    a = store.import_run(data)
    b = store.import_run(_no_aes(data))
    return str(db), store, a, b


def _members(store, a, b):
    from cryptcost.cli.report import members
    return members(store, [a, b])


def test_the_difference_that_matters_is_named_with_the_stacks_it_moved(fleet):
    _, store, a, b = fleet
    doc = build(_members(store, a, b))
    first = doc["columns"][0]["label"]
    assert [c["label"] for c in doc["columns"]] == [first, "old-box"]
    [said] = doc["differences"]
    assert said.startswith(f"old-box has no AES-NI ({first} has it), kernel 5.10.0-old"), said
    assert re.search(r"fscrypt:aes-256-xts seq \w+ [\d.]+ [KM]iB costs [\d.]+ % there, "
                     rf"[\d.]+ % on {re.escape(first)}", said), said
    assert "plain" not in said and "gocryptfs" not in said        # unchanged stacks are not named
    rows = [r for r in doc["rows"] if set(r["hosts"]) == {first, "old-box"}]
    assert len(rows) == len(doc["rows"]) > 10                      # every result on both hosts
    assert doc["environment"]["old-box"][0]["what"] == "CPU flag aes"


def test_hosts_alike_are_said_to_be_alike_and_a_gap_without_a_cause_is_flagged(fleet):
    _, store, a, b = fleet
    one = _members(store, a, a)
    doc = build(one)
    assert doc["columns"][1]["label"].endswith(f"(run {a})")       # one host twice: told apart
    assert "is like" in doc["differences"][0] and "no stack's overhead" in doc["differences"][0]
    assert all(rec["same"] for rec in doc["recommendations"]) and doc["recommendations"]
    # the same environment, yet one stack's overhead moved past SPREAD: said, with a warning
    rows = [{"label": "x seq read", "hosts": {
        one[0].label: {"overhead": 0.02, "significant": True},
        one[1].label: {"overhead": 0.02 + SPREAD + 0.01, "significant": False}}}]
    [said] = sentences(one, rows, {one[1].label: []})
    assert "differs from" in said and "in nothing cryptcost records" in said and "rerun" in said
    rows[0]["hosts"][one[1].label]["overhead"] = 0.02 + SPREAD - 0.01
    assert "is like" in sentences(one, rows, {one[1].label: []})[0]


def test_every_format_of_the_fleet_report_holds_both_hosts(fleet, capsys, tmp_path):
    db, store, a, b = fleet
    assert main(["--db", db, "report", str(a), str(b), "--format", "md"]) == 0
    md = capsys.readouterr().out
    for heading in ("## Hosts", "## What differs between the hosts", "## Recommendation per host",
                    "## The hosts side by side", "## Environment differences"):
        assert heading in md
    assert "old-box has no AES-NI" in md and "| CPU flag aes | True | False |" in md
    html = tmp_path / "fleet.html"
    assert main(["--db", db, "report", str(a), str(b), "--format", "html", "-o", str(html)]) == 0
    text = html.read_text()
    svgs = re.findall(r"<svg\b.*?</svg>", text, re.S)
    assert len(svgs) == 1 and ("<rect" in svgs[0] or "<path" in svgs[0])
    assert "old-box" in svgs[0] and "<script" not in text and "Overhead per host" in text
    assert main(["--db", db, "report", str(a), str(b), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["format"] == "cryptcost-fleet-report" and len(doc["columns"]) == 2
    assert main(["--db", db, "report", str(a), str(b), "--format", "csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert {r["member"] for r in rows} == {doc["columns"][0]["label"], "old-box"}
    assert {r["run"] for r in rows} == {str(a), str(b)}
    assert main(["--db", db, "report", str(a), str(b)]) == 0
    printed = " ".join(capsys.readouterr().out.split())
    assert "The hosts side by side" in printed and "• old-box has no AES-NI" in printed
    assert main(["--db", db, "report", str(a), str(b), "--link", "1GbE"]) == 2
    assert "model one run, not a fleet" in capsys.readouterr().err
    assert main(["--db", db, "report", str(a), "999"]) == 2


def test_compare_takes_each_of_several_runs_against_the_first(fleet, capsys):
    db, store, a, b = fleet
    assert main(["--db", db, "compare", str(a), str(b), str(a), "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert [(x["a"], x["b"]) for x in got] == [(a, b), (a, a)]
    moved = [r for r in got[0]["results"] if r["result"].startswith("fscrypt")]
    assert moved and not any(r["significant"] for r in got[1]["results"])
    assert [d["what"] for d in got[0]["environment"]][:2] == ["hostname", "CPU flag aes"]
    assert main(["--db", db, "compare", str(a), str(b)]) == 0
    assert f"run {b} (old-box" in capsys.readouterr().out
