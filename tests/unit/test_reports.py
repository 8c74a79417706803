"""Reports from a stored run (a real quick-suite run kept as a fixture):
golden Markdown and JSON, a self-contained HTML file, compare, analysis."""

import json
import re

import pytest

from cryptcost import units
from cryptcost.analysis.bottleneck import Verdict
from cryptcost.analysis import analyze, costmodel
from cryptcost.report.compare import compare_runs, environment_diff
from cryptcost.report.render import render
from cryptcost.errors import UserError
from cryptcost.record import Host, Stored, read
from cryptcost.store.db import Store
from tests.conftest import FIXTURES

RUN = FIXTURES / "runs" / "quick-vm.json"


@pytest.fixture
def stored(tmp_path):
    store = Store.open(tmp_path / "r.db")
    run_id = store.import_run(json.loads(RUN.read_text()))
    return store, store.run(run_id)


def test_markdown_golden(stored, golden):
    store, run = stored
    golden("quick-vm.md", render("md", run, store.results(run.id)))


def test_json_golden(stored, golden):
    store, run = stored
    golden("quick-vm.json", render("json", run, store.results(run.id), {"device_speed": "3GB/s"}))


def test_html_is_self_contained_with_charts(stored):
    store, run = stored
    text = render("html", run, store.results(run.id))
    assert text.startswith("<!DOCTYPE html>")
    svgs = re.findall(r"<svg\b.*?</svg>", text, re.S)
    assert len(svgs) >= 4 and all("<path" in s or "<rect" in s for s in svgs)
    assert "<script" not in text
    assert not re.search(r'(src|href)="(https?:)?//', text), "the report must not fetch anything"
    for heading in (
        "Summary and recommendation", "Throughput next to the baselines", "Overhead against",
        "CPU cost", "Raw ciphers", "Environment", "Not measured",
    ):
        assert heading in text
    assert "MB/s" in text and "CPU-seconds per GiB" in text


def test_analysis_of_the_stored_run(stored):
    store, run = stored
    results = store.results(run.id)
    a = analyze(results, run.host, run.extra.get("skipped"))
    verdicts = {(results[i]["stack"], results[i]["op"], results[i]["block_bytes"]): v.bottleneck
                for i, v in a.verdicts.items()}
    # this stored run measured no aes-256-xts without acceleration: no ceiling, so no
    # "cipher-bound"; but its kernel's AES is a software driver, which the verdict names rather
    # than "latency"
    assert verdicts[("fscrypt:aes-256-xts", "read", 4096)] == "software-aes"
    assert not any("?" in v.sentence for v in a.verdicts.values())
    assert all(v.ceilings["rule"] for v in a.verdicts.values())
    assert any(
        "fscrypt:aes-256-xts reads" in f and "slower than it writes" in f for f in a.findings
    )
    assert any("faster than its baseline fuse-passthrough" in f for f in a.findings)
    titles = [r.title for r in a.recommendations]
    assert titles[:3] == ["Whole disk", "Per directory", "Any filesystem / cloud-synced folder"]
    assert a.recommendations[0].text.count("luks could not be measured here") == 1
    # a suite's parts each skip it: said once all the same
    twice = analyze(results, run.host, [*run.extra["skipped"], *run.extra["skipped"]])
    assert twice.recommendations[0].text == a.recommendations[0].text
    assert all(
        x.stack.split(":")[0] not in ("plain", "fuse-passthrough", "qemu-raw") for x in a.ranking
    )


def test_cost_model():
    assert units.parse_device_speed("3GB/s") == 3e9
    assert units.parse_link("1GbE") == pytest.approx(117e6)
    assert units.parse_link("2.5Gbit") == pytest.approx(2.5e9 / 8 * 0.936)
    with pytest.raises(UserError):
        units.parse_device_speed("fast")
    rows = [
        {
            "kind": "storage", "stack": "x", "workload": "seq", "op": "read", "block_bytes": 4096,
            "iodepth": 1, "median_bytes_per_s": 500e6, "baseline": "plain", "role": "measured",
        },
        {
            "kind": "storage", "stack": "plain", "workload": "seq", "op": "read",
            "block_bytes": 4096, "iodepth": 1, "median_bytes_per_s": 1000e6, "baseline": None,
            "role": "baseline",
        },
    ]
    [slow] = costmodel.predict(read(rows), 100e6, "a disk")
    assert slow.high == 100e6 and slow.binding == "a disk"
    assert slow.low == pytest.approx(1 / (1 / 100e6 + 1 / 500e6 - 1 / 1000e6))
    [fast] = costmodel.predict(read(rows), 3e9, "NVMe")
    assert fast.high == 500e6 and fast.binding.startswith("the stack")
    # held against the same stack measured on a 100 MB/s device: inside the range, near it, far off
    low = slow.low
    for measured, error, holds in ((95e6, 0.0, True), (110e6, 0.1, True), (0.7 * low, -0.3, False)):
        [row] = costmodel.holds([slow], read([{**rows[0], "median_bytes_per_s": measured}]))
        assert row["error"] == pytest.approx(error) and row["holds"] is holds
    assert (
        costmodel.holds([slow], read([{**rows[0], "op": "write"}])) == []
    )  # another cell: no check
    # the device is another medium: the check pairs across it, on every other dimension
    on_ram = [{**r, "medium": "ram"} for r in rows]
    [p] = costmodel.predict(read(on_ram), 100e6, "a disk")
    assert len(costmodel.holds([p], read([{**on_ram[0], "medium": "throttled:100MB/s"}]))) == 1
    assert (
        costmodel.holds([p], read([{**on_ram[0], "medium": "throttled:100MB/s", "cpus": 1}])) == []
    )


def test_compare_same_run_is_no_significant_difference(stored):
    store, run = stored
    results = store.results(run.id)
    rows = compare_runs(results, results)
    assert rows and all(not r["significant"] and r["ratio"] == pytest.approx(1) for r in rows)
    faster = [dict(r, values=[v * 1.5 for v in r.get("values", [])],
                   median_bytes_per_s=r.get("median_bytes_per_s", 0) * 1.5) for r in results]
    changed = compare_runs(results, faster)
    sig = [r for r in changed if r["significant"]]
    assert sig and all(r["ratio"] == pytest.approx(1.5, rel=0.01) for r in sig)
    assert environment_diff(run.host, {**run.host, "kernel": {"release": "7.0"}}) == [
        {"what": "kernel", "a": run.host["kernel"]["release"], "b": "7.0"}]


def test_an_emulated_run_says_so_and_is_never_compared_with_real_hardware(tmp_path, capsys):
    from cryptcost.cli import main
    data = json.loads(RUN.read_text())
    why = "measured in a qemu guest under TCG (software CPU emulation): not real hardware"
    emulated = {
        **data,
        "host": {**data["host"], "emulated": {"why": why, "kernel": "6.1.0-56-amd64", "cpus": 2}},
    }
    store = Store.open(tmp_path / "r.db")
    real_id, emu_id = store.import_run(data), store.import_run(emulated)
    emu = store.run(emu_id)
    md = render("md", emu, store.results(emu_id))
    assert f"> **Emulated: {why} (kernel 6.1.0-56-amd64, 2 virtual CPUs)." in md
    assert "Emulated" in render("html", emu, store.results(emu_id))
    assert "Emulated" not in render("md", store.run(real_id), store.results(real_id))
    db = str(tmp_path / "r.db")
    assert main(["--db", db, "compare", str(real_id), str(emu_id)]) == 2
    err = capsys.readouterr().err
    assert f"run {emu_id} was measured in an emulated guest" in err and "cannot be compared" in err
    assert (
        main(["--db", db, "compare", str(emu_id), str(emu_id)]) == 0
    )  # emulated with emulated: fine
    capsys.readouterr()
    assert main(["--db", db, "list", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [r["emulated"] for r in listed] == [False, True]


def test_an_unstable_result_is_marked_beside_its_interval_and_its_cause_said_once(tmp_path, capsys):
    """A result whose interval never reached the target carried `unstable`, its CV and a likely
    cause in the JSON only: every report printed its ±28 % like any other interval."""
    from markupsafe import escape
    from cryptcost.cli import main
    from cryptcost.report import document
    data = json.loads(RUN.read_text())
    storage = [r for r in data["results"] if r.get("kind") == "storage"]
    cause = "the FUSE daemon's threads competing with fio for 2 core(s)"
    for r, cv in zip(storage[:2], (0.113, 0.05)):
        r.update(unstable=True, cv=cv, likely_cause=cause)
    storage[2].update(unstable=True, cv=0.2, likely_cause="the machine itself")
    store = Store.open(tmp_path / "r.db")
    run_id = store.import_run(data)
    run, results = store.run(run_id), store.results(run_id)
    doc = document.build(run, results)
    marked = [r for r in doc.storage if r.ci.endswith(" ~")]
    assert len(marked) == 3 and all(r.ci.startswith("±") for r in marked)
    assert sum(1 for r in doc.storage if "~" in r.ci) == 3  # the stable ones unmarked
    first, second = doc.unstable
    assert first.cause == cause and first.count == 2 and first.cv == "CV 5.0–11.3 %"
    assert second.cv == "CV 20.0 %" and second.results == (
        document._label(Stored.of(storage[2])),)
    md = render("md", run, results)
    assert "## Unstable results" in md and f"- {first.text}" in md
    page = render("html", run, results)
    assert "Unstable results" in page and str(escape(first.text)) in page
    out = _shown(doc, 300, details=True)
    assert "~ unstable: the 95 % interval stayed wider" in out and cause in out
    assert main(["--db", str(tmp_path / "r.db"), "show", str(run_id)]) == 0          # and in `show`
    assert cause in capsys.readouterr().out


def test_compare_says_how_far_the_host_moved_and_marks_what_that_move_could_make(
    stored, tmp_path, capsys
):
    """Two runs of a host whose CPU ran 15 % slower in the second: the OpenSSL cells, which depend
    on
    nothing but the CPU, give that move; a significant difference the same way and no larger is
    marked
    as one the host alone could make, and one against the move, or beyond it, is not."""
    from cryptcost.cli import main
    from cryptcost.report.compare import host_move, within_move
    store, run = stored
    results = store.results(run.id)
    assert sum(r["kind"] == "cipher" and r.get("engine") == "openssl" for r in results) >= 3

    def scaled(r, f):
        metric = "median_bytes_per_s" if "median_bytes_per_s" in r else "median_ops_per_s"
        return dict(
            r, values=[v * f for v in r.get("values") or []], **{metric: r.get(metric, 0) * f}
        )

    slower = {r["stack"]: 0.9 for r in results if r.get("stack")} | {"fscrypt:aes-256-xts": 1.2}
    moved = [
        scaled(r, 0.85 if r["kind"] == "cipher" else slower.get(r.get("stack"), 1.0))
        for r in results
    ]
    move = host_move(results, moved)
    assert move["ratio"] == pytest.approx(0.85) and move["cells"] >= 3
    assert within_move(0.9, move) and within_move(0.85, move)
    assert not within_move(0.8, move) and not within_move(1.1, move)
    assert not within_move(0.99, {**move, "ratio": 0.99})  # a host that held still explains nothing
    assert host_move(results, [r for r in moved if r["kind"] != "cipher"]) is None
    rows = compare_runs(results, moved, move)
    fs = [r for r in rows if r["result"].startswith("fscrypt") and r["significant"]]
    others = [r for r in rows if r["significant"] and r["ratio"] == pytest.approx(0.9, rel=0.01)]
    assert fs and not any(r["host_could"] for r in fs)  # faster, against the move: the change's
    assert others and all(r["host_could"] for r in others)  # 10 % slower while the CPU lost 15 %
    assert not any(
        r["host_could"] for r in compare_runs(results, results, host_move(results, results))
    )
    db = str(tmp_path / "two.db")
    two = Store.open(db)
    a = two.import_run(json.loads(RUN.read_text()))
    data = json.loads(RUN.read_text())
    data["results"] = moved
    b = two.import_run(data)
    assert main(["--db", db, "compare", str(a), str(b)]) == 0
    printed = " ".join(capsys.readouterr().out.split())
    assert "the host's CPU moved -15.0 % between the runs" in printed and "≈ host" in printed
    assert main(["--db", db, "compare", str(a), str(b), "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["host_move"]["ratio"] == pytest.approx(0.85)


DISKS = [{"name": "vda", "path": "/dev/vda", "model": "virtio (QEMU/KVM)", "rotational": True,
          "size": 270e9, "read_bytes_per_s": 180e6, "how": "fio --readonly"}]
LINKS = [{"name": "eth0", "bytes_per_s": 125e6, "driver": "virtio_net"}]


def _shown(doc: dict, width: int, details: bool = False) -> str:
    from rich.console import Console
    from cryptcost.report import terminal
    console = Console(record=True, width=width, color_system=None)
    for item in terminal.summary_tables(doc, width=width, details=details):
        console.print(item)
    return console.export_text()


def test_the_last_screen_of_a_run_is_the_answer_on_this_hosts_disks_and_links(stored):
    """At 100 columns, at most 40 lines: a row per option measured for each use with its figures
    here and predicted on the host's disk, its own share of the cost, what limits it and its CPU
    per GB; the pick of each use and why; what the details hold. ``--details`` puts the
    ranking and every table before it, the answer still last."""
    from cryptcost.report import document
    store, run = stored
    run.extra.update(disks=DISKS, links=LINKS)
    doc = document.build(run, store.results(run.id))
    text = _shown(doc, 100)
    lines = text.splitlines()
    assert len(lines) <= 40 and max(map(len, lines)) <= 100, text
    assert lines[0].startswith("The answer — cryptcost run")
    head = lines[1].split()
    assert head[:3] == ["use", "option", "here"] and "vda" in head and "eth0" in head
    assert "Predicted on vda (virtio (QEMU/KVM), rotational, 270 GB): 180 MB/s read" in \
        " ".join(text.split())
    measured = [rec.title for rec in doc.recommendations if rec.ranking]
    assert measured, "the fixture run recommends nothing"
    for title in measured + ["Cipher"]:
        assert f"★ {title}: " in text, title
    luks = next(line for line in lines if "luks-userspace" in line)
    assert "103–169" in luks and "29%" in luks and "8.49" in luks, luks
    assert "Ranking: 1 MiB" not in text and "--details shows them" in text
    full = _shown(doc, 100, details=True)
    assert full.index("Ranking: 1 MiB") < full.index("Storage: each stack against its baseline") \
        < full.index("The answer — cryptcost run")
    # text from the data is shown as written, never read as rich's markup ("a plan with a [network]
    # table")
    assert "[network]" in full


def test_the_answer_predicts_nothing_without_a_place_and_says_how_to_name_one(stored):
    from cryptcost.report import document
    store, run = stored
    doc = document.build(run, store.results(run.id))
    a = doc.answer
    assert not a.places and all(not o.on for u in a.uses for o in u.options)
    assert any("--device-speed" in n for n in a.notes)
    named = document.build(run, store.results(run.id), {"device_speed": "550MB/s"}).answer
    [place] = named.places
    assert place.named and place.bytes_per_s == 550e6
    luks = next(o for u in named.uses for o in u.options if o.stack.startswith("luks"))
    [on] = luks.on
    assert on.place == "550MB/s" and on.low <= on.high <= 550e6


def test_every_format_reads_the_results_as_typed_records_only(stored):
    """The results are read once into records (no mapping: a string key fails at once), and every
    format, the analysis and compare give the same from the records as from the stored JSON."""
    from collections.abc import Mapping

    from cryptcost.record import Stored, read
    store, run = stored
    stored_json = store.results(run.id)
    records = read(stored_json)
    assert not isinstance(records[0], Mapping) and not hasattr(Stored, "__getitem__")
    with pytest.raises(TypeError):
        records[0]["stack"]
    from cryptcost.report import charts, document
    doc = document.build(run, records)
    assert doc == document.build(run, stored_json)
    assert charts.all_charts(records, doc) == charts.all_charts(stored_json, doc)
    assert render("md", run, records) == render("md", run, stored_json)
    assert analyze(records, run.host).to_dict() == analyze(stored_json, run.host).to_dict()
    assert compare_runs(records, stored_json) == compare_runs(stored_json, records)


def test_at_80_columns_every_table_groups_its_results_by_stack_and_cuts_no_figure(stored):
    """A narrow terminal gets each stack's name on its own line and its figures in full below it:
    no cell ellipsised, no line past the 80th column; a wide one keeps the tables."""
    from cryptcost.analysis import scaling
    from cryptcost.record import read
    from cryptcost.report import document
    store, run = stored
    doc = document.build(run, store.results(run.id))
    net = {
        "kind": "network", "workload": "send", "op": "send", "streams": 1, "link": "netns",
        "mtu": 1500, "values": [1e9] * 3, "samples": 3, "ci95": [0.99e9, 1.01e9],
        "cpu_s_per_gb": {"a": 1.5, "b": 2.25},
        "wire": {"verdict": "encrypted", "median_packet_bytes": 1494},
    }
    network = [document.network_row(r, Verdict("cipher", "cipher-bound", {})) for r in read(
        [{**net, "stack": "tcp", "median_bytes_per_s": 3e9},
         {**net, "stack": "ipsec:aes256gcm16-x25519", "median_bytes_per_s": 1e9, "overhead": 0.667,
          "overhead_significant": True, "baseline": "tcp"}])]
    twin = {
        "kind": "storage", "stack": "gocryptfs:aes-gcm", "workload": "seq", "op": "read",
        "block_bytes": 1 << 20, "iodepth": 1, "values": [4e8] * 3,
        "params": {"facts": {"role": "measured", "crypto_library": "go"}},
    }
    scaling_rows = scaling.rows(
        scaling.curves(
            read(
                [{**twin, "cpus": n, "median_bytes_per_s": n * 4e8} for n in (1, 2)]
                + [
                    {
                        **twin, "stack": "gocryptfs:aes-gcm/accel-off", "accel": False,
                        "accel_verified": True, "accel_speedup": 4.0, "cpus": n,
                        "median_bytes_per_s": n * 1e8,
                    }
                    for n in (1, 2)
                ]
            ),
            {},
            Host(),
            [],
        )
    )
    from dataclasses import replace
    doc = replace(doc, network=tuple(network), scaling_rows=tuple(scaling_rows))
    assert doc.network and doc.scaling_rows and doc.split and doc.ciphers

    def shown(width: int) -> str:
        return _shown(doc, width, details=True)
    narrow = shown(80)
    assert max(len(line) for line in narrow.splitlines()) <= 80
    assert "…" not in narrow
    for name in ("luks-userspace:aes-256-xts-plain64", "ipsec:aes256gcm16-x25519  (vs tcp)",
                 "fscrypt:aes-256-xts  (vs plain)", "gocryptfs:aes-gcm seq read 1 MiB"):
        assert any(line.startswith(name) for line in narrow.splitlines()), name
    assert (
        "-66.7 %" in narrow
        and "1.50+2.25" in narrow
        and "what it is worth: 4.0× on 1 CPU" in narrow
    )
    wide = shown(200)
    assert "┃ stack" in wide and "ipsec:aes256gcm16-x25519  (vs tcp)" not in wide


def test_a_command_prints_its_results_table_and_unstable_causes_from_its_outcome(tmp_path, capsys):
    """What `cryptcost ciphers` prints after measuring (here with the fake executor): the table,
    each unstable result's cause once, and where the run is stored."""
    from argparse import Namespace
    from dataclasses import replace

    from cryptcost import stats
    from cryptcost.cli.common import print_outcome
    from cryptcost.report.terminal import cipher_table
    from cryptcost.runner.ciphers import CipherPlan, run_ciphers
    from cryptcost.runner.ciphers.executor import FakeExecutor

    outcome = run_ciphers(
        CipherPlan(engines=("openssl",), algorithms=("aes-256-gcm",)), FakeExecutor(),
        stats.Policy(min_samples=3, max_samples=3, warmup=0),
    )
    first = outcome.results[0]
    outcome.results[0] = replace(first, metrics={**first.metrics, "unstable": True, "cv": 0.2,
                                                 "likely_cause": "a noisy neighbour"})
    store = Store.open(tmp_path / "r.db")
    assert print_outcome(Namespace(json=False), store, 1, outcome, cipher_table) == 0
    printed = capsys.readouterr().out
    assert "aes-256-gcm" in printed and "a noisy neighbour (1, CV 20.0 %)" in printed
    assert f"run 1 stored in {store.path}" in printed


def test_the_report_document_crosses_every_json_boundary_as_plain_data(stored):
    """The document holds the analysis's typed records (a recommendation, a scaling curve);
    ``run --json`` and the JSON export write them as their JSON forms, never as text."""
    from cryptcost.cli.common import print_json
    from cryptcost.report import document
    store, run = stored
    doc = document.build(run, store.results(run.id))
    import contextlib
    import io
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        print_json({"report": doc})
    printed = json.loads(buf.getvalue())["report"]
    assert printed["recommendations"][0]["title"] == doc.recommendations[0].title
    assert all(isinstance(r["ranking"], list) for r in printed["recommendations"])
    exported = json.loads(render("json", run, store.results(run.id)))["analysis"]
    assert exported["recommendations"] == printed["recommendations"]


def test_a_run_only_of_some_field_reports_shows_their_blocks_alone_and_says_so(tmp_path):
    """run --only R2,R4 records the reports it ran; the report's field-reports section shows
    those blocks alone, not three more whose rows would each say they were not asked for, and
    its introduction says the run was cut so."""
    from cryptcost.report import document, markdown
    data = json.loads(RUN.read_text())
    store = Store.open(tmp_path / "r.db")
    run_id = store.import_run(data)
    whole = document.build(store.run(run_id), store.results(run_id))
    assert [b["label"] for b in whole.field_reports] == ["R1", "R2", "R3", "R4", "R5"]
    assert "only" not in whole.field_reports_intro
    store.update_extra(run_id, only=["R2", "R4"])
    doc = document.build(store.run(run_id), store.results(run_id))
    assert [b["label"] for b in doc.field_reports] == ["R2", "R4"]
    assert doc.field_reports_intro.endswith("the parts of R2 and R4 only (run --only).")
    text = markdown.render(doc).split("## Field reports")[1]
    assert "R2 and R4 only" in text and re.search(r"^### R2\b", text, re.M) and not re.search(
        r"^### R[135]\b", text, re.M), text[:2000]


def test_not_measured_says_each_thing_once_for_each_reason(tmp_path):
    """A stack skipped alike on 1 and 2 CPUs (one skip per pass) is one row of "Not measured";
    the same stack skipped for another reason is another row."""
    from cryptcost.report import document
    data = json.loads(RUN.read_text())
    store = Store.open(tmp_path / "r.db")
    run_id = store.import_run(data)
    twice = {"stack": "plain/accel-off", "kind": "storage", "part": "R3 x",
             "reason": "acceleration cannot be switched off for this stack's crypto"}
    other = {**twice, "reason": "another reason"}
    store.update_extra(run_id, skipped=[twice, dict(twice), other])
    rows = document.build(store.run(run_id), store.results(run_id)).not_measured
    said = [(m.what, m.why) for m in rows if "plain/accel-off" in m.what]
    assert len(said) == 2 and len(set(said)) == 2 and said[1][1].startswith("another"), rows


def test_the_html_report_opens_with_the_answer_and_folds_the_rest_in_short_paragraphs(stored):
    """The first section is the answer (its table, the picks, its chart); every section after it
    is folded, its heading and a one-line summary shown; no paragraph holds more than three
    sentences, and the bottleneck lists are tables."""
    from html import unescape
    from cryptcost.report.html import sentences
    store, run = stored
    run.extra.update(disks=DISKS)
    page = render("html", run, store.results(run.id))
    body = page[page.index("<body>"):]
    headings = re.findall(r'<h2 id="([^"]+)">', body)
    assert headings[0] == "answer" and len(headings) > 5
    first = body[:body.index('id="contents"')]
    assert '<table class="answer">' in first and '<figure class="answer"><svg' in first
    assert "<b>The picks</b>" in first and "on vda" in first
    folded = re.findall(r'<details class="section"><summary><h2 id="([^"]+)">.*?</h2>'
                        r'(?: <span class="small">([^<]+)</span>)?</summary>', body, re.S)
    assert [h for h, _ in folded] == headings[1:]
    assert all(said for _, said in folded), folded
    text = re.sub(r"<svg\b.*?</svg>", "", body, flags=re.S)
    for p in re.findall(r"<p\b[^>]*>(.*?)</p>", text, re.S):
        said = unescape(re.sub(r"<[^>]+>", "", p)).strip()
        assert len(sentences(said)) <= 3, said
    assert "<h3>Bottlenecks</h3>\n<table" in body


def test_the_document_is_frozen_records_that_every_renderer_reads(stored):
    """document.build makes one Document of frozen records: no string key reads it, nothing
    writes into it, and the terminal, Markdown, HTML, JSON and CSV each show the same rows from
    it (a row's baseline is a field of its own, never parsed back from its text)."""
    from dataclasses import FrozenInstanceError
    from html import escape as html_escape

    from cryptcost.report import document, export, html, markdown, records
    store, run = stored
    results = store.results(run.id)
    doc = document.build(run, results)
    assert isinstance(doc, records.Document)
    with pytest.raises(TypeError):
        doc["storage"]
    with pytest.raises(FrozenInstanceError):
        doc.title = "x"
    with pytest.raises(FrozenInstanceError):
        doc.storage[0].median = "x"
    assert all(isinstance(r, records.StorageRow) for r in doc.storage)
    assert all(isinstance(r, records.CipherRow) for r in doc.ciphers)
    assert all(isinstance(x, records.SplitRow) for x in doc.split)
    against = [r for r in doc.storage if r.against]
    assert against and all(r.vs == f"{r.change} vs {r.against}" for r in against)
    md = markdown.render(doc)
    page = html.render(doc, {})
    terminal_text = _shown(doc, 200, details=True)
    data = json.loads(export.to_json(run, results, doc))["analysis"]
    for r in doc.storage:
        assert r.median in md and r.median in page and r.median in terminal_text, r
    for c in doc.ciphers:
        assert f"| {c.median} |" in md and html_escape(c.median) in page
    assert [x["stack"] for x in data["bottlenecks"]] == [
        r.stack for r in doc.storage + doc.network if r.bottleneck]
    assert data["ranking"] == [x.to_dict() for x in doc.ranking]
    plain = json.loads(json.dumps(doc.to_dict()))          # the JSON form is plain data
    assert set(plain) == set(doc.__dataclass_fields__)
    assert plain["storage"][0]["median"] == doc.storage[0].median
    assert render("csv", run, results).count("\n") >= len(doc.storage)


def test_a_run_that_pinned_every_storage_pass_answers_from_its_most_cpus_and_says_so(stored):
    """A plan whose storage table names ``cpus`` measures no unpinned pass: the answer reads
    each option on the most CPUs it measured, and names the count, rather than leaving storage
    out."""
    from cryptcost.report import document
    from cryptcost.report.answer import grid
    store, run = stored
    results = store.results(run.id)
    pinned = [{**r, "cpus": 2} if r["kind"] == "storage" else r for r in results]
    whole = document.build(run, results).answer
    answer = document.build(run, pinned).answer
    disks = {r.get("stack") for r in results if r["kind"] == "storage"}
    was = {o.stack for u in whole.uses for o in u.options if o.stack in disks}
    now = [o for u in answer.uses for o in u.options if o.stack in disks]
    assert was and {o.stack for o in now} == was and all(o.cpus == 2 for o in now)
    assert not any(o.cpus for u in whole.uses for o in u.options)
    _, rows = grid(answer)
    assert any(row[2].endswith(" on 2 CPUs") for row in rows)
