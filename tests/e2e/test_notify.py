"""Notifications end to end: `python -m aiqueue serve`, a marking function, a host's receiver.

The receiver is a real HTTP server on loopback that checks every request with
the standardwebhooks library's own verifier (tests/e2e/receiver.py).  Delivery
runs only inside serve (after responses, by the chain and by its ticker); the
tests just watch the receiver and the outbox.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import asyncpg
import httpx
import pytest

from tests.conftest import SECRET
from tests.e2e.receiver import Receiver, new_secret, serving
from tests.e2e.servers import AppProcess, Faults, FunctionHost, MarkingFunction, drain, free_port

pytestmark = pytest.mark.e2e

AUTH = {"authorization": f"Bearer {SECRET}"}
KEY = new_secret()
NEEDLE = "Zephyrine-notify-tidepool"


@pytest.fixture
def function() -> Iterator[FunctionHost]:
    """A function that fails its first job's callback (quoting the answer) and marks the rest."""
    fn = MarkingFunction(Faults(quote_content=True, error_template="{content}",
                                at_least_once={"failed_callback": 1}), seed=5)
    host = FunctionHost(fn, free_port())
    host.up()
    yield host
    host.close()


def app_for(db_url: str, host: FunctionHost, receiver: Receiver, **env: str) -> AppProcess:
    return AppProcess({
        "DATABASE_URL": db_url,
        "MARKING_QUEUE_SECRET": SECRET,
        "AI_MARKING_FUNCTION_URL": host.url,
        "QUEUE_MAX_ATTEMPTS": "1",
        "QUEUE_MAX_IN_FLIGHT": "2",
        "QUEUE_TICK_SECONDS": "0.5",
        "QUEUE_NOTIFY_URL": receiver.url,
        "QUEUE_NOTIFY_SECRET": KEY,
        "QUEUE_NOTIFY_RETRY_BASE_SECONDS": "0.1",
        "QUEUE_NOTIFY_TIMEOUT_SECONDS": "1",
        **env,
    }, free_port())


@pytest.fixture
async def contents(conn: asyncpg.Connection) -> AsyncIterator[dict[uuid.UUID, str]]:
    """Six submissions whose answers carry a recognisable phrase."""
    texts = {uuid.uuid4(): f"My answer {NEEDLE}-{k} is about tidepools." for k in range(6)}
    await conn.executemany(
        "INSERT INTO submissions (id, assignment_id, content) VALUES ($1, 'hw-n', $2)",
        list(texts.items()))
    yield texts


async def enqueue(app: AppProcess, ids: list[uuid.UUID]) -> None:
    async with httpx.AsyncClient(base_url=app.url, timeout=30) as client:
        r = await client.post("/api/marking/enqueue", headers=AUTH, json={
            "assignment_id": "hw-n", "submission_ids": [str(i) for i in ids]})
        assert r.status_code == 202, r.text


async def outbox(conn: asyncpg.Connection) -> dict[str, dict[str, Any]]:
    rows = await conn.fetch("SELECT id::text AS id, state, attempts, body::text AS body "
                            "FROM ai_marking_outbox")
    return {r["id"]: {"state": r["state"], "attempts": r["attempts"],
                      "body": json.loads(r["body"])} for r in rows}


async def all_delivered(conn: asyncpg.Connection, receiver: Receiver,
                        timeout: float = 30) -> dict[str, dict[str, Any]]:
    """Wait until every outbox event is delivered (in the database and at the receiver)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        events = await outbox(conn)
        if events and all(e["state"] == "delivered" for e in events.values()) \
                and set(receiver.delivered()) == set(events):
            return events
        await asyncio.sleep(0.1)
    raise AssertionError(f"not every event was delivered: {await outbox(conn)}")


async def given_up(conn: asyncpg.Connection, timeout: float = 30) -> None:
    """Wait until the outbox holds one event, given up."""
    deadline = time.monotonic() + timeout
    while [e["state"] for e in (await outbox(conn)).values()] != ["gave_up"]:
        assert time.monotonic() < deadline, "the event was not given up"
        await asyncio.sleep(0.1)


async def test_every_event_arrives_signed_with_the_runs_counts_and_no_content(
    db_url: str, conn: asyncpg.Connection, function: FunctionHost,
    contents: dict[uuid.UUID, str]
):
    with serving(Receiver(KEY)) as receiver:
        app = app_for(db_url, function, receiver)
        try:
            await asyncio.to_thread(app.start)
            await enqueue(app, list(contents))
            await drain(conn)
            events = await all_delivered(conn, receiver)
        finally:
            await asyncio.to_thread(app.stop)
    failed = {str(r["queue_id"]): r for r in await conn.fetch(
        "SELECT queue_id, submission_id, last_error FROM ai_marking_queue "
        "WHERE status = 'failed'")}
    assert failed, "the function failed at least one row"
    delivered = receiver.delivered()
    assert all(r.payload is not None for r in receiver.received), "every signature verified"
    assert delivered == {i: e["body"] for i, e in events.items()}
    by_type: dict[str, list[dict[str, Any]]] = {}
    for payload in delivered.values():
        by_type.setdefault(payload["type"], []).append(payload)
    [run] = by_type["marking.run_finished"]
    assert (run["completed"], run["failed"], run["cancelled"]) == (6 - len(failed), len(failed), 0)
    assert run["tokens"] == 15 * (6 - len(failed))  # the test function's usage per result
    assert {p["queue_id"] for p in by_type["marking.row_failed"]} == set(failed)
    for p in by_type["marking.row_failed"]:
        assert p["error"] == failed[p["queue_id"]]["last_error"]
        assert p["submission_id"] == str(failed[p["queue_id"]]["submission_id"])
    # No event carries student content (the failed callbacks' errors quoted it verbatim).
    bodies = "\n".join(r.body.decode() for r in receiver.received)
    assert NEEDLE not in bodies
    assert not any(text in bodies for text in contents.values())


async def test_an_instance_killed_mid_delivery_loses_no_event_and_keeps_its_id(
    db_url: str, conn: asyncpg.Connection, function: FunctionHost,
    contents: dict[uuid.UUID, str]
):
    ids = list(contents)[:2]
    with serving(Receiver(KEY, hold=1)) as receiver:
        first = app_for(db_url, function, receiver)
        second = app_for(db_url, function, receiver)
        try:
            await asyncio.to_thread(first.start)
            await enqueue(first, ids)
            # The receiver holds the first delivery; its sender dies waiting for the answer.
            await asyncio.to_thread(receiver.wait_for, lambda r: r.arrived, 30)
            await asyncio.to_thread(first.kill)
            receiver.released.set()
            await asyncio.to_thread(second.start)
            await drain(conn)
            events = await all_delivered(conn, receiver)
        finally:
            await asyncio.to_thread(first.kill)
            await asyncio.to_thread(second.stop)
    held = receiver.arrived[0]
    assert held in events, "the held delivery was an outbox event"
    # That very event came again, with the same webhook-id, and was delivered.
    assert receiver.arrived.count(held) >= 2
    assert held in receiver.delivered()
    assert events[held]["attempts"] >= 2
    assert sorted(e["body"]["type"] for e in events.values()) == \
        ["marking.row_failed", "marking.run_finished"]
    assert all(r.payload is not None for r in receiver.received)


async def test_a_receiver_answering_500_three_times_gets_the_event_on_the_fourth_try(
    db_url: str, conn: asyncpg.Connection, function: FunctionHost,
    contents: dict[uuid.UUID, str]
):
    # Only the successful job: one run_finished event.
    await conn.execute("UPDATE submissions SET content = 'x'")
    ids = list(contents)[:1]
    function.function.faults.at_least_once = {}
    with serving(Receiver(KEY, answers=[500, 500, 500])) as receiver:
        app = app_for(db_url, function, receiver)
        try:
            await asyncio.to_thread(app.start)
            await enqueue(app, ids)
            events = await all_delivered(conn, receiver)
        finally:
            await asyncio.to_thread(app.stop)
    [(event_id, event)] = events.items()
    assert event["body"]["type"] == "marking.run_finished" and event["attempts"] == 4
    assert [(r.webhook_id, r.answered) for r in receiver.received] == \
        [(event_id, 500)] * 3 + [(event_id, 200)]
    assert all(r.payload == event["body"] for r in receiver.received)


async def test_a_410_stops_the_retries_at_once(
    db_url: str, conn: asyncpg.Connection, function: FunctionHost,
    contents: dict[uuid.UUID, str]
):
    function.function.faults.at_least_once = {}
    with serving(Receiver(KEY, answers=[410, 500, 500, 500])) as receiver:
        app = app_for(db_url, function, receiver)
        try:
            await asyncio.to_thread(app.start)
            await enqueue(app, list(contents)[:1])
            await given_up(conn)
            # Retries would come 0.1 s, 0.5 s and 2.5 s apart: none may come in 1 s.
            await asyncio.sleep(1.0)
            async with httpx.AsyncClient(base_url=app.url) as client:
                # The cron's step runs the delivery step too; it finds nothing due.
                r = await client.get("/api/marking/process-queue", headers=AUTH)
                assert r.status_code == 200
        finally:
            await asyncio.to_thread(app.stop)
    assert [r.answered for r in receiver.received] == [410]
    [event] = (await outbox(conn)).values()
    assert (event["state"], event["attempts"]) == ("gave_up", 1)
