"""Each bench writes a record of its run, and bench/README.md's table is made from the
records alone."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
import records  # noqa: E402


def test_a_bench_in_a_short_mode_writes_its_record(tmp_path):
    """For real: one round of bare `openssl speed` against `cryptcost ciphers` on one cell."""
    done = subprocess.run([sys.executable, str(ROOT / "bench/ciphers_vs_openssl"), "--rounds", "2",
                           "--algos", "aes-128-gcm", "--records", str(tmp_path)],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode in (0, 1), done.stderr[-2000:]  # 1: outside ±3 %, recorded all the same
    [line] = (tmp_path / "ciphers_vs_openssl.jsonl").read_text().splitlines()
    entry = json.loads(line)
    assert entry["bench"] == "ciphers_vs_openssl" and entry["goal"].startswith(
        "cryptcost within ±3 %"
    )
    assert (
        entry["met"] == (done.returncode == 0)
        and entry["commit"]
        and entry["cpu"]
        and entry["date"]
    )
    [fig] = entry["figures"]
    assert (
        fig["cell"] == "aes-128-gcm 4096 B ×1"
        and 0.5 < fig["value"] < 2
        and fig["unit"] == "× bare openssl"
    )
    assert len(fig["ci95"]) == 2 and fig["verdict"]
    assert "`ciphers_vs_openssl`" in records.table(tmp_path)
    assert (
        not (ROOT / "bench/records/ciphers_vs_openssl.jsonl").exists()
        or line not in (ROOT / "bench/records/ciphers_vs_openssl.jsonl").read_text()
    )  # the repo's were not touched


def test_the_readme_table_is_the_latest_record_of_each_bench(tmp_path):
    for n, met in ((1, False), (2, True)):
        records.record(
            "demo", "goal", met, [records.figure("cell", 1.0 + n / 100, "×", (0.99, 1.05), "n.s.")],
            tmp_path,
        )
    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n\n{records.BEGIN}\nstale\n{records.END}\n\nrest\n")
    records.write_readme(readme, tmp_path)
    text = readme.read_text()
    assert "stale" not in text and text.endswith("\n\nrest\n")
    [row] = [line for line in text.splitlines() if line.startswith("| `demo`")]
    assert "| yes |" in row and "cell: 1.02 × (0.99–1.05), n.s." in row and "1.01" not in row


def test_the_repos_bench_readme_table_is_made_from_its_records():
    text = (ROOT / "bench/README.md").read_text()
    shown = text.split(records.BEGIN, 1)[1].split(records.END, 1)[0].strip()
    assert shown == records.table().strip(), (
        "bench/README.md's table is stale: run python3 bench/records.py"
    )


def test_a_record_of_a_tree_with_changes_not_committed_says_so(tmp_path):
    """A record's commit is HEAD's, with ``+dirty`` when src/ or bench/ differ from it (a new
    file too); what a bench itself writes (its records, bench/README.md) does not count."""
    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t"]
    (tmp_path / "src").mkdir()
    (tmp_path / "bench" / "records").mkdir(parents=True)
    for name in ("src/x.py", "bench/records/a.jsonl", "bench/README.md", "bench/b"):
        (tmp_path / name).write_text("one\n")
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "one"], check=True)
    clean = records._commit(tmp_path / "bench")
    assert clean and len(clean) == 12 and "+" not in clean
    (tmp_path / "bench/records/a.jsonl").write_text("two\n")
    (tmp_path / "bench/README.md").write_text("two\n")
    assert records._commit(tmp_path / "bench") == clean
    (tmp_path / "src/new.py").write_text("one\n")              # not yet added
    assert records._commit(tmp_path / "bench") == clean + "+dirty"
    (tmp_path / "src/new.py").unlink()
    (tmp_path / "src/x.py").write_text("two\n")
    assert records._commit(tmp_path / "bench") == clean + "+dirty"


def test_the_quick_suite_bench_splits_the_wall_time_by_the_runs_own_lines():
    """bench/quick_suite's phases: before the first part, each part's set-up (its "— " line to
    its "measuring:" line) and measuring (to the next part's line, the last to the answer's
    first line), the answer's printing; they add up to the wall time."""
    from importlib.machinery import SourceFileLoader
    from importlib.util import module_from_spec, spec_from_loader
    loader = SourceFileLoader("quick_suite", str(ROOT / "bench/quick_suite"))
    bench = module_from_spec(spec_from_loader("quick_suite", loader))
    loader.exec_module(bench)
    said = [(0.3, "suite quick:\n"), (4.0, "— quick: ciphers\n"), (4.1, "measuring: 40 steps\n"),
            (5.0, "  [    0 s] step 1/40: openssl\n"), (60.0, "— quick: storage\n"),
            (80.0, "measuring: 52 steps\n"), (81.0, "  [    0 s] step 1/52: plain\n"),
            (200.0, "The answer — cryptcost run 1\n"), (200.1, "run 1 stored\n")]
    phases = dict(bench.phase_seconds(said, 200.5))
    assert phases == pytest.approx({
        "before the first part": 4.0, "quick: ciphers set-up": 0.1,
        "quick: ciphers measuring and teardown": 55.9, "quick: storage set-up": 20.0,
        "quick: storage measuring and teardown": 120.0, "the answer printed": 0.5})
    assert sum(phases.values()) == pytest.approx(200.5)
    # a run cut short before its parts said what they measure: no phases, not wrong ones
    assert bench.phase_seconds(said[:3] + [(9.0, "— quick: storage\n")], 10.0) == []


def test_the_stability_comparison_finds_a_kind_made_wider_and_refuses_when_the_control_moved():
    """bench/stability_compare pairs each cell's half-widths before and after a change: reads
    twice as wide on 13 cells are "wider" while writes and ciphers that only jitter are not;
    ciphers (the control, which a storage change does not touch) moved as well: undecided,
    since the host moved between the sides, whatever the reads did — but for a control wider
    after with no kind wider, which a noisier host cannot explain away."""
    from importlib.machinery import SourceFileLoader
    from importlib.util import module_from_spec, spec_from_loader
    loader = SourceFileLoader("stability_compare", str(ROOT / "bench/stability_compare"))
    bench = module_from_spec(spec_from_loader("stability_compare", loader))
    loader.exec_module(bench)
    jitter = [1.0, 1.1, 0.95, 1.05, 0.9, 1.02, 0.97, 1.08, 0.93, 1.01, 0.99, 1.04, 0.96]

    def side(factors):
        return {(k, f"cell {i}"): [(0.03 * f * j, 0.01, 1.0) for j in (1.0, 1.2)]
                for k, fs in factors.items() for i, f in enumerate(fs)}
    before = side({"cipher": [1.0] * 13, "storage write": [1.0] * 13, "storage read": [1.0] * 13})
    after = side({"cipher": jitter, "storage write": jitter[::-1],
                  "storage read": [2 * j for j in jitter]})
    n, ratio, p = bench.paired(before, after, "storage read")
    assert n == 13 and ratio == pytest.approx(2.0, rel=0.05) and p < 0.01
    assert bench.paired(before, after, "storage write")[2] > 0.05
    wider = [k for k in bench.KINDS if (t := bench.paired(before, after, k)) and t[2] < 0.05]
    assert wider == ["storage read"]
    assert bench.judge(before, after, wider, "cipher")[:2] == (False, "NOT met: storage read")
    assert bench.judge(before, after, [], "cipher")[:2] == (True, "met")
    moved = side({"cipher": [1.5 * j for j in jitter]})
    met, said, test = bench.judge(before, {**after, **moved}, wider, "cipher")
    assert not met and said.startswith("undecided: the control (cipher") and test[2] < 0.05
    assert bench.judge(before, {**after, **moved}, wider, "none")[0] is False
    # the control wider after and no kind wider: the host was the noisier after, yet no kind
    # widened: met; the control narrower after decides nothing, whatever the kinds did
    met, said, test = bench.judge(before, {**after, **moved}, [], "cipher")
    assert met and said.startswith("met, against a noisier host") and test[1] > 1
    quieter = side({"cipher": [j / 1.5 for j in jitter]})
    met, said, test = bench.judge(before, {**after, **quieter}, [], "cipher")
    assert not met and said.startswith("undecided") and test[1] < 1
    assert bench.paired(before, after, "network") is None        # no cells: no test
