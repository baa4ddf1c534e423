"""A real Chromium on the teacher page (docs/concepts.md): Mark All's estimate, and a run paused
at its hourly budget."""

from __future__ import annotations

import re

import asyncpg
from playwright.async_api import Browser, expect

from aiqueue.dev import demo
from aiqueue.settings import ModelPrice
from tests.e2e.browser import BROWSER_MARKS, QUICK, seed_demo, teacher_page
from tests.e2e.servers import ROOT

pytestmark = BROWSER_MARKS
ESTIMATE = re.compile(r"^\d+ answers · about [\d.]+k? tokens · about (\$[\d.]+|under \$0\.01)")
PAUSED = re.compile(r"paused: this hour's marking budget is spent; resumes at \d\d:\d\d UTC")


async def test_mark_all_shows_its_estimate_then_pauses_at_the_hourly_budget(
    chromium: Browser, db_url: str, conn: asyncpg.Connection
):
    await seed_demo(db_url)
    shots = ROOT / "test-artifacts"
    shots.mkdir(exist_ok=True)
    # A budget smaller than one row: the first row goes, the rest wait for the next hour.
    async with teacher_page(
            chromium, db_url, function=QUICK, viewport={"width": 1280, "height": 900},
            max_in_flight=1, model_prices={"gpt-4o-mini": ModelPrice(5.0, 15.0)},
            group_usd_per_hour=0.000001) as teacher:
        page = teacher.page
        await page.click("#mark-all")
        await expect(page.locator("#estimate")).to_be_visible()
        await expect(page.locator("#estimate-text")).to_have_text(ESTIMATE)
        await expect(page.locator("#estimate-text")).to_contain_text(
            f"{len(demo.ANSWERS)} answers")
        await expect(page.locator("#estimate-cap")).to_contain_text(
            "this hour's marking budget")
        # Nothing is sent before the teacher says so.
        assert await conn.fetchval("SELECT count(*) FROM ai_marking_queue") == 0
        await page.screenshot(path=str(shots / "teacher-estimate.png"), full_page=True)

        await page.click("#estimate-send")
        await expect(page.locator("#notice")).to_contain_text("sent for marking")
        await expect(page.locator("#progress-text")).to_contain_text(
            PAUSED, timeout=30_000)
        await expect(page.locator("#progress-text")).to_contain_text(
            f"1 of {len(demo.ANSWERS)} marked")
        # The waiting rows say so too (from the live pause event).
        await expect(page.locator("td.mark .status", has_text="paused: budget")
                     ).to_have_count(len(demo.ANSWERS) - 1)
        await page.screenshot(path=str(shots / "teacher-paused.png"), full_page=True)
        assert teacher.errors == []
    assert (shots / "teacher-estimate.png").stat().st_size > 10_000
    assert (shots / "teacher-paused.png").stat().st_size > 10_000
    # Paused, never failed: the rest wait as pending, saying why.
    counts = dict(await conn.fetch(
        "SELECT status, count(*) FROM ai_marking_queue GROUP BY status"))
    assert counts == {"completed": 1, "pending": len(demo.ANSWERS) - 1}
