"""What the set-up left on this host: no unit of a package it installed enabled (unless it was
before), nothing of those packages listening on a port. Run after ``make`` (CI runs it after
the set-up of both tiers)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import psutil

from cryptcost.host import apt
from tests.conftest import skip_or_fail


def project_packages() -> set[str]:
    """The packages cryptcost's installs brought to this host: what its record says, and what
    apt's history says an earlier version's installs brought."""
    record = apt.read_record()
    brought = {p for change in record["installs"] for p in change["brought"]}
    brought |= {p for entry in apt.earlier_installs() for p in entry["installed"]}
    return brought & apt.installed()


def left_as_they_were() -> set[str]:
    """The units the record says were enabled before the install that brought their package."""
    return {u for change in apt.read_record()["installs"] for u in change["left"]}


def enabled_units(packages: set[str]) -> dict[str, list[str]]:
    states = apt.unit_states()
    keep = left_as_they_were()
    found = {p: [u for u in apt.units_of(p) if states.get(u) in apt.ENABLED and u not in keep]
             for p in sorted(packages)}
    return {p: units for p, units in found.items() if units}


def test_no_unit_of_a_package_the_set_up_installed_reads_enabled():
    if os.geteuid() != 0 or not apt.unit_states():
        skip_or_fail("root", "needs root and systemctl to read the units' states")
    packages = project_packages()
    found = enabled_units(packages)
    assert found == {}, (
        f"{sum(map(len, found.values()))} unit(s) of {len(found)} of the {len(packages)} "
        "package(s) cryptcost's set-up installed read enabled:\n"
        + "\n".join(f"  {p}: {', '.join(units)}" for p, units in found.items()))


def test_nothing_the_set_up_installed_listens_on_this_hosts_ports():
    """A service started by an install would listen in this host's own network namespace
    (cryptcost's daemons run in namespaces of their own)."""
    if os.geteuid() != 0:
        skip_or_fail("root", "needs root to see every listening socket's process")
    files = set()
    for package in project_packages():
        done = subprocess.run(["dpkg-query", "-L", package], capture_output=True, text=True)
        files |= set(done.stdout.split())
    listening = []
    for conn in psutil.net_connections(kind="inet"):
        bound = conn.status == psutil.CONN_LISTEN or conn.type == socket.SOCK_DGRAM
        if not bound or not conn.pid:
            continue
        try:
            exe = psutil.Process(conn.pid).exe()
        except psutil.Error:
            continue
        if exe in files:
            listening.append(f"{exe} (pid {conn.pid}) on port {conn.laddr.port}")
    assert listening == [], "\n".join(listening)


HIDDEN = [
    (("network", "--stacks", "smb3"), "/usr/sbin/smbd", "cryptcost install smb3"),
    (("storage", "--stacks", "gocryptfs"), "/usr/bin/gocryptfs", "cryptcost install gocryptfs"),
    (("vm", "--", "probe"), "/usr/bin/qemu-system-x86_64", "cryptcost install guest"),
]


def test_what_lacks_its_packages_says_in_one_line_which_command_installs_them(tmp_path):
    """A stack outside the quick suite, one inside it, and the guest, each on a host without its
    program: each program is hidden from cryptcost alone, in a mount namespace of its own, by a
    file that cannot be executed bound over it (nothing outside that namespace changes)."""
    if os.geteuid() != 0:
        skip_or_fail("root", "needs root for a mount namespace of its own")
    blank = tmp_path / "not-installed"
    blank.write_text("")
    blank.chmod(0o644)
    for argv, program, command in HIDDEN:
        if not os.path.exists(program):
            skip_or_fail(("smb3", "gocryptfs", "vm"), f"{program} is not installed")
        script = (f"mount --bind {blank} {program} && exec {sys.executable} -m cryptcost "
                  + " ".join(argv))
        done = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                               script], capture_output=True, text=True, timeout=120)
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 2 and len(lines) == 1, (argv, done.returncode, done.stderr)
        assert lines[0].startswith("error: ") and f"(install: {command})" in lines[0], lines
        assert "Traceback" not in done.stderr
