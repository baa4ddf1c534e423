"""The teacher page's "Re-mark what changed" through the real app (docs/remark.md): offered
only once the saved rubric differs from the marks', behind the CSRF token, and answered
with the re-mark's counts."""

from __future__ import annotations

import json

import asyncpg
import httpx

from aiqueue.db.store import Store
from aiqueue.dev import demo
from tests.integration.page_kit import JSON, PAGE, app_client, login
from tests.integration.remark_kit import Model

__all__ = ["app_client"]  # the fixture (tests/integration/page_kit.py)
N = len(demo.ANSWERS)


async def test_the_button_appears_when_the_rubric_changes_and_re_marks_only_that(
        app_client: httpx.AsyncClient, store: Store, conn: asyncpg.Connection) -> None:
    csrf = await login(app_client)
    assert (await app_client.post(f"{PAGE}/mark", data={"csrf_token": csrf},
                                  headers=JSON)).json()["enqueued"] == N
    model = Model(store, conn, watch=False)
    while (job := await model.claim()) is not None:
        await model.answer(job)
    while model.pending:
        await model.answer(model.pending.pop())
    assert "Re-mark what changed" not in (await app_client.get(PAGE)).text

    edited = {**demo.payload(), "rubric": demo.RUBRIC[:4]}
    await conn.execute("UPDATE ai_marking_assignments SET payload = $1::jsonb",
                       json.dumps(edited))
    page = (await app_client.get(PAGE)).text
    assert f"Re-mark what changed ({N} answers" in page
    assert page.count(">marked under an earlier rubric<") == N
    refused = await app_client.post(f"{PAGE}/remark", data={"csrf_token": "wrong"},
                                    headers=JSON)
    assert refused.status_code == 401
    assert await conn.fetchval("SELECT count(*) FROM ai_marking_remarks") == 0
    r = await app_client.post(f"{PAGE}/remark", data={"csrf_token": csrf}, headers=JSON)
    assert r.status_code == 200, r.text
    assert (r.json()["enqueued"], r.json()["reviewed_kept"]) == (N, 0)
    assert await conn.fetchval("SELECT actor FROM ai_marking_remarks") == "admin"
    # Being re-marked under it: nothing more to offer.
    assert "Re-mark what changed" not in (await app_client.get(PAGE)).text
