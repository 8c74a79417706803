"""Network workloads: what crosses a network stack, as data.

Stream stacks (TCP, TLS, SSH, tunnels) carry iperf3:

* ``send`` — one stream from end ``a`` to end ``b``;
* ``receive`` — one stream from ``b`` to ``a`` (iperf3 ``-R``);
* ``streams`` — N parallel streams from ``a`` to ``b``;
* ``compressible`` — one stream from ``a`` to ``b`` of iperf3's repeating pattern
  (``--repeating-payload``) instead of its random bytes: what a compressing stack (IPsec
  with IPComp) can shrink, and no other stack is slowed or sped by.

File-share stacks (SMB3, NFS) copy files, each checked by its checksum:

* ``put`` — one large file from ``a`` to the share at ``b``;
* ``get`` — one large file from the share to ``a``;
* ``smallfiles`` — many 64 KiB files from ``a`` to the share;
* ``dbench`` — dbench's NetBench-like mix (R4) in the share's client mount, once for each
  number of clients (``clients``, R4's 1, 2, 4 and 8 by default): the cell's ``streams``.
  Only a share this host mounts (NFS) runs it; smbclient's copies have no mount.

Sets: ``quick`` (send; put), ``standard`` (all but compressible and dbench) and ``full`` (all
of them).
"""

from __future__ import annotations

from dataclasses import dataclass

from cryptcost.errors import UserError

STREAM_WORKLOADS = ("send", "receive", "streams", "compressible")
FILE_WORKLOADS = ("put", "get", "smallfiles", "dbench")
WORKLOADS = STREAM_WORKLOADS + FILE_WORKLOADS
SETS = {"quick": ("send", "put"),
        "standard": tuple(w for w in WORKLOADS if w not in ("compressible", "dbench")),
        "full": WORKLOADS}
SMALL_FILE = 64 << 10
CLIENTS = (1, 2, 4, 8)            # R4's dbench runs


@dataclass(frozen=True)
class NetOp:
    """One measured operation. ``key`` identifies it within a run."""

    workload: str
    traffic: str                  # stream or files
    streams: int = 1
    reverse: bool = False
    repeating: bool = False              # iperf3's repeating pattern, not random bytes
    files: int = 1
    file_bytes: int | None = None

    @property
    def op(self) -> str:
        return self.workload

    @property
    def key(self) -> tuple:
        return (self.workload, self.streams, self.file_bytes)


def expand(names: list[str]) -> list[str]:
    """Workload names and sets → workload names, in order, once each."""
    out: list[str] = []
    for name in names:
        if name in SETS:
            out += [n for n in SETS[name] if n not in out]
        elif name in WORKLOADS:
            if name not in out:
                out.append(name)
        else:
            raise UserError(f"unknown network workload {name!r}; choose from "
                            f"{', '.join(WORKLOADS)} or a set: {', '.join(SETS)}")
    return out


def ops(names: list[str], traffic: str, *, streams: int = 4, file_bytes: int = 256 << 20,
        small_files: int = 512, clients: tuple[int, ...] = CLIENTS) -> list[NetOp]:
    """The operations of ``names`` that a stack carrying ``traffic`` runs."""
    out = []
    for name in expand(names):
        if traffic == "stream" and name in STREAM_WORKLOADS:
            out.append(NetOp(name, "stream", streams=streams if name == "streams" else 1,
                             reverse=name == "receive", repeating=name == "compressible"))
        elif traffic == "files" and name in FILE_WORKLOADS:
            if name == "dbench":
                out += [NetOp(name, "files", streams=n) for n in clients]
            elif name == "smallfiles":
                out.append(NetOp(name, "files", files=small_files, file_bytes=SMALL_FILE))
            else:
                out.append(NetOp(name, "files", file_bytes=file_bytes))
    return out
