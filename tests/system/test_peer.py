"""``--link peer:HOST`` for real, as root: a second "host" is a network
namespace of this machine with its own sshd on its own address, reached
over a veth pair from a second namespace where the controller runs; the
worker is this checkout's cryptcost, with a state directory of its own.
Everything crosses ssh as it would between two machines: the session,
the worker's JSON lines, the stack's far end built and released by the
worker, the wire captured at both ends."""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.conftest import skip_or_fail
from tests.system.conftest import leftovers, need_root
from tests.system.keyscan import scan_debug_run

ADDR_A, ADDR_B = "10.206.0.1", "10.206.0.2"


def _sh(*argv: str) -> None:
    subprocess.run(argv, check=True, capture_output=True, timeout=60)


def _user_view(d: Path, user: str) -> list[str]:
    """A shell prelude that makes ``user`` (no password, ``sudo -n`` to root) exist in the mount
    namespace it runs in only: /etc/passwd, shadow, group and sudoers bind-mounted over from
    copies in ``d``. The host's own files are never changed."""
    home = d / "home"
    home.mkdir(parents=True)
    os.chown(home, 4242, 4242)
    (d / "passwd").write_text(
        Path("/etc/passwd").read_text() + f"{user}:x:4242:4242::{home}:/bin/sh\n"
    )
    (d / "shadow").write_text(Path("/etc/shadow").read_text() + f"{user}:*:19000:0:99999:7:::\n")
    (d / "group").write_text(Path("/etc/group").read_text() + f"{user}:x:4242:\n")
    # no secure_path: sudo keeps the session's PATH, without sbin (the worker adds it)
    (d / "sudoers").write_text(f"root ALL=(ALL:ALL) ALL\n{user} ALL=(root) NOPASSWD: ALL\n")
    os.chmod(d / "shadow", 0o640)
    os.chmod(d / "sudoers", 0o440)
    return [f"mount --bind {d / f} /etc/{f}" for f in ("passwd", "shadow", "group", "sudoers")]


@contextmanager
def _hosts(tmp_path, names: list[str], linked: bool = False, user: str = "root"):
    """Namespace ``cc-<tag>-pa`` (the controller's), and for each of ``names`` a
    namespace of its own with sshd on 10.206.<i>.2:22 (``SetEnv`` gives its
    sessions a state directory of their own), joined to the controller's by a
    veth pair; one ssh config that names them all. ``linked``: the first two
    peers joined too (10.206.9.1 ↔ .2), the second reached from the first as
    ``<second>-via-<first>``. ``user``: the one ssh logs in as, made to exist (with ``sudo
    -n`` to root) in each peer's mount namespace only."""
    need_root("peer")
    for tool in ("ssh", "sshd", "ssh-keygen"):
        path = "/usr/sbin/sshd" if tool == "sshd" else subprocess.run(
            ["sh", "-c", f"command -v {tool}"], capture_output=True, text=True).stdout.strip()
        if not path or not os.path.exists(path):
            skip_or_fail("peer", f"{tool} is not installed (openssh-server, openssh-client)")
    tag = secrets.token_hex(2)
    d = tmp_path / "peer"
    d.mkdir()
    ns_a = f"cc-{tag}-pa"
    made, daemons, hosts = [], [], {}
    try:
        _sh("ip", "netns", "add", ns_a)
        made.append(ns_a)
        _sh("ip", "-n", ns_a, "link", "set", "lo", "up")
        _sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / "client"))
        (d / "authorized_keys").write_text((d / "client.pub").read_text())
        config, known = [], []
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
        env = {k: v for k, v in os.environ.items() if k != "CRYPTCOST_RUN"}
        for i, name in enumerate(names):
            ns_b, a, b = f"cc-{tag}-p{i}", f"10.206.{i}.1", f"10.206.{i}.2"
            _sh("ip", "netns", "add", ns_b)
            made.append(ns_b)
            _sh("ip", "-n", ns_a, "link", "add", f"cc{tag}a{i}", "type", "veth", "peer", "name",
                f"cc{tag}b{i}", "netns", ns_b)
            for ns, dev, addr in ((ns_a, f"cc{tag}a{i}", a), (ns_b, f"cc{tag}b{i}", b)):
                _sh("ip", "-n", ns, "addr", "add", f"{addr}/30", "dev", dev)
                _sh("ip", "-n", ns, "link", "set", dev, "up")
                _sh("ip", "-n", ns, "link", "set", "lo", "up")
            key = d / f"host{i}"
            _sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key))
            state = tmp_path / f"peerhost{i}" / "state"      # the peer's own state directory
            state.mkdir(parents=True)
            conf = d / f"sshd_config{i}"
            conf.write_text("\n".join([
                "Port 22", "ListenAddress 0.0.0.0", f"HostKey {key}",     # its namespace's only
                # a user who is not root cannot read this test's private directory: root's cat can
                *([f"AuthorizedKeysFile {d / 'authorized_keys'}"] if user == "root" else
                  ["AuthorizedKeysFile none",
                   f"AuthorizedKeysCommand /bin/cat {d / 'authorized_keys'}",
                   "AuthorizedKeysCommandUser root"]),
                "PermitRootLogin prohibit-password",
                "PasswordAuthentication no", "KbdInteractiveAuthentication no", "UsePAM no",
                "StrictModes no", "PidFile none", f"SetEnv CRYPTCOST_STATE_DIR={state}"]) + "\n")
            known.append(f"{b} {(d / f'host{i}.pub').read_text()}")
            config += [
                f"Host {name}", f"  HostName {b}", f"  User {user}",
                f"  IdentityFile {d / 'client'}", f"  UserKnownHostsFile {d / 'known_hosts'}",
                "  StrictHostKeyChecking yes",
            ]
            view = [] if user == "root" else _user_view(Path(d / f"view{i}"), user)
            daemons.append(subprocess.Popen(
                ["ip", "netns", "exec", ns_b, "sh", "-c",
                 " && ".join(view + [f"exec /usr/sbin/sshd -D -e -f {conf}"])],
                stdout=subprocess.DEVNULL, stderr=open(d / f"sshd{i}.log", "wb"), env=env))
            deadline = time.monotonic() + 20
            while subprocess.run(["ip", "netns", "exec", ns_b, "ss", "-Hltn", "sport = :22"],
                                 capture_output=True, text=True).stdout.strip() == "":
                assert time.monotonic() < deadline, (d / f"sshd{i}.log").read_text()
                time.sleep(0.1)
            hosts[name] = {"ns": {"a": ns_a, "b": ns_b}, "state": state}
        if linked:
            (p0, p1), (n0, n1) = [hosts[n]["ns"]["b"] for n in names[:2]], names[:2]
            _sh("ip", "-n", p0, "link", "add", f"cc{tag}l0", "type", "veth", "peer", "name",
                f"cc{tag}l1", "netns", p1)
            for ns, dev, addr in ((p0, f"cc{tag}l0", "10.206.9.1"),
                                  (p1, f"cc{tag}l1", "10.206.9.2")):
                _sh("ip", "-n", ns, "addr", "add", f"{addr}/30", "dev", dev)
                _sh("ip", "-n", ns, "link", "set", dev, "up")
            config += [f"Host {n1}-via-{n0}", "  HostName 10.206.9.2", "  User root",
                       f"  IdentityFile {d / 'client'}",
                       f"  UserKnownHostsFile {d / 'known_hosts'}",
                       "  StrictHostKeyChecking yes", f"  HostKeyAlias {n1}"]
            known.append(f"{n1} {(d / 'host1.pub').read_text()}")
        (d / "known_hosts").write_text("".join(known))
        (d / "ssh_config").write_text("\n".join(config) + "\n")
        yield {"hosts": hosts, "ns": made, "config": str(d / "ssh_config"),
               "command": f"{sys.executable} -m cryptcost"}
    finally:
        for sshd in daemons:
            sshd.terminate()
            sshd.wait(timeout=10)
        for n in made:
            subprocess.run(["ip", "netns", "delete", n], capture_output=True, timeout=30)


@pytest.fixture
def peer(tmp_path):
    """One peer, ``cc-peer``: the controller's namespace ``ns["a"]``, the peer's ``ns["b"]``,
    its state directory, the ssh config, and the command that runs cryptcost there."""
    with _hosts(tmp_path, ["cc-peer"]) as got:
        yield {**got["hosts"]["cc-peer"], "config": got["config"], "command": got["command"]}


def _left(peer, tmp_path) -> list[str]:
    """What either side left (the fixture's own two namespaces aside)."""
    ours = {f"netns {n}" for n in peer["ns"].values()}
    return [x for x in leftovers([str(peer["state"]), str(tmp_path / "state")]) if x not in ours]


def _controller(peer, tmp_path, *args: str, **kw) -> subprocess.Popen:
    env = {**os.environ, "XDG_DATA_HOME": str(tmp_path / "data"),
           "CRYPTCOST_STATE_DIR": str(tmp_path / "state")}
    env.pop("CRYPTCOST_RUN", None)
    argv = ["ip", "netns", "exec", peer["ns"]["a"], sys.executable, "-m", "cryptcost", "network",
            "--link", "peer:cc-peer", "--ssh-config", peer["config"],
            "--peer-command", peer["command"], *args]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env, cwd=tmp_path, **kw)


@pytest.mark.root
def test_a_peer_over_ssh_holds_end_b_is_measured_wire_checked_released_and_keeps_every_key(
        peer, tmp_path):
    """tls, ssh, wireguard, ipsec and smb3 between the controller and a peer reached with ssh,
    in one --debug run: measured against plain TCP over the same link, each end's daemons'
    CPU counted by that end, the wire captured at both ends, the peer's fingerprint and the
    link's route and round trip recorded, and nothing left on either side. The keys of every
    stack at both ends (read from both hosts' key tmpfs while the run measures: ipsec's
    pre-shared key, smb3's password among them) are in none of the controller's output,
    store, report or journal, nor in the worker's debug log or the peer's journal, nor in any
    command line on either side."""
    secrets_, found, everything = scan_debug_run(
        tmp_path,
        [
            "network", "--link", "peer:cc-peer", "--ssh-config", peer["config"], "--peer-command",
            peer["command"].replace("-m cryptcost", "-m cryptcost --debug"), "--stacks",
            "tls,ssh,wireguard,ipsec,smb3", "--workloads", "send,put", "--file-size", "4M",
            "--seconds", "1", "--min-samples", "2", "--max-samples", "2", "--json",
        ],
        prefix=["ip", "netns", "exec", peer["ns"]["a"]],
        states=[peer["state"]],
        logs="/tmp/cryptcost-peer-*/ssh.log",
        timeout=600,
    )
    assert len(secrets_) >= 4, "read no key material during the run"
    assert b"DEBUG cryptcost" in everything["logs"], "the worker's debug log was not read"
    assert not found, found
    err = everything["stderr"].decode(errors="replace")
    results = json.loads(everything["stdout"])["results"]
    by = {r["stack"].split(":")[0]: r for r in results if r["op"] == "send"}
    assert set(by) == {"tls", "ssh", "wireguard", "ipsec", "tcp"}, err[-3000:]
    assert any(r["stack"].startswith("smb3") and r["op"] == "put" for r in results), err[-3000:]
    for name in ("tls", "ssh", "wireguard", "ipsec"):
        r = by[name]
        assert r["role"] == "measured" and r["baseline"] == "tcp" and r["overhead"] is not None
        assert r["link"] == "peer" and r["peer"] == "cc-peer", r
        assert r["wire"]["verdict"] == "encrypted" and r["wire"]["packets"] > 0, r["wire"]
        daemons = r["daemon_cpu_s_per_gb"]
        at_b = [k for k in daemons if k.endswith("@b")]
        assert at_b and all(daemons[k] > 0 for k in at_b), daemons      # counted by the worker
        assert r["cpu_s_per_gb"]["b"] > 0
    link = by["tls"]["params"]["link"]
    assert link["host"] == "cc-peer" and link["addresses"] == {"a": ADDR_A, "b": ADDR_B}
    assert link["routes"]["b"]["src"] == ADDR_B and link["rtt_ms"] > 0
    assert link["peer"]["kernel"] and link["peer"]["crypto_flags"] and link["peer"]["boot_id"]
    assert link["shared_cpus"].startswith("the peer is this machine"), link
    assert by["tls"]["shared_cpus"] is True  # so the report reads CPU-s/GB, not Gbit/s
    assert by["tls"]["params"]["negotiated"]["suite"] == "TLS_AES_128_GCM_SHA256"
    assert by["wireguard"]["params"]["negotiated"]["handshake"] is True
    assert by["ipsec"]["params"]["negotiated"]["esp"] == "AES_GCM_16-128"
    assert _left(peer, tmp_path) == []
    assert os.listdir(peer["state"]) == ["lock"]           # the worker's journal, released and gone


@pytest.mark.root
def test_an_smb3_share_on_the_peer_moves_every_file_checked_there(peer, tmp_path):
    """smbd and its share (a tmpfs the worker mounts in the peer's own mount namespace, which
    this host cannot see) at end b, smbclient here: each file put is checked by sha256sum at
    end b, each file got is checked here, the share is released with the worker."""
    child = _controller(peer, tmp_path, "--stacks", "smb3:aes-128-gcm", "--workloads",
                        "put,get,smallfiles", "--file-size", "8M", "--min-samples", "1",
                        "--max-samples", "1", "--warmup", "0", "--json")
    out, err = child.communicate(timeout=600)
    assert child.returncode == 0, err[-3000:]
    results = {(r["stack"], r["workload"]): r for r in json.loads(out)["results"]}
    for stack in ("smb3:aes-128-gcm", "smb3:off"):
        for workload in ("put", "get", "smallfiles"):
            r = results[(stack, workload)]
            assert r["median_bytes_per_s"] > 0 and r["link"] == "peer", r
            assert r["wire"]["verdict"] == ("plaintext" if stack == "smb3:off" else "encrypted")
    assert results[("smb3:aes-128-gcm", "put")]["params"]["negotiated"]["cipher"] == "AES-128-GCM"
    assert _left(peer, tmp_path) == []
    assert os.listdir(peer["state"]) == ["lock"]


@pytest.mark.root
def test_a_peer_reached_as_a_user_runs_its_worker_with_sudo(tmp_path):
    """ssh as a user who is not root, with --peer-sudo: the worker runs under ``sudo -n``
    (which drops SSH_CONNECTION: the peer's address is then the one ssh resolves), measures,
    and releases end b. (A worker that is not root refuses, naming --peer-sudo:
    tests/unit/test_worker.py.)"""
    if not os.path.exists("/usr/bin/sudo"):
        skip_or_fail("peer", "sudo is not installed (make installs it)")
    with _hosts(tmp_path, ["cc-peer"], user="ccpeer") as got:
        host = got["hosts"]["cc-peer"]
        peer = {**host, "config": got["config"]}
        command = f"env CRYPTCOST_STATE_DIR={host['state']} {got['command']}"
        child = _controller({**peer, "command": command}, tmp_path, "--peer-sudo", "--stacks",
                            "tls", "--workloads", "send", "--seconds", "1", "--min-samples", "1",
                            "--max-samples", "1", "--warmup", "0", "--json")
        out, err = child.communicate(timeout=600)
        assert child.returncode == 0, err[-3000:]
        results = {r["stack"].split(":")[0]: r for r in json.loads(out)["results"]}
        assert results["tls"]["wire"]["verdict"] == "encrypted", results["tls"]["wire"]
        assert results["tls"]["params"]["link"]["addresses"] == {"a": ADDR_A, "b": ADDR_B}
        assert _left(peer, tmp_path) == []
        assert os.listdir(host["state"]) == ["lock"]


@pytest.mark.root
def test_a_controller_killed_mid_run_leaves_nothing_on_the_peer(peer, tmp_path):
    """SIGKILL to the controller while it measures: the session's ssh reads
    the end of its input, the worker reads the end of its own and releases
    every resource of end b (daemons, directories, key tmpfs); ``cleanup``
    on this host releases the rest."""
    child = _controller(peer, tmp_path, "--stacks", "tls", "--workloads", "send", "--seconds",
                        "2", "--min-samples", "8", "--max-samples", "8",
                        start_new_session=True)
    journal = _wait_for_measuring(peer, child)
    time.sleep(2)                                          # into the measurement
    os.killpg(child.pid, signal.SIGKILL)
    child.wait(timeout=30)
    deadline = time.monotonic() + 60
    while journal.exists():
        assert time.monotonic() < deadline, journal.read_text()
        time.sleep(0.2)
    env = {**os.environ, "CRYPTCOST_STATE_DIR": str(tmp_path / "state")}
    env.pop("CRYPTCOST_RUN", None)
    subprocess.run([sys.executable, "-m", "cryptcost", "cleanup"], capture_output=True, text=True,
                   env=env, timeout=300, check=True)
    deadline = time.monotonic() + 30
    while _left(peer, tmp_path):
        assert time.monotonic() < deadline, _left(peer, tmp_path)
        time.sleep(0.5)


def _worker_pid(peer) -> int | None:
    """The worker serving this test's peer (its state directory names it)."""
    mark = f"CRYPTCOST_STATE_DIR={peer['state']}".encode()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = open(f"/proc/{pid}/cmdline", "rb").read()
            env = open(f"/proc/{pid}/environ", "rb").read()
        except OSError:
            continue
        if b"worker" in cmd.split(b"\0") and mark in env.split(b"\0"):
            return int(pid)
    return None


def _wait_for_measuring(peer, child) -> Path:
    """The peer's journal, once stunnel runs there (the run is measuring)."""
    deadline = time.monotonic() + 120
    while True:
        assert time.monotonic() < deadline and child.poll() is None, child.stderr.read()
        found = [p for p in peer["state"].iterdir() if p.name.startswith("journal-")]
        text = found[0].read_text() if found else ""
        if '"daemon"' in text and "stunnel4" in text:
            return found[0]
        time.sleep(0.2)


@pytest.mark.root
def test_a_worker_terminated_mid_run_releases_end_b_and_the_run_fails_keeping_its_results(
        peer, tmp_path):
    """SIGTERM to the worker while the run measures: it releases everything
    it held on the peer by itself; the controller's next request finds the
    session ended, the configurations still to measure fail with that
    reason, the run ends (exit 1) keeping what it measured, and nothing is
    left on either side without any cleanup."""
    child = _controller(peer, tmp_path, "--stacks", "tls", "--workloads", "send", "--seconds",
                        "2", "--min-samples", "8", "--max-samples", "8", "--json")
    journal = _wait_for_measuring(peer, child)
    time.sleep(3)
    os.kill(_worker_pid(peer), signal.SIGTERM)
    out, err = child.communicate(timeout=300)
    assert child.returncode == 1, err
    assert "the session to cc-peer ended" in err, err
    assert not journal.exists()                       # released by the worker itself
    assert _left(peer, tmp_path) == []


@pytest.mark.root
def test_a_peer_that_cannot_start_the_worker_is_one_line_and_exit_2(peer, tmp_path):
    """A peer without cryptcost (here: a command that does not exist) fails the
    run at once, saying what to check, before any stack is built."""
    bad = _controller({**peer, "command": "/nonexistent/cryptcost"}, tmp_path, "--stacks", "tls",
                      "--workloads", "send")
    out, err = bad.communicate(timeout=120)
    assert bad.returncode == 2, err
    lines = err.strip().splitlines()
    assert lines[-1].startswith("error: --link peer:cc-peer: ssh could not start"), err
    assert "Traceback" not in err
    assert _left(peer, tmp_path) == []


@pytest.mark.root
def test_a_fleet_run_measures_every_host_at_once_and_lays_them_side_by_side(tmp_path):
    """``fleet run`` on two peers (and one host that does not resolve): the
    plan crosses to each, each runs it at once into a store of its own, each
    run is imported here with its host's fingerprint, the results come side
    by side; the unreachable host is reported and does not stop the others.
    Then the pair: tls from the first peer to the second, run on the first."""
    plan = tmp_path / "plan.toml"
    plan.write_text('storage = false\nnetwork = false\n[ciphers]\nengines = ["openssl"]\n'
                    'algorithms = ["aes-128-gcm"]\nsizes = [16384]\nseconds = 1\n'
                    '[policy]\nmin_samples = 2\nmax_samples = 2\n')
    with _hosts(tmp_path, ["cc-h1", "cc-h2"], linked=True) as fleet:
        env = {**os.environ, "XDG_DATA_HOME": str(tmp_path / "data"),
               "CRYPTCOST_STATE_DIR": str(tmp_path / "state")}
        env.pop("CRYPTCOST_RUN", None)
        done = subprocess.run(
            ["ip", "netns", "exec", fleet["ns"][0], sys.executable, "-m", "cryptcost", "fleet",
             "run", "--hosts", "cc-h1,cc-nowhere.invalid,cc-h2", "--plan", str(plan),
             "--pairs", "cc-h1:cc-h2-via-cc-h1", "--pair-stacks", "tls", "--pair-options",
             "--workloads send --seconds 1 --min-samples 2 --max-samples 2 --page-reporting keep",
             "--ssh-config", fleet["config"], "--peer-command", fleet["command"], "--json",
             "--", "--page-reporting", "keep"],
            capture_output=True, text=True, env=env, timeout=600, cwd=tmp_path)
        assert done.returncode == 1, done.stderr[-3000:]           # one host failed
        out = json.loads(done.stdout)
        by = {h["host"]: h for h in out["hosts"]}
        assert by["cc-h1"]["run"] and by["cc-h2"]["run"], done.stderr[-3000:]
        assert by["cc-nowhere.invalid"]["run"] is None
        assert "could not run it (exit 255)" in by["cc-nowhere.invalid"]["error"]
        assert "resolve" in by["cc-nowhere.invalid"]["error"]          # ssh's own words
        rows = [r for r in out["rows"] if r["label"].startswith("openssl aes-128-gcm")]
        assert rows and all(set(r["hosts"]) == {"cc-h1", "cc-h2"} for r in rows), out["rows"]
        assert all(h["median"] > 0 for r in rows for h in r["hosts"].values())
        assert set(out["environment"]) == {"cc-h2"}            # each host against the first
        # the namespaces share this host's CPU and kernel: "alike", or a gap flagged as unexplained
        [said] = out["differences"]
        assert said.startswith("cc-h2 is like cc-h1") or "in nothing cryptcost records" in said
        assert [c["label"] for c in out["columns"]] == ["cc-h1", "cc-h2", "cc-h1→cc-h2-via-cc-h1"]
        report = (tmp_path / "cryptcost-fleet.html").read_text()
        assert all(f"<th>{h}</th>" in report for h in ("cc-h1", "cc-h2", "cc-h1→cc-h2-via-cc-h1"))
        assert "What differs between the hosts" in report and "<svg" in report
        pair = by.get("cc-h1")                                  # the first entry of cc-h1: its run
        [across] = [h for h in out["hosts"] if h["peer"]]
        assert across["host"] == "cc-h1" and across["peer"] == "cc-h2-via-cc-h1"
        assert across["run"], done.stderr[-3000:]
        tls = [r for r in out["rows"] if r["label"].startswith("tls")]
        assert tls and set(tls[0]["hosts"]) == {"cc-h1→cc-h2-via-cc-h1"}
        assert tls[0]["hosts"]["cc-h1→cc-h2-via-cc-h1"]["overhead"] is not None
        assert pair is not None
        for line in ("cc-h1: started", "cc-h2: imported as run", "cc-nowhere.invalid: FAILED"):
            assert line in done.stderr, done.stderr[-3000:]
        listed = subprocess.run([sys.executable, "-m", "cryptcost", "list", "--json"],
                                capture_output=True, text=True, env=env, check=True).stdout
        assert len(json.loads(listed)) == 3            # both hosts' runs and the pair's, here
        states = [str(h["state"]) for h in fleet["hosts"].values()] + [str(tmp_path / "state")]
        ours = {f"netns {n}" for n in fleet["ns"]}
        assert [x for x in leftovers(states) if x not in ours] == []


@pytest.mark.root
def test_a_worker_killed_with_sigkill_leaves_its_journal_for_cleanup_on_the_peer(peer, tmp_path):
    """SIGKILL to the worker: it cannot release, so its daemons and its key tmpfs
    stay on the peer with its journal; the run here fails and releases its own
    end; ``cryptcost cleanup`` on the peer then releases the rest."""
    child = _controller(peer, tmp_path, "--stacks", "tls", "--workloads", "send", "--seconds",
                        "2", "--min-samples", "8", "--max-samples", "8")
    journal = _wait_for_measuring(peer, child)
    os.kill(_worker_pid(peer), signal.SIGKILL)
    child.communicate(timeout=300)
    assert child.returncode == 1
    assert journal.exists() and any("stunnel4" in x for x in _left(peer, tmp_path))
    env = {**os.environ, "CRYPTCOST_STATE_DIR": str(peer["state"])}
    env.pop("CRYPTCOST_RUN", None)
    done = subprocess.run([sys.executable, "-m", "cryptcost", "cleanup"], capture_output=True,
                          text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert _left(peer, tmp_path) == []
