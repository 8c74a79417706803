"""The kernel engine: ``cryptsetup benchmark --cipher C --key-size K``.

cryptsetup reaches the kernel's crypto through AF_ALG, on one thread, with
its own fixed buffer (64 KiB in cryptsetup 2.x). Without AF_ALG it prints
"Required kernel crypto interface not available" and still exits 0, so the
engine checks for AF_ALG first and the parser refuses such output.
"""

from __future__ import annotations

import re

from cryptcost import proc
from cryptcost.engines.base import Algorithm, CipherEngine
from cryptcost.model import Cell
from cryptcost.errors import ProcessError, Unavailable
from cryptcost.host import kernel
from cryptcost.model import Sample
from cryptcost.model import Job

BUFFER = 65536

# cryptcost name → (cryptsetup cipher, key bits as cryptsetup counts them)
SPECS = {
    "aes-128-xts": ("aes-xts", 256), "aes-256-xts": ("aes-xts", 512),
    "aes-128-cbc": ("aes-cbc", 128), "aes-256-cbc": ("aes-cbc", 256),
    "serpent-256-xts": ("serpent-xts", 512), "twofish-256-xts": ("twofish-xts", 512),
    "serpent-256-cbc": ("serpent-cbc", 256), "twofish-256-cbc": ("twofish-cbc", 256),
}
ALGORITHMS = {name: Algorithm(name, spec, "cipher", ("aes",) if spec.startswith("aes") else ())
              for name, (spec, _) in SPECS.items()}

_ROW = re.compile(r"^\s*([\w-]+)\s+(\d+)b\s+([\d.]+)\s+MiB/s\s+([\d.]+)\s+MiB/s")

AF_ALG_MISSING = Unavailable(
    "the kernel has no AF_ALG crypto user API, through which cryptsetup benchmark measures",
    "a kernel with CONFIG_CRYPTO_USER_API_SKCIPHER=y or the algif_skcipher module",
    guest="")


def parse_benchmark(text: str) -> dict[tuple[str, int], tuple[float, float]]:
    """{(cipher, key bits): (encrypt bytes/s, decrypt bytes/s)}."""
    if "not available" in text:
        line = next(l for l in text.splitlines() if "not available" in l)
        raise ValueError(line.strip())
    rows = {}
    for line in text.splitlines():
        match = _ROW.match(line)
        if match:
            mib = 1024 * 1024
            rows[(match.group(1), int(match.group(2)))] = (float(match.group(3)) * mib,
                                                           float(match.group(4)) * mib)
    if not rows:
        raise ValueError("no cipher rows in cryptsetup benchmark output")
    return rows


class KernelEngine(CipherEngine):
    """``cryptsetup benchmark``: the kernel's drivers, 64 KiB buffers, one thread."""

    name = "kernel"
    tool = "cryptsetup"
    algorithms = ALGORITHMS
    sizes = (BUFFER,)
    max_threads = 1

    def require(self) -> None:
        """AF_ALG first: without it cryptsetup cannot measure, installed or not."""
        if not kernel.af_alg():
            raise AF_ALG_MISSING
        super().require()

    def unsupported(self, cell: Cell) -> str | None:
        reason = super().unsupported(cell)
        if reason is None and not cell.accel:
            return ("kernel engine cannot switch acceleration off per run; "
                    "a storage stack can force a generic driver with a capi: cipher spec")
        return reason

    def _benchmark(self, spec: str, bits: int) -> tuple[float, float, float]:
        """One ``cryptsetup benchmark``: (encrypt bytes/s, decrypt bytes/s, seconds)."""
        done = proc.run(["cryptsetup", "benchmark", "--cipher", spec, "--key-size", str(bits)],
                        timeout=120)
        try:
            enc, dec = parse_benchmark(done.stdout + done.stderr)[(spec, bits)]
        except (ValueError, KeyError) as exc:
            raise ProcessError(done.argv, done.returncode, done.stdout, done.stderr,
                               why=str(exc)) from None
        return enc, dec, done.seconds

    def measure(self, cell: Cell) -> Sample:
        """One sample. The first use of a cipher in a fresh kernel pays a one-time start-up —
        the AF_ALG socket and the transform's modules loaded, the driver chosen — 50×
        slower than every later run in a fresh guest. A warm-up round of 0 would keep that
        as a sample, so each cipher is primed once, untimed; the primed run's speed is kept
        (``first_run_bytes_per_s``), so the start-up stays visible."""
        spec, bits = SPECS[cell.algorithm]
        primed = self.__dict__.setdefault("_primed", set())       # the ciphers this engine has run
        metrics = {}
        if (spec, bits) not in primed:
            metrics["first_run_bytes_per_s"] = self._benchmark(spec, bits)[0]
            primed.add((spec, bits))
        enc, dec, seconds = self._benchmark(spec, bits)
        return Sample(value=enc, seconds=seconds,
                      metrics={**metrics, "decrypt_bytes_per_s": dec,
                               "kernel_drivers": kernel.drivers_for(cell.algorithm)})

    def jobs(self, cells: list[Cell], seconds: int) -> list[Job]:
        return [Job(label=f"cryptsetup benchmark {c.algorithm}", keys=(c,), est_seconds=3.0,
                    measure=lambda c=c: {c: self.measure(c)}) for c in cells]
