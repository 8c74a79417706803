"""``cryptcost fleet run``: the same plan on several hosts at once, over ssh,
each host's run imported into this store, and the hosts side by side; then,
with ``--pairs``, the network stacks from each pair's first host to its
second (``cryptcost network --link peer:B`` run on A), in rounds that
share no host.

Each host runs ``cryptcost run`` on its own (the parts of a plan are local
to a host, so hosts share nothing and run at once), in one ``ssh -T -o
BatchMode=yes HOST`` session per host, with a result store of its own in
a temporary directory there; the session then prints that run's export
(``report --format json``), which is imported here with the host's own
fingerprint. A plan file crosses on the session's stdin. A host that is
unreachable or fails is reported with its reason, and the others go on.
"""

from __future__ import annotations

import json
import shlex
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from cryptcost.errors import UserError
from cryptcost.lifecycle.resources import Resources
from cryptcost.links.peer import PeerOptions, ssh_argv

PROGRESS_EVERY = 2.0            # seconds between progress lines of one host


@dataclass
class HostRun:
    """One host's part of a fleet run: its own run, or a pair's network run from ``host``
    to ``peer``."""

    host: str
    peer: str | None = None
    run_id: int | None = None           # in this store, once imported
    error: str | None = None
    seconds: float = 0.0
    last: str = ""                      # its latest progress line
    output: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        return f"{self.host}→{self.peer}" if self.peer else self.host


def parse_pairs(text: str | None) -> list[tuple[str, str]]:
    """``h1:h2,h3:h4``: the network part from each first host to its second."""
    pairs = []
    for item in (text or "").split(","):
        if not item.strip():
            continue
        a, sep, b = item.strip().partition(":")
        if not sep or not a or not b or a == b:
            raise UserError(f"bad --pairs item {item.strip()!r}: use HOST_A:HOST_B")
        for h in (a, b):
            ssh_argv(h, PeerOptions())
        pairs.append((a, b))
    return pairs


def waves(pairs: list[tuple[str, str]]) -> list[list[tuple[str, str]]]:
    """The pairs in rounds that share no host (each host runs one measurement at a time)."""
    out: list[list[tuple[str, str]]] = []
    for pair in pairs:
        for wave in out:
            if not {h for p in wave for h in p} & set(pair):
                wave.append(pair)
                break
        else:
            out.append([pair])
    return out


def parse_hosts(text: str) -> list[str]:
    """``h1,h2,…``, or ``@FILE``: an Ansible-style inventory (INI: one host per line, its
    first word, ``[groups]``, ``;``/``#`` comments and ``key=value`` variables skipped)."""
    if text.startswith("@"):
        path = Path(text[1:])
        try:
            lines = path.read_text().splitlines()
        except OSError as exc:
            raise UserError(f"cannot read the inventory {path}: {exc.strerror}") from None
        hosts = []
        for line in lines:
            line = line.split("#", 1)[0].split(";", 1)[0].strip()
            if line and not line.startswith("[") and "=" not in line.split()[0]:
                hosts.append(line.split()[0])
    else:
        hosts = [h.strip() for h in text.split(",") if h.strip()]
    hosts = list(dict.fromkeys(hosts))
    if not hosts:
        raise UserError(f"--hosts {text}: no host named")
    for h in hosts:
        ssh_argv(h, PeerOptions())                 # refuses what ssh would read as an option
    return hosts


def remote_command(argv: list[str], opts: PeerOptions, plan: bool) -> str:
    """The shell command a host runs: ``cryptcost ARGV`` (a measuring command) into a private
    store, then that run's export on stdout (the command's own output goes to stderr)."""
    cc = ("sudo -n " if opts.sudo else "") + opts.command
    args = " ".join(shlex.quote(a) for a in argv)
    plan_file = ' --plan "$d/plan.toml"' if plan else ""
    return ("d=$(mktemp -d) || exit 1; trap 'rm -rf \"$d\"' EXIT; "
            + ('cat > "$d/plan.toml"; ' if plan else "exec </dev/null; ")
            + f'{cc} --db "$d/results.db" {args}{plan_file} >&2 || exit $?; '
            + f'{cc} --db "$d/results.db" report latest --format json')


def local_args(run_args: list[str]) -> list[str]:
    """Each host's own run."""
    return ["run", "--no-report", *run_args]


def pair_args(peer: str, opts: PeerOptions, stacks: str = "all",
              extra: list[str] = ()) -> list[str]:
    """The network part from a pair's first host to its second, with the same ssh options
    (a config path names a file on the first host), and ``extra`` options of ``network``."""
    argv = ["network", "--link", f"peer:{peer}", "--stacks", stacks, *extra,
            "--peer-command", opts.command]
    if opts.ssh_config:
        argv += ["--ssh-config", opts.ssh_config]
    return argv + (["--peer-sudo"] if opts.sudo else [])


def run_fleet(runs: list[HostRun], argv_of, opts: PeerOptions, *, res: Resources,
              plan_text: str | None, store, workdir: Path, say=print) -> list[HostRun]:
    """Start ``runs`` at once (``argv_of(run)``: its cryptcost command), print each one's
    progress, import each export. Returns them with their run id here, or their error."""
    sessions = {}
    for hr in runs:
        argv = ssh_argv(hr.host, opts)
        argv[-1] = remote_command(argv_of(hr), opts, plan_text is not None and not hr.peer)
        log = workdir / f"fleet-{len(list(workdir.iterdir()))}.log"
        sessions[hr.label] = (res.daemon(argv, logfile=str(log), session=True), log)
        say(f"{hr.label}: started")

    def collect(hr: HostRun) -> None:
        session, _ = sessions[hr.label]
        start = time.monotonic()
        try:
            if plan_text is not None and not hr.peer:
                try:
                    session.send(plan_text)
                except BrokenPipeError:
                    pass                    # ssh ended at once: its exit code and log say why
            session.close_input()
            while (line := session.recv(24 * 3600)) is not None:
                hr.output.append(line)
        except (OSError, TimeoutError) as exc:
            hr.error = str(exc)
        hr.seconds = time.monotonic() - start

    threads = [threading.Thread(target=collect, args=(hr,), daemon=True) for hr in runs]
    for t in threads:
        t.start()
    while any(t.is_alive() for t in threads):
        for hr in runs:
            last = _last_line(sessions[hr.label][1])
            if last and last != hr.last:
                hr.last = last
                say(f"{hr.label}: {last}")
        time.sleep(PROGRESS_EVERY / 4)
    for hr in runs:
        session, log = sessions[hr.label]
        code = res.stop(session, timeout=30)
        if hr.error is None and code != 0:
            why = _last_line(log) or f"exit code {code}"
            hr.error = (f"ssh {hr.host} could not run it (exit {code}): {why}" if code == 255
                        else f"its run failed (exit {code}): {why}")
        if hr.error is None:
            try:
                data = json.loads("\n".join(hr.output))
                hr.run_id = store.import_run(data)
            except (ValueError, UserError) as exc:
                hr.error = f"its export could not be imported: {exc}"
        say(f"{hr.label}: " + (f"imported as run {hr.run_id} ({hr.seconds:.0f} s)" if hr.run_id
                               else f"FAILED: {hr.error}"))
    return runs


def _last_line(path: Path) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1][:160] if lines else ""
