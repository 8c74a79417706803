"""Wrapped external programs that measure. Cipher engines are registered in
:data:`CIPHER_ENGINES`; fio and iperf3 wrappers live beside them."""

from cryptcost.engines.base import CipherEngine
from cryptcost.engines.go import GoEngine
from cryptcost.engines.kernel import KernelEngine
from cryptcost.engines.openssl import OpenSSLEngine

CIPHER_ENGINES: dict[str, type[CipherEngine]] = {
    e.name: e for e in (OpenSSLEngine, GoEngine, KernelEngine)}
