"""At least thirty kinds of bad input — plans, flags, run ids, stores — each
gives one line, 'error: …', exit code 2, and no traceback."""

import json

import pytest

from tests.conftest import assert_bad_input as _assert_user_error

PLANS = {
    "unknown table": ("[colours]\nred = 1\n", "unknown table [colours]"),
    "unknown key": ("[storage]\ncolour = 'red'\n", "storage.colour"),
    "sizes not a list": ("[ciphers]\nsizes = 4096\n", "ciphers.sizes"),
    "unknown algorithm": (
        "[ciphers]\nalgorithms = ['rot13']\n",
        "ciphers.algorithms has 'rot13'; allowed:",
    ),
    "unknown workload": (
        "[storage]\nworkloads = ['tpcc']\n",
        "storage.workloads has 'tpcc'; allowed:",
    ),
    "unknown filesystem": ("[storage]\nfs = 'ntfs'\n", "storage.fs has 'ntfs'; allowed: ext4"),
    "zero samples": ("[policy]\nmin_samples = 0\n", "policy.min_samples"),
    "ci target too big": ("[policy]\nci_target = 150.0\n", "policy.ci_target"),
    "not toml": ("[storage\nstacks = \n", "not valid TOML"),
    "unknown suite": ("[run]\nsuite = 'huge'\n", "run.suite has 'huge'; allowed: quick"),
    "unknown dimension to keep": ("[run]\nkeep = ['storage.stacks']\n",
                                  "run.keep has 'storage.stacks'; allowed: ciphers.sizes"),
    "zero threads": ("[ciphers]\nthreads = [0]\n", "thread and cpu counts"),
    "network zero cpus": ("[network]\nstacks = ['tcp']\ncpus = [0]\n", "thread and cpu counts"),
    "storage more cpus than this machine": (
        "[storage]\nstacks = ['plain']\ncpus = [1, 999]\n",
        "cpus 999: this process may use",
    ),
    "bad size": ("[storage]\nsize = 'lots'\n", "storage.size"),
    "unknown stack": ("[storage]\nstacks = ['veracrypt9']\n", "unknown stack 'veracrypt9'"),
    "unknown medium": ("[storage]\nstacks = ['plain']\nmedium = 'tape'\n", "bad --medium 'tape'"),
    "table of wrong type": ("ciphers = 'yes'\n", "[ciphers] must be a table"),
    "empty list": ("[ciphers]\nengines = []\n", "ciphers.engines must be a non-empty list"),
    "bad accel": ("[ciphers]\naccel = ['sometimes']\n", "ciphers.accel has 'sometimes'"),
    "seconds zero": ("[ciphers]\nseconds = 0\n", "ciphers.seconds"),
    "bad link": ("[model]\nlink = '7 pigeons'\n", "bad --link"),
    "workloads sharing a cell": (
        "[storage]\nstacks = ['plain']\nworkloads = ['seq-1m', 'seq-quick']\n",
        "workloads seq-1m and seq-quick both measure seq write 1 MiB",
    ),
}


@pytest.mark.parametrize("name", list(PLANS))
def test_malformed_plan(cli, tmp_path, name):
    text, words = PLANS[name]
    plan = tmp_path / "plan.toml"
    plan.write_text(text)
    proc = cli("run", "--plan", str(plan), "--dry-run")
    _assert_user_error(proc)
    assert words in proc.stderr, proc.stderr


FLAGS = {
    "unknown suite": ["run", "--suite", "huge"],
    "missing plan file": ["run", "--plan", "/nonexistent/plan.toml"],
    "bad device speed": ["run", "--device-speed", "fast", "--dry-run"],
    "bad link": ["run", "--link", "7GbE", "--dry-run"],
    "report into a missing directory": ["run", "-o", "/nonexistent/dir/r.html", "--dry-run"],
    "storage unknown medium": ["storage", "--medium", "tape"],
    "storage size too small": ["storage", "--size", "10K"],
    "storage unknown workload": ["storage", "--workloads", "tpcc"],
    "storage workloads sharing a cell": ["storage", "--workloads", "quick,seq"],
    "storage unknown stack": ["storage", "--stacks", "veracrypt9"],
    "storage unknown variant": ["storage", "--stacks", "gocryptfs:rot13"],
    "storage unknown filesystem": ["storage", "--fs", "ntfs"],
    "device without confirmation": ["storage", "--stacks", "plain", "--medium", "device:/dev/sdz9"],
    "report unknown format": ["report", "1", "--format", "pdf"],
    "report bad device speed": ["report", "1", "--device-speed", "warp"],
    "cleanup unknown flag": ["cleanup", "--bogus"],
    "compare without runs": ["compare", "1"],
    "network unknown stack": ["network", "--stacks", "telnet"],
    "network unknown link": ["network", "--stacks", "tcp", "--link", "carrier-pigeon"],
    "network peer link": ["network", "--stacks", "tcp", "--link", "peer:-oProxyCommand=x"],
    "network bad mtu": ["network", "--stacks", "tcp", "--mtu", "12"],
    "network unknown workload": ["network", "--stacks", "tcp", "--workloads", "ftp"],
    "storage bad cpus": ["storage", "--stacks", "plain", "--cpus", "0"],
    "storage throttled without a rate": [
        "storage", "--stacks", "plain", "--medium", "throttled:fast",
    ],
    "storage more cpus than the machine": ["storage", "--stacks", "plain", "--cpus", "1,999"],
    "network cpus not a number": ["network", "--stacks", "tcp", "--cpus", "two"],
    "storage bad accel": ["storage", "--stacks", "plain", "--accel", "maybe"],
    "storage size not a size": ["storage", "--stacks", "plain", "--size", "huge"],
    "vm without a command": ["vm"],
    "vm inside vm": ["vm", "--", "vm", "--", "probe"],
}


@pytest.mark.parametrize("name", list(FLAGS))
def test_malformed_flags(cli, name):
    _assert_user_error(cli(*FLAGS[name]))


def test_unknown_run_ids(cli, tmp_path):
    db = str(tmp_path / "r.db")
    _assert_user_error(cli("show", "latest", "--db", db))          # no store yet
    assert cli("import", str(tmp_path / "missing.json"), "--db", db).returncode == 2
    export = tmp_path / "run.json"
    export.write_text(
        json.dumps(
            {"format": "cryptcost-run", "run": {"command": "ciphers"}, "host": {}, "results": []}
        )
    )
    assert cli("import", str(export), "--db", db).returncode == 0
    _assert_user_error(cli("compare", "1", "999", "--db", db))
    _assert_user_error(cli("report", "42", "--db", db))
    _assert_user_error(cli("show", "-7", "--db", db))


def test_bad_imports(cli, tmp_path):
    db = str(tmp_path / "r.db")
    notjson = tmp_path / "x.json"
    notjson.write_text("not json at all")
    _assert_user_error(cli("import", str(notjson), "--db", db))
    wrong = tmp_path / "y.json"
    wrong.write_text(json.dumps({"hello": "world"}))
    _assert_user_error(cli("import", str(wrong), "--db", db))


def test_corrupt_store_everywhere(cli, tmp_path):
    bad = tmp_path / "bad.db"
    bad.write_bytes(b"\x00garbage" * 1000)
    for args in (["list"], ["show", "1"], ["report", "1"], ["compare", "1", "2"]):
        _assert_user_error(cli(*args, "--db", str(bad)))


def test_store_of_a_newer_version_everywhere(cli, tmp_path):
    """A store a newer cryptcost wrote is refused, and left exactly as it was."""
    import sqlite3
    newer = tmp_path / "newer.db"
    conn = sqlite3.connect(newer)
    conn.execute("CREATE TABLE runs (id INTEGER PRIMARY KEY)")
    conn.execute("PRAGMA user_version = 99")
    conn.commit()
    conn.close()
    before = newer.read_bytes()
    for args in (["list"], ["show", "1"], ["report", "1"], ["ciphers", "--algo", "aes-128-gcm"]):
        proc = cli(*args, "--db", str(newer))
        _assert_user_error(proc)
        assert "newer cryptcost" in proc.stderr
    assert newer.read_bytes() == before


def test_run_without_root_measures_ciphers_and_says_why_not_storage(monkeypatch):
    import os

    from cryptcost.suite import for_this_host
    from cryptcost.workloads.plan import load
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    plan = for_this_host(load("quick", None))
    assert [p.storage for p in plan.parts] == [None] and plan.parts[0].ciphers
    assert {
        "part": "quick", "what": "storage stacks",
        "reason": "they need root (loop devices, mounts, FUSE)", "install": "run with sudo",
    } in plan.cannot_run
