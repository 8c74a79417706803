"""Fitting a plan into --time-budget, and calibrating the estimate from earlier runs."""

import statistics
from dataclasses import replace

import pytest

from cryptcost.errors import UserError
from cryptcost.model import Run
from cryptcost.runner.ciphers.executor import FakeExecutor
from cryptcost.suite import Asked, Calibration, Clock
from cryptcost.suite.budget import UNCALIBRATED_GUEST, calibration, fit, guest_scale
from cryptcost.suite.compiled import CompiledPlan, compile_plan, policy_of
from cryptcost.workloads.plan import SUITES, Part, RunPlan
from tests.conftest import assert_bad_input


def _c(plan: RunPlan) -> CompiledPlan:
    return compile_plan(plan)[0]


def _plan() -> CompiledPlan:
    return _c(RunPlan("standard", parts=[
        Part("one", ciphers={"sizes": [512, 4096, 65536], "threads": [1, 2]},
             storage={"stacks": ["all"], "workloads": ["seq-quick", "rand4k", "smallfiles"]},
             network={"stacks": ["tls"], "workloads": ["send"]}),
        Part("two", storage={"stacks": ["all"], "workloads": ["bigfile"]})],
        policy={"min_samples": 3, "max_samples": 6}))


class _Timed(FakeExecutor):
    """A fake whose jobs say they take a second each, as real ones say their time."""
    def cipher_jobs(self, engine, cells, seconds):
        return [replace(j, est_seconds=1.0) for j in super().cipher_jobs(engine, cells, seconds)]


def _estimate(plan: CompiledPlan) -> float:
    """A model where the network costs 300 s, each storage workload 100 s, each cipher cell 10 s."""
    total = 0.0
    for p in plan.parts:
        if p.network:
            total += 300
        if p.storage:
            total += 100 * len(p.storage[0].workloads)
        if p.ciphers:
            total += 10 * len(p.ciphers.sizes) * len(p.ciphers.threads)
    return total * plan.policy.min_samples / 3


def test_a_plan_that_fits_is_left_alone():
    whole = _plan()
    plan, seconds = fit(whole, 10_000, _estimate)
    assert plan is whole and seconds == _estimate(_plan())


def test_the_fitted_plan_fits_and_says_what_was_left_out():
    plan, seconds = fit(_plan(), 500, _estimate)
    assert seconds <= 500 and seconds == _estimate(plan)
    left = [(c["part"], c["what"]) for c in plan.cannot_run]
    assert ("two", "the whole part") in left
    # a whole part's cut says what it measured: its cipher table, its cells' workloads
    [two] = [c for c in plan.cannot_run if c["part"] == "two"]
    assert two["ciphers"] is False and [w.startswith("bigfile-") for w in two["workloads"]] == \
        [True] * 3
    assert all(
        "--time-budget 8.3 min" in c["reason"] and "whole plan: about 12.7 min" in c["reason"]
        for c in plan.cannot_run
    )
    assert [p.label for p in plan.parts] == ["one"]


def test_every_part_is_thinned_before_a_later_part_goes_whole_and_unneeded_cuts_come_back():
    """760 s into 560: part one's last two workloads (100 s each) go, and part two keeps its
    cells (a suite's part is often one report's table: a thinner table rather than none); the
    cut taken first, no extra samples beyond the minimum, does not change the estimate and is
    given back."""
    plan, seconds = fit(_plan(), 560, _estimate)
    assert [(c["part"], c["what"]) for c in plan.cannot_run] == [
        ("one", "storage workloads smallfiles"),
        ("one", "storage workloads rand4k"),
    ]
    assert [p.label for p in plan.parts] == ["one", "two"]
    assert plan.policy == policy_of({"min_samples": 3, "max_samples": 6})
    assert seconds == pytest.approx(560)
    # each part is thinned in turn, the latest first, one dimension at a time
    two = replace(_plan(), parts=[_plan().parts[0], _c(RunPlan("standard", parts=[Part(
        "two", storage={"stacks": ["all"], "workloads": ["bigfile", "seq-quick"]})])).parts[0]])
    plan, _ = fit(two, 760, _estimate)
    assert [(c["part"], c["what"]) for c in plan.cannot_run] == [
        ("two", "storage workloads seq-quick")]


def test_what_a_part_keeps_is_thinned_after_every_other_dimension_and_reaches_the_guest():
    """R5's directions are its table's columns: a part that keeps its workloads loses its
    second CPU count first, though CPU counts are otherwise thinned after workloads; the guest's
    share carries what it keeps."""
    from cryptcost.suite.guest import from_json, to_json
    both = Part("five", network={"stacks": ["tls"], "workloads": ["send", "receive"],
                                 "cpus": [1, 2]})
    plan = RunPlan("p", parts=[both], policy={"min_samples": 3, "max_samples": 3})

    def cells(p: CompiledPlan) -> float:
        return sum(len(x.network[0].workloads) * len(x.network) for x in p.parts)
    fitted, _ = fit(_c(plan), 2, cells)
    assert [c["what"] for c in fitted.cannot_run] == ["network workloads receive"]
    kept = _c(replace(plan, parts=[replace(both, keep=("network.workloads",))]))
    fitted, _ = fit(kept, 2, cells)
    assert [c["what"] for c in fitted.cannot_run] == ["network cpus 2"]
    assert from_json(to_json(kept), "parts.json").parts[0].keep == ("network.workloads",)


def test_two_samples_only_after_every_cell_that_can_go_has_gone():
    """A 95 % interval from two samples is about ten times wider than from three: a budget the
    plan fits with fewer cells keeps three samples (410 s with every value cut); below that,
    two samples, with as many cells given back as then fit."""
    plan, _ = fit(_plan(), 420, _estimate)
    assert plan.policy.min_samples == 3 and "samples beyond two" not in [
        c["what"] for c in plan.cannot_run
    ]
    assert plan.parts[0].storage[0].workloads == ("seq-quick",) and plan.parts[0].network
    plan, seconds = fit(_plan(), 300, _estimate)
    assert plan.policy.min_samples == 2 and seconds <= 300
    assert "samples beyond two" in [c["what"] for c in plan.cannot_run]


def test_a_budget_nothing_fits_is_refused():
    with pytest.raises(UserError, match="too short"):
        fit(_plan(), 5, _estimate)


def test_calibration_is_the_median_of_earlier_runs_of_the_suite_here():
    def run(i, suite, wall, est, host="h", status="complete"):
        return Run(id=i, started="", command="run", host={"hostname": host}, status=status,
                   extra={"suite": suite, "wall_seconds": wall, "estimate_seconds": est})
    runs = [run(1, "quick", 300, 200), run(2, "quick", 390, 300), run(3, "quick", 500, 250),
            run(4, "standard", 999, 1), run(5, "quick", 999, 1, host="other"),
            run(6, "quick", 999, 1, status="interrupted")]
    assert calibration(runs, "quick", "h") == (1.5, 3)
    # a budget that shortened a run leaves it out: past its deadline, or with a cut
    budgeted = [run(7, "quick", 999, 1), run(8, "quick", 999, 1), run(9, "quick", 600, 200)]
    budgeted[0].extra["time_budget"] = 1000                       # 999 s: past 85 % of it
    budgeted[1].extra.update(time_budget=9000, skipped=[{"budget": "left out to fit"}])
    budgeted[2].extra["time_budget"] = 9000                       # never near its deadline
    assert calibration(runs + budgeted, "quick", "h") == (statistics.median([3, 1.5, 1.3, 2]), 4)
    assert calibration([], "quick", "h") == (1.0, 0)
    # a guest's share with no earlier run of its plan is planned at the emulation's slowdown
    assert guest_scale((1.0, 0)) == UNCALIBRATED_GUEST and guest_scale((3.2, 2)) == 3.2


def test_time_budget_in_a_dry_run(cli, tmp_path):
    # The standard suite on 64 MiB media: its 17 media of 512 MiB would need
    # 17 GiB of available memory, which a dry run checks and a test should not depend on.
    plan = tmp_path / "standard-small.toml"
    plan.write_text('[run]\nsuite = "standard"\n\n[storage]\nsize = "64M"\n')
    done = cli("run", "--plan", str(plan), "--dry-run", "--time-budget", "10m")
    assert done.returncode == 0, done.stderr
    assert "left out to fit --time-budget 10.0 min" in done.stderr
    assert_bad_input(cli("run", "--dry-run", "--time-budget", "soon"))
    assert_bad_input(cli("run", "--dry-run", "--time-budget", "1s"))


def test_a_run_is_prepared_once_and_its_deadline_starts_when_it_runs(tmp_path):
    """``suite.prepare`` builds the one typed plan ``cryptcost run`` hands down: loaded, cut to
    this host, validated, fitted to the budget with the calibration asked for once, estimated;
    the budget's deadline is set only when the run starts."""
    import time

    from cryptcost import suite
    plan = tmp_path / "small.toml"
    plan.write_text('[run]\nsuite = "standard"\n\n[storage]\nsize = "64M"\n')
    asked = []

    class Calibrated(Calibration):
        def factor(self, name, guest=False):
            asked.append((name, guest))
            return 1.5, 2
    calibrate = Calibrated()
    whole = suite.prepare(Asked(None, str(plan), device_speed="3GB/s"), calibrate)
    # the guest's share of it, if any, is calibrated on the guest's runs
    assert asked[0] == ("standard", False) and set(asked[1:]) <= {
        ("standard (guest)", True), ("standard (guest, Linux 6.12)", True)}
    assert whole.factor == (1.5, 2) and whole.budget_s is None
    assert whole.model == {"device_speed": "3GB/s"} and whole.from_now() == Clock(scale=1.5)
    fitted = suite.prepare(Asked(None, str(plan), time_budget="10m"), calibrate)
    assert fitted.budget_s == 600 and fitted.seconds * 1.5 <= 600
    assert whole.seconds * 1.5 <= 600 or any(c.get("budget") for c in fitted.plan.cannot_run)
    before = time.monotonic()
    deadline = fitted.from_now().deadline
    assert before + 0.85 * 600 <= deadline <= time.monotonic() + 0.85 * 600
    assert fitted.plan.policy.deadline is None  # the prepared plan is not changed
    with pytest.raises(UserError, match="--time-budget"):
        suite.prepare(Asked(None, str(plan), time_budget="soon"))
    with pytest.raises(UserError):
        suite.prepare(Asked(None, str(plan), link="fast"))


def test_run_profile_gives_every_storage_and_network_table_its_profiled_round(
    tmp_path, monkeypatch
):
    """``run --profile``: each storage and network table of the plan is profiled; the estimate
    counts a round of its own only where there is no warm-up round to profile. The built-in
    suites profile already, and so does a plan whose tables do not say, where a warm-up round
    can be watched and the CPU is not emulated; ``--no-profile`` leaves every table
    unprofiled. A plan asking for it on a host where perf cannot sample runs without it and
    says why (its verdicts rest on the ceilings); the flag itself refuses there."""
    from cryptcost.engines import perf
    from cryptcost.errors import Unavailable
    from cryptcost import suite
    plan = tmp_path / "small.toml"
    off = ('[run]\nsuite = "quick"\n\n[storage]\nsize = "64M"\nprofile = false\n\n'
           '[network]\nprofile = false\n')
    plan.write_text(off)
    monkeypatch.setattr(perf, "require", lambda: None)

    def tables(prepared):
        return [t for p in prepared.plan.parts for t in (*p.storage, *p.network)]
    for name in SUITES:                                              # every suite's own
        assert all(t.profile for t in tables(suite.prepare(Asked(name, None)))), name
    plain = suite.prepare(Asked(None, str(plan)))
    profiled = suite.prepare(Asked(None, str(plan), profile=True))
    assert tables(profiled) and all(t.profile for t in tables(profiled))
    assert not any(t.profile for t in tables(plain))
    assert profiled.seconds == plain.seconds                         # its warm-up round is profiled
    silent = tmp_path / "silent.toml"                  # a plan that says nothing: profiled
    silent.write_text(off.replace("profile = false\n", ""))
    assert tables(suite.prepare(Asked(None, str(silent)))) and all(
        t.profile for t in tables(suite.prepare(Asked(None, str(silent)))))
    assert not any(t.profile
                   for t in tables(suite.prepare(Asked(None, str(silent), profile=False))))
    assert not any(t.profile for t in tables(suite.prepare(Asked("quick", None, profile=False))))
    # by default only where the profile costs nothing (a warm-up round to watch) and says
    # something of this hardware (not in an emulated guest)
    bare = tmp_path / "bare.toml"
    bare.write_text('[storage]\nstacks = ["plain"]\nworkloads = ["seq-1m"]\nsize = "64M"\n')
    assert all(t.profile for t in tables(suite.prepare(Asked(None, str(bare)))))
    bare.write_text(bare.read_text() + "\n[policy]\nwarmup = 0\n")
    assert not any(t.profile for t in tables(suite.prepare(Asked(None, str(bare)))))
    assert all(t.profile for t in tables(suite.prepare(Asked(None, str(bare), profile=True))))
    assert perf.wanted(None, warmup=0) == (False, perf.by_default(0)[1])
    assert "--warmup 0" in perf.by_default(0)[1]
    from cryptcost.host import probe
    monkeypatch.setattr(probe, "emulation", lambda: {"accel": "tcg"})
    assert perf.by_default(1)[0] is False and "emulated" in perf.by_default(1)[1]
    monkeypatch.setattr(probe, "emulation", lambda: None)
    plan.write_text(off + "\n[policy]\nwarmup = 0\n")
    assert (
        suite.prepare(Asked(None, str(plan), profile=True)).seconds
        > suite.prepare(Asked(None, str(plan))).seconds
    )

    def missing():
        raise Unavailable("perf is not installed", install="linux-perf")
    monkeypatch.setattr(perf, "require", missing)
    with pytest.raises(UserError, match="perf is not installed"):
        suite.prepare(Asked(None, str(plan), profile=True))
    asked = suite.prepare(Asked("quick", None))
    assert not asked.plan.parts[0].storage[0].profile
    [why] = [c for c in asked.plan.cannot_run if c["what"] == "storage profile"]
    assert "perf is not installed" in why["reason"] and why["install"] == "linux-perf"


def test_the_estimate_has_an_upper_bound_with_every_series_at_its_cap():
    """A step's series sample together until each is stable or at the cap: the most a plan can
    take counts every series at its maximum, and equals the least when the two are one."""
    from cryptcost.suite import estimate
    part = Part("one", ciphers={"algorithms": ["aes-256-gcm"], "sizes": [4096]})
    loose = _c(RunPlan("custom", parts=[part], policy={"min_samples": 3, "max_samples": 10}))
    tight = _c(RunPlan("custom", parts=[part], policy={"min_samples": 3, "max_samples": 3}))
    fake = FakeExecutor()
    assert estimate(loose, fake, most=True) == pytest.approx(
        estimate(loose, fake) * (1 + 10) / (1 + 3), rel=0.01)       # one warm-up round each
    assert estimate(tight, fake, most=True) == pytest.approx(estimate(tight, fake))


def test_with_the_guests_the_budget_is_shared_in_proportion_and_each_share_fitted():
    """run --vm --time-budget: this host's plan and each guest's share get parts of the budget
    in proportion to their whole estimates (a guest's with its boot); each is fitted to its own
    part, and what a guest's share leaves out says it was the guest's."""
    from cryptcost.suite.budget import GUEST_BOOT_SECONDS, split
    host, guest = _plan(), _plan()
    tenfold = lambda p: 10 * _estimate(p)                                    # noqa: E731
    # whole: 760 s here and 7600 + boot there; the budget fits it all: nothing is cut
    whole = 760 + 7600 + GUEST_BOOT_SECONDS
    (fitted, mine), [(g, given)] = split(host, [guest], whole * 2, _estimate, [tenfold])
    assert fitted == host and g == guest and mine == 760 * 2
    assert given == pytest.approx((7600 + GUEST_BOOT_SECONDS) * 2)
    (fitted, mine), [(g, given)] = split(host, [guest], whole / 2, _estimate, [tenfold])
    assert mine + given == pytest.approx(whole / 2)
    assert _estimate(fitted) <= mine and tenfold(g) <= given - GUEST_BOOT_SECONDS
    assert fitted.cannot_run and g.cannot_run
    assert all("this host's" in c["reason"] and "--time-budget" in c["reason"]
               for c in fitted.cannot_run)
    assert all("the guest's" in c["reason"] for c in g.cannot_run)
    # nothing for this host: the guest has it all
    none, [(g, given)] = split(None, [guest], 4000, _estimate, [tenfold])
    assert none is None and given == 4000 and tenfold(g) <= 4000 - GUEST_BOOT_SECONDS
    with pytest.raises(UserError, match="does not cover its boot"):
        split(host, [guest], 100, _estimate, [tenfold])
    # parts go whole, so a cut share leaves some of its part unused; that goes to the others:
    # this host's two parts of 500 s in 1500 × 1000 / 2120 = 708 s run one, leaving 208 s; the
    # guest's ten of 100 s in 792 s less its boot fit six, leaving 72 s; with the 280 s, eight
    def parts(n):
        return _c(RunPlan("p", parts=[Part(f"p{i}", ciphers={"sizes": [4096]})
                                      for i in range(n)],
                          policy={"min_samples": 2, "max_samples": 2}))
    (fitted, mine), [(g, given)] = split(
        parts(2), [parts(10)], 1500, lambda p: 500.0 * len(p.parts),
        [lambda p: 100.0 * len(p.parts)])
    assert len(fitted.parts) == 1 and len(g.parts) == 8
    assert mine + given <= 1500 + 1e-6 and mine >= 500        # what one handed on is not its own
    assert 500 + 800 + GUEST_BOOT_SECONDS <= 1500 and given >= 800 + GUEST_BOOT_SECONDS


def test_a_share_smaller_than_its_smallest_plan_gets_that_much_and_the_others_the_rest():
    """In proportion, this host's share of 3000 s would be less than its smallest plan (one part
    of one workload, two samples: 67 s). It gets at least that, the guest the rest; a budget
    below both smallest plans is refused, naming the share and the budget."""
    from cryptcost.suite.budget import GUEST_BOOT_SECONDS, smallest, split
    host = _c(RunPlan("p", parts=[Part("a", storage={"stacks": ["all"],
                                                     "workloads": ["seq-quick", "rand4k"]}),
                                  Part("b", storage={"stacks": ["all"],
                                                     "workloads": ["seq-quick"]})],
                      policy={"min_samples": 3, "max_samples": 3}))
    guest = _plan()
    floor = smallest(host, _estimate)
    assert floor == pytest.approx(100 * 2 / 3)
    tenfold = lambda p: 25 * _estimate(p)                                    # noqa: E731
    whole = _estimate(host) + tenfold(guest) + GUEST_BOOT_SECONDS
    assert _estimate(host) / whole * 3000 < floor
    (fitted, mine), [(g, given)] = split(host, [guest], 3000, _estimate, [tenfold])
    assert mine >= floor - 1e-3 and mine + given == pytest.approx(3000)
    assert _estimate(fitted) <= mine and tenfold(g) <= given - GUEST_BOOT_SECONDS
    with pytest.raises(UserError, match=r"--time-budget 40 s \(this host's share: \d+ s\) is "
                                        "too short"):
        split(host, [guest], 40, _estimate, [lambda p: 0.001 * _estimate(p)])


def test_each_part_is_planned_at_what_earlier_runs_of_that_part_took_against_its_estimate():
    """Under TCG one guest share's parts ran at 1.2 and at 7 times their estimates: each part's
    slowdown is the median of its own last runs' (time over estimate, where both were
    recorded), a part never timed takes the share's; the guest is told each."""
    from cryptcost.suite.budget import part_factors, scaled, with_scales
    from cryptcost.suite.guest import from_json, to_json

    def run(i, took, est, suite="seeds (guest)", host="cc-guest"):
        return Run(id=i, started="", command="run", host={"hostname": host}, status="complete",
                   extra={"suite": suite, "part_seconds": took, "part_estimates": est})
    runs = [run(1, {"wan": 380, "ipcomp": 110}, {"wan": 54, "ipcomp": 95}),
            run(2, {"wan": 350}, {"wan": 50}),
            run(3, {"wan": 999}, {}),                          # no estimate: not a guide
            run(4, {"wan": 1}, {"wan": 100}, suite="quick"),
            run(5, {"wan": 1}, {"wan": 100}, host="elsewhere")]
    factors = part_factors(runs, "seeds (guest)", "cc-guest")
    assert factors == {"wan": pytest.approx(statistics.median([380 / 54, 7.0])),
                       "ipcomp": pytest.approx(110 / 95)}
    plan = with_scales(_c(RunPlan("seeds (guest)", parts=[Part("wan", ciphers={}),
                                                          Part("ipcomp", ciphers={}),
                                                          Part("new", ciphers={})])),
                       factors, 6.0)
    assert [p.scale for p in plan.parts] == [factors["wan"], factors["ipcomp"], 6.0]
    assert scaled(lambda p: 100.0 * len(p.parts))(plan) == pytest.approx(
        100 * (factors["wan"] + factors["ipcomp"] + 6))
    back = from_json(to_json(plan), "parts.json")
    assert [p.scale for p in back.parts] == [p.scale for p in plan.parts]
    with pytest.raises(UserError, match="scale must be a positive number"):
        from_json(to_json(plan).replace('"scale": 6.0', '"scale": -1'), "parts.json")


def test_no_part_begins_that_the_time_left_cannot_hold(tmp_path):
    """At run time, a part whose estimate (× the planned slowdown) the budget's time left cannot
    hold is left out, and the run says so; a later, shorter part that fits still runs."""
    import time

    from cryptcost import suite
    from cryptcost.runner.core.scheduler import Progress
    from cryptcost.runner.core.sink import Sink
    from cryptcost.suite import estimate
    long = Part("long", ciphers={"engines": ["openssl"],
                                 "algorithms": ["aes-256-gcm", "aes-128-gcm"],
                                 "sizes": [16, 4096, 65536]})
    short = Part("short", ciphers={"engines": ["openssl"], "algorithms": ["aes-256-gcm"],
                                   "sizes": [4096]})
    policy = {"min_samples": 3, "max_samples": 3, "warmup": 0}

    fake = _Timed()
    a, b = (estimate(_c(RunPlan("custom", parts=[x], policy=policy)), fake)
            for x in (long, short))
    assert a > 2 * b
    host = {"cpu": {"flags": ["aes"], "cores": 2}}

    def run(left: float, scale: float = 1.0):
        plan = _c(RunPlan("custom", parts=[long, short], policy=policy))
        return suite.run_plan(plan, sink=Sink(), host=host,
                              clock=Clock(spent=time.monotonic() + left, scale=scale),
                              hooks=suite.Hooks(progress=lambda w: Progress()),
                              executor=_Timed())
    whole = run(3600)
    assert set(whole.part_seconds) == {"long", "short"} and not whole.skipped
    some = run((a + b) / 2)
    assert set(some.part_seconds) == {"short"}
    [why] = some.skipped
    assert why["part"] == "long" and why["stack"] == "the whole part"
    assert "could not hold its estimate" in why["reason"] and why["budget"] == why["reason"]
    none = run((a + b) / 2, scale=10)                 # planned ten times slower: neither fits
    assert not none.results and [s["part"] for s in none.skipped] == ["long", "short"]
    # each part's estimate is recorded beside its time, for the next plan's per-part slowdown
    assert whole.part_estimates == {"long": round(a, 1), "short": round(b, 1)}
    # a part's own slowdown wins over the run's: the long part planned at a tenth runs
    long = replace(long, scale=0.1)
    mine = run((a + b) / 2, scale=10)
    assert set(mine.part_seconds) == {"long"}, mine.skipped
    # what the plan's fitting left out stays marked as the budget's in the run's record
    cut = {"part": "third", "what": "the whole part", "budget": "left out to fit", "detail": "",
           "reason": "left out to fit"}
    plan = _c(RunPlan("custom", parts=[short], policy=policy, cannot_run=[cut]))
    told = suite.run_plan(plan, sink=Sink(), host=host, executor=_Timed())
    assert told.skipped == [{"stack": "the whole part", "reason": "left out to fit",
                             "install": None, "part": "third", "budget": "left out to fit"}]
    # a part left out at run time says what it measures, for the report to tell its rows
    assert some.skipped[0]["ciphers"] is True and some.skipped[0]["workloads"] == []


def test_a_guests_share_fitted_by_its_host_is_not_fitted_again(tmp_path):
    """The guest runs its share as the host fitted it: told the slowdown it was planned at, it
    only holds the parts to the budget as they run (its own estimate, under its own kernel,
    may differ by seconds, which once cut a whole part); without it, a plan is fitted."""
    from cryptcost import suite
    from cryptcost.suite import guest
    plan = _c(RunPlan("custom (guest)", parts=[
        Part("one", ciphers={"engines": ["openssl"], "algorithms": ["aes-256-gcm"],
                             "sizes": [4096]}),
        Part("two", ciphers={"engines": ["openssl"], "algorithms": ["aes-128-gcm"],
                             "sizes": [4096]})], policy={"min_samples": 3, "max_samples": 3}))
    parts = tmp_path / "parts.json"
    parts.write_text(guest.to_json(plan))
    whole = suite.prepare(Asked(parts=str(parts))).seconds
    told = suite.prepare(Asked(parts=str(parts), time_budget=f"{whole * 3:.0f}s",
                               budget_scale=6.0))
    assert [p.label for p in told.plan.parts] == ["one", "two"] and told.scale == 6.0
    assert told.from_now().scale == 6.0
    fitted = suite.prepare(Asked(parts=str(parts), time_budget=f"{whole * 0.6:.0f}s"))
    assert [p.label for p in fitted.plan.parts] == ["one"]


def test_the_cipher_ceilings_are_planned_whatever_a_budget_cuts(tmp_path):
    """The stacks' cipher ceilings run before the first part (rule 8), so a budget plans their
    time whole: a host share of 7.1 min once lost its only part at run time to the ceilings'
    two minutes. A guest's share plans its own kernel's."""
    from cryptcost import suite
    from cryptcost.suite import budget, timing
    from cryptcost.suite.ceilings import light_host
    plan_file = tmp_path / "p.toml"
    plan_file.write_text('[storage]\nstacks = ["gocryptfs"]\nworkloads = ["seq-quick"]\n'
                         'size = "64M"\n')
    prepared = suite.prepare(Asked(None, str(plan_file)))
    ceil = timing.ceilings(prepared.plan, light_host())
    assert ceil > 0
    assert prepared.seconds == pytest.approx(suite.estimate(prepared.plan) + ceil)
    assert prepared.planned_s == pytest.approx(prepared.seconds)
    # a budget that would hold the smallest plan without the ceilings is not taken for one that
    # fits it
    smallest = budget.smallest(prepared.plan, suite.estimate)
    short = smallest + min(ceil, suite.estimate(prepared.plan) - smallest) / 2
    assert short > 10 and suite.estimate(prepared.plan) > short and smallest + ceil > short
    with pytest.raises(UserError, match="too short"):
        suite.prepare(Asked(None, str(plan_file), time_budget=f"{short:.0f}s"))


def test_the_cipher_ceilings_run_first_and_once_whatever_the_budget_leaves_out(monkeypatch):
    """The stacks' ceilings are measured before anything a budget may leave out (as the plan's
    estimate counts them, rule 8): with the first part's cipher table where it has one (one
    engine run for both), else in a table of their own first, and alone should the budget leave
    that first part out. A later table whose product holds a ceiling's cell does not measure it
    again: a cipher cell names no part, so two results of it would be one cell measured twice."""
    import time

    from cryptcost import suite
    from cryptcost.model import Cell
    from cryptcost.runner.core.scheduler import Progress
    from cryptcost.runner.core.sink import Sink
    from cryptcost.suite import ceilings
    ceiling = Cell.cipher("openssl", "aes-256-gcm", 4096, 1, True)
    monkeypatch.setattr(suite, "ceiling_cells", lambda plan, host, here=True: (ceiling,))
    monkeypatch.setattr(suite.timing, "ceiling_cells", lambda plan, host, here=True: (ceiling,))
    first = Part("first", ciphers={"engines": ["openssl"], "algorithms": ["aes-128-gcm"],
                                   "sizes": [4096]})
    second = Part("second", ciphers={"engines": ["openssl"], "algorithms": ["aes-256-gcm"],
                                     "sizes": [16, 4096]})
    policy = {"min_samples": 3, "max_samples": 3, "warmup": 0}
    host = {"cpu": {"flags": ["aes"], "cores": 2}}

    def run(*parts, spent=None):
        plan = _c(RunPlan("custom", parts=list(parts), policy=policy))
        return suite.run_plan(plan, sink=Sink(), host=host, clock=Clock(spent=spent),
                              hooks=suite.Hooks(progress=lambda w: Progress()),
                              executor=_Timed())
    whole = run(first, second)
    assert list(whole.part_seconds) == ["first", "second"]         # with the first's table
    cells = [r.cell for r in whole.results]
    assert cells.count(ceiling) == 1 and len(cells) == len(set(cells)) == 3
    assert Cell.cipher("openssl", "aes-256-gcm", 16, 1, True) in cells
    # a first part without a cipher table: a table of their own before it
    own = run(Part("nothing"), second)
    assert list(own.part_seconds) == [ceilings.LABEL, "nothing", "second"]
    assert [r.cell for r in own.results].count(ceiling) == 1
    # no time left for any part: the ceilings are still measured
    none = run(first, second, spent=time.monotonic())
    assert [r.cell for r in none.results] == [ceiling]
    assert [s["part"] for s in none.skipped] == ["first", "second"]
    assert ceilings.LABEL in none.part_seconds


def test_a_part_samples_with_its_own_policy_is_estimated_so_and_keeps_it_in_json():
    """One guest boot can serve parts that sample differently (a twin that must be verified
    beside matrices read once): a part's policy wins over the plan's, for its samples and its
    estimate, and survives the guest's JSON."""
    from cryptcost import suite
    from cryptcost.runner.core.scheduler import Progress
    from cryptcost.runner.core.sink import Sink
    from cryptcost.suite import estimate
    from cryptcost.suite.guest import from_json, to_json
    table = {"engines": ["openssl"], "algorithms": ["aes-256-gcm"], "sizes": [4096]}
    once = {"min_samples": 1, "max_samples": 1, "warmup": 0}
    plan = _c(RunPlan("custom", parts=[Part("once", ciphers=table),
                                       Part("thrice", ciphers={**table, "sizes": [512]},
                                            policy={"min_samples": 3, "max_samples": 3})],
                      policy=once))
    host = {"cpu": {"flags": ["aes"], "cores": 2}}
    got = suite.run_plan(plan, sink=Sink(), host=host,
                         hooks=suite.Hooks(progress=lambda w: Progress()), executor=_Timed())
    assert sorted(r.summary.n for r in got.results) == [1, 3]
    assert set(got.part_seconds) == {"once", "thrice"}
    alone = estimate(_c(RunPlan("custom", parts=[Part("x", ciphers=table)], policy=once)),
                     _Timed())
    assert estimate(plan, _Timed()) > 3 * alone
    back = from_json(to_json(plan), "parts.json")
    assert [p.policy for p in _c(back).parts] == [p.policy for p in plan.parts]
    assert [p.policy.min_samples for p in plan.parts] == [1, 3]
    with pytest.raises(UserError, match="part 2"):
        from_json(to_json(plan).replace('"min_samples": 3', '"min_samples": 0'), "parts.json")


def test_a_storage_tables_own_samples_win_over_the_policy_and_give_way_to_two_last():
    """A storage table's own number of samples (``storage.samples``) is what its series take
    whatever the policy says, is estimated so, and gives way to the policy only in a budget's
    last cut, two samples a series."""
    from cryptcost import stats
    from cryptcost.runner.storage import StoragePlan
    from cryptcost.suite.timing import part_seconds
    assert StoragePlan(samples=4).policy(stats.Policy(3, 3)) == stats.Policy(4, 4)
    assert StoragePlan().policy(stats.Policy(3, 6)) == stats.Policy(3, 6)
    table = {"stacks": ["plain"], "workloads": ["seq-1m"]}
    policy = {"min_samples": 2, "max_samples": 2}
    own = _c(RunPlan("custom", parts=[Part("p", storage={**table, "samples": 6})], policy=policy))
    theirs = _c(RunPlan("custom", parts=[Part("p", storage=table)], policy=policy))
    assert own.parts[0].storage[0].samples == 6 and theirs.parts[0].storage[0].samples is None
    assert part_seconds(own.parts[0], FakeExecutor(), here=False) > \
        part_seconds(theirs.parts[0], FakeExecutor(), here=False)

    def model(plan: CompiledPlan) -> float:
        return sum(100 * (sp.samples or p.policy.min_samples) for p in plan.parts
                   for sp in p.storage)
    fitted, seconds = fit(own, 300, model)
    assert fitted.parts[0].storage[0].samples is None and seconds <= 300
    assert "samples beyond two" in [c["what"] for c in fitted.cannot_run]
    fitted, _ = fit(own, 700, model)
    assert fitted.parts[0].storage[0].samples == 6


def test_a_storage_comparison_samples_at_its_tables_own_number(monkeypatch):
    """What the runner hands the schedule is the table's number of samples, not the part's."""
    from cryptcost import stats
    from cryptcost.runner import storage
    from cryptcost.runner.storage import StoragePlan
    got = []
    monkeypatch.setattr(storage, "validate", lambda plan: (plan, [], []))
    monkeypatch.setattr(storage.flow, "compare", lambda pairs, spec, **kw: got.append(kw["policy"]))
    for samples, want in ((5, stats.Policy(5, 5)), (None, stats.Policy(3, 6))):
        storage._run_storage(StoragePlan(workloads=("seq-1m",), samples=samples),
                             stats.Policy(3, 6), storage.Conditions(), res=None)
        assert got.pop() == want
