"""The nfs stack's parsers: the wire rule (which NFS calls show their
arguments), the sealed part of a record, what /proc/self/mountstats and
``klist -e`` say, and the known krb5p failure of Linux 6.1's server."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from cryptcost.engines.tcpdump import Packet
from cryptcost.runner.network.wire import judge
from cryptcost.stacks import get
from cryptcost.stacks.nfs import known_bug, mount_options, service_enctype
from cryptcost.stacks.rpc import OP_SEQUENCE, call_protection, rpc_record

WRITE, PUTFH = 38, 22


def call(flavour: int, service: int | None = None, ops=(OP_SEQUENCE,), gss_proc: int = 0,
         payload: bytes = b"") -> bytes:
    """An NFSv4 COMPOUND call as the client sends it (record mark first)."""
    if flavour == 6:
        body = struct.pack(">IIII", 1, gss_proc, 7, service) + struct.pack(">I", 4) + b"hndl"
    else:
        body = struct.pack(">II", 0, 0)
    cred = struct.pack(">II", flavour, len(body)) + body
    verf = struct.pack(">II", 6 if flavour == 6 else 0, 8) + b"\x01" * 8
    args = struct.pack(">III", 0, 2, len(ops)) + b"".join(
        struct.pack(">I", op) + b"\0" * 32 for op in ops
    )
    args += payload
    if service == 2:
        args = struct.pack(">II", len(args) + 4, 9) + args
    elif service == 3:
        args = struct.pack(">I", len(payload)) + payload
    rest = struct.pack(">IIIII", 0, 2, 100003, 4, 1) + cred + verf + args
    return struct.pack(">II", 0x80000000 | (len(rest) + 4), 1234) + rest


def pkt(payload: bytes) -> Packet:
    return Packet(proto=6, sport=900, dport=2049, length=len(payload) + 52, payload=payload)


@pytest.mark.parametrize("flavour,service,ops,expected", [
    (1, None, (OP_SEQUENCE,), None),                         # a lease renewal: no file data
    (1, None, (OP_SEQUENCE, PUTFH, WRITE), "AUTH_SYS"),
    (6, 2, (OP_SEQUENCE,), None),
    (6, 2, (OP_SEQUENCE, PUTFH, WRITE), "RPCSEC_GSS integrity"),
    (6, 1, (OP_SEQUENCE, PUTFH, WRITE), "RPCSEC_GSS without protection"),
    (6, 3, (OP_SEQUENCE, PUTFH, WRITE), "privacy"),
])
def test_which_calls_show_their_arguments(flavour, service, ops, expected):
    assert call_protection(call(flavour, service, ops)) == expected


def test_a_context_set_up_and_a_continuation_segment_are_not_calls():
    assert call_protection(call(6, 1, gss_proc=1)) is None
    assert call_protection(b"\x17" * 1400) is None
    assert rpc_record(b"\x80\x00\x01\x00" + b"\0" * 8) is None          # too short to be a call


def test_the_wire_rule_fails_an_integrity_write_and_passes_privacy():
    stack = get("nfs")("krb5p")
    leak = stack.leak(pkt(call(6, 2, (OP_SEQUENCE, PUTFH, WRITE))), 2049)
    assert leak and "RPCSEC_GSS integrity" in leak
    assert stack.leak(pkt(call(6, 3, (OP_SEQUENCE, PUTFH, WRITE))), 2049) is None
    assert stack.leak(pkt(call(1, None, (OP_SEQUENCE,))), 2049) is None


def test_the_entropy_is_judged_on_the_sealed_token_not_the_rpc_header():
    stack = get("nfs")("krb5p")
    rng = __import__("random").Random(7)
    packets = [
        pkt(call(6, 3, (OP_SEQUENCE, PUTFH, WRITE), payload=rng.randbytes(200))) for _ in range(50)
    ]
    whole = judge(packets, stack.leak, 2049)
    cut = judge(packets, stack.leak, 2049, sealed=stack.sealed)
    assert whole["entropy_bits_per_byte"] < cut["entropy_bits_per_byte"]
    assert cut["verdict"] == "encrypted", cut
    assert stack.sealed(pkt(b"\x42" * 300)) == b"\x42" * 300  # a continuation: all of it


def test_what_the_mount_and_the_ticket_say():
    stats = ("device proc mounted on /proc with fstype proc\n"
             "device server.cc.test:/ mounted on /tmp/m with fstype nfs4 statvers=1.1\n"
             "\topts:\trw,vers=4.2,rsize=262144,wsize=262144,sec=krb5p,clientaddr=10.203.0.1\n")
    assert mount_options(stats, Path("/tmp/m"))["sec"] == "krb5p"
    assert mount_options(stats, Path("/tmp/other")) is None
    klist = ("11/24/26 05:36:34  11/25/26 05:36:11  nfs/server.cc.test@CC.TEST\n"
             "\tEtype (skey, tkt): aes256-cts-hmac-sha384-192, aes256-cts-hmac-sha1-96 \n")
    assert service_enctype(klist, "nfs/server.cc.test@CC.TEST") == "aes256-cts-hmac-sha384-192"
    assert service_enctype(klist, "nfs/other@CC.TEST") is None


def test_only_krb5p_encrypts_and_its_cipher_follows_the_session_key():
    stacks = {v: get("nfs")(v) for v in ("sys", "krb5", "krb5i", "krb5p")}
    assert stacks["krb5p"].confidential() is True
    assert all("does not encrypt" in stacks[v].confidential() for v in ("krb5", "krb5i"))
    assert stacks["sys"].variant_role() == "baseline"
    assert stacks["krb5i"].cipher_ref() is None
    stacks["krb5p"].negotiated = {"enctype": "aes128-cts-hmac-sha256-128"}
    assert stacks["krb5p"].cipher_ref()["algorithm"] == "aes-128-cbc"


def test_nfs_3_is_a_plaintext_variant_held_against_nfs_4_and_read_back_as_version_3():
    v3 = get("nfs")("v3")
    assert v3.params == {"sec": "sys", "vers": "3"} and v3.variant_role() == "measured"
    assert v3.confidential() == "NFS 3 with sec=sys does not encrypt"
    assert v3.cipher_ref() is None and get("nfs").baselines == ("nfs:sys",)
    stats = ("device server.cc.test:/tmp/share mounted on /tmp/m with fstype nfs statvers=1.1\n"
             "\topts:\trw,vers=3,rsize=1048576,wsize=1048576,namlen=255,acregmin=3,"
             "sec=sys,mountaddr=10.203.0.2,mountvers=3,mountport=20048,mountproto=tcp,"
             "local_lock=all\n")
    assert mount_options(stats, Path("/tmp/m"))["vers"] == "3"
    assert any(t.name == "rpcbind" for t in get("nfs").tools)


def test_nfs_3_is_set_up_first_whatever_order_the_stacks_are_named_in():
    """Set up after a Kerberos variant and torn down before it, NFS 3 left that variant's
    rpc_pipefs unmount hanging: it goes first (released last), the rest keep their order."""
    from cryptcost.runner.network import resolve
    for specs in (["nfs:krb5p", "nfs:v3"], ["nfs:*"], ["nfs:krb5i", "nfs:v3", "nfs:krb5"]):
        labels = [s.label for s, _ in resolve(specs, "netns", here=False)[0]]
        assert labels[0] == "nfs:v3" and labels.count("nfs:v3") == 1, (specs, labels)
    labels = [s.label for s, _ in resolve(["nfs:krb5i", "nfs:v3", "nfs:krb5"], "netns",
                                          here=False)[0]]
    assert labels == ["nfs:v3", "nfs:krb5i", "nfs:krb5", "nfs:sys"]
    assert [s.label for s, _ in resolve(["tls", "nfs:krb5p"], "netns", here=False)[0]][0] == \
        "tls:tls13-aes128-gcm"                          # nothing asks to go first: as named


def test_the_known_krb5p_failure_is_named_only_where_it_was_seen():
    assert "GARBAGE_ARGS" in known_bug("krb5p", "6.1.0-56-amd64")
    assert known_bug("krb5p", "6.12.100+deb12-amd64") == ""
    assert known_bug("krb5i", "6.1.0-56-amd64") == ""


def test_unavailable_here_says_how_to_run_it_emulated(monkeypatch):
    from cryptcost.errors import Unavailable
    from cryptcost.host import kernel

    monkeypatch.setattr(
        kernel, "features", lambda: {"netns": {"present": True}, "veth": {"present": True}}
    )
    with pytest.raises(Unavailable) as exc:
        get("nfs").require()
    assert "cryptcost vm --kernel 6.12 -- network --stacks nfs" in str(exc.value.install)



class _Mounts:
    """What the remount path does with Resources and proc.run. The share is a directory here;
    an unwritable mount is one whose directory is gone (root writes through any mode)."""

    def __init__(self, share: Path, unwritable: int):
        self.share, self.unwritable, self.done = share, unwritable, []

    def mount(self, source, target, *args, **kw):
        self.done.append(("mount", source))
        if self.unwritable:
            self.unwritable -= 1
            self.share.exists() and self.share.rmdir()
        else:
            self.share.mkdir(exist_ok=True)
        return len(self.done)

    def release(self, entry):
        self.done.append(("release", entry))

    def run(self, argv, **kw):
        self.done.append(("run", argv[-2:]))


@pytest.mark.parametrize("unwritable", [0, 1, 2])
def test_a_share_that_comes_up_unwritable_is_mounted_once_more_and_says_why(
        tmp_path, monkeypatch, unwritable):
    import os
    import types

    from cryptcost.errors import CryptcostError
    from cryptcost.stacks import nfs

    share = tmp_path / "share"
    share.mkdir()
    fake = _Mounts(share, unwritable)
    monkeypatch.setattr(nfs.proc, "run", fake.run)
    stack = get("nfs")("krb5")
    stack.mnt, stack.remounted = share, ""
    stack.mountd = types.SimpleNamespace(pid=os.getpid())
    link = types.SimpleNamespace(mount_argv=lambda end, argv: argv)
    how = ("server.cc.test:/", "nfs4", "vers=4.2,sec=krb5")
    if unwritable == 2:
        with pytest.raises(CryptcostError, match="unwritable, mounted twice: No such file .*b's "
                                                 "kernel holds auth.unix.ip: .*; nfsd.export: "):
            stack._mount_writable(fake, link, *how)
    else:
        stack._mount_writable(fake, link, *how)
    assert [d[0] for d in fake.done] == ["mount"] + ["release", "run", "mount"] * min(unwritable, 1)
    if unwritable:
        assert fake.done[2] == ("run", ["exportfs", "-f"])
    assert stack.remounted.startswith("No such file") == (unwritable == 1)
    assert "b's kernel holds auth.unix.ip: " in stack.remounted or unwritable != 1
    assert not share.exists() or list(share.iterdir()) == []        # the probe is gone
