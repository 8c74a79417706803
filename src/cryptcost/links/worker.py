"""``cryptcost worker``: end ``b`` of a peer link, on the peer.

The controller (end ``a``) starts it as ``ssh HOST cryptcost worker`` and
speaks to it in JSON lines over that one session's stdin and stdout:
a request ``{"id": N, "op": OP, …}``, an answer ``{"id": N, "ok": true,
"result": …}`` or ``{"id": N, "ok": false, "error": …}``. Each operation
is one method of :class:`~cryptcost.links.ends.LocalEnd` on this host, so
the worker journals what it creates in its own host's journal and releases
it in reverse order:

* when the controller asks (``release``), at the end of a link's use;
* when its input ends: the controller ended, was killed, or the session
  dropped (``ssh`` closes the worker's stdin);
* when no request came for :data:`IDLE` seconds (a network that dropped
  silently);
* and after a crash of the worker itself, by ``cryptcost cleanup`` on
  this host.

File contents and secrets cross the session base64-encoded in the
request, never in an argv, and are never logged. The first line is the
worker's greeting (protocol, result-schema and cryptcost versions); a
controller of another schema version is refused with both named.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import socket
from pathlib import Path

from cryptcost import __version__, proc
from cryptcost.errors import CryptcostError, UserError
from cryptcost.lifecycle.resources import Resources
from cryptcost.links.ends import LocalEnd
from cryptcost.store.db import SCHEMA_VERSION

log = logging.getLogger("cryptcost.worker")

PROTOCOL = 1
IDLE = 600.0                    # seconds without a request before the worker gives up


def greeting() -> dict:
    return {"worker": PROTOCOL, "schema": SCHEMA_VERSION, "cryptcost": __version__,
            "hostname": socket.gethostname(), "ssh_connection": os.environ.get("SSH_CONNECTION")}


def mismatch(ours: dict, theirs: dict, where: str) -> str | None:
    """Why two ends cannot work together, naming both versions, or None."""
    for key, what in (("schema", "result-schema version"), ("worker", "worker protocol")):
        if theirs.get(key) != ours[key]:
            return (f"the {where} speaks {what} {theirs.get(key)} (cryptcost "
                    f"{theirs.get('cryptcost', '?')}), this one {ours[key]} (cryptcost "
                    f"{__version__}): install the same cryptcost on both hosts")
    return None


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


class Worker:
    """The operations, over one :class:`LocalEnd` of this host."""

    def __init__(self, res: Resources, probe=None):
        self.res, self.probe = res, probe
        self.end = LocalEnd(res)
        self.tmpdirs: set[str] = set()

    def handle(self, op: str, req: dict):
        end = self.end
        if op == "ping":
            return {}
        if op == "run":
            data = base64.b64decode(req["input"]) if req.get("input") is not None else None
            done = end.run(req["argv"], timeout=req.get("timeout", 120), check=False, input=data,
                           env=req.get("env"))
            return {"argv": done.argv, "returncode": done.returncode, "stdout": done.stdout,
                    "stderr": done.stderr, "seconds": done.seconds}
        if op == "daemon":
            d = end.daemon(req["argv"], env=req.get("env"), logfile=req.get("logfile"))
            return {"pid": d.pid, "argv": d.argv}
        if op in ("alive", "output", "stop"):
            d = end.daemons.get(req["pid"])
            if d is None:
                raise CryptcostError(f"no daemon of this worker has pid {req['pid']}")
            if op == "alive":
                return {"alive": d.alive(), "returncode": d.returncode}
            if op == "output":
                return d.output()
            return end.stop(d, timeout=req.get("timeout", 10))
        if op == "tmpdir":
            made = end.tmpdir(req["prefix"])
            self.tmpdirs.add(str(made))
            return str(made)
        if op == "tmpfs":
            if req["path"] not in self.tmpdirs:         # never over a directory of the host's
                raise CryptcostError(f"tmpfs on {req['path']}: not a directory this worker made")
            return end.tmpfs(Path(req["path"]), int(req["size"]), req.get("mode", "0700"))
        if op == "write":
            end.write(Path(req["path"]), base64.b64decode(req["data"]), req.get("mode", 0o644))
            return None
        if op == "read":
            return _b64(end.read(Path(req["path"])))
        if op == "secret_file":
            return str(end.secret_file(base64.b64decode(req["data"]), req.get("name")))
        if op == "keydir":
            return str(end.keydir())
        if op == "interface":
            return end.interface(req["dev"], req["argv"])
        if op == "address":
            return end.address(req["cidr"], req["dev"])
        if op == "kernel_features":
            return end.kernel_features()
        if op == "process_cpu":
            return {str(pid): s for pid, s in end.process_cpu(req["pids"]).items()}
        if op == "stat":
            return end.stat()
        if op == "fingerprint":
            host = self.probe() if self.probe else {}
            return {**fingerprint(host), "stacks": host.get("stacks", {})}
        raise UserError(f"unknown worker operation {op!r}")


def boot_id() -> str | None:
    """This boot of this machine (two ends with the same one share a machine)."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return None


def fingerprint(host: dict) -> dict:
    """What identifies a host's figures: name, CPU and its crypto flags, kernel, tools."""
    cpu_ = host.get("cpu", {})
    return {"hostname": host.get("hostname"), "cryptcost": host.get("cryptcost"),
            "cpu_model": cpu_.get("model"), "cores": cpu_.get("cores"),
            "crypto_flags": dict(cpu_.get("flags", {})),
            "kernel": host.get("kernel", {}).get("release"),
            "tools": host.get("tools", {}), "boot_id": boot_id(),
            "emulated": (host.get("emulated") or {}).get("why")}


def refuse(why: str, stdout_fd: int = 1) -> int:
    """Greet with why this host cannot be end b, and end (exit 2)."""
    os.write(stdout_fd, json.dumps({**greeting(), "refused": why}).encode() + b"\n")
    return 2


def serve(res: Resources, stdin_fd: int = 0, stdout_fd: int = 1, idle: float = IDLE,
          probe=None) -> int:
    """Greet, then answer requests until ``release`` and the end of input,
    or ``idle`` seconds without one. Everything created is released by
    ``res``'s scope (the caller's ``with``). ``probe()`` describes this host
    and its stacks' availability (``fingerprint``)."""
    out = os.fdopen(os.dup(stdout_fd), "wb", buffering=0)
    os.dup2(2, stdout_fd)              # anything else printed goes to stderr, not the session
    ours = greeting()

    def send(obj) -> None:
        out.write(json.dumps(obj).encode() + b"\n")
    send(ours)
    lines = proc.LineReader(stdin_fd)
    worker = Worker(res, probe)
    greeted = False
    while True:
        try:
            line = lines.line(idle, "the controller")
        except TimeoutError:
            log.warning("no request from the controller in %g s: releasing everything", idle)
            return 1
        if line is None:
            return 0 if greeted else 1
        try:
            req = json.loads(line)
            op, rid = req["op"], req.get("id")
        except (ValueError, KeyError, TypeError):
            send({"ok": False, "error": "a request that is not JSON with an op"})
            return 2
        if op == "hello":
            why = mismatch(ours, req, "controller")
            send({"id": rid, "ok": why is None, "error": why})
            if why:
                return 2
            greeted = True
            continue
        if not greeted:
            send({"id": rid, "ok": False, "error": "hello first"})
            return 2
        if op == "release":
            res.release_all()
            send({"id": rid, "ok": not res.failures, "error": "; ".join(res.failures) or None})
            continue
        try:
            send({"id": rid, "ok": True, "result": worker.handle(op, req)})
        except CryptcostError as exc:
            send({"id": rid, "ok": False, "error": str(exc), "kind": type(exc).__name__})
        except OSError as exc:
            send({"id": rid, "ok": False, "error": f"{op}: {exc}", "kind": "OSError"})
