"""Resuming a run cut short: ``cryptcost run --resume RUN`` measures into RUN the parts of its
plan it does not hold whole, on the host that measured the rest.

A part is the unit: its stacks are set against baselines measured in the same interleaved
rounds, so a part is measured whole in one sitting or again from its start. A part is whole
in a run when it ended there (the run timed it, ``part_seconds``), none of its comparisons
failed and a time budget left nothing of it out; any other part is measured again, and what the
run holds of it (its cut series, as incomplete results, and their samples) is dropped just
before it begins. A cipher cell is its own series, paired with nothing: a cipher table (and the
cipher ceilings) measures only the cells the run does not hold whole. Each
sitting is recorded in the run (``sittings``: when, how long, which parts).

The guest's share (``--vm``) resumes the same way, from the guest runs the run links: a share's
parts whole in a linked guest run of that share are not run again; the rest runs in a new guest,
linked beside the earlier ones.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from cryptcost.errors import UserError
from cryptcost.model import Cell
from cryptcost.store.db import now
from cryptcost.record.run import Host
from cryptcost.suite import ceilings
from cryptcost.suite.compiled import CompiledPart, CompiledPlan
from cryptcost.workloads.plan import RunPlan
from cryptcost.workloads.seeds import reports_of

# what a run must be to be resumed: its status (``killed``: its process died unfinished)
RESUMABLE = ("interrupted", "failed", "killed", "complete")


def whole_parts(extra: dict) -> set[str]:
    """The labels of the parts a run (its ``extra``) measured whole: each ended (timed in
    ``part_seconds``) with no comparison of it failed (a failure names its part first) and
    nothing of it left out to fit a time budget (a part thinned is measured again whole)."""
    failed = extra.get("failed") or []
    thinned = {s.get("part") for s in extra.get("skipped") or []
               if s.get("budget") and not s.get("guest_share")}      # a guest's share's: its own
    return {label for label in extra.get("part_seconds") or {}
            if label not in thinned
            and not any(line.startswith(f"{label}: ") for line in failed)}


@dataclass(frozen=True)
class Resume:
    """What a run to be resumed already holds."""

    run_id: int
    started: str                                  # when its first sitting began
    extra: dict                                   # the run's record as it was
    host: dict                                    # the host it was measured on
    done: frozenset[str]                          # this host's parts, whole
    # each linked guest run: (its id, its plan's name, its parts whole)
    guests: tuple[tuple[int, str, frozenset[str]], ...] = ()
    have: frozenset[Cell] = frozenset()           # the cipher cells it holds whole
    # run --again: the parts it held whole that are measured anew (their cipher tables too)
    again: frozenset[str] = frozenset()

    @classmethod
    def of(cls, store, run_id: str) -> "Resume":
        """Run ``run_id`` of ``store``, if it can be resumed (else a UserError saying why)."""
        run = store.run(run_id)
        extra = run.extra
        if run.status == "running":
            pid = (extra.get("owner") or {}).get("pid", "?")
            raise UserError(f"run {run.id} is still running (pid {pid}): it cannot be resumed "
                            "until it ends")
        if run.command != "run" or not extra.get("suite") or run.host.get("emulated"):
            raise UserError(f"run {run.id} is not a run of a suite or plan on this host "
                            f"({run.command}{', emulated' if run.host.get('emulated') else ''}):"
                            " --resume continues what 'cryptcost run' measured")
        if run.status not in RESUMABLE:
            raise UserError(f"run {run.id} is {run.status}: it cannot be resumed")
        guests = []
        for gid in extra.get("guest_runs") or []:
            try:
                g = store.run(str(gid))
            except UserError:                     # deleted since
                continue
            guests.append((g.id, str(g.extra.get("suite")), frozenset(whole_parts(g.extra))))
        have = frozenset(Cell.of(r) for r in store.results(run.id, "cipher")
                         if not r.get("incomplete"))
        return cls(run.id, run.started, extra, run.host, frozenset(whole_parts(extra)),
                   tuple(guests), have)

    def measure_again(self, asked: tuple[str, ...]) -> "Resume":
        """The run as if the parts of field reports ``asked`` (``run --again R1``) were not
        whole, here or in its guests: each is measured anew, what the run held of it dropped
        just before it begins (:meth:`Sitting.drop`). A report the run holds no whole part of
        is refused: ``--resume`` alone measures what a run lacks."""
        if not asked:
            return self
        theirs = {label for label in self.done | {p for _, _, d in self.guests for p in d}
                  if reports_of(label) & set(asked)}
        if not theirs:
            raise UserError(f"run {self.run_id} holds no part of {' or '.join(asked)} whole: "
                            "nothing to measure again (--resume alone measures what it lacks)")
        return replace(self, done=self.done - theirs, again=frozenset(theirs),
                       guests=tuple((gid, name, done - theirs)
                                    for gid, name, done in self.guests))

    def forget(self, cells: frozenset[Cell]) -> "Resume":
        """The run as if it held none of ``cells`` whole (the cipher tables of the parts it
        measures again)."""
        return replace(self, have=self.have - cells)

    def refuse_another_plan(self, plan: RunPlan) -> None:
        """The plan must be the run's: its name, and every part the run holds among its own."""
        if plan.name != self.extra.get("suite"):
            raise UserError(f"run {self.run_id} measured {_plan_said(self.extra['suite'])}, not "
                            f"{_plan_said(plan.name)}: resume it with the same --suite or --plan")
        # the cipher ceilings' own table is no part of a plan: run_plan adds it where needed
        stray = sorted(self.done - {p.label for p in plan.parts} - {ceilings.LABEL})
        if stray:
            raise UserError(f"run {self.run_id} holds parts this plan does not have "
                            f"({', '.join(stray)}): resume it with the plan it was run with")

    def refuse_another_host(self, host: dict) -> None:
        """The host must be the one the run was measured on: its name, CPU and kernel (a part
        measured elsewhere would sit beside the others as if from one machine)."""
        was, now = Host.of(self.host), Host.of(host)
        differ = [f"{what} {a} there, {b} here" for what, a, b in (
            ("host", was.hostname, now.hostname), ("CPU", was.cpu.model, now.cpu.model),
            ("usable CPUs", was.cpu.usable, now.cpu.usable), ("kernel", was.kernel, now.kernel))
            if a != b]
        if differ:
            raise UserError(f"run {self.run_id} was measured on another machine or kernel "
                            f"({'; '.join(differ)}): start a new run here")

    def tools_changed(self, host: dict) -> list[str]:
        """The measuring programs whose version changed since the run began (said, not
        refused)."""
        was, now = Host.of(self.host).tools, Host.of(host).tools
        return [f"{t} {was[t]} → {now[t]}" for t in sorted(set(was) & set(now))
                if was[t] != now[t]]

    def drop(self, plan: RunPlan) -> RunPlan:
        """``plan`` without the parts the run holds whole."""
        return replace(plan, parts=[p for p in plan.parts if p.label not in self.done],
                       cannot_run=[c for c in plan.cannot_run if c.get("part") not in self.done])

    def guest_done(self, plan_name: str) -> set[str]:
        """The parts of the guest share ``plan_name`` some linked guest run measured whole."""
        return set().union(*(done for _, name, done in self.guests if name == plan_name))

    def guest_runs_of(self, plan_name: str) -> list[int]:
        return [gid for gid, name, _ in self.guests if name == plan_name]

    def base(self, measuring: set[str], guests_run: bool,
             guest_parts: dict[str, list[str]] | None = None) -> dict:
        """What of the run's record this sitting's adds to: the times of its parts, and what
        it could not measure and what failed, for the parts this sitting does not measure again
        (a guest's failure stays unless this sitting boots the guest again). ``measuring`` is
        this host's parts; ``guest_parts`` each guest share's (by its plan's name), whose labels
        are often this host's too (R1's LUKS in the guest, its fscrypt here): a guest measuring
        its R1 takes nothing of this host's R1 from the record."""
        guest_parts = guest_parts or {}

        def stays(line: str) -> bool:
            if line.startswith("guest ("):
                return not guests_run
            return not any(line.startswith(f"{m}: ") for m in measuring)

        def kept(s: dict) -> bool:
            share = s.get("guest_share")
            return bool(s.get("part")) and s["part"] not in (
                guest_parts.get(share, ()) if share else measuring)
        extra = self.extra
        return {"skipped": [s for s in extra.get("skipped") or [] if kept(s)],
                "failed": [line for line in extra.get("failed") or [] if stays(line)],
                "guest_runs": list(extra.get("guest_runs") or []),
                "part_seconds": {k: v for k, v in (extra.get("part_seconds") or {}).items()
                                 if k not in measuring},
                "part_estimates": {k: v for k, v in (extra.get("part_estimates") or {}).items()
                                   if k not in measuring},
                "wall_seconds": extra.get("wall_seconds") or 0.0,
                "estimate_seconds": extra.get("estimate_seconds") or 0.0,
                "sittings": list(extra.get("sittings") or [_first_sitting(self.started, extra)])}


def again_cells(resume: Resume | None, part: CompiledPart) -> frozenset[Cell]:
    """The cells of ``part``'s cipher table when ``resume`` measures it again (``--again``)."""
    if resume is None or part.label not in resume.again or part.ciphers is None:
        return frozenset()
    return part.ciphers.cells()


def merged(base: dict, **now) -> dict:
    """This sitting's record of the run (``now``) after what it adds to (``base``): lists
    joined, dicts merged, seconds added; what ``base`` lacks as given."""
    out = dict(now)
    for key, value in now.items():
        if key not in base or value is None:
            continue
        was = base[key]
        if isinstance(was, list):
            out[key] = was + [v for v in value if v not in was]
        elif isinstance(was, dict):
            out[key] = {**was, **value}
        elif isinstance(was, (int, float)):
            out[key] = round(was + value, 1)
    return out


def _first_sitting(started: str, extra: dict) -> dict:
    """The first sitting of a run resumed for the first time, from its record (what it set out
    to measure is not recorded: the parts that ended are)."""
    return {"started": started, "wall_seconds": extra.get("wall_seconds"), "parts": None,
            "parts_ended": sorted(extra.get("part_seconds") or {})}


def _plan_said(name: str) -> str:
    return "a plan file" if name == "custom" else f"suite {name}"


@dataclass
class Sitting:
    """What one sitting of ``cryptcost run`` measures into its run, and what it adds to the
    run's record. Without ``resume`` (a run's first sitting) it records nothing of sittings and
    drops nothing."""

    resume: Resume | None
    started: str
    parts: list[str]                              # this host's parts it sets out to measure
    guest_parts: dict[str, list[str]]             # each guest share's, by its plan's name
    with_ciphers: frozenset[str]                  # its parts with a cipher table
    only_asked: tuple[str, ...] = ()
    tools_changed: tuple[str, ...] = ()
    dropped: dict[str, int] = field(default_factory=dict)     # results dropped, by part
    # run --again: the cipher cells of the parts measured anew, dropped as the sitting's first
    # part begins (another part's cipher table may measure one first, as a ceiling)
    again_cells: frozenset[Cell] = frozenset()
    parts_ended: list[str] = field(default_factory=list)     # its parts that ran to their end
    wall_seconds: float | None = None            # this host's share
    guests_seconds: float | None = None          # the guests' boots after it (run --vm)
    _base: dict | None = None

    @classmethod
    def of(cls, prepared, host: dict, ceilings_label: str) -> "Sitting":
        """The sitting of ``prepared`` (a :class:`cryptcost.suite.Prepared`) on ``host``."""
        plan, resume = prepared.plan, prepared.resume
        guest = {gp.share.plan.name: [p.label for p in gp.share.plan.parts]
                 for gp in prepared.guest} if prepared.vm else {}
        return cls(resume, now(), [p.label for p in plan.parts], guest,
                   frozenset({p.label for p in plan.parts if p.ciphers is not None}
                             | {ceilings_label}),
                   tuple(prepared.only),
                   tuple(resume.tools_changed(host)) if resume else (),
                   again_cells=frozenset().union(*(again_cells(resume, p)
                                                   for p in plan.parts)))

    def base(self) -> dict:
        """What of the run's record this sitting adds to (:meth:`Resume.base`); {} for a
        run's first."""
        if self._base is None:
            self._base = (self.resume.base(set(self.parts), bool(self.guest_parts),
                                           self.guest_parts) if self.resume else {})
        return self._base

    def only(self) -> list[str] | None:
        """The run's ``only`` after this sitting: every report once either sitting ran them
        all, else the reports of both."""
        if self.resume is None:
            return list(self.only_asked) or None
        was = self.resume.extra.get("only")
        return None if not was or not self.only_asked else sorted(set(was) | set(self.only_asked))

    def ended(self, so_far) -> dict:
        """The run's record after a part ended (``so_far``: the suite's outcome so far): the
        parts' times and estimates, and this sitting's."""
        self.parts_ended = list(so_far.part_seconds)
        return {"part_seconds": so_far.part_seconds, "part_estimates": so_far.part_estimates,
                **self.said()}

    def said(self) -> dict:
        """The run's ``sittings`` with this one (nothing for a run's first)."""
        if self.resume is None:
            return {}
        return {"sittings": [{"started": self.started, "parts": self.parts,
                              "parts_ended": self.parts_ended,
                              "guest_parts": self.guest_parts, "dropped_results": self.dropped,
                              "tools_changed": list(self.tools_changed),
                              "wall_seconds": self.wall_seconds,
                              **({"guests_seconds": self.guests_seconds}
                                 if self.guests_seconds is not None else {})}]}

    def drop(self, store, run_id: int, label: str) -> None:
        """Before part ``label`` begins: drop what the run held of it (a resumed run's), and
        at the sitting's first part the cipher cells of the parts it measures again."""
        if self.resume is not None:
            n = store.drop_part(run_id, label, ciphers=label in self.with_ciphers,
                                cells=self.again_cells)
            self.again_cells = frozenset()
            if n:
                self.dropped[label] = self.dropped.get(label, 0) + n

    def drop_guest(self, store, plan: CompiledPlan) -> None:
        """Before a guest measures ``plan`` (its share): drop what the run's earlier guest runs
        of that share held of its parts."""
        if self.resume is None:
            return
        for gid in self.resume.guest_runs_of(plan.name):
            for p in plan.parts:
                cells = again_cells(self.resume, p)
                n = store.drop_part(gid, p.label, ciphers=p.ciphers is not None, cells=cells)
                if n:
                    key = f"{p.label} (guest run {gid})"
                    self.dropped[key] = self.dropped.get(key, 0) + n

    def lines(self) -> list[str]:
        """What ``run`` says of the resumed run before it measures."""
        r = self.resume
        if r is None:
            return []
        sittings = len(r.extra.get("sittings") or [None])
        out = [f"resuming run {r.run_id} (begun {r.started}), its sitting {sittings + 1}: "
               + (f"whole there already: {', '.join(sorted(r.done))}" if r.done
                  else "no part whole there yet")
               + (f"; {len(r.have)} cipher cell(s) held whole are not measured again"
                  if r.have else "")]
        if r.again:
            out.append(f"  measured again, what the run held of each dropped as it begins "
                       f"(--again): {', '.join(sorted(r.again))}")
        if self.parts:
            out.append(f"  measured in this sitting: {', '.join(self.parts)}")
        for name in self.guest_parts:
            done = sorted(r.guest_done(name))
            if done:
                out.append(f"  {name}: whole in guest run(s) "
                           f"{', '.join(map(str, r.guest_runs_of(name)))}: {', '.join(done)}")
        if self.tools_changed:
            out.append("  measuring programs changed since it began (kept in the run's "
                       f"record): {'; '.join(self.tools_changed)}")
        return out
