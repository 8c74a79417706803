"""``--link peer:HOST``: this host is end ``a``, another machine end ``b``.

The controller starts ``ssh -T -o BatchMode=yes HOST cryptcost worker``
(``sudo -n`` before it where the SSH user is not root) and speaks to that
worker (:mod:`cryptcost.links.worker`) in JSON lines over the session's
stdin and stdout. HOST is anything ``ssh`` accepts: an alias of the
user's ``~/.ssh/config`` (or of ``--ssh-config``), ``user@host``, a jump
host through that config. Nothing listens for cryptcost on the peer, and
nothing is left there: the worker releases every resource of end ``b``
when the link is released, when the session ends (the controller was
killed, the network dropped), or after a crash by ``cryptcost cleanup``
on the peer.

End ``b`` (:class:`RemoteEnd`) forwards each of an end's operations to the
worker; end ``a`` is this host's own namespace. The link's addresses are
those the session used; its interfaces are the ones the routes between
them take, where the wire check captures (both sides); its MTU is theirs.
"""

from __future__ import annotations

import base64
import json
import logging
import secrets
import socket
import time
from dataclasses import dataclass
from pathlib import Path

from cryptcost import proc
from cryptcost.errors import CryptcostError, ProcessError, UserError
from cryptcost.host import netns
from cryptcost.lifecycle.release import releaser
from cryptcost.lifecycle.resources import Resources
from cryptcost.links import Link
from cryptcost.links.ends import End
from cryptcost.links.worker import boot_id, greeting, mismatch

log = logging.getLogger("cryptcost.peer")

ANSWER = 120.0                  # seconds an operation's answer may take, beyond its own timeout
_SESSIONS: dict[str, "RemoteEnd"] = {}        # this process's open sessions, by journal entry
_OPEN: dict[tuple, "PeerLink"] = {}           # the link that opened each, by (host, options, run)


@dataclass(frozen=True)
class PeerOptions:
    """How to reach the peer: ``ssh -F ssh_config``, ``sudo -n`` on the peer,
    and the command that runs cryptcost there."""

    ssh_config: str | None = None
    sudo: bool = False
    command: str = "cryptcost"
    connect_timeout: float = 60.0


def ssh_argv(host: str, opts: PeerOptions) -> list[str]:
    if not host or host.startswith("-") or any(c.isspace() for c in host):
        raise UserError(f"bad --link peer:{host}: name a host as ssh does (alias, host or "
                        "user@host)")
    argv = ["ssh", "-T", "-o", "BatchMode=yes", "-o", "ConnectTimeout=20",
            "-o", "ServerAliveInterval=10", "-o", "ServerAliveCountMax=3"]
    if opts.ssh_config:
        if not Path(opts.ssh_config).is_file():
            raise UserError(f"bad --ssh-config {opts.ssh_config}: no such file")
        argv += ["-F", opts.ssh_config]
    remote = ("sudo -n " if opts.sudo else "") + opts.command + " worker"
    return argv + [host, remote]


class SessionGone(CryptcostError):
    """The session to the peer ended: its worker is gone, and with it the
    resources it releases itself (or ``cryptcost cleanup`` on the peer does)."""


class RemoteDaemon:
    """A daemon the worker started at end ``b``, asked about through it."""

    def __init__(self, end: "RemoteEnd", pid: int, argv: list[str], logfile: str | None):
        self.end, self.pid, self.argv, self.logfile = end, pid, argv, logfile
        self._returncode: int | None = None

    def alive(self) -> bool:
        got = self.end.call("alive", pid=self.pid)
        self._returncode = got["returncode"]
        return got["alive"]

    @property
    def returncode(self) -> int | None:
        return self._returncode

    def output(self) -> str:
        return self.end.call("output", pid=self.pid)

    def fail(self, why: str) -> ProcessError:
        return ProcessError(self.argv, self._returncode, "", self.output(),
                            why=f"{why}, on {self.end.host}")


class RemoteEnd(End):
    """End ``b`` on the peer: every operation is a request to its worker."""

    def __init__(self, session: proc.Session, host: str):
        # ``machine`` may become "local" (the same boot id: CPU counted once); ``host`` stays
        self.session, self.machine, self.host = session, host, host
        self.seq = 0
        self.released = False
        self._features: dict[str, bool] | None = None

    def _gone(self) -> str:
        tail = [ln for ln in self.session.output().splitlines() if ln.strip()][-2:]
        return (f"the session to {self.host} ended"
                + (f": {' '.join(tail)}" if tail else "")
                + " (its worker releases everything it held there)")

    def call(self, op: str, *, wait: float = 0.0, **args):
        self.seq += 1
        try:
            self.session.send(json.dumps({"id": self.seq, "op": op, **args}))
            line = self.session.recv(wait + ANSWER)
        except (BrokenPipeError, ValueError, OSError):
            raise SessionGone(self._gone()) from None
        except TimeoutError:
            raise CryptcostError(f"the worker on {self.host} did not answer {op} within "
                                 f"{wait + ANSWER:g} s") from None
        if line is None:
            raise SessionGone(self._gone())
        answer = json.loads(line)
        if not answer.get("ok"):
            raise CryptcostError(f"on {self.host}: {answer.get('error')}")
        return answer.get("result")

    def run(self, argv, *, timeout=120, check=True, input=None, env=None) -> proc.Completed:
        data = base64.b64encode(input).decode() if input is not None else None
        got = self.call("run", wait=timeout, argv=[str(a) for a in argv], timeout=timeout,
                        input=data, env=env)
        done = proc.Completed(got["argv"], got["returncode"], got["stdout"], got["stderr"],
                              got["seconds"])
        if check and done.returncode != 0:
            raise ProcessError(done.argv, done.returncode, done.stdout, done.stderr,
                               why=f"exit code {done.returncode} on {self.host}")
        return done

    def daemon(self, argv, *, env=None, logfile=None) -> RemoteDaemon:
        got = self.call("daemon", argv=[str(a) for a in argv], env=env,
                        logfile=str(logfile) if logfile else None)
        return RemoteDaemon(self, got["pid"], got["argv"], logfile)

    def stop(self, daemon, timeout=10) -> int | None:
        return self.call("stop", wait=timeout, pid=daemon.pid, timeout=timeout)

    def tmpdir(self, prefix: str) -> Path:
        return Path(self.call("tmpdir", prefix=prefix))

    def tmpfs(self, path, size_bytes, mode="0700") -> None:
        self.call("tmpfs", wait=30, path=str(path), size=size_bytes, mode=mode)

    def write(self, path, data, mode=0o644) -> None:
        self.call("write", path=str(path), data=base64.b64encode(data).decode(), mode=mode)

    def read(self, path) -> bytes:
        return base64.b64decode(self.call("read", path=str(path)))

    def secret_file(self, content, name=None) -> Path:
        return Path(self.call("secret_file", data=base64.b64encode(content).decode(), name=name))

    def keydir(self) -> Path:
        return Path(self.call("keydir"))

    def interface(self, dev: str, argv: list[str]) -> None:
        self.call("interface", wait=30, dev=dev, argv=[str(a) for a in argv])

    def address(self, cidr: str, dev: str) -> None:
        self.call("address", wait=30, cidr=cidr, dev=dev)

    def kernel_features(self) -> dict[str, bool]:
        if self._features is None:
            self._features = self.call("kernel_features", wait=30)
        return self._features

    def process_cpu(self, pids) -> dict[int, float]:
        return {int(pid): s for pid, s in self.call("process_cpu", pids=list(pids)).items()}

    def stat(self) -> dict[str, list[int]]:
        return self.call("stat")

    def release(self) -> None:
        """Ask the worker to release everything it holds, then end the session."""
        self.released = True
        try:
            self.call("release", wait=300)
        finally:
            self.session.close_input()


@releaser("peer")
def release_peer(data: dict) -> None:
    """In the run that opened it: the worker releases end ``b``, then the
    session ends. After a crash there is nothing to do here: the session's
    ``ssh`` is a journalled daemon, and its end makes the worker release.
    A session that ends while asked (its worker was killed, and ``ssh`` has
    not exited yet) is released too: what the worker held is the peer's
    journal's to release, by ``cryptcost cleanup`` there."""
    end = _SESSIONS.pop(data.get("token", ""), None)
    if end is not None and end.session.alive():
        try:
            end.release()
        except SessionGone as exc:
            log.warning("%s", exc)


def _route(end: End, addr: str) -> dict:
    """The interface, source address and MTU of ``end``'s route to ``addr``."""
    got = json.loads(end.run(["ip", "-j", "route", "get", addr], timeout=10).stdout or "[{}]")[0]
    dev = got.get("dev")
    link = json.loads(end.run(["ip", "-j", "link", "show", "dev", dev], timeout=10).stdout)[0]
    return {"dev": dev, "src": got.get("prefsrc"), "mtu": link.get("mtu")}


class PeerLink(Link):
    """This host (end ``a``) and a peer reached through ``ssh`` (end ``b``)."""

    name = "peer"
    wire_checked = True
    no_delay = ("the delay would change the queueing of both hosts' own interfaces, for all their "
                "traffic, and cryptcost does not touch a host's interfaces: add it with tc there "
                "yourself, or measure across --link netns")

    def __init__(self, host: str, mtu: int = 1500, opts: PeerOptions | None = None,
                 delay_ms: float = 0.0):
        super().__init__(mtu, delay_ms)
        self.host, self.opts = host, opts or PeerOptions()
        self.argv_ssh = ssh_argv(host, self.opts)
        self.peer: dict = {}
        self.routes: dict[str, dict] = {}

    def create(self, res: Resources) -> None:
        """Open the session (or share the one this run has to the same host: a
        host runs one worker at a time), greet, and learn the link."""
        first = _OPEN.get((self.host, self.opts, id(res)))
        if first is not None and not first.at("b").released:
            self._ends["b"] = first.at("b")
            for attr in ("a_addr", "b_addr", "routes", "mtu", "server_bind", "peer",
                         "peer_stacks", "rtt_ms", "used_ports"):
                setattr(self, attr, getattr(first, attr))
            return
        logfile = res.tmpdir("cryptcost-peer-") / "ssh.log"
        session = res.daemon(self.argv_ssh, logfile=str(logfile), session=True, graceful=30)
        end = RemoteEnd(session, self.host)
        theirs = self._greeting(end)
        why = mismatch(greeting(), theirs, f"worker on {self.host}")
        if why:
            raise UserError(f"--link peer:{self.host}: {why}")
        token = secrets.token_hex(4)
        _SESSIONS[token] = end
        res.track("peer", host=self.host, token=token)
        try:
            end.call("hello", **greeting())
        except CryptcostError as exc:
            raise UserError(f"--link peer:{self.host}: {exc}") from None
        self._ends["b"] = end
        self.b_addr = self._address(theirs)
        self.routes["a"] = _route(self.at("a"), self.b_addr)
        self.a_addr = self.routes["a"]["src"]
        self.routes["b"] = _route(end, self.a_addr)
        self.mtu = min(r["mtu"] for r in self.routes.values())
        # Every address of the peer, a tunnel's inner one included, for as long as the link lives.
        self.server_bind = "0.0.0.0"
        self.peer = end.call("fingerprint", wait=120)
        self.peer_stacks = {s["name"]: s for s in self.peer.pop("stacks", [])}
        if self.peer.get("boot_id") and self.peer["boot_id"] == boot_id():
            end.machine = "local"          # the same machine (a test's namespace): count it once
        self.rtt_ms = self._rtt()
        _OPEN[(self.host, self.opts, id(res))] = self

    def _greeting(self, end: RemoteEnd) -> dict:
        """The worker's first line; an ssh that ends first says why in its log."""
        deadline = time.monotonic() + self.opts.connect_timeout
        while time.monotonic() < deadline:
            try:
                line = end.session.recv(max(0.1, deadline - time.monotonic()))
            except TimeoutError:
                break
            if line is None:
                end.session.stop(timeout=5)
                tail = [ln for ln in end.session.output().splitlines() if ln.strip()][-1:]
                raise UserError(f"--link peer:{self.host}: ssh could not start "
                                f"'{self.argv_ssh[-1]}' there (exit {end.session.returncode}"
                                + (f": {tail[0]}" if tail else "") + "); check that "
                                f"'ssh -o BatchMode=yes {self.host} true' works and that cryptcost "
                                "is installed on the peer")
            try:
                got = json.loads(line)
            except ValueError:
                continue                # a login script's output before the worker's
            if isinstance(got, dict) and "worker" in got:
                if got.get("refused"):
                    raise UserError(f"--link peer:{self.host}: {got['refused']}")
                return got
        raise UserError(f"--link peer:{self.host}: no answer from cryptcost worker within "
                        f"{self.opts.connect_timeout:g} s")

    def _ssh_config(self) -> dict[str, str]:
        """What ``ssh -G`` says it would use for HOST (hostname, port …)."""
        got = proc.run(["ssh", "-G", *(["-F", self.opts.ssh_config] if self.opts.ssh_config
                                       else []), self.host], timeout=10, check=False).stdout
        return dict(line.split(" ", 1) for line in got.splitlines() if " " in line)

    def _address(self, theirs: dict) -> str:
        """The peer's address as this host reaches it: the one its session came to
        (``sudo`` drops SSH_CONNECTION: then the one ssh resolves HOST to)."""
        conn = (theirs.get("ssh_connection") or "").split()
        if len(conn) == 4:
            return conn[2]
        name = self._ssh_config().get("hostname", self.host)
        return socket.getaddrinfo(name, None, type=socket.SOCK_STREAM)[0][4][0]

    def _rtt(self) -> float | None:
        """The median of five TCP handshakes with the peer's sshd (one round trip each)."""
        return netns.round_trip(self.b_addr, int(self._ssh_config().get("port", 22)),
                                accepted=True)

    def unavailable(self, stack: str) -> str | None:
        """Why ``stack`` cannot hold end ``b`` on the peer (its own probe), or None."""
        got = self.peer_stacks.get(stack)
        if got is None:
            return f"the peer {self.host} does not know the stack {stack} (another cryptcost?)"
        if got["available"]:
            return None
        return (f"on the peer {self.host}: {got['reason']}"
                + (f" (install there: {got['install']})" if got.get("install") else ""))

    @property
    def shared_cpus(self) -> bool:
        return self.at("b").machine == "local"

    def argv(self, end: str, argv: list[str]) -> list[str]:
        if end == "b":
            raise CryptcostError("end b of a peer link runs its commands through its worker: "
                                 "use link.at('b')")
        return list(argv)

    def iface(self, end: str) -> str:
        return self.routes[end]["dev"]

    def port(self, default: int) -> int:
        """A port free at both ends, for TCP and UDP."""
        port = default
        while port in self.used_ports or any(self.at(e).listening(port, udp)
                                             for e in ("a", "b") for udp in (False, True)):
            port += 1
        self.used_ports.add(port)
        return port

    def describe(self) -> dict:
        d = super().describe()
        d.update({"host": self.host, "addresses": {"a": getattr(self, "a_addr", None),
                                                   "b": getattr(self, "b_addr", None)},
                  "routes": self.routes, "peer": self.peer,
                  "offloads": {end: self.offloads(end) for end in self.routes}})
        if self.shared_cpus:
            d["shared_cpus"] = ("the peer is this machine (the same boot id): both ends share "
                                "its CPUs")
        return d

    @property
    def emulated_peer(self) -> str | None:
        """Why end b's speeds are not real hardware's, where the peer is an emulated guest."""
        return self.peer.get("emulated")
