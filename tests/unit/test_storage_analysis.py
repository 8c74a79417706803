"""How storage series become results: overhead, CI, significance, units."""

from pathlib import Path

import pytest

from cryptcost.media import RamMedium
from cryptcost.model import CpuSplit, Sample
from cryptcost.record import Stored, read
from cryptcost.runner.core.scheduler import Series
from cryptcost.runner.storage import Conditions, Instance, StoragePlan, _cell, _result, resolve
from cryptcost.stacks import get
from cryptcost.workloads import storage as wl


def _series(values, moved=1 << 30):
    return Series([Sample(v, moved / v, moved, CpuSplit(user=0.5, system=0.5),
                          {"iops": v / 4096, "cache_mode": "fsync+remount", "cpu_s_per_gib": 1.0})
                   for v in values], stop_reason="ci_target_met")


def _plan():
    return StoragePlan(stacks=["securefs"], medium=RamMedium())


def _on(label: str, op: wl.Op, plan: StoragePlan):
    """The cell a baseline measures in the same run: what the run's series are keyed by."""
    return _cell(Instance(get(label.split(":")[0])(), label, "baseline"), op, plan).but(stack=label)


def test_overhead_against_the_matched_baseline_and_plain():
    op, plan = wl.Op("seq", "read", 4096), _plan()
    stack = get("securefs")()
    series = {
        _on("fuse-passthrough:big-writes", op, plan): _series([200e6, 202e6, 198e6]),
        _on("plain", op, plan): _series([400e6, 404e6, 396e6]),
        _on("plain", wl.Op("seq", "write", 4096), plan): _series([1e6] * 3),
    }  # another cell
    mine = _series([150e6, 151e6, 149e6])
    r = _result(Instance(stack, stack.label, "measured"), op, mine, series, plan,
                Conditions()).to_dict()
    assert r["baseline"] == "fuse-passthrough:big-writes"        # securefs mounts with big_writes
    assert r["overhead"] == pytest.approx(0.25, abs=0.005)
    lo, hi = r["overhead_ci95"]
    assert lo < 0.25 < hi and r["overhead_significant"] is True
    assert r["vs"]["plain"]["overhead"] == pytest.approx(0.625, abs=0.005)
    assert r["median_bytes_per_s"] == pytest.approx(150e6)
    assert r["cache_mode"] == "fsync+remount" and r["iops"] == pytest.approx(150e6 / 4096)
    assert "file sizes" in r["security"][0]


def test_noise_is_not_ranked(monkeypatch):
    monkeypatch.setattr("cryptcost.host.cpu.os.sched_getaffinity", lambda pid: set(range(8)))
    op, plan = wl.Op("seq", "write", 4096), _plan()
    stack = get("securefs")()
    series = {_on("fuse-passthrough:big-writes", op, plan): _series([100e6, 130e6, 80e6])}
    r = _result(Instance(stack, stack.label, "measured"), op, _series([105e6, 85e6, 120e6]),
                series, plan, Conditions()).to_dict()
    assert r["overhead_significant"] is False
    assert r["vs"]["fuse-passthrough:big-writes"]["verdict"] == "no significant difference"
    assert any("baseline plain has no samples" in n for n in r["notes"])
    # ±41 % after 3 samples: marked unstable, with its CV and a likely cause, not shrugged off
    assert r["unstable"] is True and r["cv"] == pytest.approx(0.17, abs=0.01)
    assert any(n.startswith("unstable: ±") and "likely cause" in n for n in r["notes"])
    assert (
        r["likely_cause"] == "the FUSE daemon's threads competing with fio for 8 core(s)"
    )  # not "2 cores"


def test_ops_per_second_results_say_so():
    op = wl.Op("smallfiles", "stat", 0, unit="ops/s")
    stack = get("plain")()
    r = _result(
        Instance(stack, "plain", "baseline"), op, _series([5e4, 5e4, 5e4]), {}, _plan(),
        Conditions()).to_dict()
    assert "median_ops_per_s" in r and "median_bytes_per_s" not in r
    assert r["baseline"] is None and r["overhead"] is None


def test_baselines_are_added_and_explicit_specs_expand():
    resolved, _ = resolve(["gocryptfs:*"], "ext4")
    labels = {s.label: role for s, role in resolved}
    assert labels == {"gocryptfs:aes-gcm": "measured", "gocryptfs:xchacha": "measured",
                      "gocryptfs:aes-siv": "measured", "gocryptfs:aes-gcm-go": "measured",
                      "gocryptfs:aes-gcm-openssl": "measured", "gofuse-passthrough": "baseline",
                      "plain": "baseline"}


def test_workload_sizes_fit_the_medium_and_sweep_r3():
    sizes = wl.Sizes(medium=256 << 20)
    steps = wl.steps(["seq"], sizes, direct=False)
    assert [s.ops[0].block_bytes for s in steps] == list(wl.SEQ_SWEEP)
    for step in steps:
        write, read = step.ops
        assert write.intended_bytes == read.intended_bytes <= 0.4 * (256 << 20)
        assert write.fio.end_fsync and read.reset_before and not write.fio.direct
    direct = wl.steps(["seq-quick"], sizes, direct=True)
    assert all(op.fio.direct and not op.reset_before for s in direct for op in s.ops)


def test_unknown_workload_and_stack_are_user_errors():
    from cryptcost.errors import UserError
    with pytest.raises(UserError, match="unknown workload"):
        wl.expand(["seq", "tpc-c"])
    with pytest.raises(UserError, match="unknown stack"):
        resolve(["veracrypt9"], "ext4")
    with pytest.raises(UserError, match="no variant"):
        resolve(["gocryptfs:rot13"], "ext4")


def test_ram_medium_size_is_chosen_from_free_memory(monkeypatch):
    from cryptcost.errors import UserError
    from cryptcost.host import cpu
    from cryptcost.media import RamMedium
    monkeypatch.setattr(cpu, "memory", lambda: {"total": 32 << 30, "available": 8 << 30})
    assert RamMedium().auto_size(4) == 512 << 20             # plenty: the cap
    assert RamMedium().auto_size(20) == 192 << 20            # 4 GiB / 20, in 64 MiB steps
    monkeypatch.setattr(cpu, "memory", lambda: {"total": 2 << 30, "available": 1 << 30})
    assert RamMedium().auto_size(10) == 128 << 20             # the floor…
    with pytest.raises(UserError, match="pass a smaller --size"):
        RamMedium().require_room(128 << 20, 10)  # …which does not fit: refused clearly


def test_a_suites_own_size_is_fitted_to_a_small_host_and_said_a_named_one_refused(
        monkeypatch, tmp_path):
    """The main job on a host with little memory: a suite's 512 MiB media (a size no plan file
    named) become what half the available memory gives each stack, said before the run and kept
    in the results; a size the user's plan names is refused in one line saying how to pass a
    smaller one."""
    from cryptcost import suite
    from cryptcost.errors import UserError
    from cryptcost.host import cpu
    from cryptcost.media import RamMedium
    from cryptcost.runner.storage import StoragePlan, validate
    from cryptcost.suite.compiled import storage_plans
    from cryptcost.workloads.plan import load
    small = {"total": 8 << 30, "available": 4 << 30}
    monkeypatch.setattr(cpu, "memory", lambda: dict(small))
    assert RamMedium().fitted(512 << 20, 4) == 512 << 20        # 2 GiB room: 512 MiB fits
    assert RamMedium().fitted(512 << 20, 13) == 128 << 20       # 2 GiB / 13, in 64 MiB steps
    assert RamMedium().fitted(256 << 20, 100) == 128 << 20      # never under the floor
    small["available"] = 6 << 30
    assert RamMedium().fitted(512 << 20, 13) == 192 << 20
    # the quick suite's own size is fitted; a plan file that names one keeps it
    quick = load("quick", None).parts[0].storage
    assert quick["fit_size"] is True and quick["size"] == "512M"
    named = tmp_path / "named.toml"
    named.write_text('[run]\nsuite = "quick"\n[storage]\nsize = "512M"\n')
    assert load(None, str(named)).parts[0].storage["fit_size"] is False
    named.write_text('[run]\nsuite = "quick"\n[storage]\nsize = "1G"\nfit_size = true\n')
    assert load(None, str(named)).parts[0].storage["fit_size"] is True
    plan = storage_plans(quick)[0]
    fitted, resolved, _ = validate(plan)
    assert plan.size == 512 << 20 and not plan.size_asked      # the plan asked is not changed
    plan = fitted
    assert plan.size == RamMedium().fitted(512 << 20, len(resolved)) < 512 << 20
    assert plan.size_asked == 512 << 20
    fixed = StoragePlan(stacks=plan.stacks, medium=RamMedium(), workloads=["seq-1m"],
                        size=512 << 20)
    with pytest.raises(UserError, match=r"smaller --size \(cryptcost storage\) or \[storage\] "
                                        r"size \(a plan file\)"):
        validate(fixed)
    # the run says so before it begins, and its dry run as data
    prepared = suite.prepare(suite.Asked("quick"))
    assert [n for n in prepared.notes if n.startswith("quick: storage: "
                                                      f"{plan.size >> 20} MiB per stack, not the "
                                                      "512 MiB asked")], prepared.notes
    from cryptcost.cli.plansaid import planned
    assert planned(prepared)["notes"] == list(prepared.notes)
    # on CI's memory nothing is fitted, and nothing said
    small.update(total=24 << 30, available=23 << 30)
    assert suite.prepare(suite.Asked("quick")).notes == ()


def test_first_samples_that_run_low_across_the_run_are_a_finding():
    """A first sample below the rest in one cell is chance; below it in most
    cells, the warm-up left something cold — said, never dropped."""
    from cryptcost.analysis import first_samples_low, findings

    def result(stack, values):
        return Stored.of({"kind": "storage", "stack": stack, "op": "write", "block_bytes": 1 << 20,
                          "values": values})
    cold = [result(f"s{i}", [80 + i, 100, 101, 99]) for i in range(6)]
    said = first_samples_low(cold)
    assert (
        len(said) == 1 and "6 of 6 storage results" in said[0] and "s0 write 1 MiB 0.80" in said[0]
    )
    assert said[0] in findings(cold, [])
    steady = [
        result(f"s{i}", [100 + (-1) ** i * 6, 100, 101]) for i in range(6)
    ]  # low and high in turn
    assert first_samples_low(steady) == []
    assert first_samples_low(cold[:4]) == []  # too few results to tell


def test_two_specs_whose_reads_take_one_path_are_a_control_of_each_other():
    """bindfs with big_writes reads as bindfs without it does: a run where the
    two read apart (significantly, by more than 5 %) says so, and names the
    overheads that carry the gap; a gap within the noise, or a write, is not
    said."""
    from cryptcost.analysis import apart, findings
    from cryptcost.stacks import get

    like = get("fuse-passthrough")("big-writes").facts()
    assert like["reads_like"] == "fuse-passthrough"
    assert get("fuse-passthrough")().facts()["reads_like"] is None

    def result(stack, op, values, facts=None, vs=None):
        return Stored.of({"kind": "storage", "stack": stack, "op": op, "block_bytes": 1 << 20,
                          "workload": "seq", "values": values,
                          "median_bytes_per_s": sorted(values)[len(values) // 2],
                          "params": {"facts": facts or {}}, "vs": vs or {}})

    def run(big_writes, op="read"):
        return [result("fuse-passthrough", op, [2000e6, 2050e6, 1980e6]),
                result("fuse-passthrough:big-writes", op, big_writes, like),
                result("securefs:lite", op, [1000e6, 1010e6, 990e6], {},
                       {"fuse-passthrough:big-writes": {"overhead": 0.3}}),
                result("securefs:lite", "write", [500e6] * 3, {},
                       {"fuse-passthrough:big-writes": {"overhead": 0.3}}),
                result("encfs:standard", op, [700e6, 710e6, 690e6], {},
                       {"fuse-passthrough": {"overhead": 0.65}})]
    said = apart(run([1500e6, 1480e6, 1520e6]))
    assert len(said) == 1 and "fuse-passthrough:big-writes read 1.50 GB/s" in said[0]
    assert "fuse-passthrough 2.00 GB/s" in said[0] and "(-25 %, significant)" in said[0]
    # one run cannot tell which copy it moved: the overheads against either are named
    assert ("the overheads of securefs:lite against fuse-passthrough:big-writes; "
            "encfs:standard against fuse-passthrough carry it") in said[0]
    assert said[0] in findings(run([1500e6, 1480e6, 1520e6]), [])
    assert apart(run([1990e6, 2040e6, 1960e6])) == []               # alike
    assert apart(run([1500e6, 2100e6, 1950e6])) == []               # apart, not significantly
    assert apart(run([1500e6, 1480e6, 1520e6], op="write")) == []   # only reads share a path
    assert apart(run([1500e6, 1480e6, 1520e6])[1:]) == []           # its twin not measured


def test_a_spread_no_wider_than_the_hosts_memory_is_said_to_be_the_memorys(monkeypatch):
    """The host's memory bandwidth, measured before the first sample, moved 8 % (CV): a result whose
    own CV
    is within 1.5× that is put down to the memory, in the result and in a finding; one far wider
    keeps its
    stack's cause; a memory that held still explains nothing."""
    from cryptcost.analysis import host_noise
    from cryptcost.runner.core.quiet import memory_noise
    monkeypatch.setattr("cryptcost.host.cpu.os.sched_getaffinity", lambda pid: set(range(2)))
    op = wl.Op("seq", "read", 1 << 20)
    stack = get("securefs")()
    inst = Instance(stack, stack.label, "measured")
    shaky = {
        "copies": 10, "seconds": 0.2, "bytes_per_s": 12e9, "low": 9e9, "high": 14e9, "cv": 0.08,
    }

    def result(values, memory):
        return _result(inst, op, _series(values), {}, _plan(),
                       Conditions(memory_noise=memory)).to_dict()
    within = result([100e6, 110e6, 92e6], shaky)  # CV ≈ 9 %: within 1.5 × 8 %
    assert within["unstable"] is True and within["likely_cause"].startswith(
        "the host's memory bandwidth, which moved 8%"
    )
    assert within["params"]["memory_noise"] == shaky
    wider = result([100e6, 140e6, 70e6], shaky)                    # CV ≈ 33 %: the stack's own
    assert wider["likely_cause"] == "the FUSE daemon's threads competing with fio for 2 core(s)"
    still = result([100e6, 110e6, 92e6], {**shaky, "cv": 0.01})
    assert still["likely_cause"] == "the FUSE daemon's threads competing with fio for 2 core(s)"
    [finding] = host_noise([], read([within, wider]))
    assert (
        finding.startswith("the host's memory bandwidth was not steady: 10 copies of 0.2 s")
        and "CV 8.0%" in finding
    )
    assert "1 unstable result(s) are no wider than that" in finding
    assert host_noise([], read([still])) == []
    got = memory_noise(copies=3, seconds=0.01)                      # the real measurement, briefly
    assert got["copies"] == 3 and got["low"] <= got["bytes_per_s"] <= got["high"] and got["cv"] >= 0


def test_a_direct_io_smaller_than_a_devices_sector_is_not_measured_and_says_why():
    """A LUKS2 mapping with 4 KiB sectors refuses 512 B direct I/O (EINVAL): R3's sweep skips
    those block sizes on it, with why, and runs them on a 512 B-sector mapping."""
    from cryptcost.runner.storage import unfit
    from cryptcost.stacks import get
    from cryptcost.workloads import storage as swl
    steps = {s.label: s for s in swl.steps(["seq"], swl.Sizes(medium=512 << 20), True)}
    four_k, plain512 = get("luks")("aes-xts-plain64-4k", "ext4"), get("luks")("aes-xts-plain64",
                                                                               "ext4")
    small = next(s for label, s in steps.items() if label.startswith("seq 512 "))
    page = next(s for label, s in steps.items() if label.startswith("seq 4096 "))
    assert "4096-byte sectors" in unfit(four_k, small, True) and "512 B" in unfit(four_k, small,
                                                                                    True)
    assert unfit(four_k, page, True) is None and unfit(plain512, small, True) is None
    assert unfit(four_k, small, False) is None                   # buffered: the page cache takes it


def test_xfs_on_a_medium_mkfs_xfs_refuses_is_bad_input():
    from cryptcost.errors import UserError
    from cryptcost.media import parse_medium
    from cryptcost.runner.storage import StoragePlan, validate
    plan = StoragePlan(stacks=["plain"], medium=parse_medium("ram"), workloads=["seq-1m"],
                       size=256 << 20, fs="xfs")
    with pytest.raises(UserError, match="--fs xfs needs a medium of at least 320 MiB"):
        validate(plan)


def test_a_plans_sample_minimum_outside_a_quarter_second_to_a_minute_is_bad_input(monkeypatch):
    """``storage.sample_minimum`` is typed and compiled from a plan's table, and a value a
    sample cannot honestly take (under a quarter second, less than a pass of most reads; over a
    minute, a soak) is refused before anything is created, as is a number of samples
    (``storage.samples``) outside 1–1000."""
    from cryptcost.errors import UserError
    from cryptcost.runner.storage import MIN_SAMPLE_MINIMUM, validate
    from cryptcost.suite.compiled import storage_plans
    from cryptcost.workloads.plan import validate as validate_plan
    monkeypatch.setattr("os.geteuid", lambda: 0)
    table = {"stacks": ["plain"], "workloads": ["seq-1m"], "size": "256M", "sample_minimum": 0.5}
    validate_plan({"storage": table})
    (plan,) = storage_plans(table)
    assert plan.sample_minimum == 0.5
    assert validate(plan)[0].sample_minimum == 0.5
    (plan,) = storage_plans({**table, "sample_minimum": 1})            # an int is a float here
    assert plan.sample_minimum == 1.0 and isinstance(plan.sample_minimum, float)
    (plan,) = storage_plans({**table, "samples": 5, "sample_minimum": 0.25})
    assert validate(plan)[0].samples == 5 and plan.sample_minimum == 0.25
    for bad in (MIN_SAMPLE_MINIMUM / 2, 61.0):
        (plan,) = storage_plans({**table, "sample_minimum": bad})
        with pytest.raises(UserError, match=r"\(storage.sample_minimum\) must be 0.25–60 s, not "):
            validate(plan)
    for bad in (0, 1001):
        (plan,) = storage_plans({**table, "samples": bad})
        with pytest.raises(UserError, match=f"storage.samples must be 1–1000, not {bad}"):
            validate(plan)
    with pytest.raises(UserError, match="sample_minimum"):
        validate_plan({"storage": {**table, "sample_minimum": "half a second"}})


def test_rsync_without_rsync_is_bad_input_naming_its_package(monkeypatch):
    import shutil
    from cryptcost import proc
    from cryptcost.errors import UserError
    from cryptcost.media import parse_medium
    from cryptcost.runner.storage import StoragePlan, validate
    monkeypatch.setattr("os.geteuid", lambda: 0)
    monkeypatch.setattr(proc, "which", lambda b: None if b == "rsync" else shutil.which(b))
    plan = StoragePlan(stacks=["plain"], medium=parse_medium("ram"),
                       workloads=["bigfile", "rsync"], size=256 << 20)
    with pytest.raises(UserError, match="the rsync workload needs rsync: cryptcost install rsync"):
        validate(plan)
    validate(StoragePlan(stacks=["plain"], medium=parse_medium("ram"), workloads=["bigfile"],
                         size=256 << 20))


class _FakeRun:
    """bonnie.Run's interface, without bonnie++: each phase a second of its file."""

    def __init__(self, directory, size, logfile=None):
        self.size, self.done, self.stopped, self.fail = size, [], False, None

    def start(self):
        pass

    def phase(self, name, timeout, before=None):
        from cryptcost.engines.bonnie import Phase
        if before:
            before(Path("/nonexistent/Bonnie.1"))
        self.done.append(name)
        return Phase(name, 1.0, self.size)

    def finish(self):
        if self.fail:
            raise self.fail
        return {"write": {"bytes_per_s": 1.0, "cpu_percent": 9.0}}

    def stop(self):
        self.stopped = True


def _bonnie_ops():
    [step] = wl.BUILDERS["bonnie"](wl.Sizes(medium=256 << 20), False)
    return step, {op.op: op for op in step.ops}


def test_bonnie_evicts_its_file_where_the_stack_can_with_it_open_and_says_warm_where_not(
        monkeypatch):
    from cryptcost.engines import bonnie
    from cryptcost.runner.storage import programs
    monkeypatch.setattr(bonnie, "Run", _FakeRun)
    dropped = []
    monkeypatch.setattr(programs, "drop_caches", lambda: dropped.append(1))
    step, ops = _bonnie_ops()
    assert [o.op for o in step.ops] == ["write", "rewrite", "read"]
    assert ops["read"].intended_bytes == 102 << 20 and ops["read"].block_bytes == 8192

    class Stack:
        name, resets_open_files = "s", True
        forgot: list = []

        def forget(self, res, path):
            self.forgot.append(path.name)
            return "fadvise_dontneed"

        def settle(self):
            return 0.25

    inst = Instance(Stack(), "s", "measured", Path("/nonexistent"))
    b = programs.Bonnies(None)
    said = {op: b.phase(inst, ops[op], step) for op in ("write", "rewrite", "read")}
    assert said["write"][3]["cache_mode"] == "fsync" and said["write"][2] == 1.25  # + settle
    assert said["rewrite"][2] == 1.25 and said["read"][2] == 1.0                    # no settle
    assert said["read"][3]["cache_mode"] == "fsync+fadvise-dontneed"
    assert Stack.forgot == ["Bonnie.1", "Bonnie.1"] and not dropped
    assert said["read"][:2] == (102 << 20, (102 << 20) // 8192)
    assert b.end("s") == {"write": {"bytes_per_s": 1.0, "cpu_percent": 9.0}}
    # a page cache below the device: every clean page dropped instead
    inst.cached_below = True
    b.phase(inst, ops["write"], step)
    assert b.phase(inst, ops["read"], step)[3]["cache_mode"] == "fsync+drop-caches" and dropped
    # a stack whose reset is a remount cannot reset under bonnie++'s open file: said, not hidden
    Stack.resets_open_files = False
    got = b.phase(inst, ops["rewrite"], step)[3]
    assert got["cache_mode"] == "warm" and "remount" in got["warm_because"]


def test_a_bonnie_run_cut_short_is_stopped_and_a_failed_finish_loses_only_its_own_figures(
        monkeypatch, caplog):
    from cryptcost.engines import bonnie
    from cryptcost.errors import CryptcostError
    from cryptcost.runner.storage import programs
    monkeypatch.setattr(bonnie, "Run", _FakeRun)
    step, ops = _bonnie_ops()

    class Stack:
        name, resets_open_files = "s", True

        def forget(self, res, path):
            return "x"

        def settle(self):
            return 0.0

    b = programs.Bonnies(None)
    inst = Instance(Stack(), "s", "measured", Path("/nonexistent"))
    b.phase(inst, ops["write"], step)
    run = b.runs["s"]
    assert b.end("s") is None and run.stopped                   # its read never ran
    for op in ("write", "rewrite", "read"):
        b.phase(inst, ops[op], step)
    run = b.runs["s"]
    run.fail = CryptcostError("bonnie++ ended before its test 5")
    assert b.end("s") is None and run.stopped and "own figures" in caplog.text
    with pytest.raises(CryptcostError, match="without its write"):
        b.phase(inst, ops["read"], step)


def test_tuning_compares_variants_with_two_samples_or_more_and_says_what_it_could_not():
    """A stack's variants on one 1 MiB cell: the fastest against each other one with at least
    two samples (a difference where the interval says so, none where it does not); variants
    measured once are counted in one line, never ranked."""
    from cryptcost.analysis import tuning

    def r(stack, values, bs=1 << 20):
        return Stored.of({"kind": "storage", "stack": stack, "workload": "seq", "op": "write",
                          "block_bytes": bs, "values": values, "iodepth": 1,
                          "median_bytes_per_s": sorted(values)[len(values) // 2]})

    rs = [r("luks:a", [100e6, 101e6, 99e6]), r("luks:b", [80e6, 81e6, 79e6]),
          r("luks:c", [99e6, 102e6, 100.5e6]), r("luks:d", [90e6]), r("luks:e", [120e6]),
          r("luks:a", [1e6, 1e6], bs=4096), r("luks:b", [2e6, 2e6], bs=4096), r("plain", [5e9])]
    assert tuning(rs) == [
        "luks seq write 1 MiB: 2 of its 5 variants measured once, not compared "
        "(a comparison needs 2 samples of each)",
        "luks seq write 1 MiB: luks:c vs luks:a: no significant difference",
        "luks seq write 1 MiB: luks:c is +26 % vs luks:b on this host",
    ]
    assert tuning([r("luks:a", [1e6]), r("luks:b", [2e6])]) == [
        "luks seq write 1 MiB: 2 of its 2 variants measured once, not compared "
        "(a comparison needs 2 samples of each)"]
