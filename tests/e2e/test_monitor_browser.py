"""/ai-queue in a real Chromium: login, stats, filter, Retry, Retry all, Pause/Resume, live."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from playwright.async_api import Browser, expect

from aiqueue.web.app import create_app
from tests.conftest import make_settings
from tests.e2e.browser import BROWSER_MARKS, log_in
from tests.e2e.servers import ROOT, free_port, run_asgi

pytestmark = BROWSER_MARKS
ARTIFACTS = ROOT / "test-artifacts"


@pytest.fixture
def browser(chromium: Browser) -> Browser:
    """The process's Chromium; each test here opens contexts of its own."""
    return chromium


@pytest.fixture
def server(db_url: str) -> Iterator[str]:
    """The app on loopback; cap 1 with one row in flight, so retried rows stay pending."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    settings = make_settings(db_url, max_in_flight=1, app_base_url=base,
                             callback_url=f"{base}/webhooks/ai-mark",
                             function_url=f"http://127.0.0.1:{free_port()}/mark")
    with run_asgi(create_app(settings), port):
        yield base


async def seed(conn: asyncpg.Connection) -> None:
    """A realistic queue: a day of completions, failures of two assignments, a backlog."""
    await conn.execute("""
        INSERT INTO submissions (id, assignment_id, content)
        SELECT gen_random_uuid(), CASE WHEN g % 3 = 0 THEN 'hw-2' ELSE 'hw-1' END,
               'STUDENT-ESSAY-' || g
        FROM generate_series(1, 180) g;
        WITH s AS (SELECT id, assignment_id, row_number() OVER (ORDER BY id) AS g
                   FROM submissions)
        INSERT INTO ai_marking_queue (submission_id, assignment_id, run_id, status, attempts,
            dispatch_seq, created_at, started_at, finished_at, last_error)
        SELECT id, assignment_id, gen_random_uuid(), st,
               CASE st WHEN 'failed' THEN 3 WHEN 'pending' THEN 0 ELSE 1 END,
               CASE st WHEN 'failed' THEN 3 WHEN 'pending' THEN 0 ELSE 1 END,
               fin - interval '1 minute',
               CASE WHEN st = 'pending' THEN NULL WHEN st = 'processing' THEN now()
                    ELSE fin - (2 + g % 9) * interval '1 s' END,
               CASE WHEN st IN ('completed', 'failed') THEN fin END,
               CASE WHEN st = 'failed' THEN 'http_500' END
        FROM s, LATERAL (SELECT
            CASE WHEN g = 1 THEN 'processing' WHEN g <= 6 THEN 'failed'
                 WHEN g <= 16 THEN 'pending' ELSE 'completed' END AS st,
            now() - (g * 7) * interval '1 minute' AS fin) x;
        -- The row in flight holds a slot.
        INSERT INTO ai_marking_claimed (queue_id, dispatch_seq, pool, kind)
        SELECT queue_id, dispatch_seq, pool, kind FROM ai_marking_queue
        WHERE status = 'processing';
    """)


async def status_counts(conn: asyncpg.Connection) -> dict[str, int]:
    rows = await conn.fetch("SELECT status, count(*) AS n FROM ai_marking_queue GROUP BY 1")
    return {r["status"]: r["n"] for r in rows}


async def test_operator_path_through_the_page(
    server: str, browser: Browser, conn: asyncpg.Connection
):
    await seed(conn)
    ARTIFACTS.mkdir(exist_ok=True)
    context = await browser.new_context(viewport={"width": 1280, "height": 1000})
    page = await context.new_page()
    page.set_default_timeout(15_000)
    await log_in(page, server, "/ai-queue")

    # The stats header.
    await expect(page.locator('[data-stat="in_flight"]')).to_have_text("1 / 1 in flight")
    await expect(page.locator('[data-stat="pending"]')).to_have_text("10")
    assert await page.locator("#throughput svg path.c").get_attribute("d")
    await expect(page.locator('[data-dispatch="running"]')).to_be_visible()

    # Filter to failed.
    await page.select_option("#f-status", "failed")
    await page.click("#filters button[type=submit]")
    await expect(page).to_have_url(f"{server}/ai-queue?status=failed&assignment_id=&group=")
    rows = page.locator("#queue tbody tr[data-queue-id]")
    await expect(rows).to_have_count(5)
    assert set(await page.locator("#queue tbody tr").evaluate_all(
        "trs => trs.map(t => t.dataset.status)")) == {"failed"}
    await page.screenshot(path=str(ARTIFACTS / "ai-queue-failed.png"), full_page=True)

    # Retry one row: it leaves the failed view and shows as pending.
    target = await rows.first.get_attribute("data-queue-id")
    assert target is not None
    await rows.first.get_by_role("button", name="Retry").click()
    await expect(page.locator("#notice")).to_contain_text("is pending again")
    await expect(rows).to_have_count(4)
    await page.goto(f"{server}/ai-queue/rows/{target}")
    await expect(page.locator("#row")).to_have_attribute("data-status", "pending")
    await expect(page.locator('#history tr[data-kind="action"]')).to_contain_text("admin")
    assert await conn.fetchval("SELECT status FROM ai_marking_queue WHERE queue_id = $1",
                               uuid.UUID(target)) == "pending"

    # Retry all failed (every assignment): the page asks first, with the dry run's count.
    await page.goto(f"{server}/ai-queue?status=failed")
    asked: list[str] = []

    async def confirm(dialog: Any) -> None:
        asked.append(dialog.message)
        await dialog.accept()

    page.once("dialog", confirm)
    await page.click("#retry-all button[type=submit]")
    await expect(page.locator("#notice")).to_have_text("4 failed row(s) are pending again.")
    assert asked == ["Retry 4 failed row(s)?"]
    await expect(page.locator("#queue tbody tr[data-queue-id]")).to_have_count(0)
    assert (await status_counts(conn)).get("failed", 0) == 0

    # Pause, then resume.
    await page.goto(f"{server}/ai-queue")
    await page.get_by_role("button", name="Pause dispatch").click()
    await expect(page.locator('[data-dispatch="paused"]')).to_contain_text("paused by admin")
    assert await conn.fetchval("SELECT paused FROM ai_queue_control") is True
    await page.get_by_role("button", name="Resume dispatch").click()
    await expect(page.locator('[data-dispatch="running"]')).to_be_visible()
    assert await conn.fetchval("SELECT paused FROM ai_queue_control") is False

    # Live: a change behind the page appears without a reload.
    await page.evaluate("window.__sameDocument = true")
    fresh = await conn.fetchval(
        "UPDATE ai_marking_queue SET status = 'failed', attempts = 3, last_error = 'timeout',"
        " finished_at = now() WHERE queue_id = $1 RETURNING queue_id", uuid.UUID(target))
    live_row = page.locator(f'#queue tr[data-queue-id="{fresh}"]')
    await expect(live_row).to_have_attribute("data-status", "failed", timeout=12_000)
    assert await page.evaluate("window.__sameDocument") is True
    await expect(page.locator("#live-status")).to_contain_text("live")

    content = await page.content()
    assert "STUDENT-ESSAY" not in content
    await page.screenshot(path=str(ARTIFACTS / "ai-queue.png"), full_page=True)
    assert Path(ARTIFACTS / "ai-queue.png").stat().st_size > 10_000
    await context.close()


async def test_no_page_without_login_and_no_change_without_csrf(
    server: str, browser: Browser, conn: asyncpg.Connection
):
    await seed(conn)
    failed = await conn.fetchval("SELECT queue_id FROM ai_marking_queue WHERE status = 'failed'"
                                 " LIMIT 1")
    anonymous = await browser.new_context()
    page = await anonymous.new_page()
    for path in ("/ai-queue", f"/ai-queue/rows/{failed}", "/ai-queue/fragment"):
        await page.goto(f"{server}{path}")
        assert page.url.startswith(f"{server}/ai-queue/login?next=/ai-queue"), path
        await expect(page.locator("#password")).to_be_visible()
    await anonymous.close()

    context = await browser.new_context()
    page = await context.new_page()
    await log_in(page, server, "/ai-queue")
    before = await status_counts(conn)
    statuses = await page.evaluate("""async (id) => {
        const post = (path, body) => fetch(path, {method: "POST", body: new URLSearchParams(body),
                                                   redirect: "manual"}).then(r => r.status);
        return [await post(`/ai-queue/rows/${id}/retry`, {}),
                await post("/ai-queue/retry-failed", {csrf_token: "forged"}),
                await post("/ai-queue/pause", {csrf_token: ""})];
    }""", str(failed))
    assert statuses == [403, 403, 403]
    assert await status_counts(conn) == before
    assert await conn.fetchval("SELECT paused FROM ai_queue_control") is False
    await context.close()


@pytest.fixture
def flow_server(db_url: str) -> Iterator[str]:
    """The app with cap 8 and a declared token budget of 10,000 per 10 s (docs/concepts.md)."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    settings = make_settings(db_url, max_in_flight=8, app_base_url=base,
                             callback_url=f"{base}/webhooks/ai-mark",
                             function_url=f"http://127.0.0.1:{free_port()}/mark",
                             tokens_per_minute=60_000, budget_window_seconds=10)
    with run_asgi(create_app(settings), port):
        yield base


async def test_the_page_shows_the_learned_limit_the_hold_and_the_budget(
    flow_server: str, browser: Browser, conn: asyncpg.Connection
):
    await seed(conn)
    # The model refused lately: L was cut to 3 and every dispatch is held.
    await conn.execute("UPDATE ai_queue_control SET in_flight_limit = 3,"
                       " busy_until = now() + interval '5 minutes'")
    await conn.execute("INSERT INTO ai_marking_budget (queue_id, dispatch_seq, assignment_id,"
                       " tokens, actual) VALUES (gen_random_uuid(), 1, 'hw-1', 1200, true)")
    context = await browser.new_context(viewport={"width": 1280, "height": 1000})
    page = await context.new_page()
    page.set_default_timeout(15_000)
    await log_in(page, flow_server, "/ai-queue")
    await expect(page.locator('[data-stat="in_flight_limit"]')).to_have_text("3 of 8")
    await expect(page.locator('[data-dispatch="held"]')).to_contain_text(
        "every dispatch is held until")
    budget = page.locator('[data-stat="budget"]')
    await expect(budget).to_have_text("1,200 / 10,000")
    await expect(page.locator(".stat", has=budget)).to_contain_text("Tokens, last 10 s")
    await page.screenshot(path=str(ARTIFACTS / "ai-queue-flow.png"), full_page=True)
    # L back at the cap and the hold over: the page says so.
    await conn.execute("UPDATE ai_queue_control SET in_flight_limit = NULL, busy_until = NULL")
    await page.reload()
    await expect(page.locator('[data-stat="in_flight_limit"]')).to_have_text("8 of 8")
    await expect(page.locator('[data-dispatch="held"]')).to_have_count(0)
    assert "STUDENT-ESSAY" not in await page.content()
    await context.close()
