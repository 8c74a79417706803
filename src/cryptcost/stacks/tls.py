"""``tls``: stunnel in front of the service — a TLS server at end ``b``, a
TLS client at end ``a`` that the workload connects to in plaintext.

The server has a fresh self-signed RSA-2048 certificate, made at end ``b``
(its private key on that end's key tmpfs: it never leaves that host); each
variant pins one protocol version and one cipher suite on both sides, and
:meth:`verify` reads the suite the server negotiated from stunnel's own log.
"""

from __future__ import annotations

import re

from cryptcost import proc
from cryptcost.host.tools import Tool
from cryptcost.lifecycle.resources import Resources
from cryptcost.links import Link
from cryptcost.stacks.base import ref
from cryptcost.stacks.net import Endpoint, NetworkStack

STUNNEL = Tool("stunnel", "stunnel4", "stunnel4", ("stunnel4", "-version"),
               r"stunnel (\d+(?:\.\d+)+)")


class Tls(NetworkStack):
    name = "tls"
    description = "TLS through stunnel (server at b in front of the service, client at a)"
    layer = "userspace"
    use_case = "service-tls"
    suites = {"quick": "", "standard": "*", "full": "*"}
    baselines = ("tcp",)
    links = ("netns", "loopback", "peer")
    security = ("stunnel's TLS protects each connection, not the host: what reaches the "
                "forwarder's local port at either end travels in plaintext there",)
    tools = (STUNNEL, "openssl")
    crypto_library = "openssl"
    variants = {
        "tls13-aes128-gcm": {"protocol": "TLSv1.3", "suite": "TLS_AES_128_GCM_SHA256",
                             "aead": "aes-128-gcm"},
        "tls13-aes256-gcm": {"protocol": "TLSv1.3", "suite": "TLS_AES_256_GCM_SHA384",
                             "aead": "aes-256-gcm"},
        "tls13-chacha20": {"protocol": "TLSv1.3", "suite": "TLS_CHACHA20_POLY1305_SHA256",
                           "aead": "chacha20-poly1305"},
        "tls12-aes128-gcm": {"protocol": "TLSv1.2", "suite": "ECDHE-RSA-AES128-GCM-SHA256",
                             "aead": "aes-128-gcm"},
    }
    default_variants = ("tls13-aes128-gcm",)

    def cipher_ref(self) -> dict:
        return ref(self.params["aead"], "userspace", unit=16384)      # one TLS record

    def _pin(self) -> list[str]:
        p = self.params
        if p["protocol"] == "TLSv1.3":
            return ["sslVersionMin = TLSv1.3", "sslVersionMax = TLSv1.3",
                    f"ciphersuites = {p['suite']}"]
        return ["sslVersionMin = TLSv1.2", "sslVersionMax = TLSv1.2", f"ciphers = {p['suite']}"]

    def setup(self, res: Resources, link: Link, service: int) -> Endpoint:
        self.link = link
        a, b = link.at("a"), link.at("b")
        self.dirs = {"a": a.tmpdir("cryptcost-tls-"), "b": b.tmpdir("cryptcost-tls-")}
        key = b.secret_file(b"", name=f"tls-{self.variant}.key")
        cert = self.dirs["b"] / "cert.pem"
        b.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key),
               "-out", str(cert), "-days", "2", "-subj", "/CN=cryptcost"], timeout=60)
        accept, local = link.port(5443), link.port(15201)
        common = ["foreground = yes", "pid =", "debug = info", "syslog = no"]
        server = common + ["[service]", f"accept = {link.b_addr}:{accept}",
                           f"connect = {link.b_addr}:{service}",
                           f"cert = {cert}", f"key = {key}"] + self._pin()
        client = common + ["[service]", "client = yes", f"accept = 127.0.0.1:{local}",
                           f"connect = {link.b_addr}:{accept}"] + self._pin()
        for end, lines in (("b", server), ("a", client)):
            conf = self.dirs[end] / f"stunnel-{end}.conf"
            link.at(end).write(conf, ("\n".join(lines) + "\n").encode())
            daemon = self.start(res, end, ["stunnel4", str(conf)], name=f"stunnel-{end}",
                                logdir=self.dirs[end])
            port = accept if end == "b" else local
            proc.wait_for(lambda e=end, p=port: link.listening(e, p), timeout=20, daemon=daemon,
                          what=f"stunnel listening on port {port}")
        self.transport_port = accept
        return Endpoint("127.0.0.1", local)

    def verify(self, res: Resources) -> dict:
        """The protocol and suite stunnel's server logged for its connections."""
        log = self.link.at("b").read_text(self.dirs["b"] / "stunnel-b.log")
        found = re.findall(r"(TLSv1\.\d) ciphersuite: (\S+)", log)
        if not found:
            found = [(v,
                      s) for v, s in re.findall(r"(TLSv1\.\d)[^\n]*cipher(?:suite)?:? (\S+)", log)]
        got = found[-1] if found else (None, None)
        self.expect("TLS protocol", got[0], self.params["protocol"])
        self.expect("TLS cipher suite", got[1], self.params["suite"])
        self.negotiated = {"protocol": got[0], "suite": got[1], "from": "stunnel's server log"}
        return self.negotiated
