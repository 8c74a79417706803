"""Where a cell's CPU time went: its profile's rows sorted into layers.

A stored profile (``runner.core.profile``) holds ``perf report``'s rows: each
(command, shared object, symbol)'s share of all samples on every CPU during
the profiled passes. :func:`layers` sorts them, first rule that matches:

* ``idle`` — the idle loop (swapper, ``*_idle``, ``*safe_halt``);
* ``cipher`` — the cipher itself: the kernel's crypto code (AES, XTS, GCM,
  ChaCha20, Poly1305, GHASH, …), and in user space the crypto libraries
  (libcrypto, libgcrypt, nettle, Crypto++) and Go's ``crypto/`` packages;
* ``copy`` — copies between user and kernel space and within memory;
* ``fuse`` — the FUSE kernel module, libfuse and Go's FUSE libraries (go-fuse);
* ``page cache`` — the page cache, ext4/xfs/btrfs and their journals;
* ``block`` — the block layer, loop, device-mapper, the workqueues' glue;
* ``network`` — the kernel's network stack: TCP/UDP, IP, sk_buffs, the
  veth pair, qdiscs, netfilter, softirq's receive path;
* ``syscall, TUN`` — system-call entry and exit, the TUN device (what a
  userspace tunnel pays per packet), and the scheduler's switches;
* ``memory`` — the kernel's memory management: page allocation and freeing,
  page faults, the slab allocator, memory-cgroup accounting, unmapping;
* ``measuring tool`` — fio's own code, its start-up included (the window
  opens before fio starts: its dynamic linking and timer calibration are in);
* ``stack (user)`` / ``kernel, other`` / ``user, other`` — the rest, by
  where it ran.

``cpu-clock`` samples from a timer interrupt: one that falls due while the
kernel holds interrupts off is taken where they come back on
(``_raw_spin_unlock_irqrestore``), not in the code that held them off. Those
rows are charged to the code that held them off — the nearest callers in
their call stacks that are not locks and belong to a layer — in proportion
to the stacks that ended there (:func:`held_off`): on a VM without a PMU they are a large share
(adding a folio to the page cache, a FUSE request's wake-up, a TCP receive).

The shares are of all CPU time in the windows; ``of_busy`` divides by what
was not idle, which is what a bottleneck is judged on.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Mapping

from cryptcost.record import Profile, ProfileRow

LAYERS = ("cipher", "copy", "fuse", "page cache", "block", "network", "syscall, TUN",
          "memory", "measuring tool",
          "stack (user)", "kernel, other", "user, other", "idle")
CIPHER_BOUND = 0.5          # the cipher takes at least half the busy CPU: it binds
FAR = 2.0                   # a profiled run this many times off the median: its shares may mislead

_IDLE = re.compile(r"(^|_)idle|safe_halt|^cpuidle|^do_idle|mwait|^poll_idle|^default_idle")
# ("xts" not inside a word: the slab allocator's alloc_slab_obj_exts is no cipher)
_KCIPHER = re.compile(r"aes|(?<![a-z])xts|gcm|ghash|gf128|chacha|poly1305|serpent|twofish|"
                      r"adiantum|nh_|"
                      r"sha\d|blake2|crc32c|xctr|essiv|_encrypt|_decrypt|crypt_(convert|iv)|"
                      r"skcipher|aead")
_UCIPHER_DSO = re.compile(r"libcrypto|libgcrypt|libnettle|libhogweed|libcrypto\+\+|libcryptopp|"
                          r"libsodium|libgnutls|libmbedcrypto")
_UCIPHER_SYM = re.compile(r"^(crypto/|golang\.org/x/crypto|vendor/golang\.org/x/crypto|"
                          r"github\.com/rfjakob/eme)|aes|gcm|chacha|poly1305|ghash")
_COPY = re.compile(r"copy_(to|from)_(user|iter)|_copy_(to|from)_iter|copy_user|copy_page|"
                   r"copy_(folio|page)_(to|from)_iter|"
                   r"memcpy|memmove|rep_mov|__memmove|__memcpy|copyin|copyout|clear_page|memset")
# go-fuse, gocryptfs's and rclone's FUSE library (named from Go's own table: engines.gosyms)
_GOFUSE = re.compile(r"^(github\.com/hanwen/go-fuse|bazil\.org/fuse|github\.com/winfsp/cgofuse)")
_FUSE = re.compile(r"^fuse_|^__fuse|fuse_dev|fuse_(simple|read|write|copy)")
_PAGECACHE = re.compile(r"^(filemap|folio|page_cache|pagecache|ext4|jbd2|xfs|btrfs|iomap|mpage|"
                        r"generic_perform_write|generic_file|__filemap|find_get|pagevec|"
                        r"mark_buffer|writeback|wb_|__writeback|lru_|shmem)")
_NETWORK = re.compile(r"^(__)?(tcp|udp|ip|ipv6|inet|skb|sk_|__sk|sock|net_|__netif|netif|napi|"
                      r"dev_|__dev|veth|nf_|nft|ipt_|qdisc|__qdisc|sch_|fq_|__tcp|__ip|__inet|"
                      r"__skb|"
                      r"__kfree_skb|kfree_skb|consume_skb|xfrm|esp|wg_|validate_xmit|__napi|"
                      r"process_backlog)")
_SYSCALL = re.compile(r"^(entry_SYSCALL|do_syscall|syscall_(exit|enter)|__x64_sys|__x86_sys|"
                      r"x64_sys|exit_to_user|__schedule|schedule|finish_task_switch|pick_next|tun_|"
                      r"__tun|ksys_(read|write)|vfs_(read|write)|__fdget|fput|__fput|__sys_|"
                      r"do_epoll|ep_poll|do_sys_poll|__x64_)")
_MEMORY = re.compile(r"^(get_page_from_freelist|__?alloc_pages|alloc_pages|__alloc_frozen|"
                     r"__folio_alloc|free_unref|free_pages|__free_pages|free_pcppages|"
                     r"__?rmqueue|rmqueue|kmem_cache_|__?kmalloc|kfree|___?slab_|__slab_|"
                     r"__?memcg|memcg|__?mem_cgroup|mem_cgroup|exc_page_fault|__?handle_mm_fault|"
                     r"do_anonymous_page|do_wp_page|do_fault|do_user_addr_fault|unmap_page_range|"
                     r"zap_|gup_|__get_user_pages|release_pages|free_pages_and_swap_cache|"
                     r"clear_page_erms|__pte|pte_|__?tlb_|flush_tlb|native_flush_tlb)")
_MEMCG = re.compile(r"memcg|mem_cgroup|obj_cgroup|obj_stock")      # memory-cgroup accounting
_BLOCK = re.compile(r"^(blk|bio|__blk|submit_bio|loop_|lo_|dm_|kcryptd|crypt_|__submit|"
                    r"bdev|mq_|elv|nvme|scsi|virtblk|iov_iter)")


def layer(row: ProfileRow, daemons: frozenset[str] = frozenset()) -> str:
    """The layer one row of a profile belongs to (see the module docstring)."""
    comm, dso, sym = row.comm, row.dso, row.sym
    kernel = row.where == "kernel"
    if comm == "swapper" or _IDLE.search(sym):
        return "idle"
    if kernel:
        if _KCIPHER.search(sym) and not _PAGECACHE.match(sym):
            return "cipher"
        if _COPY.search(sym):
            return "copy"
        if _FUSE.search(sym):
            return "fuse"
        if _PAGECACHE.match(sym):
            return "page cache"
        if _BLOCK.match(sym):
            return "block"
        if _NETWORK.match(sym):
            return "network"
        if _SYSCALL.match(sym):
            return "syscall, TUN"
        if _MEMORY.match(sym) or _MEMCG.search(sym):
            return "memory"
        return "kernel, other"
    if _UCIPHER_DSO.search(dso) or (not dso.startswith("lib") and _UCIPHER_SYM.search(sym)):
        return "cipher"
    if _COPY.search(sym):
        return "copy"
    if "libfuse" in dso or _GOFUSE.match(sym):
        return "fuse"
    if comm == "fio" or dso == "fio":
        return "measuring tool"
    if comm in daemons or dso in daemons:
        return "stack (user)"
    return "user, other"


_REENABLE = re.compile(r"^_?_?raw_(spin|read|write)_unlock_irq(restore)?$")
CALLERS = 4                 # callers looked at below a re-enable, nearest first
_LOCK = re.compile(r"^(_?_?raw_(spin|read|write)_|do_raw_spin|spin_|queued_|native_queued|"
                   r"__pv_queued)")


def held_off(folded: dict[str, int] | None,
             daemons: frozenset[str] = frozenset()) -> dict[str, dict[str, float]]:
    """Per command, the layers of the code that held interrupts off, as shares of its
    samples taken where they came back on: from each folded stack ending in such a
    re-enable, the nearest of its first few callers that are not locks whose layer has a
    name (``__wake_up`` is everyone's: ``fuse_dev_queue_req`` below it says whose)."""
    counts: dict[str, dict[str, int]] = {}
    for key, n in (folded or {}).items():
        comm, *chain = key.split(";")
        if not chain or not _REENABLE.match(chain[-1].removesuffix("_[k]")):
            continue
        callers = [f.removesuffix("_[k]") for f in reversed(chain[:-1])
                   if f.endswith("_[k]") and not _LOCK.match(f)][:CALLERS]
        named = (layer(ProfileRow(comm, sym=f, where="kernel"), daemons) for f in callers)
        name = next((x for x in named if x != "kernel, other"), "kernel, other")
        mine = counts.setdefault(comm, {})
        mine[name] = mine.get(name, 0) + n
    return {comm: {k: v / sum(c.values()) for k, v in c.items()} for comm, c in counts.items()}


@dataclass(frozen=True)
class Tagged:
    """A profile row with the layer it was charged to."""

    row: ProfileRow
    layer: str

    def to_dict(self) -> dict:
        return {**asdict(self.row), "layer": self.layer}


@dataclass(frozen=True)
class Layers:
    """A profile sorted into layers: ``shares`` of all CPU time, ``busy`` the share not idle,
    ``of_busy`` each layer's share of the busy time, ``symbols`` the code each layer ran (its
    first three), ``top`` the largest non-idle rows, ``cipher_symbols`` what the cipher share
    ran; ``samples`` and ``vs_median`` as the profile had them."""

    shares: Mapping[str, float]
    busy: float
    of_busy: Mapping[str, float]
    symbols: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    unlisted: float = 0.0
    vs_median: float | None = None
    samples: int | None = None
    top: tuple[Tagged, ...] = ()
    cipher_symbols: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        return {"shares": dict(self.shares), "busy": self.busy, "of_busy": dict(self.of_busy),
                "symbols": {k: list(v) for k, v in self.symbols.items()},
                "unlisted": self.unlisted, "vs_median": self.vs_median, "samples": self.samples,
                "top": [t.to_dict() for t in self.top], "cipher_symbols": list(self.cipher_symbols)}


def layers(profile: Profile | None, daemons: frozenset[str] = frozenset()) -> Layers | None:
    """The profile's rows sorted into layers (:class:`Layers`); None without a profile's rows.
    ``daemons``: the stack's daemons' command names (their other code is the stack's own)."""
    if not profile or not profile.rows:
        return None
    shares = dict.fromkeys(LAYERS, 0.0)
    tagged = []
    callers = held_off(profile.folded, daemons)
    for row in profile.rows:
        name = layer(row, daemons)
        by = callers.get(row.comm) if row.where == "kernel" and _REENABLE.match(row.sym) else None
        for charged, part in (by or {name: 1.0}).items():     # held off: charged to the callers
            shares[charged] += row.share * part
        tagged.append(Tagged(row, name if not by else max(by, key=by.get)))
    # rows below perf's cut-off are the long tail: left out of every layer, said as such
    shares = {k: v for k, v in shares.items() if v > 0}
    busy = sum(v for k, v in shares.items() if k != "idle")
    of_busy = {k: v / busy for k, v in shares.items() if k != "idle"} if busy else {}
    ran: dict[str, list[str]] = {}
    for t in tagged:
        if t.layer != "idle" and len(ran.setdefault(t.layer, [])) < 3 and \
                _shown(t.row) not in ran[t.layer]:
            ran[t.layer].append(_shown(t.row))
    cipher = dict.fromkeys(_shown(t.row) for t in tagged if t.layer == "cipher")
    return Layers(shares, busy, of_busy, {k: tuple(v) for k, v in ran.items()},
                 max(0.0, 1 - sum(shares.values())), profile.vs_median, profile.samples,
                 tuple(t for t in tagged if t.layer != "idle")[:8], tuple(cipher)[:3])


def cipher_low(spent: Layers) -> float | None:
    """The lower end of the 95 % (Wilson) interval of the cipher's share of the busy CPU."""
    return share_low(spent, "cipher")


def share_low(spent: Layers, name: str) -> float | None:
    """The lower end of the 95 % (Wilson) interval of layer ``name``'s share of the busy CPU,
    from the profile's sample count: a warm-up run may hold only some tens of samples, and
    a share of them is good to several percent at best. None without a sample count."""
    n = round((spent.samples or 0) * spent.busy)
    if n <= 0:
        return None
    from scipy.stats import binomtest
    share = spent.of_busy.get(name, 0.0)
    return float(binomtest(round(share * n), n).proportion_ci(method="wilson").low)


def largest(spent: Layers) -> tuple[str, float] | None:
    """The layer that took most of the busy CPU, and its share; None for an empty profile."""
    named = list(spent.of_busy.items())
    return max(named, key=lambda kv: kv[1]) if named else None


def _shown(row: ProfileRow) -> str:
    """A row's code in words: a kernel symbol, or a library and its symbol where it has one."""
    if row.where == "kernel":
        return row.sym
    return row.dso if row.sym == "(no symbols)" else f"{row.sym} in {row.dso}"


def sentence(spent: Layers) -> str:
    """``perf: 62 % of the busy CPU in the cipher (aesti_encrypt, aesti_decrypt), 14 % copies,
    …``."""
    ranked = [(name, share) for name, share in sorted(spent.of_busy.items(),
                                                      key=lambda kv: -kv[1]) if share >= 0.05]
    shown = ranked[:4]
    # the cipher's share and FUSE's are said wherever they took any: what people ask about
    shown += [(name, share) for name, share in spent.of_busy.items()
              if name in ("cipher", "fuse") and share >= 0.005 and name not in dict(shown)]
    def said(name: str, share: float) -> str:
        if name == "cipher":
            return f"{share:.0%} the cipher"
        if name.endswith(", other") and spent.symbols.get(name):
            return f"{share:.0%} {name} ({', '.join(spent.symbols[name][:2])})"
        return f"{share:.0%} {name}"
    head = ", ".join(said(name, share) for name, share in shown)
    ran = (f", the profiled run at {spent.vs_median:.0%} of the median" if spent.vs_median
           else "")
    cipher = (f"; the cipher ran in {', '.join(spent.cipher_symbols)}" if spent.cipher_symbols
              else "")
    apart = ("; that run's speed is far from its samples', so its shares may not be theirs"
             if spent.vs_median and not 1 / FAR <= spent.vs_median <= FAR else "")
    return (f"where the busy CPU went (perf, {spent.busy:.0%} of all CPU time busy{ran}): "
            f"{head}{cipher}{apart}")
