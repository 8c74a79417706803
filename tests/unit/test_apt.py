"""How the set-up installs: no service starts while dpkg runs, and an earlier version's
installs are told from the user's in apt's history."""

from __future__ import annotations

import subprocess
import sys

import pytest

from cryptcost.host import apt


def test_a_machine_set_up_by_an_earlier_version_is_told_from_the_users_installs(tmp_path,
                                                                                  monkeypatch):
    """apt's history: the project's own command lines are found, a user's are not."""
    log = tmp_path / "history.log"
    log.write_text(
        "Start-Date: 2026-01-01  10:00:00\n"
        "Commandline: apt-get install -y -qq --no-install-recommends samba fio\n"
        "Install: samba:amd64 (2:4.17.12), fio:amd64 (3.33-3), libfoo1:amd64 (1.0, automatic)\n"
        "End-Date: 2026-01-01  10:01:00\n\n"
        "Start-Date: 2026-01-02  10:00:00\n"
        "Commandline: apt-get install samba nginx\n"
        "Install: nginx:amd64 (1.22)\n"
        "End-Date: 2026-01-02  10:01:00\n\n"
        "Start-Date: 2026-01-03  10:00:00\n"
        "Commandline: apt-get install -y -qq --no-install-recommends postgresql\n"
        "Install: postgresql:amd64 (15)\n"
        "End-Date: 2026-01-03  10:01:00\n")
    monkeypatch.setattr(apt, "HISTORY", tmp_path)
    found = apt.earlier_installs()
    assert [e["start"] for e in found] == ["2026-01-01  10:00:00"]
    assert found[0]["installed"] == ["samba", "fio", "libfoo1"]


@pytest.mark.parametrize("already", [None, "exit 101\n", "exit 0\n"])
def test_no_service_starts_while_packages_install(tmp_path, monkeypatch, already):
    """The policy-rc.d says 101 while dpkg runs; one already there is as it was after."""
    policy, saved = tmp_path / "policy-rc.d", tmp_path / "policy-rc.d.cryptcost-saved"
    monkeypatch.setattr(apt, "POLICY", policy)
    monkeypatch.setattr(apt, "SAVED", saved)
    if already:
        policy.write_text("#!/bin/sh\n" + already)
    with apt.no_service_starts():
        done = subprocess.run([sys.executable, "-c", "import subprocess,sys; sys.exit("
                               f"subprocess.run(['sh', '{policy}', 'smbd', 'start']).returncode)"])
        assert done.returncode == 101
    assert (policy.read_text() if policy.exists() else None) == (
        "#!/bin/sh\n" + already if already else None)
    assert not saved.exists()
