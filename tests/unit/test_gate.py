"""The regression gate on stored results: what fails, what the host's own move excuses, what
differs beside a cell, and every output format read back."""

from __future__ import annotations

import json

import pytest

from cryptcost.errors import UserError
from cryptcost.report import gateout
from cryptcost.report.gate import judge, parse_threshold

HOST = {"hostname": "h", "cpu": {"model": "X", "cores": 2, "flags": {"aes": True}},
        "kernel": {"release": "6.1.0"}, "tools": {"openssl": "3.0.19", "fio": "3.33"}}


def cipher(algo: str, value: float, spread: float = 0.005) -> dict:
    return {"kind": "cipher", "engine": "openssl", "algorithm": algo, "buffer_bytes": 4096,
            "threads": 1, "accel": True, "median_bytes_per_s": value,
            "values": [value * (1 - spread), value, value * (1 + spread)], "samples": 3,
            "ci95": [value * 0.99, value * 1.01]}


def storage(stack: str, value: float, *, version: str = "2.3", spread: float = 0.005,
            yardstick: float | None = None, **params) -> dict:
    return {"kind": "storage", "stack": stack, "workload": "seq", "op": "write",
            "block_bytes": 1 << 20, "iodepth": 1, "medium": "ram", "fs": "ext4",
            "size": 256 << 20, "accel": True, "part": "quick", "median_bytes_per_s": value,
            "values": [value * (1 - spread), value, value * (1 + spread)], "samples": 3,
            "ci95": [value * 0.99, value * 1.01], "yardstick": yardstick,
            "params": {"versions": {"gocryptfs": version}, "facts": {"tools": ["gocryptfs"]},
                       **params}}


def ciphers(scale: float = 1.0) -> list[dict]:
    return [cipher(a, v * scale) for a, v in (("aes-256-gcm", 3e9), ("aes-256-xts", 5e9),
                                               ("chacha20-poly1305", 2e9))]


def samples(stack: str, cpu: list[float]) -> list[dict]:
    series = {"kind": "storage", "stack": stack, "workload": "seq", "op": "write",
              "block_bytes": 1 << 20, "iodepth": 1, "medium": "ram", "fs": "ext4",
              "size": 256 << 20, "accel": True, "part": "quick"}
    return [{"kind": "storage", "series": series, "index": i, "value": 1.0,
             "metrics": {"cpu_s_per_gib": c}} for i, c in enumerate(cpu)]


def gate(a, b, **kw):
    host_b = kw.pop("host_b", HOST)
    return judge(a, b, HOST, host_b, baseline="nightly", run_ids=(1, 2), **kw)


def test_unchanged_cells_pass_and_a_slower_one_fails_naming_it():
    a = ciphers() + [storage("gocryptfs:aes-gcm", 400e6)]
    same = gate(a, ciphers(1.001) + [storage("gocryptfs:aes-gcm", 401e6)])
    assert same.exit_code == 0 and same.regressions == []
    slower = gate(a, ciphers() + [storage("gocryptfs:aes-gcm", 300e6)])
    assert slower.exit_code == 1
    assert [c.label for c in slower.regressions] == [
        "gocryptfs:aes-gcm seq write 1 MiB [256 MiB]"]
    assert "-25.0 %" in gateout.why(slower.regressions[0], slower)


def test_a_small_or_better_change_is_listed_not_failed():
    a = ciphers() + [storage("gocryptfs:aes-gcm", 400e6), storage("cryfs", 100e6)]
    b = ciphers() + [storage("gocryptfs:aes-gcm", 390e6), storage("cryfs", 150e6)]
    got = {c.cell.stack: c.status for c in gate(a, b).cells}
    assert got["gocryptfs:aes-gcm"] == "within threshold" and got["cryfs"] == "improvement"
    assert gate(a, b, threshold=parse_threshold("1%")).exit_code == 1


def test_a_change_the_hosts_move_explains_fails_only_when_strict():
    a = ciphers() + [storage("gocryptfs:aes-gcm", 400e6)]
    b = ciphers(0.8) + [storage("gocryptfs:aes-gcm", 340e6)]      # the CPU 20 % slower
    lenient = gate(a, b)
    assert lenient.cpu_move["ratio"] == pytest.approx(0.8)
    assert lenient.exit_code == 0
    assert {c.cell.stack: c.status for c in lenient.cells}["gocryptfs:aes-gcm"] == "host"
    strict = gate(a, b, strict=True)
    assert strict.exit_code == 1
    assert "gocryptfs:aes-gcm seq write 1 MiB [256 MiB]" in [c.label for c in strict.regressions]
    # beyond the host's move, it is the stack's own
    beyond = gate(a, ciphers(0.8) + [storage("gocryptfs:aes-gcm", 200e6)])
    assert beyond.exit_code == 1


def test_a_cells_own_yardstick_can_explain_it_and_openssls_change_unmeasures_the_cpu():
    a = [storage("gocryptfs:aes-gcm", 400e6, yardstick=1e9)]
    b = [storage("gocryptfs:aes-gcm", 300e6, yardstick=0.7e9)]
    assert gate(a, b).exit_code == 0
    newer = {**HOST, "tools": {**HOST["tools"], "openssl": "3.0.20"}}
    moved = gate(ciphers() + a, ciphers(0.8) + [storage("gocryptfs:aes-gcm", 330e6)],
                 host_b=newer)
    assert moved.cpu_move is None and moved.exit_code == 1
    assert "OpenSSL's version changed" in gateout.to_markdown(moved)


def test_cpu_per_byte_is_judged_from_the_samples():
    a = [storage("gocryptfs:aes-gcm", 400e6)]
    b = [storage("gocryptfs:aes-gcm", 400e6)]
    got = gate(a, b, samples_a=samples("gocryptfs:aes-gcm", [2.0, 2.01, 1.99]),
               samples_b=samples("gocryptfs:aes-gcm", [2.6, 2.61, 2.59]))
    assert got.exit_code == 1
    cpu = [f for f in got.cells[0].figures if f.figure == "CPU per byte"][0]
    assert cpu.status == "regression" and cpu.unit == "CPU-s/GiB"


def test_what_differs_is_named_beside_the_cell():
    a = [storage("gocryptfs:aes-gcm", 400e6, backend="go")]
    b = [storage("gocryptfs:aes-gcm", 300e6, version="2.4", backend="openssl")]
    host_b = {**HOST, "kernel": {"release": "6.12.0"}, "tools": {**HOST["tools"], "fio": "3.36"}}
    cell = gate(a, b, host_b=host_b).cells[0]
    assert "kernel: 6.1.0 → 6.12.0" in cell.differences
    assert "gocryptfs 2.3 → 2.4" in cell.differences
    assert "gocryptfs:aes-gcm backend: go → openssl" in cell.differences
    assert not any("fio" in d for d in cell.differences)      # a tool the cell does not use


def test_runs_that_share_no_cell_and_bad_thresholds_are_bad_input():
    with pytest.raises(UserError, match="share no whole cell"):
        gate(ciphers(), [storage("cryfs", 1e8)])
    for bad in ("five", "storage=200%", "disk=5%"):
        with pytest.raises(UserError, match="bad --threshold"):
            parse_threshold(bad)
    t = parse_threshold("5%,network=10%")
    assert t.of("storage") == 0.05 and t.of("network") == 0.10


def test_junit_is_read_back_by_a_junit_parser(tmp_path):
    from junitparser import Failure, JUnitXml
    a = ciphers() + [storage("gocryptfs:aes-gcm", 400e6)]
    got = gate(a, ciphers() + [storage("gocryptfs:aes-gcm", 300e6)])
    path = tmp_path / "gate.xml"
    path.write_text(gateout.to_junit(got))
    suites = list(JUnitXml.fromfile(str(path)))
    cases = [case for suite in suites for case in suite]
    assert len(cases) == len(got.cells) == 4
    failed = [c for c in cases if any(isinstance(r, Failure) for r in c.result)]
    assert [c.name for c in failed] == ["gocryptfs:aes-gcm seq write 1 MiB [256 MiB]"]
    assert failed[0].classname == "cryptcost.storage"
    assert suites[0].failures == 1 and suites[0].tests == 4


def test_bencher_json_has_its_documented_shape():
    """bencher.dev/docs/reference/bencher-metric-format: benchmark → measure → {value,
    lower_value?, upper_value?}, numbers; a benchmark name up to 1024 characters, a measure
    slug up to 64."""
    a = ciphers() + [storage("gocryptfs:aes-gcm", 400e6)]
    got = gate(a, ciphers() + [storage("gocryptfs:aes-gcm", 300e6)],
               samples_a=samples("gocryptfs:aes-gcm", [2.0, 2.1, 1.9]),
               samples_b=samples("gocryptfs:aes-gcm", [2.0, 2.1, 1.9]))
    data = json.loads(gateout.to_bencher(got))
    assert isinstance(data, dict) and len(data) == 4
    for name, measures in data.items():
        assert isinstance(name, str) and 0 < len(name) <= 1024
        assert isinstance(measures, dict) and measures
        for slug, metric in measures.items():
            assert 0 < len(slug) <= 64 and set(metric) <= {"value", "lower_value", "upper_value"}
            assert all(isinstance(v, (int, float)) for v in metric.values())
            assert "value" in metric
    cell = data["gocryptfs:aes-gcm seq write 1 MiB [256 MiB]"]
    assert cell["throughput"] == {"value": 300e6, "lower_value": 297e6, "upper_value": 303e6}
    assert "cpu-seconds-per-gib" in cell


def test_markdown_and_json_say_the_verdict():
    a = ciphers() + [storage("gocryptfs:aes-gcm", 400e6)]
    got = gate(a, ciphers() + [storage("gocryptfs:aes-gcm", 300e6)])
    md = gateout.to_markdown(got)
    assert md.startswith("## cryptcost check FAILED: 1 regression against baseline nightly")
    assert "| gocryptfs:aes-gcm seq write 1 MiB [256 MiB] | throughput |" in md
    data = json.loads(gateout.to_json(got))
    assert data["passed"] is False and data["regressions"] == [
        "gocryptfs:aes-gcm seq write 1 MiB [256 MiB]"]
