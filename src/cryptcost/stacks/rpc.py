"""ONC RPC as it crosses the wire: the record at the start of a TCP payload, and what protects
an NFS call's arguments (the nfs stack's wire rule)."""

from __future__ import annotations

import struct

NFS_PROGRAM, RPCSEC_GSS, RPC_GSS_DATA, RPC_GSS_SVC_PRIVACY, OP_SEQUENCE = 100003, 6, 0, 3, 53


def _opaque(buf: bytes, at: int) -> int:
    """The offset after the XDR opaque<> (length, bytes, padding) at ``at``."""
    (n,) = struct.unpack(">I", buf[at:at + 4])
    return at + 4 + n + (-n) % 4


def rpc_record(payload: bytes) -> dict | None:
    """The ONC RPC header at the start of a TCP payload (a record's first
    segment), or None: ``call`` (with its flavour, RPCSEC_GSS procedure and
    service, and where its body starts) or ``reply`` (where its body starts)."""
    try:
        mark, _xid, kind = struct.unpack(">III", payload[:12])
        if not mark & 0x80000000:
            return None
        if kind == 0:
            rpcvers, program, _vers, _proc, flavour = struct.unpack(">IIIII", payload[12:32])
            if rpcvers != 2 or program != NFS_PROGRAM:
                return None
            cred = payload[36:]
            gss = struct.unpack(">IIII", cred[:16]) if flavour == RPCSEC_GSS else None
            verf = _opaque(payload, 32)                    # after the credential
            body = _opaque(payload, verf + 4)
            return {"kind": "call", "flavour": flavour, "gss_proc": gss[1] if gss else None,
                    "service": gss[3] if gss else None, "body": body}
        if kind == 1:
            (stat,) = struct.unpack(">I", payload[12:16])
            if stat != 0:
                return None
            body = _opaque(payload, 20) + 4                 # the verifier, then accept_stat
            return {"kind": "reply", "body": body} if body <= len(payload) else None
    except struct.error:
        return None
    return None


def call_protection(payload: bytes) -> str | None:
    """For a TCP payload that starts an NFS call: ``privacy``, or what else
    protects it (``AUTH_SYS``, ``RPCSEC_GSS integrity`` …); None for anything
    else, and for a lease renewal (a COMPOUND of SEQUENCE alone, which a
    client protects with its machine credential whatever the mount's flavour)."""
    rec = rpc_record(payload)
    if rec is None or rec["kind"] != "call" or rec["gss_proc"] not in (None, RPC_GSS_DATA):
        # not a call, or a context set-up: a token, no file data
        return None
    if rec["service"] == RPC_GSS_SVC_PRIVACY:
        return "privacy"
    try:
        # integrity: length and sequence number
        at = rec["body"] + (8 if rec["service"] == 2 else 0)
        at = _opaque(payload, at)                                 # the COMPOUND's tag
        _minor, numops, first = struct.unpack(">III", payload[at:at + 12])
    except struct.error:
        numops = first = None
    if numops == 1 and first == OP_SEQUENCE:
        return None
    if rec["flavour"] != RPCSEC_GSS:
        return {0: "AUTH_NONE", 1: "AUTH_SYS"}.get(rec["flavour"], f"auth flavour {rec['flavour']}")
    return {1: "RPCSEC_GSS without protection", 2: "RPCSEC_GSS integrity"}.get(
        rec["service"], f"RPCSEC_GSS service {rec['service']}")
