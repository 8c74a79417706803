"""``ssh``: an SSH tunnel — a private sshd at end ``b`` (its own host key,
config and port; public-key login for root only), and ``ssh -N -L`` at
end ``a`` forwarding a local port to the service.

Each variant pins one cipher (and, for the CTR cipher, one MAC) on both
sides, compression off; :meth:`verify` reads what the client negotiated
from its ``-v`` log.
"""

from __future__ import annotations

import re
import secrets

from cryptcost import proc
from cryptcost.errors import CryptcostError
from cryptcost.host.tools import Tool
from cryptcost.lifecycle.resources import Resources
from cryptcost.links import Link
from cryptcost.links.ends import End
from cryptcost.stacks.base import ref
from cryptcost.stacks.net import Endpoint, NetworkStack

SSH = Tool("ssh", "ssh", "openssh-client", ("ssh", "-V"), r"OpenSSH_([\w.]+)")
SSHD = Tool("sshd", "sshd", "openssh-server", ())
SSH_KEYGEN = Tool("ssh-keygen", "ssh-keygen", "openssh-client", ())


class Ssh(NetworkStack):
    name = "ssh"
    description = "SSH port forwarding (ssh -N -L at a, a private sshd at b)"
    layer = "userspace"
    use_case = "remote-access"
    suites = {"quick": "", "standard": "*", "full": "*"}
    baselines = ("tcp",)
    links = ("netns", "loopback", "peer")
    security = ("an SSH tunnel runs in one process per connection: its cipher work uses one core "
                "for each direction",)
    tools = (SSH, SSHD, SSH_KEYGEN)
    # AES-GCM and AES-CTR; chacha20-poly1305 is OpenSSH's own code
    crypto_library = "openssl"
    variants = {
        "aes128-gcm": {"cipher": "aes128-gcm@openssh.com", "mac": None, "aead": "aes-128-gcm"},
        "aes256-gcm": {"cipher": "aes256-gcm@openssh.com", "mac": None, "aead": "aes-256-gcm"},
        "chacha20-poly1305": {"cipher": "chacha20-poly1305@openssh.com", "mac": None,
                              "aead": "chacha20-poly1305"},
        "aes128-ctr-umac64": {"cipher": "aes128-ctr", "mac": "umac-64-etm@openssh.com",
                              "aead": "aes-128-ctr"},
        "aes128-ctr-sha256": {"cipher": "aes128-ctr", "mac": "hmac-sha2-256-etm@openssh.com",
                              "aead": "aes-128-ctr"},
    }
    default_variants = ("aes128-gcm",)

    def cipher_ref(self) -> dict:
        # SSH packets carry up to 32 KiB; 16 KiB, as for TLS records, is the nearest cell. A
        # separate MAC (the CTR variants) follows the cipher over the same bytes: HMAC-SHA-256's
        # cell is in the ceiling; UMAC, which no engine measures, is not, so that one is not exact
        mac = self.params["mac"]
        hmac = "hmac-sha256" if mac and mac.startswith("hmac-sha2-256") else None
        return ref(self.params["aead"], "userspace", unit=16384, exact=mac is None or bool(hmac),
                   then=hmac)

    def setup(self, res: Resources, link: Link, service: int) -> Endpoint:
        self.link = link
        a, b = link.at("a"), link.at("b")
        self.dirs = {"a": a.tmpdir("cryptcost-ssh-"), "b": b.tmpdir("cryptcost-ssh-")}
        # Each private key is made at the end that uses it and never leaves it; the public
        # halves cross (authorized_keys at b, known_hosts at a).
        tag = f"ssh-{self.variant}-{secrets.token_hex(3)}"
        host_key = _keypair(b, f"{tag}-host")
        client_key = _keypair(a, f"{tag}-client")
        port, local = link.port(2222), link.port(15202)
        cipher, mac = self.params["cipher"], self.params["mac"]
        auth = self.dirs["b"] / "authorized_keys"
        b.write(auth, a.read(str(client_key) + ".pub"))
        lines = [f"Port {port}", f"ListenAddress {link.b_addr}", f"HostKey {host_key}",
                 f"AuthorizedKeysFile {auth}", "PermitRootLogin prohibit-password",
                 "PasswordAuthentication no",
                 "KbdInteractiveAuthentication no", "UsePAM no", "StrictModes no",
                 "AllowTcpForwarding yes",
                 "Compression no", "PidFile none", f"Ciphers {cipher}", "LogLevel VERBOSE"]
        if mac:
            lines.append(f"MACs {mac}")
        conf = self.dirs["b"] / "sshd_config"
        b.write(conf, ("\n".join(lines) + "\n").encode())
        b.run(["mkdir", "-p", "-m", "0755", "/run/sshd"], timeout=10)   # privilege separation
        sshd = proc.which("sshd") or "/usr/sbin/sshd"
        daemon = self.start(res, "b", [sshd, "-D", "-e", "-f", str(conf)], name="sshd",
                            logdir=self.dirs["b"])
        proc.wait_for(lambda: link.listening("b", port), timeout=20, daemon=daemon,
                      what="sshd listening")
        known = self.dirs["a"] / "known_hosts"
        host = link.b_addr if port == 22 else f"[{link.b_addr}]:{port}"
        a.write(known, f"{host} ".encode() + b.read(str(host_key) + ".pub"))
        argv = ["ssh", "-F", "/dev/null", "-N", "-v", "-p", str(port), "-i", str(client_key),
                "-L", f"127.0.0.1:{local}:{link.b_addr}:{service}",
                "-o", f"UserKnownHostsFile={known}",
                "-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes", "-o",
                "ExitOnForwardFailure=yes",
                "-o", "Compression=no", "-o", "ServerAliveInterval=0", "-c", cipher]
        if mac:
            argv += ["-m", mac]
        client = self.start(res, "a", argv + [f"root@{link.b_addr}"], name="ssh",
                            logdir=self.dirs["a"])
        proc.wait_for(lambda: link.listening("a", local), timeout=30, daemon=client,
                      what="ssh forwarding its local port")
        self.transport_port = port
        return Endpoint("127.0.0.1", local)

    def verify(self, res: Resources) -> dict:
        """The cipher and MAC of both directions, from ``ssh -v``."""
        log = self.link.at("a").read_text(self.dirs["a"] / "ssh.log")
        found = re.findall(r"kex: (server->client|client->server) cipher: (\S+) MAC: (\S+) "
                           r"compression: (\S+)", log)
        if len(found) < 2:
            raise CryptcostError("ssh -v reported no negotiated cipher")
        for direction, cipher, mac, compression in found:
            self.expect(f"ssh {direction} cipher", cipher, self.params["cipher"])
            self.expect(f"ssh {direction} MAC", mac, self.params["mac"] or "<implicit>")
            self.expect(f"ssh {direction} compression", compression, "none")
        self.negotiated = {"cipher": found[0][1], "mac": found[0][2], "compression": found[0][3],
                           "from": "ssh -v"}
        return self.negotiated


def _keypair(end: End, name: str):
    """A fresh ed25519 key pair on ``end``'s key tmpfs (its path; ``.pub`` beside it)."""
    path = end.keydir() / f"{name}-{secrets.token_hex(3)}"
    end.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "cryptcost", "-f", str(path)],
            timeout=30)
    return path
