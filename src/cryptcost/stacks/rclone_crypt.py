"""``rclone-crypt``: ``rclone mount`` of a crypt remote over a local
directory — how people encrypt a cloud-synced folder.

rclone's VFS needs ``--vfs-cache-mode writes`` for random writes; its
cache lives on the same medium. rclone uploads (here: encrypts into the
lower directory) when a file is closed, so writes are timed wall-clock,
including close (``writes_complete_on_close``).
"""

from __future__ import annotations

from cryptcost import proc
from cryptcost.lifecycle.resources import Resources
from cryptcost.host.tools import Tool
from cryptcost.stacks.base import ref
from cryptcost.stacks.fs import FuseStack


class RcloneCrypt(FuseStack):
    name = "rclone-crypt"
    description = "rclone mount of a crypt remote (NaCl secretbox, XSalsa20-Poly1305, 64 KiB chunks)"
    tools = (Tool("rclone", "rclone", "rclone", ("rclone", "version")),
             Tool("fusermount3", "fusermount3", "fuse3", ("fusermount3", "--version")))
    variants = {"default": {"cipher": "XSalsa20-Poly1305", "vfs_cache_mode": "writes",
                            "filename_encryption": "standard"}}
    security = ("rclone crypt leaves file sizes (plus a fixed overhead) and the directory structure "
                "visible; names are encrypted",)
    writes_complete_on_close = True

    def cipher_ref(self) -> dict:
        # XSalsa20-Poly1305 (NaCl secretbox): ChaCha20-Poly1305 is its nearest measured relative
        return ref("chacha20-poly1305", "userspace", 65536, exact=False)

    def init(self, res: Resources) -> None:
        passfile, _ = res.keyfile(32, text=True)
        with open(passfile, "rb") as fh:
            obscured = proc.run(["rclone", "obscure", "-"], input=fh.read(), timeout=30).stdout.strip()
        self.conf = res.secret_file(
            f"[cc]\ntype = crypt\nremote = {self.lower}\npassword = {obscured}\n"
            f"filename_encryption = {self.params['filename_encryption']}\n".encode(), "rclone.conf")
        del obscured
        self.cache = self.root / "vfs-cache"
        self.cache.mkdir()

    def mount_argv(self, res: Resources) -> list[str]:
        return ["rclone", "mount", "cc:", str(self.mnt), "--config", str(self.conf),
                "--vfs-cache-mode", self.params["vfs_cache_mode"], "--cache-dir", str(self.cache),
                "--log-level", "ERROR"]
