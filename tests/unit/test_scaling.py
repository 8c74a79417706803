"""R3 per stack (analysis/scaling.py): acceleration on/off × CPU counts, what
hardware AES is worth, why it cannot be switched, where the cipher stops
binding; and how the report shows it (terminal, Markdown, JSON, HTML chart)."""

from __future__ import annotations

import json

from cryptcost.analysis.bottleneck import Verdict
from cryptcost.analysis import analyze, scaling
from cryptcost.record import Host, Skipped, read

MiB = 1 << 20


def _r(
    stack, op, value, cpus=None, accel=True, library="openssl+go", verified=None, speedup=None,
    **params,
):
    facts = {"role": "measured", "crypto_library": library, "baselines": ["plain"], "layer": "fuse"}
    return {
        "kind": "storage", "stack": stack, "workload": "seq", "op": op, "block_bytes": MiB,
        "iodepth": 1, "cpus": cpus, "accel": accel, "median_bytes_per_s": value,
        "ci95": [value * 0.98, value * 1.02], "accel_verified": verified, "accel_speedup": speedup,
        "values": [value] * 3, "samples": 3, "params": {"facts": facts, **params},
    }


def _curves(results, verdicts=None, skipped=None, host=None):
    return scaling.curves(
        read(results), verdicts or {}, Host.of(host), [Skipped.of(s) for s in skipped or []]
    )


def test_a_verified_twin_says_what_acceleration_is_worth_per_cpu_count():
    rs = [
        _r("gocryptfs:aes-gcm", "write", 400e6, cpus=1),
        _r("gocryptfs:aes-gcm", "write", 600e6, cpus=2),
        _r(
            "gocryptfs:aes-gcm/accel-off", "write", 100e6, cpus=1, accel=False, verified=True,
            speedup=4.0,
        ),
        _r(
            "gocryptfs:aes-gcm/accel-off", "write", 190e6, cpus=2, accel=False, verified=True,
            speedup=3.16,
        ),
    ]
    verdicts = {i: Verdict(b, "", {"cipher": 4.2e8})
                for i, b in enumerate(("cipher", "fuse", "cipher", "cipher"))}
    [c] = _curves(rs, verdicts)
    assert c.stack == "gocryptfs:aes-gcm" and len(c.points) == 4
    assert c.accel.state == "verified" and c.accel.worth == {1: 4.0, 2: 3.16}
    assert abs(c.scaling["on"].ratio - 1.5) < 1e-9 and abs(c.scaling["off"].ratio - 1.9) < 1e-9
    assert c.cipher_bound.until == 1 and c.cipher_bound.stops_at == 2
    found = scaling.findings([c])
    assert found[0] == (
        "gocryptfs:aes-gcm: hardware acceleration is worth 4.0× on 1 CPU, 3.2× on 2 CPUs "
        "(seq write 1 MiB) here"
    )
    assert found[1] == (
        "gocryptfs:aes-gcm from 1 CPU to 2 CPUs: seq write 1 MiB 1.50× (1.90× without "
        "acceleration): cipher-bound on 1 CPU; from 2 CPUs the bottleneck is fuse, not the cipher; "
        "without acceleration: cipher-bound on 1 CPU up to 2 CPUs, the most measured: more cores "
        "would still help"
    )


def test_cipher_bound_to_the_last_count_or_never_or_no_ceiling_to_tell():
    up = [_r("s", "write", 100e6, cpus=1), _r("s", "write", 190e6, cpus=2)]

    def v(kind):
        return Verdict(kind, "", {"cipher": 2e8})
    [c] = _curves(up, {0: v("cipher"), 1: v("cipher")})
    assert c.cipher_bound.until == 2 and "more cores would still help" in c.cipher_bound.text
    [c] = _curves(up, {0: v("device"), 1: v("device")})
    assert c.cipher_bound.until is None and "not cipher-bound" in c.cipher_bound.text
    [c] = _curves(up, {0: Verdict("latency", "", {"cipher": None}), 1: Verdict("latency", "", {})})
    assert "no cipher ceiling in this run" in c.cipher_bound.text
    [c] = _curves(up, {0: v("cpu"), 1: v("cipher")})
    assert c.cipher_bound.text == ("cipher-bound from 2 CPUs (on fewer: cpu), the most measured: "
                                         "more cores would still help")


def test_where_the_cipher_binds_without_acceleration_is_said_too():
    rs = [_r("g", "read", 500e6, cpus=1), _r("g", "read", 800e6, cpus=2),
          _r("g/accel-off", "read", 75e6, cpus=1, accel=False, verified=True, speedup=6.9),
          _r("g/accel-off", "read", 143e6, cpus=2, accel=False, verified=True, speedup=5.6)]
    kinds = ("latency", "latency", "cpu", "cipher")
    [c] = _curves(rs, {i: Verdict(k, "", {"cipher": 1.6e8}) for i, k in enumerate(kinds)})
    assert c.cipher_bound_off.until == 2 and c.cipher_bound.until is None
    row = scaling.rows([c])[0]["cipher_bound"]
    assert (
        row.startswith("not cipher-bound")
        and "without acceleration: cipher-bound from 2 CPUs" in row
    )
    assert scaling.findings([c])[-1] == (
        "g from 1 CPU to 2 CPUs: seq read 1 MiB 1.60× (1.91× without acceleration): "
        "without acceleration: cipher-bound from 2 CPUs (on fewer: cpu), the most "
        "measured: more cores would still help"
    )


def test_a_switch_that_did_not_slow_the_stack_is_said_never_a_number():
    rs = [
        _r("rclone-crypt", "write", 100e6),
        _r("rclone-crypt/accel-off", "write", 99e6, accel=False, verified=False, speedup=1.01),
    ]
    [c] = _curves(rs)
    assert c.accel.state == "not effective" and c.accel.worth is None
    assert "worth" not in c.to_dict()["accel"]
    assert scaling.findings([c]) == [f"rclone-crypt: {c.accel.text}"]
    assert scaling.rows([c])[0]["worth"] == "not effective"


def test_a_switch_worth_something_elsewhere_reaches_the_cipher_where_it_did_not_slow_a_cell():
    """dm-crypt's twin in a guest: 2.2× at 1 MiB, no significant difference at 512 B. The switch
    reached the cipher; the small requests are limited elsewhere (it said once the switch did not
    reach the stack's crypto at all)."""
    rs = [_r("luks", "write", 20e6, cpus=1),
          _r("luks/accel-off", "write", 9e6, cpus=1, accel=False, verified=True, speedup=2.2)]
    small = [_r("luks", "write", 1e6, cpus=1),
             _r("luks/accel-off", "write", 0.95e6, cpus=1, accel=False, verified=False,
                speedup=1.05)]
    for r in small:
        r["block_bytes"] = 512
    found = scaling.findings(_curves(rs + small))
    assert found[:2] == [
        "luks: hardware acceleration is worth 2.2× on 1 CPU (seq write 1 MiB) here",
        "luks: acceleration off was not significantly slower at seq write 512 B: the switch "
        "reaches its cipher (above), so the cipher does not limit these cells, as far as their "
        "samples tell"], found
    assert not any("does not reach" in f for f in found), found


def test_a_switch_slower_by_the_medians_but_not_significantly_is_undecided_never_a_number():
    rs = [
        _r("luks", "write", 28e6, cpus=1),
        _r("luks/accel-off", "write", 17.5e6, cpus=1, accel=False, verified=None, speedup=1.6),
    ]
    [c] = _curves(rs)
    assert c.accel.state == "unverified" and c.accel.worth is None
    assert c.accel.text == ("acceleration off is unverified: slower by the medians (1.6× on "
                            "1 CPU), but not significantly with the samples taken")


def test_a_library_without_a_switch_says_so_in_the_analysis_json_and_the_report():
    skipped = [
        {
            "stack": "cryfs:aes-256-gcm/accel-off",
            "reason": "acceleration cannot be switched off for "
            "crypto++'s crypto from userspace: the library has no switch",
            "accel": "cannot be switched off",
        }
    ]
    rs = [_r("cryfs:aes-256-gcm", "write", 80e6, library="crypto++")]
    [c] = _curves(rs, skipped=skipped)
    assert c.accel.state == "cannot be switched off"
    [row] = scaling.rows([c])
    assert row["off"] == "cannot be switched off" and "×" not in row["off"] + row["worth"]
    assert scaling.findings([c]) == [
        "cryfs:aes-256-gcm: acceleration cannot be switched off for crypto++'s "
        "crypto from userspace: the library has no switch"
    ]


def test_a_kernel_stack_names_its_driver_and_gets_nothing_from_aes_ni_with_a_software_one():
    soft = {"xts(aes)": {"driver": "xts(ecb(aes-fixed-time))", "implementation": "software"}}
    ref = {"algorithm": "aes-256-xts", "where": "kernel", "unit": 4096}
    rs = [_r("fscrypt", "write", 300e6, library="kernel", kernel_drivers=soft, cipher_ref=ref)]
    [c] = _curves(rs)
    assert c.accel.state == "kernel" and c.accel.software is True
    assert (
        "gets nothing from AES-NI on this kernel: its AES driver is xts(ecb(aes-fixed-time))"
        in c.accel.text
    )
    fast = {"xts(aes)": {"driver": "xts-aes-aesni", "implementation": "accelerated"}}
    rs = [_r("luks", "write", 900e6, library="kernel", kernel_drivers=fast, cipher_ref=ref)]
    [c] = _curves(rs)
    assert "xts-aes-aesni" in c.accel.text and "--blacklist aesni_intel" in c.accel.text


def test_baselines_and_single_points_with_nothing_to_say_make_no_curve():
    base = _r("plain", "write", 2e9)
    base["params"]["facts"]["role"] = "baseline"
    assert _curves([base, _r("gocryptfs:aes-gcm", "write", 400e6)]) == []


def test_the_report_shows_the_curves_in_every_format(tmp_path):
    from cryptcost.model import Run
    from cryptcost.report import render

    rs = [
        _r("gocryptfs:aes-gcm", op, v, cpus=n)
        for op in ("write", "read")
        for n, v in ((1, 300e6), (2, 450e6))
    ]
    rs += [
        _r("gocryptfs:aes-gcm/accel-off", op, 80e6, cpus=n, accel=False, verified=True, speedup=3.8)
        for op in ("write", "read")
        for n in (1, 2)
    ]
    run = Run(
        id=1,
        command="storage",
        status="complete",
        started="2026-01-01T00:00:00",
        finished=None,
        host={"cpu": {"cores": 2}},
        label=None,
        extra={
            "skipped": [
                {
                    "stack": "cryfs/accel-off", "reason": "the library has no switch",
                    "accel": "cannot be switched off",
                }
            ]
        },
    )
    assert analyze(rs, {}).scaling
    md = render.render("md", run, rs)
    assert "## Hardware AES and cores, per stack" in md and "3.8× on 1 CPU" in md
    data = json.loads(render.render("json", run, rs))
    assert data["analysis"]["scaling"][0]["accel"]["state"] == "verified"
    html = render.render("html", run, rs)
    assert (
        'id="accel-cores"' in html
        and html.count("<svg") >= 1
        and "gocryptfs:aes-gcm: throughput against CPUs" in html
    )


def test_gocryptfs_backends_are_pinned_per_variant_and_auto_follows_the_switch(
    monkeypatch, tmp_path
):
    """aes-gcm-go and aes-gcm-openssl each carry one library's switch; the
    default (-openssl auto) uses Go's AES-GCM with AES-NI, OpenSSL's without."""
    from cryptcost.stacks import get
    from cryptcost.stacks import gocryptfs
    monkeypatch.setattr(gocryptfs, "cpu_info", lambda: {"flags": {"aes": True, "pclmulqdq": True}})
    g = get("gocryptfs")
    go, ossl, auto = g("aes-gcm-go"), g("aes-gcm-openssl"), g("aes-gcm")
    for s in (go, ossl, auto):
        s.passfile, s.lower, s.mnt = tmp_path / "p", tmp_path / "l", tmp_path / "m"
    assert "-openssl=false" in go.mount_argv(None) and "-openssl=true" in ossl.mount_argv(None)
    assert not any(a.startswith("-openssl") for a in auto.mount_argv(None))
    go.accel = ossl.accel = auto.accel = False
    assert (
        go.accel_env() == {"GODEBUG": go.accel_env()["GODEBUG"]}
        and "OPENSSL_ia32cap" not in go.accel_env()
    )
    assert list(ossl.accel_env()) == ["OPENSSL_ia32cap"]
    assert set(auto.accel_env()) == {"GODEBUG", "OPENSSL_ia32cap"}
    assert auto.backend_used() == "openssl" and auto.cipher_ref()["where"] == "userspace"
    auto.accel = True
    assert auto.backend_used() == "go" and auto.cipher_ref()["where"] == "go"
    assert g("xchacha").backend_used() == "go" and g("aes-siv").crypto_library == "go"


def test_seeds_r3_measures_every_stack_on_and_off_across_cores_and_standard_at_one_block_size():
    from cryptcost.suite.compiled import network_plans, storage_plans
    from cryptcost.workloads.plan import load
    seeds = load("seeds", None)
    [r3] = [p for p in seeds.parts if p.label.startswith("R3 AES-NI and cores")]
    assert (
        r3.storage["stacks"] == ["all"]
        and r3.storage["accel"] == ["on", "off"]
        and r3.ciphers is None
    )
    assert [sp.cpus for sp in storage_plans(r3.storage)] == [1, 2]
    assert [np_.cpus for np_ in network_plans(r3.network)] == [1, 2]
    assert all(np_.accel == (True, False) for np_ in network_plans(r3.network))
    standard = load("standard", None)
    assert [p.storage["workloads"] for p in standard.parts] == [
        ["seq-quick", "rand4k", "smallfiles"],
        ["seq-1m"],
    ]
    assert standard.parts[1].storage["accel"] == ["on", "off"] and standard.parts[1].network is None


def test_cpu_counts_beyond_this_process_are_refused(monkeypatch):
    import os
    import pytest
    from cryptcost.errors import UserError
    from cryptcost.host import cpu
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    with pytest.raises(UserError, match="cpus 3: this process may use 1 … 2 CPU"):
        cpu.validate_cpu_count(3)
    cpu.validate_cpu_count(2)


def test_a_series_that_failed_part_way_is_shown_but_never_ranked():
    from cryptcost.analysis import ranking, findings

    def res(stack, op, value, **extra):
        r = _r(stack, op, value, library="go")
        r["params"]["facts"].update(use_case="directory", baselines=["plain"])
        r.update(
            vs={"plain": {"overhead": 1 - value / 1e9, "significant": True}}, samples=3, **extra
        )
        return r
    rs = [res("gocryptfs:aes-gcm", op, 4e8) for op in ("write", "read")]
    rs += [
        res(
            "cryfs:aes-256-gcm", op, 9e8,
            incomplete="cryfs (pid 7) exited (1) during the measurement",
        )
        for op in ("write", "read")
    ]
    assert [x.stack for x in ranking(read(rs))] == ["gocryptfs:aes-gcm"]
    said = [f for f in findings(read(rs), []) if "series stopped" in f]
    assert (
        len(said) == 2
        and "cryfs:aes-256-gcm write 1 MiB: its series stopped after 3 sample(s)" in said[0]
    )


def test_a_stack_measured_on_the_same_cell_in_two_parts_says_each_curves_part():
    """The seeds suite's R2 and R3 both read 1 MiB sequentially: two curves of one stack whose
    titles would read alike each name their part; a title only one part has stays bare."""
    rs = [{**_r("luks-userspace", "read", v, cpus=c), "part": part}
          for part in ("R3 block sizes, cores and AES-NI", "R3 AES-NI and cores for every stack")
          for c, v in ((1, 300e6), (2, 320e6))]
    rs.append({**_r("luks-userspace", "write", 200e6, cpus=1), "part": "R3 block sizes, cores"})
    rs.append({**_r("luks-userspace", "write", 210e6, cpus=2), "part": "R3 block sizes, cores"})
    cells = sorted(c.cell for c in _curves(rs))
    assert cells == ["seq read 1 MiB [R3 AES-NI and cores for every stack]",
                     "seq read 1 MiB [R3 block sizes]", "seq write 1 MiB"]
