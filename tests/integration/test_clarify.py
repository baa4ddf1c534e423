"""The teacher's list of held results and an answer given once (docs/review-holds.md)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import httpx
import pytest

from aiqueue.web.app import create_app
from tests.conftest import AUTH, add_submissions, app_client, make_settings
from tests.integration.calibration_kit import drain
from tests.integration.holds_kit import PAYLOAD, QUESTION, ask, enqueue, item, post, sent


@pytest.fixture
async def client(db_url: str) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(make_settings(db_url, max_in_flight=0))
    async with app_client(app) as c:
        yield c


async def listed(client: httpx.AsyncClient, assignment: str = "hw-h") -> dict[str, Any]:
    r = await client.get("/api/marking/review_needed", params={"assignment_id": assignment},
                         headers=AUTH)
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    return body


async def four_held(client: httpx.AsyncClient, conn: asyncpg.Connection, function: Any
                    ) -> list[dict[str, Any]]:
    """Five marked: three ask one question (in other spacing and case), one is suspected,
    one is plain."""
    subs = await add_submissions(conn, 5, assignment_id="hw-h")
    await enqueue(client, subs)
    jobs = sent(function)
    r = await post(client, [item(jobs[0], ask()), item(jobs[1], ask("  " + QUESTION.upper())),
                            item(jobs[2], ask(QUESTION.replace(" ", "\n  "), best_guess=None)),
                            item(jobs[3], {"reason": "suspected_injection", "best_guess": 2}),
                            item(jobs[4], score=9)])
    assert r.json()["accepted"] == 5
    return jobs


async def test_the_list_shows_each_question_once_with_the_rows_that_asked_it(
    client: httpx.AsyncClient, conn: asyncpg.Connection, function: Any
):
    jobs = await four_held(client, conn, function)
    body = await listed(client)
    assert body["count"] == 4 and body["assignment_id"] == "hw-h"
    [q] = body["questions"]
    # One question, in the words of one of its askers.
    assert " ".join(q["question"].split()).lower() == QUESTION.lower() and not q["answered"]
    assert sorted(q["rows"]) == sorted(j["queue_id"] for j in jobs[:3])
    reasons = {i["queue_id"]: (i["reason"], i["best_guess"], i["question_id"])
               for i in body["items"]}
    assert reasons == {jobs[0]["queue_id"]: ("clarification", 6, q["question_id"]),
                       jobs[1]["queue_id"]: ("clarification", 6, q["question_id"]),
                       jobs[2]["queue_id"]: ("clarification", None, q["question_id"]),
                       jobs[3]["queue_id"]: ("suspected_injection", 2, None)}
    # Reviewed, a held result leaves the list.
    r = await client.post(f"/api/marking/queue/{jobs[3]['queue_id']}/accept", headers=AUTH)
    assert r.status_code == 200
    assert (await listed(client))["count"] == 3
    # Another assignment's list is its own.
    assert (await listed(client, "hw-other"))["count"] == 0


async def test_the_list_needs_the_bearer_and_an_assignment(client: httpx.AsyncClient):
    r = await client.get("/api/marking/review_needed", params={"assignment_id": "hw-h"})
    assert r.status_code == 401
    r = await client.get("/api/marking/review_needed", headers=AUTH)
    assert r.status_code == 422


async def test_an_answer_marks_the_askers_and_the_waiting_rows_under_a_new_payload_once(
    client: httpx.AsyncClient, conn: asyncpg.Connection, function: Any
):
    jobs = await four_held(client, conn, function)
    [q] = (await listed(client))["questions"]
    # Two more submissions wait, not yet dispatched (due in an hour).
    waiting = await add_submissions(conn, 2, assignment_id="hw-h")
    await enqueue(client, waiting, delay_seconds=3600)
    before = function.call_count
    answer = "Yes: 10 m/s² is within the rubric's tolerance."
    r = await client.post("/api/marking/clarify", headers=AUTH, json={
        "assignment_id": "hw-h", "question_id": q["question_id"], "answer": answer})
    assert r.status_code == 202, r.text
    body = r.json()
    assert body["remarked"] == 3 and body["moved"] == 2
    assert body["question_id"] == q["question_id"] and len(body["payload_version"]) == 64
    # The new payload: the rubric with the note, dispatched to the askers and the waiting.
    await conn.execute("UPDATE ai_marking_queue SET run_after = now() "
                       "WHERE status = 'pending'")
    await drain(client)
    again = sent(function)[before:]
    assert sorted(j["submission_id"] for j in again) == sorted(
        [j["submission_id"] for j in jobs[:3]] + [str(w) for w in waiting])
    note = {"question_id": q["question_id"], "question": q["question"], "answer": answer}
    for job in again:
        assert job["payload"] == {**PAYLOAD, "marking_notes": [note]}
    # It is the assignment's current payload: a re-mark's, with the askers' run.
    current = await conn.fetchrow(
        "SELECT p.payload::text, r.run_id, r.payload_version FROM ai_marking_remarks r "
        "JOIN ai_marking_payloads p ON p.id = r.payload_id WHERE r.assignment_id = 'hw-h'")
    assert json.loads(current["payload"]) == {**PAYLOAD, "marking_notes": [note]}
    assert str(current["run_id"]) == body["run_id"]
    assert current["payload_version"] == body["payload_version"]
    # The question left the list; the suspected answer is still there.
    left = await listed(client)
    assert left["questions"] == [] and [i["reason"] for i in left["items"]] == [
        "suspected_injection"]
    # Once per payload.
    r = await client.post("/api/marking/clarify", headers=AUTH, json={
        "assignment_id": "hw-h", "question_id": q["question_id"], "answer": "No."})
    assert r.status_code == 409 and r.json()["error"] == "already_answered"
    assert "No." not in r.text and QUESTION not in r.text
    # The next class with that rubric carries the note, so it is not asked again.
    [other] = await add_submissions(conn, 1, assignment_id="hw-next")
    await enqueue(client, [other], assignment="hw-next")
    assert sent(function)[-1]["payload"] == {**PAYLOAD, "marking_notes": [note]}


@pytest.mark.parametrize("body", [
    {"assignment_id": "hw-h", "question_id": "not-a-uuid", "answer": "yes"},
    {"assignment_id": "hw-h", "question_id": "00000000-0000-0000-0000-000000000001",
     "answer": ""},
    {"assignment_id": "hw-h", "question_id": "00000000-0000-0000-0000-000000000001",
     "answer": "x" * 2001},
    {"assignment_id": "hw-h", "question_id": "00000000-0000-0000-0000-000000000001"},
    {"assignment_id": "hw-h", "question_id": "00000000-0000-0000-0000-000000000001",
     "answer": "yes", "extra": 1},
    [],
])
async def test_a_malformed_answer_is_a_422_and_changes_nothing(
    client: httpx.AsyncClient, conn: asyncpg.Connection, body: Any
):
    r = await client.post("/api/marking/clarify", headers=AUTH, json=body)
    assert r.status_code == 422, r.text
    assert "x" * 20 not in r.text
    assert await conn.fetchval("SELECT count(*) FROM ai_marking_answers") == 0


async def test_an_unknown_question_is_a_404_and_the_route_needs_the_bearer(
    client: httpx.AsyncClient
):
    body = {"assignment_id": "hw-h", "question_id": "00000000-0000-0000-0000-000000000001",
            "answer": "yes"}
    r = await client.post("/api/marking/clarify", json=body)
    assert r.status_code == 401
    r = await client.post("/api/marking/clarify", headers=AUTH, json=body)
    assert r.status_code == 404 and "yes" not in r.json()["detail"]


async def test_erasure_removes_the_hold_the_question_and_an_answer_only_it_asked(
    client: httpx.AsyncClient, conn: asyncpg.Connection, function: Any
):
    subs = await add_submissions(conn, 2, assignment_id="hw-h")
    await enqueue(client, subs)
    jobs = sent(function)
    r = await post(client, [item(jobs[0], ask()), item(jobs[1], {"reason": "low_confidence"})])
    assert r.json()["accepted"] == 2
    [q] = (await listed(client))["questions"]
    r = await client.post("/api/marking/clarify", headers=AUTH, json={
        "assignment_id": "hw-h", "question_id": q["question_id"], "answer": "Yes, it counts."})
    assert r.status_code == 202
    r = await client.delete(f"/api/marking/submissions/{subs[0]}", headers=AUTH)
    erased = r.json()["erased"]
    assert erased["ai_marking_holds"] == 1 and erased["ai_marking_answers"] == 1
    for table in ("ai_marking_holds", "ai_marking_results", "ai_marking_answers",
                  "ai_marking_outbox", "ai_marking_events", "ai_marking_queue"):
        n = await conn.fetchval(f"SELECT count(*) FROM {table} t "
                                "WHERE strpos(t::text, $1) > 0 OR strpos(t::text, $2) > 0",
                                QUESTION, "Yes, it counts.")
        assert n == 0, table
    # The other submission's hold stays.
    assert (await listed(client))["count"] == 1
