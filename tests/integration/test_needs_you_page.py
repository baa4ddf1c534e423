"""The teacher page's "Needs you" list (docs/review-holds.md), in-process with its forms."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import httpx
import pytest

from aiqueue.db.store import Store, connect_pool
from aiqueue.web.app import create_app
from tests.conftest import SECRET, add_submissions, app_client, make_settings
from tests.integration.holds_kit import PAYLOAD, QUESTION, ask, enqueue, item, post, sent

PAGE = "/results/assignments/hw-h"
JSON = {"accept": "application/json"}


@pytest.fixture
async def client(db_url: str) -> AsyncIterator[httpx.AsyncClient]:
    store = Store(await connect_pool(db_url, max_size=2))
    await store.save_assignment("hw-h", "Gravity", PAYLOAD)
    await store.close()
    app = create_app(make_settings(db_url, max_in_flight=0))
    async with app_client(app) as c:
        yield c


async def login(client: httpx.AsyncClient) -> str:
    r = await client.post("/ai-queue/login", data={"password": SECRET, "next": PAGE})
    assert r.status_code == 303
    found = re.search(r'name="csrf_token" value="([^"]+)"', (await client.get(PAGE)).text)
    assert found
    return found[1]


async def three_held(client: httpx.AsyncClient, conn: asyncpg.Connection, function: Any
                     ) -> list[dict[str, Any]]:
    subs = await add_submissions(conn, 4, assignment_id="hw-h")
    await enqueue(client, subs)
    jobs = sent(function)
    r = await post(client, [item(jobs[0], ask(best_guess=6)), item(jobs[1], ask(best_guess=4)),
                            item(jobs[2], {"reason": "suspected_injection", "best_guess": 3}),
                            item(jobs[3], score=9)])
    assert r.json()["accepted"] == 4
    return jobs


async def test_the_page_lists_held_results_first_with_the_question_and_the_actions(
    client: httpx.AsyncClient, conn: asyncpg.Connection, function: Any
):
    await three_held(client, conn, function)
    await login(client)
    page = (await client.get(PAGE)).text
    assert "Needs you: 3" in page
    # First: before the assignment card and the results table.
    assert page.index('id="needs-you"') < page.index('class="card assignment"') \
        < page.index('id="results"')
    needs = page[page.index('id="needs-you"'):page.index('class="card assignment"')]
    assert needs.count('class="needs-question"') == 1 and "asked by 2 answers" in needs
    assert QUESTION.replace("'", "&#39;") in needs
    assert "best guess 6 / 10" in needs and "best guess 4 / 10" in needs
    assert "best guess 3 / 10" in needs and "speak to the marker" in needs
    assert needs.count("needs-accept") == 3 and needs.count("needs-adjust") == 3
    assert needs.count("needs-answer-button") == 1


async def test_answer_from_the_page_marks_again_and_leaves_the_rest(
    client: httpx.AsyncClient, conn: asyncpg.Connection, function: Any
):
    await three_held(client, conn, function)
    csrf = await login(client)
    question_id = re.search(r'name="question_id" value="([^"]+)"',
                            (await client.get(PAGE)).text)
    assert question_id
    form = {"question_id": question_id[1], "answer": "Yes, it counts."}
    r = await client.post(f"{PAGE}/clarify", data=form, headers=JSON)
    assert r.status_code == 401  # no CSRF token: nothing changed
    assert await conn.fetchval("SELECT count(*) FROM ai_marking_answers") == 0
    r = await client.post(f"{PAGE}/clarify", data={**form, "csrf_token": csrf}, headers=JSON)
    assert r.status_code == 202, r.text
    assert r.json()["remarked"] == 2
    assert await conn.fetchval("SELECT actor FROM ai_marking_answers") == "admin"
    assert "Needs you: 1" in (await client.get(PAGE)).text
    r = await client.post(f"{PAGE}/clarify", data={**form, "csrf_token": csrf}, headers=JSON)
    assert r.status_code == 409
