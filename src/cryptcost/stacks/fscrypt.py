"""``fscrypt``: an ext4 directory under a v2 encryption policy, raw key.

The policy is set with the kernel's own interface (the ioctls
FS_IOC_ADD_ENCRYPTION_KEY, FS_IOC_SET_ENCRYPTION_POLICY,
FS_IOC_REMOVE_ENCRYPTION_KEY — Documentation/filesystems/fscrypt.rst),
as ``fscryptctl`` does. The ``fscrypt`` tool is not used because it needs
a global ``/etc/fscrypt.conf`` and ``/.fscrypt``, and cryptcost must not
change anything outside its scratch media.

Without inline-crypto hardware, ext4 serves O_DIRECT on encrypted files
with buffered I/O, so this stack is measured with fsync + drop_caches.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import os
from pathlib import Path

from cryptcost.errors import CryptcostError, Unavailable
from cryptcost.media import Backing
from cryptcost.lifecycle.release import is_mounted, releaser
from cryptcost.lifecycle.resources import Resources
from cryptcost.stacks.base import ref
from cryptcost.stacks.fs import StorageStack, make_fs

# linux/fscrypt.h
MODE_AES_256_XTS, MODE_AES_256_CTS, MODE_ADIANTUM = 1, 4, 9
FLAG_PAD_32, FLAG_DIRECT_KEY = 0x03, 0x04
KEY_SPEC_TYPE_IDENTIFIER = 2
FS_IOC_SET_ENCRYPTION_POLICY = 0x800C6613        # _IOR('f', 19, struct fscrypt_policy_v1)
FS_IOC_ADD_ENCRYPTION_KEY = 0xC0506617           # _IOWR('f', 23, struct fscrypt_add_key_arg)
FS_IOC_REMOVE_ENCRYPTION_KEY = 0xC0406618        # _IOWR('f', 24, struct fscrypt_remove_key_arg)
KEY_BYTES = 64


class _KeySpec(ctypes.Structure):
    _fields_ = [("type", ctypes.c_uint32), ("reserved", ctypes.c_uint32),
                ("identifier", ctypes.c_uint8 * 32)]


class _PolicyV2(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint8), ("contents_mode", ctypes.c_uint8),
                ("filenames_mode", ctypes.c_uint8), ("flags", ctypes.c_uint8),
                ("reserved", ctypes.c_uint8 * 4), ("identifier", ctypes.c_uint8 * 16)]


class _RemoveKeyArg(ctypes.Structure):
    _fields_ = [("key_spec", _KeySpec), ("status_flags", ctypes.c_uint32),
                ("reserved", ctypes.c_uint32 * 5)]


def _add_key_arg(key: bytes) -> ctypes.Array:
    class AddKeyArg(ctypes.Structure):
        _fields_ = [("key_spec", _KeySpec), ("raw_size", ctypes.c_uint32),
                    ("key_id", ctypes.c_uint32),
                    ("reserved", ctypes.c_uint32 * 8), ("raw", ctypes.c_uint8 * len(key))]
    arg = AddKeyArg()
    arg.key_spec.type = KEY_SPEC_TYPE_IDENTIFIER
    arg.raw_size = len(key)
    ctypes.memmove(arg.raw, key, len(key))
    return arg


def _ioctl(path: str | Path, request: int, arg) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.ioctl(fd, request, arg, True)
    finally:
        os.close(fd)


@releaser("fscrypt-key")
def release_key(data: dict) -> None:
    """Remove the key from the filesystem keyring (unmounting removes it too)."""
    mnt = data.get("mountpoint")
    ident = data.get("identifier")
    if not mnt or not ident or not is_mounted(mnt):
        return
    arg = _RemoveKeyArg()
    arg.key_spec.type = KEY_SPEC_TYPE_IDENTIFIER
    ctypes.memmove(arg.key_spec.identifier, bytes.fromhex(ident), 16)
    try:
        _ioctl(mnt, FS_IOC_REMOVE_ENCRYPTION_KEY, arg)
    except OSError as exc:
        if exc.errno not in (errno.ENOKEY, errno.ENOENT):
            raise


class Fscrypt(StorageStack):
    name = "fscrypt"
    description = "ext4 native encryption of one directory (v2 policy, raw key)"
    crypto_library = "kernel"
    layer = "kernel"
    file_cache_only = True
    # the same ext4, then ext4 without the feature
    baselines = ("plain:encrypt-feature", "plain")
    use_case = "per-directory"
    tools = ("mkfs.ext4",)
    features = ("loop", "fscrypt")
    filesystems = ("ext4",)
    honours_direct = False
    variants = {
        "aes-256-xts": {"contents": "AES-256-XTS", "filenames": "AES-256-CTS", "policy": 2,
                        "flags": "PAD_32"},
        "adiantum": {"contents": "Adiantum", "filenames": "Adiantum", "policy": 2,
                     "flags": "PAD_32|DIRECT_KEY"},
    }
    default_variants = ("aes-256-xts",)
    security = ("fscrypt encrypts file contents and names, but not sizes, timestamps, "
                "permissions or the directory structure",)
    _MODES = {"aes-256-xts": (MODE_AES_256_XTS, MODE_AES_256_CTS, FLAG_PAD_32),
              "adiantum": (MODE_ADIANTUM, MODE_ADIANTUM, FLAG_PAD_32 | FLAG_DIRECT_KEY)}

    def cipher_ref(self) -> dict | None:
        return ref("aes-256-xts", "kernel") if self.variant == "aes-256-xts" else None

    def setup(self, res: Resources, backing: Backing) -> Path:
        mnt = make_fs(res, backing.device, "ext4", encrypt=True)
        _, key = res.keyfile(KEY_BYTES)
        entry = res.journal.add("fscrypt-key", mountpoint=str(mnt))
        ident = self._add_key(mnt, key)
        res.journal.update(entry, identifier=ident.hex())
        self.workdir = mnt / "data"
        self.workdir.mkdir()
        contents, names, flags = self._MODES[self.variant]
        policy = _PolicyV2(version=2, contents_mode=contents, filenames_mode=names, flags=flags)
        ctypes.memmove(policy.identifier, ident, 16)
        _ioctl(self.workdir, FS_IOC_SET_ENCRYPTION_POLICY, policy)
        self._probe_cipher()
        return self.workdir

    @staticmethod
    def _add_key(mnt: Path, key: bytes) -> bytes:
        arg = _add_key_arg(key)
        try:
            _ioctl(mnt, FS_IOC_ADD_ENCRYPTION_KEY, arg)
            return bytes(arg.key_spec.identifier[:16])
        except OSError as exc:
            raise CryptcostError(f"fscrypt: cannot add the key to {mnt}: {exc.strerror}") from None
        finally:
            ctypes.memset(ctypes.addressof(arg.raw), 0, len(key))

    def _probe_cipher(self) -> None:
        """The kernel builds the cipher on first use: find out now whether it can."""
        probe = self.workdir / ".cryptcost-probe"
        try:
            probe.write_bytes(b"x" * 4096)
            probe.unlink()
        except OSError as exc:
            if exc.errno in (errno.ENOPKG, errno.EINVAL, errno.ENOENT):
                raise Unavailable(f"the kernel cannot build fscrypt's {self.params['contents']} "
                                  f"cipher ({exc.strerror})",
                                  "a kernel with CONFIG_CRYPTO_ADIANTUM"
                                  if self.variant == "adiantum"
                                  else None) from None
            raise
