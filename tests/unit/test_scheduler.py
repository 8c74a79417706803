"""Scheduling, warm-up and stopping, with the fake executor."""

import pytest

from cryptcost.errors import CryptcostError
from cryptcost.lifecycle.resources import Terminated
from cryptcost.model import Sample
from cryptcost.runner.ciphers import CipherPlan, run_ciphers
from cryptcost.runner.ciphers.executor import FakeExecutor
from cryptcost.model import Job
from cryptcost.runner.core import flow
from cryptcost.runner.core.scheduler import schedule
from cryptcost.runner.core.sink import Sink
from cryptcost.stats import Policy


def _job(name, log, values, group=None):
    it = iter(values)
    def measure():
        log.append(name)
        return {name: Sample(next(it), 1.0)}
    return Job(name, (name,), measure, group=group)


def test_rounds_interleave_and_warmup_is_discarded():
    log = []
    jobs = [_job("A", log, [1, 100, 100, 100]), _job("B", log, [1, 50, 50, 50])]
    got = {}
    schedule(jobs, Policy(3, 5, 0.03, warmup=1),
             on_sample=lambda j, k, i, s: got.setdefault(k, []).append(s.value))
    assert log == ["A", "B"] * 4
    assert got == {"A": [100, 100, 100], "B": [50, 50, 50]}


def test_each_jobs_last_warmup_round_runs_watched_and_no_measured_sample_does():
    """A profiler watches the last warm-up run of each job (its samples discarded like every
    warm-up's), so that a profile costs no pass of its own and never touches a figure."""
    from contextlib import contextmanager
    log, watching = [], []

    @contextmanager
    def watch(job):
        watching.append(job.label)
        log.append(f"watch {job.label}")
        yield
        watching.pop()
    jobs = [_job("A", log, [1, 2, 100, 100, 100]), _job("B", log, [1, 2, 50, 50, 50])]
    got = {}
    seen = []

    def sample(j, k, i, s):
        got.setdefault(k, []).append(s.value)
        seen.append(bool(watching))
    schedule(jobs, Policy(3, 3, 0.03, warmup=2), on_sample=sample, watch=watch)
    assert log == ["A", "B", "watch A", "A", "watch B", "B"] + ["A", "B"] * 3
    assert got == {"A": [100, 100, 100], "B": [50, 50, 50]} and not any(seen)
    log.clear()
    jobs = [_job("A", log, [100, 100, 100])]
    schedule(jobs, Policy(3, 3, 0.03, warmup=0), watch=watch)      # no warm-up: nothing watched
    assert log == ["A"] * 3


def test_a_stack_and_its_baselines_take_turns_going_first():
    """Within a group the order rotates each round: A B C, B C A, C A B."""
    log = []
    jobs = [_job(n, log, [100] * 9, group="step") for n in "ABC"]
    schedule(jobs, Policy(3, 3, 0.03, warmup=0))
    assert log == list("ABC" "BCA" "CAB")
    firsts = [log[i] for i in range(0, 9, 3)]
    assert sorted(firsts) == ["A", "B", "C"]


def test_a_stable_job_stops_while_a_noisy_one_goes_on():
    log = []
    jobs = [_job("A", log, [100] * 10), _job("B", log, [100, 140, 60, 120, 80, 100, 130, 70])]
    series = schedule(jobs, Policy(3, 6, 0.03, warmup=0))
    assert series["A"].stop_reason == "ci_target_met" and len(series["A"].samples) == 3
    assert series["B"].stop_reason == "cap_reached" and len(series["B"].samples) == 6


def test_a_group_stays_in_step():
    log = []
    jobs = [
        _job("A", log, [100] * 10, group="g"),
        _job("B", log, [100, 140, 60, 120, 80, 100], group="g"),
    ]
    series = schedule(jobs, Policy(3, 6, 0.03, warmup=0))
    assert len(series["A"].samples) == len(series["B"].samples) == 6


def test_a_failing_job_is_recorded_and_others_go_on():
    def broken():
        raise CryptcostError("boom")
    jobs = [Job("bad", ("bad",), broken), _job("ok", [], [5, 5, 5])]
    done = {}
    series = schedule(
        jobs, Policy(3, 3, 0.03, warmup=0), on_done=lambda k, s: done.setdefault(k, s)
    )
    assert series["bad"].error == "boom" and series["bad"].stop_reason == "error"
    assert len(series["ok"].samples) == 3
    assert set(done) == {"bad", "ok"}


class Recorder(Sink):
    def __init__(self):
        self.events = []

    def sample(self, cell, index, sample):
        self.events.append(("sample", cell.algorithm, index))

    def result(self, result):
        self.events.append(("result", result.cell.algorithm))


def test_cipher_run_saves_every_sample_and_result_and_verifies_accel():
    fake = FakeExecutor()
    sink = Recorder()
    plan = CipherPlan(engines=("openssl",), algorithms=("aes-256-xts", "chacha20-poly1305"),
                      accel=(False,))
    out = run_ciphers(plan, fake, Policy(3, 5, 0.03, 1), sink=sink, cpu_flags={"aes": True})
    by_alg = {r.cell.algorithm: r for r in out.results}
    assert set(by_alg) == {"aes-256-xts", "chacha20-poly1305"}  # the on references are not results
    assert by_alg["aes-256-xts"].metrics["accel_verified"] is True
    assert (
        by_alg["aes-256-xts"].metrics["accel_on_bytes_per_s"] > by_alg["aes-256-xts"].summary.median
    )
    assert by_alg["chacha20-poly1305"].metrics["accel_verified"] is None
    assert ("result", "aes-256-xts") in sink.events
    assert sum(1 for e in sink.events if e[0] == "sample") >= 4 * 3


def test_accel_switch_that_does_nothing_is_reported():
    fake = FakeExecutor(rate=lambda c: 1e9)
    out = run_ciphers(
        CipherPlan(engines=("openssl",), algorithms=("aes-256-xts",), accel=(True, False)), fake,
        Policy(3, 5, 0.03, 0), cpu_flags={"aes": True},
    )
    off = next(r for r in out.results if not r.cell.accel)
    assert off.metrics["accel_verified"] is False
    assert "did NOT take effect" in off.notes[-1]


def test_a_cipher_cell_wider_than_the_target_is_marked_unstable_like_any_result(monkeypatch):
    """Cipher results were exempt: go's xchacha20 at ±14 % after 3 samples said nothing."""
    monkeypatch.setattr("cryptcost.host.cpu.os.sched_getaffinity", lambda pid: {0, 1})
    plan = CipherPlan(
        engines=("openssl",), algorithms=("aes-256-xts", "chacha20-poly1305"), threads=(1, 2)
    )
    noisy = run_ciphers(plan, FakeExecutor(noise=0.1, seed=3), Policy(3, 3, 0.03, 0))
    assert noisy.results and all(r.metrics.get("unstable") for r in noisy.results)
    one = next(r for r in noisy.results if r.cell.threads == 1)
    two = next(r for r in noisy.results if r.cell.threads == 2)
    assert one.metrics["cv"] > 0.01 and any(n.startswith("unstable: ±") for n in one.notes)
    assert one.metrics["likely_cause"].startswith("the host's CPU itself")
    assert two.metrics["likely_cause"].startswith("2 thread(s) on 2 core(s)")
    steady = run_ciphers(plan, FakeExecutor(noise=0.001), Policy(3, 3, 0.03, 0))
    assert not any(r.metrics.get("unstable") for r in steady.results)


def test_unavailable_engine_is_listed_with_reason():
    from cryptcost.errors import Unavailable
    fake = FakeExecutor(unavailable={"kernel": Unavailable("no AF_ALG", "a kernel with it")})
    out = run_ciphers(CipherPlan(engines=("openssl", "kernel"), algorithms=("aes-256-xts",)),
                      fake, Policy(3, 3, 0.03, 0))
    assert {"engine": "kernel", "reason": "no AF_ALG", "install": "a kernel with it"} in out.skipped
    assert all(r.cell.engine == "openssl" for r in out.results)


def test_cells_a_given_engine_cannot_measure_are_skipped_with_reason():
    out = run_ciphers(CipherPlan(engines=("go",), algorithms=("aes-256-gcm",), sizes=(512, 4096)),
                      FakeExecutor(), Policy(3, 3, 0.03, 0))
    assert [r.cell.buffer_bytes for r in out.results] == [4096]
    assert any("4096-byte" in s["reason"] for s in out.skipped)


def test_one_sample_a_side_verifies_only_an_unmistakable_drop():
    one = Policy(1, 1, 0.03, 0)
    big = run_ciphers(
        CipherPlan(engines=("openssl",), algorithms=("aes-256-xts",), accel=(True, False)),
        FakeExecutor(), one, cpu_flags={"aes": True},
    )
    off = next(r for r in big.results if not r.cell.accel)
    assert off.metrics["accel_verified"] is True and "one sample a side" in off.notes[-1]
    small = run_ciphers(
        CipherPlan(engines=("openssl",), algorithms=("aes-256-xts",), accel=(True, False)),
        FakeExecutor(rate=lambda c: 1e9 if c.accel else 0.7e9, noise=0), one,
        cpu_flags={"aes": True},
    )
    off = next(r for r in small.results if not r.cell.accel)
    assert off.metrics["accel_verified"] is None and "too few samples" in off.notes[-1]


def test_the_cipher_table_holds_what_the_stacks_need():
    """Every stack's cipher, at its own unit, is added to the run's cipher table;
    without acceleration where the kernel's AES is software (the ceiling of
    fscrypt and dm-crypt there)."""
    from cryptcost.model import Cell
    from cryptcost.runner.storage import resolve
    from cryptcost.suite import ceiling_cells, compile_plan
    from cryptcost.workloads.plan import Part, RunPlan
    plan = RunPlan("t", parts=[Part("p", storage={"stacks": ["all"], "size": "256M"})])
    host = {"crypto_drivers": {"aes": {"driver": "aes-fixed-time", "implementation": "software"}}}
    cells = ceiling_cells(compile_plan(plan)[0], host)
    for stack, _ in resolve(["all"], "ext4")[0]:
        ref = stack.cipher_ref()
        if not ref:
            continue
        engine = "go" if ref["where"] == "go" else "openssl"
        assert (
            Cell.cipher(engine, ref["algorithm"], ref["unit"], 1, True) in cells
            or ref["algorithm"]
            not in __import__("cryptcost.engines", fromlist=["x"]).CIPHER_ENGINES[engine].algorithms
        )
        if ref["where"] == "kernel" and ref["algorithm"].startswith("aes"):
            assert any(
                c.algorithm == ref["algorithm"] and not c.accel and c.buffer_bytes == ref["unit"]
                for c in cells
            )


def test_extra_cells_are_measured_alongside_the_product():
    from cryptcost.model import Cell
    extra = (Cell.cipher("openssl", "aes-256-xts", 512, 1, False),)
    out = run_ciphers(
        CipherPlan(engines=("openssl",), algorithms=("aes-128-gcm",), extra_cells=extra),
        FakeExecutor(), Policy(2, 2, 0.03, 0), cpu_flags={"aes": True},
    )
    got = {(r.cell.algorithm, r.cell.buffer_bytes, r.cell.accel) for r in out.results}
    assert ("aes-256-xts", 512, False) in got and ("aes-128-gcm", 4096, True) in got


def test_expected_samples_follow_the_series_own_spread():
    pol = Policy(3, 10, 0.03, warmup=0)
    assert pol.expected_samples([]) == 3 and pol.expected_samples([100]) == 3
    assert pol.expected_samples([100, 100.5, 99.5]) == 3             # already within ±3 %
    assert pol.expected_samples([100, 104, 96]) == 10                # CV 4 %: about ten samples
    assert 3 < pol.expected_samples([100, 102, 98]) < 10             # CV 2 %: a few more
    assert pol.expected_samples([100, 150, 50]) == 10                # never more than the cap


def test_the_eta_predicts_the_steps_left_instead_of_a_lower_bound():
    """Series with a 4 % CV need about ten samples, not the minimum three: once two rounds are
    measured, the ETA says so (the old estimate counted min_samples and was always exceeded)."""
    import itertools
    from cryptcost.runner.core.scheduler import Progress
    noisy = [100, 104, 96, 103, 97, 104, 96, 102, 98, 100]
    seen = []

    class Record(Progress):
        def step(self, label, done, total, eta=None):
            seen.append((done, eta))

    jobs = [_job(n, [], itertools.cycle(noisy), group="g") for n in "AB"]
    schedule(jobs, Policy(3, 10, 0.03, warmup=1), progress=Record())
    total = len(seen)
    errors = {done: eta.steps - (total - done + 1) for done, eta in seen if eta is not None}
    assert seen[0][1] is None and total > 2 * (1 + 3)  # more than the minimum was needed
    assert all(eta.at_most_steps >= eta.steps for _, eta in seen[1:])
    # Once every series has two samples (step 6) the ETA is never short, and never more than two
    # rounds of the group (4 steps) over: these series met the target at 8 samples by luck, where
    # their 4 % spread predicts 9 or 10.
    assert all(0 <= errors[d] <= 4 for d in range(6, total + 1)), errors


def test_a_deadline_stops_series_at_their_minimum():
    import time
    jobs = [_job("A", [], [100, 130, 70] * 10)]
    got = schedule(jobs, Policy(3, 20, 0.03, warmup=0, deadline=time.monotonic()))
    assert len(got["A"].samples) == 3 and got["A"].stop_reason == "time_budget"


def test_the_hosts_cpu_speed_is_timed_before_every_sample_and_a_move_is_named():
    """A fixed piece of CPU work is timed before each measured job (not the warm-up):
    each sample keeps it, and a result whose host moved more than 10 % between its
    samples is told so, as its likely cause and among the run's findings."""
    from cryptcost.analysis import analyze
    from cryptcost.runner.core.scheduler import drift_cause, host_drift
    log, speeds = [], iter([2.0e9, 1.6e9, 2.0e9])
    calls = []

    def yardstick():
        calls.append(len(log))
        return next(speeds)

    series = schedule(
        [_job("A", log, [1, 100, 100, 100])], Policy(3, 3, 0.03, warmup=1), yardstick=yardstick
    )
    samples = series["A"].samples
    assert calls == [1, 2, 3]  # after the warm-up round, before each measured one
    assert [s.metrics["cpu_ref"] for s in samples] == [2.0e9, 1.6e9, 2.0e9]
    assert host_drift(samples) == 0.25 and "moved by more than 10%" in drift_cause(samples)
    steady = [Sample(1, 1, metrics={"cpu_ref": v}) for v in (2.0e9, 1.95e9, 2.02e9)]
    assert drift_cause(steady) is None and host_drift(steady[:1]) is None
    moved = {
        "kind": "storage", "stack": "x", "op": "write", "block_bytes": 1 << 20, "workload": "seq",
        "median_bytes_per_s": 1e8, "values": [1e8] * 3, "host_drift": 0.25, "params": {"facts": {}},
    }
    assert any("saw the host's CPU speed move" in f and "up to 25%" in f
               for f in analyze([moved], {"cpu": {}}).findings)
    assert not any(
        "CPU speed move" in f
        for f in analyze([{**moved, "host_drift": 0.04}], {"cpu": {}}).findings
    )


class _Kept(Sink):
    def __init__(self):
        self.samples, self.results = [], []

    def sample(self, cell, index, sample):
        self.samples.append(cell)

    def result(self, result):
        self.results.append(result)


class _Spec(flow.Kind):
    """A storage kind for the flow: one step of one op, each instance's cell given."""

    kind = "storage"

    def __init__(self, runner, op, cells):
        self.runner, self.op, self.cells_ = runner, op, cells

    def ops(self, step):
        return (self.op,)

    def cell(self, inst, op):
        return self.cells_[(inst.label, op.key)]

    def result(self, inst, op, s, series):
        return flow.summarise(inst.stack, self.cell(inst, op), s, series, target=0.03,
                              own=flow.Own({}, {}, cause=lambda cv: "noise"))

    def job(self, step):
        return flow.StepJob("seq", "seq", 1.0)


@pytest.mark.parametrize("signal_", [KeyboardInterrupt, Terminated])
def test_a_comparison_cut_by_a_signal_stores_each_series_it_sampled_as_an_incomplete_result(
        monkeypatch, signal_):
    """Ctrl-C or SIGTERM in the middle of a comparison (a guest stopped at its timeout is
    one): each series with samples becomes a result, never ranked (``incomplete`` says why
    and after how many samples), set against its baselines' samples so far; a series with
    no sample gets none. The signal still ends the run."""
    from types import SimpleNamespace

    from cryptcost.model import Cell
    from cryptcost.runner.core import flow
    from cryptcost.stacks import get

    monkeypatch.setattr("cryptcost.host.cpu.yardstick_speed", lambda: 1.0)
    insts = [SimpleNamespace(label=n, stack=get(n))
             for n in ("gocryptfs", "plain", "gofuse-passthrough")]
    op = SimpleNamespace(key="w", workload="seq-write")
    cell = {(i.label, "w"): Cell(kind="storage", stack=i.label, workload="seq-write", accel=True)
            for i in insts}
    values = {"gocryptfs": iter([50.0]), "plain": iter([100.0, 101.0]),
              "gofuse-passthrough": iter([90.0, 92.0])}
    calls = []

    def runner(inst, step):
        calls.append(inst.label)
        if len(calls) == 6:                       # round 2 goes plain, passthrough, gocryptfs
            raise signal_("SIGTERM")
        return {(inst.label, "w"): Sample(next(values[inst.label]), 1.0)}

    sink = _Kept()
    outcome = flow.Outcome()
    with pytest.raises(signal_):
        flow.compare([(i, "step") for i in insts], _Spec(runner, op, cell), outcome=outcome,
                     policy=Policy(min_samples=3, max_samples=3, warmup=0), res=None, sink=sink,
                     progress=None, profile=False)
    assert outcome.results == []                  # the run's own list: it ended before them
    got = {r.cell.stack: r for r in sink.results}
    assert sorted(got) == ["gocryptfs", "gofuse-passthrough", "plain"]
    cause = "interrupted" if signal_ is KeyboardInterrupt else "stopped by a signal (SIGTERM)"
    assert got["gocryptfs"].metrics["incomplete"] == (
        f"the run ended before this series did: {cause}")
    assert got["plain"].summary.n == 2 and got["gocryptfs"].summary.n == 1
    assert all(r.stop_reason == "interrupted" for r in sink.results)
    assert got["plain"].summary.n == 2
    assert got["gocryptfs"].metrics["vs"]["plain"]["overhead"] == pytest.approx(1 - 50 / 100.5)
    assert got["gocryptfs"].metrics["vs"]["gofuse-passthrough"]["overhead"] == \
        pytest.approx(1 - 50 / 91)
    assert len(sink.samples) == 5


def test_a_comparison_that_ends_stores_no_incomplete_result(monkeypatch):
    from types import SimpleNamespace

    from cryptcost.model import Cell
    from cryptcost.runner.core import flow
    from cryptcost.stacks import get

    monkeypatch.setattr("cryptcost.host.cpu.yardstick_speed", lambda: 1.0)
    inst = SimpleNamespace(label="plain", stack=get("plain"))
    op = SimpleNamespace(key="w", workload="seq-write")
    cell = {("plain", "w"): Cell(kind="storage", stack="plain", workload="seq-write", accel=True)}
    sink, outcome = _Kept(), flow.Outcome()
    flow.compare([(inst, "step")],
                 _Spec(lambda i, s: {("plain", "w"): Sample(100.0, 1.0)}, op, cell),
                 outcome=outcome, policy=Policy(min_samples=2, max_samples=2, warmup=0),
                 res=None, sink=sink, progress=None, profile=False)
    assert [r.stop_reason for r in sink.results] == ["ci_target_met"]
    assert "incomplete" not in sink.results[0].metrics and outcome.results == sink.results


def test_a_cipher_table_cut_by_a_signal_keeps_each_sampled_cell_as_an_incomplete_result():
    """As a storage or network comparison does: Ctrl-C in the middle of a cipher table stores
    every cell with samples as an incomplete result, and the signal still ends the run."""
    fake = FakeExecutor()
    jobs_of = fake.cipher_jobs
    calls = []

    def cut_jobs(engine, cells, seconds):
        jobs = jobs_of(engine, cells, seconds)
        for job in jobs:
            def measure(m=job.measure):
                calls.append(1)
                if len(calls) == 4:
                    raise KeyboardInterrupt
                return m()
            job.measure = measure
        return jobs
    fake.cipher_jobs = cut_jobs
    sink = _Kept()
    plan = CipherPlan(engines=("openssl",), algorithms=("aes-256-xts", "chacha20-poly1305"))
    with pytest.raises(KeyboardInterrupt):
        run_ciphers(plan, fake, Policy(3, 5, 0.03, 0), sink=sink, cpu_flags={"aes": True})
    assert sink.samples and {r.cell for r in sink.results} == set(sink.samples)
    assert all(r.metrics["incomplete"] == "the run ended before this series did: interrupted"
               and r.stop_reason == "interrupted" for r in sink.results)


def test_an_undecided_acceleration_switch_samples_on_until_shown_or_the_maximum():
    """An acceleration-off series whose interval met its target, but which is not yet
    significantly slower than its twin with acceleration on (paired by round), samples on with
    its group — the twin too, so that the rounds stay paired — until the check is decided or the
    maximum is reached; never a figure cut at the minimum for want of a round."""
    from cryptcost.model import Cell
    from cryptcost.runner.core.pairing import accel_undecided
    on_cell = Cell(kind="network", stack="tls:x", workload="send", streams=1, accel=True)
    off_cell = on_cell.but(stack="tls:x/accel-off", accel=False)

    def job(cell, values, log):
        it = iter(values)

        def measure():
            log.append(cell.stack)
            return {cell: Sample(next(it), 1.0)}
        return Job(cell.stack, (cell,), measure, group="send")

    def run(on, off, undecided):
        log = []
        series = schedule([job(on_cell, on, log), job(off_cell, off, log)],
                          Policy(3, 6, 0.6, warmup=0), undecided=undecided)
        return log, series
    on = [100.0, 80, 120, 101, 99, 100]
    off = [55.0, 60, 50, 54, 55, 53]         # 0.55, 0.75, 0.42 of on: not significant with three
    log, series = run(on, off, None)
    assert len(series[off_cell].samples) == 3                     # at its target: stopped
    log, series = run(on, off, accel_undecided)
    assert [len(series[c].samples) for c in (on_cell, off_cell)] == [4, 4], log
    assert series[off_cell].stop_reason == "ci_target_met"
    assert not accel_undecided(off_cell, series) and not accel_undecided(on_cell, series)
    # a switch that stays undecided stops at the maximum, said so (its result then says it is
    # undecided)
    noisy = [55.0, 95, 45, 100, 40, 110]
    log, series = run(on, noisy, accel_undecided)
    assert len(series[off_cell].samples) == 6 and accel_undecided(off_cell, series)
    assert series[off_cell].stop_reason == "cap_reached"
    # past the plan's time budget it samples on no more
    import time
    series = schedule([job(on_cell, on, []), job(off_cell, off, [])],
                      Policy(3, 6, 0.6, warmup=0, deadline=time.monotonic()),
                      undecided=accel_undecided)
    assert len(series[off_cell].samples) == 3
