"""``cryptcost worker``'s protocol, spoken over pipes (no ssh): the greeting,
the refusal of another schema version, each end operation, and the release
of everything when its input ends."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import time

import pytest

from cryptcost.links.worker import greeting, mismatch
from tests.conftest import skip_or_fail


def _need_root() -> None:
    if os.geteuid() != 0:
        skip_or_fail("root", f"the worker needs root (running as uid {os.geteuid()})")


def _worker(tmp_path) -> subprocess.Popen:
    env = {**os.environ, "CRYPTCOST_STATE_DIR": str(tmp_path / "state")}
    env.pop("CRYPTCOST_RUN", None)
    return subprocess.Popen([sys.executable, "-m", "cryptcost", "worker"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True,
                            bufsize=1)


def _ask(w: subprocess.Popen, **req) -> dict:
    w.stdin.write(json.dumps(req) + "\n")
    w.stdin.flush()
    return json.loads(w.stdout.readline())


def test_two_ends_of_another_schema_or_protocol_refuse_naming_both_versions():
    ours = greeting()
    assert mismatch(ours, dict(ours), "worker on h") is None
    why = mismatch(ours, {**ours, "schema": ours["schema"] + 1, "cryptcost": "9.9"}, "worker on h")
    assert f"result-schema version {ours['schema'] + 1} (cryptcost 9.9)" in why
    assert f"this one {ours['schema']}" in why and "worker on h" in why
    assert "worker protocol" in mismatch(ours, {**ours, "worker": 99}, "controller")


def test_a_controller_of_another_schema_is_refused_at_once(tmp_path):
    _need_root()
    w = _worker(tmp_path)
    hello = json.loads(w.stdout.readline())
    assert hello["worker"] == 1 and hello["schema"] == greeting()["schema"]
    got = _ask(w, id=1, op="hello", **{**greeting(), "schema": hello["schema"] + 1})
    assert got["ok"] is False and f"result-schema version {hello['schema'] + 1}" in got["error"]
    assert w.wait(timeout=30) == 2


def test_a_worker_without_root_says_so_in_its_greeting(monkeypatch, capfd):
    from cryptcost.cli import worker as cli_worker
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert cli_worker.run(None) == 2
    hello = json.loads(capfd.readouterr().out)
    assert hello["schema"] == greeting()["schema"]
    assert "needs root" in hello["refused"] and "--peer-sudo" in hello["refused"]


def test_each_operation_works_and_the_end_of_input_releases_everything(tmp_path):
    _need_root()
    w = _worker(tmp_path)
    json.loads(w.stdout.readline())
    assert _ask(w, id=1, op="tmpdir", prefix="x")["ok"] is False       # hello first
    assert w.wait(timeout=30) == 2
    w = _worker(tmp_path)
    json.loads(w.stdout.readline())
    assert _ask(w, id=1, op="hello", **greeting())["ok"]
    d = _ask(w, id=2, op="tmpdir", prefix="cryptcost-worker-test-")["result"]
    assert os.path.isdir(d)
    data = base64.b64encode(b"hello\n").decode()
    assert _ask(w, id=3, op="write", path=f"{d}/f", data=data)["ok"]
    assert base64.b64decode(_ask(w, id=4, op="read", path=f"{d}/f")["result"]) == b"hello\n"
    key = _ask(w, id=5, op="secret_file", data=base64.b64encode(b"k" * 32).decode(),
               name="t")["result"]
    assert oct(os.stat(key).st_mode & 0o777) == "0o600"
    ran = _ask(w, id=6, op="run", argv=["sh", "-c", "cat; exit 3"], timeout=10,
               input=base64.b64encode(b"in").decode())["result"]
    assert ran["returncode"] == 3 and ran["stdout"] == "in"
    pid = _ask(w, id=7, op="daemon", argv=["sleep", "300"])["result"]["pid"]
    assert _ask(w, id=8, op="alive", pid=pid)["result"]["alive"] is True
    cpu = _ask(w, id=9, op="process_cpu", pids=[pid])["result"]
    assert set(cpu) == {str(pid)}
    assert "cpu" in _ask(w, id=10, op="stat")["result"]
    bad = _ask(w, id=11, op="alive", pid=1)
    assert bad["ok"] is False and "no daemon of this worker" in bad["error"]
    journals = [p for p in (tmp_path / "state").iterdir() if p.name.startswith("journal-")]
    assert len(journals) == 1
    w.stdin.close()                                         # the session ends
    assert w.wait(timeout=60) == 0, w.stderr.read()
    deadline = time.monotonic() + 10
    while os.path.exists(f"/proc/{pid}") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not os.path.exists(f"/proc/{pid}")
    assert not os.path.exists(d) and not os.path.exists(key)
    assert not journals[0].exists()


def test_the_ssh_command_is_batch_mode_with_the_given_config_and_sudo(tmp_path):
    from cryptcost.links.peer import PeerOptions, ssh_argv
    cfg = tmp_path / "ssh_config"
    cfg.write_text("Host x\n")
    argv = ssh_argv("admin@server2", PeerOptions(ssh_config=str(cfg), sudo=True,
                                                 command="/opt/cc/bin/cryptcost"))
    assert argv[:2] == ["ssh", "-T"] and "BatchMode=yes" in argv
    assert argv[argv.index("-F") + 1] == str(cfg)
    assert argv[-2:] == ["admin@server2", "sudo -n /opt/cc/bin/cryptcost worker"]
    assert ssh_argv("h", PeerOptions())[-1] == "cryptcost worker" and "-F" not in ssh_argv(
        "h", PeerOptions())


@pytest.mark.parametrize("host", ["-oProxyCommand=x", "", "a b"])
def test_a_host_ssh_would_read_as_an_option_or_two_words_is_refused(host):
    from cryptcost.errors import UserError
    from cryptcost.links.peer import PeerOptions, ssh_argv
    with pytest.raises(UserError, match="bad --link peer:"):
        ssh_argv(host, PeerOptions())


def test_run_link_peer_measures_every_network_table_across_the_peer_instead_of_a_model():
    from cryptcost import suite
    prepared = suite.prepare(suite.Asked("quick", link="peer:server2",
                                         peer={"ssh_config": None, "peer_sudo": True,
                                               "peer_command": "cryptcost"}))
    plans = [np_ for p in prepared.plan.parts for np_ in p.network]
    assert plans and all(np_.link == "peer:server2" and np_.peer.sudo for np_ in plans)
    assert all(np_.link_kind == "peer" and np_.peer.ssh_config is None for np_ in plans)
    assert "link" not in prepared.model
    assert suite.prepare(suite.Asked("quick", link="1GbE")).model == {"link": "1GbE"}


def test_fleet_hosts_come_from_a_list_or_an_ansible_style_inventory(tmp_path):
    from cryptcost.errors import UserError
    from cryptcost.fleet import parse_hosts
    assert parse_hosts("a, b,a,root@c") == ["a", "b", "root@c"]
    inv = tmp_path / "inventory.ini"
    inv.write_text("# web\n[web]\nweb1 ansible_host=10.0.0.1\nweb2\n; db\n[db]\ndb1\n"
                   "[all:vars]\nansible_user=root\n")
    assert parse_hosts(f"@{inv}") == ["web1", "web2", "db1"]
    with pytest.raises(UserError, match="cannot read the inventory"):
        parse_hosts(f"@{tmp_path / 'none.ini'}")
    with pytest.raises(UserError, match="bad --link peer:-x"):
        parse_hosts("ok,-x")


def test_each_fleet_host_runs_into_a_store_of_its_own_and_prints_only_its_export():
    from cryptcost.links.peer import PeerOptions
    from cryptcost.fleet import local_args, pair_args, remote_command, waves
    cmd = remote_command(local_args(["--suite", "quick", "--time-budget", "10m"]),
                         PeerOptions(sudo=True), plan=True)
    assert cmd.startswith("d=$(mktemp -d)") and "trap 'rm -rf" in cmd
    assert 'cat > "$d/plan.toml"' in cmd and '--plan "$d/plan.toml"' in cmd
    assert 'sudo -n cryptcost --db "$d/results.db" run --no-report' in cmd
    assert cmd.endswith('report latest --format json') and ">&2 || exit $?" in cmd
    assert "exec </dev/null" in remote_command(["run"], PeerOptions(), plan=False)
    pair = remote_command(pair_args("db1", PeerOptions(ssh_config="/etc/cc/ssh", sudo=True)),
                          PeerOptions(), plan=False)
    assert (
        "network --link peer:db1 --stacks all --peer-command cryptcost --ssh-config /etc/cc/ssh "
        "--peer-sudo >&2"
    ) in pair
    # pairs run in rounds that share no host
    assert waves([("a", "b"), ("c", "d"), ("b", "c"), ("a", "d")]) == [
        [("a", "b"), ("c", "d")], [("b", "c"), ("a", "d")]]


def test_a_stack_the_peer_cannot_run_is_unavailable_with_the_peers_reason_and_name():
    from cryptcost.links.peer import PeerLink
    link = PeerLink("server2")
    link.peer_stacks = {"tls": {"available": False, "reason": "stunnel4 is not installed",
                                "install": "stunnel4"},
                        "tcp": {"available": True, "reason": None, "install": None}}
    assert link.unavailable("tcp") is None
    assert link.unavailable("tls") == ("on the peer server2: stunnel4 is not installed "
                                       "(install there: stunnel4)")
    assert "does not know the stack ssh" in link.unavailable("ssh")
