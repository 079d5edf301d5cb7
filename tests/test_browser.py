"""The app in a real browser: the server started as the README starts it (``make app``),
headless Debian chromium driven by Playwright, every page opened, run to the end, checked
for exceptions and a drawn plotly chart; play pressed where there is an animation.

Skips only if /usr/bin/chromium is missing (``make test`` installs it). Screenshots go to
pytest's tmp dir (printed with -s). ``DLSYS_MEASURE=1`` also prints each page's first
render time (see docs/app.md).
"""

import os
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

CHROMIUM = "/usr/bin/chromium"
ROOT = Path(__file__).resolve().parents[1]
PAGES = {"home": "", "collectives": "collectives", "cost model": "cost_model", "ps vs ring": "ps_vs_ring"}
ANIMATED = {"collectives", "ps vs ring"}
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs Debian chromium at /usr/bin/chromium")]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def app_url():
    """``make app`` on a free port, as the README starts it; stopped with its process group."""
    port = free_port()
    server = subprocess.Popen(["make", "-s", "app", f"PORT={port}"], cwd=ROOT, start_new_session=True,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120  # make may first install the venv
        while True:
            try:
                if urllib.request.urlopen(f"{url}/_stcore/health", timeout=2).read() == b"ok":
                    break
            except OSError:
                pass
            if server.poll() is not None:
                pytest.fail(f"make app exited with {server.returncode}: {server.stderr.read().decode()[-2000:]}")
            if time.monotonic() > deadline:
                pytest.fail("the app server did not answer /_stcore/health within 120 s")
            time.sleep(0.3)
        yield url
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright
    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


def wait_for_script(page, timeout_ms: int = 60_000) -> None:
    """Until the app is connected and its script has run to the end."""
    page.wait_for_selector('[data-testid="stApp"][data-test-connection-state="CONNECTED"]', timeout=timeout_ms)
    page.wait_for_selector('[data-testid="stApp"][data-test-script-state="notRunning"]', timeout=timeout_ms)


@pytest.mark.parametrize("name", PAGES)
def test_page_renders_in_chromium(app_url, browser, name, tmp_path_factory):
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    start = time.perf_counter()
    page.goto(f"{app_url}/{PAGES[name]}")
    wait_for_script(page)
    page.wait_for_selector('[data-testid="stPlotlyChart"] .main-svg', timeout=30_000)
    rendered_s = time.perf_counter() - start
    assert page.locator('[data-testid="stException"]').count() == 0, page.locator('[data-testid="stException"]').first.inner_text()
    if name in ANIMATED:
        chart = page.locator(".js-plotly-plot").first
        page.locator(".updatemenu-button", has_text="Play").first.click()
        page.wait_for_timeout(1500)
        assert chart.evaluate("el => el._fullLayout.sliders[0].active") > 0, "play did not advance the animation"
    shots = tmp_path_factory.mktemp("screenshots")
    page.screenshot(path=str(shots / f"{name.replace(' ', '_')}.png"), full_page=True)
    print(f"\n{name}: first render {rendered_s:.2f} s, screenshot in {shots}")
    if os.environ.get("DLSYS_MEASURE"):
        assert rendered_s <= 3.0, f"{name} took {rendered_s:.2f} s to render"
    page.close()
