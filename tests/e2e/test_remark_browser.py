"""A real Chromium on the teacher page: the rubric changes, "Re-mark what changed" sends
only the answers marked under the old one, each keeps its mark until the new one arrives,
and the previous mark is one click away (docs/remark.md)."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import asyncpg
from playwright.async_api import Browser, expect

from aiqueue.dev import demo
from aiqueue.settings import ModelPrice
from tests.e2e.browser import BROWSER_MARKS, MARK, QUICK, seed_demo, teacher_page

pytestmark = BROWSER_MARKS

N = len(demo.ANSWERS)
REVIEWED = 3
PRICES = {"simulator": ModelPrice(input=2.5, output=10.0)}
ROOT = Path(__file__).resolve().parents[2]
# The button, then a re-marked row with its previous mark open.  docs/img/ has copies:
# `AIQUEUE_DOCS_SHOTS=1` writes them there too.
SHOTS = ROOT / "test-artifacts"
NAMES = ("teacher-remark-button.png", "teacher-remark.png")


def edited_payload() -> dict[str, object]:
    """The teacher's edit: chlorophyll alone no longer places it; the chloroplasts must."""
    rubric = [dict(c) for c in demo.RUBRIC]
    rubric[-1] = {"criterion": "Places it in the chloroplasts", "points": 2,
                  "keywords": ["chloroplast"]}
    return {**demo.payload(), "rubric": rubric}


async def test_re_mark_what_changed(
    chromium: Browser, db_url: str, conn: asyncpg.Connection
) -> None:
    await seed_demo(db_url)
    async with teacher_page(
            chromium, db_url, function=QUICK, viewport={"width": 1280, "height": 1000},
            max_in_flight=4, model_prices=PRICES) as teacher:
        page = teacher.page
        # Nothing to re-mark before anything was marked.
        await expect(page.locator("#remark-changed")).to_have_count(0)
        await page.click("#mark-all")
        await page.click("#estimate-send")
        reviewable = page.locator("tr[data-submission]").filter(
            has=page.locator(".review-buttons:visible"))
        await expect(reviewable).to_have_count(N, timeout=60_000)
        for k in range(REVIEWED):
            await reviewable.nth(k).locator(".review-accept").click()
            await expect(reviewable.nth(k).locator(".review")).to_have_text("accepted")
        kept = [await reviewable.nth(k).locator(".score").text_content()
                for k in range(REVIEWED)]

        # The host saves the edited rubric; the page offers to re-mark what it changed.
        await conn.execute("UPDATE ai_marking_assignments SET payload = $1::jsonb "
                           "WHERE assignment_id = $2", json.dumps(edited_payload()),
                           demo.ASSIGNMENT_ID)
        await page.reload()
        button = page.locator("#remark-changed")
        await expect(button).to_have_text(re.compile(
            rf"^Re-mark what changed \({N - REVIEWED} answers · about \$\d+\.\d\d\)$"))
        await expect(page.locator(".older-rubric:visible")).to_have_count(N)
        SHOTS.mkdir(parents=True, exist_ok=True)
        await page.screenshot(path=str(SHOTS / NAMES[0]), clip={
            "x": 0, "y": 0, "width": 1280, "height": 560})
        await button.click()
        await expect(page.locator("#notice")).to_have_text(
            f"{N - REVIEWED} answer(s) sent for re-marking under the new rubric; each keeps "
            f"its mark until the new one arrives. {REVIEWED} you reviewed kept.")
        await expect(button).to_be_hidden()
        # Every row keeps a mark throughout; the re-marked ones say so when theirs lands.
        remarked = page.locator(".remarked:visible")
        await expect(remarked).to_have_count(N - REVIEWED, timeout=60_000)
        await expect(page.locator("td.mark .score").filter(has_text=MARK)).to_have_count(N)
        changed = page.locator("tr[data-submission]").filter(has=page.locator(
            ".remarked:visible summary", has_text=re.compile(r"re-marked: (\d+) → (?!\1$)\d+$")))
        assert await changed.count() >= 1
        first = changed.first
        previous = first.locator(".previous")
        await expect(previous).to_be_hidden()
        await first.locator(".remarked summary").click()  # the previous mark, one click away
        await expect(previous).to_have_text(re.compile(r"^Before: \d+ / 10\. "))
        for k in range(REVIEWED):
            await expect(reviewable.nth(k).locator(".score")).to_have_text(kept[k] or "")
            await expect(reviewable.nth(k).locator(".remarked")).to_be_hidden()
        await expect(page.locator(".older-rubric:visible")).to_have_count(REVIEWED)
        await first.scroll_into_view_if_needed()
        await page.screenshot(path=str(SHOTS / NAMES[1]), full_page=False)
        assert teacher.errors == []
    if os.environ.get("AIQUEUE_DOCS_SHOTS") == "1":
        for name in NAMES:
            shutil.copyfile(SHOTS / name, ROOT / "docs" / "img" / name)
    # The model was asked once per re-marked answer; nothing of the old rubric was applied
    # after the new one, and nothing was superseded (one edit).
    calls = await conn.fetchval(
        "SELECT count(*) FROM ai_marking_queue q JOIN ai_marking_payloads p "
        "ON p.id = q.payload_id WHERE p.payload = $1::jsonb", json.dumps(edited_payload()))
    assert calls == N - REVIEWED
