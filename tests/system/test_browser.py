"""The HTML report in a real browser: headless Chromium renders it, takes a
screenshot, and must show non-empty SVG charts with no console errors."""

import json
import re
import shutil
import subprocess

import pytest

from cryptcost.report.render import render
from cryptcost.store.db import Store
from tests.conftest import FIXTURES, skip_or_fail

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--enable-logging=stderr", "--v=0", "--window-size=1280,2400"]


def chromium(tmp_path, page, *extra) -> subprocess.CompletedProcess:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if not exe:
        skip_or_fail("chromium", "chromium is not installed (apt-get install chromium)")
    return subprocess.run(
        [exe, *FLAGS, f"--user-data-dir={tmp_path / 'profile'}", *extra, f"file://{page}"],
        capture_output=True, text=True, timeout=120,
    )


def console_errors(stderr: str) -> list[str]:
    return [l for l in stderr.splitlines()
            if "CONSOLE" in l or "Uncaught" in l or "Failed to load resource" in l]


@pytest.fixture
def report_page(tmp_path):
    store = Store.open(tmp_path / "r.db")
    run = store.run(store.import_run(json.loads((FIXTURES / "runs" / "quick-vm.json").read_text())))
    page = tmp_path / "report.html"
    page.write_text(render("html", run, store.results(run.id)))
    return page


def test_report_renders_charts_without_console_errors(tmp_path, report_page):
    shot = tmp_path / "shot.png"
    proc = chromium(tmp_path, report_page, f"--screenshot={shot}")
    assert shot.exists(), proc.stderr[-2000:]
    assert console_errors(proc.stderr) == []
    from PIL import Image, ImageStat
    img = Image.open(shot).convert("L")
    assert img.size == (1280, 2400)
    assert ImageStat.Stat(img).stddev[0] > 10, "the screenshot is blank"
    dom = chromium(tmp_path, report_page, "--dump-dom")
    assert console_errors(dom.stderr) == []
    svgs = re.findall(r"<svg\b.*?</svg>", dom.stdout, re.S)
    assert len(svgs) >= 4
    for svg in svgs:
        assert re.search(r"<(path|rect|line|text)\b", svg), "an SVG chart rendered empty"
    assert "Summary and recommendation" in dom.stdout


def test_the_console_check_catches_a_broken_page(tmp_path):
    """Negative control: the check above would see an error if there were one."""
    page = tmp_path / "broken.html"
    page.write_text(
        "<html><body><script>undefinedFunction();</script><img src='missing.png'></body></html>"
    )
    proc = chromium(tmp_path, page, "--dump-dom")
    assert console_errors(proc.stderr), proc.stderr[-2000:]


@pytest.mark.parametrize("width", [390, 1280])
def test_nothing_runs_past_the_screen_at_a_phones_width_or_a_desktops(tmp_path, report_page, width):
    """The page itself never scrolls sideways: a wide table scrolls inside its own box, a long
    name wraps. Headless Chromium's window is at least 500 px wide, so the page is measured in
    a frame of the width named, by a wrapper page with one line of script (the report itself
    carries none). The same check on the page without its table rule finds it too wide."""
    def width_of(page) -> tuple[int, int]:
        wrapper = tmp_path / f"wrap-{page.stem}.html"
        wrapper.write_text(
            f'<html><body style="margin:0"><iframe id="f" src="{page.name}" '
            f'style="width:{width}px;height:900px;border:0"></iframe><script>'
            'document.getElementById("f").onload = function () { var d = this.contentDocument; '
            'document.title = "W" + d.documentElement.scrollWidth + "x" + '
            'this.contentWindow.innerWidth + "W"; };</script></body></html>'
        )
        proc = chromium(tmp_path, wrapper, "--dump-dom", "--allow-file-access-from-files",
                        "--virtual-time-budget=5000", f"--window-size={max(width, 500) + 20},1000")
        m = re.search(r"<title>W(\d+)x(\d+)W</title>", proc.stdout)
        assert m, proc.stderr[-2000:]
        return int(m.group(1)), int(m.group(2))
    scroll, inner = width_of(report_page)
    assert inner == width and scroll <= inner, f"the page is {scroll} px wide in a {inner} px frame"
    if width < 500:
        bare = report_page.with_name("bare.html")
        bare.write_text(report_page.read_text().replace("display: block; max-width: 100%;", ""))
        assert width_of(bare)[0] > width, "the check cannot see a page that runs past the frame"
