"""Each row is recovered by its kind's platform: a kind of aiqueue.toml
that dispatches to DigitalOcean beside an http default is asked about at DigitalOcean,
with DigitalOcean's thresholds, and the default kind's rows keep the http ones.

Real PostgreSQL, the Functions API via respx; time moves by shifting timestamps.
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from collections.abc import AsyncIterator, Iterator

import asyncpg
import pytest
import respx

from aiqueue.queue import recovery
from aiqueue.runtime import Runtime
from aiqueue.settings.kinds import DEFAULT_POOL, Kind, QueueConfig
from aiqueue.settings.targets import DoTarget
from tests.conftest import FN, add_submissions, enqueued
from tests.integration.recovery_kit import (
    DO_HOST,
    HEARTBEAT,
    NS,
    STUCK,
    Platform,
    age,
    completed_item,
    history,
    row,
    runtime,
    step,
)

LIMIT = 300.0


@pytest.fixture
def mock() -> Iterator[respx.MockRouter]:
    with respx.mock(assert_all_called=False) as router:
        yield router


@pytest.fixture
async def rt(db_url: str) -> AsyncIterator[Runtime]:
    """The default kind `mark` dispatches by http; the kind `code` to DigitalOcean."""
    target = DoTarget(DO_HOST, NS, "ai-mark", "mark", "user", "key", LIMIT)
    code = Kind("code", DEFAULT_POOL, dispatch="digitalocean",
                       digitalocean=target)
    made = await runtime(db_url)
    await made.close()
    settings = dataclasses.replace(made.settings, max_in_flight=2,
                                   queue_file=QueueConfig({}, {"code": code}))
    out = await Runtime.create(settings, db_url)
    yield out
    await out.close()


async def start(rt: Runtime, conn: asyncpg.Connection, kind: str) -> uuid.UUID:
    ids = await add_submissions(conn, 1, f"hw-{kind}")
    (queue_id,) = enqueued(await rt.store.enqueue(ids, f"hw-{kind}", 0, {}, kind=kind)).queue_ids
    assert (await step(rt)).dispatched
    return queue_id


def test_the_kinds_are_grouped_by_their_platform(rt: Runtime) -> None:
    groups = recovery.platforms(rt)
    assert sorted((p.target.dispatch, p.kinds, p.others) for p in groups) == [
        ("digitalocean", ("code",), ()), ("http", None, ("code",))]


async def test_a_do_kinds_lost_callback_is_asked_about_at_digitalocean(
        rt: Runtime, conn: asyncpg.Connection, mock: respx.MockRouter) -> None:
    platform = Platform(mock)
    http = mock.post(FN).respond(202)
    code = await start(rt, conn, "code")
    mark = await start(rt, conn, "mark")
    assert len(platform.dispatches) == 1 and http.call_count == 1  # each to its own platform
    (sent,) = platform.dispatches
    platform.finish(1, success=True, result={"callback": [completed_item(sent)]})
    # Quiet for longer than the heartbeat timeout: DigitalOcean is asked (the
    # default http platform would wait QUEUE_STUCK_AFTER_SECONDS and dispatch again).
    await age(conn, HEARTBEAT + 5)
    assert (await step(rt)).recovered == 1 and platform.looks == 1
    r = await row(conn, code)
    assert (r["status"], r["applied"], json.loads(r["result"])["score"]) == ("completed", 1, 4)
    assert len(platform.dispatches) == 1  # nothing paid twice
    # The http row keeps the http thresholds: still in flight, never asked about.
    assert (await row(conn, mark))["status"] == "processing"
    await age(conn, STUCK)
    assert (await step(rt)).recovered == 1
    assert (await history(conn, mark))[0][1:3] == ("stuck", "stuck_no_result")
    assert platform.looks == 1
