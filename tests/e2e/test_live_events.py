"""Live events over real HTTP: two app instances on one database, resume, auth, fallback."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import asyncpg
import httpx
import pytest
from itsdangerous import TimestampSigner, URLSafeTimedSerializer

from aiqueue.db.store import queries
from aiqueue.models import EventCursor
from aiqueue.reads.live import LiveConfig
from aiqueue.tokens import Tokens
from aiqueue.web.app import create_app
from aiqueue.web.live_api import configure
from functions.ai_mark.server import create_app as function_app
from functions.ai_mark.settings import Settings as FunctionSettings
from tests.conftest import SECRET, add_submissions, make_settings
from tests.e2e.live_servers import Stream, feed, read_sse, serve
from tests.e2e.servers import free_port

pytestmark = pytest.mark.e2e
AUTH = {"authorization": f"Bearer {SECRET}"}
FAST = LiveConfig(max_seconds=30, heartbeat_seconds=5, poll_seconds=0.5)


def app_for(db_url: str, port: int, config: LiveConfig = FAST, **overrides: Any) -> Any:
    base = f"http://127.0.0.1:{port}"
    settings = make_settings(db_url, app_base_url=base, callback_url=f"{base}/webhooks/ai-mark",
                             **overrides)
    app = create_app(settings)
    configure(app, config)
    return app


def events_url(base: str, assignment_id: str, **params: str) -> str:
    query = httpx.QueryParams({"assignment_id": assignment_id, **params})
    return f"{base}/api/marking/events?{query}"


async def pause(conn: asyncpg.Connection) -> None:
    # Rows stay pending: these tests watch enqueue and cancel, not dispatch.
    await conn.execute("UPDATE ai_queue_control SET paused = true")


async def enqueue(base: str, assignment_id: str, ids: list[uuid.UUID], **extra: Any) -> None:
    async with httpx.AsyncClient(base_url=base, headers=AUTH) as client:
        r = await client.post("/api/marking/enqueue", json={
            "assignment_id": assignment_id, "submission_ids": [str(i) for i in ids], **extra})
        assert r.status_code == 202, r.text


def triples(stream: Stream) -> list[tuple[str, str, str]]:
    return [(e["id"], e["data"]["queue_id"], e["data"]["status"]) for e in stream.events]


async def test_a_change_through_one_instance_reaches_a_client_of_the_other_in_order(
    db_url: str, conn: asyncpg.Connection
):
    await pause(conn)
    ours = await add_submissions(conn, 4, "hw-a")
    theirs = await add_submissions(conn, 3, "hw-b")
    pa, pb = free_port(), free_port()
    with serve(app_for(db_url, pa), pa) as a, serve(app_for(db_url, pb), pb) as b:
        opened = asyncio.Event()
        reader = asyncio.create_task(read_sse(
            events_url(b.url, "hw-a"), headers=AUTH, opened=opened,
            until=lambda s: len(s.events) >= 8))
        await asyncio.wait_for(opened.wait(), 10)
        assert b.app.state.aiqueue.hub.listening, "instance B is woken by LISTEN on the direct URL"
        await enqueue(a.url, "hw-a", ours)
        await enqueue(a.url, "hw-b", theirs)
        async with httpx.AsyncClient(base_url=a.url, headers=AUTH) as client:
            r = await client.post("/api/marking/assignments/hw-a/cancel")
            assert r.json() == {"cancelled": 4}
        stream = await reader
    assert stream.status_code == 200 and stream.retry is not None
    statuses = [e["data"]["status"] for e in stream.events]
    assert statuses == ["pending"] * 4 + ["cancelled"] * 4
    assert {e["event"] for e in stream.events} == {"marking"}
    assert {e["data"]["submission_id"] for e in stream.events} == {str(i) for i in ours}
    # The enqueue's four first (one feed row), then the cancels; the ids climb.
    assert {e["data"]["submission_id"] for e in stream.events[:4]} == {str(i) for i in ours}
    cursors = [EventCursor.parse(i) for i in stream.ids]
    assert all(c is not None for c in cursors)
    assert cursors == sorted(cursors) and len(set(cursors)) == 8  # type: ignore[type-var]
    assert triples(stream) == await feed(conn, "hw-a")


async def test_every_status_of_a_marking_arrives_with_the_score(
    db_url: str, conn: asyncpg.Connection
):
    ids = await add_submissions(conn, 3, "hw-live", content="light water carbon dioxide glucose")
    fn_port, pa, pb = free_port(), free_port(), free_port()
    fn = function_app(FunctionSettings(simulate_latency=0.02, callback_backoff=0.05))
    app_a = app_for(db_url, pa, function_url=f"http://127.0.0.1:{fn_port}/")
    with serve(fn, fn_port), serve(app_a, pa) as a, serve(app_for(db_url, pb), pb) as b:
        opened = asyncio.Event()
        reader = asyncio.create_task(read_sse(
            events_url(b.url, "hw-live"), headers=AUTH, opened=opened,
            until=lambda s: sum(e["data"]["status"] == "completed" for e in s.events) == 3))
        await asyncio.wait_for(opened.wait(), 10)
        await enqueue(a.url, "hw-live", ids, payload={
            "rubric": "Names light; Names water; Names oxygen", "max_score": 6})
        stream = await reader
    by_row: dict[str, list[str]] = {}
    for e in stream.events:
        by_row.setdefault(e["data"]["queue_id"], []).append(e["data"]["status"])
    assert len(by_row) == 3
    assert all(s == ["pending", "processing", "completed"] for s in by_row.values())
    done = [e["data"] for e in stream.events if e["data"]["status"] == "completed"]
    assert all(d["result"] == {"score": 4, "max_score": 6} for d in done)
    assert all("result" not in e["data"] for e in stream.events if e["data"] not in done)


async def test_resuming_from_last_event_id_loses_and_repeats_nothing(
    db_url: str, conn: asyncpg.Connection
):
    await pause(conn)
    ids = await add_submissions(conn, 12, "hw-r")
    # Streams end after 2 s, as they do before the platform's limit: the client
    # reconnects with Last-Event-ID like EventSource does.  (1 s was too short for the
    # starter's enqueue through the other instance on a loaded machine.)
    short = LiveConfig(max_seconds=2.0, heartbeat_seconds=0.3, poll_seconds=0.2)
    pa, pb = free_port(), free_port()
    with serve(app_for(db_url, pa, short), pa) as a, serve(app_for(db_url, pb, short), pb) as b:
        first = await read_sse(events_url(a.url, "hw-r"), headers=AUTH)
        assert first.ended_by_server and first.events == []
        assert "keep-alive" in first.comments
        # Start from the head a page would have been given, then make changes.
        # The first stream may end (after 1 s) before any event on a loaded
        # machine: then the next one resumes from that head, as a page does.
        head_cursor = str(EventCursor(int(await conn.fetchval(queries()["live_events_head"])), 0))
        async with httpx.AsyncClient(timeout=10) as client:
            opened = asyncio.Event()
            starter = asyncio.create_task(read_sse(
                events_url(a.url, "hw-r"), headers={**AUTH, "last-event-id": head_cursor},
                opened=opened, until=lambda s: len(s.events) >= 5))
            await asyncio.wait_for(opened.wait(), 10)
            await enqueue(b.url, "hw-r", ids[:6])
            head = await starter
            await enqueue(b.url, "hw-r", ids[6:])
            r = await client.post(f"{b.url}/api/marking/assignments/hw-r/cancel", headers=AUTH)
            assert r.json() == {"cancelled": 12}
        seen = list(head.events)
        reconnects = 0
        urls = [a.url, b.url]
        while len(seen) < 24:
            reconnects += 1
            assert reconnects < 20, f"stuck at {len(seen)} events"
            wanted = 24 - len(seen)

            def enough(s: Stream, wanted: int = wanted) -> bool:
                return len(s.events) >= wanted

            more = await read_sse(
                events_url(urls[reconnects % 2], "hw-r"),
                headers={**AUTH, "last-event-id": seen[-1]["id"] if seen else head_cursor},
                until=enough)
            seen += more.events
    got = [(e["id"], e["data"]["queue_id"], e["data"]["status"]) for e in seen]
    assert len({g[0] for g in got}) == len(got) == 24  # no duplicates
    assert got == await feed(conn, "hw-r")  # no loss, feed order


async def test_polling_serves_when_there_is_no_direct_url(db_url: str, conn: asyncpg.Connection):
    await pause(conn)
    ids = await add_submissions(conn, 3, "hw-p")
    port = free_port()
    app = app_for(db_url, port, database_direct_url=None)
    with serve(app, port) as a:
        opened = asyncio.Event()
        reader = asyncio.create_task(read_sse(
            events_url(a.url, "hw-p"), headers=AUTH, opened=opened,
            until=lambda s: len(s.events) >= 3))
        await asyncio.wait_for(opened.wait(), 10)
        await enqueue(a.url, "hw-p", ids)
        stream = await reader
        assert not a.app.state.aiqueue.hub.listening
    assert [e["data"]["status"] for e in stream.events] == ["pending"] * 3


async def test_a_signed_token_admits_its_assignment_only_and_expires(
    db_url: str, conn: asyncpg.Connection
):
    await pause(conn)
    ids = await add_submissions(conn, 2, "hw-t")
    tokens = Tokens(SECRET)
    port = free_port()
    with serve(app_for(db_url, port), port) as a:
        def url(**params: str) -> str:
            return events_url(a.url, "hw-t", **params)

        async with httpx.AsyncClient(timeout=10) as client:
            for bad in (url(), url(token="forged"), url(token=tokens.events("hw-other")),
                        url(token=_expired_token("hw-t")),
                        url(token=Tokens("another-secret-0123456789").events("hw-t"))):
                r = await client.get(bad)
                assert r.status_code == 401, bad
                assert r.json()["error"] == "unauthorized"
            wrong_bearer = await client.get(url(), headers={"authorization": "Bearer nope"})
            assert wrong_bearer.status_code == 401
            bad_resume = await client.get(url(token=tokens.events("hw-t"), last_event_id="x"))
            assert bad_resume.status_code == 422
        opened = asyncio.Event()
        reader = asyncio.create_task(read_sse(
            url(token=tokens.events("hw-t")), opened=opened, until=lambda s: len(s.events) >= 2))
        await asyncio.wait_for(opened.wait(), 10)
        await enqueue(a.url, "hw-t", ids)
        stream = await reader
    assert stream.status_code == 200 and len(stream.events) == 2


def _expired_token(assignment_id: str) -> str:
    class Past(TimestampSigner):
        def get_timestamp(self) -> int:
            return int(time.time()) - 3 * 3600

    signer = URLSafeTimedSerializer(SECRET, salt="aiqueue.events", signer=Past)
    return signer.dumps(assignment_id)


async def test_a_client_that_goes_away_releases_the_listener(db_url: str, conn: asyncpg.Connection):
    port = free_port()
    with serve(app_for(db_url, port), port) as a:
        opened = asyncio.Event()
        reader = asyncio.create_task(read_sse(events_url(a.url, "hw-x"), headers=AUTH,
                                              opened=opened))
        await asyncio.wait_for(opened.wait(), 10)
        hub = a.app.state.aiqueue.hub
        assert hub.subscribers == 1 and hub.listening
        reader.cancel()
        deadline = time.time() + 10
        while hub.subscribers and time.time() < deadline:
            await asyncio.sleep(0.05)
        assert hub.subscribers == 0
        await asyncio.sleep(0.2)
        assert not hub.listening
        listeners = await conn.fetchval(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND query ILIKE 'LISTEN%'")
        assert listeners == 0
