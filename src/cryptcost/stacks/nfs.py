"""``nfs``: the kernel's NFSv4.2 server at end ``b`` and the kernel's
client at end ``a``, with ``sec=sys`` (the baseline), ``krb5``, ``krb5i``
or ``krb5p`` (R4's matrix), and NFS 3 with ``sec=sys`` (``v3``, R4's other
version). Only krb5p encrypts the data.

Everything is this stack's own, and private to the link's namespaces:

* the server: ``rpc.mountd`` runs at ``b`` in a mount namespace of its own
  (``ip netns exec``); the nfsd filesystem of ``b``'s network namespace and
  a private ``/var/lib/nfs`` are mounted inside it, where ``rpc.nfsd``
  starts the kernel's threads and ``exportfs -i`` exports the share (a
  tmpfs) to ``a`` alone. When mountd ends, so does that mount namespace:
  unmounting the nfsd filesystem stops the kernel's server of ``b``. The
  host's own exports, ``/proc/fs/nfsd`` and ``/var/lib/nfs`` are never seen.
* Kerberos (the krb5 variants): a throwaway realm on the key tmpfs — a KDC
  (``krb5kdc``) at ``b``, ``nfs/server.cc.test`` for the server
  (``rpc.svcgssd`` at ``b``), ``root`` for the client, whose ticket cache
  ``rpc.gssd -n`` uses at ``a`` over an ``rpc_pipefs`` of ``a``'s network
  namespace. Nothing needs a name server: the client mounts
  ``server.cc.test:/`` with the address given (``mount -i … addr=``).
* the client: mounted from ``a``'s network namespace into this host's
  mount namespace (``nsenter --net``), so ``cp`` reaches it from here.
* NFS 3 (``v3``): nfsd registers version 3 with the portmapper of ``b``'s
  network namespace, or does not start. ``rpcbind`` runs first, in a mount
  namespace of its own with a private ``/run`` (its socket and lock), which
  mountd then joins, answering the MOUNT protocol on a port of its own. The
  client names both ports and mounts without the lock protocol (``nolock``:
  no lockd or statd), so it never asks the portmapper.

:meth:`verify` reads the mount's version and flavour back from
``/proc/self/mountstats``, and the Kerberos session key's type from the
client's ticket cache. The wire check refuses any NFS call that is not
RPCSEC_GSS with privacy, besides the canary.
"""

from __future__ import annotations

import logging
import os
import platform
import re
import secrets
import time
from pathlib import Path

from cryptcost import proc
from cryptcost.engines.tcpdump import Packet
from cryptcost.errors import CryptcostError, ProcessError
from cryptcost.host.tools import Tool
from cryptcost.lifecycle.resources import Resources
from cryptcost.links import Link
from cryptcost.stacks.base import ref
from cryptcost.stacks.net import Endpoint, FileShareStack
from cryptcost.stacks.rpc import call_protection, rpc_record

log = logging.getLogger("cryptcost.network")

RPC_NFSD = Tool("rpc.nfsd", "rpc.nfsd", "nfs-kernel-server", ())
EXPORTFS = Tool("exportfs", "exportfs", "nfs-kernel-server", ())
MOUNTD = Tool("rpc.mountd", "rpc.mountd", "nfs-kernel-server", ())
GSSD = Tool("rpc.gssd", "rpc.gssd", "nfs-common", ())
SVCGSSD = Tool("rpc.svcgssd", "rpc.svcgssd", "nfs-common", ())
KDC = Tool("krb5kdc", "krb5kdc", "krb5-kdc", ())
KDB5_UTIL = Tool("kdb5_util", "kdb5_util", "krb5-kdc", ())
KADMIN = Tool("kadmin.local", "kadmin.local", "krb5-admin-server", ())
KINIT = Tool("kinit", "kinit", "krb5-user", ())
KLIST = Tool("klist", "klist", "krb5-user", ())
NSENTER = Tool("nsenter", "nsenter", "util-linux", ())
RPCBIND = Tool("rpcbind", "rpcbind", "rpcbind", ())

PORT = 2049
MOUNTD_PORT = 20048                # NFS 3's MOUNT protocol
RPCBIND_PORT = 111
REALM = "CC.TEST"
SERVER = "server.cc.test"
GRACE_S = 10                       # the shortest NFSv4 grace period nfsd takes
# Kerberos session key type → the cipher table's nearest algorithm (CBC with ciphertext stealing)
ENCTYPES = {"aes256-cts-hmac-sha1-96": "aes-256-cbc", "aes128-cts-hmac-sha1-96": "aes-128-cbc",
            "aes256-cts-hmac-sha384-192": "aes-256-cbc",
            "aes128-cts-hmac-sha256-128": "aes-128-cbc"}


class Nfs(FileShareStack):
    name = "nfs"
    description = ("NFSv4.2 (the kernel's server at b, its client at a) with sec=sys, krb5, "
                   "krb5i or krb5p; NFS 3 with sec=sys")
    layer = "kernel"
    use_case = "file-share"
    suites: dict[str, str] = {}      # the guest's kernel: seeds' R4, or by name
    baselines = ("nfs:sys",)
    baseline_variants = ("sys",)
    security = ("only sec=krb5p encrypts: sys, krb5 and krb5i send every file in plaintext (krb5 "
                "authenticates each call, krb5i also protects the data's integrity)",
                "sec=sys trusts the client's word for who the user is")
    tools = (RPC_NFSD, EXPORTFS, MOUNTD, GSSD, SVCGSSD, KDC, KDB5_UTIL, KADMIN, KINIT, KLIST,
             NSENTER, RPCBIND)
    features = ("netns", "veth", "nfs")
    links = ("netns",)
    exclusive = True                   # one nfsd per network namespace
    transport = f"TCP {PORT}"
    variants = {"v3": {"sec": "sys", "vers": "3"},
                "sys": {"sec": "sys", "vers": "4.2"}, "krb5": {"sec": "krb5", "vers": "4.2"},
                "krb5i": {"sec": "krb5i", "vers": "4.2"}, "krb5p": {"sec": "krb5p", "vers": "4.2"}}
    default_variants = ("krb5p",)
    guest_kernel = "6.12"              # 6.1's server refuses sec=krb5p (see known_bug)

    def set_up_first(self) -> bool:
        """NFS 3 is set up first and torn down last, whatever order the stacks were named in.
        Set up after a Kerberos variant and torn down before it, it left that variant's
        rpc_pipefs unmount hanging (Linux 6.12, every sec= mode at once); first, or alone
        before a Kerberos part, it did not. Its rpcbind's mount namespace, a copy of every
        mount there was (the Kerberos stack's too) with a tmpfs on /run, is the one thing it
        has that the others have not."""
        return self.variant == "v3"

    def accel_switch(self) -> str | None:
        return ("acceleration cannot be switched off from userspace for the kernel's NFS "
                "(it needs a kernel booted with its SIMD crypto drivers blacklisted)")

    def confidential(self) -> bool | str:
        sec = self.params["sec"]
        return True if sec == "krb5p" else \
            f"NFS {self.params['vers']} with sec={sec} does not encrypt"

    def cipher_ref(self) -> dict | None:
        if self.params["sec"] != "krb5p":
            return None
        enctype = self.negotiated.get("enctype") or "aes256-cts-hmac-sha1-96"
        return ref(ENCTYPES.get(enctype, "aes-256-cbc"), "kernel", unit=1 << 18, exact=False)

    # --- setup ----------------------------------------------------------------------
    def setup(self, res: Resources, link: Link, service: int) -> Endpoint:
        self.link, self.remounted = link, ""
        self.dir = res.tmpdir("cryptcost-nfs-")
        self.share = res.tmpdir("cryptcost-nfsshare-")
        # made before mountd's namespace copies the mounts
        res.tmpfs(self.share, 2 << 30, "0777")
        self.mnt = res.tmpdir("cryptcost-nfsmnt-")
        self.port = self.service_port = link.port(PORT)
        v3 = self.params["vers"] == "3"
        self.mount_port = link.port(MOUNTD_PORT) if v3 else None
        kerberos = self.params["sec"] != "sys"
        started = self._server(res, link, kerberos)
        if kerberos:
            self._kerberos(res, link)
        self._wait_grace(started)
        if v3:      # both ports named, and no lock protocol: the client never asks the portmapper
            source, fstype = f"{SERVER}:{self.share}", "nfs"
            options = (f"vers=3,sec=sys,proto=tcp,port={self.port},mountport={self.mount_port},"
                       f"mountproto=tcp,nolock,addr={link.b_addr},mountaddr={link.b_addr}")
        else:
            source, fstype = f"{SERVER}:/", "nfs4"
            options = (f"vers=4.2,sec={self.params['sec']},proto=tcp,port={self.port},"
                       f"addr={link.b_addr},clientaddr={link.a_addr}")
        self._mount_writable(res, link, source, fstype, options)
        return Endpoint(link.b_addr, self.port)

    def _mount_writable(self, res: Resources, link: Link, *how: str) -> None:
        """Mount the share, and make a file on it. A Kerberos share came up read-only once in
        about 25 set-ups under TCG (the canary's cp met EROFS): it is then mounted once more,
        after b's kernel has dropped what it held of its exports, and why is kept."""
        mounted = self._mount(res, link, *how)
        why = self._unwritable()
        if not why:
            return
        log.warning("nfs:%s: the share came up unwritable (%s); mounting it once more, after "
                    "b's kernel has dropped what it held of its exports", self.variant, why)
        res.release(mounted)
        proc.run(["nsenter", "-t", str(self.mountd.pid), "-m", "-n", "exportfs", "-f"],
                 timeout=60)
        self._mount(res, link, *how)
        again = self._unwritable()
        if again:
            raise CryptcostError(f"the share is unwritable, mounted twice: {again}")
        self.remounted = why

    def _mount(self, res: Resources, link: Link, source: str, fstype: str, options: str):
        try:
            return res.mount(source, self.mnt, fstype, options, via=link.mount_argv("a", []),
                             helper=False)
        except ProcessError as exc:
            known = known_bug(self.params["sec"])
            raise CryptcostError(f"mounting with sec={self.params['sec']} failed ({exc})"
                                 + (f"; {known}" if known else "")) from None

    def _unwritable(self) -> str:
        """'' if a file can be made on the share; else why not, and what b's kernel holds of
        its clients' domains and exports (which export, with which flags, answered)."""
        probe = self.mnt / f".cc-probe-{secrets.token_hex(3)}"
        try:
            probe.touch(exist_ok=False)
            probe.unlink()
            return ""
        except OSError as exc:
            held = []
            for cache in ("auth.unix.ip", "nfsd.fh", "nfsd.export"):
                try:
                    text = Path(f"/proc/{self.mountd.pid}/net/rpc/{cache}/content").read_text()
                except OSError as err:
                    text = f"# unreadable: {err.strerror}"
                rows = [r.strip() for r in text.splitlines() if r.strip() and r[0] != "#"]
                held.append(f"{cache}: {' / '.join(rows) or 'nothing'}")
            return f"{exc.strerror}; b's kernel holds {'; '.join(held)}"

    def _server(self, res: Resources, link: Link, kerberos: bool) -> float:
        """mountd in a mount namespace of its own at b; inside it the nfsd
        filesystem, the state directory, the kernel's threads and the export."""
        state = self.dir / "state"
        state.mkdir()
        for name in ("etab", "rmtab"):
            (state / name).touch()
        # mountd answers the kernel through /proc/net/rpc/nfsd.*/channel, which exist once nfsd is
        # loaded
        v3 = self.mount_port is not None
        proc.run(["modprobe", "-a", "nfsd", "nfsv4"] + (["nfsv3"] if v3 else [])
                 + (["rpcsec_gss_krb5"] if kerberos else []), timeout=60)
        join: list[str] = []
        if v3:
            # the portmapper of b's namespace, before nfsd registers NFS 3 with it; its socket and
            # lock in a /run of its own, in the mount namespace mountd joins
            holder = self.start(res, "b", ["sh", "-c", "mount -t tmpfs -o mode=0755 cc-run /run && "
                                           "mkdir /run/rpcbind && chown _rpc /run/rpcbind && "
                                           "exec rpcbind -f"], name="rpcbind", logdir=self.dir)
            proc.wait_for(lambda: link.listening("b", RPCBIND_PORT), timeout=30, daemon=holder,
                          what="rpcbind listening")
            join = ["nsenter", "-t", str(holder.pid), "-m"]
        versions = ["--port", str(self.mount_port)] if v3 else ["--no-nfs-version", "3"]
        self.mountd = self.start(res, "b", [*join, "rpc.mountd", "--foreground",
                                            "--no-nfs-version", "2", *versions,
                                            "--state-directory-path", str(state)],
                                 name="rpc.mountd", logdir=self.dir)
        flavours = "sys:krb5:krb5i:krb5p" if kerberos else "sys"
        inside = (f"mount -t nfsd nfsd /proc/fs/nfsd && mount --bind {state} /var/lib/nfs && "
                  f"rpc.nfsd {'-V 3' if v3 else '-N 3'} -V 4.2 -H {link.b_addr} -p {self.port} "
                  f"-G {GRACE_S} -L "
                  f"{GRACE_S} 8 && "
                  # every client identity is root, as sec=sys's is: a Kerberos principal nfsd cannot
                  # map to a local user would otherwise be nobody, and could not overwrite root's
                  # files
                  "exportfs -i -o "
                  "rw,sync,no_subtree_check,no_root_squash,anonuid=0,anongid=0,insecure,fsid=0,"
                  f"sec={flavours} "
                  f"{link.a_addr}:{self.share}")
        # only once `ip netns exec` has exec'd it is mountd in b's namespaces, and so is what
        # nsenter enters
        proc.wait_for(lambda: proc.runs(self.mountd.pid, "rpc.mountd"), timeout=10,
                      daemon=self.mountd, what="rpc.mountd")
        proc.run(["nsenter", "-t", str(self.mountd.pid), "-m", "-n", "sh", "-c", inside],
                 timeout=120)
        started = time.monotonic()
        proc.wait_for(lambda: link.listening("b", self.port), timeout=30, daemon=self.mountd,
                      what="nfsd listening")
        return started

    def _nfsd(self, name: str) -> str:
        """A file of b's nfsd filesystem, read in mountd's mount namespace."""
        return Path(f"/proc/{self.mountd.pid}/root/proc/fs/nfsd/{name}").read_text().strip()

    def _wait_grace(self, started: float) -> None:
        """New files cannot be opened during the NFSv4 grace period."""
        proc.wait_for(lambda: self._nfsd("v4_end_grace") == "Y", timeout=GRACE_S + 30, interval=0.2,
                      daemon=self.mountd, what="the end of nfsd's grace period")
        self.grace_waited = round(time.monotonic() - started, 1)

    def _kerberos(self, res: Resources, link: Link) -> None:
        """A throwaway realm on the key tmpfs; the KDC and rpc.svcgssd at b, rpc.gssd at a."""
        kdc = res.keydir() / f"cryptcost-kdc-{secrets.token_hex(3)}"
        kdc.mkdir(mode=0o700)
        (kdc / "krb5.conf").write_text(
            f"[libdefaults]\n default_realm = {REALM}\n dns_lookup_kdc = false\n dns_lookup_realm "
            f"= false\n rdns = false\n dns_canonicalize_hostname = false\n[realms]\n {REALM} = "
            f"{{\n  kdc = {link.b_addr}:88\n }}\n[domain_realm]\n .cc.test = {REALM}\n")
        (kdc / "kdc.conf").write_text(
            f"[kdcdefaults]\n kdc_ports = 88\n kdc_tcp_ports = 88\n[realms]\n {REALM} = {{\n  "
            f"database_name = {kdc}/principal\n  key_stash_file = {kdc}/stash\n  acl_file = "
            f"{kdc}/kadm5.acl\n }}\n[logging]\n kdc = FILE:{self.dir}/krb5kdc.log\n")
        self.krb5_env = {"KRB5_CONFIG": str(kdc / "krb5.conf"),
                         "KRB5_KDC_PROFILE": str(kdc / "kdc.conf")}
        master = secrets.token_hex(16)
        proc.run(["kdb5_util", "create", "-s", "-r", REALM, "-P", master], env=self.krb5_env,
                 timeout=120,
                 secrets=[master])
        server_kt, client_kt = kdc / "server.keytab", kdc / "client.keytab"
        for principal, keytab in ((f"nfs/{SERVER}", server_kt), ("root", client_kt)):
            proc.run(["kadmin.local", "-q", f"addprinc -randkey {principal}"], env=self.krb5_env,
                     timeout=120)
            proc.run(["kadmin.local", "-q", f"ktadd -k {keytab} {principal}"], env=self.krb5_env,
                     timeout=120)
        daemon = self.start(res, "b", ["krb5kdc", "-n"], env=self.krb5_env, name="krb5kdc",
                            logdir=self.dir)
        proc.wait_for(lambda: link.listening("b", 88), timeout=30, daemon=daemon,
                      what="krb5kdc listening")
        self.start(res, "b", ["rpc.svcgssd", "-f", "-p", f"nfs/{SERVER}@{REALM}"],
                   env={**self.krb5_env, "KRB5_KTNAME": str(server_kt)}, name="rpc.svcgssd",
                   logdir=self.dir)
        self.ccache_dir = kdc / "ccache"
        self.ccache_dir.mkdir(mode=0o700)
        self.ccache = self.ccache_dir / "krb5cc_0"          # rpc.gssd -n looks for krb5cc_<uid>
        proc.run(link.argv("a",
                           ["kinit", "-k", "-t", str(client_kt), "-c", str(self.ccache), "root"]),
                 env=self.krb5_env, timeout=60)
        pipefs = res.tmpdir("cryptcost-rpcpipefs-")
        res.mount("sunrpc", pipefs, "rpc_pipefs", via=link.mount_argv("a", []), helper=False)
        gssd = self.start(res, "a",
                          ["rpc.gssd", "-f", "-n", "-p", str(pipefs), "-d", str(self.ccache_dir)],
                          env=self.krb5_env, name="rpc.gssd", logdir=self.dir)
        # the kernel asks rpc.gssd only once it holds its pipe in the rpc_pipefs of a's namespace
        proc.wait_for(lambda: proc.holds(gssd.pid, pipefs / "gssd"), timeout=30, daemon=gssd,
                      what="rpc.gssd")

    # --- file transfers -------------------------------------------------------------------
    def put(self, res: Resources, files: list[Path], remote_dir: str) -> None:
        target = self.mnt / remote_dir if remote_dir else self.mnt
        # close() flushes to the server
        proc.run(["cp", *map(str, files), f"{target}/"], timeout=600)

    def get(self, res: Resources, names: list[str], local_dir: Path) -> None:
        proc.run(["cp", *(str(self.mnt / n) for n in names), f"{local_dir}/"], timeout=600)

    def mountpoint(self) -> Path | None:
        return self.mnt

    def forget(self, names: list[str]) -> None:
        """Drop the client's cached pages of ``names``: a read must cross the wire."""
        for name in names:
            fd = os.open(self.mnt / name, os.O_RDONLY)
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)

    # --- what was negotiated ---------------------------------------------------------------
    def verify(self, res: Resources) -> dict:
        opts = mount_options(Path("/proc/self/mountstats").read_text(), self.mnt)
        if opts is None:
            raise CryptcostError(f"{self.mnt} is not in /proc/self/mountstats")
        self.expect("NFS version", opts.get("vers"), self.params["vers"])
        self.expect("NFS security flavour", opts.get("sec"), self.params["sec"])
        self.negotiated = {"vers": opts["vers"], "sec": opts["sec"], "rsize": opts.get("rsize"),
                           "wsize": opts.get("wsize"),
                           "grace_waited_s": getattr(self, "grace_waited", None),
                           **({"remounted": self.remounted} if self.remounted else {}),
                           "from": "/proc/self/mountstats"}
        if self.params["sec"] != "sys":
            done = proc.run(["klist", "-e", "-c", str(self.ccache)], env=self.krb5_env, timeout=30)
            enctype = service_enctype(done.stdout, f"nfs/{SERVER}@{REALM}")
            if enctype is None:
                raise CryptcostError(f"the client holds no ticket for nfs/{SERVER}: "
                                     "rpc.gssd did not run")
            self.negotiated.update(enctype=enctype, realm=REALM)
            self.negotiated["from"] += ", klist -e"
        return self.negotiated

    def leak(self, packet: Packet, service: int) -> str | None:
        """An NFS call that is not RPCSEC_GSS with privacy shows its arguments."""
        how = call_protection(packet.payload) if packet.proto == 6 else None
        if how is None or how == "privacy":
            return None
        return f"an NFS call with {how} on port {packet.dport}: its arguments are plaintext"

    def sealed(self, packet: Packet) -> bytes:
        """A record's plaintext RPC header cut off (the body is the sealed token)."""
        rec = rpc_record(packet.payload) if packet.proto == 6 else None
        return packet.payload[rec["body"] + 4:] if rec else packet.payload


def known_bug(sec: str, release: str | None = None) -> str:
    """What is known of a failed mount with ``sec`` on this kernel."""
    release = release or platform.release()
    if sec == "krb5p" and re.match(r"6\.1\.", release):
        return ("Linux 6.1's NFS server answers every sec=krb5p call with GARBAGE_ARGS (seen with "
                "Debian 12's 6.1.0-56, Linux 6.1.192, while krb5 and krb5i work); Linux 6.12 does "
                "not: cryptcost vm --kernel 6.12 -- …")
    return ""


def mount_options(mountstats: str, target: Path) -> dict[str, str] | None:
    """The ``opts:`` of the mount on ``target`` in /proc/self/mountstats."""
    blocks = re.split(r"(?m)^device ", mountstats)
    for block in blocks:
        if f" mounted on {target} with fstype nfs" in block.split("\n", 1)[0]:
            m = re.search(r"(?m)^\s*opts:\s*(\S+)", block)
            if m:
                return dict(kv.partition("=")[::2] for kv in m.group(1).split(","))
    return None


def service_enctype(klist: str, principal: str) -> str | None:
    """The session key type of ``principal``'s ticket in ``klist -e`` output."""
    m = re.search(re.escape(principal) + r"\s*\n\s*Etype \(skey, tkt\): ([\w-]+)", klist)
    return m.group(1) if m else None
