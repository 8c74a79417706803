"""The answer on this host's own disks, for real: a disk's speed is timed read-only and leaves
it as it was; a prediction on a device of a known speed holds against the same stack measured
on such a device (a throttled medium standing in for the host's disk)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess

import pytest

from cryptcost import proc
from cryptcost.analysis import costmodel
from cryptcost.host import disks
from cryptcost.stacks import get, unavailable_reason
from tests.conftest import cli_in, skip_or_fail
from tests.system.conftest import need_root


def _digest(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


@pytest.mark.root
def test_a_disks_speed_is_timed_read_only_and_leaves_it_unchanged(tmp_path, monkeypatch):
    """A loop device stands in for a disk: fio reads it with --readonly and O_DIRECT, and its
    every byte is the same afterwards (its checksum before and after)."""
    need_root("root")
    image = tmp_path / "cryptcost-disk.img"
    image.write_bytes(os.urandom(64 << 20))
    loop = subprocess.run(["losetup", "--find", "--show", str(image)], capture_output=True,
                          text=True, check=True).stdout.strip()
    argvs: list[list[str]] = []
    real = proc.run

    def watched(argv, **kw):
        argvs.append([str(a) for a in argv])
        return real(argv, **kw)
    monkeypatch.setattr(disks.proc, "run", watched)
    try:
        before = _digest(loop)
        speed, how = disks.read_speed(disks.Disk(os.path.basename(loop), loop, "loop", False,
                                                 64 << 20), seconds=1)
        after = _digest(loop)
    finally:
        subprocess.run(["losetup", "-d", loop], check=False)
    assert speed and speed > 0, how
    assert "nothing written" in how and loop in how
    [fio] = [a for a in argvs if a[0] == "fio"]
    assert "--readonly" in fio and "--direct=1" in fio and "--rw=read" in fio, fio
    assert after == before and _digest(str(image)) == before


@pytest.mark.root
def test_this_hosts_disks_are_found_and_each_timed_or_said_why_not():
    need_root("root")
    found = disks.survey(storage=True, network=True)
    assert found["disks"], "no disk found under /sys/block"
    for d in found["disks"]:
        assert d["size"] > 0 and d["model"]
        assert d["read_bytes_per_s"] or d["how"].startswith("not timed"), d
    assert all(set(link) == {"name", "bytes_per_s", "driver"} for link in found["links"])


# fscrypt, by a plan file that says nothing of a profile: the run both tests below read
PLAN = """
[storage]
stacks = ["fscrypt"]
workloads = ["seq-1m"]
size = "128M"
[policy]
min_samples = 3
max_samples = 3
warmup = 1
"""


@pytest.fixture(scope="module")
def fscrypt_on_ram(tmp_path_factory):
    """fscrypt and its baselines on the RAM medium, one ``cryptcost run --plan`` for the module:
    the answer's prediction starts from it, and its verdicts are checked against its profile."""
    need_root("fscrypt")
    if why := unavailable_reason(get("fscrypt")):
        skip_or_fail("fscrypt", f"fscrypt unavailable: {why}")
    tmp = tmp_path_factory.mktemp("answer")
    (tmp / "plan.toml").write_text(PLAN)
    cli = cli_in(tmp)
    done = cli("run", "--plan", "plan.toml", "--no-report", "--json", timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return cli, json.loads(done.stdout)


@pytest.mark.root
@pytest.mark.stack_matrix
def test_the_answers_prediction_on_a_device_holds_against_the_stack_measured_on_one(
        fscrypt_on_ram):
    """fscrypt measured on RAM, and again on a medium throttled to 100 MB/s: the answer built
    from the RAM run, with a disk of that speed as this host's, predicts a range for fscrypt
    there, and what fscrypt does on the throttled medium is within the cost model's own
    tolerance of that range."""
    need_root("qemu-raw")
    if why := unavailable_reason(get("qemu-raw")):
        skip_or_fail("qemu-raw", f"qemu-raw unavailable: {why}")
    cli, ram = fscrypt_on_ram
    slow = cli("storage", "--medium", "throttled:100MB/s", "--stacks", "fscrypt", "--workloads",
               "seq-1m", "--size", "128M", "--min-samples", "3", "--max-samples", "3",
               "--warmup", "1", "--no-profile", "--json", timeout=900)
    assert slow.returncode == 0, slow.stderr[-3000:]
    from cryptcost.model import Run
    from cryptcost.record import read
    from cryptcost.report import document
    shown = cli("show", str(ram["run"]), "--json")
    assert shown.returncode == 0, shown.stderr
    ram_out, slow_out = json.loads(shown.stdout), json.loads(slow.stdout)
    host = ram_out.get("host") or ram_out.get("run", {}).get("host") or {}
    run = Run(id=1, started="", command="storage", host=host,
              extra={"disks": [{"name": "sdx", "path": "/dev/sdx", "model": "a 100 MB/s disk",
                                "rotational": True, "size": 1e12, "read_bytes_per_s": 100e6,
                                "how": "throttled:100MB/s"}]})
    a = document.build(run, ram_out["results"]).answer
    [option] = [o for u in a.uses for o in u.options if o.stack.startswith("fscrypt")]
    [on] = option.on
    there = {(r.stack, r.cell.op): r.bytes_per_s for r in read(slow_out["results"])}
    measured = there[(option.stack, on.op)]
    error = 0.0 if on.low <= measured <= on.high else \
        (measured - on.high) / on.high if measured > on.high else (measured - on.low) / on.low
    print(f"{option.stack} {on.op}: predicted {on.low / 1e6:.1f}–{on.high / 1e6:.1f} MB/s, "
          f"measured {measured / 1e6:.1f} MB/s on the throttled medium ({error:+.0%})")
    assert abs(error) <= costmodel.TOLERANCE, (
        f"{option.stack} {on.op}: predicted {on.low / 1e6:.1f}–{on.high / 1e6:.1f} MB/s on a "
        f"100 MB/s disk, measured {measured / 1e6:.1f} MB/s on the throttled medium "
        f"({error:+.0%})")


@pytest.mark.root
@pytest.mark.stack_matrix
def test_a_plan_files_run_profiles_by_default_and_its_verdicts_rest_on_the_profile(
        fscrypt_on_ram):
    """A plan file that says nothing of a profile, with fscrypt: its warm-up round is profiled,
    and fscrypt's verdict is read from that profile, never a bare latency."""
    need_root("profile")
    from cryptcost.engines import perf
    from cryptcost.errors import Unavailable
    try:
        perf.require()
    except Unavailable as exc:
        skip_or_fail("profile", f"perf cannot sample here: {exc.reason}")
    _, out = fscrypt_on_ram
    rows = [r for r in out["report"]["storage"] if r["stack"].startswith("fscrypt")]
    assert rows and all(r["bottleneck"] != "latency" or "waiting, not computing"
                        in r["explanation"] for r in rows), rows
    assert all("by its CPU profile" in r["explanation"]
               or "where the busy CPU went (perf" in r["explanation"] for r in rows), rows
    cells = [r for r in out["results"] if r["kind"] == "storage"]
    assert all((r.get("profile") or {}).get("rows") for r in cells), [
        (r["stack"], r["op"]) for r in cells if not (r.get("profile") or {}).get("rows")]
