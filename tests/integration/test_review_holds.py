"""A held result (docs/review-holds.md) through the real app and PostgreSQL (function: respx)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import httpx
import pytest

from aiqueue.web.app import create_app
from tests.conftest import AUTH, add_submissions, app_client, make_settings
from tests.integration.holds_kit import QUESTION, ask, enqueue, item, post, sent


@pytest.fixture
async def client(db_url: str) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(make_settings(db_url, max_in_flight=0))
    async with app_client(app) as c:
        yield c


async def test_a_held_result_completes_its_row_with_the_best_guess_and_tells_the_host(
    client: httpx.AsyncClient, conn: asyncpg.Connection, function: Any
):
    [sub] = await add_submissions(conn, 1, assignment_id="hw-h")
    await enqueue(client, [sub])
    [job] = sent(function)
    r = await post(client, [item(job, ask(best_guess=6), score=10)])
    assert r.status_code == 200 and r.json()["accepted"] == 1
    assert await conn.fetchval("SELECT status FROM ai_marking_queue") == "completed"
    result = json.loads(await conn.fetchval("SELECT ai_result::text FROM submissions"))
    assert result["review_required"] is True and result["review_reason"] == "clarification"
    assert result["score"] == 6 and result["max_score"] == 10
    assert result["review"] == {"reason": "clarification", "question": QUESTION,
                                "best_guess": 6}
    [event] = await conn.fetch("SELECT body::text FROM ai_marking_outbox "
                               "WHERE type = 'marking.review_needed'")
    body = json.loads(event["body"])
    assert QUESTION not in event["body"] and "about 10" not in event["body"]
    question_id = await conn.fetchval("SELECT question_id FROM ai_marking_holds")
    assert body == {"type": "marking.review_needed", "queue_id": job["queue_id"],
                    "submission_id": str(sub), "assignment_id": "hw-h",
                    "reason": "clarification", "question_id": str(question_id)}


async def test_without_a_best_guess_the_held_result_has_no_score_and_may_omit_its_result(
    client: httpx.AsyncClient, conn: asyncpg.Connection, function: Any
):
    [sub] = await add_submissions(conn, 1, assignment_id="hw-h")
    await enqueue(client, [sub])
    [job] = sent(function)
    held = {"queue_id": job["queue_id"], "token": job["callback_token"], "status": "completed",
            "review": {"reason": "suspected_injection"}}
    r = await post(client, [held])
    assert r.json()["accepted"] == 1
    result = json.loads(await conn.fetchval("SELECT ai_result::text FROM submissions"))
    assert result == {"score": None, "review_required": True,
                      "review_reason": "suspected_injection",
                      "review": {"reason": "suspected_injection", "best_guess": None}}
    row = await conn.fetchrow("SELECT reason, question_id FROM ai_marking_holds")
    assert tuple(row) == ("suspected_injection", None)


@pytest.mark.parametrize("review", [
    {"reason": "unsure"},
    {"reason": "clarification"},
    {"reason": "clarification", "question": ""},
    {"reason": "clarification", "question": "x" * 501},
    {"reason": "low_confidence", "question": "why?"},
    {"reason": "low_confidence", "best_guess": -1},
    {"reason": "low_confidence", "best_guess": True},
    {"reason": "low_confidence", "best_guess": "7"},
    {"reason": "low_confidence", "best_guess": 11},
    "clarification",
])
async def test_a_malformed_review_is_refused_whole_and_changes_nothing(
    client: httpx.AsyncClient, conn: asyncpg.Connection, function: Any, review: Any
):
    subs = await add_submissions(conn, 2, assignment_id="hw-h")
    await enqueue(client, subs)
    good, bad = sent(function)
    r = await post(client, [item(good), item(bad, review)])
    assert r.status_code == 422 and r.json()["error"] == "invalid"
    assert "review" in r.json()["detail"]
    assert "x" * 20 not in r.text and "why?" not in r.text
    assert await conn.fetchval("SELECT count(*) FROM ai_marking_queue "
                               "WHERE status = 'completed'") == 0
    assert await conn.fetchval("SELECT count(*) FROM ai_marking_holds") == 0


async def test_a_review_on_a_failed_item_is_refused(
    client: httpx.AsyncClient, conn: asyncpg.Connection, function: Any
):
    [sub] = await add_submissions(conn, 1, assignment_id="hw-h")
    await enqueue(client, [sub])
    [job] = sent(function)
    failed = {"queue_id": job["queue_id"], "token": job["callback_token"], "status": "failed",
              "error": "model_timeout", "review": {"reason": "low_confidence"}}
    r = await post(client, [failed])
    assert r.status_code == 422 and "review" in r.json()["detail"]
    assert await conn.fetchval("SELECT attempts FROM ai_marking_queue") == 1


async def test_no_agreement_figure_counts_a_held_result_until_a_teacher_reviews_it(
    client: httpx.AsyncClient, conn: asyncpg.Connection, function: Any
):
    subs = await add_submissions(conn, 3, assignment_id="hw-h")
    await enqueue(client, subs)
    jobs = sent(function)
    r = await post(client, [item(jobs[0], ask(best_guess=6)),
                            item(jobs[1], {"reason": "low_confidence", "best_guess": 4}),
                            item(jobs[2], score=8)])
    assert r.json()["accepted"] == 3

    async def reviewed() -> dict[str, Any]:
        r = await client.get("/api/marking/agreement", params={"assignment_id": "hw-h"},
                             headers=AUTH)
        body: dict[str, Any] = r.json()
        return body

    assert (await reviewed())["reviewed"] == 0
    # The teacher adjusts one held result: it counts from then on, its AI score the guess.
    r = await client.post(f"/api/marking/queue/{jobs[1]['queue_id']}/accept", headers=AUTH,
                          json={"result": {"score": 5, "max_score": 10}})
    assert r.status_code == 200
    figures = await reviewed()
    assert figures["reviewed"] == 1 and figures["exact"] == 0.0
    assert figures["mean_abs_error"] == 1.0
