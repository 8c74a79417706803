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


def _entry(day: str, pkgs: str) -> str:
    return (f"Start-Date: 2026-01-0{day}  10:00:00\n"
            f"Commandline: apt-get install -y -qq --no-install-recommends {pkgs}\n"
            "Install: " + ", ".join(f"{p}:amd64 (1)" for p in pkgs.split()) + "\n"
            f"End-Date: 2026-01-0{day}  10:01:00\n\n")


def test_each_earlier_install_is_mended_once_and_a_users_choice_since_is_kept(tmp_path,
                                                                             monkeypatch):
    """The first install disables what an earlier version's install left enabled; the user then
    enables smbd again, and a later install leaves it so; an older checkout's install made after
    that is mended in its turn, and only its own units are disabled."""
    log = tmp_path / "history.log"
    log.write_text(_entry("1", "samba fio"))
    enabled = {"smbd.service", "nmbd.service", "nginx.service"}
    disabled: list[list[str]] = []
    monkeypatch.setattr(apt, "HISTORY", tmp_path)
    monkeypatch.setenv("CRYPTCOST_SETUP_RECORD", str(tmp_path / "setup.json"))
    monkeypatch.setattr(apt, "installed", lambda packages=None: {"samba", "fio", "rpcbind",
                                                                 "nginx"})
    monkeypatch.setattr(apt, "unit_states", lambda: {u: "enabled" for u in enabled})
    monkeypatch.setattr(apt, "units_of", lambda p: {
        "samba": ["smbd.service", "nmbd.service"], "rpcbind": ["rpcbind.service"],
        "nginx": ["nginx.service"]}.get(p, []))

    def disable(units):
        disabled.append(list(units))
        enabled.difference_update(units)
    monkeypatch.setattr(apt, "disable", disable)
    said: list[str] = []
    first = apt.mend_earlier(say=said.append)
    assert first["disabled"] == ["nmbd.service", "smbd.service"] and "nginx.service" in enabled
    enabled.add("smbd.service")                        # the user's own choice, after the mend
    assert apt.mend_earlier(say=said.append) == first and disabled[-1] == [
        "nmbd.service", "smbd.service"] and len(disabled) == 1
    log.write_text(_entry("1", "samba fio") + _entry("4", "rpcbind"))  # an older checkout's make
    enabled.add("rpcbind.service")
    later = apt.mend_earlier(say=said.append)
    assert disabled[-1] == ["rpcbind.service"] and "smbd.service" in enabled
    assert later["installs"] == ["2026-01-01  10:00:00", "2026-01-04  10:00:00"]
    assert later["disabled"] == ["nmbd.service", "rpcbind.service", "smbd.service"]
    assert len(said) == 2 and "rpcbind.service" in said[-1]


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
