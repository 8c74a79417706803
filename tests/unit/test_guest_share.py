"""run --vm's guest share: what this host's kernel cannot run and Debian's stock kernel can,
cut from a plan, carried to the guest as JSON, and refused when malformed."""

import json
import subprocess
import sys
from dataclasses import replace

import pytest

from cryptcost.errors import Unavailable, UserError
from cryptcost.stacks.fs import MIN_MEDIUM
from cryptcost.suite import guest
from cryptcost.suite.budget import UNCALIBRATED_GUEST
from cryptcost.units import parse_size
from cryptcost.workloads.plan import load
from tests.conftest import ON_CI_MEMORY

MISSING = {"luks": "", "dm-null": "", "tcrypt": "", "ecryptfs": "", "esp": "", "nfs": "6.12"}


@pytest.fixture
def kernel_lacks(monkeypatch):
    """This host as one without dm-crypt, ESP and NFS (the guest has them), and without zfs's
    programs (which no guest adds)."""
    def reason(cls):
        if cls.name in MISSING:
            return Unavailable(f"no {cls.name} here", "a kernel with it", guest=MISSING[cls.name])
        if cls.name == "zfs":
            return Unavailable("zfs is not installed", "zfsutils-linux")
        return None
    monkeypatch.setattr(guest, "unavailable_reason", reason)
    monkeypatch.setattr(guest, "_kernel_ciphers", lambda table: None)
    monkeypatch.setattr(guest.kernel, "features", lambda: {"netem": {"present": True}})


def _stacks(share, kind):
    return {p.label: getattr(p, kind)["stacks"] for p in share.plan.parts if getattr(p, kind)}


def test_the_seeds_suites_guest_share_is_what_this_kernel_lacks_by_the_kernel_it_needs(
        kernel_lacks):
    shares = guest.share(load("seeds", None))
    assert [s.kernel for s in shares] == ["", "6.12"]
    stock, newer = shares
    storage = _stacks(stock, "storage")
    r2 = next(v for k, v in storage.items() if k.startswith("R2"))
    assert r2 and all(s.startswith("luks:") for s in r2)         # not qemu's LUKS: it runs here
    r1 = next(v for k, v in storage.items() if k.startswith("R1"))
    assert r1 == ["luks"]                                        # zfs: no guest helps
    every = next(v for k, v in storage.items() if k.startswith("R3 AES-NI"))
    assert sorted(every) == ["dm-null", "ecryptfs", "luks", "tcrypt"]   # "all" as its names
    # R5: kernel ESP's rows, and ipsec's IPComp variant, which kernel-libipsec cannot run
    r5 = {k: v for k, v in _stacks(stock, "network").items() if k.startswith("R5")}
    assert sorted(r5.values()) == [["ipsec:aes128-sha1-ipcomp"],
                                   ["ipsec:aes128-sha1-ipcomp", "esp:*"]], r5
    nfs = {p.label: p.network for p in newer.plan.parts}
    assert all(t["stacks"][0].startswith("nfs") for t in nfs.values())
    # the WAN part too, and dbench's
    assert sorted(t.get("delay_ms", 0) for t in nfs.values()) == [0, 0, 20]
    assert sorted(w for t in nfs.values() for w in t["workloads"]) == [
        "dbench", "get", "get", "put", "put", "smallfiles"]
    for share in shares:
        assert share.plan.name == ("seeds (guest, Linux 6.12)" if share.kernel
                                   else "seeds (guest)") and not share.plan.cannot_run
        pol = share.plan.policy
        assert pol["max_samples"] == pol["min_samples"]
        for p in share.plan.parts:
            for kind in ("storage", "network"):
                table = getattr(p, kind)
                assert not table or table["profile"] is False
            if p.storage:                     # smaller, but never below what its fs needs
                least = MIN_MEDIUM.get(p.storage.get("fs", "ext4"), 0)
                assert parse_size(p.storage["size"], "size") == max(
                    min(parse_size(p.storage["size"], "size"), guest.GUEST_MAX_SIZE), least)
                assert parse_size(p.storage["size"], "size") <= max(guest.GUEST_MAX_SIZE, least)
    r2 = next(p.storage for p in stock.plan.parts if p.label.startswith("R2"))
    assert r2["fs"] == "xfs" and r2["size"] == "320M"         # mkfs.xfs refuses under 300 MB
    assert stock.kernel_said == "Debian's stock kernel" and newer.kernel_said == "Linux 6.12"


def test_a_host_that_runs_it_all_has_no_guest_share(monkeypatch):
    monkeypatch.setattr(guest, "unavailable_reason", lambda cls: None)
    monkeypatch.setattr(guest.kernel, "features",
                        lambda: {f: {"present": True} for f in ("netem", "esp", "xfrm")})
    monkeypatch.setattr(guest, "_kernel_ciphers", lambda table: None)
    assert guest.share(load("seeds", None)) == []


def test_the_share_reaches_the_guest_whole_and_a_bad_one_is_refused(kernel_lacks):
    from cryptcost.suite.compiled import compile_plan, tables_of
    for share in guest.share(load("seeds", None)):
        compiled, _ = compile_plan(share.plan)
        back = guest.from_json(guest.to_json(compiled), "parts.json")
        again, _ = compile_plan(back)
        # compiled there as here: every table, every part's policy, the plan's
        assert again.name == compiled.name and again.policy == compiled.policy
        assert [(p.label, tables_of(p), p.policy, p.keep) for p in again.parts] == \
            [(p.label, tables_of(p), p.policy, p.keep) for p in compiled.parts]
        # what a budget left out of it reaches the guest's run record too
        cut = [{"part": "R5", "what": "the whole part", "reason": "left out to fit", "guest": True}]
        told = replace(compiled, cannot_run=cut)
        assert guest.from_json(guest.to_json(told), "parts.json").cannot_run == cut
    for bad in ("not json", "{}", json.dumps({"name": "x", "parts": []}),
                json.dumps({"name": "x", "parts": [{"label": "a", "storage": {"stackz": []}}]}),
                json.dumps({"name": "x", "parts": [{"label": "a", "ciphers": {}}],
                            "cannot_run": ["why"]})):
        with pytest.raises(UserError):
            guest.from_json(bad, "parts.json")


@pytest.mark.parametrize("argv, said", [
    (["--parts", "/nonexistent.json"], "cannot read plan /nonexistent.json"),
    (["--parts", "x.json", "--suite", "quick"], "--parts is the guest's share"),
    (["--vm-timeout", "60"], "--vm-timeout goes with --vm"),
    (["--vm-cpus", "1"], "--vm-cpus goes with --vm"),
    (["--vm", "--vm-cpus", "0"], "--vm-cpus must be between 1 and this host's"),
    (["--vm", "--vm-cpus", "65"], "--vm-cpus must be between 1 and this host's"),
    (["--budget-scale", "2"], "--budget-scale goes with --parts and --time-budget"),
])
def test_bad_guest_options_are_one_line_and_exit_2(argv, said, tmp_path):
    done = subprocess.run([sys.executable, "-m", "cryptcost", "--db", str(tmp_path / "r.db"),
                           "run", "--dry-run", *argv], capture_output=True, text=True,
                          cwd=tmp_path, timeout=120)
    assert done.returncode == 2 and said in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr


def test_a_delayed_table_goes_to_the_guest_whole_where_this_kernel_has_no_netem(kernel_lacks,
                                                                               monkeypatch):
    monkeypatch.setattr(guest.kernel, "features", lambda: {"netem": {"present": False}})
    wan = {p.label: p.network for s in guest.share(load("seeds", None)) for p in s.plan.parts
           if p.network and p.network.get("delay_ms")}
    assert [t["stacks"] for t in wan.values()] == [["nfs:sys", "nfs:krb5p"]]


def test_a_dry_run_prints_the_plan_and_both_shares_as_json(tmp_path):
    """``run --dry-run --json``: what announce says, as data; esp runs here or in the guest."""
    plan = tmp_path / "p.toml"
    plan.write_text('[ciphers]\nalgorithms = ["aes-256-gcm"]\n'
                    '[network]\nstacks = ["tls", "esp"]\nworkloads = ["send"]\n')
    done = subprocess.run([sys.executable, "-m", "cryptcost", "--db", str(tmp_path / "r.db"),
                           "run", "--plan", str(plan), "--vm", "--dry-run", "--json"],
                          capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    assert got["suite"] == "custom" and 0 < got["estimate_seconds"] < got["most_seconds"]
    assert [p["label"] for p in got["parts"]] == ["custom"]
    assert got["parts"][0]["said"][0] == "ciphers (aes-256-gcm)"
    here = got["parts"][0]["network"]["stacks"]
    there = [s for g in got["guest"] for p in g["parts"] for s in (p["network"] or {}).get(
        "stacks", [])]
    assert "tls" in here and ("esp" in here) != ("esp" in there), (here, there)
    for g in got["guest"]:
        assert g["runs_with_vm"] and g["estimate_seconds"] > 0 and g["kernel_said"]
        assert any(c["what"] == "esp" and c["guest"] is not None for c in got["cannot_run"])
    assert not list(tmp_path.glob("*.db"))                  # a dry run records nothing
    if not got["guest"]:
        return
    # --time-budget covers the guest's shares: each planned at the emulation's slowdown (no guest
    # run here to calibrate from) with its boot, the budget shared in proportion
    done = subprocess.run([sys.executable, "-m", "cryptcost", "--db", str(tmp_path / "r.db"),
                           "run", "--plan", str(plan), "--vm", "--dry-run", "--json",
                           "--time-budget", "20m"],
                          capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr
    budgeted = json.loads(done.stdout)
    given = [g["budget_seconds"] for g in budgeted["guest"]]
    assert all(g["planned_scale"] == UNCALIBRATED_GUEST for g in budgeted["guest"]) and all(given)
    assert budgeted["host_budget_seconds"] + sum(given) == pytest.approx(1200)
    k = UNCALIBRATED_GUEST
    whole = got["estimate_seconds"] + sum(g["estimate_seconds"] * k + 120 for g in got["guest"])
    if whole <= 1200:                 # nothing cut, and each share has room to run late
        assert budgeted["guest"][0]["parts"] == got["guest"][0]["parts"]
        assert all(b >= g["estimate_seconds"] * k + 120 for g, b in zip(got["guest"], given))
    else:
        assert all(g["estimate_seconds"] * k + 120 <= b * 1.001
                   for g, b in zip(budgeted["guest"], given))


def test_only_cuts_the_seeds_suite_to_the_parts_of_the_reports_asked_for_here_and_in_the_guest(
        kernel_lacks):
    """run --only R4: R4's parts alone, a part serving R3 and R4 kept (it is R4's too), what the
    plan cannot run for R4 kept and for others dropped; the guests' shares follow."""
    from cryptcost.workloads.plan import only_reports
    from cryptcost.workloads.seeds import parse_only, reports_of
    whole = load("seeds", None)
    assert {r for p in whole.parts for r in reports_of(p.label)} == {"R1", "R2", "R3", "R4", "R5"}
    r4 = only_reports(whole, parse_only("r4"))
    assert r4.parts and all("R4" in reports_of(p.label) for p in r4.parts)
    assert any(reports_of(p.label) == {"R3", "R4"} for p in r4.parts)
    assert [p.label for p in r4.parts] == [p.label for p in whole.parts
                                           if "R4" in reports_of(p.label)]
    assert [c["what"] for c in r4.cannot_run] == ["iozone over NFS"]
    assert only_reports(whole, ("R5",)).cannot_run == []
    for share in guest.share(r4):
        assert share.plan.parts and all("R4" in reports_of(p.label) for p in share.plan.parts)
    both = only_reports(whole, parse_only("R2, R5"))
    assert {frozenset(reports_of(p.label)) for p in both.parts} == {frozenset({"R2"}),
                                                                   frozenset({"R5"})}
    assert parse_only("r5,R2,R5") == ("R2", "R5")
    for bad in ("R9", ",", "R4;R5", "quick"):
        with pytest.raises(UserError, match="bad --only"):
            parse_only(bad)
    with pytest.raises(UserError, match="--suite seeds"):
        only_reports(load("quick", None), ("R4",))


def test_run_only_says_so_in_its_plan_and_refuses_bad_input_in_one_line(tmp_path):
    env = {"XDG_DATA_HOME": str(tmp_path), "CRYPTCOST_STATE_DIR": str(tmp_path / "state"),
           "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
    done = subprocess.run([*ON_CI_MEMORY, "run", "--suite", "seeds", "--only",
                           "R2", "--dry-run", "--json"], capture_output=True, text=True, env=env,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "the parts of R2 only (--only)" in done.stderr
    out = json.loads(done.stdout)
    assert out["only"] == ["R2"] and [p["label"][:2] for p in out["parts"]] == ["R2"]
    for argv, said in ((["--suite", "seeds", "--only", "R7"], "bad --only 'R7'"),
                       (["--only", "R4"], "not of suite quick")):
        done = subprocess.run([sys.executable, "-m", "cryptcost", "run", *argv, "--dry-run"],
                              capture_output=True, text=True, env=env, timeout=120)
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
        assert len(done.stderr.strip().splitlines()) == 1 and said in done.stderr, done.stderr


def test_a_fixed_number_of_samples_is_estimated_as_one_figure(tmp_path):
    """A policy whose minimum is its maximum (the quick suite's) has no range: the estimate is
    one figure, not "about X … up to X"; a policy with a range still states both ends."""
    said = {}
    for most in (3, 6):
        plan = tmp_path / f"p{most}.toml"
        plan.write_text('[ciphers]\nalgorithms = ["aes-256-gcm"]\nsizes = [4096]\n'
                        f'[policy]\nmin_samples = 3\nmax_samples = {most}\n')
        done = subprocess.run([sys.executable, "-m", "cryptcost", "--db", str(tmp_path / "r.db"),
                               "run", "--plan", str(plan), "--dry-run"],
                              capture_output=True, text=True, cwd=tmp_path, timeout=120)
        assert done.returncode == 0, done.stderr
        said[most] = next(ln for ln in done.stderr.splitlines() if "estimated time" in ln)
    assert "fixed number of samples" in said[3] and "up to" not in said[3], said[3]
    assert "up to" in said[6] and "fixed" not in said[6], said[6]


def test_the_guest_samples_its_storage_at_the_shares_policy_not_at_the_quick_suites_own(
        kernel_lacks):
    """The quick suite's storage takes 4 samples of at least 0.25 s here (``storage.samples``,
    a trade for passes at memory speed); a guest's pass under TCG lasts a sample or more, so its
    share samples as the share's policy says, on the second, while a minimum a table asked for
    without a number of its own reaches the guest."""
    from cryptcost.suite.compiled import compile_plan
    from cryptcost.workloads.plan import Part, RunPlan
    quick = load("quick", None)
    assert quick.parts[0].storage["samples"] == 4
    [share] = guest.share(quick)
    [part] = share.plan.parts
    assert "samples" not in part.storage and "sample_minimum" not in part.storage
    compiled, _ = compile_plan(share.plan)
    sp = compiled.parts[0].storage[0]
    assert sp.samples is None and sp.sample_minimum == 1.0
    assert sp.policy(compiled.parts[0].policy) == compiled.parts[0].policy
    here, _ = compile_plan(quick)
    assert here.parts[0].storage[0].policy(here.parts[0].policy).min_samples == 4
    alone = RunPlan("custom", parts=[Part("p", storage={"stacks": ["luks"], "sample_minimum": 2})])
    [share] = guest.share(alone)
    assert share.plan.parts[0].storage["sample_minimum"] == 2
