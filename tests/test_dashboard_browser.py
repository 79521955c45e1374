"""The dashboard in a real browser: ``streamlit run app.py`` on a free localhost port with the fixture
artifacts, headless Debian Chromium driven by Playwright visits every page, checks it rendered (title,
charts, no exception box) and saves a screenshot. A second server, started the way a team would share it
(``python -m workbench dashboard --token-file ... --read-only``), shows nothing but the sign-in until the
right token is entered, and then no Run page and no download button. Servers' process groups are always killed.

Screenshots go to ``$DASHBOARD_SCREENSHOTS`` when set (CI artifact), else to the test's tmp folder.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from dashkit import free_port, serve

from workbench.dashboard.paths import ENV_VAR

CHROMIUM = Path("/usr/bin/chromium")
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
APP_DIR = Path(__file__).resolve().parent.parent
# url path -> (title, text the page must show, minimum number of charts)
PAGES = {
    "": ("Speech precision workbench", "speech sets", 0),
    "sets": ("Speech sets", "Listen to", 4),
    "calibration": ("Calibration", "cached amax", 2),
    "layers": ("Layers", "tensors compared", 1),
    "tradeoff": ("Trade-off: accuracy vs latency", "Verdict:", 2),
    "signoff": ("Sign-off", "Downloads", 0),
    "run": ("Run", "Project (workbench run)", 0),  # the first tab; the calibration form sits behind its own
}


@pytest.fixture
def server(dash_artifacts, tmp_path):
    port = free_port()
    env = {**os.environ, ENV_VAR: str(dash_artifacts.root)}
    argv = [
        sys.executable,
        "-m",
        "streamlit",
        "run",
        "app.py",
        "--server.headless=true",
        f"--server.port={port}",
        "--server.fileWatcherType=none",
    ]
    with serve(argv, port, APP_DIR, env, tmp_path / "streamlit.log") as running:
        yield running.url


@pytest.mark.slow
@pytest.mark.skipif(
    not CHROMIUM.exists(), reason="Debian chromium is not installed (/usr/bin/chromium; setup.sh installs it)"
)
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
                        'n => document.querySelectorAll(\'[data-testid="stVegaLiteChart"] canvas, '
                        '[data-testid="stVegaLiteChart"] svg.marks\').length >= n',
                        arg=charts,
                        timeout=60_000,
                    )
                if path == "calibration":  # the convergence verdict from the cache sidecar
                    page.get_by_text("converged: ", exact=False).filter(visible=True).first.wait_for(
                        timeout=60_000
                    )
                if path == "signoff":  # the report page, rendered into its sandboxed frame, and its downloads
                    page.frame_locator("iframe").first.get_by_role(
                        "heading", name="Precision sign-off"
                    ).wait_for(timeout=60_000)
                    assert page.locator('[data-testid="stDownloadButton"]').count() >= 3
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
            page.wait_for_function(
                "b => { const h = document.querySelector('h3'); return h && h.innerText !== b; }",
                arg=before,
                timeout=60_000,
            )
            after = page.locator("h3").first.inner_text()
            page.wait_for_function(  # the rerun has finished: the node's own row is shown, nothing stale left
                "n => !document.querySelector('[data-stale=\"true\"]') && [...document.querySelectorAll("
                "'[data-testid=\"stJson\"]')].some(e => e.innerText.includes(n))",
                arg=after,
                timeout=60_000,
            )
            page.screenshot(path=str(shots / "layers-clicked.png"), full_page=True)
            # a crafted query parameter is refused in the browser too
            page.goto(f"{server}/sets?set=../../../../etc/passwd")
            page.get_by_text("refused", exact=False).filter(visible=True).first.wait_for(timeout=60_000)
            assert page.get_by_text("root:x:0:0").count() == 0
            page.screenshot(path=str(shots / "refused.png"), full_page=True)
        finally:
            browser.close()


@pytest.mark.slow
@pytest.mark.skipif(
    not CHROMIUM.exists(), reason="Debian chromium is not installed (/usr/bin/chromium; setup.sh installs it)"
)
def test_shared_read_only_dashboard_asks_for_the_token_and_offers_no_run_page_or_downloads(
    dash_artifacts, tmp_path
) -> None:
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright (dev extra) is not installed")
    token = "browser-test-token-" + "x" * 24
    token_file = tmp_path / "token.txt"
    token_file.write_text(token + "\n")
    token_file.chmod(0o600)
    port = free_port()
    argv = [
        sys.executable,
        "-m",
        "workbench",
        "dashboard",
        "--port",
        str(port),
        "--token-file",
        str(token_file),
        "--read-only",
        "--workspace",
        str(dash_artifacts.root),
    ]
    env = {**os.environ, "STREAMLIT_SERVER_HEADLESS": "true", "STREAMLIT_SERVER_FILE_WATCHER_TYPE": "none"}
    shots = Path(os.environ.get("DASHBOARD_SCREENSHOTS") or tmp_path / "screenshots")
    shots.mkdir(parents=True, exist_ok=True)
    content = '[data-testid="stMetric"], [data-testid="stSidebarNav"], [data-testid="stVegaLiteChart"]'
    with (
        serve(argv, port, tmp_path, env, tmp_path / "streamlit.log") as server,
        sync_api.sync_playwright() as pw,
    ):
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1600})

            def sign_in(value: str) -> None:
                field = page.get_by_label("Access token")
                field.fill(value)
                field.press("Enter")  # submits the form

            for path in ("sets", "signoff", ""):  # every page's URL gets the sign-in and nothing else
                page.goto(f"{server.url}/{path}")
                page.get_by_label("Access token").wait_for(timeout=60_000)
                page.wait_for_timeout(500)
                assert page.locator(content).count() == 0, path
                assert page.get_by_role("heading", name="Speech sets").count() == 0, path
            sign_in("not-the-token")
            page.get_by_text("That access token is not right.").wait_for(timeout=60_000)
            assert page.locator(content).count() == 0
            assert page.get_by_text("Artifacts under").count() == 0
            page.screenshot(path=str(shots / "shared-wrong-token.png"), full_page=True)
            sign_in(token)
            page.get_by_text("read-only: no Run page, no downloads").wait_for(timeout=60_000)
            page.get_by_text("visitors need the access token").wait_for(timeout=60_000)
            nav = page.locator('[data-testid="stSidebarNav"]')
            nav.wait_for(timeout=60_000)
            links = [
                t.strip().splitlines()[-1] for t in nav.locator("a").all_inner_texts()
            ]  # after the icon name
            assert "Overview" in links and "Sign-off" in links and "Run" not in links, links
            for title, heading in (
                ("Sign-off", "Sign-off"),
                ("Calibration", "Calibration"),
                ("Sets", "Speech sets"),
                ("Layers", "Layers"),
                ("Trade-off", "Trade-off: accuracy vs latency"),
            ):
                nav.locator(
                    "a", has_text=title
                ).first.click()  # in-app navigation keeps the signed-in session
                page.get_by_role("heading", name=heading, exact=True).wait_for(timeout=60_000)
                if title == "Sign-off":
                    page.frame_locator("iframe").first.get_by_role(
                        "heading", name="Precision sign-off"
                    ).wait_for(timeout=60_000)
                page.wait_for_timeout(800)
                assert page.locator('[data-testid="stException"]').count() == 0, title
                assert page.locator('[data-testid="stDownloadButton"]').count() == 0, title
                assert page.get_by_text("Downloads", exact=True).count() == 0, title
            page.screenshot(path=str(shots / "shared-read-only-signoff.png"), full_page=True)
            page.goto(f"{server.url}/run")  # the Run page does not exist in a read-only dashboard
            page.get_by_text("Page not found", exact=False).first.wait_for(timeout=60_000)
            page.screenshot(path=str(shots / "shared-read-only-run.png"), full_page=True)
            assert page.get_by_role("heading", name="Run", exact=True).count() == 0
            assert page.get_by_text("Start calibration").count() == 0
        finally:
            browser.close()
