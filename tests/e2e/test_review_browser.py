"""A real Chromium on the teacher page: progress messages, Accept / Adjust / Revert, Accept all."""

from __future__ import annotations

import asyncpg
from playwright.async_api import Browser, expect

from aiqueue.dev import demo
from aiqueue.reads.live import LiveConfig
from functions.ai_mark.settings import Settings as FunctionSettings
from tests.e2e.browser import BROWSER_MARKS, MARK, seed_demo, teacher_page

pytestmark = BROWSER_MARKS

N = len(demo.ANSWERS)


async def test_review_actions_update_the_page_and_the_database(
    chromium: Browser, db_url: str, conn: asyncpg.Connection
):
    await seed_demo(db_url)
    # Slow marks with frequent heartbeats: each row shows its progress message meanwhile.
    slow = FunctionSettings(simulate_latency=2.5, heartbeat_seconds=0.2, callback_backoff=0.05)
    async with teacher_page(
            chromium, db_url, function=slow, viewport={"width": 1400, "height": 900},
            max_in_flight=10, live=LiveConfig(max_seconds=5, heartbeat_seconds=1,
                                              poll_seconds=0.3)) as teacher:
        page = teacher.page
        rows = page.locator("tr[data-submission]")
        await expect(rows).to_have_count(N)
        first = rows.nth(0)
        await expect(first.locator(".review-buttons")).to_be_hidden()

        # One row: its progress message shows while it is being marked.
        await first.get_by_role("button", name="Mark with AI").click()
        await expect(first.locator(".progress-msg")).to_contain_text(
            "marking (", timeout=20_000)
        await expect(first.locator(".score")).to_have_text(MARK, timeout=20_000)
        await expect(first.locator(".progress-msg")).to_have_text("")
        await expect(first.locator(".review")).to_have_text("unreviewed")
        await first.locator(".review-accept").click()
        await expect(first.locator(".review")).to_have_text("accepted")

        # The rest in one run; then review it.
        await page.click("#mark-all")
        await page.click("#estimate-send")  # Mark All shows its estimate first
        await expect(page.locator("#notice")).to_contain_text("sent for marking")
        await expect(page.locator("#progress-text")).to_have_text(
            f"{N - 1} of {N - 1} marked", timeout=90_000)
        await expect(page.locator("#run-usage")).to_contain_text("tokens")
        await expect(page.locator("#review-text")).to_have_text(f"{N - 1} to review")
        second, third = rows.nth(1), rows.nth(2)
        await expect(second.locator(".score")).to_have_text(MARK)
        await second.locator("input[name=score]").fill("3")
        await second.locator(".review-adjust").click()
        await expect(second.locator(".adjusted")).to_have_text("→ 3 / 10")
        await expect(second.locator(".review")).to_have_text("accepted")
        await expect(third.locator(".score")).to_have_text(MARK)
        await third.locator(".review-revert").click()
        await expect(page.locator("#notice")).to_have_text("Mark reverted.")
        await expect(third.locator(".score")).to_have_text("")
        await expect(third.locator(".review-buttons")).to_be_hidden()
        await expect(page.locator("#review-text")).to_have_text(
            f"1 accepted, 1 reverted, {N - 3} to review")
        await page.click("#accept-all")
        await expect(page.locator("#notice")).to_have_text(f"{N - 3} mark(s) accepted.")
        await expect(page.locator("#review-text")).to_have_text(
            f"{N - 2} accepted, 1 reverted")
        await expect(rows.nth(N - 1).locator(".review")).to_have_text("accepted")
        assert teacher.errors == []
    reviews = await conn.fetch("SELECT review, actor, adjusted_result::text AS adjusted "
                               "FROM ai_marking_results")
    assert sorted(r["review"] for r in reviews) == ["accepted"] * (N - 1) + ["reverted"]
    assert {r["actor"] for r in reviews} == {"admin"}  # the /ai-queue login
    assert [r["adjusted"] for r in reviews if r["adjusted"]] == ['{"score": 3, "max_score": 10}']
    assert await conn.fetchval("SELECT count(*) FROM submissions WHERE ai_result IS NULL") == 1
