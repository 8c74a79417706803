"""``cryptcost run --resume RUN``: a run cut short measures, in a later sitting, only the parts
it does not hold whole, into the same run; what it held of a part measured again is dropped
first; whole cipher cells are not measured again; a run from another host, another plan, or
still running is refused before anything is recorded."""

from __future__ import annotations

import json
import os
from dataclasses import replace
import subprocess

import pytest

from cryptcost import suite
from cryptcost.errors import UserError
from cryptcost.model import Cell
from cryptcost.runner.ciphers.executor import FakeExecutor, default_rate
from cryptcost.runner.core.scheduler import Progress
from cryptcost.runner.core.sink import StoreSink
from cryptcost.store.db import Store
from cryptcost.suite.resume import Resume, Sitting, merged, whole_parts
from cryptcost.suite import Asked, Hooks
from cryptcost.suite.compiled import CompiledPlan, compile_plan
from cryptcost.workloads.plan import Part, RunPlan


def _c(plan: RunPlan) -> CompiledPlan:
    return compile_plan(plan)[0]
from tests.conftest import ON_CI_MEMORY, assert_bad_input

ONE = Part("one", ciphers={"engines": ["openssl"], "algorithms": ["aes-256-gcm"],
                           "sizes": [4096]})
# two cells, both cut (the scheduler samples them in turn)
TWO = Part("two", ciphers={"engines": ["openssl"], "algorithms": ["aes-128-gcm"],
                           "sizes": [4096, 65536]})
POLICY = {"min_samples": 3, "max_samples": 3, "warmup": 0}
HOST = {"hostname": "h", "cpu": {"flags": {"aes": True}, "cores": 2, "model": "m"},
        "kernel": {"release": "6.1"}}


class Cut(Exception):
    pass


def _cutting_rate(after: int):
    """A fake rate that stops the run (as Ctrl-C does) at the ``after``-th sample of TWO's
    64 KiB cell."""
    seen = {"n": 0}

    def rate(cell: Cell) -> float:
        if cell.algorithm == "aes-128-gcm" and cell.buffer_bytes == 65536:
            seen["n"] += 1
            if seen["n"] == after:
                raise KeyboardInterrupt
        return default_rate(cell)
    return rate


def _sitting_one(store: Store) -> int:
    """A run of ONE and TWO cut during TWO, recorded as ``cryptcost run`` records it."""
    rid = store.begin_run("run", HOST)
    store.update_extra(rid, suite="custom")
    plan = _c(RunPlan("custom", parts=[ONE, TWO], policy=POLICY))
    with pytest.raises(KeyboardInterrupt):
        suite.run_plan(plan, sink=StoreSink(store, rid), host=HOST,
                       executor=FakeExecutor(rate=_cutting_rate(2)),
                       hooks=Hooks(progress=lambda w: Progress(),
                                   on_part=lambda so: store.update_extra(
                                       rid, part_seconds=so.part_seconds)))
    store.finish_run(rid, "interrupted")
    return rid


def test_a_resumed_run_measures_only_what_it_lacks_and_drops_its_cut_series(tmp_path):
    store = Store.open(tmp_path / "r.db")
    rid = _sitting_one(store)
    held = store.results(rid)
    cut = [r for r in held if r.get("incomplete")]
    assert len(cut) == 2 and all(r["algorithm"] == "aes-128-gcm" for r in cut), held
    resume = Resume.of(store, str(rid))
    assert resume.done == {"one"}
    # ONE's cell is whole; TWO's, cut, are not
    assert resume.have == {Cell.cipher("openssl", "aes-256-gcm", 4096, 1, True)}
    plan = _c(resume.drop(RunPlan("custom", parts=[ONE, TWO], policy=POLICY)))
    assert [p.label for p in plan.parts] == ["two"]

    store.resume_run(rid)
    fake = FakeExecutor()
    dropped = {}
    suite.run_plan(plan, sink=StoreSink(store, rid), host=HOST, executor=fake, have=resume.have,
                   hooks=Hooks(progress=lambda w: Progress(),
                               before_part=lambda label: dropped.setdefault(
                                   label, store.drop_part(rid, label, ciphers=True))))
    store.finish_run(rid, "complete")
    # only the cells the run lacked were measured; the cut series were dropped before
    assert sorted(fake.calls) == ["aes-128-gcm/4096/1/True"] * 3 + ["aes-128-gcm/65536/1/True"] * 3
    assert dropped == {"two": len(cut)}
    after = store.results(rid)
    assert not any(r.get("incomplete") for r in after)
    cells = [Cell.of(r) for r in after]
    assert len(cells) == len(set(cells)) == 3, cells         # one result a cell, none twice
    # ONE's result is the very one the first sitting stored
    assert [r for r in after if r["algorithm"] == "aes-256-gcm"] == \
        [r for r in held if r["algorithm"] == "aes-256-gcm"]
    # every series' samples are one sitting's: no index twice
    idx = [(json.dumps(s["series"], sort_keys=True), s["index"]) for s in store.samples(rid)]
    assert len(idx) == len(set(idx))
    # the report says the run was measured in sittings, and what that leaves unmeasured
    from cryptcost.report import document
    store.update_extra(rid, sittings=[{"started": "2026-11-29T23:31:12+00:00"},
                                      {"started": "2026-11-30T00:53:24+00:00",
                                       "tools_changed": ["fio 3.33 → 3.35"]}])
    env = dict(document.build(store.run(rid), store.results(rid), {}).environment)
    assert env["sittings"].startswith("2, begun 2026-11-29 23:31, 2026-11-30 00:53")
    assert "host's speed moved between sittings is not measured" in env["sittings"]
    assert env["sittings"].endswith("fio 3.33 → 3.35")


def test_again_measures_a_whole_part_anew_and_its_cipher_table_with_it(tmp_path):
    """run --resume RUN --again R1: a part the run holds whole (a noisy sitting's) is measured
    anew, its cipher cells too; what the run held of it is dropped as the sitting's first part
    begins, so the run holds one result a cell, the new one. A report the run holds no whole
    part of is refused."""
    from cryptcost.suite.resume import again_cells
    r1, r2 = replace(ONE, label="R1 one"), replace(TWO, label="R2 two")
    store = Store.open(tmp_path / "r.db")
    rid = store.begin_run("run", HOST)
    store.update_extra(rid, suite="seeds")
    loaded = RunPlan("seeds", parts=[r1, r2], policy=POLICY)
    plan = _c(loaded)
    suite.run_plan(plan, sink=StoreSink(store, rid), host=HOST, executor=FakeExecutor(),
                   hooks=Hooks(progress=lambda w: Progress(), on_part=lambda so: store.update_extra(
                       rid, part_seconds=so.part_seconds)))
    store.finish_run(rid, "complete")
    held = store.results(rid)
    assert len(held) == 3
    with pytest.raises(UserError, match="holds no part of R4 whole"):
        Resume.of(store, str(rid)).measure_again(("R4",))
    resume = Resume.of(store, str(rid)).measure_again(("R1",))
    assert resume.done == {"R2 two"} and resume.again == {"R1 one"}
    left = _c(resume.drop(loaded))
    assert [p.label for p in left.parts] == ["R1 one"]
    c1, c2 = plan.parts
    resume = resume.forget(again_cells(resume, c1))
    assert resume.have == {Cell.cipher("openssl", "aes-128-gcm", n, 1, True)
                           for n in (4096, 65536)}
    assert again_cells(resume, c2) == frozenset()
    sitting = Sitting(resume, "now", ["R1 one"], {}, frozenset({"R1 one"}),
                      again_cells=again_cells(resume, c1))
    store.resume_run(rid)
    fake = FakeExecutor(rate=lambda cell: 2 * default_rate(cell))     # the host moved
    suite.run_plan(left, sink=StoreSink(store, rid), host=HOST, executor=fake, have=resume.have,
                   hooks=Hooks(progress=lambda w: Progress(),
                               before_part=lambda label: sitting.drop(store, rid, label)))
    store.finish_run(rid, "complete")
    assert fake.calls == ["aes-256-gcm/4096/1/True"] * 3
    assert sitting.dropped == {"R1 one": 1} and sitting.again_cells == frozenset()
    after = store.results(rid)
    cells = [Cell.of(r) for r in after]
    assert len(cells) == len(set(cells)) == 3, cells
    new, = [r for r in after if r["algorithm"] == "aes-256-gcm"]
    was, = [r for r in held if r["algorithm"] == "aes-256-gcm"]
    assert new["median_bytes_per_s"] == pytest.approx(2 * was["median_bytes_per_s"], rel=0.05)
    assert [r for r in after if r["algorithm"] != "aes-256-gcm"] == \
        [r for r in held if r["algorithm"] != "aes-256-gcm"]
    idx = [(json.dumps(s["series"], sort_keys=True), s["index"]) for s in store.samples(rid)]
    assert len(idx) == len(set(idx))


def test_a_part_is_whole_when_it_ended_uncut_and_none_of_its_comparisons_failed():
    extra = {"part_seconds": {"a": 1.0, "b": 2.0, "c": 3.0},
             "failed": ["b: storage on 1 CPU(s): fio died", "guest (Linux 6.12): boot failed"]}
    assert whole_parts(extra) == {"a", "c"}
    assert whole_parts({}) == set()
    # a part a time budget thinned ended, and is measured again whole
    thinned = {**extra, "skipped": [{"part": "c", "stack": "rand4k", "budget": "left out to fit"},
                                    {"part": "a", "stack": "x", "reason": "no x"},
                                    {"part": "a", "stack": "r", "budget": "left out to fit",
                                     "guest_share": "seeds (guest)"}]}
    assert whole_parts(thinned) == {"a"}


def test_what_a_sitting_keeps_of_the_runs_record_and_what_it_adds():
    r = Resume(1, "2026-11-29T20:00:00+00:00", {
        "suite": "seeds", "part_seconds": {"a": 10.0, "b": 5.0}, "part_estimates": {"a": 8.0},
        "skipped": [{"part": "a", "stack": "x", "reason": "no x"},
                    {"part": "c", "stack": "the whole part", "reason": "budget"}],
        "failed": ["b: storage: died", "guest (Debian's stock kernel): killed"],
        "guest_runs": [7], "wall_seconds": 20.0, "estimate_seconds": 12.0}, HOST,
        frozenset({"a"}))
    base = r.base({"b", "c"}, guests_run=False)
    # what the parts measured again said is dropped; a guest's failure stays without a guest
    assert base["skipped"] == [{"part": "a", "stack": "x", "reason": "no x"}]
    assert base["failed"] == ["guest (Debian's stock kernel): killed"]
    assert r.base({"b", "c"}, guests_run=True)["failed"] == []
    assert base["part_seconds"] == {"a": 10.0}
    [first] = base["sittings"]
    assert first["parts_ended"] == ["a", "b"] and first["wall_seconds"] == 20.0
    now = merged(base, part_seconds={"b": 6.0}, wall_seconds=4.0, guest_runs=[9],
                 sittings=[{"started": "later"}], suite="seeds")
    assert now["part_seconds"] == {"a": 10.0, "b": 6.0}
    assert now["wall_seconds"] == 24.0 and now["guest_runs"] == [7, 9]
    assert [s["started"] for s in now["sittings"]] == [first["started"], "later"]
    assert now["suite"] == "seeds"
    # merging twice adds no list entry twice
    assert merged(base, skipped=base["skipped"])["skipped"] == base["skipped"]


def test_a_guest_measuring_a_part_of_the_same_label_takes_nothing_of_this_hosts_from_the_record():
    """R1 is whole here; a --vm sitting's guest measures its own R1 (LUKS and ZFS): this host's
    R1 keeps its time, its estimate and what it could not run, and stays whole; what a guest's
    budget left out of its R1 before is dropped (the guest's share says it again)."""
    r1, r3 = "R1 files", "R3 every stack"
    here_cut = {"part": r1, "stack": "luks", "reason": "no dm-crypt"}
    guest_cut = {"part": r1, "stack": "the whole part", "reason": "--until",
                 "budget": "--until", "guest_share": "seeds (guest)"}
    r = Resume(1, "2026-11-30T02:44:28+00:00", {
        "suite": "seeds", "part_seconds": {r1: 1895.0}, "part_estimates": {r1: 555.0},
        "skipped": [here_cut, guest_cut]}, HOST, frozenset({r1}))
    sitting = Sitting(r, "now", [r3], {"seeds (guest)": [r1]}, frozenset())
    base = sitting.base()
    assert base["part_seconds"] == {r1: 1895.0} and base["part_estimates"] == {r1: 555.0}
    assert base["skipped"] == [here_cut]
    assert whole_parts(merged(base, part_seconds={r3: 1952.0},
                              skipped=base["skipped"])) == {r1, r3}
    # the sitting's record: this host's time, then its guests' after them
    sitting.wall_seconds = 1952.0
    said = merged({**base, "sittings": [{"started": "then", "wall_seconds": 9.0}]},
                  **sitting.said())["sittings"]
    assert len(said) == 2 and "guests_seconds" not in said[1]
    sitting.guests_seconds = 1412.0
    last = merged(base, **sitting.said())["sittings"][-1]
    assert last["wall_seconds"] == 1952.0 and last["guests_seconds"] == 1412.0


def test_only_widens_to_every_report_once_a_sitting_ran_them_all():
    def only(was, asked):
        r = Resume(1, "t", {"suite": "seeds", "only": was}, HOST, frozenset())
        return Sitting(r, "now", [], {}, frozenset(), tuple(asked)).only()
    assert only(["R5"], ["R1"]) == ["R1", "R5"]
    assert only(["R5"], []) is None and only(None, ["R1"]) is None


def test_a_run_is_refused_when_it_is_still_running_or_no_suites_run(tmp_path):
    store = Store.open(tmp_path / "r.db")
    live = store.begin_run("run", HOST)                  # this process: alive
    store.update_extra(live, suite="custom")
    with pytest.raises(UserError, match="still running"):
        Resume.of(store, str(live))
    store.finish_run(live, "complete")
    other = store.begin_run("storage", HOST)
    store.finish_run(other, "interrupted")
    with pytest.raises(UserError, match="not a run of a suite"):
        Resume.of(store, str(other))
    r = Resume.of(store, str(live))
    with pytest.raises(UserError, match="measured a plan file, not suite seeds"):
        r.refuse_another_plan(RunPlan("seeds", parts=[ONE]))
    held = Resume(live, "t", {"suite": "custom"}, HOST, frozenset({"gone"}))
    with pytest.raises(UserError, match="parts this plan does not have"):
        held.refuse_another_plan(RunPlan("custom", parts=[ONE]))
    with pytest.raises(UserError, match="kernel 6.1 there, 6.12 here"):
        r.refuse_another_host({**HOST, "kernel": {"release": "6.12"}})
    r.refuse_another_host(dict(HOST))
    assert r.tools_changed({**HOST, "tools": {"fio": "3.35"}}) == []
    assert Resume(1, "t", {}, {**HOST, "tools": {"fio": "3.33"}}, frozenset()).tools_changed(
        {**HOST, "tools": {"fio": "3.35"}}) == ["fio 3.33 → 3.35"]


def _cryptcost(tmp_path, *args):
    env = {**os.environ, "XDG_DATA_HOME": str(tmp_path / "data"),
           "CRYPTCOST_STATE_DIR": str(tmp_path / "state")}
    return subprocess.run([*ON_CI_MEMORY, *args], capture_output=True,
                          text=True, env=env, timeout=300, cwd=tmp_path)


def _seeded_store(tmp_path, host: dict, **extra) -> Store:
    (tmp_path / "data" / "cryptcost").mkdir(parents=True, exist_ok=True)
    store = Store.open(tmp_path / "data" / "cryptcost" / "results.db")
    rid = store.begin_run("run", host)
    store.update_extra(rid, **extra)
    store.finish_run(rid, "interrupted")
    return store


def test_run_resume_refuses_bad_input_in_one_line(tmp_path, cli):
    assert_bad_input(cli("run", "--resume", "1", "--dry-run"))         # no store yet
    probe = json.loads(_cryptcost(tmp_path, "probe", "--json").stdout)
    _seeded_store(tmp_path, {**probe, "hostname": "elsewhere"}, suite="quick")
    _seeded_store(tmp_path, probe, suite="quick").close()
    for argv in (["--resume", "3"], ["--resume", "x"], ["--suite", "seeds", "--resume", "2"],
                 ["--resume", "1"], ["--parts", "p.json", "--resume", "2"], ["--again", "R1"],
                 ["--resume", "2", "--again", "R1"],
                 ["--suite", "seeds", "--resume", "2", "--again", "R9"]):
        done = cli("run", *argv, "--dry-run")
        assert_bad_input(done)
    assert "another machine" in cli("run", "--resume", "1", "--dry-run").stderr
    assert "suite quick, not suite seeds" in cli("run", "--suite", "seeds", "--resume", "2",
                                                 "--dry-run").stderr


def test_run_resume_plans_what_the_run_lacks_here_and_in_the_guest(tmp_path):
    probe = json.loads(_cryptcost(tmp_path, "probe", "--json").stdout)
    planned = json.loads(_cryptcost(tmp_path, "run", "--suite", "seeds", "--vm", "--dry-run",
                                    "--json").stdout)
    labels = [p["label"] for p in planned["parts"]]
    stock = next(g for g in planned["guest"] if g["kernel"] == "stock")
    r1, r2 = labels[0], labels[1]
    store = _seeded_store(tmp_path, {**probe, "hostname": "cc-guest",
                                     "emulated": {"why": "TCG"}},
                          suite="seeds (guest)", part_seconds={r1: 100.0})
    store.close()
    # a sitting that began with the cipher ceilings' own table (no part of the plan) times it too
    store = _seeded_store(tmp_path, probe, suite="seeds",
                          part_seconds={"cipher ceilings": 30.0, r1: 10.0, r2: 20.0,
                                        labels[2]: 5.0},
                          failed=[f"{labels[2]}: storage: died"], guest_runs=[1])
    store.close()
    done = _cryptcost(tmp_path, "run", "--suite", "seeds", "--vm", "--resume", "2",
                      "--dry-run", "--json")
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    assert got["resume"]["whole"] == sorted([r1, r2, "cipher ceilings"])
    assert [p["label"] for p in got["parts"]] == [x for x in labels if x not in (r1, r2)]
    assert got["resume"]["guest_whole"]["seeds (guest)"] == [r1]
    guest = next(g for g in got["guest"] if g["kernel"] == "stock")
    assert r1 not in [p["label"] for p in guest["parts"]]
    assert len(guest["parts"]) == len(stock["parts"]) - 1
    assert "resuming run 2" in done.stderr and f"whole there already: {r1}" in done.stderr
    # the run's failed part is measured again; a run holding every part has nothing to resume
    assert labels[2] in [p["label"] for p in got["parts"]]
    # another sitting may ask for other field reports: R5's parts alone, then
    done = _cryptcost(tmp_path, "run", "--suite", "seeds", "--only", "R5", "--resume", "2",
                      "--dry-run", "--json")
    assert done.returncode == 0, done.stderr
    assert [p["label"] for p in json.loads(done.stdout)["parts"]] == [labels[-1]]
    # --again R1: R1's part, whole here and in the guest, is measured anew in both
    done = _cryptcost(tmp_path, "run", "--suite", "seeds", "--vm", "--resume", "2", "--again",
                      "r1", "--dry-run", "--json")
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    assert got["resume"]["again"] == [r1] and got["resume"]["whole"] == sorted(
        ["cipher ceilings", r2])
    assert [p["label"] for p in got["parts"]] == [x for x in labels if x != r2]
    guest = next(g for g in got["guest"] if g["kernel"] == "stock")
    assert len(guest["parts"]) == len(stock["parts"]) and r1 in [p["label"]
                                                                 for p in guest["parts"]]
    assert got["resume"]["guest_whole"]["seeds (guest)"] == []
    assert f"measured again, what the run held of each dropped as it begins (--again): {r1}" \
        in done.stderr
    # R2 is whole here: a sitting of R2 alone has nothing for this host, and says so
    done = _cryptcost(tmp_path, "run", "--suite", "seeds", "--vm", "--only", "R2", "--resume", "2",
                      "--dry-run")
    assert done.returncode == 0, done.stderr
    assert "estimated time here: none: no part of this plan is left for this host (the " \
        "guests' shares follow)" in done.stderr and "about 0 s" not in done.stderr
    done = _cryptcost(tmp_path, "run", "--suite", "seeds", "--only", "R5", "--resume", "2",
                      "--again", "R1", "--dry-run")
    assert done.returncode == 2 and "--again names parts this sitting leaves out" in done.stderr
    done = _cryptcost(tmp_path, "run", "--suite", "seeds", "--resume", "2", "--again", "R4",
                      "--dry-run")
    assert done.returncode == 2 and "run 2 holds no part of R4 whole" in done.stderr
    store = _seeded_store(tmp_path, probe, suite="seeds",
                          part_seconds={x: 1.0 for x in labels})
    store.close()
    done = _cryptcost(tmp_path, "run", "--suite", "seeds", "--resume", "3", "--dry-run")
    assert done.returncode == 2 and "nothing to resume here; its guest's share is left (add " \
        "--vm)" in done.stderr, done.stderr


def test_a_cipher_table_leaves_out_the_cells_a_resumed_run_holds_whole():
    from cryptcost.runner.ciphers import CipherPlan, run_ciphers
    from cryptcost.stats import Policy
    held = Cell.cipher("openssl", "aes-256-gcm", 4096, 1, True)
    ceiling = Cell.cipher("openssl", "aes-128-gcm", 16, 1, True)
    plan = CipherPlan(engines=("openssl",), algorithms=("aes-256-gcm",), sizes=(4096, 16),
                      extra_cells=(ceiling, held))
    fake = FakeExecutor()
    got = run_ciphers(plan, fake, Policy(3, 3, 0.03, 0), measured=frozenset({held}))
    assert sorted({Cell.of(r.to_dict()) for r in got.results}, key=Cell.sort_key) == sorted(
        {held.but(buffer_bytes=16), ceiling}, key=Cell.sort_key)
    assert not any(c == "aes-256-gcm/4096/1/True" for c in fake.calls)
    # a table whose every cell is held measures nothing, and is no error
    every = CipherPlan(engines=("openssl",), algorithms=("aes-256-gcm",), sizes=(4096,))
    assert run_ciphers(every, FakeExecutor(), Policy(3, 3, 0.03, 0),
                       measured=frozenset({held})).results == []


def test_a_resumed_runs_report_measures_the_hosts_move_between_sittings():
    """Each sitting's parts carry the yardstick timed before their samples: the report says how
    far the host's CPU speed moved between sittings (a part measured again is the later
    sitting's), and says it is not measured where a sitting has no such result."""
    from cryptcost.record import Stored
    from cryptcost.report.document import _sittings, sitting_yardsticks
    from cryptcost.model import Run

    def stored(part: str, speed: float | None) -> Stored:
        return Stored.of({"kind": "storage", "stack": "plain", "workload": "seq-read",
                          "op": "read", "part": part, "median_bytes_per_s": 1.0,
                          "yardstick": speed})
    sittings = [{"started": "2026-11-29T23:31:12", "parts_ended": ["a", "b"]},
                {"started": "2026-11-30T00:53:24", "parts_ended": ["b", "c"]}]
    results = [stored("a", 1.0e9), stored("a", 1.2e9), stored("b", 5.0e9),
               stored("c", 1.21e9), stored("c", None), stored("x", 9e9)]
    assert sitting_yardsticks(sittings, results) == [1.1e9, pytest.approx((5.0e9 + 1.21e9) / 2)]
    run = Run(1, "2026-11-29T23:31:12", "run", {}, "complete", extra={"sittings": sittings})
    [(key, said)] = _sittings(run, results[:2] + results[3:4])
    assert key == "sittings" and "in sitting 1" in said and "in sitting 2" in said
    assert "the host's CPU speed moved 10% between sittings" in said, said
    assert "where its results' own medians spread 21%" in said, said
    [(_, said)] = _sittings(run, results[:2])
    assert "how far the host's speed moved between sittings is not measured" in said
    assert _sittings(Run(1, "s", "run", {}, "complete", extra={}), results) == []


def test_until_begins_no_part_that_would_end_later_and_thins_nothing(tmp_path):
    """run --until: a part whose planned time does not fit before it is left out whole at run
    time, a later shorter one still begins, no series is thinned (no deadline), and the part
    left out is not whole, so --resume measures it."""
    import time
    long = Part("long", ciphers={"engines": ["openssl"], "algorithms": ["aes-256-gcm"],
                                 "sizes": [4096, 16384, 65536, 262144]})
    short = Part("short", ciphers={"engines": ["openssl"], "algorithms": ["aes-128-gcm"],
                                   "sizes": [4096]})
    a = suite.estimate(_c(RunPlan("custom", parts=[long], policy=POLICY)))
    b = suite.estimate(_c(RunPlan("custom", parts=[short], policy=POLICY)))
    assert a > 2 * b > 0
    prepared = suite.Prepared(_c(RunPlan("custom", parts=[long, short], policy=POLICY)), {},
                              a + b, (1.0, 0), planned_s=a + b,
                              until=time.time() + (a + b) / 2, until_said="15:00")
    begin, left_out = prepared.until_fits(time.time())
    assert (begin, left_out) == (["short"], ["long"])
    assert prepared.from_now().deadline is None

    class Timed(FakeExecutor):
        """A fake whose jobs say they take a second each, as real ones say their time."""
        def cipher_jobs(self, engine, cells, seconds):
            return [replace(j, est_seconds=1.0) for j in super().cipher_jobs(engine, cells,
                                                                             seconds)]
    fake = Timed()
    a, b = (suite.estimate(_c(RunPlan("custom", parts=[x], policy=POLICY)), fake)
            for x in (long, short))
    assert a > 2 * b > 0
    clock = replace(prepared, until=time.time() + (a + b) / 2).from_now()
    assert clock.deadline is None and clock.spent_by.endswith("--until 15:00")
    store = Store.open(tmp_path / "u.db")
    rid = store.begin_run("run", HOST)
    got = suite.run_plan(prepared.plan, sink=StoreSink(store, rid), host=HOST, clock=clock,
                         executor=fake)
    assert set(got.part_seconds) == {"short"}
    [why] = got.skipped
    assert why["part"] == "long" and why["budget"] == why["reason"]
    assert "the time left before --until 15:00" in why["reason"]
    assert all(len(r.samples) == POLICY["max_samples"] for r in got.results)   # not thinned
    assert whole_parts({"part_seconds": got.part_seconds, "skipped": got.skipped}) == {"short"}
    # a run that left a part out does not calibrate later estimates
    from cryptcost.suite.budget import _shortened
    assert _shortened({"wall_seconds": 1.0, "skipped": got.skipped})
    # with a budget too, the earlier of the two ends the parts
    both = suite.Prepared(prepared.plan, {}, a + b, (1.0, 0), budget_s=1.0, planned_s=a + b,
                          until=time.time() + 3600, until_said="16:00")
    assert both.from_now().spent_by == "what was left of the --time-budget"
    store.close()


def test_run_until_says_what_would_begin_and_refuses_a_bad_time(tmp_path, cli):
    for bad in ("25:00", "soon", "-5m", "0"):
        assert_bad_input(cli("run", "--until", bad, "--dry-run"))
    assert "05:30" in cli("run", "--until", "x", "--dry-run").stderr
    done = _cryptcost(tmp_path, "run", "--suite", "quick", "--until", "1s", "--dry-run",
                      "--json")
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    assert got["until"] and got["until_begins"] == []
    said = " ".join(done.stderr.split())
    assert "--until 1s" in said and "no part of this host begins; left out quick" in said
    done = _cryptcost(tmp_path, "run", "--suite", "quick", "--until", "30h", "--dry-run",
                      "--json")
    got = json.loads(done.stdout)
    assert got["until_begins"] == [p["label"] for p in got["parts"]]


def test_parse_until_reads_a_time_of_day_or_a_duration():
    import time
    from cryptcost import units
    now = time.mktime((2026, 11, 30, 4, 0, 0, 0, 0, -1))
    assert units.parse_until("05:30", now) - now == 5400
    assert units.parse_until("03:30", now) - now == 23.5 * 3600     # tomorrow's
    assert units.parse_until("90m", now) - now == 5400
    with pytest.raises(UserError, match="05:30"):
        units.parse_until("24:00", now)


def test_a_guest_share_gets_what_is_left_before_until_after_its_boot(ci_memory):
    """Under --until each guest share is told the time left after its boot (--until Ns in the
    guest); a share that cannot hold even its shortest part is not booted, and each of its parts
    is left out as a time budget's would be, naming the share (so a later --resume runs it)."""
    import time
    prepared = suite.prepare(Asked("seeds", vm=True, until="1s"))
    assert prepared.guest
    gp = prepared.guest[0]
    left, cut = gp.until_cut(prepared.until, "1s", time.time())
    assert left < 0 and [c["part"] for c in cut] == [p.label for p in gp.share.plan.parts]
    assert all(c["guest_share"] == gp.share.plan.name and c["budget"] == c["reason"]
               and "--until 1s" in c["reason"] for c in cut)
    left, cut = gp.until_cut(time.time() + 30 * 3600, "30h", time.time())
    assert not cut and 29 * 3600 < left < 30 * 3600


def test_under_until_a_part_never_timed_is_planned_at_its_maximum(tmp_path, ci_memory):
    """With no run of the suite here to calibrate from, --until plans each part as if every
    series took its maximum (the model's minimum once ran 3.4 times short); a guest's share
    keeps the slowdown its host planned each part at."""
    from cryptcost.suite import guest
    plain = suite.prepare(Asked("seeds"))
    timed = suite.prepare(Asked("seeds", until="30h"))
    for p, q in zip(plain.plan.parts, timed.plan.parts):
        one = plain.plan.one(p)
        assert p.scale == 1.0
        assert q.scale == pytest.approx(suite.estimate(one, most=True) / suite.estimate(one))
    assert any(q.scale > 1.5 for q in timed.plan.parts)
    # a part its host planned at 6× under TCG stays at 6× in the guest
    share = _c(RunPlan("custom (guest)", parts=[replace(ONE, scale=6.0)], policy=POLICY))
    parts = tmp_path / "parts.json"
    parts.write_text(guest.to_json(share))
    assert suite.prepare(Asked(parts=str(parts), until="2h")).plan.parts[0].scale == 6.0


def test_a_vm_sitting_keeps_only_its_own_guests_budget_cuts_in_the_runs_record(
        tmp_path, monkeypatch, state_dir, ci_memory):
    """An earlier sitting's guest left R2 out under --until; this sitting's guest measures it.
    The run's record then no longer says R2 was left out: what a guest's budget left out is
    taken from the guest runs of this sitting, not again from every guest run linked before
    (which once put back each part the earlier guest had left out). ``--vm-cpus`` reaches the
    guest's boot."""
    import signal

    import cryptcost.guest as guest_mod
    from cryptcost.cli import main
    from cryptcost.guest import GuestOutcome
    probe = json.loads(_cryptcost(tmp_path, "probe", "--json").stdout)
    planned = json.loads(_cryptcost(tmp_path, "run", "--suite", "seeds", "--vm", "--dry-run",
                                    "--json").stdout)
    labels = [p["label"] for p in planned["parts"]]
    r2 = next(x for x in labels if x.startswith("R2"))
    cut = {"part": r2, "stack": "the whole part", "reason": "left out at run time: --until",
           "budget": "left out at run time: --until"}
    guest_host = {**probe, "hostname": "cc-guest", "emulated": {"why": "TCG"}}
    _seeded_store(tmp_path, guest_host, suite="seeds (guest)", skipped=[cut]).close()
    _seeded_store(tmp_path, probe, suite="seeds", part_seconds={x: 1.0 for x in labels},
                  guest_runs=[1], skipped=[{**cut, "guest_share": "seeds (guest)"}]).close()

    booted = []

    def measured_r2(res, argv, opts, log_dir, **kw):
        booted.append(opts)
        db = tmp_path / "guest.db"
        g = Store.open(db)
        rid = g.begin_run("run", guest_host)
        g.update_extra(rid, suite="seeds (guest)", part_seconds={r2: 5.0}, skipped=[])
        g.finish_run(rid, "complete")
        g.close()
        return GuestOutcome(0, None, tmp_path / "console.log", db, 5.0, {"why": "TCG"})
    monkeypatch.setattr(guest_mod, "run_guest", measured_r2)
    db = tmp_path / "data" / "cryptcost" / "results.db"
    before = signal.getsignal(signal.SIGTERM)
    try:
        rc = main(["--db", str(db), "run", "--suite", "seeds", "--vm", "--only", "R2",
                   "--resume", "2", "--no-report", "--vm-cpus", "1"])
    finally:
        signal.signal(signal.SIGTERM, before)
        signal.signal(signal.SIGHUP, signal.SIG_DFL)
    assert rc == 0 and [o.cpus for o in booted] == [1]
    store = Store.open(db, create=False)
    extra = store.run("2").extra
    assert extra["guest_runs"] == [1, 3]
    assert not [s for s in extra["skipped"] if s.get("part") == r2 and s.get("budget")], \
        extra["skipped"]
    assert extra["sittings"][-1]["guests_seconds"] >= 0
