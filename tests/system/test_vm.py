"""The kernel's own stacks, for real, under Debian's stock kernel in a qemu
guest (`cryptcost vm`): LUKS2, dm-null, eCryptfs and a TrueCrypt container
through a full storage measurement with the integrity check, the kernel
cipher engine, kernel
ESP and kernel WireGuard — one boot — with the results imported into the
host's store marked emulated (marked ``vm_matrix``, with the full
matrices of test_vm_matrix: CI runs them in its second step, so that
`make test` stays fast). Plus, in `make test`, a guest that hangs, a kill -9
of cryptcost vm, and bad input that must cost no boot.
"""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import pytest

from tests.conftest import skip_or_fail
from tests.system.conftest import leftovers, need_root

PLAN = """
[ciphers]
engines = ["kernel"]
algorithms = ["aes-256-xts"]
sizes = [65536]
seconds = 1

[storage]
stacks = ["luks:aes-xts-plain64", "dm-null", "ecryptfs", "tcrypt"]
workloads = ["seq-1m"]
size = "64M"

[network]
stacks = ["wireguard", "ipsec:aes128gcm16"]
workloads = ["send"]
seconds = 1

[policy]
min_samples = 1
max_samples = 1
warmup = 0
"""
# One sample a series: this test asks whether the kernel's stacks set up, measure, verify and come
# back, not how fast; the guest's statistics on two samples are the R2 matrix's (test_vm_matrix).
# With one sample nothing is tested for significance, so the guest never loads scipy.stats (about
# 25 s under TCG).


def _vm_ready() -> None:
    need_root("vm")
    from cryptcost.guest.image import kernels
    missing = [t for t in ("qemu-system-x86_64", "cpio", "modprobe") if not shutil.which(t)]
    if not os.path.exists("/bin/busybox"):
        missing.append("busybox")
    if not kernels():
        missing.append("a kernel under /boot with its modules (linux-image-amd64)")
    if missing:
        skip_or_fail("vm", "cryptcost vm cannot run here: missing " + ", ".join(missing))


def _by(results: list[dict], kind: str, stack: str | None = None) -> list[dict]:
    return [r for r in results if r["kind"] == kind and (stack is None or r.get("stack") == stack)]


@pytest.mark.root
@pytest.mark.slow
@pytest.mark.vm_matrix                 # a measuring boot of about 100 s: CI's second step
def test_kernel_stacks_run_in_the_guest_and_come_back_emulated(cli, tmp_path):
    _vm_ready()
    plan = tmp_path / "plan.toml"
    plan.write_text(PLAN)
    before = set(leftovers([]))
    done = cli(
        "vm", "--timeout", "900", "--", "run", "--plan", str(plan), "--no-report", "--json",
        timeout=1000,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout)  # the guest's stdout, unchanged: one JSON object
    assert out["failed"] == [] and out["skipped"] == [], out["skipped"]
    results = out["results"]

    # LUKS2 through a full measurement: both ops, the data read back identical, the header read back
    luks = _by(results, "storage", "luks:aes-xts-plain64")
    assert {r["op"] for r in luks} == {"write", "read"}
    for r in luks:
        assert r["params"]["integrity"]["result"] == "identical"
        seen = r["params"]["verified"]
        assert seen["header"] == {"version": 2, "cipher": "aes-xts-plain64"}
        assert seen["cipher"] == "aes-xts-plain64" and seen["key_size"] == 512
        assert r["params"]["kernel_drivers"]["xts(aes)"]["driver"]
        assert r["baseline"] == "dm-null" and set(r["vs"]) == {"dm-null", "plain"}, r["vs"]
        assert r["overhead"] is not None and len(r["values"]) == 1
    for name in ("dm-null", "ecryptfs:aes-128", "tcrypt:aes-xts"):
        rs = _by(results, "storage", name)
        assert {r["op"] for r in rs} == {"write", "read"}, name
        assert all(r["params"]["integrity"]["result"] == "identical" for r in rs), name
    # eCryptfs: cipher and key size from /proc/mounts, and a pattern absent from the lower file
    ecr = _by(results, "storage", "ecryptfs:aes-128")[0]["params"]["verified"]
    assert ecr["cipher"] == "aes" and ecr["key_bytes"] == 16 and ecr["lower_file"] == "ciphertext"
    # a TrueCrypt container made by tcplay, opened by dm-crypt
    tc = _by(results, "storage", "tcrypt:aes-xts")[0]["params"]["verified"]
    assert tc["type"] == "TCRYPT" and tc["cipher"].startswith("aes-xts")

    # the kernel cipher engine (cryptsetup benchmark through AF_ALG) ran in the guest
    kernel = [r for r in _by(results, "cipher") if r["engine"] == "kernel"]
    assert (
        kernel and kernel[0]["algorithm"] == "aes-256-xts" and kernel[0]["median_bytes_per_s"] > 0
    )
    assert kernel[0]["kernel_drivers"]["xts(aes)"][
        "driver"
    ]  # which driver served, from /proc/crypto

    # kernel WireGuard and kernel ESP, each checked on the wire
    wg = _by(results, "network", "wireguard")
    assert wg and wg[0]["params"]["negotiated"]["implementation"] == "kernel"
    esp = _by(results, "network", "ipsec:aes128gcm16")
    assert esp and esp[0]["params"]["negotiated"]["implementation"] == "kernel ESP"
    assert esp[0]["params"]["negotiated"]["esp"] == "AES_GCM_16-128"
    for r in wg + esp:
        assert r["wire"]["verdict"] == "encrypted" and r["wire"]["plaintext_packets"] == 0

    # the guest's progress reached stderr, then the import into the host's store, marked emulated
    assert "measuring:" in done.stderr and "imported as emulated run(s)" in done.stderr
    # --accel auto: KVM only where it boots the kernel quickly, and the line says which and why
    assert re.search(r"vm: kernel \S+ \((tcg|kvm): [^)]+\)", done.stderr), done.stderr[-500:]
    listed = json.loads(cli("list", "--json").stdout)
    assert len(listed) == 1 and listed[0]["emulated"] and listed[0]["host"] == "cc-guest"
    report = cli("report", "latest", "--format", "md", "-o", str(tmp_path / "r.md"))
    assert report.returncode == 0, report.stderr
    text = (tmp_path / "r.md").read_text()
    assert "Emulated: measured in a qemu guest under TCG" in text
    assert "luks:aes-xts-plain64" in text
    assert set(leftovers([])) - before == set()
    assert not list((tmp_path / "state").glob("journal-*"))


@pytest.mark.root
def test_a_guest_that_hangs_is_killed_and_its_log_kept(cli, tmp_path):
    _vm_ready()
    before, dirs = set(leftovers([])), set(glob.glob("/tmp/cryptcost-vm-*"))
    done = cli("vm", "--timeout", "3", "--", "probe", timeout=120)
    assert done.returncode == 1, done.stderr
    line = done.stderr.strip().splitlines()[-1]
    assert line.startswith(
        "error: the guest did not finish within 3 s and was killed (console log: "
    )
    log = line.split("console log: ")[1].rstrip(")")
    assert os.path.exists(log) and log.startswith(str(tmp_path))
    assert "cc-init" not in open(log).read() or "FAILED" not in open(log).read()
    assert set(leftovers([])) - before == set()  # qemu ended, by its pid
    assert set(glob.glob("/tmp/cryptcost-vm-*")) - dirs == set()  # scratch disk and share removed
    assert not list((tmp_path / "state").glob("journal-*"))


def _qemu_pids(marker: str) -> list[int]:
    pids = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = open(f"/proc/{pid}/cmdline", "rb").read().decode(errors="replace")
        except OSError:
            continue
        if cmd.startswith("qemu-system-x86_64") and marker in cmd:
            pids.append(int(pid))
    return pids


@pytest.mark.root
def test_kill_9_of_a_vm_run_then_cleanup_ends_qemu_and_removes_its_files(tmp_path):
    _vm_ready()
    env = {
        **os.environ, "XDG_DATA_HOME": str(tmp_path / "data"),
        "CRYPTCOST_STATE_DIR": str(tmp_path / "state"),
    }
    dirs = set(glob.glob("/tmp/cryptcost-vm-*"))
    child = subprocess.Popen(
        [sys.executable, "-m", "cryptcost", "vm", "--timeout", "600", "--", "probe"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
    )
    deadline, mine = time.monotonic() + 60, set()
    while time.monotonic() < deadline and not mine:
        mine = set(glob.glob("/tmp/cryptcost-vm-*")) - dirs
        time.sleep(0.1)
    assert mine, "the vm run made no work directory"
    work = mine.pop()
    while time.monotonic() < deadline and not _qemu_pids(work):
        time.sleep(0.1)
    assert _qemu_pids(work), "qemu never started"
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    assert _qemu_pids(work), "qemu should outlive a kill -9 of cryptcost, for cleanup to end"
    done = subprocess.run(
        [sys.executable, "-m", "cryptcost", "cleanup"], capture_output=True, text=True, env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert not _qemu_pids(work) and not os.path.exists(work), done.stdout
    assert not list((tmp_path / "state").glob("journal-*"))


@pytest.mark.parametrize(
    "argv, message",
    [
        ([], "needs a command after --"),
        (["--"], "needs a command after --"),
        (["--", "vm", "--", "probe"], "cannot run inside itself"),
        (["--", "storage", "--db", "/tmp/x.db"], "keeps its own store"),
        (["--", "cleanup"], "no meaning inside the guest"),
        (["--", "storage", "--bogus"], "unrecognized arguments: --bogus"),
        (["--", "frobnicate"], "invalid choice: 'frobnicate'"),
        (["--accel", "hvf", "--", "probe"], "invalid choice: 'hvf'"),
        (["--cpus", "0", "--", "probe"], "--cpus must be between 1 and 64"),
        (["--memory", "64", "--", "probe"], "--memory must be at least 256 MiB"),
        (["--timeout", "-1", "--", "probe"], "--timeout must be positive"),
        (["--blacklist", "aes;rm", "--", "probe"], "--blacklist takes kernel module names"),
        (["--kernel", "0.0-none", "--", "probe"], "no guest kernel 0.0-none"),
        (
            ["--", "run", "--plan", "/nonexistent/plan.toml"],
            "cannot read plan /nonexistent/plan.toml",
        ),
        (["--", "run", "--plan", "{bad_plan}"], "storage.workloads has 'tpcc'"),
        (["--peer", "somewhere"], "give the guest's address with its prefix"),
        (["--peer", "10.0.0.2/31"], "an IPv4 address in a /30 or wider"),
        (["--peer", "10.0.0.2/24", "--", "probe"], "runs no command"),
        (["--host-key", "/nonexistent", "--", "probe"], "go with --peer"),
        (
            ["--peer", "10.0.0.2/24", "--authorized-keys", "/nonexistent"],
            "cannot read --authorized-keys",
        ),
    ],
)
def test_bad_input_is_one_line_and_costs_no_boot(cli, tmp_path, argv, message):
    bad = tmp_path / "bad.toml"
    bad.write_text('[storage]\nworkloads = ["tpcc"]\n')
    argv = [a.replace("{bad_plan}", str(bad)) for a in argv]
    done = cli("vm", *argv, timeout=60)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert message in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "Traceback" not in done.stderr
