"""``cryptcost run --vm``: one command measures what this host can and, in cryptcost vm's guest,
what its kernel lacks (one boot per guest kernel), links the guest's emulated runs to its own,
and lays their figures in the field reports, said emulated. In CI's second step (vm_matrix):
two guest boots under TCG, which also serve R4's NFS matrix (every sec= mode and NFS 3, under
Linux 6.12): one boot of that kernel for the whole step."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from cryptcost.stacks import get, unavailable_reason
from tests.conftest import skip_or_fail
from tests.system.test_vm import _by
from tests.system.test_vm_matrix import _guest_6_12, _module_cli, part_times

pytestmark = [pytest.mark.root, pytest.mark.slow, pytest.mark.vm_matrix]

# R4's matrix rides on the 6.12 guest's share: every NFS variant (NFS 4.2 with each sec= mode,
# and NFS 3) with sequential writes and reads and small files, and the mixed load (dbench) that
# R4 ran as its iozone mix
PLAN = """
[storage]
stacks = ["luks:aes-xts-plain64", "fscrypt"]
workloads = ["seq-1m", "bonnie"]
size = "64M"

[network]
stacks = ["nfs:*"]
workloads = ["put", "get", "smallfiles", "dbench"]
clients = [2]
file_size = "64M"
seconds = 1

[policy]
min_samples = 1
max_samples = 1
warmup = 0
"""


@dataclass
class RunVm:
    """The one ``run --vm``: its JSON, the stored guest runs, and the command line of its store."""

    out: dict
    guest: list[dict]
    cli: object
    tmp: object


def run_vm_ready() -> None:
    """What ``run --vm``'s boots need here besides the vm itself (boot_all checks that), or a
    skip (a failure where CI requires the vm)."""
    _guest_6_12()
    if not (unavailable_reason(get("luks")) and unavailable_reason(get("nfs"))):
        skip_or_fail("vm", "this host's kernel runs dm-crypt and NFS itself: run --vm sends "
                           "nothing to the guest")


def boot_run_vm(tmp: Path) -> RunVm:
    """The one ``run --vm`` of PLAN, its guests at one vCPU each: it runs beside a lane of the
    stock kernel's matrices (``tests/system/test_vm_matrix.boot_all``, which checks after every
    boot of the step that nothing is left)."""
    cli = _module_cli(tmp)
    plan = tmp / "plan.toml"
    plan.write_text(PLAN)
    dry = cli("run", "--plan", str(plan), "--vm", "--dry-run", timeout=300)
    assert dry.returncode == 0, dry.stderr
    assert "in cryptcost vm's guest (Debian's stock kernel, emulated)" in dry.stderr
    assert "in cryptcost vm's guest (Linux 6.12, emulated)" in dry.stderr
    assert "cannot run custom luks" not in dry.stderr           # said under the guest instead
    # a budget the whole plan fits in: nothing is cut, and each guest runs its part of it
    done = cli("run", "--plan", str(plan), "--vm", "--vm-cpus", "1", "--json",
               "-o", str(tmp / "r.html"), "--time-budget", "3h", timeout=3000)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout)                 # one JSON object: the guests' output is stderr
    assert out["failed"] == [] and len(out["guest_runs"]) == 2, out["failed"]
    guest = [json.loads(cli("show", str(rid), "--json", timeout=300).stdout)
             for rid in out["guest_runs"]]
    for g in guest:
        part_times(f"run --vm's guest ({g['host']['kernel']['release']})", g["run"]["extra"])
    return RunVm(out, guest, cli, tmp)


@pytest.fixture(scope="module")
def run_vm(guest_boots) -> RunVm:
    return guest_boots.read("run_vm")


def test_run_vm_measures_the_kernels_share_in_the_guest_and_the_field_reports_read_it(run_vm):
    out, guest, cli, tmp_path = run_vm.out, run_vm.guest, run_vm.cli, run_vm.tmp
    # this host measured its own share only
    assert {r["stack"].split(":")[0] for r in out["results"]
            if r["kind"] == "storage"} == {"fscrypt", "plain"}
    listed = {r["id"]: r for r in json.loads(cli("list", "--json", timeout=120).stdout)}
    for rid in out["guest_runs"]:
        assert listed[rid]["emulated"] and listed[rid]["host"] == "cc-guest"
    assert all(0 < g["run"]["extra"]["time_budget"] < 3 * 3600 and
               not [s for s in g["run"]["extra"]["skipped"] if s.get("budget")]
               for g in guest), [g["run"]["extra"] for g in guest]
    kernels = {g["host"]["kernel"]["release"] for g in guest}
    assert any(k.startswith("6.12") for k in kernels), kernels   # NFS under Linux 6.12
    stored = {(r.get("stack"), r.get("op") or r.get("workload")) for g in guest
              for r in g["results"]}
    assert {("luks:aes-xts-plain64", "write"), ("nfs:krb5p", "put")} <= stored, stored
    # R4's mixed load in the client's mount, with the clients asked for
    mixed = [r for g in guest for r in g["results"] if r.get("workload") == "dbench"]
    assert {r["stack"] for r in mixed} == {f"nfs:{v}" for v in get("nfs").variants}, mixed
    assert all(r["streams"] == 2 and r["engine"] == "dbench 2 clients"
               and r["median_bytes_per_s"] > 0 for r in mixed), mixed
    assert all(r["wire"]["verdict"] == "encrypted" for r in mixed if r["stack"] == "nfs:krb5p")

    # R2's block write (bonnie++'s, as R2's) and R4's writes from the guest's stored results,
    # said emulated; R2's rewrite column filled from the same bonnie++ runs
    assert {r["op"] for g in guest for r in g["results"] if r.get("workload") == "bonnie"
            and r["stack"] == "luks:aes-xts-plain64"} == {"write", "rewrite", "read"}
    blocks = {b["label"]: b for b in out["report"]["field_reports"]}
    r2 = blocks["R2"]["rows"][0]
    r4 = blocks["R4"]["rows"][0]
    for row, stack, op in ((r2, "luks:aes-xts-plain64", "write"), (r4, "nfs:krb5p", "put")):
        assert row["emulated"] is True and row["ours"] is not None, row
        assert row["here"].endswith("(emulated)") and row["ours_cells"][0].startswith(stack)
        assert (stack, op) in stored
    assert r4["here"].endswith("(emulated)")
    # its claims judged: krb5p's cost from the guest alone is no hardware's, and says so
    behind = {c["id"]: c for c in blocks["R4"]["claims"]}["R4.krb5p-behind"]
    assert behind["verdict"] == "cannot say" and "not comparable" in behind["why"]
    rows = {r["name"]: r["cells"] for r in blocks["R2"]["tables"][0]["rows"]}
    rewrite = rows["aes-xts-plain, their retest"][1]
    assert rewrite["ours"] and rewrite["emulated"] and rewrite["theirs"] == 38.7, rewrite
    # the host's own list of what it could not run says where it was measured instead
    said = [n for n in out["report"]["not_measured"] if "luks" in n["what"]]
    assert said and all("measured in cryptcost vm's guest instead" in n["why"] for n in said)
    # a report written later from the store reads the linked runs the same way
    md = cli("report", str(out["run"]), "--format", "md", "-o", str(tmp_path / "r.md"),
             timeout=300)
    assert md.returncode == 0, md.stderr
    assert "| R4 | NFS 4 with Kerberos encryption (krb5p) falls clearly behind | cannot say |" \
        in (tmp_path / "r.md").read_text()
    assert "(emulated)" in (tmp_path / "r.html").read_text()


def test_r4_nfs_3_and_nfs_4_with_kerberos_every_sec_mode(run_vm):
    """R4's matrix, from the 6.12 guest's share of the run: NFS 4.2 with every sec= mode, and
    NFS 3 (its own rpcbind and mountd port)."""
    [guest] = [g for g in run_vm.guest if g["host"]["kernel"]["release"].startswith("6.12")]
    results = {(r["stack"], r["workload"]): r for r in _by(guest["results"], "network")
               if r["workload"] in ("put", "get", "smallfiles")}
    assert set(results) == {
        (f"nfs:{v}", w) for v in get("nfs").variants for w in ("put", "get", "smallfiles")
    }, guest["run"]["extra"].get("skipped")
    for (stack, workload), r in results.items():
        variant = stack.split(":")[1]
        sec, vers = get("nfs").variants[variant]["sec"], get("nfs").variants[variant]["vers"]
        negotiated = r["params"]["negotiated"]
        assert (negotiated["vers"], negotiated["sec"]) == (vers, sec), negotiated
        if variant == "v3":                  # NFS 3, plaintext by design, against NFS 4.2
            assert r["baseline"] == "nfs:sys" and r["overhead"] is not None, r
            assert r["wire"]["expected"] == ("plaintext by design: NFS 3 with sec=sys does not "
                                             "encrypt"), r["wire"]
            continue
        assert r["bytes_moved"] > 0 and r["median_bytes_per_s"] > 0
        if sec != "sys":
            assert negotiated["enctype"].startswith("aes"), negotiated
        if sec == "krb5p":  # encrypted, checked on the wire, and compared with sec=sys
            assert r["wire"]["verdict"] == "encrypted" and r["wire"]["plaintext_packets"] == 0, \
                r["wire"]
            assert r["wire"]["canary"]["canary_packets"] == 0, r["wire"]["canary"]
            assert r["baseline"] == "nfs:sys" and r["overhead"] is not None, r
            assert r["params"]["cipher_ref"]["algorithm"] in ("aes-256-cbc", "aes-128-cbc")
        elif sec != "sys":                  # authenticated, not encrypted: said, not failed
            assert r["wire"]["verdict"] == "plaintext", r["wire"]
            assert r["wire"]["expected"] == (f"plaintext by design: NFS 4.2 with sec={sec} does "
                                             "not encrypt"), r["wire"]
    # encrypting every byte in the kernel costs CPU the plaintext share does not spend
    for workload in ("put", "get"):
        assert results[("nfs:krb5p", workload)]["cpu_s_per_gb"]["system"] > \
            results[("nfs:sys", workload)]["cpu_s_per_gb"]["system"], workload
