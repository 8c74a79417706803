"""The five field reports as data, and a run's results laid beside them (#37's first slice)."""

import re
from pathlib import Path

import pytest

from cryptcost.record import read
from cryptcost.report import fieldreports as fr
from tests.conftest import skip_or_fail

SEEDS = Path(__file__).resolve().parents[3] / "shared" / "seeds"
FILES = {
    "R1": "000_75dbeb9e5e03c5f1.txt", "R2": "001_0f1c3a61cd778107.txt",
    "R3": "002_f21579383df5ae1e.txt", "R4": "003_62948da02dcafd69.txt",
    "R5": "004_d671f89c7be981b8.txt",
}


def test_every_report_loads_with_its_source_and_sane_figures():
    reports = fr.reports()
    assert [r.label for r in reports] == ["R1", "R2", "R3", "R4", "R5"]
    for r in reports:
        assert FILES[r.label] in r.source and r.title and r.hardware and r.conclusion
        assert r.figures or r.no_figures, r.label
        for f in r.figures:
            assert f.compare in ("overhead", "ratio") and f.a and f.b, f.what
            assert 0 < f.theirs < 1 if f.compare == "overhead" else f.theirs > 0, f.what
    assert len(fr.load("R5").figures) == 19 and not fr.load("R1").figures
    with pytest.raises(ValueError):
        fr.load("R6")


def _numbers(text: str) -> set[float]:
    """Every number in a text, read with a decimal comma or point; and each long run of digits
    cut after one and two decimals (the scraped tables run their columns together)."""
    out = set()
    for m in re.findall(r"\d+(?:[.,]\d+)?", text):
        whole, _, frac = m.replace(",", ".").partition(".")
        out.add(float(m.replace(",", ".")))
        for keep in (1, 2):
            if len(frac) > keep:
                out.add(round(float(f"{whole}.{frac[:keep + 1]}"), keep))
    return out


@pytest.mark.parametrize("label", list(FILES))
def test_every_figure_quoted_is_in_its_report(label):
    """Each figure the data quotes appears in the report's own text (the copies the project
    was given, beside it in ../shared/seeds)."""
    path = SEEDS / FILES[label]
    if not path.exists():
        skip_or_fail(("seeds",), f"the field reports' texts are not at {SEEDS}")
    found = _numbers(path.read_text())
    for f in fr.load(label).figures:
        said = [float(x) for x in re.findall(r"\d+(?:\.\d+)?", f.theirs_said)]
        said = [x * 100 if x < 1 else x for x in said]  # an overhead given as a fraction
        assert said and all(round(x, 2) in found for x in said), (f.what, said)


@pytest.mark.parametrize("label", list(FILES))
def test_every_claims_own_words_are_in_its_report(label):
    """Each claim quotes a few of the report's own words, in its language: found in its text."""
    path = SEEDS / FILES[label]
    if not path.exists():
        skip_or_fail(("seeds",), f"the field reports' texts are not at {SEEDS}")
    text = " ".join(path.read_text().split())
    report = fr.load(label)
    assert report.claims, label
    for c in report.claims:
        assert " ".join(c.quote.split()) in text, (c.id, c.quote)
        assert len(c.quote.split()) <= 10, (c.id, "a few words, not their sentence")


def _r(stack, value, **cell):
    return {
        "kind": "network", "stack": stack, "median_bytes_per_s": value, "values": [value] * 3,
        **cell,
    }


def test_a_run_with_the_reports_cells_is_laid_beside_them():
    results = read(
        [
            _r("nfs:sys", 100e6, workload="put"),
            _r("nfs:krb5p", 30e6, workload="put"),
            _r("nfs:sys", 120e6, workload="get"),
            _r("nfs:krb5p", 24e6, workload="get"),
            {
                "kind": "storage", "stack": "luks-userspace:aes-256-xts-plain64", "workload": "seq",
                "op": "write", "block_bytes": 1 << 20, "median_bytes_per_s": 600e6,
            },
            {
                "kind": "storage", "stack": "luks-userspace:aes-256-xts-plain64/accel-off",
                "workload": "seq", "op": "write", "block_bytes": 1 << 20, "accel": False,
                "median_bytes_per_s": 200e6,
            },
        ]
    )
    blocks = {b["label"]: b for b in fr.section(results)}
    r4 = blocks["R4"]
    assert r4["measured"] == 2 and [round(x["ours"], 2) for x in r4["rows"][:2]] == [0.7, 0.8]
    assert [x["ours"] for x in r4["rows"][2:]] == [None] * 4  # no WAN run nor NFS 3 in these
    assert [x["here"] for x in r4["rows"][:2]] == ["70 % slower", "80 % slower"]
    # the block says how its claims came out, not its table again in prose
    assert "sentence" not in r4 and r4["verdicts"].startswith("R4: 6 claims: ")
    # R3's block device: the guest's dm-crypt pair first, this host's qemu LUKS and its twin next
    [dev] = [x for x in blocks["R3"]["rows"] if x["what"].startswith("an encrypted block device")]
    assert dev["ours"] == pytest.approx(3.0) and dev["ours_cells"][1].startswith(
        "luks-userspace:aes-256-xts-plain64/accel-off"
    )
    # with qemu LUKS's 4 KiB pair (R3's block sizes here), the 4 KiB figure reads that pair
    at_4k = read([{"kind": "storage", "stack": stack, "workload": "seq", "op": "write",
                   "block_bytes": 4096, "median_bytes_per_s": value, "cpus": 1,
                   **({"accel": False} if stack.endswith("accel-off") else {})}
                  for stack, value in (("luks-userspace:aes-256-xts-plain64", 400e6),
                                       ("luks-userspace:aes-256-xts-plain64/accel-off", 100e6))])
    [dev4] = [x for x in {b["label"]: b for b in fr.section(results + at_4k)}["R3"]["rows"]
              if x["what"].startswith("an encrypted block device")]
    assert dev4["ours"] == pytest.approx(4.0) and "4 KiB" in dev4["ours_cells"][0], dev4
    [raw] = [x for x in blocks["R3"]["rows"] if x["what"].startswith("raw AES")]
    assert (
        raw["ours"] is None
        and raw["here"]
        == "not in this run: no result for openssl aes-256-xts 4096 B 1 thread(s) accel on nor "
           "openssl aes-256-xts 4096 B 1 thread(s) accel off"
    )
    assert (
        blocks["R1"]["rows"] == [] and blocks["R1"]["claims"]
        and blocks["R5"]["measured"] == 0
    )


def test_an_overhead_is_against_the_stacks_matched_baseline_and_the_one_the_run_reports():
    """qemu's LUKS is held against qemu's raw export (its matched baseline), not plain ext4,
    so the export's cost is not billed to the encryption; and the overhead is the one the run's
    own pairing gives, so the report never shows two figures for one comparison."""
    cell = {"kind": "storage", "workload": "bonnie", "op": "write", "block_bytes": 8192}
    results = read(
        [
            {**cell, "stack": "plain", "median_bytes_per_s": 1000e6},
            {**cell, "stack": "qemu-raw", "median_bytes_per_s": 400e6},
            {
                **cell, "stack": "luks-userspace:aes-256-xts-plain64", "median_bytes_per_s": 200e6,
                "vs": {"qemu-raw": {"overhead": 0.52, "significant": True}},
            },
        ]
    )
    [write] = [
        x
        for x in {b["label"]: b for b in fr.section(results)}["R2"]["rows"]
        if x["ours"] is not None
    ]
    assert write["ours_cells"][1].startswith("qemu-raw") and write["ours"] == 0.52


def test_a_series_cut_short_is_read_only_without_a_whole_one_and_is_said_incomplete():
    """A run stopped in the middle of a comparison keeps each series it sampled as an incomplete
    result: a figure reads it where nothing whole has the cell, and says so, in the sentence
    and in the report's own table."""
    cut = "the run ended before this series did (interrupted)"
    whole = [_r("nfs:sys", 100e6, workload="put"), _r("nfs:krb5p", 30e6, workload="put")]
    cut_short = [_r("nfs:sys", 50e6, workload="put", incomplete=cut, part="R4 other"),
                 _r("nfs:krb5p", 45e6, workload="put", incomplete=cut, part="R4 other")]
    blocks = {b["label"]: b for b in fr.section(read(cut_short + whole))}
    [put] = [x for x in blocks["R4"]["rows"] if x["ours"] is not None]
    assert round(put["ours"], 2) == 0.7 and not put["incomplete"]
    blocks = {b["label"]: b for b in fr.section(read(cut_short))}
    [put] = [x for x in blocks["R4"]["rows"] if x["ours"] is not None]
    assert round(put["ours"], 2) == 0.1 and put["incomplete"]
    assert put["here"] == "10 % slower (incomplete: a series cut short)"
    assert "sentence" not in blocks["R4"]
    cell = {"ours": 2.0, "ours_vs": 0.5, "ours_vs_stack": "tcp", "emulated": True,
            "incomplete": True}
    assert fr.table_text(cell, "ours") == "2.0 (0.50× tcp) emulated incomplete"


def test_a_wan_run_of_a_reports_cells_is_not_taken_for_its_own():
    """R4 over a WAN measures R4's cells again with a delay on the link, under a label that
    also starts with R4: the block takes the cells without the delay, as the report measured."""
    lan = [_r("nfs:sys", 100e6, workload="put"), _r("nfs:krb5p", 30e6, workload="put")]
    wan = [
        _r("nfs:sys", 50e6, workload="put", delay_ms=20.0),
        _r("nfs:krb5p", 25e6, workload="put", delay_ms=20.0),
    ]
    for order in (lan + wan, wan + lan):
        r4 = {b["label"]: b for b in fr.section(read(order))}["R4"]
        assert round(r4["rows"][0]["ours"], 2) == 0.7, r4["rows"][0]
        assert round(r4["rows"][2]["ours"], 2) == 0.5, r4["rows"][2]     # the WAN's own row
    alone = {b["label"]: b for b in fr.section(read(wan))}["R4"]           # a WAN run only
    assert alone["rows"][0]["ours"] is None and round(alone["rows"][2]["ours"], 2) == 0.5
    assert alone["rows"][0]["here"].endswith(
        "(only with a delay on the link, which this row does not have)"
    )


def test_a_guest_run_fills_a_row_only_where_the_run_has_no_pair_and_is_said_emulated():
    """run --vm links the guest's runs: a row takes its pair from the run first, else from one
    guest run (both sides from it, never one side from each host), and says it is emulated."""
    put = [_r("nfs:sys", 100e6, workload="put"), _r("nfs:krb5p", 30e6, workload="put")]
    get = [_r("nfs:sys", 120e6, workload="get"), _r("nfs:krb5p", 24e6, workload="get")]
    guest = read(put + get)
    rows = {b["label"]: b for b in fr.section(read([]), [guest])}["R4"]["rows"]
    assert [x["emulated"] for x in rows[:2]] == [True, True]
    assert rows[0]["here"] == "70 % slower (emulated)" and rows[0]["ours_cells"]
    # the run's own pair wins over the guest's
    mine = read([_r("nfs:sys", 100e6, workload="put"), _r("nfs:krb5p", 90e6, workload="put")])
    rows = {b["label"]: b for b in fr.section(mine, [guest])}["R4"]["rows"]
    assert rows[0]["emulated"] is False and rows[0]["ours"] == pytest.approx(0.1)
    assert rows[1]["emulated"] is True                      # reads: only the guest has them
    # one side here and the other in the guest is no pair
    half = {b["label"]: b for b in fr.section(read(put[:1]), [read(put[1:])])}["R4"]["rows"]
    assert half[0]["ours"] is None and "no result for" in half[0]["why_not"]
    emulated = {b["label"]: b for b in fr.section(read([]), [guest])}["R4"]["rows"]
    assert emulated[0]["here"] == "70 % slower (emulated)"


def test_r5s_own_table_is_its_twenty_rows_each_way_quoted_from_its_text():
    t = fr.load("R5").tables[0]
    assert t.columns == ("one way", "the other way") and t.unit == "Mbit/s"
    assert len(t.rows) == 20 and t.rows[0].name == "no ipsec" and t.reference == "no ipsec"
    assert len({r.cell["stack"] for r in t.rows}) == 20          # one stack a row, none twice
    path = SEEDS / FILES["R5"]
    if not path.exists():
        skip_or_fail(("seeds",), f"the field reports' texts are not at {SEEDS}")
    text = path.read_text()
    found = _numbers(text)
    for row in t.rows:
        assert row.name in text and all(x in found for x in row.theirs), row


def test_a_reports_own_table_lays_each_row_beside_the_runs_against_the_reference_row():
    run = read([_r("tcp", 110e6, workload="send"), _r("ipsec:aes128-sha1", 55e6, workload="send")])
    guest = read([_r("tcp", 20e6, workload="send"), _r("esp:null-null", 19e6, workload="send"),
                  _r("ipsec:aes128-sha1", 1e6, workload="send")])
    t = {b["label"]: b for b in fr.section(run, [guest])}["R5"]["tables"][0]
    rows = {r["name"]: r["cells"] for r in t["rows"]}
    assert len(rows) == 20 and t["measured"] == 3
    # the table reads the guest alone (where = "guest": kernel ESP, as theirs), its reference
    # row the guest's too, never this host's beside the guest's rows
    sha1 = rows["hmac-sha1/aes-cbc"][0]
    assert sha1["ours"] == pytest.approx(8.0) and sha1["ours_vs"] == pytest.approx(0.05)
    assert sha1["emulated"] is True and rows["no ipsec"][0]["ours"] == pytest.approx(160.0)
    assert sha1["theirs_vs"] == pytest.approx(259.4 / 941.4)
    null = rows["null/null"][0]                                   # only the guest has it
    assert null["emulated"] is True and null["ours_vs"] == pytest.approx(0.95)
    assert rows["null/null"][1]["ours"] is None                   # no receive anywhere
    assert fr.table_text(null, "ours") == "152.0 (0.95× tcp) emulated"
    assert fr.table_text(rows["null/null"][1], "ours") == "—"
    assert fr.table_text(sha1, "theirs") == "259.4 (0.28×)"


@pytest.mark.parametrize("label, shapes", [("R1", [(5, 4)]), ("R2", [(12, 3), (9, 3), (9, 3)]),
                                           ("R3", [(7, 2), (4, 4)]), ("R4", [(5, 4), (3, 4)]),
                                           ("R5", [(20, 2), (2, 2)])])
def test_a_reports_own_tables_have_their_shape_and_every_figure_is_in_its_text(label, shapes):
    """Rows × columns of each table the report drew (R4: figure 1's modes × write and read,
    figure 3's modes × clients), each of their figures quoted from its text."""
    tables = fr.load(label).tables
    assert [(len(t.rows), len(t.columns)) for t in tables] == shapes
    assert all(len(t.cells) == len(t.columns) and t.reference in {r.name for r in t.rows}
               for t in tables)
    path = SEEDS / FILES[label]
    if not path.exists():
        skip_or_fail(("seeds",), f"the field reports' texts are not at {SEEDS}")
    found = _numbers(path.read_text())
    for row in (row for t in tables for row in t.rows):
        assert all(x in found for x in row.theirs if x is not None), row


def test_r3s_table_reads_dm_crypts_writes_by_block_size_on_two_cpus_and_one():
    def w(bs, cpus, value):
        return {"kind": "storage", "stack": "luks:aes-xts-plain64", "workload": "seq",
                "op": "write", "block_bytes": bs, "cpus": cpus, "median_bytes_per_s": value}
    guest = read([w(512, 2, 10e6), w(4096, 2, 40e6), w(512, 1, 9e6), w(4096, 1, 30e6)])
    t = {b["label"]: b for b in fr.section(read([]), [guest])}["R3"]["tables"][0]
    rows = {r["name"]: r["cells"] for r in t["rows"]}
    assert rows["512 B"][0]["ours"] == pytest.approx(10.0)
    assert rows["512 B"][0]["ours_vs"] == pytest.approx(0.25)       # against 4 KiB, 2 CPUs
    assert rows["512 B"][1]["ours_vs"] == pytest.approx(0.3)        # against 4 KiB, 1 CPU
    assert rows["512 B"][0]["theirs_vs"] == pytest.approx(56.4 / 148.0)
    assert all(c["emulated"] for c in rows["512 B"]) and rows["8192 B"][0]["ours"] is None


def test_r4s_table_reads_dbench_over_each_nfs_by_client_count_against_nfs_3():
    """R4's figure 3 gives no figures in its text: the table holds ours alone, each client
    count its own cell, against NFS 3's at the same count; a delayed link's is not taken."""
    def d(stack, clients, value, **extra):
        return _r(stack, value, workload="dbench", op="dbench", streams=clients, **extra)
    guest = read([d("nfs:v3", 1, 8e6), d("nfs:sys", 1, 6e6), d("nfs:krb5p", 1, 4e6),
                  d("nfs:v3", 8, 20e6), d("nfs:sys", 8, 25e6),
                  d("nfs:krb5p", 8, 1e6, delay_ms=20.0)])
    t = {b["label"]: b for b in fr.section(read([]), [guest])}["R4"]["tables"][1]
    assert t["columns"] == ["1 client", "2 clients", "4 clients", "8 clients"]
    rows = {r["name"]: r["cells"] for r in t["rows"]}
    assert rows["NFS 4"][0]["ours"] == pytest.approx(6.0) and rows["NFS 4"][0]["emulated"]
    assert rows["NFS 4"][0]["ours_vs"] == pytest.approx(0.75)
    assert rows["NFS 4"][3]["ours_vs"] == pytest.approx(1.25)
    assert rows["NFS 4, krb5p"][0]["ours_vs"] == pytest.approx(0.5)
    assert rows["NFS 4, krb5p"][3]["ours"] is None                  # only over the delayed link
    assert rows["NFS 4"][1]["ours"] is None and all(c["theirs"] is None for c in rows["NFS 3"])


def test_r4s_first_table_is_each_nfs_by_write_and_read_against_nfs_4_and_over_the_delayed_link():
    """R4's figure 1, modes × write and read: each against NFS 4 (sec=sys), as the report's own
    comparisons are; the delayed link's cells in columns of their own, never in the LAN's."""
    def p(stack, workload, value, **extra):
        return _r(stack, value, workload=workload, **extra)
    guest = read([p("nfs:sys", "put", 50e6), p("nfs:krb5p", "put", 10e6), p("nfs:v3", "put", 48e6),
                  p("nfs:sys", "get", 60e6), p("nfs:krb5p", "get", 12e6),
                  p("nfs:sys", "put", 20e6, delay_ms=20.0), p("nfs:krb5p", "put", 5e6,
                                                               delay_ms=20.0)])
    t = {b["label"]: b for b in fr.section(read([]), [guest])}["R4"]["tables"][0]
    assert t["columns"] == ["write", "read", "write, 20 ms more", "read, 20 ms more"]
    rows = {r["name"]: r["cells"] for r in t["rows"]}
    assert [c["ours"] for c in rows["NFS 4"]] == [50.0, 60.0, 20.0, None]
    assert rows["NFS 4, krb5p"][0]["ours_vs"] == pytest.approx(0.2)
    assert rows["NFS 4, krb5p"][2]["ours_vs"] == pytest.approx(0.25)
    assert rows["NFS 3"][0]["ours_vs"] == pytest.approx(0.96) and rows["NFS 3"][2]["ours"] is None


def test_r2s_table_takes_the_guests_dm_crypt_or_this_hosts_qemu_luks_each_against_its_own_native():
    """A row's candidates in order, the reference row's at the same place: dm-crypt against the
    plain filesystem, qemu's LUKS against qemu's raw export; a reference line of theirs has no
    cells; bonnie++'s three phases fill the three columns, as R2's own bonnie++ did."""
    def w(stack, op, value):
        return {"kind": "storage", "stack": stack, "workload": "bonnie", "op": op,
                "block_bytes": 8192, "median_bytes_per_s": value}
    host = read([w("qemu-raw", "write", 800e6), w("luks-userspace:aes-256-xts-plain64", "write",
                                                  400e6), w("plain", "write", 2000e6),
                 w("qemu-raw", "rewrite", 500e6),
                 w("luks-userspace:aes-256-xts-plain64", "rewrite", 100e6)])
    guest = read([w("plain", "write", 100e6), w("luks:twofish-lrw-benbi", "write", 20e6)])
    t = {b["label"]: b for b in fr.section(host, [guest])}["R2"]["tables"][0]
    rows = {r["name"]: r["cells"] for r in t["rows"]}
    xts = rows["aes-xts-plain, their retest"]
    assert xts[0]["ours"] == pytest.approx(400.0) and xts[0]["ours_vs"] == pytest.approx(0.5)
    assert not xts[0]["emulated"] and xts[2]["ours"] is None
    assert xts[1]["ours"] == pytest.approx(100.0) and xts[1]["ours_vs"] == pytest.approx(0.2)
    assert xts[1]["theirs"] == pytest.approx(38.7) and xts[1]["theirs_vs"] is None   # no native
    # held against its own candidate's baseline, and said so: native's row shows plain
    assert fr.table_text(xts[0], "ours") == "400.0 (0.50× qemu-raw)"
    assert fr.table_text(rows["native"][0], "ours") == "2000.0 (1.00× plain)"
    assert xts[0]["theirs_vs"] == pytest.approx(128.6 / 252.0)
    lrw = rows["twofish-lrw-benbi"][0]
    assert lrw["emulated"] and lrw["ours_vs"] == pytest.approx(0.2) and lrw["theirs"] is None
    line = rows["gigabit Ethernet in practice (their reference line)"]
    assert line[0]["theirs"] == 100.0 and line[0]["ours"] is None and line[1]["theirs"] is None


def test_r2s_table_is_drawn_with_its_reference_lines_where_the_run_has_its_rows():
    from cryptcost.report import charts

    def w(stack, op, value):
        return {"kind": "storage", "stack": stack, "workload": "bonnie", "op": op,
                "block_bytes": 8192, "median_bytes_per_s": value}
    guest = read([w("plain", "write", 100e6), w("luks:aes-xts-plain64", "write", 20e6),
                  w("luks:aes-xts-plain64", "read", 30e6), w("plain", "read", 120e6)])
    blocks = {b["label"]: b for b in fr.section(read([]), [guest])}
    svg = charts.field_table(blocks["R2"]["tables"][0])
    assert svg and svg.lstrip().startswith("<svg") and "stroke-dasharray" in svg
    assert charts.field_table(blocks["R5"]["tables"][0]) is None    # no reference line, no run
    from types import SimpleNamespace
    doc = SimpleNamespace(answer=None, scaling=[], storage=(), network=(),
                          field_reports=tuple(blocks.values()))
    drawn = charts.all_charts(guest, doc)["field_tables"]
    assert set(drawn) == {"R2:0"}


def test_r1s_table_reads_each_stacks_copies_by_r1s_file_whatever_size_the_medium_gave_it():
    """R1's stack × file size: its 1, 5 and 10 GB files are bigfile-1024M … on a medium of
    25 GiB or more, bigfile-40M … on the seeds suite's 1 GiB, bigfile-10M … in the guest."""
    def r(stack, workload, op, medium, value):
        return {"kind": "storage", "stack": stack, "workload": workload, "op": op,
                "size": medium, "block_bytes": 0 if op == "rsync" else 1 << 20,
                "median_bytes_per_s": value}
    gib = 1 << 30
    host = read([r("plain", "bigfile-40M", "rsync", gib, 400e6),
                 r("plain", "bigfile-409M", "rsync", gib, 500e6),
                 r("fscrypt:aes-256-xts", "bigfile-409M", "rsync", gib, 250e6),
                 r("luks-userspace:aes-256-xts-plain64", "bigfile-204M", "read", gib, 100e6),
                 r("plain", "bigfile-204M", "read", gib, 800e6),
                 r("gocryptfs:aes-gcm", "bigfile-10240M", "rsync", 26 * gib, 90e6)])
    guest = read([r("plain", "bigfile-102M", "rsync", 256 << 20, 50e6),
                  r("zfs:aes-256-gcm", "bigfile-102M", "rsync", 256 << 20, 10e6)])
    t = {b["label"]: b for b in fr.section(host, [guest])}["R1"]["tables"][0]
    rows = {row["name"]: row["cells"] for row in t["rows"]}
    assert rows["ext4"][0]["ours"] == pytest.approx(400.0)              # the 1 GB file's copy
    fscrypt = rows["fscrypt (ext4's own encryption)"]
    assert fscrypt[2]["ours"] == pytest.approx(250.0) and fscrypt[2]["ours_vs"] == \
        pytest.approx(0.5) and fscrypt[0]["ours"] is None
    luks = rows["dm-crypt/LUKS"][3]                                     # the 5 GB file's read
    assert luks["ours"] == pytest.approx(100.0) and fr.table_text(luks, "ours") == \
        "100.0 (0.12× plain)"
    # R1's own 10 GB file, on a large medium: no plain beside it there, so no ratio
    assert rows["gocryptfs"][2]["ours"] == pytest.approx(90.0)
    assert rows["gocryptfs"][2]["ours_vs"] is None
    zfs = rows["ZFS, encryption=aes-256-gcm"][2]
    assert zfs["emulated"] and zfs["ours_vs"] == pytest.approx(0.2)
    assert all(c["theirs"] is None for cells in rows.values() for c in cells)  # never published


def test_a_row_on_another_filesystem_than_the_reference_is_held_against_its_own_baseline():
    """ZFS is its own filesystem: ext4's plain row is no pair for it on the same medium, so its
    figure is held against its matched baseline (zfs:off) in the same run, and says so."""
    def r(stack, fs, value, baseline=None):
        return {"kind": "storage", "stack": stack, "workload": "bigfile-102M", "op": "rsync",
                "size": 256 << 20, "fs": fs, "medium": "ram", "block_bytes": 0,
                "median_bytes_per_s": value, "baseline": baseline}
    guest = read([r("plain", "ext4", 50e6), r("zfs:off", "zfs", 20e6),
                  r("zfs:aes-256-gcm", "zfs", 10e6, baseline="zfs:off")])
    t = {b["label"]: b for b in fr.section([], [guest])}["R1"]["tables"][0]
    zfs = {row["name"]: row["cells"] for row in t["rows"]}["ZFS, encryption=aes-256-gcm"][2]
    assert zfs["ours_vs"] == pytest.approx(0.5) and zfs["ours_vs_stack"] == "zfs:off"
    assert fr.table_text(zfs, "ours") == "10.0 (0.50× zfs:off) emulated"


def test_a_row_without_figures_says_why_from_the_runs_record_of_what_it_left_out():
    """What the run could not run, or cut to fit its time budget (in this host's share or a
    guest's), is why a row or a table's row has no figure here; where the record says nothing,
    the row names the cells it lacks; a reference line of theirs has no reason."""
    skipped = [
        {"part": "R2 cipher by cipher over block I/O", "stack": "storage workloads bonnie",
         "budget": "left out to fit the guest's 40 min", "reason": "left out to fit the guest's "
         "40 min of --time-budget 1.5 h"},
        {"part": "R5 IPsec cipher/auth matrix, both directions", "stack": "the whole part",
         "budget": "left out at run time", "reason": "left out at run time: the --time-budget "
         "was spent before it began"},
        {"part": "R1 encrypted filesystems, large files", "stack": "zfs",
         "reason": "the ZFS kernel module is not loaded"},
        # another report's part: no reason for R4's rows
        {"part": "R3 block sizes", "stack": "the whole part", "budget": "x", "reason": "cut"},
    ]
    blocks = {b["label"]: b for b in fr.section([], [], skipped)}
    r2 = blocks["R2"]
    assert all(x["why_not"].endswith(
        "storage workloads bonnie: left out to fit the guest's 40 min of --time-budget 1.5 h")
        for x in r2["rows"]), r2["rows"]
    rows = {r["name"]: r["why_not"] for r in r2["tables"][0]["rows"]}
    assert "left out to fit the guest's" in rows["aes-ecb"]
    assert rows["gigabit Ethernet in practice (their reference line)"] is None
    assert all("the --time-budget was spent" in x["why_not"] for x in blocks["R5"]["rows"])
    r1 = {r["name"]: r["why_not"] for r in blocks["R1"]["tables"][0]["rows"]}
    assert r1["ZFS, encryption=aes-256-gcm"] == "zfs: the ZFS kernel module is not loaded"
    # every reason the record gives, once: a stack this host cannot run, and its guest's cut
    both = fr.left_out("R2", [{"kind": "storage", "stack": "luks:aes-ecb", "workload": "bonnie"}],
                       [{"part": "R2 x", "stack": "luks:aes-ecb", "reason": "no dm-crypt"},
                        {"part": "R2 y", "stack": "luks:aes-ecb", "reason": "no dm-crypt"},
                        {"part": "R2 x", "stack": "the whole part", "budget": "b",
                         "reason": "left out to fit the guest's"}])
    assert both == "luks:aes-ecb: no dm-crypt; R2 x: the whole part: left out to fit the guest's"
    assert r1["gocryptfs"].startswith("no result for gocryptfs")
    assert all(x["why_not"].startswith("no result for") and "cut" not in x["why_not"]
               for x in blocks["R4"]["rows"])
    # a whole part's cut that says what it measured takes only those rows
    smallfiles = {"part": "R3 and R4 small files", "stack": "the whole part", "budget": "b",
                  "reason": "cut", "ciphers": False, "workloads": ["smallfiles", "mixed"]}
    assert fr.left_out("R3", [{"kind": "storage", "workload": "seq", "block_bytes": 512}],
                       [smallfiles]) is None
    assert fr.left_out("R3", [{"kind": "cipher", "engine": "openssl"}], [smallfiles]) is None
    assert fr.left_out("R3", [{"kind": "storage", "workload": "mixed"}], [smallfiles]) == \
        "R3 and R4 small files: the whole part: cut"
    # a whole part's cut that names its block sizes takes only rows of those sizes: R3's
    # every-stack part (1 MiB) is no reason for the block-size table's 512 B row
    every = {"part": "R3 AES-NI and cores for every stack", "stack": "the whole part",
             "budget": "b", "reason": "cut", "ciphers": False, "workloads": ["seq"],
             "stacks": ["all"], "block_bytes": [1 << 20]}
    assert fr.left_out("R3", [{"kind": "storage", "workload": "seq", "block_bytes": 512}],
                       [every]) is None
    assert fr.left_out("R3", [{"kind": "storage", "workload": "seq", "block_bytes": 1 << 20}],
                       [every]) == "R3 AES-NI and cores for every stack: the whole part: cut"
    # a guest's whole share of a part takes only the rows of the stacks it would have measured
    guests = {"part": "R1 large files", "stack": "the whole part", "budget": "b", "reason": "cut",
              "ciphers": False, "workloads": ["bigfile"], "stacks": ["luks:aes-xts-plain64", "zfs"]}
    for stack in ("plain", "fscrypt:aes-256-xts"):
        assert fr.left_out("R1", [{"kind": "storage", "stack": stack}], [guests]) is None, stack
    for stack in ("luks:aes-xts-plain64", "zfs:aes-256-gcm"):
        assert fr.left_out("R1", [{"kind": "storage", "stack": stack}], [guests]) == \
            "R1 large files: the whole part: cut", stack
    assert fr.left_out("R1", [{"kind": "storage", "stack": "plain"}],
                       [{**guests, "stacks": ["all"]}]) == "R1 large files: the whole part: cut"
    # a cut of one value takes only the cells with it
    assert fr.left_out("R3", [{"kind": "storage", "accel": True}],
                       [{"part": "R3 x", "stack": "storage accel off", "budget": "b",
                         "reason": "r"}]) is None
    assert fr.left_out("R3", [{"kind": "storage", "accel": False}],
                       [{"part": "R3 x", "stack": "storage accel off", "budget": "b",
                         "reason": "r"}]) == "R3 x: storage accel off: r"
