"""The teacher's results page through the real app: login, CSRF, marking, cancel, JSON twins."""

from __future__ import annotations

import html
import json
import re
import uuid
from typing import Any

import asyncpg
import httpx

from aiqueue.dev import demo
from aiqueue.tokens import Tokens
from tests.conftest import SECRET, add_submissions
from tests.integration.page_kit import JSON, PAGE, app_client, login

__all__ = ["app_client"]  # the fixture (tests/integration/page_kit.py)


def live_config(page: str) -> dict[str, Any]:
    match = re.search(r'<script id="live-config" type="application/json">(.*?)</script>', page)
    assert match
    config: dict[str, Any] = json.loads(match[1])
    return config


async def test_the_page_needs_the_login_and_then_shows_the_class(app_client: httpx.AsyncClient):
    r = await app_client.get(PAGE)
    assert r.status_code == 303
    assert r.headers["location"].startswith("/ai-queue/login?next=")
    await login(app_client)
    page = (await app_client.get(PAGE)).text
    assert page.count("<tr data-submission=") == len(demo.ANSWERS)
    for name, answer in demo.ANSWERS[:5]:
        assert html.escape(name) in page and html.escape(answer) in page
    assert "Mark All" in page and "Mark with AI" in page and "Cancel the rest" in page
    assert 'role="progressbar"' in page and "Not marked yet." in page
    assert html.escape(demo.QUESTION) in page
    assert SECRET not in page  # the queue secret never reaches a browser
    config = live_config(page)
    assert Tokens(SECRET).verify_events(config["token"], demo.ASSIGNMENT_ID)
    assert re.fullmatch(r"\d+-0", config["cursor"])


async def test_mark_all_enqueues_the_unmarked_rows_with_the_rubric(
    app_client: httpx.AsyncClient, conn: asyncpg.Connection
):
    csrf = await login(app_client)
    first = str(demo.submission_id(0))
    await conn.execute("UPDATE submissions SET ai_result = '{\"score\": 3, \"max_score\": 10}' "
                       "WHERE id = $1", uuid.UUID(first))
    refused = await app_client.post(f"{PAGE}/mark", data={"csrf_token": "wrong"}, headers=JSON)
    assert refused.status_code == 401
    assert await conn.fetchval("SELECT count(*) FROM ai_marking_queue") == 0
    r = await app_client.post(f"{PAGE}/mark", data={"csrf_token": csrf}, headers=JSON)
    assert r.status_code == 200, r.text
    assert r.json()["enqueued"] == len(demo.ANSWERS) - 1
    payloads = await conn.fetch("SELECT DISTINCT p.payload::text AS p FROM ai_marking_queue q"
                                " JOIN ai_marking_payloads p ON p.id = q.payload_id")
    assert [json.loads(p["p"]) for p in payloads] == [demo.payload()]
    again = await app_client.post(f"{PAGE}/mark", data={"csrf_token": csrf}, headers=JSON)
    assert again.json()["enqueued"] == 0
    progress = (await app_client.get(f"{PAGE}/progress")).json()
    assert progress["total"] == len(demo.ANSWERS) - 1 and progress["pending"] == progress["total"]
    assert progress["percent"] == 0 and progress["text"].startswith("0 of 29 marked — ")


async def test_mark_one_row_re_marks_it_first_and_the_form_post_returns_to_the_page(
    app_client: httpx.AsyncClient, conn: asyncpg.Connection
):
    csrf = await login(app_client)
    await app_client.post(f"{PAGE}/mark", data={"csrf_token": csrf}, headers=JSON)
    await conn.execute("UPDATE ai_marking_queue SET status = 'cancelled'")
    one = str(demo.submission_id(7))
    r = await app_client.post(f"{PAGE}/mark", data={"csrf_token": csrf, "submission_id": one})
    assert r.status_code == 303 and r.headers["location"] == PAGE
    row = await conn.fetchrow("SELECT priority, status FROM ai_marking_queue "
                              "WHERE submission_id = $1 AND status = 'pending'", uuid.UUID(one))
    assert row is not None and row["priority"] > 0
    stranger = await app_client.post(f"{PAGE}/mark", headers=JSON,
                                     data={"csrf_token": csrf, "submission_id": str(uuid.uuid4())})
    assert stranger.status_code == 404


async def test_cancel_and_the_json_twins_need_a_session(
    app_client: httpx.AsyncClient, conn: asyncpg.Connection
):
    for path in ("/progress", "/events-token", f"/submissions/{demo.submission_id(0)}"):
        assert (await app_client.get(PAGE + path)).status_code == 401
    assert (await app_client.post(f"{PAGE}/cancel", data={"csrf_token": "x"})).status_code == 401
    csrf = await login(app_client)
    await app_client.post(f"{PAGE}/mark", data={"csrf_token": csrf}, headers=JSON)
    r = await app_client.post(f"{PAGE}/cancel", data={"csrf_token": csrf}, headers=JSON)
    assert r.json() == {"cancelled": len(demo.ANSWERS)}
    progress = (await app_client.get(f"{PAGE}/progress")).json()
    assert progress["percent"] == 100 and not progress["active"]
    assert progress["text"] == f"0 of {len(demo.ANSWERS)} marked ({len(demo.ANSWERS)} cancelled)"
    token = (await app_client.get(f"{PAGE}/events-token")).json()["token"]
    assert Tokens(SECRET).verify_events(token, demo.ASSIGNMENT_ID)


async def test_a_result_shows_its_mark_and_feedback(
    app_client: httpx.AsyncClient, conn: asyncpg.Connection
):
    await login(app_client)
    sid = demo.submission_id(3)
    await conn.execute(
        "UPDATE submissions SET ai_result = $2::jsonb WHERE id = $1", sid,
        json.dumps({"score": 7.5, "max_score": 10, "feedback": "Names light and water."}))
    body = (await app_client.get(f"{PAGE}/submissions/{sid}")).json()
    assert body["mark"] == "7.5 / 10" and body["feedback"] == "Names light and water."
    page = (await app_client.get(PAGE)).text
    assert "7.5 / 10" in page and "Names light and water." in page


async def test_an_assignment_without_a_rubric_shows_but_cannot_be_marked(
    app_client: httpx.AsyncClient, conn: asyncpg.Connection
):
    await add_submissions(conn, 2, "hw-plain")
    csrf = await login(app_client)
    page = await app_client.get("/results/assignments/hw-plain")
    assert page.status_code == 200 and "has no rubric yet" in page.text
    assert page.text.count("<tr data-submission=") == 2
    r = await app_client.post("/results/assignments/hw-plain/mark", data={"csrf_token": csrf},
                              headers=JSON)
    assert r.status_code == 409
    assert (await app_client.get("/results/assignments/nothing-here")).status_code == 404


async def mark_rows(conn: asyncpg.Connection, *indexes: int) -> list[uuid.UUID]:
    ids = [demo.submission_id(i) for i in indexes]
    await conn.execute("UPDATE submissions SET ai_result = '{\"score\": 3, \"max_score\": 10}', "
                       "ai_marked_at = now() WHERE id = ANY($1)", ids)
    return ids


async def test_marked_rows_offer_a_re_mark_that_says_so(
    app_client: httpx.AsyncClient, conn: asyncpg.Connection
):
    await mark_rows(conn, 0, 1)
    await login(app_client)
    page = (await app_client.get(PAGE)).text
    assert page.count(">Re-mark with AI</button>") == 2
    assert page.count(">Mark with AI</button>") == len(demo.ANSWERS) - 2
    assert page.count('name="remark" value="true"') == 3  # two rows and "Re-mark all"
    assert "Re-mark all" in page and "including the 2 already marked" in page


async def test_mark_all_leaves_marked_rows_and_re_mark_all_sends_them(
    app_client: httpx.AsyncClient, conn: asyncpg.Connection
):
    marked = await mark_rows(conn, 0, 1, 2)
    csrf = await login(app_client)
    r = await app_client.post(f"{PAGE}/mark", data={"csrf_token": csrf}, headers=JSON)
    assert r.json()["enqueued"] == len(demo.ANSWERS) - 3
    queued = {r["submission_id"] for r in await conn.fetch(
        "SELECT submission_id FROM ai_marking_queue")}
    assert not queued & set(marked)
    await conn.execute("UPDATE ai_marking_queue SET status = 'cancelled'")
    again = await app_client.post(f"{PAGE}/mark", data={"csrf_token": csrf, "remark": "true"},
                                  headers=JSON)
    assert again.json()["enqueued"] == len(demo.ANSWERS)
    assert again.json()["already_marked"] == 0


async def test_one_marked_row_is_re_marked_only_when_asked(
    app_client: httpx.AsyncClient, conn: asyncpg.Connection
):
    (one,) = await mark_rows(conn, 4)
    csrf = await login(app_client)
    form = {"csrf_token": csrf, "submission_id": str(one)}
    r = await app_client.post(f"{PAGE}/mark", data=form, headers=JSON)
    assert (r.json()["enqueued"], r.json()["already_marked"]) == (0, 1)
    r = await app_client.post(f"{PAGE}/mark", data={**form, "remark": "true"}, headers=JSON)
    assert (r.json()["enqueued"], r.json()["already_marked"]) == (1, 0)
    assert await conn.fetchval("SELECT count(*) FROM ai_marking_queue") == 1
