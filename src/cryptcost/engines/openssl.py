"""The OpenSSL engine: ``openssl speed -mr -evp ALG -bytes B -seconds S [-multi N]``.

Hardware acceleration off (METHODOLOGY rule 14) uses ``OPENSSL_ia32cap``,
whose two 64-bit words mirror CPUID (see OpenSSL's
``doc/man3/OPENSSL_ia32cap.pod``):

* word 1 = CPUID(1).EDX | CPUID(1).ECX << 32 — AES-NI is ECX bit 25
  (bit 57: ``0x200000000000000``), PCLMULQDQ is ECX bit 1 (bit 33:
  ``0x200000000``);
* word 2 = CPUID(7).EBX | CPUID(7).ECX << 32 — SHA-NI is EBX bit 29
  (``0x20000000``), VAES is ECX bit 9 (bit 41: ``0x20000000000``),
  VPCLMULQDQ is ECX bit 10 (bit 42: ``0x40000000000``).

``~mask`` clears those bits. Whether it took effect is not assumed: the
cipher runner compares against the accelerated speed and records
``accel_verified``.
"""

from __future__ import annotations

import re

from cryptcost import proc
from cryptcost.host import cpu
from cryptcost.engines.base import Algorithm, CipherEngine
from cryptcost.model import Cell
from cryptcost.errors import ProcessError
from cryptcost.model import Sample
from cryptcost.model import Job

ACCEL_OFF_MASK = "~0x200000200000000:~0x60020000000"

_AES = ("aes", "vaes", "pclmulqdq", "vpclmulqdq")
_ECB = "ECB leaks patterns: identical plaintext blocks give identical ciphertext"
_OLD = "obsolete: 64-bit block, vulnerable to Sweet32 birthday attacks"


def _alg(name: str, family: str, hw=_AES, warning=None, arg=None) -> Algorithm:
    return Algorithm(name, arg or name, family, hw, warning)


ALGORITHMS: dict[str, Algorithm] = {a.name: a for a in [
    _alg("aes-128-xts", "cipher"), _alg("aes-256-xts", "cipher"),
    _alg("aes-128-cbc", "cipher"), _alg("aes-256-cbc", "cipher"),
    _alg("aes-128-ctr", "cipher"), _alg("aes-256-ctr", "cipher"),
    _alg("aes-128-gcm", "aead"), _alg("aes-256-gcm", "aead"),
    _alg("aes-128-ecb", "cipher", warning=_ECB), _alg("aes-256-ecb", "cipher", warning=_ECB),
    _alg("chacha20-poly1305", "aead", hw=()),
    _alg("camellia-256-cbc", "cipher", hw=()),
    _alg("des-ede3-cbc", "cipher", hw=(), warning=_OLD),
    _alg("bf-cbc", "cipher", hw=(), warning=_OLD),
    _alg("hmac-md5", "mac", hw=(), arg="md5",
         warning="MD5 is broken as a hash; HMAC-MD5 is legacy"),
    _alg("hmac-sha1", "mac", hw=("sha_ni",), arg="sha1"),
    _alg("hmac-sha256", "mac", hw=("sha_ni",), arg="sha256"),
]}

LEGACY = {"bf-cbc"}          # needs OpenSSL 3's legacy provider

_F_LINE = re.compile(r"^\+F\d*:\d+:([^:]+):(.+)$")


def parse_speed(text: str) -> float:
    """Bytes per second from ``openssl speed -mr`` output.

    With ``-multi N`` the children report ``Got: +F:…`` lines and the parent
    prints the sum on a bare ``+F:`` line; that sum is the result.
    """
    values = []
    for line in text.splitlines():
        match = _F_LINE.match(line.strip())
        if match:
            fields = [f for f in match.group(2).split(":") if f]
            values.append(float(fields[-1]))
    if not values:
        raise ValueError("no +F result line in openssl speed output")
    return values[-1]


class OpenSSLEngine(CipherEngine):
    """``openssl speed``; any buffer size and thread count."""

    name = "openssl"
    tool = "openssl"
    algorithms = ALGORITHMS

    def argv(self, cell: Cell, seconds: int) -> list[str]:
        alg = ALGORITHMS[cell.algorithm]
        argv = ["openssl", "speed", "-mr", "-seconds", str(seconds), "-bytes",
                str(cell.buffer_bytes)]
        if cell.threads > 1:
            argv += ["-multi", str(cell.threads)]
        if cell.algorithm in LEGACY:
            argv += ["-provider", "legacy", "-provider", "default"]
        argv += ["-hmac", alg.arg] if alg.family == "mac" else ["-evp", alg.arg]
        return argv

    @staticmethod
    def env(cell: Cell) -> dict[str, str]:
        return {} if cell.accel else {"OPENSSL_ia32cap": ACCEL_OFF_MASK}

    def measure(self, cell: Cell, seconds: int) -> Sample:
        harness = cpu.harness_cpu()
        done = proc.run(self.argv(cell, seconds), env=self.env(cell), timeout=seconds * 4 + 30)
        try:
            value = parse_speed(done.stdout)
        except ValueError as exc:
            raise ProcessError(done.argv, done.returncode, done.stdout, done.stderr,
                               why=str(exc)) from None
        return Sample(value=value, seconds=done.seconds, bytes_moved=int(value * seconds),
                      metrics={"harness_cpu_s": cpu.harness_cpu() - harness})

    def jobs(self, cells: list[Cell], seconds: int) -> list[Job]:
        """One ``openssl speed`` per cell. Only the first is warmed up: that
        run brings the binary into the page cache and the CPU's clock up;
        every later run starts warm, and its start-up is outside the
        seconds ``openssl speed`` times."""
        return [Job(label=f"openssl {c.algorithm} {c.buffer_bytes}B ×{c.threads}"
                          f"{'' if c.accel else ' accel-off'}",
                    keys=(c,), measure=lambda c=c: {c: self.measure(c, seconds)},
                    warmup=None if i == 0 else 0,
                    est_seconds=seconds + 0.1) for i, c in enumerate(cells)]
