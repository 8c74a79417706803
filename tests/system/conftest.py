"""System tests: real stacks as root. After the whole session, nothing of
cryptcost's may be left: mounts, loop devices, stack daemons, journals."""

from __future__ import annotations

import os
import subprocess

import pytest

STACK_DAEMONS = ("gocryptfs", "cryfs", "securefs", "encfs", "rclone", "qemu-storage-d", "bindfs")
# Network stacks' daemons carry no "cryptcost-" path in every argv: they are found by the run token in
# their environment instead (every process a run starts inherits CRYPTCOST_RUN).
RUN_ENV = b"CRYPTCOST_RUN="


def _ours(pid: str) -> bool:
    """A process a cryptcost run started (not this test process or its ancestors)."""
    if int(pid) in _ancestors():
        return False
    try:
        return RUN_ENV in open(f"/proc/{pid}/environ", "rb").read()
    except OSError:
        return False


def _ancestors() -> set[int]:
    out, pid = set(), os.getpid()
    while pid > 1:
        out.add(pid)
        try:
            pid = int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return out


WORKQUEUE_MASK = "/sys/devices/virtual/workqueue/cpumask"
# The mask as the session found it: a pass on N CPUs changes it and must restore it.
MASK_BEFORE = open(WORKQUEUE_MASK).read().strip() if os.path.exists(WORKQUEUE_MASK) else None


def leftovers(state_dirs: list[str]) -> list[str]:
    found = []
    for line in open("/proc/self/mountinfo"):
        target = line.split()[4]
        if "cryptcost-" in target:
            found.append(f"mount {target}")
    loops = subprocess.run(["losetup", "-a"], capture_output=True, text=True).stdout
    found += [f"loop {l}" for l in loops.splitlines() if "cryptcost-" in l]
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                cmd = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
            except OSError:
                continue
            if cmd and cmd[0] and (os.path.basename(cmd[0].decode(errors="replace")) in STACK_DAEMONS
                                   and any(b"cryptcost-" in c for c in cmd) or _ours(pid)):
                found.append(f"process {pid} {b' '.join(cmd).decode(errors='replace')[:120]}")
    if os.path.isdir("/run/netns"):
        found += [f"netns {n}" for n in os.listdir("/run/netns") if n.startswith("cc-")]
    for d in state_dirs:
        if os.path.isdir(d):
            found += [f"journal {d}/{j}" for j in os.listdir(d) if j.startswith("journal-")]
    if MASK_BEFORE is not None:
        mask = open(WORKQUEUE_MASK).read().strip()
        if mask != MASK_BEFORE:
            found.append(f"setting {WORKQUEUE_MASK} = {mask}, not {MASK_BEFORE} as before")
    return found


@pytest.fixture(scope="session", autouse=True)
def nothing_left_behind(tmp_path_factory):
    before = set(leftovers([]))
    yield
    base = str(tmp_path_factory.getbasetemp())
    states = [os.path.join(root, d) for root, dirs, _ in os.walk(base) for d in dirs if d == "state"]
    after = [x for x in leftovers(states) if x not in before]
    assert after == [], "left behind after the test session:\n" + "\n".join(after)


def need_root():
    if os.geteuid() != 0:
        pytest.skip("needs root")
