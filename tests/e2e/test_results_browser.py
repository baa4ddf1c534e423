"""A real Chromium on the teacher page: log in, Mark All, watch every mark arrive live."""

from __future__ import annotations

import os
import re
import shutil

import asyncpg
import pytest

from aiqueue.db.store import Store, connect_pool
from aiqueue.dev import demo
from aiqueue.live import LiveConfig
from aiqueue.web.app import create_app
from aiqueue.web.live import configure
from functions.ai_mark.server import create_app as function_app
from functions.ai_mark.settings import Settings as FunctionSettings
from tests.conftest import SECRET, make_settings
from tests.e2e.live_servers import serve
from tests.e2e.servers import ROOT, free_port

CHROMIUM = shutil.which("chromium")
pytestmark = [
    pytest.mark.e2e,
    pytest.mark.browser,
    pytest.mark.skipif(CHROMIUM is None and not os.environ.get("AIQUEUE_REQUIRE_BROWSER"),
                       reason="Debian's chromium is not installed"),
]
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--no-first-run", "--disable-sync"]
MARK = re.compile(r"^\d+(\.\d+)? / 10$")


async def test_mark_all_fills_every_row_live_and_the_bar_reaches_100(
    db_url: str, conn: asyncpg.Connection
):
    from playwright.async_api import async_playwright, expect

    store = Store(await connect_pool(db_url, max_size=2))
    await demo.seed(store)
    await store.close()
    fn_port, port = free_port(), free_port()
    base = f"http://127.0.0.1:{port}"
    app = create_app(make_settings(
        db_url, app_base_url=base, callback_url=f"{base}/webhooks/ai-mark",
        function_url=f"http://127.0.0.1:{fn_port}/", max_in_flight=2))
    # Short streams: the page also has to survive its EventSource reconnecting.
    configure(app, LiveConfig(max_seconds=3, heartbeat_seconds=1, poll_seconds=0.5))
    marker = function_app(FunctionSettings(simulate_latency=0.05, callback_backoff=0.05))
    shot = ROOT / "test-artifacts" / "teacher-page.png"
    shot.parent.mkdir(exist_ok=True)
    with serve(marker, fn_port), serve(app, port):
        async with async_playwright() as pw:
            browser = await pw.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
            try:
                page = await browser.new_page(viewport={"width": 1280, "height": 900})
                errors: list[str] = []
                page.on("pageerror", lambda exc: errors.append(str(exc)))
                await page.goto(f"{base}/results/assignments/{demo.ASSIGNMENT_ID}")
                await expect(page).to_have_url(re.compile(r"/ai-queue/login"))
                await page.fill("#password", SECRET)
                await page.click("button[type=submit]")
                await expect(page).to_have_url(re.compile(r"/results/assignments/"))
                rows = page.locator("tr[data-submission]")
                await expect(rows).to_have_count(len(demo.ANSWERS))
                await expect(page.locator("#progress-text")).to_have_text("Not marked yet.")
                assert await page.locator("td.mark .score").all_inner_texts() == \
                    [""] * len(demo.ANSWERS)

                await page.evaluate("window.loadedOnce = true")
                await page.click("#mark-all")
                await expect(page.locator("#notice")).to_contain_text("sent for marking")
                await expect(page.locator("#progress")).to_have_attribute(
                    "aria-valuenow", "100", timeout=60_000)
                scores = page.locator("td.mark .score")
                for i in range(len(demo.ANSWERS)):
                    await expect(scores.nth(i)).to_have_text(MARK, timeout=20_000)
                await expect(page.locator("#progress-text")).to_have_text(
                    f"{len(demo.ANSWERS)} of {len(demo.ANSWERS)} marked")
                await expect(page.locator("td.mark .feedback").first).to_contain_text(
                    "Simulated marking")
                await page.screenshot(path=str(shot), full_page=True)
                # Live, not by reload: the page loaded once, before any mark existed.
                assert await page.evaluate("window.loadedOnce === true")
                assert errors == []
            finally:
                await browser.close()
    assert shot.stat().st_size > 10_000
    marked = await conn.fetchval("SELECT count(*) FROM submissions WHERE ai_result IS NOT NULL")
    assert marked == len(demo.ANSWERS)
