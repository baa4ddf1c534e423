"""A real Chromium on /ai-queue: the Canaries card with a kind's drift open, and another's
last canary that passed (docs/canaries.md; docs/img/canary-card.png is this card's shot)."""

from __future__ import annotations

import dataclasses

import asyncpg
from playwright.async_api import Browser, expect

from aiqueue.settings import Settings
from aiqueue.settings.canary import Canary
from aiqueue.settings.kinds import Kind, Pool, QueueConfig
from aiqueue.web.app import create_app
from tests.conftest import make_settings
from tests.e2e.browser import BROWSER_MARKS, log_in
from tests.e2e.live_servers import serve
from tests.e2e.servers import ROOT, free_port

pytestmark = BROWSER_MARKS

# docs/img/canary-card.png is a copy of this.
SHOT = ROOT / "test-artifacts" / "canary-card.png"
FN = "http://127.0.0.1:9/unreachable"


def settings(db_url: str, port: int) -> Settings:
    kinds = {"essay": Kind(name="essay", pool="default", function_url=FN, canary=Canary()),
             "short": Kind(name="short", pool="default", function_url=FN,
                           canary=Canary(rows=10))}
    base = make_settings(db_url, app_base_url=f"http://127.0.0.1:{port}", function_url=FN,
                         callback_url=f"http://127.0.0.1:{port}/webhooks/ai-mark")
    return dataclasses.replace(base, queue_file=QueueConfig(
        {"default": Pool(name="default", max_in_flight=4)}, kinds))


async def seed(conn: asyncpg.Connection) -> None:
    """Two kinds' canaries: essay's yardstick, then a model change that drifted; short's
    last scheduled canary, passed."""
    await conn.execute("""
        INSERT INTO ai_marking_canary_runs (kind, pool, trigger, lane, state, started_at,
            finished_at, model, rows, answered, exact, qwk, cost_usd, passed)
        VALUES ('essay', 'default', 'schedule', 'live', 'finished', now() - interval '1 day',
                now() - interval '1 day', 'gpt-4o-mini-2024-07-18', 20, 20, 0.85, 0.91,
                0.0412, true),
               ('short', 'default', 'schedule', 'live', 'finished',
                now() - interval '3 hours', now() - interval '3 hours', 'llama3.1:8b', 10, 10,
                0.9, 0.94, 0.0038, true)""")
    await conn.execute("""
        INSERT INTO ai_marking_canary_runs (kind, pool, trigger, lane, state, started_at,
            finished_at, trigger_model, model, rows, answered, exact, qwk, yardstick_exact,
            yardstick_qwk, cost_usd, passed)
        VALUES ('essay', 'default', 'model_change', 'live', 'finished',
                now() - interval '20 minutes', now() - interval '12 minutes',
                'gpt-4o-mini-2025-01-31', 'gpt-4o-mini-2025-01-31', 20, 20, 0.45, 0.52, 0.85,
                0.91, 0.0409, false)""")
    await conn.execute("""
        INSERT INTO ai_queue_alerts (alert, pool, kind, value, threshold, opened_at)
        VALUES ('drift', 'default', 'essay', 0.4, 0.1, now() - interval '12 minutes')""")


async def test_the_canaries_card_shows_each_kinds_last_canary_and_the_open_drift(
        chromium: Browser, db_url: str, conn: asyncpg.Connection) -> None:
    await seed(conn)
    port = free_port()
    with serve(create_app(settings(db_url, port)), port):
        page = await chromium.new_page(viewport={"width": 1100, "height": 900})
        try:
            base = f"http://127.0.0.1:{port}"
            await log_in(page, base, "/ai-queue")
            card = page.locator("#canaries")
            await expect(card.locator('tr[data-canary="essay"]')).to_have_attribute(
                "data-state", "drift")
            await expect(card.locator('tr[data-canary="essay"]')).to_contain_text(
                "0.45 (was 0.85)")
            await expect(card.locator('[data-drift="essay"]')).to_contain_text(
                "every new enqueue of essay is gated")
            await expect(card.locator('tr[data-canary="short"]')).to_contain_text("passed")
            # The header's alert line names the drift too.
            await expect(page.locator("body")).to_contain_text("Alert drift (kind essay")
            SHOT.parent.mkdir(parents=True, exist_ok=True)
            await card.screenshot(path=str(SHOT))
        finally:
            await page.context.close()
    assert SHOT.stat().st_size > 5_000
