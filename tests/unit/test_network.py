"""The network part's pure pieces: iperf3's JSON, pcap decoding, the wire
check's verdicts, workloads, the network bottleneck rules, plans."""

from __future__ import annotations

import json
import os
import struct
from dataclasses import replace

import pytest

from cryptcost.analysis import bottleneck, recommend
from cryptcost.engines import iperf3, tcpdump
from cryptcost.errors import ProcessError, UserError
from cryptcost.record import Host, Stored
from cryptcost.runner.network.wire import CANARY, entropy, judge
from cryptcost.stacks import get
from cryptcost.workloads import network as wl
from cryptcost.workloads.plan import load, validate
from tests.conftest import skip_or_fail


# --- iperf3 ---------------------------------------------------------------------------

def test_iperf3_send_and_receive_from_real_output(fixture_text):
    send = iperf3.parse(fixture_text("iperf3_send.json"))
    data = json.loads(fixture_text("iperf3_send.json"))["end"]
    assert send.bytes == data["sum_received"]["bytes"] and send.seconds == pytest.approx(
        data["sum_received"]["seconds"]
    )
    assert send.retransmits == data["sum_sent"]["retransmits"]
    wall = data["sum_sent"]["seconds"]
    assert send.client_cpu == pytest.approx(
        data["cpu_utilization_percent"]["host_total"] / 100 * wall
    )
    assert send.server_cpu == pytest.approx(
        data["cpu_utilization_percent"]["remote_total"] / 100 * wall
    )
    assert send.version and send.bytes_per_s > 1e6
    recv = iperf3.parse(fixture_text("iperf3_receive.json"), reverse=True)
    assert recv.bytes > 0 and recv.client_cpu > 0


def test_iperf3_errors_are_process_errors():
    with pytest.raises(ProcessError, match="unable to connect"):
        iperf3.parse(json.dumps({"error": "unable to connect to server: Connection refused"}))
    with pytest.raises(ProcessError, match="no JSON"):
        iperf3.parse("iperf3: error - the server is busy")
    with pytest.raises(ProcessError, match="no bytes"):
        iperf3.parse(json.dumps({"end": {"sum_received": {"bytes": 0, "seconds": 1}}}))


def test_iperf3_argv():
    argv = iperf3.client_argv("10.0.0.2", 5201, 2, streams=4, reverse=True, repeating=True)
    assert argv[:3] == ["iperf3", "-J", "-c"] and "-R" in argv and "--repeating-payload" in argv
    assert argv[argv.index("-P") + 1] == "4" and argv[argv.index("-t") + 1] == "2"
    # the canary's: a byte count instead of a time
    sized = iperf3.client_argv("10.0.0.2", 5201, None, repeating=True, nbytes=16 << 20)
    assert "-t" not in sized and sized[sized.index("-n") + 1] == str(16 << 20)
    # iperf3 reads -t as an integer, 0 as for ever: a fraction is refused, not truncated
    for bad in (0.5, 1.5, None):
        with pytest.raises(ValueError, match="whole seconds"):
            iperf3.client_argv("h", 1, bad)


def test_a_namespace_ends_ip_commands_name_it_themselves_and_their_release_too(tmp_path):
    """At a namespace's end an ``ip`` or ``tc`` command runs as ``ip -n NS`` (one process start;
    ``ip netns exec NS ip`` is two), anything else through ``ip netns exec``; an address or an
    interface an end adds journals the command that removes it, in the same namespace."""
    from cryptcost.host.netns import inside
    from cryptcost.links import NetnsLink
    from cryptcost.links.ends import LocalEnd

    assert inside("cc-x-a", ["ip", "xfrm", "state", "flush"]) == \
        ["ip", "-n", "cc-x-a", "xfrm", "state", "flush"]
    assert inside("cc-x-a", ["tc", "qdisc", "show"]) == ["tc", "-n", "cc-x-a", "qdisc", "show"]
    assert inside("cc-x-a", ["iperf3", "-s"]) == ["ip", "netns", "exec", "cc-x-a", "iperf3", "-s"]
    link = NetnsLink.__new__(NetnsLink)
    link.ns = {"a": "cc-x-a", "b": "cc-x-b"}
    assert link.argv("b", ["ip", "addr"]) == ["ip", "-n", "cc-x-b", "addr"]

    tracked = []

    class Res:
        def track(self, type_, create, **data):
            tracked.append((type_, data))
    ran = []
    end = LocalEnd(Res(), wrap=lambda argv: link.argv("a", argv), netns="cc-x-a")
    end.run = lambda argv, **kw: ran.append(argv)
    end.address("10.205.0.1/32", "lo")
    end.interface("wg0", ["ip", "link", "add", "wg0", "type", "wireguard"])
    assert tracked == [
        ("address", {"cidr": "10.205.0.1/32", "dev": "lo",
                     "undo": ["ip", "-n", "cc-x-a", "addr", "del", "10.205.0.1/32", "dev", "lo"]}),
        ("iface", {"dev": "wg0", "undo": ["ip", "-n", "cc-x-a", "link", "delete", "wg0"]})]


# --- pcap ---------------------------------------------------------------------------------

def _pcap(frames: list[bytes], order: str = "<") -> bytes:
    out = struct.pack(order + "IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)
    for f in frames:
        out += struct.pack(order + "IIII", 0, 0, len(f), len(f) + 1000) + f
    return out


def _frame(proto: int, sport: int, dport: int, payload: bytes) -> bytes:
    eth = b"\x00" * 12 + b"\x08\x00"
    if proto == 6:
        l4 = struct.pack("!HHIIBBHHH", sport, dport, 0, 0, 5 << 4, 0, 0, 0, 0)
    else:
        l4 = struct.pack("!HHHH", sport, dport, 8 + len(payload), 0)
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(l4) + len(payload), 0, 0, 64, proto, 0,
                     bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2]))
    return eth + ip + l4 + payload


@pytest.mark.parametrize("order", ["<", ">"])
def test_pcap_decodes_tcp_and_udp_in_either_byte_order(tmp_path, order):
    path = tmp_path / "x.pcap"
    path.write_bytes(
        _pcap([_frame(6, 40000, 5201, b"hello"), _frame(17, 51820, 51820, b"x" * 200)], order)
    )
    tcp, udp = tcpdump.read_pcap(path)
    assert (tcp.proto, tcp.sport, tcp.dport, tcp.payload) == (6, 40000, 5201, b"hello")
    assert (udp.proto, udp.dport, len(udp.payload)) == (17, 51820, 200)
    assert tcp.length == len(_frame(6, 40000, 5201, b"hello")) + 1000       # the length on the wire


def test_pcap_decodes_a_real_capture(tmp_path):
    from pathlib import Path
    packets = tcpdump.read_pcap(Path(__file__).parents[1] / "fixtures/tools/tcp_5201.pcap")
    assert len(packets) >= 20 and any(5201 in (p.sport, p.dport) for p in packets)


# --- the wire check -----------------------------------------------------------------------

def test_entropy_of_random_text_and_pattern():
    assert entropy(os.urandom(1 << 16)) > 7.9
    assert 3.2 < entropy(CANARY * 1000) < 3.4
    assert entropy(b"") == 0.0


def _packets(payloads, sport=40000, dport=5443, proto=6):
    return [tcpdump.Packet(len(p) + 54, proto, sport, dport, p) for p in payloads]


def test_judge_accepts_ciphertext_and_refuses_the_service_port_and_the_canary():
    leak = get("tls")("tls13-aes128-gcm").leak
    good = judge(_packets([os.urandom(1400) for _ in range(50)]), leak, 5201)
    assert (
        good["verdict"] == "encrypted"
        and good["plaintext_packets"] == 0
        and good["median_packet_bytes"] == 1454
    )
    port = judge(_packets([os.urandom(1400)] * 5, dport=5201), leak, 5201)
    assert port["verdict"] == "plaintext" and "port 5201" in port["reasons"][0]
    assert (
        "(40000→5201, 1400 B of payload; 40000→5201" in port["reasons"][0]
    )  # which packets, to tell a leak
    canary = judge(_packets([CANARY * 70] * 5), leak, 5201, canary=True)
    assert canary["verdict"] == "plaintext" and canary["canary_packets"] == 5
    text = judge(_packets([b"GET / HTTP/1.1 " * 100] * 5), leak, 5201)
    assert text["verdict"] == "plaintext" and "entropy" in text["reasons"][0]
    assert judge([], leak, 5201)["verdict"] == "plaintext"


def test_an_empty_packet_on_the_service_port_is_no_plaintext_but_one_with_data_is():
    """The baseline's connection torn down after its sample sends its FIN and last ACK into the
    next sample's capture: 0 B of payload, nothing shown (it failed an SSH sample once)."""
    leak = get("ssh")("aes128-ctr-sha256").leak
    sealed = _packets([os.urandom(1400) for _ in range(50)], sport=40000, dport=2222)
    teardown = _packets([b"", b""], sport=39486, dport=5201)
    assert judge(sealed + teardown, leak, 5201)["verdict"] == "encrypted"
    data = _packets([b"", os.urandom(100)], sport=39486, dport=5201)
    got = judge(sealed + data, leak, 5201)
    assert got["verdict"] == "plaintext" and got["plaintext_packets"] == 1


def test_smb3_leak_rule_spots_a_plaintext_write_not_a_transform():
    leak = get("smb3")("aes-128-gcm").leak
    header = (
        b"\x00\x00\x10\x00" + b"\xfeSMB" + struct.pack("<HHIH", 64, 1, 0, 0x0009) + b"\x00" * 50
    )
    assert "WRITE" in leak(tcpdump.Packet(1500, 6, 40000, 445, header), 445)
    transform = b"\x00\x00\x10\x00" + b"\xfdSMB" + os.urandom(60)
    assert leak(tcpdump.Packet(1500, 6, 40000, 445, transform), 445) is None


# --- workloads and plans ------------------------------------------------------------------

def test_network_workloads_per_traffic():
    assert wl.expand(["quick"]) == ["send", "put"]
    assert [op.workload for op in wl.ops(["standard"], "stream")] == ["send", "receive", "streams"]
    assert [op.workload for op in wl.ops(["standard"], "files")] == ["put", "get", "smallfiles"]
    streams = wl.ops(["streams"], "stream", streams=8)[0]
    assert streams.streams == 8 and not streams.reverse and wl.ops(["receive"], "stream")[0].reverse
    with pytest.raises(UserError, match="unknown network workload 'upload'"):
        wl.expand(["upload"])


def test_dbench_is_one_cell_per_number_of_clients_and_only_full_names_it():
    assert [(op.workload, op.streams) for op in wl.ops(["dbench"], "files")] == [
        ("dbench", 1), ("dbench", 2), ("dbench", 4), ("dbench", 8)]       # R4's clients
    two = wl.ops(["put", "dbench"], "files", clients=(2, 3))
    assert [(op.workload, op.streams) for op in two] == [("put", 1), ("dbench", 2),
                                                         ("dbench", 3)]
    assert len({op.key for op in wl.ops(["dbench"], "files")}) == 4
    assert wl.ops(["dbench"], "stream") == []                 # a tunnel has no share to run it in
    assert "dbench" in wl.expand(["full"]) and "dbench" not in wl.expand(["standard"])
    seeds = load("seeds", None)
    [r4] = [p for p in seeds.parts if p.network and "dbench" in p.network["workloads"]]
    assert r4.network["stacks"] == ["nfs:v3", "nfs:sys", "nfs:krb5p"]
    assert r4.network["clients"] == [1, 2, 4, 8]


@pytest.mark.parametrize("clients", [[0], [65], []])
def test_bad_dbench_clients_are_refused(clients, monkeypatch):
    from cryptcost.runner.network import NetworkPlan, validate
    monkeypatch.setattr("os.geteuid", lambda: 0)
    with pytest.raises(UserError, match="bad dbench clients"):
        validate(NetworkPlan(stacks=["tls"], workloads=["dbench"], clients=tuple(clients)))


def test_quick_suite_has_a_network_part_and_seeds_has_r5():
    quick = load("quick", None)
    assert sorted(quick.parts[0].network["stacks"]) == [
        "ssh", "tls", "wireguard",
    ]  # as their facts declare
    seeds = load("seeds", None)
    r5 = [p for p in seeds.parts if p.label.startswith("R5")]
    assert r5 and r5[0].network["stacks"] == ["ipsec:*", "esp:*"] and r5[0].storage is None
    assert any(c["part"] == "R4" for c in seeds.cannot_run)


def test_seeds_r4_over_a_wan_runs_where_netem_is_and_says_why_not_elsewhere(monkeypatch):
    """The part whose point is the delay is left out, with why and where it runs, on a kernel
    without netem; kept, delay and all, on one with it."""
    from cryptcost.host import kernel
    from cryptcost.suite import for_this_host
    features = kernel.features()
    for present in (False, True):
        monkeypatch.setattr(kernel, "features",
                            lambda: {**features, "nfs": {"present": True, "how": ""},
                                     "netem": {"present": present, "how": ""}})
        monkeypatch.setattr("cryptcost.suite.here.unavailable_reason", lambda cls: None)
        plan = for_this_host(load("seeds", None))
        wan = [p for p in plan.parts if p.label.startswith("R4 over a WAN")]
        said = [c for c in plan.cannot_run if c["part"].startswith("R4 over a WAN")]
        if present:
            assert wan and wan[0].network["delay_ms"] == 20 and not said
        else:
            assert not wan and "netem" in said[0]["reason"] and "cryptcost vm" in said[0]["install"]


def test_seeds_has_small_files_and_a_mixed_load_on_every_storage_stack():
    """R3 packed and unpacked trees of small files; R4 ran dbench's mix: both, on every stack."""
    seeds = load("seeds", None)
    [files] = [p for p in seeds.parts if "small files" in p.label]
    assert files.storage["stacks"] == ["all"] and files.storage["workloads"] == [
        "smallfiles",
        "mixed",
    ]
    assert files.network is None and files.ciphers is None


@pytest.mark.parametrize("table, message", [
    ({"network": {"mtu": 50}}, "network.mtu must be 576"),
    ({"network": {"streams": 0}}, "network.streams must be 1"),
    ({"network": {"seconds": 1.5}}, "network.seconds must be int"),
    ({"network": {"link": "wifi"}}, "network.link has 'wifi'"),
    ({"network": {"workloads": ["upload"]}}, "network.workloads has 'upload'"),
    ({"network": {"colour": "red"}}, "unknown key network.colour"),
    ({"network": {"delay_ms": -1}}, "network.delay_ms must be 0 … 1000"),
    ({"network": {"delay_ms": "20ms"}}, "network.delay_ms"),
    ({"network": {"delay_ms": 20, "link": "loopback"}}, 'network.delay_ms needs link = "netns"'),
])
def test_bad_network_tables_are_refused(table, message):
    with pytest.raises(UserError, match=message):
        validate(table)


# --- analysis -------------------------------------------------------------------------------

def _net(
    stack: str, value: float, *, role="measured", daemon=0.0, packet=1494, baseline="tcp",
    cipher=None, **extra,
):
    return Stored.of(
        {
            "kind": "network",
            "stack": stack,
            "workload": "send",
            "op": "send",
            "streams": 1,
            "mtu": 1500,
            "link": "netns",
            "median_bytes_per_s": value,
            "values": [value * 0.99, value, value * 1.01],
            "baseline": baseline if role == "measured" else None,
            "busiest_daemon_core": daemon,
            "wire": {"median_packet_bytes": packet},
            "cpu": {"max_core_busy": 0.5},
            "cpu_s_per_gb": {"a": 1.0, "b": 2.0},
            "params": {
                "cipher_ref": cipher,
                "facts": {
                    "role": role, "use_case": None if role == "baseline" else "site-to-site",
                    "baselines": ["tcp"],
                },
            },
            **extra,
        }
    )


def test_network_bottleneck_rules():
    base = _net("tcp", 3e9, role="baseline", packet=65226)
    assert bottleneck.classify_network(base, None, [], Host()).bottleneck == "link"
    near = bottleneck.classify_network(_net("x", 2.9e9), base, [], Host())
    assert near.bottleneck == "link" and near.ceilings["rule"].startswith("throughput ≥ 85%")
    gcm = {"algorithm": "aes-128-gcm", "where": "userspace", "unit": 16384, "exact": True}
    table = [
        Stored.of(
            {
                "kind": "cipher", "engine": "openssl", "algorithm": "aes-128-gcm", "accel": True,
                "threads": 1, "buffer_bytes": 16384, "median_bytes_per_s": 1e9,
            }
        )
    ]
    cipher = bottleneck.classify_network(_net("x", 0.9e9, cipher=gcm), base, table, Host())
    assert cipher.bottleneck == "cipher" and cipher.ceilings["ratio"]["cipher"] == pytest.approx(
        0.9
    )
    daemon = bottleneck.classify_network(
        _net("x", 0.3e9, daemon=0.97, cipher=gcm), base, table, Host()
    )
    assert daemon.bottleneck == "daemon" and "97%" in daemon.sentence
    packets = bottleneck.classify_network(_net("x", 0.05e9, daemon=0.5), base, table, Host())
    assert packets.bottleneck == "per-packet" and "1494-byte" in packets.sentence


def test_a_cipher_then_a_mac_is_a_ceiling_of_the_two_in_series():
    """ESP's aes-cbc then hmac-sha1 over the same bytes: 1 / (1/cipher + 1/MAC), both cells
    named; without the MAC's cell, the cipher's alone, said as an upper bound."""
    def cell(algorithm, speed):
        return Stored.of({"kind": "cipher", "engine": "openssl", "algorithm": algorithm,
                          "accel": True, "threads": 1, "buffer_bytes": 1400,
                          "median_bytes_per_s": speed})
    cbc_sha1 = {"algorithm": "aes-128-cbc", "where": "userspace", "unit": 1400, "exact": True,
                "then": "hmac-sha1"}
    base = _net("tcp", 3e9, role="baseline", packet=65226)
    both = bottleneck.classify_network(_net("x", 0.3e9, cipher=cbc_sha1), base,
                                       [cell("aes-128-cbc", 1e9), cell("hmac-sha1", 1e9)], Host())
    assert both.ceilings["cipher"] == pytest.approx(0.5e9)
    assert "aes-128-cbc" in both.ceilings["cipher_how"] and "then openssl hmac-sha1" in \
        both.ceilings["cipher_how"]
    alone = bottleneck.classify_network(_net("x", 0.3e9, cipher=cbc_sha1), base,
                                        [cell("aes-128-cbc", 1e9)], Host())
    assert alone.ceilings["cipher"] == pytest.approx(1e9)
    assert "without its MAC" in alone.ceilings["cipher_how"] and "upper bound" in \
        alone.ceilings["cipher_how"]
    near = bottleneck.classify_network(_net("x", 0.3e9, cipher={**cbc_sha1, "exact": False}),
                                       base, [cell("aes-128-cbc", 1e9), cell("hmac-sha1", 1e9)],
                                       Host())
    assert near.ceilings["cipher_how"].count("nearest measured algorithm") == 1


def test_network_recommendation_names_ties_and_security_facts():
    base = _net("tcp", 3e9, role="baseline")
    a, b = (_net(stack, value, vs={"tcp": {"overhead": 1 - value / 3e9, "significant": True}})
            for stack, value in (("wireguard", 50e6), ("ipsec:aes128gcm16", 49.9e6)))
    a, b = (replace(r, facts=replace(r.facts, security=(f"{r.stack} fact",))) for r in (a, b))
    twin = _net("wireguard/accel-off", 40e6, accel=False)
    recs = {x.use_case: x for x in recommend.recommend([base, a, b, twin], [], [], Host())}
    site = recs["site-to-site"]
    assert "whole-disk" not in recs, "a network-only run says nothing of storage use cases"
    assert [x.stack for x in site.ranking] == ["wireguard", "ipsec:aes128gcm16"], (
        "a twin is no option"
    )
    assert [x.tie for x in site.ranking] == [False, True]
    assert "tie for the fastest" in site.text and "Wireguard fact" in site.text
    assert "CPU-s/GB" in site.text and "network" not in recs


def test_a_variant_with_a_known_weakness_is_named_not_ranked_however_fast():
    """Null encryption (or ECB, or HMAC-MD5) may well be the fastest: it is left out of the
    ranking and named with its weakness, so no recommendation ever leads with it."""
    base = _net("tcp", 3e9, role="baseline")
    null = _net("ipsec:null-md5", 900e6, vs={"tcp": {"overhead": 0.7, "significant": True}})
    null = replace(null, weakness="null encryption: not confidential")
    gcm = _net("ipsec:aes128gcm16", 300e6, vs={"tcp": {"overhead": 0.9, "significant": True}})
    site = {x.use_case: x for x in recommend.recommend([base, null, gcm], [], [], Host())}[
        "site-to-site"
    ]
    assert [x.stack for x in site.ranking] == ["ipsec:aes128gcm16"]
    assert (
        site.text.startswith("Only ipsec:aes128gcm16 was measured")
        or "ipsec:aes128gcm16" in site.text
    )
    assert (
        "Avoid ipsec:null-md5, left out of the ranking: null encryption: not confidential."
        in site.text
    )
    only = {x.use_case: x for x in recommend.recommend([base, null], [], [], Host())}[
        "site-to-site"
    ]
    assert only.ranking == [] and only.text.startswith(
        "Every stack measured for this use has a known weakness"
    )


# --- acceleration off ---------------------------------------------------------------------

def test_accel_off_twins_carry_their_library_switch_or_say_why_not():
    from cryptcost.runner.network import resolve
    from cryptcost.stacks import unavailable_reason
    if unavailable_reason(get("tls")) or unavailable_reason(get("ssh")):
        skip_or_fail(("tls", "ssh"), "tls and ssh are not installed here")
    resolved, skipped = resolve(["tls", "ssh"], "netns", (True, False))
    labels = {s.label: s for s, _ in resolved}
    off = labels["tls:tls13-aes128-gcm/accel-off"]
    assert off.accel is False and off.accel_env() == {
        "OPENSSL_ia32cap": "~0x200000200000000:~0x60020000000"
    }
    assert labels["tls:tls13-aes128-gcm"].accel_env() == {} and "tcp/accel-off" not in labels
    assert off.describe()["accel"] is False and off.facts()["crypto_library"] == "openssl"
    assert not skipped


def test_storage_stacks_without_a_switch_are_refused_not_measured_off():
    from cryptcost.runner.storage import resolve
    from cryptcost.stacks import unavailable_reason
    if unavailable_reason(get("cryfs")) or unavailable_reason(get("gocryptfs")):
        skip_or_fail(("cryfs", "gocryptfs"), "cryfs and gocryptfs are not installed here")
    resolved, skipped = resolve(["cryfs", "gocryptfs"], "ext4", (True, False))
    labels = {s.label for s, _ in resolved}
    assert "gocryptfs:aes-gcm/accel-off" in labels and not any(
        l.startswith("cryfs") and "off" in l for l in labels
    )
    [why] = [s for s in skipped if s["stack"] == "cryfs:aes-256-gcm/accel-off"]
    assert "crypto++" in why["reason"] and why["accel"] == "cannot be switched off"


def test_dm_crypts_aes_xts_is_switched_off_by_its_mapping_and_other_ciphers_say_why_not():
    """The acceleration-off twin of a dm-crypt AES-XTS variant opens the same mapping through the
    kernel's generic C AES (a capi: spec) — its environment is left alone; a cipher without such
    a twin is refused with why."""
    from cryptcost.stacks.luks import GENERIC
    luks = get("luks")
    for variant in ("aes-xts-plain64", "aes-xts-plain64-4k", "plain-aes-xts-plain64"):
        off = luks(variant)
        off.accel = False
        assert (
            off.accel_switch() is None
            and off.accel_env() == {}
            and off.label.endswith("/accel-off")
        )
        assert GENERIC[off.params["cipher"]] == "capi:xts(ecb(aes-generic))-plain64"
    assert "no software-only twin" in luks("aes-cbc-essiv").accel_switch()
    assert "cannot be switched off" in get("fscrypt")().accel_switch()


def test_a_library_without_a_switch_is_never_reported_off():
    from cryptcost.stacks.base import Stack

    class NoSwitch(get("tls")):
        crypto_library = "crypto++"
    stack = NoSwitch()
    assert "cannot be switched off for crypto++" in stack.accel_switch()
    assert isinstance(stack, Stack)


def test_qemu_cipher_backend_is_read_from_the_binary_and_gates_nettles_switch(
    tmp_path, monkeypatch
):
    """Debian's qemu does its ciphers with Nettle; a qemu built with GnuTLS or
    gcrypt ciphers (or none) gets no Nettle switch: "off" would be unverified."""
    from cryptcost import proc
    from cryptcost.stacks import qemu_export
    binary = tmp_path / "qsd"
    for imports, backend in ((b"\0nettle_xts_encrypt_message\0gnutls_init\0", "nettle"),
                             (b"\0gnutls_cipher_encrypt2\0", "gnutls"), (b"\0memcpy\0", None)):
        binary.write_bytes(b"\x7fELF" + imports)
        assert qemu_export.cipher_backend(str(binary)) == backend
    assert qemu_export.cipher_backend(str(tmp_path / "missing")) is None
    monkeypatch.setattr(proc, "which", lambda name: str(binary))
    luks = get("luks-userspace")()
    binary.write_bytes(b"\0gnutls_cipher_encrypt2\0")
    assert "come from gnutls, not nettle" in luks.accel_switch()
    binary.write_bytes(b"\0nettle_xts_encrypt_message\0")
    assert luks.accel_switch() is None
    luks.accel = False
    assert luks.accel_env() == {"NETTLE_FAT_OVERRIDE": "none"}


def _result(stack: str, values: list[float], accel: bool):
    from cryptcost.model import Cell, Result, Sample
    from cryptcost.stats import summarize
    return Result(
        Cell(kind="network", stack=stack, workload="send", streams=1, accel=accel),
        summarize(values), "cap_reached", {"params": {}}, tuple(Sample(v, 1.0) for v in values),
    )


def test_accel_off_counts_only_when_it_is_significantly_slower():
    from cryptcost.runner.core.pairing import verify_accel
    on = _result("tls:x", [100.0, 101, 99, 100, 100.5], True)
    slower = _result("tls:x/accel-off", [40.0, 41, 39, 40, 40.5], False)
    same = _result("ssh:y/accel-off", [100.0, 101, 99, 100, 100.5], False)
    ssh_on = _result("ssh:y", [100.2, 100.8, 99.1, 100, 100.4], True)
    out = {r.cell.stack: r for r in verify_accel([on, slower, same, ssh_on])}
    assert out["tls:x/accel-off"].metrics["accel_verified"] is True
    assert out["tls:x/accel-off"].metrics["accel_speedup"] == pytest.approx(2.5, rel=0.05)
    assert out["ssh:y/accel-off"].metrics["accel_verified"] is False
    assert "NOT verified" in out["ssh:y/accel-off"].notes[-1]
    assert "did not reach" in out["ssh:y/accel-off"].notes[-1]
    # slower by its interval but not by the tests, on three samples a side (dm-crypt's reads in
    # the guest, 0.55x): not verified, and not said to be untouched by the switch either
    few_on = _result("tls:z", [100.0, 70, 130], True)
    few_off = _result("tls:z/accel-off", [55.0, 52, 58], False)
    few = {r.cell.stack: r for r in verify_accel([few_on, few_off])}["tls:z/accel-off"]
    assert few.metrics["accel_verified"] is None and "did not reach" not in few.notes[-1]
    assert "not significantly with 3 and 3 samples" in few.notes[-1]
    # 1.6x slower by the medians, its interval reaching 1 through a noisy side (dm-crypt's
    # writes on one CPU in the guest): undecided too, never "did not reach"
    noisy_on = _result("tls:n", [29e6, 48e6, 15e6], True)
    noisy_off = _result("tls:n/accel-off", [17.9e6, 17.4e6, 17.3e6], False)
    noisy = {r.cell.stack: r for r in verify_accel([noisy_on, noisy_off])}["tls:n/accel-off"]
    assert noisy.metrics["accel_verified"] is None and "did not reach" not in noisy.notes[-1]


def test_network_findings_say_cpus_are_shared_and_distrust_a_silent_wire_check():
    from cryptcost.analysis import network_findings

    base = _net(
        "tcp", 3e9, role="baseline", shared_cpus=True, wire={"canary": {"verdict": "encrypted"}}
    )
    tunnel = _net("wireguard", 50e6, shared_cpus=True, wire={"canary": {"verdict": "encrypted"}})
    got = network_findings([base, tunnel])
    assert "ran on this host's CPUs" in got[0]
    assert len(got) == 2 and "no plaintext on the baseline tcp" in got[1]
    assert network_findings([]) == []



def test_a_variant_that_does_not_encrypt_by_design_is_recorded_not_failed():
    from types import SimpleNamespace

    from cryptcost.runner.network.steps import NetRunner
    from cryptcost.runner.network.wire import PlaintextOnWire
    from cryptcost.stacks import get

    null, gcm = get("ipsec")("null-sha256"), get("ipsec")("aes128gcm16")
    assert isinstance(null.confidential(), str) and gcm.confidential() is True
    wire = {
        "verdict": "plaintext",
        "reasons": ["a packet to or from the plaintext service port 5201"],
    }
    kept = NetRunner._enforce(SimpleNamespace(stack=null, label="ipsec:null-sha256"), wire, "x: ")
    assert kept["expected"].startswith("plaintext by design: null encryption")
    with pytest.raises(PlaintextOnWire, match="x: a packet to or from"):
        NetRunner._enforce(SimpleNamespace(stack=gcm, label="ipsec:aes128gcm16"), wire, "x: ")
    encrypted = {"verdict": "encrypted", "reasons": []}
    assert NetRunner._enforce(SimpleNamespace(stack=gcm), encrypted, "x: ") is encrypted
    # random iperf3 payload through a null cipher looks encrypted: it is not, and the verdict says
    # so
    looks = NetRunner._enforce(SimpleNamespace(stack=null), encrypted, "x: ")
    assert looks["verdict"] == "plaintext" and looks["expected"].startswith("plaintext by design")


def test_a_busy_core_verdict_says_the_ends_share_cpus_only_where_they_do():
    base = _net("tcp", 3e9, role="baseline", packet=65226)
    shared = _net("x", 1e9, packet=65226, cpu={"max_core_busy": 0.95}, shared_cpus=True)
    apart = _net("x", 1e9, packet=65226, cpu={"max_core_busy": 0.95}, shared_cpus=False)
    v = bottleneck.classify_network(shared, base, [], Host())
    assert v.bottleneck == "cpu" and "both ends share this host's CPUs" in v.sentence
    w = bottleneck.classify_network(apart, base, [], Host())       # a peer on another machine
    assert w.bottleneck == "cpu" and "share" not in w.sentence
    assert "the busiest core of either host" in w.sentence


def test_the_network_table_drops_the_shared_cpu_caveat_for_a_peer():
    from cryptcost.report.records import NetworkRow
    from cryptcost.report.terminal import NETWORK_TITLE, PEER_TITLE, _network_title
    assert _network_title([NetworkRow(link="netns MTU 1500")]) == NETWORK_TITLE
    assert _network_title([NetworkRow(link="netns MTU 1500"),
                           NetworkRow(link="peer to db1 MTU 1500")]) == PEER_TITLE


def test_a_stack_whose_far_end_cannot_cross_a_peer_link_says_so_and_smb3_can():
    from cryptcost.runner.network import link_fits
    from cryptcost.stacks import get
    assert link_fits(get("nfs"), "peer:server2") == "runs only on a netns link, not --link peer"
    for name in ("tcp", "tls", "ssh", "wireguard", "ipsec", "smb3"):
        assert link_fits(get(name), "peer:server2") is None, name
    assert (
        link_fits(get("wireguard"), "loopback")
        == "runs only on a netns or peer link, not --link loopback"
    )


def test_a_delay_reaches_every_network_table_and_its_cells(monkeypatch):
    """``run --delay`` is each network table's ``delay_ms``; a cell measured with a delay is
    another cell than one without (never paired or compared with it), and the cells of runs
    without a delay keep their series' names."""
    from cryptcost.host import kernel
    from cryptcost.model import Cell
    from cryptcost import suite
    from cryptcost.runner.network import NetworkPlan, validate as validate_network
    from cryptcost.store.db import series_key
    features = kernel.features()
    monkeypatch.setattr(
        kernel, "features", lambda: {**features, "netem": {"present": True, "how": ""}}
    )
    monkeypatch.setattr("os.geteuid", lambda: 0)
    prepared = suite.prepare(suite.Asked("quick", delay_ms=20))
    plans = [np_ for p in prepared.plan.parts for np_ in p.network]
    assert plans and all(np_.delay_ms == 20 for np_ in plans)
    plain = Cell(kind="network", stack="tls", workload="send", op="send", link="netns", mtu=1500)
    assert plain != plain.but(delay_ms=20.0)
    assert "delay_ms" not in json.loads(series_key(plain))
    assert json.loads(series_key(plain.but(delay_ms=20.0)))["delay_ms"] == 20.0
    monkeypatch.setattr(
        kernel, "features", lambda: {**features, "netem": {"present": False, "how": ""}}
    )
    with pytest.raises(
        UserError,
        match=r"--delay needs the kernel's netem .* 'cryptcost vm -- network "
        r"--delay 20 …'",
    ):
        validate_network(NetworkPlan(stacks=["tls"], delay_ms=20))


def test_the_compressible_workload_sends_iperf3s_repeating_pattern_and_only_full_has_it():
    [op] = wl.ops(["compressible"], "stream")
    assert op.repeating and not op.reverse and op.streams == 1
    assert not any(o.repeating for o in wl.ops(["send", "receive", "streams"], "stream"))
    assert "compressible" in wl.expand(["full"]) and "compressible" not in wl.expand(["standard"])
    assert "--repeating-payload" in iperf3.client_argv("h", 1, 1, repeating=op.repeating)


def test_ipsec_with_ipcomp_is_a_variant_only_the_kernels_esp_runs(monkeypatch):
    """Without the kernel's ESP, ipsec runs (kernel-libipsec) but its IPComp variant does not:
    name:* skips it with why, asked for alone it is refused, and the guest's share takes it."""
    from cryptcost.runner.network import resolve
    from cryptcost.suite import guest
    ipsec = get("ipsec")
    assert ipsec.variants["aes128-sha1-ipcomp"]["baselines"] == ["tcp", "ipsec:aes128-sha1"]
    monkeypatch.setattr("cryptcost.stacks.ipsec.kernel.features",
                        lambda: {"esp": {"present": False}, "xfrm": {"present": True},
                                 "netem": {"present": True}})
    why = ipsec.variant_unavailable("aes128-sha1-ipcomp")
    assert why and why.guest == "" and "kernel-libipsec" in why.reason
    assert ipsec.variant_unavailable("aes128-sha1") is None
    monkeypatch.setattr("cryptcost.runner.core.pairing.unavailable_reason", lambda cls: None)
    resolved, skipped = resolve(["ipsec:*"], "netns")
    labels = {s.label for s, _ in resolved}
    assert "ipsec:aes128-sha1" in labels and "ipsec:aes128-sha1-ipcomp" not in labels
    assert any(s["stack"] == "ipsec:aes128-sha1-ipcomp" for s in skipped)
    with pytest.raises(UserError, match="IPComp needs the kernel's ESP"):
        resolve(["ipsec:aes128-sha1-ipcomp"], "netns")
    monkeypatch.setattr(guest, "unavailable_reason", lambda cls: None)
    shares = guest.share(load("seeds", None))
    ipcomp = [p.network["stacks"] for s in shares for p in s.plan.parts
              if p.network and "ipsec:aes128-sha1-ipcomp" in p.network["stacks"]]
    assert ipcomp and all(stacks == ["ipsec:aes128-sha1-ipcomp"] for stacks in ipcomp)
    # with the kernel's ESP it runs here
    monkeypatch.setattr("cryptcost.stacks.ipsec.kernel.features",
                        lambda: {"esp": {"present": True}, "xfrm": {"present": True},
                                 "netem": {"present": True}})
    assert ipsec.variant_unavailable("aes128-sha1-ipcomp") is None


def test_a_daemons_socket_is_looked_for_without_a_process_where_the_end_is_this_hosts(tmp_path):
    """A namespace end's files are this host's: charon's control socket is a stat here, not a
    `test -S` through `ip netns exec` (two process starts a poll, dear in an emulated guest);
    an end on another machine still asks it."""
    import socket

    from cryptcost.links.ends import LocalEnd
    ran: list[list[str]] = []
    local = LocalEnd(res=None, wrap=lambda argv: ran.append(argv) or argv)
    path = tmp_path / "charon.vici"
    assert not local.is_socket(path)
    path.write_bytes(b"")
    assert not local.is_socket(path)                     # a file, not a socket
    path.unlink()
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(path))
        assert local.is_socket(path)
    assert ran == []

    class Elsewhere(LocalEnd):
        local = False
    remote = Elsewhere(res=None, wrap=lambda argv: ran.append(argv) or ["false"])
    assert not remote.is_socket(path) and ran == [["test", "-S", str(path)]]


def test_an_address_or_interface_journalled_before_undo_is_still_released(monkeypatch):
    """A crashed run's journal from before ``undo`` names its namespace's ``prefix``: ``cleanup``
    still removes its address and interface there."""
    from cryptcost.links import ends

    ran = []
    monkeypatch.setattr(ends.proc, "run", lambda argv, **kw: ran.append(argv))
    prefix = ["ip", "netns", "exec", "cc-x-a"]
    ends.release_address({"cidr": "10.205.0.1/32", "dev": "lo", "prefix": prefix})
    ends.release_iface({"dev": "wg0", "prefix": prefix})
    ends.release_address({"cidr": "10.0.0.1/24", "dev": "tap0",
                          "undo": ["ip", "addr", "del", "10.0.0.1/24", "dev", "tap0"]})
    assert ran == [[*prefix, "ip", "addr", "del", "10.205.0.1/32", "dev", "lo"],
                   [*prefix, "ip", "link", "delete", "wg0"],
                   ["ip", "addr", "del", "10.0.0.1/24", "dev", "tap0"]]


def test_ipsecs_ceiling_is_its_cipher_then_its_mac_or_its_mac_alone_under_null_encryption(
        monkeypatch):
    """ESP encrypts, then MACs the same bytes: a proposal's ceiling is its cipher's cell then its
    MAC's (AES-XCBC's, which no engine has, aes-128-cbc's: the same AES work per byte, said as
    the nearest); an authentication-only proposal's is its MAC alone; an AEAD's is itself.
    The cipher runs in the kernel where the kernel runs ESP (the guest's), in userspace where
    kernel-libipsec does (this host's), and in the slower where the two ends differ."""
    from cryptcost.engines import CIPHER_ENGINES
    ipsec = get("ipsec")
    esp = {"esp": {"present": False}, "xfrm": {"present": True}}
    monkeypatch.setattr("cryptcost.stacks.ipsec.kernel.features", lambda: esp)
    refs = {v: ipsec(v).cipher_ref() for v in ipsec.variants}
    assert {r["where"] for r in refs.values()} == {"userspace"}
    esp["esp"]["present"] = True
    assert ipsec("aes128-sha1").cipher_ref()["where"] == "kernel"
    for impl, where in [("kernel ESP", "kernel"), ("kernel-libipsec", "userspace"),
                        ("a: kernel ESP, b: kernel-libipsec", "userspace")]:
        one = ipsec("aes128-sha1")
        one.params["implementation"] = impl
        assert one.cipher_ref()["where"] == where
        assert "implementation" not in ipsec("aes128-sha1").params
    assert refs["null-sha1"]["algorithm"] == "hmac-sha1" and "then" not in refs["null-sha1"]
    assert refs["null-sha256"]["algorithm"] == "hmac-sha256" and refs["null-md5"]["exact"]
    assert refs["null-aesxcbc"]["algorithm"] == "aes-128-cbc" and not refs["null-aesxcbc"]["exact"]
    assert (refs["aes128-sha1"]["algorithm"], refs["aes128-sha1"]["then"]) == ("aes-128-cbc",
                                                                               "hmac-sha1")
    assert refs["aes128-sha1"]["exact"] and refs["3des-md5"]["then"] == "hmac-md5"
    assert refs["aes256-sha256"]["then"] == "hmac-sha256"
    assert refs["aes128ctr-aesxcbc"]["then"] == "aes-128-cbc"
    assert not refs["aes128ctr-aesxcbc"]["exact"]
    assert refs["aes128-sha1-ipcomp"]["then"] == "hmac-sha1"
    assert "then" not in refs["aes128gcm16"] and "then" not in refs["chacha20poly1305"]
    # SSH's CTR with HMAC-SHA-256 alike; UMAC, which no engine measures, is left out, said
    ssh = {v: get("ssh")(v).cipher_ref() for v in ("aes128-ctr-sha256", "aes128-ctr-umac64")}
    assert ssh["aes128-ctr-sha256"]["then"] == "hmac-sha256" and ssh["aes128-ctr-sha256"]["exact"]
    assert "then" not in ssh["aes128-ctr-umac64"] and not ssh["aes128-ctr-umac64"]["exact"]
    assert all(r and {r["algorithm"], r.get("then") or r["algorithm"]}
               <= set(CIPHER_ENGINES["openssl"].algorithms) for r in refs.values())
