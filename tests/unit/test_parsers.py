"""Parsers against real captured outputs (tests/fixtures/tools)."""

import pytest

from cryptcost.engines import go, kernel as kernel_engine, openssl
from cryptcost.host import cpu, kernel
from cryptcost.model import Cell


def test_openssl_single(fixture_text):
    assert openssl.parse_speed(fixture_text("openssl_speed_aes-256-xts_4096.txt")) == pytest.approx(
        float(fixture_text("openssl_speed_aes-256-xts_4096.txt").split("+F:25:AES-256-XTS:")[1]))


def test_openssl_multi_takes_the_parents_sum(fixture_text):
    text = fixture_text("openssl_speed_multi2_aes-128-gcm.txt")
    children = [
        float(l.rsplit(":", 1)[1].split()[0]) for l in text.splitlines() if l.startswith("Got: +F")
    ]
    assert len(children) == 2
    assert openssl.parse_speed(text) == pytest.approx(sum(children), rel=1e-6)


def test_openssl_hmac_and_legacy(fixture_text):
    assert openssl.parse_speed(fixture_text("openssl_speed_hmac_sha256.txt")) > 1e8
    assert openssl.parse_speed(fixture_text("openssl_speed_legacy_bf-cbc.txt")) > 1e7


def test_openssl_accel_off_capture_is_slower(fixture_text):
    on = openssl.parse_speed(fixture_text("openssl_speed_aes-256-xts_4096.txt"))
    off = openssl.parse_speed(fixture_text("openssl_speed_aes-256-xts_4096_accel_off.txt"))
    assert on / off > 3


def test_openssl_unknown_cipher_output_is_refused(fixture_text):
    with pytest.raises(ValueError):
        openssl.parse_speed(fixture_text("openssl_speed_unknown.txt"))


def test_openssl_argv_for_each_family():
    e = openssl.OpenSSLEngine()
    cell = lambda alg, t=1, accel=True: Cell.cipher("openssl", alg, 4096, t, accel)
    assert e.argv(cell("aes-256-xts"), 1)[-2:] == ["-evp", "aes-256-xts"]
    assert e.argv(cell("hmac-sha256"), 1)[-2:] == ["-hmac", "sha256"]
    assert "legacy" in e.argv(cell("bf-cbc"), 1)
    argv = e.argv(cell("aes-128-gcm", t=2), 1)
    assert argv[argv.index("-multi") + 1] == "2"
    assert e.env(cell("aes-256-xts", accel=False)) == {"OPENSSL_ia32cap": openssl.ACCEL_OFF_MASK}


def test_gocryptfs_speed(fixture_text):
    rates, accel = go.parse_speed(fixture_text("gocryptfs_speed.txt"))
    assert accel is True
    assert set(rates) == {"aes-256-gcm", "aes-256-siv", "xchacha20-poly1305"}
    off, accel_off = go.parse_speed(fixture_text("gocryptfs_speed_accel_off.txt"))
    assert accel_off is False
    assert rates["aes-256-gcm"] / off["aes-256-gcm"] > 3


def test_cryptsetup_benchmark(fixture_text):
    rows = kernel_engine.parse_benchmark(fixture_text("cryptsetup_benchmark_2x.txt"))
    enc, dec = rows[("aes-xts", 512)]
    assert enc == pytest.approx(349.5 * 2**20)
    assert dec == pytest.approx(356.6 * 2**20)
    assert len(rows) == 12


def test_cryptsetup_without_af_alg_is_an_error_although_it_exits_0(fixture_text):
    with pytest.raises(ValueError, match="not available"):
        kernel_engine.parse_benchmark(fixture_text("cryptsetup_benchmark_no_af_alg.txt"))


def test_proc_crypto_driver_selection(fixture_text):
    drivers = kernel.crypto_drivers(fixture_text("proc_crypto.txt"))
    assert drivers["cbc(aes)"]["driver"] == "cbc(ecb(aes-fixed-time))"
    assert drivers["cbc(aes)"]["implementation"] == "software"
    assert drivers["aes"]["driver"] == "aes-fixed-time"      # priority 101 beats aes-generic's 100
    assert kernel.classify_driver("xts-aes-vaes-avx512") == "hardware-accelerated"
    assert kernel.classify_driver("xts(ecb(aes-generic))") == "software"


def test_cpuinfo_flags(fixture_text):
    info = cpu.cpu_info(fixture_text("proc_cpuinfo.txt"))
    assert info["model"]
    assert set(cpu.CRYPTO_FLAGS) <= set(info["flags"])
    assert info["flags"]["aes"] is True


def test_proc_stat_split(fixture_text):
    before = cpu.stat_snapshot(fixture_text("proc_stat.txt"))
    after = {k: [v + 100 * (i == 0) + 300 * (i == 3) for i, v in enumerate(vals)]
             for k, vals in before.items()}
    split = cpu.cpu_split(before, after)
    assert split.user == pytest.approx(100 / cpu.CLK_TCK)        # the aggregate "cpu" line
    assert split.busy == pytest.approx(split.user)
    assert split.max_core_busy == pytest.approx(0.25)


def test_free_page_reporting_is_recorded_with_its_settings_and_said_when_on(tmp_path, monkeypatch):
    """A VM that hands freed memory to its host: the settings are recorded (not the counters,
    which differ in every run), and the host notes name it; without it, nothing is said."""
    from cryptcost.host import kernel, probe
    params = tmp_path / "parameters"
    params.mkdir()
    (params / "page_reporting_order").write_text("9\n")
    (params / "reported_kib").write_text("123\n")
    (params / "reported_kib").chmod(0o444)
    balloon = tmp_path / "virtio_balloon"
    (balloon / "virtio0").mkdir(parents=True)
    (balloon / "virtio0" / "features").write_text("0110010100\n")
    monkeypatch.setattr(kernel, "BALLOON", str(balloon))
    got = kernel.page_reporting(params)
    assert got == {"page_reporting_order": 9, "enabled": True}
    info = {"cpu": {"flags": {}, "governor": "performance"}, "crypto_drivers": {"xts(aes)": {}},
            "root": True, "page_reporting": got}
    assert any("free page reporting" in n for n in probe.notes(info))
    (balloon / "virtio0" / "features").write_text("0110000100\n")
    info["page_reporting"] = kernel.page_reporting(params)
    assert info["page_reporting"]["enabled"] is False
    assert not any("free page reporting" in n for n in probe.notes(info))
    assert kernel.page_reporting(tmp_path / "absent") is None


def test_a_damon_scheme_that_pages_out_idle_memory_is_recorded_and_said(tmp_path):
    """DAMON's admin tree as the kernel lays it out: a running kdamond's pageout scheme is
    recorded with the idle time after which it acts (minimum age × aggregation interval) and its
    quota, and the host notes say so; a stopped kdamond, or a scheme of another action, is not."""
    from cryptcost.host import kernel, probe
    root = tmp_path / "kdamonds"

    def scheme(kd: int, state: str, action: str) -> None:
        ctx = root / str(kd) / "contexts" / "0"
        (root / str(kd) / "state").parent.mkdir(parents=True, exist_ok=True)
        (root / str(kd) / "state").write_text(state + "\n")
        files = {"operations": "paddr", "monitoring_attrs/intervals/aggr_us": "5000000",
                 "schemes/0/action": action, "schemes/0/access_pattern/age/min": "12",
                 "schemes/0/quotas/bytes": str(128 << 20),
                 "schemes/0/quotas/reset_interval_ms": "1000"}
        for rel, text in files.items():
            (ctx / rel).parent.mkdir(parents=True, exist_ok=True)
            (ctx / rel).write_text(text + "\n")
    scheme(0, "on", "pageout")
    scheme(1, "off", "pageout")
    scheme(2, "on", "stat")
    (root / "nr_kdamonds").write_text("3\n")
    got = kernel.damon_pageout(root)
    assert got == [{"kdamond": 0, "operations": "paddr", "idle_s": 60.0,
                    "quota_bytes": 128 << 20, "quota_reset_ms": 1000}]
    info = {"cpu": {"flags": {}, "governor": "performance"}, "crypto_drivers": {"xts(aes)": {}},
            "root": True, "damon_pageout": got}
    said = [n for n in probe.notes(info) if "DAMON" in n]
    assert len(said) == 1 and "idle for 60 s" in said[0] and "128 MiB every 1000 ms" in said[0]
    info["damon_pageout"] = []
    assert not any("DAMON" in n for n in probe.notes(info))
    assert kernel.damon_pageout(tmp_path / "absent") is None


def test_free_page_reporting_is_held_off_above_the_largest_block_and_the_run_says_so(
    tmp_path, monkeypatch
):
    """A measuring run sets the reporting order to one no free block reaches (the allocator's
    number of orders, read from /proc/buddyinfo), through the journalled settings; the host
    notes then say it was held off, or why not; ``keep`` leaves it alone."""
    from cryptcost.errors import CryptcostError
    from cryptcost.host import kernel, probe
    from cryptcost.lifecycle.release import SETTINGS
    from cryptcost.runner.core import quiet
    buddy = tmp_path / "buddyinfo"
    buddy.write_text(
        "Node 0, zone      DMA      0      0      0      0      0      0      0      0      1    "
        "  1      3\n"
        "Node 0, zone   Normal   9911   3924   2117   1163    815    435   1197    786    392    "
        " 62    374\n"
    )
    assert kernel.free_block_orders(str(buddy)) == 11
    assert kernel.free_block_orders(str(tmp_path / "absent")) is None
    assert kernel.PAGE_REPORTING_ORDER in SETTINGS  # restored from the journal, by cleanup too

    class Res:
        def __init__(self, refuse=None, above=None):
            self.set, self.refuse, self.above = [], refuse, above

        def setting(self, path, value):
            if self.refuse and (self.above is None or int(value) > self.above):
                raise self.refuse
            self.set.append((path, value))

    monkeypatch.setattr(
        kernel, "page_reporting", lambda: {"page_reporting_order": 9, "enabled": True}
    )
    monkeypatch.setattr(kernel, "free_block_orders", lambda: 11)
    monkeypatch.setattr(kernel, "reported_bytes", lambda: 5 << 20)
    res = Res()
    held = quiet.hold_page_reporting(res)
    assert res.set == [(kernel.PAGE_REPORTING_ORDER, "11")]
    assert held == {"held": True, "order": 11, "was": 9, "reported_before": 5 << 20}
    info = {
        "cpu": {"flags": {}, "governor": "performance"}, "crypto_drivers": {"xts(aes)": {}},
        "root": True, "page_reporting": {"page_reporting_order": 9, "enabled": True, "run": held},
    }
    assert any(
        "held that off for the run (page_reporting_order 9 → 11" in n for n in probe.notes(info)
    )
    monkeypatch.setattr(kernel, "reported_bytes", lambda: 7 << 20)
    assert quiet.reported_since(info) == 2 << 20           # what was reported while it was held
    res = Res()
    assert quiet.hold_page_reporting(res, "keep") == {
        "held": False, "why": "kept on (--page-reporting keep)", "reported_before": 7 << 20,
    }
    assert res.set == []
    refused = quiet.hold_page_reporting(Res(refuse=OSError(22, "Invalid argument")))
    assert refused["held"] is False and "refused order 11: Invalid argument" in refused["why"]
    info["page_reporting"]["run"] = refused
    assert any(
        "not held off for this run" in n and "Invalid argument" in n for n in probe.notes(info)
    )
    assert quiet.reported_since(info) is None              # nothing to count from
    assert quiet.hold_page_reporting(Res(refuse=CryptcostError("no")))["held"] is False
    # a kernel that takes no order above its largest (10): only blocks of order 10 are reported
    res = Res(refuse=OSError(22, "Invalid argument"), above=10)
    partly = quiet.hold_page_reporting(res)
    assert res.set == [(kernel.PAGE_REPORTING_ORDER, "10")]
    assert (
        partly["held"] is False
        and partly["order"] == 10
        and "only blocks of order 10" in partly["why"]
    )
    monkeypatch.setattr(
        kernel, "page_reporting", lambda: {"page_reporting_order": 9, "enabled": False}
    )
    res = Res()
    assert quiet.hold_page_reporting(res) is None and res.set == []


def test_the_memory_the_passes_take_is_touched_once_before_the_first_sample(monkeypatch):
    """2 × the medium (a pass file at every layer it crosses, with room to spare), at most a
    quarter of what is available; touching it says what it took."""
    from cryptcost.host import cpu
    from cryptcost.runner.core import quiet
    from cryptcost.runner import storage
    monkeypatch.setattr(cpu, "memory", lambda: {"total": 24 << 30, "available": 20 << 30})
    assert storage.warm_bytes(512 << 20) == 2 * (512 << 20)
    monkeypatch.setattr(cpu, "memory", lambda: {"total": 4 << 30, "available": 2 << 30})
    assert storage.warm_bytes(1 << 30) == 512 << 20
    got = quiet.warm_memory(8 << 20)
    assert got["bytes"] == 8 << 20 and got["seconds"] >= 0 and got["bytes_per_s"] > 0
    # one writer per CPU, each a share: together they fill the area exactly, whatever its size
    import ctypes
    for writers in (1, 2, 3):
        monkeypatch.setattr(cpu, "memory_writers", lambda n=writers: n)
        filled, real = [], ctypes.memset
        monkeypatch.setattr(ctypes, "memset", lambda at, byte, n: filled.append((at, n))
                            or real(at, byte, n))
        size = (3 << 20) + 4097
        assert quiet.warm_memory(size)["bytes"] == size
        monkeypatch.setattr(ctypes, "memset", real)
        start = min(at for at, _ in filled)
        spans = sorted((at - start, n) for at, n in filled)
        assert len(spans) == writers
        assert [at for at, _ in spans] == [sum(n for _, n in spans[:i]) for i in range(writers)]
        assert sum(n for _, n in spans) == size


def test_the_kernel_engine_primes_each_cipher_once_untimed_and_keeps_the_first_speed(
    fixture_text, monkeypatch
):
    """A fresh kernel's first ``cryptsetup benchmark`` of a cipher pays a one-time start-up
    (50× slower in a fresh guest): it is run once before the first sample, never kept as one."""
    from cryptcost import proc
    from cryptcost.model import Cell
    text = fixture_text("cryptsetup_benchmark_2x.txt")
    slow = text.replace("349.5 MiB/s", "7.0 MiB/s")
    calls = []

    def fake_run(argv, **kw):
        calls.append(argv)
        return proc.Completed(list(argv), 0, slow if len(calls) == 1 else text, "", 1.0)
    monkeypatch.setattr(kernel_engine.proc, "run", fake_run)
    monkeypatch.setattr(kernel_engine.kernel, "drivers_for", lambda alg: {})
    engine = kernel_engine.KernelEngine()
    cell = Cell.cipher(
        engine="kernel", algorithm="aes-256-xts", buffer_bytes=65536, threads=1, accel=True
    )
    first, second = engine.measure(cell), engine.measure(cell)
    assert len(calls) == 3  # one priming run, then one per sample
    assert first.value == second.value == pytest.approx(349.5 * 2**20)
    assert first.metrics["first_run_bytes_per_s"] == pytest.approx(7.0 * 2**20)
    assert "first_run_bytes_per_s" not in second.metrics


def test_a_cipher_result_says_when_its_untimed_first_run_was_a_start_up():
    from cryptcost.model import Cell
    from cryptcost.model import Sample
    from cryptcost.runner.ciphers import _result
    from cryptcost.runner.core.scheduler import Series

    cell = Cell.cipher(
        engine="kernel", algorithm="aes-256-xts", buffer_bytes=65536, threads=1, accel=True
    )
    series = Series(
        [Sample(26e6, 1.0, metrics={"first_run_bytes_per_s": 0.5e6}), Sample(25e6, 1.0)]
    )
    result = _result(cell, series, {cell: series}, {})
    assert result.metrics["first_run_bytes_per_s"] == 0.5e6
    assert any("first run of this cipher ran 0.5 MB/s" in n for n in result.notes)
    steady = Series([Sample(26e6, 1.0, metrics={"first_run_bytes_per_s": 24e6}), Sample(25e6, 1.0)])
    assert not any("first run" in n for n in _result(cell, steady, {cell: steady}, {}).notes)


def test_dbench_throughput_is_its_timed_runs_and_a_sample_its_whole_run(fixture_text):
    from cryptcost.engines import dbench
    from cryptcost.errors import CryptcostError
    out = dbench.parse(fixture_text("dbench_2clients.txt"), 2, 2, 2.6)
    assert out.bytes_per_s == pytest.approx(617.255e6) and out.clients == 2
    assert out.seconds == 2 and out.bytes == int(617.255e6 * 2.6)   # the warm-up at its rate
    with pytest.raises(CryptcostError, match="dbench printed no throughput"):
        dbench.parse("Operation Count AvgLat MaxLat\n", 2, 2, 2.6)


def test_bonnies_own_figures_are_kib_per_second_and_none_where_too_fast_for_its_clock(
        fixture_text):
    from cryptcost.engines import bonnie
    from cryptcost.errors import CryptcostError
    own = bonnie.parse(fixture_text("bonnie_1G.txt").splitlines())
    assert own["write"] == {"bytes_per_s": 1345290 * 1024, "cpu_percent": 69.0}
    assert own["rewrite"] == own["read"] == {"bytes_per_s": None, "cpu_percent": None}  # +++++
    assert own["version"] == "2.00a"
    with pytest.raises(CryptcostError, match="no CSV line"):
        bonnie.parse(["", "1:", "", "2:"])


def test_bonnies_phases_are_timed_until_it_closes_its_file(tmp_path):
    """Each phase runs when cryptcost answers bonnie++'s prompt and ends at the file's close:
    the three phases of a real run, the cache reset called before the rewrite and the read
    only, and the written file of the size asked for (bonnie++ on a directory of /tmp)."""
    from cryptcost.engines import bonnie
    from tests.conftest import skip_or_fail
    if not bonnie.available():
        skip_or_fail("bonnie", "bonnie++ is not installed (apt-get install bonnie++)")
    import time
    run = bonnie.Run(tmp_path / "b", 8 << 20, logfile=str(tmp_path / "log"))
    before = []
    try:
        run.start()
        done = [run.phase(p, 60, before=lambda f, p=p: before.append((p, f.stat().st_size)))
                if p != "write" else run.phase(p, 60) for p in bonnie.PHASES]
        start = time.monotonic()
        own = run.finish()
        after_read = time.monotonic() - start
    finally:
        run.stop()
    # the read returns at its close; bonnie++'s wait for its seek workers comes after, in finish,
    # outside the read's time and CPU window (the runner counts the CPU before it finishes)
    assert after_read >= bonnie.SEEK_START * 0.9 and run.done == list(bonnie.PHASES)
    assert [d.name for d in done] == ["write", "rewrite", "read"]
    assert all(d.bytes == 8 << 20 and 0 < d.seconds < 30 for d in done)
    assert before == [("rewrite", 8 << 20), ("read", 8 << 20)]
    assert own["version"].startswith("2.") and set(own) >= set(bonnie.PHASES)
    assert not list((tmp_path / "b").iterdir())            # bonnie++ removed its file
    with pytest.raises(Exception, match="whole MiB"):
        bonnie.Run(tmp_path / "c", 1000).start()
