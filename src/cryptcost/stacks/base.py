"""The stack plugin interface, common to storage and network stacks.

One stack = one small class in one file of this package. It *declares* its
facts as class attributes; everything else in cryptcost (the runner, the
analysis, the recommendation, the packaging list, the CI's required list and
docs/stacks.md) reads them from here or from the copy stored with every
result — never from a table of stack names.

Facts (checked by :func:`problems` when the registry loads):

``name``, ``description``
    The spec name and one line for people.
``kind``
    ``storage`` or ``network``: set by :class:`~cryptcost.stacks.fs.StorageStack`
    and :class:`~cryptcost.stacks.net.NetworkStack`.
``layer``
    Where the crypto runs: ``kernel``, ``fuse`` or ``userspace``.
``role``
    ``measured`` (an encryption option) or ``baseline`` (a plaintext
    reference). ``baseline_variants`` makes single variants references
    (``zfs:off``).
``use_case``
    What a measured stack is an option for (:data:`USE_CASES`); None for
    a baseline.
``baselines``
    The specs it is compared with, nearest first (``fuse-passthrough``,
    then ``plain``). The last one is its *reference*: the plainest twin.
    A variant may name its own in its params (``plain:encrypt-feature``
    is compared with ``plain``).
``isolates``
    For a baseline that sits between stacks and their reference: what it
    adds to the reference, for people (``FUSE (libfuse 2)``). A stack's
    cost splits into this part, which the baseline pays too, and its own
    (``analysis.split``). A variant may name its own in its params.
``reads_like``
    In a variant's params: another spec whose reads take the same path
    (bindfs with ``big_writes`` changes only its write requests). The two
    are a control: a run where they read apart says so (``analysis.findings``).
``security``
    Sentences a recommendation must repeat (what it leaks, what is weak).
``advice``
    Optional: what to pick on a host where the stack cannot be measured.
``tools``, ``features``
    Programs (names from :data:`cryptcost.host.tools.TOOLS` or
    :class:`~cryptcost.host.tools.Tool` objects naming their Debian
    package) and kernel features it needs.
``cipher_ref()``
    The raw cipher it runs (see :func:`ref`).
``crypto_library``
    Whose code does its crypto: a key of :data:`ACCEL_SWITCHES` (``openssl``,
    ``go``, ``gnutls``, ``nettle``) when that library's hardware acceleration can be
    switched off from the environment, else a name (``kernel``,
    ``crypto++``) for which it cannot; None for a baseline. An instance
    with ``accel = False`` runs its processes with :meth:`accel_env`; the
    runner counts the switch only if the stack really got slower.

Call order: ``require()`` (touches nothing; raises
:class:`~cryptcost.errors.Unavailable` naming what is missing and how to get
it), ``Stack(variant, …)``, ``setup(res, …)`` (only through
:class:`~cryptcost.lifecycle.resources.Resources`), measurement,
then teardown when the ``Resources`` scope ends — always, in reverse order.
``describe()`` records exact parameters, versions and the facts with every
result.

Reference implementations: :mod:`cryptcost.stacks.plain` (storage) and
:mod:`cryptcost.stacks.tcp` (network).
"""

from __future__ import annotations

from abc import ABC
from typing import ClassVar, Mapping

from cryptcost.engines.openssl import ACCEL_OFF_MASK
from cryptcost import proc
from cryptcost.errors import CryptcostError, Unavailable, UserError
from cryptcost.host import kernel, tools
from cryptcost.host.tools import Tool

KINDS = ("storage", "network")
LAYERS = ("kernel", "fuse", "userspace")
ROLES = ("measured", "baseline")
# use case → (kind, title in the recommendation)
USE_CASES: dict[str, tuple[str, str]] = {
    "whole-disk": ("storage", "Whole disk"),
    "per-directory": ("storage", "Per directory"),
    "any-filesystem": ("storage", "Any filesystem / cloud-synced folder"),
    "file-share": ("network", "File sharing"),
    "site-to-site": ("network", "Site-to-site tunnel"),
    "remote-access": ("network", "Remote access"),
    "service-tls": ("network", "Service-to-service TLS"),
}

FEATURE_HINTS = {
    "dm-crypt": ("the kernel has no device-mapper crypt target (dm-crypt): no /dev/mapper/control, "
                 "no dm_crypt module",
                 "a kernel with CONFIG_DM_CRYPT (Debian's stock kernel has it)"),
    "device-mapper": ("the kernel has no device-mapper (no /dev/mapper/control)",
                      "a kernel with CONFIG_BLK_DEV_DM"),
    "fuse": ("the kernel has no FUSE (/dev/fuse missing)", "a kernel with CONFIG_FUSE_FS"),
    "loop": ("the kernel has no loop devices (/dev/loop-control missing)",
             "a kernel with CONFIG_BLK_DEV_LOOP"),
    "fscrypt": ("ext4 in this kernel has no encryption support (/sys/fs/ext4/features/encryption)",
                "a kernel with CONFIG_FS_ENCRYPTION"),
    "zfs": ("the ZFS kernel module is not loaded or installable",
            "cryptcost install zfs (zfs-dkms builds it from Debian contrib)"),
    "af_alg": ("the kernel has no AF_ALG crypto user API",
               "a kernel with CONFIG_CRYPTO_USER_API_SKCIPHER"),
    "ecryptfs": ("the kernel has no eCryptfs",
                 "a kernel with CONFIG_ECRYPT_FS, and ecryptfs-utils"),
    "netns": ("the kernel has no network namespaces", "a kernel with CONFIG_NET_NS"),
    "veth": ("the kernel has no veth pairs", "a kernel with CONFIG_VETH"),
    "tun": ("the kernel has no TUN devices (/dev/net/tun missing)", "a kernel with CONFIG_TUN"),
    "netem": ("the kernel has no netem queueing discipline (sch_netem) to delay a link with",
              "a kernel with CONFIG_NET_SCH_NETEM (Debian's stock kernel has it)"),
    "wireguard": ("the kernel has no WireGuard module", "a kernel with CONFIG_WIREGUARD"),
    "esp": ("the kernel has no IPsec ESP (no esp4 module)", "a kernel with CONFIG_INET_ESP"),
    "xfrm": ("the kernel has no xfrm (IPsec SA and policy) interface",
             "a kernel with CONFIG_XFRM_USER"),
    "nfs": ("the kernel has no NFS client and server (no nfsv4 and nfsd modules)",
            "a kernel with CONFIG_NFS_V4, CONFIG_NFSD_V4 and CONFIG_RPCSEC_GSS_KRB5"),
}

# Kernel features a guest can have although Debian's stock kernel has not: an out-of-tree module
# DKMS builds for a kernel under /boot (the feature → the module).
GUEST_MODULES = {"zfs": "zfs"}

# What Debian's stock kernel has, so that ``cryptcost vm`` can run it (emulated).
IN_STOCK_KERNEL = frozenset({"dm-crypt", "device-mapper", "af_alg", "ecryptfs", "wireguard", "esp",
                             "xfrm",
                             "nfs", "fscrypt", "fuse", "loop", "netns", "veth", "tun",
                             "netem"})

# How each library's hardware acceleration is switched off from the environment (rule 14).
ACCEL_SWITCHES: dict[str, dict[str, str]] = {
    # AES-NI, PCLMULQDQ, VAES, AVX…
    "openssl": {"OPENSSL_ia32cap": ACCEL_OFF_MASK},
    "go": {"GODEBUG": "cpu.aes=off,cpu.pclmulqdq=off,cpu.avx2=off,cpu.avx=off,cpu.ssse3=off,"
                      "cpu.sse41=off"},
    # GnuTLS and Nettle under it
    "gnutls": {"GNUTLS_CPUID_OVERRIDE": "0x1", "NETTLE_FAT_OVERRIDE": "none"},
    # a "fat" Nettle: no AES-NI, no PCLMUL
    "nettle": {"NETTLE_FAT_OVERRIDE": "none"},
}


def ref(algorithm: str, where: str, unit: int = 4096, exact: bool = True,
        threads: dict[str, tuple[int | str, int]] | None = None, then: str | None = None) -> dict:
    """A :meth:`Stack.cipher_ref` value. ``threads`` says how many threads
    the stack encrypts one request with, by operation (``"*"``: any), and
    from what request size on: ``{"write": (2, 128 << 10)}``; ``"cpus"``
    for as many as there are CPUs. Unnamed: one. ``then``: a MAC the stack runs over the same
    bytes after the cipher (encrypt-then-MAC), whose time adds to the cipher's."""
    out = {"algorithm": algorithm, "where": where, "unit": unit, "exact": exact}
    if threads:
        out["threads"] = {op: list(v) for op, v in threads.items()}
    if then:
        out["then"] = then
    return out


def cipher_threads(declared: Mapping | None, op: str | None, request_bytes: int | None, depth: int,
                   cores: int) -> int:
    """How many threads run a stack's cipher at once: each of ``depth``
    outstanding requests (queue depth, streams) with the threads the stack
    encrypts one request of ``op`` with (``declared``: its declared cipher's
    ``threads``, see :func:`ref`), at most ``cores``."""
    declared = declared or {}
    per, least = declared.get(op) or declared.get("*") or (1, 0)
    if request_bytes is not None and request_bytes < least:
        per = 1
    cores = max(1, cores)
    return cores if per == "cpus" else max(1, min(cores, max(1, depth) * int(per)))


class Stack(ABC):
    """One stack. See the module docstring for the facts and the call order."""

    name: ClassVar[str]
    kind: ClassVar[str]
    description: ClassVar[str] = ""
    layer: ClassVar[str]
    role: ClassVar[str] = "measured"
    baseline_variants: ClassVar[tuple[str, ...]] = ()
    use_case: ClassVar[str | None] = None
    baselines: ClassVar[tuple[str, ...]] = ()
    isolates: ClassVar[str] = ""
    security: ClassVar[tuple[str, ...]] = ()
    advice: ClassVar[str] = ""
    tools: ClassVar[tuple[str | Tool, ...]] = ()
    features: ClassVar[tuple[str, ...]] = ()
    variants: ClassVar[dict[str, dict]] = {"default": {}}
    default_variants: ClassVar[tuple[str, ...]] = ("default",)
    crypto_library: ClassVar[str | None] = None
    # the kernel `cryptcost vm --kernel` needs, if not the stock one
    guest_kernel: ClassVar[str | None] = None

    def __init__(self, variant: str | None = None):
        variant = variant or self.default_variants[0]
        if variant not in self.variants:
            raise UserError(f"stack {self.name} has no variant {variant!r}; choose from "
                            f"{', '.join(self.variants)}")
        self.variant = variant
        self.params = dict(self.variants[variant])
        if "baselines" in self.params:        # a variant that is another stack's twin has its own
            self.baselines = tuple(self.params["baselines"])
        self.accel = True

    @property
    def label(self) -> str:
        base = self.name if self.variant == "default" else f"{self.name}:{self.variant}"
        return base if self.accel else f"{base}/accel-off"

    def accel_switch(self) -> str | None:
        """Why hardware acceleration cannot be switched off for this stack, or None when it can.
        ``crypto_library`` may name several (``openssl+go``): every one needs a switch."""
        libs = (self.crypto_library or "").split("+")
        if all(lib in ACCEL_SWITCHES for lib in libs):
            return None
        if self.crypto_library == "kernel":
            return ("acceleration cannot be switched off for the kernel's crypto from userspace "
                    "(it needs a kernel booted with its AES-NI drivers blacklisted)")
        return (f"acceleration cannot be switched off for {self.crypto_library or 'this stack'}'s "
                "crypto from userspace: the library has no switch")

    def accel_env(self) -> dict[str, str]:
        """The environment of this instance's processes: acceleration off when ``accel`` is
        False."""
        if self.accel:
            return {}
        return {k: v for lib in self.crypto_library.split("+")
                for k, v in ACCEL_SWITCHES[lib].items()}

    @classmethod
    def needed_tools(cls) -> list[Tool]:
        return [tools.tool(t) for t in cls.tools]

    @classmethod
    def require(cls) -> None:
        """Raise :class:`Unavailable` when a kernel feature or a program is missing: the
        kernel first, since a program installed here would not give it what it lacks (the
        guest's kernel may)."""
        present = kernel.features()
        for feat in cls.features:
            if not present.get(feat, {}).get("present"):
                raise cls.missing(feat)
        for t in cls.needed_tools():
            if not t.path():
                raise Unavailable(f"{t.binary} is not installed", cls.install_command())

    @classmethod
    def install_command(cls) -> str:
        """The command that installs what the stack needs (its tools and its baselines')."""
        return f"cryptcost install {cls.name}"

    @classmethod
    def missing(cls, feat: str) -> Unavailable:
        """Why the stack cannot run without kernel feature ``feat``, and how to get it
        (emulated too, where Debian's stock kernel has it)."""
        why, how = FEATURE_HINTS.get(feat, (f"the kernel lacks {feat}", None))
        built = kernel.bootable_with(GUEST_MODULES[feat]) if feat in GUEST_MODULES else []
        if built:                              # a guest kernel has the module DKMS built for it
            stock = kernel.stock_version()
            use = "" if stock in built else built[0]
            return Unavailable(why, f"{how}; or emulated, in a qemu guest on the kernel it was "
                                    f"built for: cryptcost vm {f'--kernel {use} ' if use else ''}"
                                    f"-- {cls.kind} --stacks {cls.name}", guest=use)
        if feat not in IN_STOCK_KERNEL:
            return Unavailable(why, how)
        kernel_opt = f"--kernel {cls.guest_kernel} " if cls.guest_kernel else ""
        ready = proc.which("qemu-system-x86_64") and all(t.path() for t in cls.needed_tools())
        first = "" if ready else f"cryptcost install guest {cls.name}, then "
        how = (f"{how}; or emulated, under Debian's stock kernel in a qemu guest: {first}"
               f"cryptcost vm {kernel_opt}-- {cls.kind} --stacks {cls.name}")
        return Unavailable(why, how, guest=cls.guest_kernel or "")

    @staticmethod
    def expect(what: str, got: str | None, wanted: str) -> None:
        """Refuse a stack whose ``what``, as it reports it (negotiated, or read back after its
        set-up), is not the one asked for."""
        if got is None or got.lower() != wanted.lower():
            raise CryptcostError(f"{what}: asked for {wanted}, the stack reports "
                                 f"{got or 'nothing'}")

    @classmethod
    def variant_unavailable(cls, variant: str) -> Unavailable | None:
        """Why one variant cannot run here where the stack itself can (a feature only it
        needs), or None."""
        return None

    def set_up_first(self) -> bool:
        """Whether this instance is set up before every other of its run, and so torn down
        after them (nfs:v3); a run keeps the order asked for otherwise."""
        return False

    def variant_role(self) -> str:
        """``baseline`` for a plaintext reference (the class or this variant)."""
        return ("baseline" if self.role == "baseline" or self.variant in self.baseline_variants
                else "measured")

    def daemon_pids(self) -> list[int]:
        """Processes whose CPU time the stack adds (rule 7)."""
        return []

    def dead(self) -> str | None:
        """Why the stack no longer works (its daemon exited), or None."""
        daemon = getattr(self, "daemon", None)
        if daemon is not None and not daemon.alive():
            name = proc.program(daemon.argv).rsplit("/", 1)[-1]
            return f"{name} (pid {daemon.pid}) exited ({daemon.returncode}) during the measurement"
        return None

    def cipher_ref(self) -> dict | None:
        """The raw cipher this stack runs, for its cipher ceiling: ``algorithm``
        as the cipher engines name it, ``where`` (kernel, go or userspace),
        ``unit`` (bytes the stack encrypts at once), ``exact`` (False: the
        nearest algorithm the engines measure, e.g. AES-256 for AES-192)."""
        return None

    def facts(self) -> dict:
        """The declared facts of this instance, stored with every result."""
        role = self.variant_role()
        return {"kind": self.kind, "layer": self.layer, "role": role,
                "crypto_library": self.crypto_library,
                "use_case": None if role == "baseline" else self.use_case,
                "baselines": list(self.baselines), "security": list(self.security),
                "isolates": self.params.get("isolates") or self.isolates or None,
                "advice": self.advice or None,
                "tools": {t.name: t.package for t in self.needed_tools()},
                "features": list(self.features), "cipher": self.cipher_ref(),
                "reads_like": self.params.get("reads_like")}

    def describe(self) -> dict:
        """Exact parameters, tool versions and facts, stored with every result."""
        return {"stack": self.name, "variant": self.variant, **self.params, "accel": self.accel,
                "versions": {t.name: tools.version(t) for t in self.needed_tools()},
                "cipher_ref": self.cipher_ref(), "facts": self.facts()}


REQUIRED = ("name", "kind", "description", "layer")


def problems(cls: type[Stack], known: set[str]) -> list[str]:
    """What is wrong with a plugin's declaration (empty when it is complete).

    ``known`` is every registered stack name, to check the baselines."""
    out = [f"no {fact!r}" for fact in REQUIRED if not getattr(cls, fact, None)]
    if out:
        return out
    if cls.kind not in KINDS:
        out.append(f"kind {cls.kind!r} is not one of {', '.join(KINDS)}")
    if cls.layer not in LAYERS:
        out.append(f"layer {cls.layer!r} is not one of {', '.join(LAYERS)}")
    if cls.role not in ROLES:
        out.append(f"role {cls.role!r} is not one of {', '.join(ROLES)}")
    measured = cls.role == "measured" and set(cls.variants) - set(cls.baseline_variants)
    if measured:
        if cls.use_case not in USE_CASES:
            out.append(f"a measured stack needs a use_case from {', '.join(USE_CASES)}, not "
                       f"{cls.use_case!r}")
        elif USE_CASES[cls.use_case][0] != cls.kind:
            out.append(f"use_case {cls.use_case} is for {USE_CASES[cls.use_case][0]} stacks, "
                       f"not {cls.kind}")
        if not cls.security:
            out.append("a measured stack needs security facts (what it leaks or protects)")
        if not cls.baselines:
            out.append("a measured stack needs baselines to be compared with")
    for spec in {*cls.baselines,
                 *(b for v in cls.variants.values() for b in v.get("baselines", ()))}:
        if spec.split(":")[0] not in known:
            out.append(f"baseline {spec!r} is not a registered stack")
    for like in {v["reads_like"] for v in cls.variants.values() if v.get("reads_like")}:
        if like.split(":")[0] not in known:
            out.append(f"reads_like {like!r} is not a registered stack")
    if not set(cls.default_variants) <= set(cls.variants):
        out.append("default_variants names a variant that is not in variants")
    if not set(cls.baseline_variants) <= set(cls.variants):
        out.append("baseline_variants names a variant that is not in variants")
    for t in cls.tools:
        try:
            tools.tool(t)
        except Exception:
            out.append(f"tool {t!r} is neither in host.tools.TOOLS "
                       "nor a Tool(...) with its package")
    return out
