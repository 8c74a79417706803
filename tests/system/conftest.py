"""System tests: real stacks as root. After the whole session, nothing of
cryptcost's may be left: mounts, loop devices, stack daemons, journals.

What an earlier, killed test session left behind is released first, from its
journals (``tests/conftest.py``, before the unit tests too); anything else
that predates the session is not counted against it."""

from __future__ import annotations

import os
import subprocess

import pytest

from tests.conftest import skip_or_fail

STACK_DAEMONS = ("gocryptfs", "cryfs", "securefs", "encfs", "rclone", "qemu-storage-d", "bindfs")
# Network stacks' daemons carry no "cryptcost-" path in every argv: they are found by the run token
# in
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



from cryptcost.lifecycle.release import SETTINGS          # noqa: E402

WORKQUEUE_MASK = "/sys/devices/virtual/workqueue/cpumask"
PAGE_REPORTING_ORDER = "/sys/module/page_reporting/parameters/page_reporting_order"
assert {WORKQUEUE_MASK, PAGE_REPORTING_ORDER} == set(SETTINGS), SETTINGS
# Every setting as the session found it: a pass on N CPUs changes the workqueue mask, and every
# measuring run holds free page reporting off; each must be restored.
SETTINGS_BEFORE = {path: open(path).read().strip() for path in SETTINGS if os.path.exists(path)}
MASK_BEFORE = SETTINGS_BEFORE.get(WORKQUEUE_MASK)


def leftovers(state_dirs: list[str]) -> list[str]:
    """What of cryptcost's exists now and did not when the session began (see BEFORE_SESSION)."""
    return [x for x in _everything(state_dirs) if x not in BEFORE_SESSION]


def _everything(state_dirs: list[str]) -> list[str]:
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
            if (
                cmd
                and cmd[0]
                and (
                    os.path.basename(cmd[0].decode(errors="replace")) in STACK_DAEMONS
                    and any(b"cryptcost-" in c for c in cmd)
                    or _ours(pid)
                )
            ):
                found.append(f"process {pid} {b' '.join(cmd).decode(errors='replace')[:120]}")
    if os.path.isdir("/run/netns"):
        found += [f"netns {n}" for n in os.listdir("/run/netns") if n.startswith("cc-")]
    for d in state_dirs:
        if os.path.isdir(d):
            found += [f"journal {d}/{j}" for j in os.listdir(d) if j.startswith("journal-")]
    for path, before in SETTINGS_BEFORE.items():
        value = open(path).read().strip()
        if value != before:
            found.append(f"setting {path} = {value}, not {before} as before")
    return found


# What no journal of this machine's test sessions accounts for (someone else's run, or a
# session whose journal is gone): present before any test ran, so no test is blamed for it.
BEFORE_SESSION = frozenset(_everything([]))


@pytest.fixture(scope="session", autouse=True)
def nothing_left_behind(tmp_path_factory):
    yield
    base = str(tmp_path_factory.getbasetemp())
    states = [
        os.path.join(root, d) for root, dirs, _ in os.walk(base) for d in dirs if d == "state"
    ]
    after = leftovers(states)  # what predates the session is not counted (BEFORE_SESSION)
    assert after == [], "left behind after the test session:\n" + "\n".join(after)


@pytest.fixture(scope="session")
def guest_boots(request, tmp_path_factory):
    """The guest boots of the selected tests that read them (``stock``: test_vm_matrix,
    ``run_vm``: test_run_vm, ``peer``: test_vm_peer), two at a time
    (``tests/system/test_vm_matrix.boot_all``); all of them end before the first test that
    reads one, so that no guest runs beside a test that measures on this host."""
    from tests.system.test_vm_matrix import boot_all
    wanted = {name for item in request.session.items for name in item.fixturenames}
    return boot_all(wanted & {"stock", "run_vm", "peer"}, tmp_path_factory)


def need_root(*stacks: str) -> None:
    """A test that needs root skips without it — or fails, when CRYPTCOST_REQUIRE names
    ``root`` (as .ci/run does) or one of the ``stacks`` the test measures."""
    if os.geteuid() != 0:
        skip_or_fail(("root", *stacks), f"needs root (running as uid {os.geteuid()})")
