"""Stack facts: declared once in the plugin, stored with every result, and the
only thing the analysis knows of a stack. Adding a stack is one file."""

import json
import sqlite3
import textwrap
from pathlib import Path

import pytest

from cryptcost import stacks
from cryptcost.analysis import analyze
from cryptcost.record import CipherRef, Host, Stored, read as read_all
from cryptcost.errors import CryptcostError
from cryptcost.store.db import Store
from tests.conftest import FIXTURES


def _result(stack, op, value, *, facts, cpus=None, part=None, baseline=None, vs=None, bs=1 << 20):
    return {
        "kind": "storage", "stack": stack, "workload": "seq", "op": op, "block_bytes": bs,
        "iodepth": 1, "cpus": cpus, "part": part, "medium": "ram", "fs": "ext4", "size": 256 << 20,
        "median_bytes_per_s": value, "values": [value * 0.99, value, value * 1.01], "samples": 3,
        "ci95": [value * 0.98, value * 1.02], "baseline": baseline, "vs": vs or {},
        "overhead": (vs or {}).get(baseline, {}).get("overhead"), "params": {"facts": facts},
        "notes": [], "cpu": {"max_core_busy": 0.5},
    }


PLAIN = {
    "kind": "storage", "layer": "kernel", "role": "baseline", "use_case": None, "baselines": [],
    "security": [],
}
NOVEL = {"kind": "storage", "layer": "fuse", "role": "measured", "use_case": "any-filesystem",
         "baselines": ["plain"], "security": ["novelfs hides nothing at all"], "cipher": None}


def test_pairing_uses_the_full_cell_key():
    """cpus = [1, 2] and two parts: each result pairs with its own baseline."""
    results = []
    for part in ("R1", "R3"):
        for cpus in (1, 2):
            base = 100e6 * cpus + (1e6 if part == "R3" else 0)
            results.append(_result("plain", "read", base, facts=PLAIN, cpus=cpus, part=part))
            results.append(
                _result(
                    "novelfs", "read", base / 2, facts=NOVEL, cpus=cpus, part=part,
                    baseline="plain", vs={"plain": {"overhead": 0.5, "significant": True}},
                )
            )
    a = analyze(results, {"cpu": {}})
    for i, r in enumerate(results):
        if r["stack"] == "novelfs":
            device = a.verdicts[i].ceilings["device"]
            assert device == 100e6 * r["cpus"] + (1e6 if r["part"] == "R3" else 0)
    assert len({Stored.of(r).paired() for r in results}) == len(results)


def test_an_unknown_stack_is_ranked_and_its_facts_repeated():
    """A stack this cryptcost has never heard of (a run imported from another
    host) is ranked under its declared use case, with its security facts."""
    results = [_result("plain", op, 400e6, facts=PLAIN) for op in ("read", "write")]
    results += [
        _result(
            "novelfs", op, 300e6, facts=NOVEL, baseline="plain",
            vs={"plain": {"overhead": 0.25, "significant": True}},
        )
        for op in ("read", "write")
    ]
    a = analyze(results, {"cpu": {}})
    assert [r.stack for r in a.ranking] == ["novelfs"]
    rec = next(r for r in a.recommendations if r.use_case == "any-filesystem")
    assert "novelfs" in rec.text and "Novelfs hides nothing at all." in rec.text
    assert a.ranking[0].relative_to_plain == pytest.approx(0.75)


def test_a_store_from_before_facts_is_migrated(tmp_path):
    """A v3 store (no facts) reports like a new one after the migration."""
    run = json.loads((FIXTURES / "runs" / "quick-vm.json").read_text())
    db = tmp_path / "old.db"
    store = Store.open(db)
    store.conn.execute("PRAGMA user_version = 3")
    store.conn.commit()
    run_id = store.begin_run("run", run["host"])
    for r in run["results"]:
        r.get("params", {}).pop("facts", None)
        store.conn.execute("INSERT INTO results(run_id, kind, series, data) VALUES (?,?,?,?)",
                           (run_id, r["kind"], "{}", json.dumps(r)))
    store.conn.execute(
        "UPDATE runs SET extra = ? WHERE id = ?",
        (json.dumps({"skipped": [{"stack": "luks", "reason": "no dm-crypt"}]}), run_id),
    )
    store.conn.commit()
    store.close()
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA user_version = 3")
    conn.commit()
    conn.close()
    store = Store.open(db)
    results = store.results(run_id)
    gocryptfs = next(r for r in results if r.get("stack", "").startswith("gocryptfs"))
    assert gocryptfs["params"]["facts"]["layer"] == "fuse"
    assert gocryptfs["params"]["facts"]["baselines"] == ["fuse-passthrough", "plain"]
    a = analyze(results, store.run(run_id).host, store.run(run_id).extra["skipped"])
    assert {r.stack.split(":")[0] for r in a.ranking} >= {"gocryptfs", "fscrypt", "luks-userspace"}
    whole = next(r for r in a.recommendations if r.use_case == "whole-disk")
    assert "LUKS2 aes-xts-plain64 with 4096-byte sectors" in whole.text


PLUGIN = '''
"""``novelfs``: a FUSE overlay used to prove that a stack is one file."""
from cryptcost.host.tools import Tool
from cryptcost.stacks.fs import FuseStack


class Novelfs(FuseStack):
    name = "novelfs"
    description = "a FUSE overlay that exists only in this test"
    tools = (Tool("novelfs", "novelfs-cryptcost-test", "novelfs-pkg", ()),)
    security = ("novelfs hides nothing at all",)

    def mount_argv(self, res):
        return ["novelfs-cryptcost-test", str(self.lower), str(self.mnt)]
'''


@pytest.fixture
def extra_plugin(tmp_path, monkeypatch):
    """A plugin file dropped next to the real ones (in a directory on the
    package's search path), and the registry reloaded."""
    (tmp_path / "novelfs.py").write_text(PLUGIN)
    monkeypatch.setattr(stacks, "__path__", [*stacks.__path__, str(tmp_path)])
    stacks.registry.cache_clear()
    yield tmp_path
    stacks.registry.cache_clear()


def test_adding_a_stack_is_one_file(extra_plugin):
    reg = stacks.registry()
    assert "novelfs" in reg
    # availability says why and how to get it: the command that installs the plugin's Tool
    entry = next(s for s in stacks.availability() if s["name"] == "novelfs")
    assert entry["available"] is False and entry["install"] == "cryptcost install novelfs"
    from cryptcost.suite import needs
    assert "novelfs-pkg" in next(n for n in needs.resolve(["novelfs"])).packages
    # the package list make must install, and CI's required list, come from the registry
    assert stacks.packages()["novelfs-pkg"] == {"novelfs"}
    assert "novelfs" in stacks.expected_on({"fuse", "loop"}, {"novelfs-pkg", "bindfs", "e2fsprogs"})
    assert "novelfs" not in stacks.expected_on({"fuse", "loop"}, {"bindfs", "e2fsprogs"})
    # the docs table
    assert (
        "| `novelfs` | storage | fuse | measured | any-filesystem | `fuse-passthrough`, `plain` |"
        in stacks.markdown_table()
    )
    # its facts as every result stores them
    facts = reg["novelfs"]().facts()
    assert facts["use_case"] == "any-filesystem" and facts["layer"] == "fuse"
    assert facts["tools"] == {"novelfs": "novelfs-pkg"}


def test_an_incomplete_plugin_is_refused_with_what_it_lacks(tmp_path, monkeypatch):
    (tmp_path / "brokenfs.py").write_text(textwrap.dedent('''
        from cryptcost.stacks.fs import FuseStack
        class Broken(FuseStack):
            name = "brokenfs"
            description = "lacks its security facts and names a baseline that does not exist"
            baselines = ("nosuchfs",)
            variants = {"default": {}, "twin": {"reads_like": "nosuchtwin"}}
            def mount_argv(self, res):
                return []
    '''))
    monkeypatch.setattr(stacks, "__path__", [*stacks.__path__, str(tmp_path)])
    stacks.registry.cache_clear()
    try:
        with pytest.raises(CryptcostError) as info:
            stacks.registry()
    finally:
        stacks.registry.cache_clear()
    text = str(info.value)
    assert (
        "brokenfs" in text
        and "security facts" in text
        and "'nosuchfs' is not a registered stack" in text
        and "reads_like 'nosuchtwin' is not a registered stack" in text
    )


def test_every_real_plugin_declares_complete_facts():
    for name, cls in stacks.registry().items():
        for variant in cls.variants:
            f = (
                cls(variant).facts()
                if cls.kind == "network"
                else cls(variant, cls.filesystems[0]).facts()
            )
            assert f["kind"] in ("storage", "network") and f["layer"] in (
                "kernel", "fuse", "userspace",
            )
            if f["role"] == "measured":
                assert f["use_case"] and f["security"] and f["baselines"], (name, variant)


def test_stacks_whose_difference_is_noise_share_a_rank():
    results = [_result("plain", op, 400e6, facts=PLAIN) for op in ("read", "write")]
    for name, value, spread in (
        ("fast", 300e6, 0.01), ("noisy", 290e6, 0.3), ("slow", 100e6, 0.01),
    ):
        for op in ("read", "write"):
            r = _result(name, op, value, facts=NOVEL, baseline="plain",
                        vs={"plain": {"overhead": 1 - value / 400e6, "significant": True}})
            r["values"] = [
                value * (1 - spread), value, value * (1 + spread), value * (1 - spread / 2),
            ]
            results.append(r)
    a = analyze(results, {"cpu": {}})
    assert [(r.stack, r.rank, r.tie) for r in a.ranking] == [
        ("fast", 1, False), ("noisy", 1, True), ("slow", 3, False)]
    rec = next(r for r in a.recommendations if r.use_case == "any-filesystem")
    assert "fast and noisy tie for the fastest" in rec.text and "is the fastest" not in rec.text


def _spread_result(name, op, value, spread):
    r = _result(name, op, value, facts=NOVEL, baseline="plain",
                vs={"plain": {"overhead": 1 - value / 400e6, "significant": True}})
    r["values"] = [value * (1 - spread), value, value * (1 + spread), value * (1 - spread / 2)]
    return r


def test_a_chain_of_ties_never_ranks_a_stack_with_one_it_is_slower_than():
    """A ~ B and B ~ C, but C is significantly slower than A: C starts its own rank."""
    results = [_result("plain", op, 400e6, facts=PLAIN) for op in ("read", "write")]
    for name, value, spread in (("a", 300e6, 0.01), ("b", 250e6, 0.4), ("c", 200e6, 0.01)):
        results += [_spread_result(name, op, value, spread) for op in ("read", "write")]
    a = analyze(results, {"cpu": {}})
    assert [(r.stack, r.rank, r.tie) for r in a.ranking] == [
        ("a", 1, False), ("b", 1, True), ("c", 3, False)]


def test_stacks_that_trade_places_share_a_rank_and_the_text_says_where_each_wins():
    """x is significantly faster at reads, y at writes: neither is the fastest."""
    results = [_result("plain", op, 400e6, facts=PLAIN) for op in ("read", "write")]
    for name, read, write in (("x", 300e6, 150e6), ("y", 200e6, 240e6)):
        results += [
            _spread_result(name, "read", read, 0.01),
            _spread_result(name, "write", write, 0.01),
        ]
    a = analyze(results, {"cpu": {}})
    assert [(r.stack, r.rank, r.tie) for r in a.ranking] == [("x", 1, False), ("y", 1, True)]
    rec = next(r for r in a.recommendations if r.use_case == "any-filesystem")
    assert "is the fastest" not in rec.text and "no stack wins on every cell" in rec.text
    assert (
        "y and x trade places: y is significantly faster at writes and slower at reads" in rec.text
    )


def _cipher(alg, accel, value, threads=1, size=4096):
    return {
        "kind": "cipher", "engine": "openssl", "algorithm": alg, "accel": accel, "threads": threads,
        "buffer_bytes": size, "median_bytes_per_s": value, "values": [value] * 3,
    }


KERNEL = {"kind": "storage", "layer": "kernel", "role": "measured", "use_case": "per-directory",
          "baselines": ["plain"], "security": ["x"]}
SOFT_HOST = {
    "cpu": {"cores": 2, "flags": {"aes": True}},
    "crypto_drivers": {
        "xts(aes)": {"driver": "xts(ecb(aes-fixed-time))", "implementation": "software"}
    },
}


def _kernel_result(value, iodepth=1, cpus=None):
    r = _result("kfs", "read", value, facts=KERNEL, baseline="plain", cpus=cpus,
                vs={"plain": {"overhead": 0.9, "significant": True}})
    r["iodepth"] = iodepth
    r["params"]["cipher_ref"] = {
        "algorithm": "aes-256-xts", "where": "kernel", "unit": 4096, "exact": True,
    }
    return r


def test_cipher_bound_needs_the_stack_to_reach_the_ceiling():
    base = _result("plain", "read", 1000e6, facts=PLAIN)
    ceiling = _cipher("aes-256-xts", False, 100e6)
    near = analyze([base, _kernel_result(90e6), ceiling], SOFT_HOST).verdicts[1]
    assert near.bottleneck == "cipher" and near.ceilings["ratio"]["cipher"] == pytest.approx(0.9)
    assert "90% of the cipher ceiling" in near.sentence and "aes-fixed-time" in near.sentence
    far = analyze([base, _kernel_result(30e6), ceiling], SOFT_HOST).verdicts[1]
    assert far.bottleneck != "cipher"  # a software driver alone proves nothing
    none = analyze([base, _kernel_result(30e6)], SOFT_HOST).verdicts[1]
    assert none.bottleneck != "cipher" and "?" not in none.sentence
    assert "not measured" in none.sentence


def test_every_cpu_busy_below_the_ceilings_is_the_machines_cpu_not_one_core_or_latency():
    """fscrypt's reads on this host's software AES: 37 MB/s, far below the
    OpenSSL stand-in ceiling (440 MB/s), with both CPUs ~90 % busy in the
    kernel's decryption workers. Not latency, and not one core."""
    base = _result("plain", "read", 1000e6, facts=PLAIN)
    ceiling = _cipher("aes-256-xts", False, 440e6)
    r = _kernel_result(37e6)
    r["cpu"] = {"max_core_busy": 0.92, "machine_busy": 0.88}
    v = analyze([base, r, ceiling], SOFT_HOST).verdicts[1]
    assert v.bottleneck == "cpu" and "all 2 CPUs were 88% busy" in v.sentence
    assert "every core" in v.sentence and "no parallelism" not in v.sentence
    r["cpu"] = {"max_core_busy": 0.92, "machine_busy": 0.55}  # one core saturated, the other idle
    v = analyze([base, r, ceiling], SOFT_HOST).verdicts[1]
    assert v.bottleneck == "cpu" and "no parallelism" in v.sentence
    r["cpu"] = {"max_core_busy": 0.6, "machine_busy": 0.55}
    v = analyze([base, r, ceiling], SOFT_HOST).verdicts[1]   # not a bare latency: the host
    assert v.bottleneck == "software-aes" and "aes-fixed-time" in v.sentence   # names a cause
    assert "no ceiling proves" in v.sentence


def test_the_cipher_ceiling_uses_the_threads_the_stack_can_use():
    base = _result("plain", "read", 1000e6, facts=PLAIN)
    one, two = _cipher("aes-256-xts", False, 100e6), _cipher("aes-256-xts", False, 150e6, threads=2)
    qd32 = analyze([base, _kernel_result(140e6, iodepth=32, cpus=2), one, two], SOFT_HOST).verdicts[
        1
    ]
    assert qd32.ceilings["cipher"] == pytest.approx(150e6) and qd32.bottleneck == "cipher"
    qd1 = analyze([base, _kernel_result(95e6), one, two], SOFT_HOST).verdicts[1]
    assert qd1.ceilings["cipher"] == pytest.approx(100e6)


def test_a_stack_that_splits_one_request_over_threads_meets_that_many_threads_ceiling():
    """gocryptfs encrypts a 128 KiB FUSE write in two goroutines and decrypts
    in one: its write ceiling is Go's one-thread speed times OpenSSL's
    measured gain from 1 to 2 threads, its read ceiling one thread's."""
    from cryptcost.analysis.bottleneck import cipher_ceiling
    from cryptcost.stacks import get
    cref = CipherRef.of(get("gocryptfs")("aes-gcm-go").cipher_ref())
    go = Stored.of({**_cipher("aes-256-gcm", True, 1000e6), "engine": "go"})
    ossl = read_all(
        [_cipher("aes-256-gcm", True, 800e6), _cipher("aes-256-gcm", True, 1400e6, threads=2)]
    )
    host = Host.of({"cpu": {"cores": 2}})
    w = {"kind": "storage", "op": "write", "block_bytes": 1 << 20, "accel": True}
    write = Stored.of(w)
    value, how = cipher_ceiling(cref, [go, *ossl], host, 1, write)
    assert (
        value == pytest.approx(1000e6 * 1400 / 800) and "measured gain from 1 to 2 threads" in how
    )
    assert cipher_ceiling(cref, [go, *ossl], host, 1, Stored.of({**w, "op": "read"}))[
        0
    ] == pytest.approx(1000e6)
    assert cipher_ceiling(cref, [go, *ossl], host, 1, Stored.of({**w, "block_bytes": 4096}))[
        0
    ] == pytest.approx(1000e6)
    assert cipher_ceiling(cref, [go, *ossl], Host.of({"cpu": {"cores": 1}}), 1, write)[
        0
    ] == pytest.approx(1000e6)
    value, how = cipher_ceiling(cref, [go], host, 1, write)  # no OpenSSL pair: said as assumed
    assert value == pytest.approx(2000e6) and "assumed linear" in how


def test_the_cipher_table_holds_the_threads_each_stack_runs_its_cipher_with():
    """On 2 CPUs the quick suite's gocryptfs write and WireGuard need their
    ciphers at 2 threads; Go's engine runs one, so OpenSSL's 1- and
    2-thread cells stand beside it."""
    from cryptcost.model import Cell
    from cryptcost.suite import ceiling_cells, compile_plan
    from cryptcost.workloads.plan import Part, RunPlan, load
    plan = load("quick", None)
    cells = set(ceiling_cells(compile_plan(plan)[0],
                              {"cpu": {"cores": 2, "cores_usable": 2}}))
    assert Cell.cipher("openssl", "aes-256-gcm", 4096, 2, True) in cells
    assert Cell.cipher("openssl", "aes-256-gcm", 4096, 1, True) in cells
    assert Cell.cipher("openssl", "chacha20-poly1305", 1420, 2, True) in cells
    assert not any(c.engine == "go" and c.threads > 1 for c in cells)
    one = set(ceiling_cells(compile_plan(plan)[0],
                            {"cpu": {"cores": 1, "cores_usable": 1}}))
    assert all(c.threads == 1 for c in one)
    every = RunPlan(
        "t", parts=[Part("p", storage={"stacks": ["gocryptfs:*"], "workloads": ["seq-1m"]})]
    )
    cells = ceiling_cells(compile_plan(every)[0], {"cpu": {"cores": 2, "cores_usable": 2}})
    assert (
        Cell.cipher("go", "xchacha20-poly1305", 4096, 1, True) in cells
    )  # OpenSSL has no XChaCha20:
    assert not any(
        c.engine == "openssl" and c.algorithm == "xchacha20-poly1305" for c in cells
    )  # no gain cell


def test_near_the_baseline_with_a_significant_overhead_is_not_called_free():
    base = _result("plain", "read", 100e6, facts=PLAIN)
    r = _result("kfs", "read", 90e6, facts=KERNEL, baseline="plain",
                vs={"plain": {"overhead": 0.1, "significant": True}})
    r["overhead_significant"] = True
    v = analyze([base, r], {"cpu": {}}).verdicts[1]
    assert v.bottleneck == "device" and "not the crypto" not in v.sentence
    assert "significant 10.0 %" in v.sentence


def test_one_sample_a_side_is_untested_never_no_significant_difference():
    """A run of one sample per cell (a guest's quick check) has an overhead but no test behind it:
    the pairing stores its significance as unknown, and the verdict, the result's row and the
    cost split say "untested", never "no significant difference" (a test that never ran)."""
    from cryptcost import stats
    from cryptcost.report import document
    cmp = stats.compare([100e6], [90e6])
    assert cmp.significant is None and cmp.verdict == stats.UNTESTED
    assert stats.compare([100e6, 101e6], [90e6, 90.5e6]).significant is not None
    base = _result("plain", "read", 100e6, facts=PLAIN)
    kernel = {**KERNEL, "baselines": ["plain"]}
    r = _result("kfs", "read", 98e6, facts=kernel, baseline="plain",
                vs={"plain": {"overhead": 0.02, "significant": None}})
    r.update(overhead_significant=None, values=[98e6], samples=1)
    v = analyze([base, r], {"cpu": {}}).verdicts[1]
    assert "untested against its baseline" in v.sentence and "no significant" not in v.sentence
    row = document.storage_row(read_all([r])[0], v)
    assert row.vs == "-2.0 % untested vs plain" and row.against == "plain"
    r["overhead_significant"] = False
    assert document.storage_row(read_all([r])[0], v).vs == "n.s. vs plain"


def test_every_fuse_stack_is_paired_with_a_passthrough_of_its_library_and_options():
    """The first baseline of a FUSE stack is a passthrough on the same FUSE
    library, asking the kernel for the same request sizes (big_writes)."""
    from cryptcost.stacks import get, of_kind, parse_spec

    fuse = {
        n: c for n, c in of_kind("storage").items() if c.layer == "fuse" and c.role != "baseline"
    }
    assert {"securefs", "encfs", "cryfs", "gocryptfs", "rclone-crypt"} <= set(fuse)
    unpackaged = {"bazil.org/fuse (rclone's)"}  # no passthrough of it exists: same options only
    for name, cls in fuse.items():
        stack = cls(cls.default_variants[0] if cls.default_variants else None)
        bcls, bvariant = parse_spec(cls.baselines[0], "storage")[0]
        base = bcls(bvariant)
        assert base.layer == "fuse" and base.variant_role() == "baseline", name
        assert tuple(base.fuse_options) == tuple(stack.fuse_options), name
        if stack.fuse_library not in unpackaged:
            assert base.fuse_library == stack.fuse_library, name
    assert get("fuse-passthrough")("big-writes").fuse_options == ("big_writes",)


def test_a_host_whose_cpu_speed_moves_is_named_as_the_noise_floor():
    """OpenSSL's samples depend on nothing but the CPU: when they spread, the run
    says the host was not steady, before any other finding; a quiet host says nothing."""
    quiet = [{**_cipher(a, True, 1e9), "values": [1e9, 1.01e9, 0.995e9]} for a in ("x", "y", "z")]
    assert not any("not steady" in f for f in analyze(quiet, {"cpu": {}}).findings)
    noisy = [
        {**_cipher(a, True, 1.7e9), "values": [1.70e9, 2.64e9, 2.30e9]} for a in ("x", "y", "z")
    ]
    first = analyze(noisy, {"cpu": {}}).findings[0]
    assert "CPU's own speed was not steady" in first and "3 cells" in first
    assert not any(
        "not steady" in f for f in analyze(noisy[:2], {"cpu": {}}).findings
    )  # too few to say


def test_every_stack_with_a_twin_gets_its_cost_split_and_the_twin_names_what_it_adds():
    """reference → twin → stack for any stack with two baselines, not only FUSE
    ones: fscrypt over ext4 with the encrypt feature over ext4 without it."""
    fscrypt = {**PLAIN, "layer": "kernel", "role": "measured", "use_case": "per-directory",
               "baselines": ["plain:encrypt-feature", "plain"], "security": ["names leak"]}
    twin = {**PLAIN, "baselines": ["plain"], "isolates": "ext4's encrypt feature"}
    results = [
        _result("plain", "write", 1000e6, facts=PLAIN),
        _result(
            "plain:encrypt-feature", "write", 600e6, facts=twin, baseline="plain",
            vs={"plain": {"overhead": 0.4, "significant": True}},
        ),
        _result(
            "fscrypt",
            "write",
            450e6,
            facts=fscrypt,
            baseline="plain:encrypt-feature",
            vs={
                "plain:encrypt-feature": {"overhead": 0.25, "significant": True},
                "plain": {"overhead": 0.55, "significant": True},
            },
        ),
        _result("novelfs", "write", 300e6, facts=NOVEL, baseline="plain"),
    ]  # one baseline: no split
    rows = analyze(results, {"cpu": {}}).split
    assert [(x.stack, x.twin, x.isolates, x.fuse) for x in rows] == \
        [("fscrypt", "plain:encrypt-feature", "ext4's encrypt feature", False)]
    assert rows[0].total == pytest.approx(0.55) and rows[0].shared == pytest.approx(0.4)
    assert rows[0].own == pytest.approx(0.15) and rows[0].own_significant is True
    # an operation with no block size (tar's unpacking, dbench: stored as 0) shows none
    from cryptcost.model import Run
    from cryptcost.report import document
    untar = [{**r, "workload": "smallfiles", "op": "untar", "block_bytes": 0}
             for r in results]
    doc = document.build(Run(id=1, started="", command="run", host={"cpu": {}}), untar)
    assert [(x.op, x.block) for x in doc.split] == [("untar", "—")]


def test_the_twins_between_a_stack_and_its_reference_say_what_they_add():
    """Every baseline that is a stack's first of two declares ``isolates``, so the
    split never names a twin by its stack name alone."""
    classes = stacks.registry()
    for cls in classes.values():
        if len(cls.baselines) < 2:
            continue
        name, _, variant = cls.baselines[0].partition(":")
        assert classes[name](variant or None).facts()["isolates"], (cls.name, cls.baselines[0])


def test_a_twin_variant_is_compared_with_its_own_baseline():
    """plain:encrypt-feature is a baseline of fscrypt and is itself compared with
    plain, so its overhead is what the feature costs and its verdict is not
    "the device ceiling"."""
    from cryptcost.model import Cell, Sample
    from cryptcost.runner.core.pairing import against_baselines
    from cryptcost.runner.core.scheduler import Series
    twin, plain = stacks.get("plain")("encrypt-feature"), stacks.get("plain")()
    assert (
        twin.baselines == ("plain",)
        and twin.facts()["baselines"] == ["plain"]
        and plain.baselines == ()
    )
    cell = Cell(
        kind="storage", stack=twin.label, workload="seq", op="write", block_bytes=1 << 20,
        accel=True,
    )
    series = {
        cell.but(stack="plain"): Series(samples=[Sample(v, 1.0) for v in (1000e6, 1010e6, 990e6)]),
        cell.but(op="read", stack="plain"): Series(samples=[Sample(1e6, 1.0)] * 3),
    }  # another cell
    metrics, _ = against_baselines(twin, cell, [600e6, 610e6, 590e6], series)
    assert metrics["baseline"] == "plain" and metrics["overhead"] == pytest.approx(0.4, abs=0.01)
    r = _result(
        "plain:encrypt-feature", "write", 600e6, facts={**PLAIN, "baselines": ["plain"]},
        **{"baseline": "plain", "vs": {"plain": {"overhead": 0.4, "significant": True}}},
    )
    a = analyze([_result("plain", "write", 1000e6, facts=PLAIN), r], {"cpu": {}})
    assert "plaintext baseline" not in a.verdicts[1].sentence


def test_a_verdict_never_gives_a_negative_cost_or_a_twin_crypto():
    """A stack significantly faster than its baseline is not "device-bound with a
    crypto cost of -40 %"; a twin, which encrypts nothing, is not told "not the crypto"."""
    fast = _result("novelfs", "write", 140e6, facts=NOVEL, baseline="plain",
                   vs={"plain": {"overhead": -0.4, "significant": True}})
    fast["overhead_significant"] = True
    twin = _result(
        "plain:encrypt-feature", "write", 98e6,
        facts={**PLAIN, "baselines": ["plain"], "isolates": "ext4's encrypt feature"},
        baseline="plain", vs={"plain": {"overhead": 0.02, "significant": False}},
    )
    a = analyze([_result("plain", "write", 100e6, facts=PLAIN), fast, twin], {"cpu": {}})
    said = a.verdicts[1].sentence
    assert "-40" not in said and "significantly faster than its baseline (40.0 %)" in said
    assert a.verdicts[1].bottleneck == "unknown"  # not "device": the ceiling is void
    said = a.verdicts[2].sentence
    assert "crypto" not in said and said.endswith("not ext4's encrypt feature")


def test_suites_select_network_stacks_by_their_declared_facts(tmp_path, monkeypatch):
    """A copy of tls.py under another name is in the quick and standard suites; a plugin that
    declares no ``suites`` is in the standard one at its default variants, not in the quick one."""
    from cryptcost.workloads.plan import load
    text = (Path(stacks.__file__).parent / "tls.py").read_text()
    (tmp_path / "tlscopy.py").write_text(text.replace('name = "tls"', 'name = "tlscopy"'))
    (tmp_path / "tlsplain.py").write_text(text.replace('name = "tls"', 'name = "tlsplain"').replace(
        '    suites = {"quick": "", "standard": "*", "full": "*"}\n', ""))
    monkeypatch.setattr(stacks, "__path__", [*stacks.__path__, str(tmp_path)])
    stacks.registry.cache_clear()
    try:
        planned = {s: [x for p in load(s, None).parts if p.network for x in p.network["stacks"]]
                   for s in ("quick", "standard", "full", "seeds")}
    finally:
        stacks.registry.cache_clear()
    assert (
        "tlscopy" in planned["quick"]
        and "tlscopy:*" in planned["standard"]
        and "tlscopy:*" in planned["full"]
    )
    assert "tlsplain" not in planned["quick"] and "tlsplain" in planned["standard"]
    assert "tlsplain:*" in planned["full"] and "tlscopy" in planned["seeds"]  # R3's every stack
    assert not any(
        s.startswith("tcp") for p in planned.values() for s in p
    )  # a baseline comes with its stack


def test_a_stack_whose_mac_follows_its_cipher_has_both_in_the_cipher_table():
    """IPsec's aes128-sha1 needs aes-128-cbc and hmac-sha1 at its packet size, for the two in
    series; null-aesxcbc, AES-XCBC's stand-in alone."""
    from cryptcost.model import Cell
    from cryptcost.suite import ceiling_cells, compile_plan
    from cryptcost.workloads.plan import Part, RunPlan
    plan = RunPlan("t", parts=[Part("p", network={
        "stacks": ["ipsec:aes128-sha1", "ipsec:null-aesxcbc"], "workloads": ["send"]})])
    cells = set(ceiling_cells(compile_plan(plan)[0], {"cpu": {"cores": 2, "cores_usable": 2}},
                              here=False))
    assert cells == {Cell.cipher("openssl", a, 1400, 1, True)
                     for a in ("aes-128-cbc", "hmac-sha1")}
