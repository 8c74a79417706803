"""``gocryptfs``: a FUSE overlay encrypting each file in 4 KiB blocks.

Modes: AES-256-GCM (default), XChaCha20-Poly1305, AES-SIV. The scrypt cost
of the master-key wrapping is lowered (``-scryptn 10``): it is paid once at
mount time and does not change the data path being measured.
"""

from __future__ import annotations

from cryptcost import proc
from cryptcost.lifecycle.resources import Resources
from cryptcost.stacks.base import ref
from cryptcost.stacks.fs import FuseStack

_LEAKS = ("gocryptfs (like every FUSE overlay) leaves file sizes, timestamps, permissions "
          "and the directory structure visible")


class Gocryptfs(FuseStack):
    name = "gocryptfs"
    description = "gocryptfs FUSE overlay, 4 KiB authenticated blocks"
    crypto_library = "openssl+go"      # AES-GCM through OpenSSL, the other modes in Go
    tools = ("gocryptfs",)
    variants = {"aes-gcm": {"cipher": "AES-256-GCM", "flag": None},
                "xchacha": {"cipher": "XChaCha20-Poly1305", "flag": "-xchacha"},
                "aes-siv": {"cipher": "AES-256-SIV", "flag": "-aessiv"}}
    default_variants = ("aes-gcm",)
    baselines = ("gofuse-passthrough", "plain")      # the same FUSE library: go-fuse
    security = (_LEAKS,)

    def cipher_ref(self) -> dict:
        alg = {"aes-gcm": "aes-256-gcm", "xchacha": "xchacha20-poly1305", "aes-siv": "aes-256-siv"}
        return ref(alg[self.variant], "go")

    def init(self, res: Resources) -> None:
        self.passfile, _ = res.keyfile(32, text=True)
        flag = [self.params["flag"]] if self.params["flag"] else []
        proc.run(["gocryptfs", "-init", "-q", "-nosyslog", "-scryptn", "10", "-passfile",
                  str(self.passfile), *flag, str(self.lower)], env=self.env(), timeout=60)

    def mount_argv(self, res: Resources) -> list[str]:
        return ["gocryptfs", "-fg", "-q", "-nosyslog", "-passfile", str(self.passfile),
                str(self.lower), str(self.mnt)]
