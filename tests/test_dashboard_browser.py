"""The dashboard in a real browser: ``streamlit run app.py`` on a free localhost port with the fixture
artifacts, headless Debian Chromium driven by Playwright visits every page, checks it rendered (title,
charts, no exception box) and saves a screenshot. The server's process group is always killed.

Screenshots go to ``$DASHBOARD_SCREENSHOTS`` when set (CI artifact), else to the test's tmp folder.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from workbench.dashboard.paths import ENV_VAR

CHROMIUM = Path("/usr/bin/chromium")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]
APP_DIR = Path(__file__).resolve().parent.parent
# url path -> (title, text the page must show, minimum number of charts)
PAGES = {
    "": ("Speech precision workbench", "speech sets", 0),
    "sets": ("Speech sets", "Listen to", 4),
    "calibration": ("Calibration", "cached amax", 2),
    "layers": ("Layers", "tensors compared", 1),
    "tradeoff": ("Trade-off: accuracy vs latency", "Recommendation", 2),
    "signoff": ("Sign-off", "Downloads", 0),
    "run": ("Run", "Start calibration", 0),
}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _stop(proc: subprocess.Popen) -> None:
    """SIGTERM the server's whole process group, SIGKILL it if it lingers."""
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    except ProcessLookupError:
        pass


@pytest.fixture
def server(dash_artifacts, tmp_path):
    port = _free_port()
    log = open(tmp_path / "streamlit.log", "wb")
    env = {**os.environ, ENV_VAR: str(dash_artifacts.root)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless=true", f"--server.port={port}",
         "--server.address=127.0.0.1", "--browser.gatherUsageStats=false", "--server.fileWatcherType=none"],
        cwd=APP_DIR, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 90
        while True:
            try:
                if urllib.request.urlopen(f"{url}/_stcore/health", timeout=2).read() == b"ok":
                    break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                log.flush()
                pytest.fail("streamlit did not start:\n" + (tmp_path / "streamlit.log").read_text()[-3000:])
            time.sleep(0.3)
        yield url
    finally:
        _stop(proc)
        log.close()


@pytest.mark.slow
@pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian chromium is not installed (/usr/bin/chromium; setup.sh installs it)")
def test_every_page_renders_in_headless_chromium(server, tmp_path) -> None:
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright (dev extra) is not installed")
    shots = Path(os.environ.get("DASHBOARD_SCREENSHOTS") or tmp_path / "screenshots")
    shots.mkdir(parents=True, exist_ok=True)
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 2200})
            for path, (title, text, charts) in PAGES.items():
                page.goto(f"{server}/{path}")
                page.get_by_role("heading", name=title, exact=True).wait_for(timeout=60_000)
                page.get_by_text(text, exact=False).filter(visible=True).first.wait_for(timeout=60_000)
                if charts:
                    page.wait_for_function(
                        "n => document.querySelectorAll('[data-testid=\"stVegaLiteChart\"] canvas, "
                        "[data-testid=\"stVegaLiteChart\"] svg.marks').length >= n", arg=charts, timeout=60_000)
                if path == "signoff":  # the report page, rendered into its sandboxed frame
                    page.frame_locator("iframe").first.get_by_role("heading", name="Precision sign-off").wait_for(
                        timeout=60_000)
                page.wait_for_timeout(800)  # let the last charts finish drawing
                assert page.locator('[data-testid="stException"]').count() == 0, path
                out = shots / f"{path or 'overview'}.png"
                page.screenshot(path=str(out), full_page=True)
                assert out.stat().st_size > 20_000, out  # a drawn page, not a blank one
            # click-through: a click on a heatmap cell opens that layer's node
            page.goto(f"{server}/layers")
            page.get_by_role("heading", name="Layers", exact=True).wait_for(timeout=60_000)
            heat = page.locator('[data-testid="stVegaLiteChart"]').first
            heat.locator("canvas, svg.marks").first.wait_for(timeout=60_000)
            page.wait_for_timeout(1000)
            before = page.locator("h3").first.inner_text()
            box = heat.bounding_box()
            page.mouse.click(box["x"] + box["width"] * 0.8, box["y"] + box["height"] * 0.5)
            page.wait_for_function("b => { const h = document.querySelector('h3'); return h && h.innerText !== b; }",
                                   arg=before, timeout=60_000)
            after = page.locator("h3").first.inner_text()
            page.wait_for_function(  # the rerun has finished: the node's own row is shown, nothing stale left
                "n => !document.querySelector('[data-stale=\"true\"]') && [...document.querySelectorAll("
                "'[data-testid=\"stJson\"]')].some(e => e.innerText.includes(n))", arg=after, timeout=60_000)
            page.screenshot(path=str(shots / "layers-clicked.png"), full_page=True)
            # a crafted query parameter is refused in the browser too
            page.goto(f"{server}/sets?set=../../../../etc/passwd")
            page.get_by_text("refused", exact=False).filter(visible=True).first.wait_for(timeout=60_000)
            assert page.get_by_text("root:x:0:0").count() == 0
            page.screenshot(path=str(shots / "refused.png"), full_page=True)
        finally:
            browser.close()
