"""cryptcost vm in `make test`: a guest that hangs, a kill -9 of cryptcost vm, and bad input
that must cost no boot. The kernel's own stacks measured for real in Debian's stock kernel (LUKS2,
dm-null, eCryptfs, TrueCrypt, the kernel cipher engine, kernel ESP and WireGuard) are
test_vm_matrix's, with the full matrices (marked ``vm_matrix``: CI runs them in its second step,
so that `make test` stays fast); this module's helpers serve them.
"""

from __future__ import annotations

import glob
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from tests.conftest import skip_or_fail
from tests.system.conftest import leftovers, need_root


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
