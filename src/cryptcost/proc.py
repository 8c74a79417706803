"""The only module that starts processes.

Every external program cryptcost uses goes through :func:`run` (wait for
it) or :func:`spawn` (a daemon such as a FUSE filesystem). Both

* log the argv (secrets replaced by ``<redacted>``),
* enforce a timeout,
* kill the child's whole process group on any error, Ctrl-C included,
* raise :class:`~cryptcost.errors.ProcessError` carrying stdout and stderr.

Nothing else in cryptcost imports :mod:`subprocess`; a test enforces it.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from typing import IO, Mapping, Sequence

from cryptcost.errors import ProcessError, UserError

log = logging.getLogger("cryptcost.proc")

REDACTED = "<redacted>"


@dataclass(frozen=True)
class Completed:
    """A finished process."""

    argv: list[str]
    returncode: int
    stdout: str
    stderr: str
    seconds: float


def program(argv: Sequence[str]) -> str:
    """The program ``argv`` runs: behind ``ip netns exec NS``, the one run in the namespace."""
    argv = list(argv)
    return argv[4] if argv[:3] == ["ip", "netns", "exec"] and len(argv) > 4 else argv[0]


def which(name: str) -> str | None:
    """Path of an executable on PATH (plus the sbin directories), or None."""
    path = os.environ.get("PATH", "") + ":/usr/sbin:/sbin"
    return shutil.which(name, path=path)


def require(name: str, package: str | None = None) -> str:
    """Path of ``name``, or a :class:`UserError` that says how to get it."""
    found = which(name)
    if not found:
        hint = f" (install: cryptcost install {package})" if package else ""
        raise UserError(f"{name} is not installed{hint}")
    return found


def _shown(argv: Sequence[str], secrets: Sequence[str]) -> list[str]:
    out = []
    for arg in argv:
        for secret in secrets:
            if secret and secret in arg:
                arg = arg.replace(secret, REDACTED)
        out.append(arg)
    return out


def _env(env: Mapping[str, str] | None) -> dict[str, str]:
    merged = dict(os.environ)
    merged.setdefault("LC_ALL", "C")
    if env:
        merged.update(env)
    return merged


def _kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL the child's process group (it leads its own session)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        log.warning("pid %d did not die after SIGKILL", proc.pid)


def run(argv: Sequence[str], *, timeout: float = 120, env: Mapping[str, str] | None = None,
        input: str | bytes | list[bytes] | None = None, check: bool = True, cwd: str | None = None,
        secrets: Sequence[str] = (), binary: bool = False, pause: float = 0.5,
        shown: bool = False) -> Completed:
    """Run ``argv`` to completion and return its output.

    ``secrets`` are strings (passwords) that must never reach a log or an
    error message; they are replaced wherever they occur in the argv or
    the captured output. ``binary`` returns undecoded stdout. ``input`` as
    a list is typed answer by answer, ``pause`` seconds apart, for a
    program that reads each prompt's answer on its own (tcplay). ``shown``: its output goes
    to this process's own stdout and stderr as it comes, and none is captured (apt-get's
    progress, for a person waiting on it).
    """
    argv = [str(a) for a in argv]
    passthrough, shown = shown, _shown(argv, secrets)
    log.debug("run: %s", " ".join(shown))
    start = time.monotonic()
    try:
        proc = subprocess.Popen(argv,
                                stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                                stdout=None if passthrough else subprocess.PIPE,
                                stderr=None if passthrough else subprocess.PIPE, env=_env(env),
                                cwd=cwd, start_new_session=True)
    except FileNotFoundError as exc:
        raise UserError(f"{argv[0]} is not installed ({exc.strerror})") from None
    except OSError as exc:
        raise ProcessError(shown, None, "", str(exc),
                           why=f"could not start: {exc.strerror}") from None
    if isinstance(input, str):
        input = input.encode()
    try:
        if isinstance(input, list):
            for answer in input:
                proc.stdin.write(answer)
                proc.stdin.flush()
                time.sleep(pause)
            input = None
        out, err = proc.communicate(input=input, timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        out, err = (data or b"" for data in proc.communicate())
        raise ProcessError(shown, None, _redact(out, secrets), _redact(err, secrets),
                           why=f"timed out after {timeout:g} s") from None
    except BaseException:
        _kill_group(proc)
        raise
    out, err = out or b"", err or b""
    result = Completed(shown, proc.returncode, out if binary else _redact(out, secrets),
                       _redact(err, secrets), time.monotonic() - start)
    if check and proc.returncode != 0:
        raise ProcessError(shown, proc.returncode, _redact(out, secrets), result.stderr)
    return result


def _redact(data: bytes, secrets: Sequence[str]) -> str:
    text = data.decode(errors="replace")
    for secret in secrets:
        if secret:
            text = text.replace(secret, REDACTED)
    return text


class Daemon:
    """A long-running child (FUSE daemon, server). Stop it with :meth:`stop`.

    Its output goes to ``logfile`` (or is discarded) so that a chatty daemon
    can never block on a full pipe.
    """

    entry = None            # its journal entry, when started through Resources

    def __init__(self, argv: Sequence[str], proc: subprocess.Popen, logfile: str | None):
        self.argv = list(argv)
        self._proc = proc
        self.pid = proc.pid
        self.logfile = logfile

    def alive(self) -> bool:
        return self._proc.poll() is None

    @property
    def returncode(self) -> int | None:
        return self._proc.poll()

    def output(self) -> str:
        """What the daemon has written to its log so far."""
        if not self.logfile or not os.path.exists(self.logfile):
            return ""
        with open(self.logfile, errors="replace") as fh:
            return fh.read()[-4000:]

    def stop(self, timeout: float = 10) -> int | None:
        """SIGTERM, then SIGKILL after ``timeout``; return the exit code."""
        if self._proc.poll() is None:
            try:
                os.killpg(self.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self._proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                _kill_group(self._proc)
        return self._proc.returncode

    def fail(self, why: str) -> ProcessError:
        """A :class:`ProcessError` describing this daemon, with its log."""
        return ProcessError(self.argv, self.returncode, "", self.output(), why=why)


def spawn(argv: Sequence[str], *, env: Mapping[str, str] | None = None, cwd: str | None = None,
          logfile: str | None = None, stdin: IO | None = None,
          secrets: Sequence[str] = ()) -> Daemon:
    """Start ``argv`` in the background, in its own process group."""
    argv = [str(a) for a in argv]
    log.debug("spawn: %s", " ".join(_shown(argv, secrets)))
    out = open(logfile, "ab") if logfile else subprocess.DEVNULL
    try:
        proc = subprocess.Popen(argv, stdin=stdin or subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT, env=_env(env), cwd=cwd,
                                start_new_session=True)
    except FileNotFoundError as exc:
        raise UserError(f"{argv[0]} is not installed ({exc.strerror})") from None
    finally:
        if logfile:
            out.close()
    return Daemon(_shown(argv, secrets), proc, logfile)


class LineReader:
    """Lines from a file descriptor, each within a timeout (a session's pipe)."""

    def __init__(self, fd: int):
        self.fd, self._buf = fd, b""

    def line(self, timeout: float | None, what: str = "the other end") -> str | None:
        """The next line, or None at the end of the input; raises TimeoutError
        when none comes within ``timeout`` seconds (None: wait for ever)."""
        import selectors
        deadline = None if timeout is None else time.monotonic() + timeout
        with selectors.DefaultSelector() as sel:
            sel.register(self.fd, selectors.EVENT_READ)
            while b"\n" not in self._buf:
                left = None if deadline is None else deadline - time.monotonic()
                if (left is not None and left <= 0) or not sel.select(left):
                    raise TimeoutError(f"no line from {what} in {timeout:g} s")
                chunk = os.read(self.fd, 1 << 16)
                if not chunk:
                    return None
                self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\n")
        return line.decode(errors="replace")


class Session(Daemon):
    """A daemon that speaks lines on its stdin and stdout (the peer worker,
    behind ``ssh``); its stderr goes to ``logfile``. Closing its stdin is
    how it is told to end."""

    def __init__(self, argv: Sequence[str], proc: subprocess.Popen, logfile: str | None):
        super().__init__(argv, proc, logfile)
        self._lines = LineReader(proc.stdout.fileno())

    def send(self, line: str) -> None:
        """One line to the child's stdin; a child that is gone raises BrokenPipeError."""
        self._proc.stdin.write(line.encode() + b"\n")
        self._proc.stdin.flush()

    def recv(self, timeout: float) -> str | None:
        """The child's next line, or None at the end of its output (TimeoutError: none came)."""
        return self._lines.line(timeout, program(self.argv))

    def close_input(self) -> None:
        """End the child's stdin: it reads the end of its input."""
        try:
            self._proc.stdin.close()
        except OSError:
            pass


def session(argv: Sequence[str], *, env: Mapping[str, str] | None = None,
            logfile: str | None = None) -> Session:
    """Start ``argv`` in its own process group with pipes on its stdin and
    stdout (:class:`Session`). Only this process holds the pipe's write end,
    so the child reads the end of its input when this process dies."""
    argv = [str(a) for a in argv]
    log.debug("session: %s", " ".join(argv))
    err = open(logfile, "ab") if logfile else subprocess.DEVNULL
    try:
        child = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err,
                                 env=_env(env), start_new_session=True, bufsize=0)
    except FileNotFoundError as exc:
        raise UserError(f"{argv[0]} is not installed ({exc.strerror})") from None
    finally:
        if logfile:
            err.close()
    return Session(argv, child, logfile)


def wait_for(predicate, *, timeout: float, interval: float = 0.05, daemon: Daemon | None = None,
             what: str = "condition") -> None:
    """Poll ``predicate`` until true; fail early if ``daemon`` dies."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        if daemon is not None and not daemon.alive():
            raise daemon.fail(f"exited ({daemon.returncode}) before {what}")
        time.sleep(interval)
    if daemon is not None:
        raise daemon.fail(f"no {what} after {timeout:g} s")
    raise ProcessError(["wait"], None, "", "", why=f"no {what} after {timeout:g} s")


def runs(pid: int, program: str) -> bool:
    """Whether process ``pid`` runs ``program`` (has exec'd it)."""
    try:
        return os.path.basename(os.readlink(f"/proc/{pid}/exe")) == program
    except OSError:
        return False


def holds(pid: int, under: os.PathLike | str) -> bool:
    """Whether process ``pid`` has a file under ``under`` open."""
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}").startswith(f"{under}/"):
                return True
        except OSError:
            continue
    return False
