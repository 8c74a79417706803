"""What several subcommands share: list parsing, sizes, JSON output,
opening the store, recording a run, and progress on stderr."""

from __future__ import annotations

import json
import os
import sys
import time
from contextlib import contextmanager
from pathlib import Path

from rich.console import Console

from cryptcost import stacks, units
from cryptcost.errors import UserError
from cryptcost.model import as_json
from cryptcost.host.probe import probe
from cryptcost.links.peer import PeerOptions
from cryptcost.lifecycle.lock import run_lock
from cryptcost.lifecycle.resources import Resources, Terminated, install_signal_handlers
from cryptcost.runner.core import quiet
from cryptcost.runner.core.scheduler import Progress
from cryptcost.runner.core.sink import StoreSink
from cryptcost.store.db import Store

out = Console(highlight=False, soft_wrap=False, width=None if sys.stdout.isatty() else 200)
err = Console(stderr=True, highlight=False, width=None if sys.stderr.isatty() else 200)

def probe_host() -> dict:
    """The host (``probe``), with every stack's tools and availability."""
    info = probe(tuple(stacks.stack_tools()))
    info["stacks"] = stacks.availability()
    return info


def parse_list(text: str, what: str) -> list[str]:
    items = [t.strip() for t in text.split(",") if t.strip()]
    if not items:
        raise UserError(f"empty {what} list")
    return items


def parse_ints(text: str, what: str) -> list[int]:
    out_ = []
    for item in parse_list(text, what):
        try:
            out_.append(int(item))
        except ValueError:
            raise UserError(f"bad {what} {item!r}: must be a whole number") from None
    return out_


def parse_accel(text: str) -> list[bool]:
    values = []
    for item in parse_list(text, "accel"):
        if item.lower() not in ("on", "off"):
            raise UserError(f"bad --accel {item!r}: use on, off or on,off")
        values.append(item.lower() == "on")
    return values


def add_cpus_option(p) -> None:
    p.add_argument("--cpus", metavar="LIST",
                   help="CPU counts, e.g. 1,2: the whole comparison once per count, "
                   "everything cryptcost starts and the kernel's unbound workqueues pinned to "
                   "that many CPUs (softirq is not): the scaling curve (default: no pinning)")


def add_profile_option(p) -> None:
    g = p.add_mutually_exclusive_group()
    g.add_argument("--profile", action="store_true", default=None,
                   help="profile, and fail where perf cannot run here (the default profiles "
                        "where it can: the last warm-up round under perf, every CPU, sampled "
                        "only while each pass runs; with --warmup 0, a round after the samples): "
                        "where each cell's CPU time goes, by layer, said in its verdict")
    g.add_argument("--no-profile", dest="profile", action="store_false",
                   help="no profile: each verdict rests on the ceilings and the host's facts")


def cpu_counts(args) -> list[int | None]:
    """``--cpus`` as a list of counts, each checked against this process's CPUs; [None] without
    it."""
    if not getattr(args, "cpus", None):
        return [None]
    from cryptcost.host.cpu import validate_cpu_count
    counts = list(dict.fromkeys(parse_ints(args.cpus, "--cpus")))
    for n in counts:
        validate_cpu_count(n)
    return counts


def per_cpu_count(plan, counts: list[int | None], measure_one):
    """``measure_one(plan, res)`` once per CPU count, each pass in its own
    Resources scope (one pass's stacks are gone before the next is built);
    one outcome with every pass's results, what was skipped and what failed."""
    from dataclasses import replace
    install_signal_handlers()
    merged = None
    for n in counts:
        with Resources() as res:
            outcome = measure_one(replace(plan, cpus=n), res)
        if merged is None:
            merged = outcome
            continue
        merged.results += outcome.results
        merged.failed += outcome.failed
        merged.skipped += [s for s in outcome.skipped if s not in merged.skipped]
    return merged


def print_json(obj) -> None:
    sys.stdout.write(json.dumps(obj, indent=2, default=as_json) + "\n")


def linked_results(store: Store, run) -> list[list[dict]]:
    """The results of each emulated run ``run`` is linked to (``run --vm``'s guests), a list
    per run, in the order of its ``guest_runs``; a run deleted since has none."""
    out = []
    for rid in run.extra.get("guest_runs") or []:
        try:
            out.append(store.results(store.run(str(rid)).id))
        except UserError:
            out.append([])
    return out


def open_store(args, *, create: bool = True) -> Store:
    return Store.open(getattr(args, "db", None), create=create)


@contextmanager
def recorded_run(args, command: str, host: dict, resume: int | None = None):
    """A run in the store: ``running`` while measuring, then ``complete``,
    ``failed`` or ``interrupted``, on a host quieted for it (:func:`quiet.quiet_host`,
    undone when the run ends); ``resume``: that run, running again (``run --resume``). Yields
    (store, run_id, sink)."""
    store = open_store(args)                     # a bad --db is refused before the lock exists
    install_signal_handlers()                    # SIGTERM unwinds, so the host's settings come back
    with run_lock(sys.argv[1:]), Resources() as res:
        quiet.quiet_host(res, host, getattr(args, "page_reporting", "hold"))
        if resume is None:
            run_id = store.begin_run(command, host)
        else:
            run_id = resume
            store.resume_run(run_id)
        status = "failed"
        try:
            yield store, run_id, StoreSink(store, run_id)
            status = "complete"
        except (KeyboardInterrupt, Terminated):
            status = "interrupted"
            raise
        finally:
            reported = quiet.reported_since(host)
            if reported is not None:
                store.update_extra(run_id, page_reporting_reported_bytes=reported)
            store.finish_run(run_id, status)
            results, samples = store.counts(run_id)
            if status != "complete":
                err.print(f"run {run_id} {status}; kept {results} results and {samples} samples "
                          f"measured before that (cryptcost show {run_id})")


def add_host_options(p) -> None:
    """What a measuring command may change on the host for its run."""
    p.add_argument("--page-reporting", choices=quiet.CHOICES, default="hold",
                   help="on a VM that hands freed memory back to its host: hold that off for the "
                        "run, so memory freed between passes is not faulted in from the host "
                        "again (default), or keep it as it is")


class ConsoleProgress(Progress):
    """Progress with an ETA on stderr: a bar on a terminal, sparse lines otherwise."""

    def __init__(self, quiet: bool = False):
        self.quiet = quiet
        self.started = time.monotonic()
        self.last = 0.0
        self.bar = None

    def start(self, total_steps: int, est_seconds: float, expected_steps: int = 0) -> None:
        self.started = time.monotonic()
        self.expected = expected_steps or total_steps
        if self.quiet:
            return
        if err.is_terminal:
            from rich.progress import BarColumn, Progress as Bar, TextColumn, TimeElapsedColumn
            self.bar = Bar(TextColumn("{task.description:<40}"), BarColumn(),
                           TextColumn("{task.completed}/{task.total}"), TimeElapsedColumn(),
                           TextColumn("{task.fields[eta]}"), console=err, transient=True)
            self.bar.start()
            self.task = self.bar.add_task("starting", total=self.expected, eta="")
        else:
            err.print(f"measuring: {self.expected} steps if every series is stable at once, "
                      f"at most {total_steps}")

    def step(self, label: str, done: int, total: int, eta=None) -> None:
        """``eta`` (scheduler.Eta) predicts what is left from the steps measured so far."""
        if self.quiet:
            return
        text, steps = "", self.expected
        if eta is not None:
            steps = done - 1 + eta.steps
            text = (f"ETA ~{units.duration(eta.seconds)} ({eta.steps} of at most "
                    f"{eta.at_most_steps} steps left)")
        if self.bar is not None:
            self.bar.update(self.task, description=label[:40], completed=done - 1, total=steps,
                            eta=text)
            return
        now = time.monotonic()
        if now - self.last >= 5:
            self.last = now
            elapsed = now - self.started
            err.print(f"  [{elapsed:5.0f} s] step {done}/{steps}" + (f", {text}" if text else "")
                      + f": {label}")

    def finish(self) -> None:
        if self.bar is not None:
            self.bar.stop()
            self.bar = None


def print_outcome(args, store, run_id: int, outcome, table, **head) -> int:
    """A cipher, storage or network command's results: one JSON object, or a table,
    what was not measured, and where the run is stored. Exit 1 when a stack
    the user asked for failed (each failure on its own line)."""
    from cryptcost.report.terminal import skipped_table, unstable_lines
    from cryptcost.report.document import unstable_groups
    if args.json:
        print_json({"run": run_id, **head, "failed": outcome.failed,
                    "results": [r.to_dict() for r in outcome.results], "skipped": outcome.skipped})
    else:
        results = [r.to_dict() for r in outcome.results]
        out.print(table(results))
        for line in unstable_lines(unstable_groups(results)):
            out.print(line)
        if outcome.skipped:
            out.print(skipped_table(outcome.skipped))
        out.print(f"run {run_id} stored in {store.path}")
    for line in outcome.failed:
        err.print(f"error: {line}")
    return 1 if outcome.failed else 0


def add_peer_options(p, where: str = "with --link peer:HOST") -> None:
    p.add_argument("--ssh-config", metavar="FILE",
                   help=f"{where}: ssh's configuration file (default: ssh's own, "
                        "~/.ssh/config)")
    p.add_argument("--peer-sudo", action="store_true",
                   help=f"{where}: run cryptcost there with 'sudo -n' (an SSH user "
                        "that is not root)")
    p.add_argument("--peer-command", default="cryptcost", metavar="COMMAND",
                   help=f"{where}: how cryptcost is run there (default: cryptcost)")


def peer_options(args) -> PeerOptions:
    return PeerOptions(ssh_config=args.ssh_config, sudo=args.peer_sudo,
                       command=args.peer_command)


def validate_writable(path: str) -> None:
    """Refuse at once, before any measuring, a report path that cannot be written."""
    p = Path(path)
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise UserError(f"cannot write the report {path}: {parent} is not a directory")
    if p.exists() and p.is_dir():
        raise UserError(f"cannot write the report {path}: it is a directory")
    if not os.access(parent, os.W_OK):
        raise UserError(f"cannot write the report {path}: {parent} is not writable")


def write_output(output: str | None, text: str) -> None:
    """``text`` into the file ``output``, or on stdout without one."""
    if output:
        try:
            Path(output).write_text(text)
        except OSError as exc:
            raise UserError(f"cannot write {output}: {exc.strerror}") from None
        print(f"wrote {output}", file=sys.stderr)
    else:
        sys.stdout.write(text)
