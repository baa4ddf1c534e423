"""A real Chromium on the teacher page: log in, Mark All, watch every mark arrive live."""

from __future__ import annotations

import re

import asyncpg
from playwright.async_api import Browser, expect

from aiqueue.dev import demo
from aiqueue.reads.live import LiveConfig
from tests.e2e.browser import BROWSER_MARKS, MARK, QUICK, seed_demo, teacher_page
from tests.e2e.servers import ROOT

pytestmark = BROWSER_MARKS


async def test_mark_all_fills_every_row_live_and_the_bar_reaches_100(
    chromium: Browser, db_url: str, conn: asyncpg.Connection
):
    await seed_demo(db_url)
    shot = ROOT / "test-artifacts" / "teacher-page.png"
    shot.parent.mkdir(exist_ok=True)
    # Short streams: the page also has to survive its EventSource reconnecting.
    async with teacher_page(
            chromium, db_url, function=QUICK, viewport={"width": 1280, "height": 900},
            max_in_flight=2, live=LiveConfig(max_seconds=3, heartbeat_seconds=1,
                                             poll_seconds=0.5)) as teacher:
        page = teacher.page
        rows = page.locator("tr[data-submission]")
        await expect(rows).to_have_count(len(demo.ANSWERS))
        await expect(page.locator("#progress-text")).to_have_text("Not marked yet.")
        assert await page.locator("td.mark .score").all_inner_texts() == \
            [""] * len(demo.ANSWERS)

        await page.evaluate("window.loadedOnce = true")
        await page.click("#mark-all")
        await page.click("#estimate-send")  # Mark All shows its estimate first
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
        assert teacher.errors == []
    assert shot.stat().st_size > 10_000
    marked = await conn.fetchval("SELECT count(*) FROM submissions WHERE ai_result IS NOT NULL")
    assert marked == len(demo.ANSWERS)


async def test_marked_rows_are_re_marked_only_when_the_teacher_says_so(
    chromium: Browser, db_url: str, conn: asyncpg.Connection
):
    await seed_demo(db_url)
    # Paused: the rows this test enqueues stay pending, so the counts are exact.
    await conn.execute("UPDATE ai_queue_control SET paused = true")
    marked = [demo.submission_id(i) for i in (0, 1)]
    await conn.execute("UPDATE submissions SET ai_result = '{\"score\": 3, \"max_score\": 10}', "
                       "ai_marked_at = now() WHERE id = ANY($1)", marked)
    async with teacher_page(chromium, db_url) as teacher:
        page = teacher.page
        first = page.locator(f"tr[data-submission='{marked[0]}'] form.mark-one button")
        await expect(first).to_have_text("Re-mark with AI")
        await expect(first).to_have_attribute("title", re.compile("already has an AI"))
        unmarked = page.locator(
            f"tr[data-submission='{demo.submission_id(2)}'] form.mark-one button")
        await expect(unmarked).to_have_text("Mark with AI")

        await page.click("#mark-all")
        await page.click("#estimate-send")  # Mark All shows its estimate first
        await expect(page.locator("#notice")).to_have_text(
            f"{len(demo.ANSWERS) - 2} submission(s) sent for marking.")
        assert await conn.fetchval(
            "SELECT count(*) FROM ai_marking_queue WHERE submission_id = ANY($1)",
            marked) == 0

        await first.click()
        await expect(page.locator("#notice")).to_have_text(
            "1 submission(s) sent for re-marking.")

        await conn.execute("UPDATE ai_marking_queue SET status = 'cancelled'")
        dialogs: list[str] = []

        async def answer(dialog: object) -> None:
            dialogs.append(dialog.message)  # type: ignore[attr-defined]
            await dialog.accept()  # type: ignore[attr-defined]

        page.once("dialog", answer)
        await page.click("#remark-all")
        await expect(page.locator("#notice")).to_have_text(
            f"{len(demo.ANSWERS)} submission(s) sent for re-marking.")
        assert dialogs and "including the 2 already marked" in dialogs[0]
    assert await conn.fetchval(
        "SELECT count(*) FROM ai_marking_queue WHERE status = 'pending'") == len(demo.ANSWERS)
