"""``rclone-crypt``: ``rclone mount`` of a crypt remote over a local
directory — how people encrypt a cloud-synced folder.

rclone's VFS needs ``--vfs-cache-mode writes`` for random writes; its
cache lives on the same medium. rclone uploads (here: encrypts into the
lower directory) after a file is closed: ``--vfs-write-back 0s`` starts
the upload at close, and :meth:`RcloneCrypt.settle` waits until the lower
directory holds the ciphertext of every plaintext byte (rclone's format:
a 32-byte header, then each 64 KiB chunk plus a 16-byte tag), so that the
encryption is inside the timed window.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

from cryptcost import proc
from cryptcost.errors import CryptcostError
from cryptcost.host.tools import Tool
from cryptcost.lifecycle.resources import Resources
from cryptcost.stacks.base import ref
from cryptcost.stacks.fs import FuseStack


class RcloneCrypt(FuseStack):
    name = "rclone-crypt"
    description = ("rclone mount of a crypt remote (NaCl secretbox, XSalsa20-Poly1305, "
                   "64 KiB chunks)")
    crypto_library = "go"
    # rclone mounts through its own Go FUSE library, which asks for big
    # writes; no passthrough of that library is packaged, so the baseline is
    # the libfuse 2 one with the same request size.
    fuse_library = "bazil.org/fuse (rclone's)"
    fuse_options = ("big_writes",)
    baselines = ("fuse-passthrough:big-writes", "plain")
    tools = (Tool("rclone", "rclone", "rclone", ("rclone", "version")),
             Tool("fusermount3", "fusermount3", "fuse3", ("fusermount3", "--version")))
    variants = {"default": {"cipher": "XSalsa20-Poly1305", "vfs_cache_mode": "writes",
                            "vfs_write_back": "0s", "filename_encryption": "standard"}}
    security = ("rclone crypt leaves file sizes (plus a fixed overhead) and the directory "
                "structure visible; names are encrypted",)
    settle_timeout = 600.0
    # With passes sized by time (files of changing sizes and names, one per
    # round), rclone 1.60 now and then failed to delete a file it had just
    # uploaded ("IO error: remove …: no such file or directory", then EIO),
    # in about one round of ten; whole-file passes under one name never did.
    sized_by_time = False
    # Written again under the same name within one sample (a small medium's file took
    # under a second, so a second pass followed), rclone 1.60 failed the same way:
    # "IO error: remove …: no such file or directory", then EIO on the new file.
    one_write_pass = ("a file written again under the name rclone has just uploaded fails now and "
                      "then (rclone 1.60: \"remove …: no such file or directory\", then EIO)")
    stall_seconds = 20.0
    unfit_workloads = {"mixed": (
        "rclone 1.60 cannot remove the files dbench's mix leaves in its mount (\"IO error: "
        "remove …: no such file or directory\", then EIO), even once every upload has ended, "
        "and the file stays in its lower directory")}

    def cipher_ref(self) -> dict:
        # XSalsa20-Poly1305 (NaCl secretbox): ChaCha20-Poly1305 is its nearest measured relative
        return ref("chacha20-poly1305", "userspace", 65536, exact=False)

    def init(self, res: Resources) -> None:
        passfile, _ = res.keyfile(32, text=True)
        with open(passfile, "rb") as fh:
            obscured = proc.run(["rclone", "obscure", "-"], input=fh.read(),
                                timeout=30).stdout.strip()
        self.conf = res.secret_file(
            f"[cc]\ntype = crypt\nremote = {self.lower}\npassword = {obscured}\n"
            f"filename_encryption = {self.params['filename_encryption']}\n".encode(), "rclone.conf")
        del obscured
        self.cache = self.root / "vfs-cache"
        self.cache.mkdir()

    def mount_argv(self, res: Resources) -> list[str]:
        return ["rclone", "mount", "cc:", str(self.mnt), "--config", str(self.conf),
                "--vfs-cache-mode", self.params["vfs_cache_mode"], "--cache-dir", str(self.cache),
                "--vfs-write-back", self.params["vfs_write_back"],
                "--log-level", "ERROR"]

    def unmounted(self) -> None:
        """Empty rclone's VFS cache between mounts: everything in it has been
        uploaded (``settle`` waits for that), and a cache a new mount
        inherits from the last one made files unreadable (EIO) now and then."""
        shutil.rmtree(self.cache)
        self.cache.mkdir()

    def settle(self) -> float:
        """Wait until the lower directory holds exactly the ciphertext of what
        is in the mount — a file of each plaintext file's ciphertext size and
        nothing else, so neither a deleted file's leftovers nor another
        file's bytes can stand in for an upload still running — then make
        it durable. An upload that makes no progress for
        :attr:`stall_seconds` fails the sample with what was seen, rather
        than holding the run."""
        start = time.perf_counter()
        want = sorted(ciphertext_size(n) for n in _sizes(self.mnt))
        deadline = time.monotonic() + self.settle_timeout
        have, moved_at = None, time.monotonic()
        while True:
            now_have, now = sorted(_sizes(self.lower)), time.monotonic()
            if now_have == want:
                break
            if now_have != have:
                have, moved_at = now_have, now
            if now > deadline or now - moved_at > self.stall_seconds:
                raise CryptcostError(
                    f"rclone-crypt: the ciphertext did not reach the lower directory: {sum(have)} "
                    f"of {sum(want)} bytes in {len(have)} of {len(want)} files after "
                    f"{time.perf_counter() - start:.0f} s, no change for the last "
                    f"{now - moved_at:.0f} s (rclone's log: {self.logfile})")
            time.sleep(0.005)
        return time.perf_counter() - start + super().settle()


CHUNK, TAG, HEADER = 64 * 1024, 16, 32


def ciphertext_size(plaintext: int) -> int:
    """The size rclone crypt stores for a file of ``plaintext`` bytes."""
    return HEADER + plaintext + TAG * -(-plaintext // CHUNK)


def _sizes(root: Path) -> list[int]:
    return [os.stat(os.path.join(d, f)).st_size for d, _, files in os.walk(root) for f in files]
