"""A field report's claims judged from a run: a verdict of each kind, the comparability rules
(never this host's cells against a guest's; no cipher's cost from emulated cells), a claim the
run lacks the cells of, and every claim's own words found in its report's text."""

from __future__ import annotations

import pytest

from cryptcost.record import read
from cryptcost.report import claims, fieldreports as fr
from cryptcost.report.cells import KNOWN


def res(stack, value, spread=0.01, **cell):
    return {"kind": "storage", "stack": stack, "workload": "seq", "op": "write",
            "block_bytes": 1 << 20, "medium": "ram", "size": 256 << 20, "fs": "ext4",
            "median_bytes_per_s": value,
            "values": [value * (1 - spread), value, value * (1 + spread), value * (1 + spread / 2),
                       value * (1 - spread / 2)], **cell}


def claim(rule, value=(), cost=False, b=({"stack": "plain"},), **extra):
    data = {"id": "x", "claim": "a claim", "quote": "their words", "rule": rule,
            "cell": {"kind": "storage", "workload": "seq", "op": "write"},
            "a": {"stack": "fscrypt"}, "b": list(b), "cost": cost, **extra}
    if value:
        data["value"] = list(value) if len(value) > 1 else value[0]
    return claims.parse("R9", data, KNOWN)


@pytest.mark.parametrize("rule, value, fscrypt, verdict", [
    ("slower", (), 50e6, claims.HOLDS),
    ("faster", (), 50e6, claims.DOES_NOT),
    ("faster", (), 100.5e6, claims.CANNOT),            # within each other's noise
    ("same", (0.10,), 98e6, claims.HOLDS),
    ("same", (0.10,), 50e6, claims.DOES_NOT),
    ("at_most", (0.61,), 50e6, claims.HOLDS),
    ("between", (1.5, 2.0), 50e6, claims.DOES_NOT),
    ("between", (0.45, 0.55), 50e6, claims.HOLDS),
])
def test_a_claim_holds_does_not_or_cannot_be_said(rule, value, fscrypt, verdict):
    run = read([res("fscrypt", fscrypt), res("plain", 100e6)])
    got = claims.judge(claim(rule, value), "R9", run)
    assert got["verdict"] == verdict, got
    assert got["pairs"][0]["where"] == "this host"
    if verdict == claims.CANNOT:
        assert got["why"] and "no significant difference" in got["why"]


def test_a_ratio_never_mixes_this_hosts_cells_with_a_guests():
    here, guest = read([res("fscrypt", 50e6)]), read([res("plain", 100e6)])
    got = claims.judge(claim("slower", settle="a host with both"), "R9", here, [guest])
    assert got["verdict"] == claims.CANNOT and got["settle"] == "a host with both"
    assert got["why"].startswith("not comparable: one side measured only on this host, the "
                                 "other only on the guest (emulated)")
    assert got["pairs"][0]["ratio"] is None


def test_an_emulated_cipher_cost_comparison_is_not_comparable_but_shown():
    guest = read([res("fscrypt", 50e6), res("plain", 100e6)])
    costly = claims.judge(claim("slower", cost=True), "R9", [], [guest])
    assert costly["verdict"] == claims.CANNOT and costly["why"].startswith(
        "not comparable: measured only in cryptcost vm's emulated guest")
    assert costly["pairs"][0]["ratio"] == pytest.approx(0.5)     # its figures, shown
    # a claim about no cipher's cost (a protocol's, say) is judged from the guest alike
    assert claims.judge(claim("slower"), "R9", [], [guest])["verdict"] == claims.HOLDS
    # this host's pair is taken before the guest's
    here = read([res("fscrypt", 50e6), res("plain", 100e6)])
    assert claims.judge(claim("slower", cost=True), "R9", here, [guest])["verdict"] == \
        claims.HOLDS


def test_a_claim_whose_cells_the_run_lacks_says_which_and_what_would_settle_it():
    run = read([res("plain", 100e6)])
    got = claims.judge(claim("slower", settle="a kernel with fscrypt"), "R9", run,
                       skipped=[{"stack": "fscrypt", "reason": "no fscrypt in this kernel"}])
    assert got["verdict"] == claims.CANNOT and got["settle"] == "a kernel with fscrypt"
    assert got["why"].startswith("not measured: no result for fscrypt seq write")
    assert "fscrypt: no fscrypt in this kernel" in got["why"]


def test_several_comparisons_hold_only_together():
    run = read([res("fscrypt", 50e6), res("plain", 100e6), res("gocryptfs", 40e6)])
    both = claim("slower", b=({"stack": "plain"}, {"stack": "gocryptfs"}))
    got = claims.judge(both, "R9", run)
    assert [p["verdict"] for p in got["pairs"]] == [claims.HOLDS, claims.DOES_NOT]
    assert got["verdict"] == claims.DOES_NOT


def test_a_bad_claim_is_refused_naming_it():
    with pytest.raises(ValueError, match="claim x: rule 'bigger'"):
        claim("bigger")
    with pytest.raises(ValueError, match="1 value"):
        claim("same")


def test_every_report_has_claims_each_once_and_parsed():
    ids = [c.id for r in fr.reports() for c in r.claims]
    assert len(ids) == len(set(ids)) >= 25
    assert {r.label for r in fr.reports() if r.claims} == set(fr.LABELS)
