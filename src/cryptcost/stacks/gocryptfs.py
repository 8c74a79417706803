"""``gocryptfs``: a FUSE overlay encrypting each file in 4 KiB blocks.

Modes: AES-256-GCM (default), XChaCha20-Poly1305, AES-SIV. The scrypt cost
of the master-key wrapping is lowered (``-scryptn 10``): it is paid once at
mount time and does not change the data path being measured.

gocryptfs has two crypto backends, Go's and OpenSSL's, and by default
(``-openssl auto``) picks the faster one on the host: for AES-GCM, Go's when
the CPU has AES and PCLMULQDQ (Go is then about twice as fast as OpenSSL
here), OpenSSL's otherwise; XChaCha20 in Go on amd64 and arm64. So the
default variant's acceleration-off copy also changes backend. The
``aes-gcm-go`` and ``aes-gcm-openssl`` variants pin the backend
(``-openssl=false`` / ``-openssl=true``) and measure each library alone.
"""

from __future__ import annotations

from cryptcost import proc
from cryptcost.host.cpu import cpu_info
from cryptcost.lifecycle.resources import Resources
from cryptcost.stacks.base import ref
from cryptcost.stacks.fs import FuseStack

_LEAKS = ("gocryptfs (like every FUSE overlay) leaves file sizes, timestamps, permissions "
          "and the directory structure visible")


class Gocryptfs(FuseStack):
    name = "gocryptfs"
    description = "gocryptfs FUSE overlay, 4 KiB authenticated blocks"
    crypto_library = "openssl+go"      # -openssl auto: either backend, as the host's CPU decides
    tools = ("gocryptfs",)
    variants = {"aes-gcm": {"cipher": "AES-256-GCM", "flag": None, "backend": "auto"},
                "aes-gcm-go": {"cipher": "AES-256-GCM", "flag": None, "backend": "go"},
                "aes-gcm-openssl": {"cipher": "AES-256-GCM", "flag": None, "backend": "openssl"},
                "xchacha": {"cipher": "XChaCha20-Poly1305", "flag": "-xchacha", "backend": "auto"},
                "aes-siv": {"cipher": "AES-256-SIV", "flag": "-aessiv", "backend": "go"}}
    default_variants = ("aes-gcm",)
    fuse_library = "go-fuse v2"
    baselines = ("gofuse-passthrough", "plain")      # the same FUSE library: go-fuse
    daemon_caches = False            # no data cache: each read decrypts what it reads from lower
    security = (_LEAKS,)

    def __init__(self, variant: str | None = None, fs: str = "ext4"):
        super().__init__(variant, fs)
        if self.params["backend"] != "auto":
            self.crypto_library = self.params["backend"]     # one library, one switch

    def backend_used(self) -> str:
        """The backend this mount uses: pinned, or what ``-openssl auto`` picks
        with this instance's environment (acceleration off hides AES and
        PCLMULQDQ from Go, so auto then picks OpenSSL for AES-GCM)."""
        if self.params["backend"] != "auto":
            return self.params["backend"]
        if self.params["cipher"] != "AES-256-GCM":
            return "go"
        flags = cpu_info().get("flags", {})
        return "go" if self.accel and flags.get("aes") and flags.get("pclmulqdq") else "openssl"

    def cipher_ref(self) -> dict:
        alg = {"AES-256-GCM": "aes-256-gcm", "XChaCha20-Poly1305": "xchacha20-poly1305",
               "AES-256-SIV": "aes-256-siv"}
        # gocryptfs encrypts a write of 32 blocks or more (a 128 KiB FUSE write) in two
        # goroutines (contentenc.EncryptBlocks, encryptMaxSplit); it decrypts in one.
        return ref(alg[self.params["cipher"]], "go" if self.backend_used() == "go" else "userspace",
                   threads={"write": (2, 128 << 10)})

    def init(self, res: Resources) -> None:
        self.passfile, _ = res.keyfile(32, text=True)
        flag = [self.params["flag"]] if self.params["flag"] else []
        proc.run(["gocryptfs", "-init", "-q", "-nosyslog", "-scryptn", "10", "-passfile",
                  str(self.passfile), *flag, str(self.lower)], env=self.env(), timeout=60)

    def mount_argv(self, res: Resources) -> list[str]:
        backend = {"auto": [], "go": ["-openssl=false"],
                   "openssl": ["-openssl=true"]}[self.params["backend"]]
        return ["gocryptfs", "-fg", "-q", "-nosyslog", *backend, "-passfile", str(self.passfile),
                str(self.lower), str(self.mnt)]

    def describe(self) -> dict:
        d = super().describe()
        d["backend_used"] = self.backend_used()
        return d
