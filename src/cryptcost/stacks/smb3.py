"""``smb3``: Samba's smbd at end ``b`` with a private configuration and a
share on its own tmpfs; smbclient copies files to and from it at end
``a``. SMB 3.1.1 only; each variant pins the server's encryption
(``off`` is the baseline: the same protocol and daemons, no encryption).

The user is root with a random password, made at end ``a`` and kept in a
0600 file on each end's key tmpfs (smbpasswd reads it at ``b``,
smbclient with ``-A`` at ``a``); every step goes through the ends, so the
share runs across a peer link too. :meth:`verify` holds a session open and
reads its dialect and cipher back with ``smbstatus --json``; the wire
check refuses any plaintext SMB2 READ or WRITE.
"""

from __future__ import annotations

import json
import secrets
import struct
import time
from pathlib import Path

from cryptcost import proc
from cryptcost.engines.tcpdump import Packet
from cryptcost.errors import CryptcostError
from cryptcost.host.tools import Tool
from cryptcost.lifecycle.resources import Resources
from cryptcost.links import Link
from cryptcost.stacks.base import ref
from cryptcost.stacks.net import Endpoint, FileShareStack

SMBD = Tool("smbd", "smbd", "samba", ("smbd", "--version"), r"Version (\d+(?:\.\d+)+)")
SMBCLIENT = Tool("smbclient", "smbclient", "smbclient", ("smbclient", "--version"),
                 r"Version (\d+(?:\.\d+)+)")
SMBPASSWD = Tool("smbpasswd", "smbpasswd", "samba", ())
SMB2_READ, SMB2_WRITE = 0x0008, 0x0009
SHARE = "cc"


class Smb3(FileShareStack):
    name = "smb3"
    description = "SMB 3.1.1 file share (smbd at b, smbclient at a), with or without encryption"
    layer = "userspace"
    use_case = "file-share"
    suites = {"standard": "*", "full": "*"}
    baselines = ("smb3:off",)
    baseline_variants = ("off",)
    security = ("SMB3 encryption protects data in transit only; the share's files are plaintext "
                "on the server, and without it SMB3 signs at best, so anyone on the path "
                "reads every file",)
    tools = (SMBD, SMBCLIENT, SMBPASSWD)
    crypto_library = "gnutls"           # Samba's SMB3 ciphers come from GnuTLS (Nettle underneath)
    variants = {"off": {"encrypt": "off", "cipher": None},
                "aes-128-ccm": {"encrypt": "required", "cipher": "AES-128-CCM"},
                "aes-128-gcm": {"encrypt": "required", "cipher": "AES-128-GCM"},
                "aes-256-gcm": {"encrypt": "required", "cipher": "AES-256-GCM"}}
    default_variants = ("aes-128-gcm",)
    transport = "TCP 445"
    links = ("netns", "loopback", "peer")

    def cipher_ref(self) -> dict | None:
        alg = {"AES-128-GCM": "aes-128-gcm", "AES-256-GCM": "aes-256-gcm",
               "AES-128-CCM": "aes-128-gcm"}
        cipher = self.params["cipher"]
        return ref(alg[cipher], "userspace", unit=1 << 20,
                   exact=cipher != "AES-128-CCM") if cipher else None

    def setup(self, res: Resources, link: Link, service: int) -> Endpoint:
        self.link = link
        a, b = link.at("a"), link.at("b")
        d = self.dir = b.tmpdir("cryptcost-smb-")
        self.share = b.tmpdir("cryptcost-smbshare-")
        b.tmpfs(self.share, 2 << 30, "0777")
        self.port = self.service_port = link.port(445)
        subs = ("private", "lock", "state", "cache", "pid", "log", "ncalrpc")
        b.run(["mkdir", *(str(d / sub) for sub in subs)], timeout=30)
        server = [
            "[global]", "server role = standalone server", f"interfaces = {link.b_addr}",
            "bind interfaces only = yes",
            f"smb ports = {self.port}", "disable netbios = yes", "server min protocol = SMB3_11",
            f"private dir = {d}/private", f"lock directory = {d}/lock",
            f"state directory = {d}/state",
            f"cache directory = {d}/cache", f"pid directory = {d}/pid",
            f"ncalrpc dir = {d}/ncalrpc",
            f"log file = {d}/log/log.%m", f"passdb backend = tdbsam:{d}/private/passdb.tdb",
            "load printers = no", "printing = bsd", "printcap name = /dev/null",
            "disable spoolss = yes",
            f"server smb encrypt = {self.params['encrypt']}"]
        if self.params["cipher"]:
            server.append(f"server smb3 encryption algorithms = {self.params['cipher']}")
        server += [f"[{SHARE}]", f"path = {self.share}", "read only = no", "force user = root"]
        self.conf = d / "smb.conf"
        b.write(self.conf, ("\n".join(server) + "\n").encode())
        client = ["[global]", "client min protocol = SMB3_11", "client max protocol = SMB3_11",
                  f"client smb encrypt = {'required' if self.params['cipher'] else 'off'}"]
        self.client_conf = a.tmpdir("cryptcost-smbclient-") / "client.conf"
        a.write(self.client_conf, ("\n".join(client) + "\n").encode())
        # the password is made here; at b it is read from that end's key tmpfs, never an argv
        password = secrets.token_hex(16)
        typed = b.secret_file(f"{password}\n{password}\n".encode(),
                              name=f"smb-{self.variant}.passwd")
        b.run(["sh", "-c", 'exec smbpasswd -c "$1" -a -s root < "$2"', "sh", str(self.conf),
               str(typed)], timeout=60)
        self.auth = a.secret_file(f"username = root\npassword = {password}\n".encode(),
                                  name=f"smb-{self.variant}.auth")
        daemon = self.start(res, "b",
                            ["smbd", "--foreground", "--no-process-group", "-s", str(self.conf),
                             "--debug-stdout"], name="smbd", logdir=d)
        proc.wait_for(lambda: link.listening("b", self.port), timeout=30, daemon=daemon,
                      what="smbd listening")
        return Endpoint(link.b_addr, self.port)

    def _client(self, commands: str, *, timeout: float = 600) -> proc.Completed:
        argv = ["smbclient", f"//{self.link.b_addr}/{SHARE}", "-p", str(self.port), "-A",
                str(self.auth), "-s", str(self.client_conf), "-c", commands]
        done = self.link.at("a").run(argv, timeout=timeout, check=False,
                                     env=self.accel_env() or None)
        if done.returncode != 0 or "NT_STATUS" in done.stdout + done.stderr:
            raise CryptcostError(f"smbclient failed ({done.returncode}): "
                                 f"{(done.stderr.strip() or done.stdout.strip())[-300:]}")
        return done

    def put(self, res: Resources, files: list[Path], remote_dir: str) -> None:
        if len(files) == 1:
            self._client(f'put "{files[0]}" "{files[0].name}"')
            return
        src = files[0].parent
        self._client(f'lcd "{src}"; prompt off; mput {" ".join(f.name for f in files)}')

    def get(self, res: Resources, names: list[str], local_dir: Path) -> None:
        self._client("; ".join(f'get "{n}" "{local_dir / n}"' for n in names))

    def verify(self, res: Resources) -> dict:
        """Hold a session open and read its dialect and encryption from smbstatus."""
        a, b = self.link.at("a"), self.link.at("b")
        held = a.daemon(["sh", "-c", "(echo ls; sleep 5; echo quit) | smbclient "
                         f"//{self.link.b_addr}/{SHARE} -p {self.port} -A "
                         f"{self.auth} -s {self.client_conf} >/dev/null 2>&1"])
        try:
            session = None
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and session is None:
                done = b.run(["smbstatus", "-s", str(self.conf), "--json"], timeout=30)
                status = json.loads(done.stdout)
                # a session is listed while it is still being set up; once the share is connected,
                # its dialect and encryption are final
                if status.get("tcons"):
                    session = next(iter((status.get("sessions") or {}).values()), None)
                time.sleep(0.2)
        finally:
            a.stop(held)
        if session is None:
            raise CryptcostError("smbstatus shows no session")
        dialect = session.get("session_dialect")
        cipher = (session.get("encryption") or {}).get("cipher") or None
        cipher = None if cipher in ("-", "none", "") else cipher
        self.expect("SMB dialect", dialect, "SMB3_11")
        if self.params["cipher"]:
            self.expect("SMB encryption", cipher, self.params["cipher"])
        elif cipher:
            raise CryptcostError(f"smb3:off negotiated encryption {cipher}")
        self.negotiated = {"dialect": dialect, "cipher": cipher or "none",
                           "degree": (session.get("encryption") or {}).get("degree"),
                           "from": "smbstatus --json"}
        return self.negotiated

    def leak(self, packet: Packet, service: int) -> str | None:
        """A plaintext SMB2 READ or WRITE (an encrypted session sends only transform headers)."""
        body = packet.payload
        if packet.proto == 6 and len(body) >= 20 and body[4:8] == b"\xfeSMB":
            command = struct.unpack("<H", body[16:18])[0]
            if command in (SMB2_READ, SMB2_WRITE):
                return (f"a plaintext SMB2 {'READ' if command == SMB2_READ else 'WRITE'} on port "
                        f"{packet.dport}")
        return None
