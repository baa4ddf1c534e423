"""A real Chromium on the teacher page: Check 5 first, the agreement card, the release."""

from __future__ import annotations

import re
from pathlib import Path

import asyncpg
from playwright.async_api import Browser, expect

from aiqueue.dev import demo
from aiqueue.settings import ModelPrice
from tests.e2e.browser import BROWSER_MARKS, MARK, QUICK, seed_demo, teacher_page

pytestmark = BROWSER_MARKS

N = len(demo.ANSWERS)
# The simulator's tokens priced, so the release says what the rest will cost.
PRICES = {"simulator": ModelPrice(input=2.5, output=10.0)}
ROOT = Path(__file__).resolve().parents[2]
# docs/img/teacher-calibration.png is a copy of this (the sample differs from run to run).
SHOT = ROOT / "test-artifacts" / "teacher-calibration.png"


async def test_check_five_first_then_release(
    chromium: Browser, db_url: str, conn: asyncpg.Connection
) -> None:
    await seed_demo(db_url)
    async with teacher_page(
            chromium, db_url, function=QUICK, viewport={"width": 1280, "height": 900},
            max_in_flight=4, model_prices=PRICES) as teacher:
        page = teacher.page
        # Both choices are offered, each with its estimate.
        await expect(page.locator("#mark-all-estimate")).not_to_be_empty()
        await expect(page.locator("#check-first")).to_have_text("Check 5 first")
        await expect(page.locator("#check-first-estimate")).to_contain_text(
            "then the rest once you release them")
        await page.click("#check-first")
        # Each part priced on its own.
        await expect(page.locator("#estimate-text")).to_have_text(re.compile(
            rf"^5 to check first \(about \$[\d.]+\), then the other {N - 5} once you "
            r"release them \(about \$[\d.]+\) · "))
        assert await conn.fetchval("SELECT count(*) FROM ai_marking_queue") == 0
        await page.click("#estimate-send")
        await expect(page.locator("#notice")).to_have_text(
            f"Marking 5 first. The other {N - 5} wait until you have checked them.")

        # The five come back; the card says so and offers the release.
        card = page.locator("#agreement")
        await expect(page.locator("#gate-text")).to_contain_text(
            "The 5 to check first are marked", timeout=30_000)
        await expect(page.locator("#release")).to_have_text(
            re.compile(rf"^Release the other {N - 5} \(about \$0\.\d\d\)$"))
        await expect(page.locator("#progress-text")).to_have_text(
            f"5 of {N} marked — the other {N - 5} wait for your check")
        marked = page.locator("tr[data-submission]").filter(has=page.locator(
            ".review-buttons:visible"))
        await expect(marked).to_have_count(5)
        await expect(marked.nth(0).locator(".score")).to_have_text(MARK)
        # Accept two as they are, adjust three: the card measures them.
        for k in range(2):
            await marked.nth(k).locator(".review-accept").click()
            await expect(marked.nth(k).locator(".review")).to_have_text("accepted")
        for k in range(2, 5):
            row = marked.nth(k)
            shown = (await row.locator(".score").text_content() or "").split(" / ")[0]
            # A point apart: the teacher is a little stricter (or kinder at zero).
            mine = float(shown) - 1 if float(shown) >= 1 else 1
            await row.locator("input[name=score]").fill(f"{mine:g}")
            await row.locator(".review-adjust").click()
            await expect(row.locator(".review")).to_have_text("accepted")
        await page.reload()  # the card as the page first renders it
        await page.evaluate("window.scrollTo(0, 0)")
        await expect(page.locator("td.mark .status", has_text="after your check")
                     ).to_have_count(N - 5)
        await expect(page.locator("#agreement-text")).to_contain_text(
            "5 checked: 2 exact, all within 1 point")
        await expect(page.locator("#disagreements li")).to_have_count(3)
        await expect(card).to_be_visible()
        SHOT.parent.mkdir(parents=True, exist_ok=True)
        await page.screenshot(path=str(SHOT), full_page=False)

        # Nothing else went before the release.
        assert await conn.fetchval(
            "SELECT count(*) FROM ai_marking_queue WHERE status <> 'pending'") == 5
        await page.click("#release")
        await expect(page.locator("#notice")).to_have_text(
            f"{N - 5} submission(s) released for marking.")
        await expect(page.locator("#progress-text")).to_have_text(
            f"{N} of {N} marked", timeout=90_000)
        await expect(page.locator("#release-form")).to_be_hidden()
        assert teacher.errors == []
    assert SHOT.stat().st_size > 10_000
    # Every other row was dispatched after the release, none before.
    early = await conn.fetchval(
        "SELECT count(*) FROM ai_marking_attempts a JOIN ai_marking_queue q USING (queue_id) "
        "JOIN ai_marking_runs r ON r.run_id = q.run_id "
        "WHERE a.kind = 'dispatch' AND NOT q.calibration AND a.started_at < r.released_at")
    assert early == 0
    assert await conn.fetchval("SELECT count(*) FROM ai_marking_outbox "
                               "WHERE type = 'marking.calibration_ready'") == 1
