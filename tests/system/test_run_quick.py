"""The main job, for real: `cryptcost run` (the quick suite) measures every
stack available here, analyses, and writes the self-contained HTML report."""

import json
import re

import pytest

from cryptcost.stacks import availability
from tests.system.conftest import need_root


@pytest.mark.root
@pytest.mark.slow
def test_quick_suite_end_to_end(cli, tmp_path):
    need_root("plain")
    report = tmp_path / "cryptcost-report.html"
    proc = cli("run", "-o", str(report), "--json", timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "estimated time" in proc.stderr
    out = json.loads(proc.stdout)
    measured = {r["stack"].split(":")[0] for r in out["results"] if r["kind"] == "storage"}
    available = {s["name"] for s in availability("storage") if s["available"]}
    assert measured == available
    assert {r["engine"] for r in out["results"] if r["kind"] == "cipher"} >= {"openssl", "go"}
    doc = out["report"]
    assert [r["title"] for r in doc["recommendations"]][:3] == [
        "Whole disk", "Per directory", "Any filesystem / cloud-synced folder"]
    assert all(r["bottleneck"] for r in doc["storage"])
    not_measured = {m["what"].split()[-1] for m in doc["not_measured"]}
    assert not_measured >= {s["name"] for s in availability("storage") if not s["available"]}
    html = report.read_text()
    assert len(re.findall(r"<svg\b", html)) >= 4 and "<script" not in html
    # every result within ±3 % of its median or marked unstable with its CV and likely cause, and the
    # report's interval says which
    for r in out["results"]:
        median = r.get("median_bytes_per_s") or r.get("median_ops_per_s")
        wide = r.get("ci95") and (r["ci95"][1] - r["ci95"][0]) / 2 / median > 0.03
        assert not wide or (r.get("unstable") and r.get("cv") is not None and r.get("likely_cause")), r
    rows = doc["storage"] + doc["network"] + doc["ciphers"]
    assert sum(row["ci"].endswith("~") for row in rows) == sum(bool(r.get("unstable")) for r in out["results"])
    assert ("Unstable results" in html) == any(r.get("unstable") for r in out["results"])
    shown = json.loads(cli("show", "latest", "--json").stdout)
    assert shown["run"]["status"] == "complete" and shown["run"]["extra"]["suite"] == "quick"
    _verdicts_rest_on_a_profile(out, doc)


def _verdicts_rest_on_a_profile(out: dict, doc: dict) -> None:
    """#35: where perf can sample here (CI requires it), every storage and network cell is
    profiled in its warm-up round, and every verdict rests on that profile: named from it
    (the cipher, or the largest layer where no ceiling binds), or saying where the busy CPU
    went beside it; a "latency" says the CPU mostly waited, or why no layer is named. fscrypt on a kernel whose AES is a software
    driver is cipher-bound. Without perf the profile is listed as not run, and why."""
    from cryptcost.engines import perf
    from cryptcost.errors import Unavailable
    try:
        perf.require()
    except Unavailable:
        assert any(m["what"].endswith("storage profile") for m in doc["not_measured"]), doc["not_measured"]
        return
    cells = [r for r in out["results"] if r["kind"] in ("storage", "network")]
    for r in cells:
        p = r.get("profile") or {}
        assert p.get("rows") and "error" not in p and p["how"].startswith("the last warm-up round"), \
            (r["stack"], {k: v for k, v in p.items() if k not in ("rows", "folded")})
    for row in doc["storage"] + doc["network"]:
        assert "by its CPU profile" in row["explanation"] \
            or "where the busy CPU went (perf" in row["explanation"], row
        # a bare "latency" only where the profile saw a CPU mostly waiting, or no layer to name
        assert row["bottleneck"] != "latency" or "waiting, not computing" in row["explanation"] \
            or "no layer" in row["explanation"] or "cipher's" in row["explanation"], row
    # a stripped Go daemon's cipher is named from its own function table (engines.gosyms): gocryptfs's
    # Go AES-GCM, wireguard-go's ChaCha20-Poly1305, each with its share of the busy CPU
    for stack, code in (("gocryptfs:", "crypto/aes."), ("wireguard", "golang.org/x/crypto/chacha20poly1305")):
        rows = [row for row in doc["storage"] + doc["network"] if row["stack"].startswith(stack)]
        for row in rows:
            assert "% the cipher" in row["explanation"] and code in row["explanation"], row["explanation"]
    drivers = {name: text for name, text in doc["environment"] if name.startswith("kernel ")}
    if "software" in drivers.get("kernel xts(aes)", ""):
        fscrypt = [row for row in doc["storage"] if row["stack"].startswith("fscrypt:")]
        assert fscrypt and all(row["bottleneck"] == "cipher" for row in fscrypt), fscrypt
