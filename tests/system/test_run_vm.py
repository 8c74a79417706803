"""``cryptcost run --vm``: one command measures what this host can and, in cryptcost vm's guest,
what its kernel lacks (one boot per guest kernel), links the guest's emulated runs to its own,
and lays their figures in the field reports, said emulated. In CI's second step (vm_matrix):
two guest boots under TCG."""

from __future__ import annotations

import json

import pytest

from cryptcost.stacks import get, unavailable_reason
from tests.conftest import skip_or_fail
from tests.system.conftest import leftovers
from tests.system.test_vm import _vm_ready
from tests.system.test_vm_matrix import _guest_6_12

pytestmark = [pytest.mark.root, pytest.mark.slow, pytest.mark.vm_matrix]

PLAN = """
[storage]
stacks = ["luks:aes-xts-plain64", "fscrypt"]
workloads = ["seq-1m", "bonnie"]
size = "64M"

[network]
stacks = ["nfs:sys", "nfs:krb5p"]
workloads = ["put", "dbench"]
clients = [2]
file_size = "32M"
seconds = 1

[policy]
min_samples = 1
max_samples = 1
warmup = 0
"""


def test_run_vm_measures_the_kernels_share_in_the_guest_and_the_field_reports_read_it(
        cli, tmp_path):
    _vm_ready()
    _guest_6_12()
    if not (unavailable_reason(get("luks")) and unavailable_reason(get("nfs"))):
        skip_or_fail("vm", "this host's kernel runs dm-crypt and NFS itself: run --vm sends "
                           "nothing to the guest")
    plan = tmp_path / "plan.toml"
    plan.write_text(PLAN)
    before = set(leftovers([]))
    dry = cli("run", "--plan", str(plan), "--vm", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "in cryptcost vm's guest (Debian's stock kernel, emulated)" in dry.stderr
    assert "in cryptcost vm's guest (Linux 6.12, emulated)" in dry.stderr
    assert "cannot run custom luks" not in dry.stderr           # said under the guest instead

    # a budget the whole plan fits in: nothing is cut, and each guest runs its part of it
    done = cli("run", "--plan", str(plan), "--vm", "--json", "-o", str(tmp_path / "r.html"),
               "--time-budget", "3h", timeout=3000)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout)                 # one JSON object: the guests' output is stderr
    assert out["failed"] == [] and len(out["guest_runs"]) == 2, out["failed"]
    # this host measured its own share only
    assert {r["stack"].split(":")[0] for r in out["results"]
            if r["kind"] == "storage"} == {"fscrypt", "plain"}
    listed = {r["id"]: r for r in json.loads(cli("list", "--json").stdout)}
    for rid in out["guest_runs"]:
        assert listed[rid]["emulated"] and listed[rid]["host"] == "cc-guest"
    guest = [json.loads(cli("show", str(rid), "--json").stdout) for rid in out["guest_runs"]]
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
    assert {r["stack"] for r in mixed} == {"nfs:sys", "nfs:krb5p"}, mixed
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
    md = cli("report", str(out["run"]), "--format", "md", "-o", str(tmp_path / "r.md"))
    assert md.returncode == 0, md.stderr
    assert "| R4 | NFS 4 with Kerberos encryption (krb5p) falls clearly behind | cannot say |" \
        in (tmp_path / "r.md").read_text()
    assert "(emulated)" in (tmp_path / "r.html").read_text()
    assert set(leftovers([])) - before == set()
