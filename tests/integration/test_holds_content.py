"""Content stays content (docs/review-holds.md): a marker's question and a teacher's answer
are never in logs, metrics, notifications or error texts, and go with an erasure."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import httpx
import pytest

from aiqueue.web.app import create_app
from tests.conftest import AUTH, add_submissions, app_client, make_settings
from tests.integration.holds_kit import enqueue, item, post, sent

QUESTION = "Does PURPLE-QUESTION-77 count as an answer?"
ANSWER = "ORANGE-ANSWER-42 counts."
TOKEN = "metrics-token-0123456789"


@pytest.fixture
async def client(db_url: str) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(make_settings(db_url, max_in_flight=0, metrics_token=TOKEN))
    async with app_client(app) as c:
        yield c


def clean(text: str) -> bool:
    return "PURPLE-QUESTION" not in text and "ORANGE-ANSWER" not in text


async def test_the_question_and_the_answer_reach_no_log_metric_notification_or_error(
    client: httpx.AsyncClient, conn: asyncpg.Connection, function: Any,
    caplog: pytest.LogCaptureFixture
):
    caplog.set_level(logging.DEBUG)
    subs = await add_submissions(conn, 2, assignment_id="hw-c")
    await enqueue(client, subs, assignment="hw-c")
    jobs = sent(function)
    asked = {"reason": "clarification", "question": QUESTION, "best_guess": 3}
    answers: list[httpx.Response] = []
    # A malformed one first (too long, with the words in it): refused whole.
    answers.append(await post(client, [item(jobs[0], {**asked, "question": QUESTION * 20})]))
    answers.append(await post(client, [item(jobs[0], {**asked, "reason": "low_confidence"})]))
    assert [r.status_code for r in answers] == [422, 422]
    r = await post(client, [item(j, asked) for j in jobs])
    assert r.json()["accepted"] == 2
    listed = await client.get("/api/marking/review_needed", params={"assignment_id": "hw-c"},
                              headers=AUTH)
    assert listed.json()["questions"][0]["question"] == QUESTION  # the teacher's list has it
    qid = listed.json()["questions"][0]["question_id"]
    body = {"assignment_id": "hw-c", "question_id": qid, "answer": ANSWER}
    r = await client.post("/api/marking/clarify", headers=AUTH, json=body)
    assert r.status_code == 202 and clean(r.text)
    answers.append(await client.post("/api/marking/clarify", headers=AUTH, json=body))
    answers.append(await client.post("/api/marking/clarify", headers=AUTH,
                                     json={**body, "answer": ANSWER * 100}))
    answers.append(await client.post("/api/marking/clarify", headers=AUTH,
                                     json={**body, "question_id": "PURPLE-QUESTION-77"}))
    assert [r.status_code for r in answers[2:]] == [409, 422, 422]
    assert all(clean(r.text) for r in answers)

    metrics = await client.get("/metrics", headers={"authorization": f"Bearer {TOKEN}"})
    assert metrics.status_code == 200 and clean(metrics.text)
    outbox = await conn.fetch("SELECT body::text FROM ai_marking_outbox")
    assert outbox and all(clean(r["body"]) for r in outbox)
    events = await conn.fetch("SELECT e::text FROM ai_marking_events e")
    assert all(clean(r["e"]) for r in events)
    logged = "\n".join(f"{r.getMessage()} {r.exc_text or ''}" for r in caplog.records)
    assert "clarified" in logged and clean(logged)
