"""The teacher page says why a mark waits and until when, and which attempt it is on
(aiqueue/web/waits.py puts the rows into words; this reads them from the real page)."""

from __future__ import annotations

import html
import re
import uuid
from datetime import UTC, datetime, timedelta

import asyncpg
import httpx

from aiqueue.dev import demo
from tests.integration.page_kit import JSON, PAGE, app_client, login

__all__ = ["app_client"]  # the fixture (tests/integration/page_kit.py)



def wait_of(page: str, submission: uuid.UUID) -> str:
    row = page.split(f'<tr data-submission="{submission}"', 1)[1].split("</tr>", 1)[0]
    match = re.search(r'<div class="wait muted"[^>]*>(.*?)</div>', row)
    assert match, row
    return html.unescape(match[1])


async def test_each_waiting_row_says_why_and_until_when(app_client: httpx.AsyncClient,
                                                         conn: asyncpg.Connection):
    csrf = await login(app_client)
    r = await app_client.post(f"{PAGE}/mark", data={"csrf_token": csrf}, headers=JSON)
    assert r.status_code == 200 and r.json()["enqueued"] == len(demo.ANSWERS)
    busy, down, failed, plain = (demo.submission_id(i) for i in range(4))

    async def row(submission: uuid.UUID, sql: str, *args: object) -> None:
        await conn.execute(f"UPDATE ai_marking_queue SET {sql} WHERE submission_id = $1",
                           submission, *args)

    # Twenty minutes from now, taken when the test runs (not when it is collected: a long
    # suite reaches it later than that).
    soon = datetime.now(UTC).replace(second=0, microsecond=0) + timedelta(minutes=20)

    # The queue is paused (page_kit): the rows stay as set here.
    await row(busy, "last_error = 'rate_limited', run_after = $2", soon)
    await row(down, "attempts = 1, last_error = 'dispatch_connect_error', run_after = $2", soon)
    await row(failed, "attempts = 2, last_error = 'function:invalid_output', run_after = $2",
              soon)
    copy = demo.submission_id(4)
    await row(copy, "leader_id = (SELECT queue_id FROM ai_marking_queue WHERE submission_id = $2)",
              plain)
    page = (await app_client.get(PAGE)).text
    at = soon.strftime("%H:%M")  # the demo's school is in UTC
    assert wait_of(page, copy) == "waiting for the same answer: it gets that mark"
    assert wait_of(page, busy) == f"the model is busy (retrying at {at})"
    assert wait_of(page, down) == f"the marking service is down (retrying at {at}) · attempt 2 of 3"
    assert wait_of(page, failed) == f"the last try failed (retrying at {at}) · attempt 3 of 3"
    assert wait_of(page, plain) == ""
    # The page's JSON twin for one row says the same (the live page asks it on a retry).
    body = (await app_client.get(f"{PAGE}/submissions/{down}", headers=JSON)).json()
    assert body["wait"] == f"the marking service is down (retrying at {at}) · attempt 2 of 3"
    # The class's group at a spend cap: paused until the window renews.
    await conn.execute("UPDATE ai_marking_fair SET capped_until = $1 WHERE group_key = $2",
                       soon, demo.ASSIGNMENT_ID)
    page = (await app_client.get(PAGE)).text
    assert wait_of(page, plain) == f"paused by a spend cap until {at}"
    await conn.execute("UPDATE ai_marking_fair SET capped_until = NULL")
    # The marking service's breaker, open for the pool: every waiting row says so.
    await conn.execute("UPDATE ai_queue_control SET circuit_open_until = $1 "
                       "WHERE pool = 'default'", soon)
    page = (await app_client.get(PAGE)).text
    assert wait_of(page, plain) == f"the marking service is down (retrying at {at})"
