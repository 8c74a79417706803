"""Real engines, through the real command line."""

import json

import pytest

from cryptcost.host import kernel
from tests.conftest import skip_or_fail

FAST = ["--min-samples", "3", "--max-samples", "4", "--warmup", "0", "--seconds", "1"]


def test_openssl_accel_off_is_several_times_slower_and_recorded(cli):
    proc = cli("ciphers", "--engine", "openssl", "--algo", "aes-256-xts", "--sizes", "4096",
               "--threads", "1", "--accel", "on,off", "--json", *FAST)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    by_accel = {r["accel"]: r for r in out["results"]}
    on, off = by_accel[True], by_accel[False]
    for r in (on, off):
        for key in ("engine", "algorithm", "buffer_bytes", "threads", "accel", "median_bytes_per_s",
                    "ci95", "samples", "accel_verified"):
            assert key in r
        assert r["samples"] >= 3 and r["ci95"][0] <= r["median_bytes_per_s"] * 1.2
    assert on["median_bytes_per_s"] / off["median_bytes_per_s"] > 3
    assert off["accel"] is False and off["accel_verified"] is True
    assert on["accel_verified"] is None


def test_openssl_two_threads_and_legacy_and_hmac(cli):
    proc = cli("ciphers", "--engine", "openssl", "--algo", "bf-cbc,hmac-sha256,chacha20-poly1305",
               "--threads", "1,2", "--json", "--min-samples", "2", "--max-samples", "2",
               "--warmup", "0")
    assert proc.returncode == 0, proc.stderr
    results = json.loads(proc.stdout)["results"]
    assert {(r["algorithm"], r["threads"]) for r in results} == {
        (a, t) for a in ("bf-cbc", "hmac-sha256", "chacha20-poly1305") for t in (1, 2)}
    assert all(r["median_bytes_per_s"] > 1e6 for r in results)
    bf = next(r for r in results if r["algorithm"] == "bf-cbc")
    assert "obsolete" in bf["warning"]


@pytest.mark.stack_matrix       # 32 s: four gocryptfs -speed runs, the switch R3 turns on gocryptfs
def test_go_engine_and_its_accel_switch(cli):
    proc = cli("ciphers", "--engine", "go", "--accel", "on,off", "--json", "--min-samples", "2",
               "--max-samples", "2", "--warmup", "0")
    if proc.returncode == 2 and "gocryptfs" in proc.stderr:
        skip_or_fail("gocryptfs", proc.stderr.strip())
    assert proc.returncode == 0, proc.stderr
    results = json.loads(proc.stdout)["results"]
    gcm_off = next(r for r in results if r["algorithm"] == "aes-256-gcm" and not r["accel"])
    assert gcm_off["accel_verified"] is True and gcm_off["engine_saw_accel"] is False
    assert all(r["buffer_bytes"] == 4096 and r["threads"] == 1 for r in results)


def test_kernel_engine_says_why_it_cannot_run(cli):
    proc = cli(
        "ciphers", "--engine", "kernel", "--algo", "aes-256-xts", "--json", "--min-samples", "1",
        "--max-samples", "1", "--warmup", "0",
    )
    if kernel.af_alg():
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stdout)["results"][0]["engine"] == "kernel"
    else:
        assert proc.returncode == 2
        assert "AF_ALG" in proc.stderr and "install:" in proc.stderr


def test_results_are_in_the_store_and_export(cli, tmp_path):
    db = str(tmp_path / "r.db")
    assert (
        cli(
            "ciphers", "--db", db, "--engine", "openssl", "--algo", "aes-128-gcm", "--min-samples",
            "2", "--max-samples", "2", "--warmup", "0",
        ).returncode
        == 0
    )
    listing = json.loads(cli("list", "--db", db, "--json").stdout)
    assert listing[0]["status"] == "complete" and listing[0]["results"] == 1
    shown = json.loads(cli("show", "latest", "--db", db, "--json", "--samples").stdout)
    assert shown["results"][0]["algorithm"] == "aes-128-gcm"
    assert len(shown["samples"]) == 2
    assert shown["host"]["cpu"]["model"]
    csv = cli("report", "latest", "--db", db, "--format", "csv").stdout.splitlines()
    assert csv[0].startswith("run,kind,engine") and len(csv) == 2
