"""The netns link and the tcp reference stack, for real as root: traffic
flows between the two namespaces, and nothing is left when the scope ends
or after `cleanup` of a killed run."""

import json
import os
import signal
import subprocess
import sys
import pytest

from cryptcost import proc
from cryptcost.lifecycle.resources import Resources
from cryptcost.links import NetnsLink, parse_link
from cryptcost.stacks import get, unavailable_reason
from tests.conftest import skip_or_fail
from tests.system.conftest import need_root


def _namespaces() -> set[str]:
    return set(os.listdir("/run/netns")) if os.path.isdir("/run/netns") else set()


def _need_tcp():
    need_root("tcp")
    exc = unavailable_reason(get("tcp"))
    if exc:
        skip_or_fail("tcp", f"tcp unavailable: {exc}")


@pytest.mark.root
def test_tcp_over_a_netns_link_carries_iperf3_traffic_and_leaves_nothing(state_dir):
    _need_tcp()
    before = _namespaces()
    stack = get("tcp")()
    with Resources() as res:
        link = parse_link("netns", mtu=1500)
        link.setup(res)
        ns = set(link.ns.values())
        assert ns <= _namespaces() and all(n.startswith("cc-") for n in ns)
        end = stack.setup(res, link, 5201)
        assert (end.host, end.port) == (link.b_addr, 5201)
        server = res.daemon(
            link.argv("b", ["iperf3", "-s", "-1", "-B", link.b_addr, "-p", str(end.port)])
        )
        proc.wait_for(
            lambda: proc.run(link.argv("b", ["ss", "-ltn"]), check=False).stdout.count(":5201") > 0,
            timeout=10, daemon=server, what="iperf3 listening",
        )
        done = proc.run(
            link.argv("a", ["iperf3", "-J", "-c", end.host, "-p", str(end.port), "-t", "1"]),
            timeout=60,
        )
        sent = json.loads(done.stdout)["end"]["sum_received"]["bytes"]
        assert sent > 1 << 20
        desc = link.describe()
        assert desc["mtu"] == 1500 and set(desc["namespaces"]) == {"a", "b"}
        assert 0 < desc["rtt_ms"] < 50 and "delay_ms" not in desc, desc
        facts = stack.facts()
        assert facts["kind"] == "network" and facts["role"] == "baseline"
    assert _namespaces() == before


@pytest.mark.root
def test_a_thread_joined_to_an_end_sees_what_ss_sees_there_and_times_its_round_trip(state_dir):
    """host.netns, which spares a namespace's polls and its round-trip probe a process start:
    its answers are ss's in the same namespace (TCP and UDP, listening or not), its sockets
    are the namespace's, and an unknown namespace is an error, not this host's answer."""
    import socket

    from cryptcost.host import netns
    _need_tcp()
    with Resources() as res:
        link = NetnsLink(mtu=1500)
        link.setup(res)
        a, b = link.at("a"), link.at("b")
        assert 0 < link.rtt_ms < 50
        # a listener that accepts every connect and keeps listening (iperf3's server closes and
        # reopens its socket after a connection that brings no test: a connect then is refused)
        tcp = res.daemon(link.argv("b", [sys.executable, "-c",
                                          "import socket; s = socket.create_server(('', 5333)); "
                                          "[s.accept()[0].close() for _ in iter(int, 1)]"]))
        udp = res.daemon(link.argv("b", [sys.executable, "-c",
                                          "import socket, time; s = socket.socket(socket.AF_INET, "
                                          "socket.SOCK_DGRAM); s.bind(('0.0.0.0', 5334)); "
                                          "time.sleep(60)"]))
        proc.wait_for(lambda: b.listening(5333) and b.listening(5334, udp=True), timeout=20,
                      daemon=tcp, what="a TCP and a UDP socket at end b")

        def ss(end, port, udp=False):
            argv = ["ss", "-Hl" + ("u" if udp else "t") + "n", f"sport = :{port}"]
            return bool(proc.run(link.argv(end, argv), timeout=10).stdout.strip())

        for end in ("a", "b"):
            for port, is_udp in ((5333, False), (5334, True), (5333, True), (5334, False)):
                assert link.at(end).listening(port, udp=is_udp) == ss(end, port, is_udp), (
                    end, port, is_udp)
        assert not a.listening(5333) and b.listening(5333)
        # a connect from end a's namespace reaches b's server, which accepts it
        assert netns.joined(link.ns["a"], lambda: netns.round_trip(link.b_addr, 5333,
                                                                   accepted=True)) is not None
        assert netns.joined(link.ns["a"], lambda: netns.round_trip(link.b_addr, 5333)) is None
        with pytest.raises(OSError):
            netns.joined("cc-no-such-namespace", lambda: socket.gethostname())
        res.stop(udp)
        res.stop(tcp)


@pytest.mark.root
def test_cleanup_removes_the_namespaces_of_a_killed_run(tmp_path, state_dir):
    _need_tcp()
    before = _namespaces()
    script = ("from cryptcost.lifecycle.resources import Resources\n"
              "from cryptcost.links import NetnsLink\n"
              "import time\nres = Resources()\nlink = NetnsLink()\nlink.setup(res)\n"
              "print(' '.join(link.ns.values()), flush=True)\ntime.sleep(600)\n")
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                             env={**os.environ, "CRYPTCOST_STATE_DIR": str(state_dir)})
    names = set(child.stdout.readline().split())
    assert names and names <= _namespaces()
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    done = subprocess.run(
        [sys.executable, "-m", "cryptcost", "cleanup"], capture_output=True, text=True,
        env={**os.environ, "CRYPTCOST_STATE_DIR": str(state_dir)}, timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert not names & _namespaces()
    assert _namespaces() == before
    again = subprocess.run(
        [sys.executable, "-m", "cryptcost", "cleanup"], capture_output=True, text=True,
        env={**os.environ, "CRYPTCOST_STATE_DIR": str(state_dir)}, timeout=120,
    )
    assert again.returncode == 0 and "nothing to clean up" in again.stdout


def test_bad_link_and_mtu_are_refused():
    from cryptcost.errors import UserError
    with pytest.raises(UserError, match="bad --mtu"):
        NetnsLink(mtu=70000)
    with pytest.raises(UserError, match="use netns, loopback"):
        parse_link("wifi")
    with pytest.raises(UserError, match="bad --link peer:-oProxyCommand=x"):
        parse_link("peer:-oProxyCommand=x")
    with pytest.raises(UserError, match="not a storage stack"):
        from cryptcost.runner.storage import resolve
        resolve(["tcp"], "ext4")


@pytest.mark.root
def test_a_delay_is_added_to_each_round_trip_or_refused_where_the_kernel_has_no_netem(
    cli, state_dir
):
    """``--delay`` holds each veth end's packets for half of it (netem), so the link's measured
    round trip grows by the delay; a kernel without netem (this host's) refuses it in one line that
    names the guest, where Debian's stock kernel has it (tested in the matrix step)."""
    from cryptcost.host import kernel
    _need_tcp()
    if not kernel.features()["netem"]["present"]:
        done = cli("network", "--stacks", "tls", "--delay", "20")
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
        [line] = done.stderr.strip().splitlines()
        assert "netem" in line and "cryptcost vm -- network --delay 20" in line, line
        return
    with Resources() as res:
        plain = parse_link("netns")
        plain.setup(res)
        slow = parse_link("netns", delay_ms=20)
        slow.setup(res)
        assert 20 <= slow.rtt_ms < 20 + plain.rtt_ms + 10, (plain.rtt_ms, slow.rtt_ms)
        assert slow.describe()["delay_ms"] == 20
