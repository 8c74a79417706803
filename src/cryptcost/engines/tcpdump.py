"""tcpdump as a wire sampler: a few hundred packets of a link's interface
written to a pcap file, read back here without another dependency.

Only the headers a wire check needs are decoded: Ethernet (or Linux
cooked), IPv4, TCP, UDP and ESP; the rest of each packet is its payload.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

from cryptcost.errors import CryptcostError

SNAPLEN = 256
COUNT = 300


@dataclass(frozen=True)
class Packet:
    length: int                   # the packet's length on the wire (pcap's orig_len)
    proto: int | None = None      # IP protocol: 6 TCP, 17 UDP, 50 ESP
    sport: int | None = None
    dport: int | None = None
    payload: bytes = b""          # what follows the transport header, as far as captured


def argv(iface: str, path: str | Path, count: int = COUNT, snaplen: int = SNAPLEN,
         direction: str | None = None) -> list[str]:
    """Capture ``count`` packets of ``iface`` into ``path``, then exit.
    ``-Z root`` keeps the file ours; ``-U`` writes each packet at once;
    ``direction`` (in, out) keeps only the packets going that way."""
    return ["tcpdump", "-i", iface, "-n", "--immediate-mode", "-c", str(count), "-s", str(snaplen),
            "-U", "-Z", "root",
            *(["-Q", direction] if direction else []), "-w", str(path)]


def read_pcap(path: str | Path) -> list[Packet]:
    """The packets of a classic pcap file (any byte order, µs or ns stamps)."""
    return parse_pcap(Path(path).read_bytes(), str(path))


def parse_pcap(data: bytes, path: str = "the capture") -> list[Packet]:
    """The packets of a classic pcap file's bytes (:func:`read_pcap`)."""
    if len(data) < 24:
        return []
    magic = data[:4]
    if magic in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1"):
        order = "<"
    elif magic in (b"\xa1\xb2\xc3\xd4", b"\xa1\xb2\x3c\x4d"):
        order = ">"
    else:
        raise CryptcostError(f"{path} is not a pcap file")
    linktype = struct.unpack(order + "I", data[20:24])[0]
    out, pos = [], 24
    while pos + 16 <= len(data):
        _, _, incl, orig = struct.unpack(order + "IIII", data[pos:pos + 16])
        frame = data[pos + 16:pos + 16 + incl]
        pos += 16 + incl
        out.append(decode(frame, orig, linktype))
    return out


def decode(frame: bytes, length: int, linktype: int = 1) -> Packet:
    """One frame: Ethernet (1), Linux cooked (113), raw IP (101, 12) or loopback (0)."""
    if linktype == 1:
        offset = 14
        if len(frame) < 14 or struct.unpack("!H", frame[12:14])[0] != 0x0800:
            return Packet(length)
    elif linktype == 113:
        offset = 16
    elif linktype in (101, 12):
        offset = 0
    elif linktype == 0:
        offset = 4
    else:
        return Packet(length)
    ip = frame[offset:]
    if len(ip) < 20 or ip[0] >> 4 != 4:
        return Packet(length)
    ihl = (ip[0] & 0x0F) * 4
    proto = ip[9]
    body = ip[ihl:]
    if proto == 6 and len(body) >= 20:
        sport, dport = struct.unpack("!HH", body[:4])
        return Packet(length, proto, sport, dport, body[(body[12] >> 4) * 4:])
    if proto == 17 and len(body) >= 8:
        sport, dport = struct.unpack("!HH", body[:4])
        return Packet(length, proto, sport, dport, body[8:])
    return Packet(length, proto, None, None, body)
