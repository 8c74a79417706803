"""CPU profiles: perf's report parsed, its rows sorted into layers, and the
bottleneck named from them where the ceilings alone cannot."""

from dataclasses import replace

import pytest

from cryptcost.analysis import analyze, bottleneck, evidence, profile
from cryptcost.engines import perf
from cryptcost.record import Profile, ProfileRow


SPANS = [(56467.592063, 56468.042063), (56468.792063, 56469.042063)]     # the fixtures' --time


def _report_rows(text: str) -> dict[tuple, int]:
    """``perf report --no-children -g none -n --sort comm,dso,sym -t '\\t'``'s rows, by key."""
    import re
    out: dict[tuple, int] = {}
    for line in text.splitlines():
        parts = [p.strip() for p in line.split("\t")]
        if line.startswith("#") or len(parts) < 5 or not parts[0].endswith("%"):
            continue
        where = "kernel" if parts[4].startswith("[k]") else "user"
        sym = parts[4][3:].strip()
        sym = "(no symbols)" if where == "user" and re.match(r"^0x[0-9a-f]+$", sym) else sym
        key = (parts[2], parts[3], sym, where)
        out[key] = out.get(key, 0) + int(parts[1])
    return out


def test_samples_counted_by_their_leaf_are_perf_reports_own_rows(fixture_text):
    """One ``perf script`` read serves both the rows and the flame graph: counted by leaf
    (command, shared object, symbol), its samples give exactly the rows ``perf report`` gives
    for the same recording and spans."""
    samples = perf.parse_script(fixture_text("perf_script_spans.txt"))
    rows, total = perf.rows(samples)
    assert total == len(samples) == 279
    assert {(r["comm"], r["dso"], r["sym"], r["where"]): r["samples"] for r in rows} == \
        _report_rows(fixture_text("perf_report_spans.txt"))
    assert rows == sorted(rows, key=lambda r: -r["share"]) and sum(
        r["share"] for r in rows
    ) == pytest.approx(1)
    # libcrypto has no symbols here: its addresses are one row, the library's own code
    [crypto] = [r for r in rows if r["dso"].startswith("libcrypto") and r["sym"] == "(no symbols)"]
    assert crypto["comm"] == "openssl" and crypto["samples"] > 10
    split = profile.layers(Profile.of({"rows": rows}))
    assert split.shares["cipher"] > 0.1                          # openssl's AES, in libcrypto
    assert split.cipher_symbols[0] == "libcrypto.so.3"
    assert profile.sentence(split).endswith(
        "; the cipher ran in " + ", ".join(split.cipher_symbols)
    )
    # each cell takes the samples inside its own spans from the one read
    first, second = perf.inside(samples, SPANS[:1]), perf.inside(samples, SPANS[1:])
    assert first and second and len(first) + len(second) == total
    assert all(SPANS[0][0] <= x.time <= SPANS[0][1] for x in first)


def _row(share, sym, comm="fio", dso="[kernel.kallsyms]", where="kernel"):
    return {"share": share, "comm": comm, "dso": dso, "sym": sym, "where": where}


FSCRYPT = [
    _row(0.31, "pv_native_safe_halt", comm="swapper"),
    _row(0.14, "aesti_encrypt", comm="kworker/u4:1"), _row(0.10, "aesti_decrypt", comm="fio"),
    _row(0.06, "_copy_to_iter"), _row(0.05, "xts_crypt"), _row(0.04, "filemap_read"),
    _row(0.03, "ext4_mpage_readpages"), _row(0.03, "blk_mq_submit_bio"),
    _row(0.02, "td_io_queue", dso="fio", where="user"), _row(0.02, "do_syscall_64"),
]


@pytest.mark.parametrize(
    "row, layer",
    [
        (_row(0.1, "aesni_xts_encrypt"), "cipher"),
        (_row(0.1, "xts_crypt"), "cipher"),
        (_row(0.1, "alloc_slab_obj_exts"), "kernel, other"),  # "xts" inside a word: no cipher
        (_row(0.1, "gcm_ghash_pclmulqdq"), "cipher"),
        (_row(0.1, "chacha_4block_xor_avx2"), "cipher"),
        (_row(0.1, "copy_user_enhanced_fast_string"), "copy"),
        (_row(0.1, "copy_folio_from_iter_atomic"), "copy"),
        (_row(0.1, "fuse_dev_do_read"), "fuse"),
        (_row(0.1, "ext4_da_write_begin"), "page cache"),
        (_row(0.1, "loop_process_work"), "block"),
        (_row(0.1, "intel_idle", comm="swapper"), "idle"),
        (_row(0.1, "tcp_sendmsg_locked", comm="iperf3"), "network"),
        (_row(0.1, "veth_xmit"), "network"),
        (_row(0.1, "__netif_receive_skb_core"), "network"),
        (_row(0.1, "nf_hook_slow"), "network"),
        (_row(0.1, "entry_SYSCALL_64_after_hwframe"), "syscall, TUN"),
        (_row(0.1, "tun_get_user"), "syscall, TUN"),
        (_row(0.1, "finish_task_switch.isra.0"), "syscall, TUN"),
        (_row(0.1, "do_syscall_64"), "syscall, TUN"),
        (_row(0.1, "tcp_sendmsg", comm="iperf3", dso="iperf3", where="user"), "user, other"),
        (
            _row(0.1, "0x00000000000de01c", comm="openssl", dso="libcrypto.so.3", where="user"),
            "cipher",
        ),
        (
            _row(
                0.1, "crypto/aes.encryptBlocksGCM", comm="gocryptfs", dso="gocryptfs", where="user"
            ),
            "cipher",
        ),
        (
            _row(
                0.1, "fuse_session_loop_mt", comm="securefs", dso="libfuse.so.2.9.9", where="user"
            ),
            "fuse",
        ),
        (
            _row(0.1, "main.(*file).Read", comm="gocryptfs", dso="gocryptfs", where="user"),
            "stack (user)",
        ),
        (_row(0.1, "td_io_queue", dso="fio", where="user"), "measuring tool"),
        (
            _row(0.1, "__memmove_avx_unaligned_erms", comm="fio", dso="libc.so.6", where="user"),
            "copy",
        ),
        (_row(0.1, "get_page_from_freelist"), "memory"),
        (_row(0.1, "exc_page_fault"), "memory"),
        (_row(0.1, "kmem_cache_alloc_noprof"), "memory"),
        (_row(0.1, "__memcg_slab_free_hook"), "memory"),
        (_row(0.1, "unmap_page_range"), "memory"),
        (_row(0.1, "__alloc_frozen_pages_noprof"), "memory"),
        (_row(0.1, "charge_memcg"), "memory"),
        (_row(0.1, "__account_obj_stock"), "memory"),
        (_row(0.1, "xas_load"), "kernel, other"),
    ],
)
def test_each_row_lands_in_its_layer(row, layer):
    assert profile.layer(ProfileRow.of(row), frozenset({"gocryptfs", "securefs"})) == layer


def test_layers_are_shares_of_the_busy_cpu_and_name_what_ran_the_cipher():
    split = profile.layers(Profile.of({"rows": FSCRYPT}))
    assert split.busy == pytest.approx(0.49)
    assert split.of_busy["cipher"] == pytest.approx(0.29 / 0.49)
    assert split.cipher_symbols[:2] == ("aesti_encrypt", "aesti_decrypt")
    assert split.unlisted == pytest.approx(0.20)
    assert "idle" not in split.of_busy and sum(split.of_busy.values()) == pytest.approx(1)
    assert (
        profile.layers(None) is None and profile.layers(Profile.of({"error": "perf died"})) is None
    )


def test_samples_where_interrupts_came_back_on_are_charged_to_the_code_that_held_them_off():
    """A cpu-clock sample due while interrupts are off lands at their re-enable: that row's
    share goes to the first callers below it that are not locks, in proportion to the stacks
    that ended there, per command; a command without such stacks keeps "kernel, other"."""
    rows = [
        _row(0.4, "_raw_spin_unlock_irqrestore"), _row(0.2, "aesti_encrypt"),
        _row(0.1, "_raw_spin_unlock_irq", comm="kworker/0:1"),
        _row(0.3, "pv_native_safe_halt", comm="swapper"),
    ]
    folded = {
        "fio;entry_SYSCALL_64_[k];filemap_add_folio_[k];__filemap_add_folio_[k];"
        "_raw_spin_unlock_irqrestore_[k]": 3,
        "fio;entry_SYSCALL_64_[k];fuse_dev_queue_req_[k];__wake_up_[k];_raw_spin_lock_[k];"
        "_raw_spin_unlock_irqrestore_[k]": 1,
        "fio;aesti_encrypt_[k]": 2,
    }
    assert profile.held_off(folded) == {"fio": {"page cache": 0.75, "fuse": 0.25}}
    split = profile.layers(Profile.of({"rows": rows, "folded": folded}))
    assert split.shares["page cache"] == pytest.approx(0.3) and split.shares[
        "fuse"
    ] == pytest.approx(0.1)
    assert split.shares["kernel, other"] == pytest.approx(0.1)  # the worker's: no stack to say
    without = profile.layers(Profile.of({"rows": rows}))
    assert (
        without.shares["kernel, other"] == pytest.approx(0.5) and "page cache" not in without.shares
    )


def _result(stack="fscrypt:aes-256-xts", rows=FSCRYPT, value=41e6):
    return {
        "kind": "storage",
        "stack": stack,
        "workload": "seq",
        "op": "read",
        "block_bytes": 1 << 20,
        "iodepth": 1,
        "medium": "ram",
        "fs": "ext4",
        "size": 1 << 29,
        "accel": True,
        "median_bytes_per_s": value,
        "baseline": "plain",
        "cpu": {"max_core_busy": 0.8},
        "params": {
            "facts": {"role": "measured", "layer": "kernel", "baselines": ["plain"]},
            "cipher_ref": {"algorithm": "aes-256-xts", "where": "kernel", "unit": 4096},
        },
        "vs": {"plain": {"overhead": 0.9, "significant": True}},
        **({"profile": {"rows": rows}} if rows else {}),
    }


def test_a_profile_where_the_cipher_takes_most_of_the_busy_cpu_makes_the_verdict_cipher():
    plain = {**_result("plain", rows=None, value=900e6), "baseline": None, "vs": {},
             "params": {"facts": {"role": "baseline", "layer": "kernel"}}}
    without = analyze([_result(rows=None), plain], {"cpu": {}}).verdicts[0]
    assert without.bottleneck != "cipher"  # the ceilings alone: no cipher table, no verdict
    v = analyze([_result(), plain], {"cpu": {}}).verdicts[0]
    assert v.bottleneck == "cipher" and "59% of the busy CPU ran the cipher" in v.sentence
    assert "aesti_encrypt" in v.sentence and f"said {without.bottleneck}" in v.sentence
    assert v.ceilings["rule"].startswith("profile:")
    # the JSON export carries the layer shares beside each verdict
    import json
    from cryptcost.model import Run
    from cryptcost.report.render import render
    run = Run(1, "2026-11-27", "storage", {"cpu": {}}, "complete")
    [row] = [
        b
        for b in json.loads(render("json", run, [_result(), plain]))["analysis"]["bottlenecks"]
        if b["stack"] != "plain"
    ]
    assert row["layers"]["cipher"] == pytest.approx(0.59, abs=0.01) and sum(
        row["layers"].values()
    ) == pytest.approx(1)
    # a profile where the cipher is a small share is evidence beside the verdict, never the verdict
    light = [_row(0.6, "pv_native_safe_halt", comm="swapper"), _row(0.05, "aesti_encrypt"),
             _row(0.2, "_copy_to_iter"), _row(0.15, "filemap_read")]
    v = analyze([_result(rows=light), plain], {"cpu": {}}).verdicts[0]
    assert v.bottleneck == without.bottleneck and "where the busy CPU went (perf" in v.sentence
    assert "50% copy" in v.sentence


def test_a_device_bound_verdict_stays_whatever_the_profile():
    v = bottleneck.Verdict("device", "x: at its baseline's speed", {})
    assert (
        evidence.with_profile(v, profile.layers(Profile.of({"rows": FSCRYPT})), "x").bottleneck
        == "device"
    )


def test_without_perf_a_profile_is_refused_naming_the_command_that_installs_it(monkeypatch):
    from cryptcost.errors import Unavailable, UserError

    monkeypatch.setattr(
        perf, "PERF", perf.PERF.__class__("perf", "cc-no-such-perf", "linux-perf", ())
    )
    with pytest.raises(Unavailable, match="perf is not installed") as exc:
        perf.require()
    assert exc.value.install == "cryptcost install perf" and isinstance(
        exc.value, UserError
    )  # exit 2, one line


def test_perf_script_is_folded_into_stacks_root_first(fixture_text):
    """Each sample's chain, outermost caller first under its command; kernel frames marked
    ``_[k]``; a library perf could not name is one ``[library]`` frame; every sample counted
    once."""
    text = fixture_text("perf_script_openssl.txt")
    samples = sum(1 for line in text.splitlines() if line.strip() and not line[0].isspace())
    folded = perf.fold(text)
    assert sum(folded.values()) == samples
    assert all(";;" not in k and k.split(";", 1)[0] for k in folded)
    assert folded == dict(
        sorted(folded.items(), key=lambda kv: (-kv[1], kv[0]))
    )  # the most sampled first
    crypto = {
        k: n for k, n in folded.items() if k.startswith("openssl;") and "[libcrypto.so.3]" in k
    }
    assert crypto and not any("[libcrypto.so.3];[libcrypto.so.3]" in k for k in crypto)
    syscall = next(k for k in folded if k.startswith("openssl;read;entry_SYSCALL_64"))
    assert syscall.split(";")[2:4] == ["entry_SYSCALL_64_after_hwframe_[k]", "do_syscall_64_[k]"]
    few = perf.fold(text, keep=10, depth=4)
    assert (
        len(few) <= 10 + len({k.split(";", 1)[0] for k in folded}) and sum(few.values()) == samples
    )
    assert any(k.endswith(";(rarer stacks)") for k in few)
    assert all(len(k.split(";")) <= 1 + 1 + 4 for k in few)  # command, "…", 4 frames
    assert any(";…;" in k for k in few)


def test_a_flame_graph_per_profiled_stack_coloured_by_layer(fixture_text):
    from cryptcost.record import read
    from cryptcost.report import flame
    folded = perf.fold(fixture_text("perf_script_openssl.txt"))
    idle = {
        "swapper;secondary_startup_64_[k];cpu_startup_entry_[k];do_idle_[k];"
        "pv_native_safe_halt_[k]": 50
    }
    base = {
        "kind": "storage", "workload": "seq", "op": "write", "block_bytes": 1 << 20, "iodepth": 1,
    }
    results = read([{**base, "stack": "gocryptfs", "profile": {"folded": folded}},
                    {**base, "stack": "gocryptfs", "op": "read", "profile": {"folded": idle}},
                    {**base, "stack": "plain"}])
    merged = flame.by_stack(results)
    assert (
        list(merged) == ["gocryptfs"]
        and sum(merged["gocryptfs"].values()) == sum(folded.values()) + 50
    )
    [(stack, svg)] = flame.graphs(results).items()
    assert (
        stack == "gocryptfs"
        and svg.startswith("<svg")
        and svg == flame.draw("gocryptfs", merged["gocryptfs"])
    )
    assert "openssl" in svg and "pv_native_safe_halt" not in svg         # the idle loop is left out
    busy = sum(n for k, n in folded.items() if not flame._idle(k))
    assert 0 < busy < sum(folded.values()) and f"{busy} of {sum(folded.values()) + 50}" in svg
    assert (
        flame.COLOURS["cipher"] in svg and flame._layer("[libcrypto.so.3]", "openssl") == "cipher"
    )
    assert flame._layer("aesni_xts_encrypt_[k]", "kworker") == "cipher"
    assert flame.draw("idle", idle) is None


def test_a_flame_graph_leaves_out_boxes_too_narrow_to_see_and_draws_the_rest_at_once():
    """One collection of boxes, not a patch each; a frame under a tenth of a pixel wide
    (MIN_BOX of the busy samples) is not drawn, nor labelled, nor in the legend."""
    from cryptcost.report import flame
    folded = {"fio;vfs_read_[k];aesti_decrypt_[k]": 6000, "fio;vfs_read_[k];filemap_read_[k]": 3999,
              "fio;tiny_frame_[k];copy_page_[k]": 1}
    svg = flame.draw("x", folded)
    assert "aesti_decrypt" in svg and "filemap_read" in svg
    assert "tiny_frame" not in svg and flame.COLOURS["copy"] not in svg
    assert svg.count("<path") < 40                   # boxes in one collection, not an artist each
    wider = {**folded, "fio;tiny_frame_[k];copy_page_[k]": 100}
    assert flame.COLOURS["copy"] in flame.draw("x", wider)    # 1 %: drawn and in the legend


def test_a_busy_flame_graphs_boxes_are_one_image_and_its_text_stays_text():
    """A profiled small-files cell draws some 1700 boxes: as SVG paths they made the seeds
    report's graphs 3.2 MB of its 4.9; drawn as one raster image under the text, a few
    tens of KB each."""
    from cryptcost.report import flame
    folded = {f"fio;vfs_{i % 40}_[k];frame_{i}_[k];leaf_{i}_[k]": 10 for i in range(1500)}
    folded["fio;vfs_read_[k];aesti_decrypt_[k]"] = 1000       # 6 %: labelled
    svg = flame.draw("many", folded)
    assert svg.count("<image") == 1 and "data:image/png;base64," in svg
    assert "aesti_de" in svg and flame.COLOURS["cipher"] in svg     # its label, the legend
    assert len(svg) < 100_000, len(svg)              # 625 KB as paths


def test_the_html_report_draws_each_profiled_cell_by_layer_beside_its_baseline():
    from cryptcost.model import Run
    from cryptcost.report import charts, document, flame

    plain = {
        **_result(
            "plain", rows=[_row(0.5, "filemap_read"), _row(0.5, "_copy_to_iter")], value=900e6
        ),
        "baseline": None,
        "vs": {},
        "role": "baseline",
        "params": {"facts": {"role": "baseline", "layer": "kernel"}},
    }
    run = Run(1, "2026-11-27", "storage", {"cpu": {}}, "complete")
    doc = document.build(run, [_result(), plain])
    rows = doc.storage
    assert [r.stack for r in rows if r.layers] == ["fscrypt:aes-256-xts", "plain"]
    svg = flame.layer_bars(rows)
    assert svg and flame.COLOURS["cipher"] in svg and flame.COLOURS["page cache"] in svg
    assert svg.index("plain read 1 MiB") < svg.index(
        "fscrypt:aes-256-xts read 1 MiB"
    )  # the baseline first
    assert flame.layer_bars([replace(r, layers=None) for r in rows]) is None
    assert charts.all_charts([_result(), plain], doc)["layers"] == svg


def test_a_window_starts_where_its_work_began_and_the_readers_take_only_the_spans(monkeypatch):
    """A pass's window opens before fio starts; fio says, from its first I/O, when the work
    began, and the span kept (what perf report and perf script read) starts there."""
    import time
    rec = perf.Recording(path=None, daemon=None, ctl=-1, ack=-1, res=None)
    said = []
    monkeypatch.setattr(perf.Recording, "_say", lambda self, command: said.append(command))
    with rec.window() as starts_at:
        opened = time.clock_gettime(time.CLOCK_BOOTTIME)
        time.sleep(0.05)
        starts_at(opened + 0.03)                     # the tool's start-up took 30 ms
    with rec.window() as starts_at:
        starts_at(None)                              # no first I/O known: the whole window
    # by the event's name: a bare "disable" switches off perf's tracking of new processes too
    assert said == [b"enable cpu-clock", b"disable cpu-clock"] * 2 and len(rec.spans) == 2
    (a, b), (c, d) = rec.spans
    assert a == opened + 0.03 and b - a < 0.05 and d - c < 0.05
    assert perf.within(rec.spans) == ["--time", f"{a:.6f},{b:.6f} {c:.6f},{d:.6f}"]
    assert perf.within([]) == [] == perf.within(None)


def test_a_profiler_that_fails_says_so_and_never_fails_the_work_it_watches(monkeypatch, tmp_path):
    """perf that cannot start (or dies) leaves the watched passes running: the cell's profile
    holds the error, the samples are the runner's."""
    from types import SimpleNamespace

    from cryptcost.engines import perf
    from cryptcost.errors import CryptcostError
    from cryptcost.model import Cell, Sample
    from cryptcost.runner.core import profile as core_profile

    def broken(res, path):
        raise CryptcostError("perf record exited (1)")
    monkeypatch.setattr(perf, "record", broken)
    op = SimpleNamespace(key="write")
    inst = SimpleNamespace(label="x")
    cell = Cell(kind="storage", stack="x", workload="seq", op="write")

    class Runner:
        window = core_profile.unwatched

        def __call__(self, inst, step):
            with self.window(inst, op) as starts_at:
                starts_at(None)
            return {(inst.label, op.key): Sample(5.0, 1.0)}
    res = SimpleNamespace(tmpdir=lambda prefix: tmp_path)
    runner = Runner()
    profiler = core_profile.Profiler(
        res, runner, {("x", "write"): cell}, core_profile.IN_WARMUP, runs=1
    )
    with profiler.watching():
        got = runner(inst, None)
        profiler.saw(got)
    assert got[("x", "write")].value == 5.0 and runner.window is core_profile.unwatched
    assert profiler.finish()[cell] == {
        "how": core_profile.IN_WARMUP,
        "error": "perf record exited (1)",
    }


def test_a_recording_waits_until_perf_answers_before_any_window(monkeypatch, tmp_path):
    """perf answers nothing until it has started (tens of seconds in an emulated guest): a
    recording pings it, with a long wait, before the first window asks it to sample."""
    from types import SimpleNamespace
    said = []
    monkeypatch.setattr(perf, "require", lambda: None)
    monkeypatch.setattr(
        perf.Recording, "_say",
        lambda self, command, timeout=perf.ACK_TIMEOUT: said.append((command, timeout)),
    )
    res = SimpleNamespace(daemon=lambda argv, logfile=None: SimpleNamespace(argv=argv))
    rec = perf.record(res, tmp_path / "r.data")
    assert said == [(b"ping", perf.READY_TIMEOUT)] and perf.READY_TIMEOUT > perf.ACK_TIMEOUT
    assert rec.daemon.argv[:3] == ["perf", "record", "-e"]



def test_perf_ends_once_the_runs_it_watches_are_done(monkeypatch, tmp_path):
    """The warm-up round ends before any measured sample: perf ends with the last run it
    watches, so no perf process runs beside a measured sample; its file is read after."""
    from contextlib import contextmanager
    from types import SimpleNamespace

    from cryptcost.model import Cell, Sample
    from cryptcost.runner.core import profile as core_profile
    events = []

    class Rec:
        spans = []

        @contextmanager
        def window(self):
            events.append("on")
            yield lambda began: None
            self.spans.append((1.0, 2.0))
            events.append("off")

        def close(self):
            events.append("perf ended")
            return tmp_path / "round.data"
    monkeypatch.setattr(perf, "record", lambda res, path: Rec())
    monkeypatch.setattr(perf, "stacks", lambda path, spans: events.append("read") or [])
    op, cell = (
        SimpleNamespace(key="write"),
        Cell(kind="storage", stack="x", workload="seq", op="write"),
    )

    class Runner:
        window = core_profile.unwatched

        def __call__(self, inst, step):
            with self.window(inst, op):
                pass
            return {(inst.label, "write"): Sample(5.0, 1.0)}
    runner = Runner()
    res = SimpleNamespace(tmpdir=lambda prefix: tmp_path)
    profiler = core_profile.Profiler(res, runner, {("a", "write"): cell, ("b", "write"): cell},
                                     core_profile.IN_WARMUP, runs=2)
    for label in ("a", "b"):
        with profiler.watching():
            runner(SimpleNamespace(label=label), None)
        runner(SimpleNamespace(label=label), None)          # a measured run: nothing watches it
    assert events == ["on", "off", "on", "off", "perf ended"]
    profiler.finish()
    assert events[-1] == "read"


def test_a_cipher_share_near_half_from_few_samples_does_not_make_the_verdict():
    """55 % of 60 busy samples could be 42 %: the profile is said, the ceilings' verdict stays;
    the same share from 6000 samples binds; 87 % binds even from 60."""
    rows = [_row(0.55, "aesti_encrypt"), _row(0.45, "_copy_to_iter")]
    v = bottleneck.Verdict("latency", "x: latency", {})
    few = replace(profile.layers(Profile.of({"rows": rows})), samples=60)
    got = evidence.with_profile(v, few, "x")
    assert got.bottleneck == "latency" and "too few to call it cipher-bound" in got.sentence
    assert "could be as low as 4" in got.sentence
    many = replace(few, samples=6000)
    assert evidence.with_profile(v, many, "x").bottleneck == "cipher"
    heavy = replace(
        profile.layers(Profile.of({"rows": [_row(0.87, "aesti_encrypt"), _row(0.13, "x")]})),
        samples=60,
    )
    assert evidence.with_profile(v, heavy, "x").bottleneck == "cipher"


@pytest.mark.parametrize(
    "rows, cores, kind, said",
    [
        # a FUSE stack at queue depth 1, one core's worth busy, most of it in FUSE's round trip
        (
            [
                _row(0.45, "pv_native_safe_halt", comm="swapper"), _row(0.25, "fuse_dev_do_read"),
                _row(0.12, "fuse_simple_request"), _row(0.1, "_copy_to_iter"),
                _row(0.08, "filemap_read"),
            ],
            2,
            "fuse",
            "the round trips between the kernel and the FUSE daemon (fuse_dev_do_read, "
            "fuse_simple_request)",
        ),
        # a userspace tunnel: the per-packet path
        (
            [
                _row(0.1, "pv_native_safe_halt", comm="swapper"),
                _row(0.3, "tun_get_user", comm="wireguard-go"),
                _row(0.2, "entry_SYSCALL_64", comm="wireguard-go"),
                _row(0.2, "tcp_sendmsg", comm="iperf3"),
                _row(0.2, "x", comm="wireguard-go", dso="wireguard-go", where="user"),
            ],
            2,
            "per-packet",
            "the per-packet path",
        ),
        # a CPU mostly idle: waiting set the speed, whatever ran in the little busy time
        (
            [_row(0.8, "pv_native_safe_halt", comm="swapper"), _row(0.2, "fuse_dev_do_read")], 2,
            "latency", "busy only 0.4 of 2 cores' worth",
        ),
        # the largest part is code no layer names: said, the ceilings' verdict stays
        (
            [
                _row(0.1, "pv_native_safe_halt", comm="swapper"), _row(0.6, "mystery_fn"),
                _row(0.3, "fuse_dev_do_read"),
            ],
            2,
            "latency",
            "its largest part, 'kernel, other', is code no layer names",
        ),
        # … under half of the busy CPU: the work is spread, that code among it
        (
            [
                _row(0.1, "pv_native_safe_halt", comm="swapper"), _row(0.35, "mystery_fn"),
                _row(0.3, "fuse_dev_do_read"), _row(0.25, "_copy_to_iter"),
            ],
            2,
            "spread",
            "(the largest, kernel, other, 39%",
        ),
        # no layer holds 30 % for sure
        (
            [
                _row(0.22, "fuse_dev_do_read"), _row(0.2, "_copy_to_iter"),
                _row(0.2, "filemap_read"), _row(0.19, "blk_mq_submit_bio"),
                _row(0.19, "tcp_sendmsg"),
            ],
            1,
            "spread",
            "spread over several layers, none holding 30% of it for sure (the largest, fuse, 22%",
        ),
    ],
)
def test_where_no_ceiling_binds_the_profile_names_the_layer_that_did(rows, cores, kind, said):
    v = bottleneck.Verdict("latency", "x: below every ceiling at queue depth 1",
                           {"rule": "below every ceiling at queue depth 1"})
    split = replace(
        profile.layers(Profile.of({"rows": rows}), frozenset({"wireguard-go"})), samples=2000
    )
    got = evidence.with_profile(v, split, "x", cores)
    assert got.bottleneck == kind and said in got.sentence, got.sentence
    if kind != "latency":
        assert "the ceilings alone said latency (below every ceiling" in got.sentence
        assert got.ceilings["rule"].startswith("profile: ")
    # a verdict a ceiling gave stays, the profile beside it
    device = bottleneck.Verdict("device", "x: at its baseline's speed", {"rule": "r"})
    assert evidence.with_profile(device, split, "x", cores).bottleneck == "device"


def test_a_verdict_from_the_profile_says_what_a_faster_cipher_could_win():
    """R3's question: the cipher's CPU time per second of the run (its share of the busy CPU ×
    the cores busy) is the most a free cipher could save: here at most 1.67× faster."""
    rows = [_row(0.1, "pv_native_safe_halt", comm="swapper"), _row(0.5, "fuse_dev_do_read"),
            _row(0.2, "_copy_to_iter"), _row(0.2, "aesni_xts_encrypt")]
    v = bottleneck.Verdict("latency", "x: latency", {"rule": "r"})
    got = evidence.with_profile(
        v, replace(profile.layers(Profile.of({"rows": rows})), samples=4000), "x", 2
    )
    assert got.bottleneck == "fuse" and "fuse-bound" in got.sentence
    # 22 % of 0.9 × 2 cores busy: 0.40 of a core's time, which a free cipher saves at most
    assert (
        "the cipher is 22% of the busy CPU (0.40 of a core's time), so even a free cipher would "
        "make "
        "it at most 1.67× faster" in got.sentence
    )


def test_the_profile_sentence_always_gives_the_ciphers_and_fuses_shares():
    rows = [
        _row(0.3, "_copy_to_iter"), _row(0.25, "filemap_read"), _row(0.2, "tcp_sendmsg"),
        _row(0.15, "blk_mq_submit_bio"), _row(0.06, "do_syscall_64"),
        _row(0.03, "fuse_dev_do_read"), _row(0.01, "aesni_xts_encrypt"),
    ]
    said = profile.sentence(profile.layers(Profile.of({"rows": rows})))
    assert said.endswith(
        "30% copy, 25% page cache, 20% network, 15% block, 1% the cipher, 3% fuse; "
        "the cipher ran in aesni_xts_encrypt"
    ), said


def test_a_profiled_run_far_from_the_median_says_its_shares_may_not_be_the_samples():
    """A warm-up pass of some tens of milliseconds can run at a sixth of the median (its fsync
    weighs more than its writes): the profile is still said, with that caveat."""
    rows = [_row(0.6, "ext4_buffered_write_iter"), _row(0.4, "_copy_from_iter")]
    split = profile.layers(Profile.of({"rows": rows, "vs_median": 0.17}))
    said = profile.sentence(split)
    assert "the profiled run at 17% of the median" in said and "may not be theirs" in said
    near = profile.sentence(replace(split, vs_median=0.8))
    assert "at 80% of the median" in near and "may not be theirs" not in near

