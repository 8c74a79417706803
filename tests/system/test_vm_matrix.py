"""The full kernel matrices, in the guest of `cryptcost vm` (marker
``vm_matrix``: CI's second step, `make test ARGS="-m vm_matrix"`):

- R2's dm-crypt cipher matrix, key sizes, both sector sizes and every
  ``--perf-*`` flag alone, each read back from the kernel and the header,
  with the tuning deltas the report draws from them;
- the kernel's AES-NI driver blacklisted: which driver dm-crypt and the
  kernel cipher engine then use (#13's kernel switch);
- R5's proposals through kernel ESP, both directions, checked on the wire.
"""

from __future__ import annotations

import json

import pytest

from cryptcost.stacks import get
from tests.system.test_vm import _by, _vm_ready

pytestmark = [pytest.mark.root, pytest.mark.slow, pytest.mark.vm_matrix]
FAST = ["--min-samples", "2", "--max-samples", "2", "--warmup", "0"]


def _guest(cli, *argv, timeout=3000):
    done = cli("vm", "--timeout", str(timeout), *argv, timeout=timeout + 120)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout), done


def test_r2_dm_crypt_matrix_and_every_perf_flag(cli, tmp_path):
    _vm_ready()
    out, _ = _guest(cli, "--memory", "8192", "--", "storage", "--stacks", "luks:*,tcrypt:*,dm-null", "--workloads", "seq-1m",
                    "--size", "128M", *FAST, "--json")
    variants = set(get("luks").variants)
    measured = {r["stack"].split(":", 1)[1] for r in _by(out["results"], "storage")
                if r["stack"].startswith("luks:")}
    assert measured == variants, out.get("skipped")
    chains = {r["stack"].split(":", 1)[1] for r in _by(out["results"], "storage") if r["stack"].startswith("tcrypt:")}
    assert chains == set(get("tcrypt").variants), out.get("skipped")
    for r in _by(out["results"], "storage"):
        assert r["params"]["integrity"]["result"] == "identical", r["stack"]
        if r["stack"].startswith("luks:"):
            seen, p = r["params"]["verified"], r["params"]
            assert (seen["cipher"], seen["key_size"], seen["sector_size"]) == \
                   (p["cipher"], p["key_size"], p["sector_size"]), r["stack"]
            assert {f.removeprefix("--perf-") for f in p["perf"]} <= set(seen["flags"]), r["stack"]
    report = json.loads(cli("report", "latest", "--format", "json").stdout)
    tuning = " ".join(report["analysis"]["tuning"])
    for flag in ("no-read-wq", "no-write-wq", "same-cpu", "submit-from-crypt-cpus"):
        assert f"luks:aes-xts-plain64-4k-{flag}" in tuning, tuning


def test_aesni_blacklisted_in_the_guest_changes_the_kernel_driver(cli, tmp_path):
    _vm_ready()
    plan = tmp_path / "plan.toml"
    plan.write_text('network = false\n[ciphers]\nengines = ["kernel"]\nalgorithms = ["aes-256-xts"]\n'
                    'sizes = [65536]\n[storage]\nstacks = ["luks:aes-xts-plain64"]\nworkloads = ["seq-1m"]\n'
                    'size = "128M"\n[policy]\nmin_samples = 2\nmax_samples = 2\nwarmup = 0\n')
    runs = {}
    for label, extra in (("on", []), ("off", ["--blacklist", "aesni_intel"])):
        out, _ = _guest(cli, *extra, "--", "run", "--plan", str(plan), "--no-report", "--json", timeout=1500)
        luks = _by(out["results"], "storage", "luks:aes-xts-plain64")
        kernel = [r for r in _by(out["results"], "cipher") if r["engine"] == "kernel"]
        assert luks and kernel
        runs[label] = (luks[0]["params"]["kernel_drivers"]["xts(aes)"], kernel[0]["median_bytes_per_s"])
        assert kernel[0]["kernel_drivers"]["xts(aes)"]["driver"] == runs[label][0]["driver"]
    assert runs["on"][0]["module"] == "aesni_intel", runs
    assert runs["off"][0]["module"] != "aesni_intel" and "aesni" not in runs["off"][0]["driver"], runs
    # the switch changes speed, too, if little under emulation: TCG runs each AES-NI instruction
    # as a helper call, measured about 1.2× faster than the generic C AES (22.5 vs 18.5 MB/s)
    assert runs["off"][1] < 0.95 * runs["on"][1], runs
    listed = json.loads(cli("list", "--json").stdout)
    assert len(listed) == 2 and all(r["emulated"] for r in listed)


def test_r5_proposals_through_kernel_esp(cli, tmp_path):
    _vm_ready()
    out, _ = _guest(cli, "--", "network", "--stacks", "ipsec:*", "--workloads", "send,receive",
                    "--seconds", "1", *FAST, "--json")
    results = [r for r in _by(out["results"], "network") if r["stack"].startswith("ipsec:")]
    proposals = {r["stack"].split(":", 1)[1] for r in results}
    assert proposals == set(get("ipsec").variants), out.get("skipped")
    for r in results:
        assert r["params"]["negotiated"]["implementation"] == "kernel ESP", r["stack"]
        if r["stack"] == "ipsec:null-sha256":          # authenticated, not encrypted: said, not failed
            assert r["wire"]["verdict"] == "plaintext", r["wire"]
            assert r["wire"]["expected"].startswith("plaintext by design"), r["wire"]
        else:
            assert r["wire"]["plaintext_packets"] == 0, (r["stack"], r["wire"])
    assert {r["workload"] for r in results} == {"send", "receive"}
