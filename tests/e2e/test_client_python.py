"""The Python client (clients/python) against a running app: the happy path, errors, and a
live-event stream that is cut, silently dropped and ended by the server, and loses nothing."""

from __future__ import annotations

import asyncio
import importlib.util
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import pytest
from aiqueue_client import AsyncMarkingClient, MarkingError, MarkingEvent, call

from tests.conftest import add_submissions
from tests.e2e.api_server import api_server
from tests.e2e.faultproxy import FaultProxy
from tests.e2e.live_servers import feed
from tests.e2e.servers import ROOT

pytestmark = pytest.mark.e2e
ANSWER = "light water carbon dioxide glucose"
# The reference function marks against a rubric.
PAYLOAD = {"rubric": "Names light; Names water", "max_score": 4}
# A cursor before every event of the feed.
FROM_START = "0-0"


async def collect(events: Any, into: list[MarkingEvent], until: Any) -> None:
    async for event in events:
        into.append(event)
        if until(into):
            return


def done(assignment_id: str, n: int) -> Any:
    return lambda seen: sum(e.status == "completed" for e in seen) >= n


async def test_enqueue_watch_review_and_read_usage(db_url: str, conn: asyncpg.Connection):
    ids = await add_submissions(conn, 3, "hw-py", ANSWER)
    with api_server(db_url) as app:
        async with AsyncMarkingClient(app.url, app.secret) as client:
            seen: list[MarkingEvent] = []
            # From the feed's start ("0-0"), not from "now": no race with the enqueue below.
            watcher = asyncio.create_task(collect(client.events("hw-py", last_event_id=FROM_START),
                                                  seen, done("hw-py", 3)))
            # The estimate first (a dry run): nothing is written.
            estimate = await client.estimate("hw-py", ids)
            assert (estimate["rows"], estimate["already_marked"]) == (3, 0)
            assert estimate["estimated_tokens"] > 0 and estimate["capped"] is None
            first = await client.enqueue("hw-py", ids, idempotency_key="mark-all-hw-py-1",
                                         payload=PAYLOAD)
            again = await client.enqueue("hw-py", ids, idempotency_key="mark-all-hw-py-1",
                                         payload=PAYLOAD)
            assert first.answer["enqueued"] == 3 and not first.replayed
            assert again.replayed and again.answer == first.answer
            await asyncio.wait_for(watcher, 60)
            by_row: dict[str, list[str]] = {}
            for e in seen:
                by_row.setdefault(e.queue_id, []).append(e.status)
            assert set(by_row) == set(first.answer["queue_ids"])
            assert all(s[0] == "pending" and s[-1] == "completed" for s in by_row.values())
            assert all(e.result is not None for e in seen if e.status == "completed")

            status = await client.status(ids[0])
            assert status["status"] == "completed" and status["queue_position"] is None
            progress = await client.progress("hw-py")
            assert (progress["total"], progress["completed"]) == (3, 3)
            q0, q1, _ = first.answer["queue_ids"]
            accepted = await client.accept(q0, result={"score": 4, "max_score": 4},
                                           actor="teacher-7")
            assert accepted["review"] == "accepted"
            assert (await client.revert(q1, actor="teacher-7"))["review"] == "reverted"
            history = await client.results(ids[0])
            assert history["items"][0]["actor"] == "teacher-7"
            assert (await client.accept_run("hw-py"))["accepted"] == 1
            usage = await client.usage(by="assignment")
            assert usage["total"]["jobs"] == 3
            assert [i["key"] for i in usage["items"]] == ["hw-py"]
            # One adjusted accept, one plain (by the run), one revert: 1 exact pair of 2.
            agreement = await client.agreement(assignment_id="hw-py")
            assert (agreement["reviewed"], agreement["reverted"]) == (3, 1)
            assert agreement["exact"] is not None and agreement["qwk"] is None

            gated = await add_submissions(conn, 3, "hw-gate", ANSWER)
            estimate = await client.estimate("hw-gate", gated, calibrate=1)
            part = estimate.get("calibration")
            assert part is not None and part["rows"] == 1
            run = await client.enqueue("hw-gate", gated, payload=PAYLOAD, calibrate=[gated[0]],
                                       release_when={"reviewed": 1})
            run_id = run.answer.get("run_id")
            assert run_id is not None
            assert (await client.status(gated[1])).get("waiting_for") == "calibration"
            assert (await client.release(run_id, actor="teacher-7"))["released"] == 2

            with pytest.raises(MarkingError) as unknown:
                await client.enqueue("hw-py", [uuid.uuid4()])
            assert (unknown.value.status, unknown.value.code) == (422, "invalid")
            assert "unknown_ids" in unknown.value.body
            with pytest.raises(MarkingError) as conflict:
                await client.revert(q1)
            assert conflict.value.status == 409
            # One row from the outside: its detail; a cancel or a fail of an ended row.
            row = await client.row(q0)
            assert row["status"] == "completed" and row["result"] is not None
            assert row["history"][0]["kind"] == "dispatch" and ANSWER not in str(row)
            for ended in (client.cancel_row(q0), client.fail_row(q0, "duplicate")):
                with pytest.raises(MarkingError) as over:
                    await ended
                assert over.value.status == 409
        # From synchronous code (here in a thread: this test's loop is running).
        sync = await asyncio.to_thread(call, app.url, app.secret,
                                       lambda queue: queue.progress("hw-py"))
        assert sync["completed"] == 3
        async with AsyncMarkingClient(app.url, "wrong-secret") as stranger:
            with pytest.raises(MarkingError) as denied:
                await stranger.progress("hw-py")
            assert (denied.value.status, denied.value.code) == (401, "unauthorized")
            with pytest.raises(MarkingError):
                await anext(aiter(stranger.events("hw-py")))


async def test_a_dropped_stream_resumes_without_losing_or_repeating_events(
    db_url: str, conn: asyncpg.Connection
):
    await conn.execute("UPDATE ai_queue_control SET paused = true")
    first = await add_submissions(conn, 3, "hw-drop", ANSWER)
    second = await add_submissions(conn, 3, "hw-drop", ANSWER)
    with api_server(db_url, stream_seconds=2.0) as app:
        # The proxy forwards bytes to the app: a way to cut a live connection.
        proxy = FaultProxy(f"postgresql://x@127.0.0.1:{app.app.port}/x")
        try:
            async with AsyncMarkingClient(app.url, app.secret) as direct, \
                    AsyncMarkingClient(f"http://127.0.0.1:{proxy.port}", app.secret) as viewer:
                seen: list[MarkingEvent] = []
                events = viewer.events("hw-drop", last_event_id=FROM_START, read_timeout=3.0)
                watcher = asyncio.create_task(collect(events, seen, done("hw-drop", 3)))
                await direct.enqueue("hw-drop", first, payload=PAYLOAD)
                await wait_for(lambda: len(seen) >= 3)
                assert proxy.cut() >= 1  # the connection dies mid-stream (a reset)
                # Changes while the viewer is away.
                await direct.enqueue("hw-drop", second, payload=PAYLOAD)
                await wait_for(lambda: len(seen) >= 6)
                assert proxy.silent_drop() >= 1  # now it goes quiet: no reset, no bytes
                await direct.cancel("hw-drop")
                await conn.execute("UPDATE ai_queue_control SET paused = false")
                await direct.enqueue("hw-drop", first, payload=PAYLOAD)  # now marked
                await asyncio.wait_for(watcher, 90)
        finally:
            proxy.close()
    assert proxy.connections >= 3, "the viewer reconnected after the cut and the drop"
    got = [(e.id, e.queue_id, e.status) for e in seen]
    assert len(set(got)) == len(got), "no event twice"
    expected = await feed(conn, "hw-drop")
    assert got == expected[:len(got)], "every event, in order"
    assert [s for *_, s in got].count("cancelled") == 6


async def wait_for(condition: Any, timeout: float = 30.0) -> None:
    async with asyncio.timeout(timeout):
        while not condition():
            await asyncio.sleep(0.05)


async def test_the_readme_happy_path_marks_every_submission(db_url: str,
                                                            conn: asyncpg.Connection):
    ids = [str(i) for i in await add_submissions(conn, 3, "hw-happy", ANSWER)]
    example = load_example("happy_path.py")
    with api_server(db_url) as app:
        progress = await asyncio.wait_for(
            example.mark_all(app.url, app.secret, "hw-happy", ids, PAYLOAD), 60)
        again = await asyncio.wait_for(
            example.mark_all(app.url, app.secret, "hw-happy", ids, PAYLOAD), 30)
    assert (progress["total"], progress["completed"]) == (3, 3)
    assert (again["total"], again["completed"]) == (3, 3)
    # The same key: the second call enqueued nothing; the first run's marks were accepted.
    rows = await conn.fetchval(
        "SELECT count(*) FROM ai_marking_queue WHERE assignment_id = 'hw-happy'")
    accepted = await conn.fetchval("SELECT count(*) FROM ai_marking_results r JOIN "
                                   "ai_marking_queue q USING (queue_id) WHERE "
                                   "q.assignment_id = 'hw-happy' AND r.review = 'accepted'")
    assert (rows, accepted) == (3, 3)


def load_example(name: str) -> Any:
    path = ROOT / "clients" / "python" / "examples" / name
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def test_enqueue_sends_the_lane_and_its_deadline(db_url: str, conn: asyncpg.Connection):
    ids = await add_submissions(conn, 2, "hw-lane", ANSWER)
    due = datetime.now(UTC) + timedelta(hours=20)
    with api_server(db_url) as app:
        async with AsyncMarkingClient(app.url, app.secret) as client:
            # This deployment's pool has no batch API: the server names what is missing.
            with pytest.raises(MarkingError) as batch:
                await client.enqueue("hw-lane", ids, lane="batch", deadline=due)
            assert batch.value.status == 422 and "batch API" in batch.value.detail
            # A deadline is the batch lane's only: sent with "live", it is refused by name.
            with pytest.raises(MarkingError) as live_with_due:
                await client.enqueue("hw-lane", ids, lane="live", deadline=due.isoformat())
            assert live_with_due.value.status == 422
            assert "deadline" in live_with_due.value.detail
            done = await client.enqueue("hw-lane", ids, lane="live", payload=PAYLOAD)
            assert done.answer["enqueued"] == 2
    lanes = await conn.fetch("SELECT DISTINCT lane FROM ai_marking_queue "
                             "WHERE assignment_id = 'hw-lane'")
    assert [r["lane"] for r in lanes] == ["live"]


async def test_a_changed_rubric_re_marks_only_the_unreviewed_answers(
        db_url: str, conn: asyncpg.Connection):
    ids = await add_submissions(conn, 3, "hw-re", ANSWER)
    edited = {**PAYLOAD, "rubric": "Names light; Names water; Names glucose"}
    with api_server(db_url) as app:
        async with AsyncMarkingClient(app.url, app.secret) as client:
            first = await client.enqueue("hw-re", ids, payload=PAYLOAD)
            await wait_for_run(client, "hw-re", 3)
            await client.accept(first.answer["queue_ids"][0], actor="teacher-7")
            estimate = await client.remark("hw-re", edited, dry_run=True)
            assert (estimate["enqueued"], estimate["reviewed_kept"]) == (2, 1)
            assert "estimated_tokens" in estimate
            done = await client.remark("hw-re", edited, actor="teacher-7")
            assert (done["enqueued"], done["reviewed_kept"], done["unchanged"]) == (2, 1, 0)
            await wait_for_run(client, "hw-re", 2)
            versions = [(await client.results(i))["items"][0].get("payload_version")
                        for i in ids]
    assert versions[0] != versions[1] == versions[2] is not None


async def wait_for_run(client: AsyncMarkingClient, assignment_id: str, n: int) -> None:
    async with asyncio.timeout(60):
        while (await client.progress(assignment_id))["completed"] < n:
            await asyncio.sleep(0.1)
