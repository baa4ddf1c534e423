"""/ai-queue through the app on a real PostgreSQL: login, stats, table, history, every action."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import httpx
import pytest
import respx

from aiqueue.db.store import Store, connect_pool
from aiqueue.web.app import create_app
from aiqueue.web.views import fmt_duration
from tests.conftest import SECRET, add_submissions, make_settings
from tests.integration.plan_kit import reads_pages

BASE = "http://app.test"
FUNCTION = "http://function.test/mark"


@pytest.fixture
def fn() -> Iterator[respx.MockRouter]:
    """The marking function and the self-chain, mocked; any other request fails the test."""
    with respx.mock(assert_all_called=False) as mock:
        mock.post(FUNCTION, name="function").respond(202, json={"accepted": True})
        mock.post(f"{BASE}/api/marking/process-queue", name="chain").respond(200, json={})
        yield mock


@pytest.fixture
async def client(db_url: str, fn: respx.MockRouter) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(make_settings(db_url, max_in_flight=1))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url=BASE) as c:
        yield c
    await app.state.aiqueue.close()


async def login(client: httpx.AsyncClient) -> str:
    """Sign in; the CSRF token the page hands out."""
    r = await client.post("/ai-queue/login", data={"password": SECRET, "next": "/ai-queue"})
    assert r.status_code == 303 and r.headers["location"] == "/ai-queue"
    page = await client.get("/ai-queue")
    assert page.status_code == 200
    return csrf_of(page.text)


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf_token" value="([^"]+)"', html)
    assert found, "the page carries a CSRF token"
    return found.group(1)


async def seed(
    conn: asyncpg.Connection,
    n: int,
    status: str,
    *,
    assignment: str = "hw-1",
    attempts: int = 0,
    created: datetime | None = None,
    started: datetime | None = None,
    finished: datetime | None = None,
    last_error: str | None = None,
    content: str = "answer",
) -> list[uuid.UUID]:
    """n queue rows in a given state (with their submissions); newest row last."""
    now = await conn.fetchval("SELECT now()")
    created = created or now - timedelta(minutes=5)
    subs = await add_submissions(conn, n, assignment, content)
    ids = []
    for k, sub in enumerate(subs):
        ids.append(await conn.fetchval(
            """INSERT INTO ai_marking_queue (submission_id, assignment_id, run_id, status,
                   attempts, dispatch_seq, created_at, started_at, finished_at, last_error)
               VALUES ($1, $2, gen_random_uuid(), $3, $4, $4, $5, $6, $7, $8)
               RETURNING queue_id""",
            sub, assignment, status, attempts, created + timedelta(milliseconds=k), started,
            finished, last_error))
        # A row in flight holds a slot (ai_marking_claimed).
        await conn.execute(
            "INSERT INTO ai_marking_claimed (queue_id, dispatch_seq, pool, kind) "
            "SELECT queue_id, dispatch_seq, pool, kind FROM ai_marking_queue "
            "WHERE queue_id = $1 AND status = 'processing'", ids[-1])
    return ids


async def snapshot(conn: asyncpg.Connection) -> list[Any]:
    """Everything an action could change."""
    rows = await conn.fetch("SELECT queue_id, status, attempts, run_after, updated_at, last_error,"
                            " finished_at FROM ai_marking_queue ORDER BY queue_id")
    history = await conn.fetch("SELECT * FROM ai_marking_attempts ORDER BY id")
    control = await conn.fetchrow("SELECT paused, paused_by, paused_at FROM ai_queue_control")
    return [[tuple(r) for r in rows], [tuple(r) for r in history], tuple(control)]


async def status_of(conn: asyncpg.Connection, queue_id: uuid.UUID) -> str:
    return str(await conn.fetchval(
        "SELECT status FROM ai_marking_queue WHERE queue_id = $1", queue_id))


async def actions_of(conn: asyncpg.Connection, queue_id: uuid.UUID) -> list[tuple[str, str]]:
    rows = await conn.fetch("SELECT outcome, actor FROM ai_marking_attempts"
                            " WHERE queue_id = $1 AND kind = 'action' ORDER BY id", queue_id)
    return [(r["outcome"], r["actor"]) for r in rows]


async def block_dispatch(conn: asyncpg.Connection) -> uuid.UUID:
    """One row in flight at cap 1: the gate stays closed, so kicks dispatch nothing."""
    (blocker,) = await seed(conn, 1, "processing", assignment="hw-busy", attempts=1,
                            started=await conn.fetchval("SELECT now()"))
    return blocker


# -- no page without login; no change without the CSRF token ------------------


async def test_no_page_is_reachable_without_login(client: httpx.AsyncClient,
                                                  conn: asyncpg.Connection):
    (qid,) = await seed(conn, 1, "failed", attempts=3)
    for path in ("/ai-queue", "/ai-queue?status=failed", "/ai-queue/fragment",
                 f"/ai-queue/rows/{qid}"):
        r = await client.get(path)
        assert r.status_code == 303, path
        assert r.headers["location"].startswith("/ai-queue/login?next=/ai-queue"), path
    client.cookies.set("aiqueue_session", "forged.cookie.value")
    r = await client.get("/ai-queue")
    assert r.status_code == 303 and "login" in r.headers["location"]


ACTIONS = [
    ("/ai-queue/rows/{failed}/retry", {}),
    ("/ai-queue/rows/{pending}/cancel", {}),
    ("/ai-queue/retry-failed", {"assignment_id": ""}),
    ("/ai-queue/cancel-pending", {"assignment_id": "hw-1"}),
    ("/ai-queue/pause", {}),
    ("/ai-queue/resume", {}),
]


async def seed_one_of_each(conn: asyncpg.Connection) -> dict[str, uuid.UUID]:
    (failed,) = await seed(conn, 1, "failed", attempts=3, last_error="http_500")
    (pending,) = await seed(conn, 1, "pending")
    return {"failed": failed, "pending": pending}


async def test_actions_without_a_session_change_nothing(
    client: httpx.AsyncClient, conn: asyncpg.Connection, fn: respx.MockRouter
):
    ids = await seed_one_of_each(conn)
    before = await snapshot(conn)
    for path, form in ACTIONS:
        r = await client.post(path.format(**ids), data=form)
        assert r.status_code == 303 and r.headers["location"].startswith("/ai-queue/login")
    assert await snapshot(conn) == before
    assert not fn["function"].called


async def test_a_form_without_its_csrf_token_changes_nothing(
    client: httpx.AsyncClient, conn: asyncpg.Connection, fn: respx.MockRouter
):
    ids = await seed_one_of_each(conn)
    await conn.execute("UPDATE ai_queue_control SET paused = true, paused_by = 'x'")
    token = await login(client)
    other_sessions_token = "A" * len(token)
    before = await snapshot(conn)
    for path, form in ACTIONS:
        for bad in ({}, {"csrf_token": ""}, {"csrf_token": other_sessions_token}):
            r = await client.post(path.format(**ids), data={**form, **bad})
            assert r.status_code == 403, (path, bad)
            assert "text/html" in r.headers["content-type"]
            assert "Nothing was changed" in r.text
    assert await snapshot(conn) == before
    assert not fn["function"].called


# -- actions ---------------------------------------------------------------------


async def test_retry_one_failed_row_records_the_operator_and_kicks_the_chain(
    client: httpx.AsyncClient, conn: asyncpg.Connection, fn: respx.MockRouter
):
    (qid,) = await seed(conn, 1, "failed", attempts=3, last_error="http_500")
    token = await login(client)
    r = await client.post(f"/ai-queue/rows/{qid}/retry",
                          data={"csrf_token": token, "back": "/ai-queue?status=failed"})
    assert r.status_code == 303
    assert r.headers["location"].startswith("/ai-queue?status=failed&notice=retried")
    # The kick ran after the answer: the fresh row was claimed and dispatched at once.
    assert fn["function"].call_count == 1
    sent = json.loads(fn["function"].calls[0].request.content)
    assert sent["queue_id"] == str(qid) and sent["attempt"] == 1
    row = await conn.fetchrow("SELECT status, attempts, last_error FROM ai_marking_queue"
                              " WHERE queue_id = $1", qid)
    assert (row["status"], row["attempts"], row["last_error"]) == ("processing", 1, None)
    assert await actions_of(conn, qid) == [("retry", "admin")]
    page = await client.get(r.headers["location"])
    assert "is pending again" in page.text


async def test_retry_of_a_row_that_is_not_failed_changes_nothing(
    client: httpx.AsyncClient, conn: asyncpg.Connection
):
    await block_dispatch(conn)
    (qid,) = await seed(conn, 1, "pending")
    token = await login(client)
    before = await snapshot(conn)
    r = await client.post(f"/ai-queue/rows/{qid}/retry", data={"csrf_token": token})
    assert r.status_code == 303 and "notice=not_failed" in r.headers["location"]
    assert await snapshot(conn) == before
    r = await client.post(f"/ai-queue/rows/{uuid.uuid4()}/retry", data={"csrf_token": token})
    assert "notice=missing" in r.headers["location"]


async def test_retry_all_failed_per_assignment_then_everywhere(
    client: httpx.AsyncClient, conn: asyncpg.Connection, fn: respx.MockRouter
):
    await block_dispatch(conn)
    hw1 = await seed(conn, 3, "failed", assignment="hw-1", attempts=3, last_error="http_500")
    hw2 = await seed(conn, 2, "failed", assignment="hw-2", attempts=3, last_error="timeout")
    token = await login(client)
    r = await client.post("/ai-queue/retry-failed",
                          data={"csrf_token": token, "assignment_id": "hw-1"})
    assert r.status_code == 303 and "notice=retried_all&n=3" in r.headers["location"]
    assert [await status_of(conn, q) for q in hw1] == ["pending"] * 3
    assert [await status_of(conn, q) for q in hw2] == ["failed"] * 2
    for q in hw1:
        assert await actions_of(conn, q) == [("retry", "admin")]
    assert "3 failed row(s) are pending again" in (await client.get(r.headers["location"])).text
    r = await client.post("/ai-queue/retry-failed", data={"csrf_token": token, "assignment_id": ""})
    assert "n=2" in r.headers["location"]
    assert [await status_of(conn, q) for q in hw2] == ["pending"] * 2
    assert await conn.fetchval("SELECT sum(attempts) FROM ai_marking_queue"
                               " WHERE status = 'pending'") == 0
    assert not fn["function"].called  # the gate was closed: the kicks found no free slot


async def test_cancel_one_pending_row(client: httpx.AsyncClient, conn: asyncpg.Connection):
    await block_dispatch(conn)
    pending = await seed(conn, 2, "pending")
    (failed,) = await seed(conn, 1, "failed", attempts=3)
    token = await login(client)
    r = await client.post(f"/ai-queue/rows/{pending[0]}/cancel",
                          data={"csrf_token": token, "back": f"/ai-queue/rows/{pending[0]}"})
    assert r.status_code == 303
    assert r.headers["location"].startswith(f"/ai-queue/rows/{pending[0]}?notice=cancelled")
    assert await status_of(conn, pending[0]) == "cancelled"
    assert await status_of(conn, pending[1]) == "pending"
    assert await actions_of(conn, pending[0]) == [("cancel", "admin")]
    r = await client.post(f"/ai-queue/rows/{failed}/cancel", data={"csrf_token": token})
    assert "notice=not_pending" in r.headers["location"]
    assert await status_of(conn, failed) == "failed"


async def test_cancel_an_assignments_pending_rows(
    client: httpx.AsyncClient, conn: asyncpg.Connection
):
    await block_dispatch(conn)
    hw1 = await seed(conn, 3, "pending", assignment="hw-1")
    (hw1_failed,) = await seed(conn, 1, "failed", assignment="hw-1", attempts=3)
    (hw2,) = await seed(conn, 1, "pending", assignment="hw-2")
    token = await login(client)
    before = await snapshot(conn)
    r = await client.post("/ai-queue/cancel-pending", data={"csrf_token": token})
    assert "notice=missing_assignment" in r.headers["location"]
    assert await snapshot(conn) == before
    r = await client.post("/ai-queue/cancel-pending",
                          data={"csrf_token": token, "assignment_id": "hw-1"})
    assert "notice=cancelled_all&n=3" in r.headers["location"]
    assert [await status_of(conn, q) for q in hw1] == ["cancelled"] * 3
    assert await status_of(conn, hw1_failed) == "failed"
    assert await status_of(conn, hw2) == "pending"
    assert [await actions_of(conn, q) for q in hw1] == [[("cancel", "admin")]] * 3


async def test_pause_and_resume_dispatch(
    client: httpx.AsyncClient, conn: asyncpg.Connection, fn: respx.MockRouter
):
    token = await login(client)
    r = await client.post("/ai-queue/pause", data={"csrf_token": token})
    assert r.status_code == 303 and "notice=paused" in r.headers["location"]
    control = await conn.fetchrow("SELECT paused, paused_by, paused_at FROM ai_queue_control")
    assert control["paused"] is True and control["paused_by"] == "admin"
    assert control["paused_at"] is not None
    (qid,) = await seed(conn, 1, "pending")
    page = await client.get("/ai-queue")
    assert 'data-dispatch="paused"' in page.text and "Dispatch paused by admin" in page.text
    assert 'action="/ai-queue/resume"' in page.text
    await client.post(f"/ai-queue/rows/{uuid.uuid4()}/retry", data={"csrf_token": token})
    assert not fn["function"].called  # a kick while paused dispatches nothing
    r = await client.post("/ai-queue/resume", data={"csrf_token": token})
    assert "notice=resumed" in r.headers["location"]
    assert await conn.fetchval("SELECT paused FROM ai_queue_control") is False
    assert fn["function"].call_count == 1  # resume kicked the chain
    assert await status_of(conn, qid) == "processing"
    page = await client.get("/ai-queue")
    assert 'data-dispatch="running"' in page.text and "1 / 1 in flight" in page.text


# -- stats -------------------------------------------------------------------------


def percentile_cont(values: list[float], q: float) -> float:
    s = sorted(values)
    pos = q * (len(s) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


@pytest.fixture
async def clocked(db_url: str, fn: respx.MockRouter) -> AsyncIterator[
        tuple[httpx.AsyncClient, list[datetime]]]:
    """A client of an app whose stats are for the moment the test puts in the list."""
    at: list[datetime] = []
    app = create_app(make_settings(db_url, max_in_flight=1), clock=lambda: at[0])
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE) as c:
        yield c, at
    await app.state.aiqueue.close()


@pytest.mark.fresh_db
@pytest.mark.parametrize("moment", ["now", "the UTC day's last second"])
async def test_stats_match_sql_on_a_seeded_table_today_in_utc(
    db_url: str, clocked: tuple[httpx.AsyncClient, list[datetime]], conn: asyncpg.Connection,
    moment: str,
):
    # The database's own zone is far from UTC (+14): "today" must still be the UTC day.
    name = await conn.fetchval("SELECT current_database()")
    await conn.execute(f"ALTER DATABASE {name} SET timezone TO 'Pacific/Kiritimati'")
    # The stats are for an injected moment, however long the test takes: right
    # now, or the last second before UTC midnight (when a clock that moved on
    # would count "today" as yesterday).
    client, at = clocked
    now = await conn.fetchval("SELECT now()")
    utc_midnight = now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    if moment != "now":
        now = utc_midnight + timedelta(days=1, seconds=-1)
    at.append(now)
    # Kiritimati's midnight, the one a local-time "today" would use.
    local_midnight = utc_midnight - timedelta(hours=14)
    if local_midnight + timedelta(days=1) <= now:
        local_midnight += timedelta(days=1)
    between = utc_midnight + (local_midnight - utc_midnight) / 2  # today in one, not the other
    today = now - (now - max(utc_midnight, local_midnight)) / 2  # today in both
    yesterday = utc_midnight - timedelta(seconds=30)

    durations = [float(d) for d in range(1, 21)]
    for d in durations:
        await seed(conn, 1, "completed", attempts=1, started=today - timedelta(seconds=d),
                   finished=today)
    await seed(conn, 1, "completed", attempts=1, started=between - timedelta(seconds=40),
               finished=between)
    await seed(conn, 2, "completed", attempts=1, started=yesterday - timedelta(seconds=100),
               finished=yesterday)
    await seed(conn, 3, "completed", attempts=1, started=now - timedelta(days=2, seconds=500),
               finished=now - timedelta(days=2))
    await seed(conn, 4, "failed", attempts=3, started=today, finished=today)
    await seed(conn, 1, "failed", attempts=3, started=between, finished=between)
    await seed(conn, 2, "failed", attempts=3, started=yesterday, finished=yesterday)
    await seed(conn, 5, "pending", created=now - timedelta(minutes=42))
    await seed(conn, 1, "processing", attempts=1, started=now - timedelta(seconds=5))
    await seed(conn, 2, "cancelled")

    # Timings cover completions that finished within the 24 h before the moment.
    finished = [*((today, d) for d in durations), (between, 40.0), (yesterday, 100.0),
                (yesterday, 100.0), (now - timedelta(days=2), 500.0)]
    in_window = [d for f, d in finished if f >= now - timedelta(hours=24)]
    assert len(in_window) == (20 + 1 + 2 if moment == "now" else 20 + 1)
    between_today = between >= utc_midnight
    expected = {
        "pending": 5, "processing": 1, "completed": 26, "failed": 7, "cancelled": 2,
        "completed_today": 20 + between_today,
        "failed_today": 4 + between_today,
    }
    for status in ("pending", "processing", "completed", "failed", "cancelled"):
        assert await conn.fetchval(
            "SELECT count(*) FROM ai_marking_queue WHERE status = $1", status
        ) == expected[status]
    for status in ("completed", "failed"):
        assert await conn.fetchval(
            "SELECT count(*) FROM ai_marking_queue WHERE status = $1 AND finished_at >= $2",
            status, utc_midnight) == expected[f"{status}_today"]

    r = await client.get("/api/marking/stats", headers={"authorization": f"Bearer {SECRET}"})
    stats = r.json()
    assert {k: stats[k] for k in expected} == expected
    assert stats["avg_processing_seconds"] == pytest.approx(
        sum(in_window) / len(in_window), abs=1e-3)
    assert stats["p95_processing_seconds"] == pytest.approx(
        percentile_cont(in_window, 0.95), abs=1e-3)
    assert stats["oldest_pending_seconds"] == pytest.approx(42 * 60, abs=30)

    # The page shows the same figures (it calls the same service code).
    await login(client)
    html = (await client.get("/ai-queue")).text

    def shown(name: str) -> str:
        found = re.search(rf'data-stat="{name}">([^<]*)<', html)
        assert found, name
        return found.group(1)

    assert shown("pending") == "5"
    assert shown("in_flight") == "1 / 1 in flight"
    assert shown("completed_today") == str(expected["completed_today"])
    assert shown("failed_today") == str(expected["failed_today"])
    assert shown("oldest_pending").startswith("42m")
    assert shown("p95") == fmt_duration(percentile_cont(in_window, 0.95))
    assert shown("avg") == fmt_duration(sum(in_window) / len(in_window))


async def test_timings_cover_the_latest_20000_completions_of_the_day(
    client: httpx.AsyncClient, conn: asyncpg.Connection
):
    # 20,000 recent 2-second jobs, and 500 slow ones finished earlier the same day:
    # the p95 sort is bounded to the latest 20,000, on the page and in the JSON alike.
    await conn.execute(
        """INSERT INTO submissions (id, assignment_id, content)
           SELECT gen_random_uuid(), 'hw-big', 'x' FROM generate_series(1, 20500);
           INSERT INTO ai_marking_queue (submission_id, assignment_id, run_id, status, attempts,
               started_at, finished_at)
           SELECT id, assignment_id, gen_random_uuid(), 'completed', 1, f - d, f
           FROM (SELECT id, assignment_id, row_number() OVER (ORDER BY id) AS g
                 FROM submissions) s,
                LATERAL (SELECT CASE WHEN g <= 500 THEN now() - interval '3 hours'
                                     ELSE now() - g * interval '10 ms' END AS f,
                                CASE WHEN g <= 500 THEN interval '1000 s'
                                     ELSE interval '2 s' END AS d) x""")
    r = await client.get("/api/marking/stats", headers={"authorization": f"Bearer {SECRET}"})
    stats = r.json()
    assert stats["completed_today"] in (20500, 20000)  # (the slow ones may be yesterday)
    assert stats["p95_processing_seconds"] == pytest.approx(2.0)
    assert stats["avg_processing_seconds"] == pytest.approx(2.0)
    await login(client)
    html = (await client.get("/ai-queue")).text
    assert 'data-stat="p95">2.0 s<' in html and 'data-stat="avg">2.0 s<' in html


async def test_throughput_counts_finished_rows_per_five_minutes(
    db_url: str, client: httpx.AsyncClient, conn: asyncpg.Connection
):
    now = await conn.fetchval("SELECT now()")
    at = now - timedelta(minutes=7)
    await seed(conn, 3, "completed", attempts=1, started=at - timedelta(seconds=2), finished=at)
    await seed(conn, 1, "failed", attempts=3, started=at, finished=at)
    await seed(conn, 5, "completed", attempts=1, started=now - timedelta(hours=25),
               finished=now - timedelta(hours=25))
    store = Store(await connect_pool(db_url, max_size=2))
    try:
        buckets = await store.monitor_throughput(86400, 300)
    finally:
        await store.close()
    assert len(buckets) == 288
    starts = [b for b, _, _ in buckets]
    assert starts == sorted(starts) and all(b.timestamp() % 300 == 0 for b in starts)
    assert starts[-1] <= now < starts[-1] + timedelta(minutes=5)
    hit = [(c, f) for b, c, f in buckets if b <= at < b + timedelta(minutes=5)]
    assert hit == [(3, 1)]
    assert sum(c for _, c, _ in buckets) == 3 and sum(f for _, _, f in buckets) == 1
    await login(client)
    for html in ((await client.get("/ai-queue")).text,
                 (await client.get("/ai-queue/fragment?part=chart")).text):
        assert "<svg" in html and ": 3 completed, 1 failed</title>" in html
        assert '<span class="c">3 completed</span>' in html
        assert re.search(r'<path class="c" d="M[\d.]+ [\d.]+h', html)
    live = (await client.get("/ai-queue/fragment")).text
    assert "<svg" not in live  # the 4-second poll does not recount the day


# -- the table, paging, the row detail -----------------------------------------------


def queue_ids(html: str) -> list[str]:
    return re.findall(r'<tr data-queue-id="([^"]+)"', html)


def link(html: str, rel: str) -> str | None:
    found = re.search(rf'<a href="([^"]+)" rel="{rel}">', html)
    return found.group(1).replace("&amp;", "&") if found else None


async def test_filters_and_keyset_paging_newest_first(
    client: httpx.AsyncClient, conn: asyncpg.Connection
):
    await block_dispatch(conn)
    now = await conn.fetchval("SELECT now()")
    for k in range(25):
        await seed(conn, 1, "failed" if k % 3 == 0 else "pending", assignment="hw-page",
                   attempts=3 if k % 3 == 0 else 0, created=now - timedelta(minutes=30 - k))
    await seed(conn, 2, "failed", assignment="hw-other", attempts=3)
    expected = [str(r["queue_id"]) for r in await conn.fetch(
        "SELECT queue_id FROM ai_marking_queue WHERE assignment_id = 'hw-page'"
        " ORDER BY created_at DESC, queue_id DESC")]
    await login(client)

    seen, pages = [], []
    url: str | None = "/ai-queue?assignment_id=hw-page&limit=10"
    while url:
        html = (await client.get(url)).text
        pages.append(url)
        seen += queue_ids(html)
        url = link(html, "next")
    assert seen == expected and len(pages) == 3
    last = (await client.get(pages[-1])).text
    newer = link(last, "prev")
    assert newer is not None and "before=" in newer
    assert queue_ids((await client.get(newer)).text) == expected[10:20]
    first = (await client.get(pages[0])).text
    assert link(first, "prev") is None and link(first, "first") is None

    failed = (await client.get("/ai-queue?status=failed&assignment_id=hw-page")).text
    assert queue_ids(failed) == [q for q in expected if q in set(queue_ids(failed))]
    assert len(queue_ids(failed)) == 9
    assert set(re.findall(r'data-status="([a-z]+)"', failed)) == {"failed"}
    assert failed.count('action="/ai-queue/rows/') == 9  # a Retry form per failed row
    assert len(queue_ids((await client.get("/ai-queue?status=failed")).text)) == 11


async def test_the_table_shows_and_filters_by_group(
    client: httpx.AsyncClient, conn: asyncpg.Connection
):
    await block_dispatch(conn)
    await seed(conn, 3, "failed", assignment="hw-g", attempts=3)
    await conn.execute("UPDATE ai_marking_queue SET group_key = 'teacher-x' WHERE queue_id IN "
                       "(SELECT queue_id FROM ai_marking_queue WHERE assignment_id = 'hw-g' "
                       "LIMIT 2)")
    await login(client)
    html = (await client.get("/ai-queue?group=teacher-x")).text
    assert len(queue_ids(html)) == 2 and "<td>teacher-x</td>" in html
    html = (await client.get("/ai-queue?group=hw-g")).text
    assert len(queue_ids(html)) == 1 and "<td>hw-g</td>" in html
    assert 'id="f-group"' in html
    assert (await client.get("/ai-queue?group=" + "x" * 201)).status_code == 400


async def test_row_detail_shows_the_attempt_history(
    client: httpx.AsyncClient, conn: asyncpg.Connection
):
    (qid,) = await seed(conn, 1, "failed", attempts=2, last_error="function:model_timeout")
    await conn.execute(
        """INSERT INTO ai_marking_attempts (queue_id, dispatch_seq, attempt, kind, started_at,
               ended_at, outcome, error, usage, actor) VALUES
           ($1, 1, 1, 'dispatch', now() - interval '60 s', now() - interval '48 s',
            'dispatch_error', 'http_503', NULL, NULL),
           ($1, 2, 2, 'dispatch', now() - interval '30 s', now() - interval '27.5 s',
            'callback_failed', 'function:model_timeout',
            '{"model": "llama3.1:8b", "prompt_tokens": 812, "completion_tokens": 164}', NULL),
           ($1, 0, 0, 'action', now(), now(), 'retry', NULL, NULL, 'admin')""", qid)
    await login(client)
    r = await client.get(f"/ai-queue/rows/{qid}")
    assert r.status_code == 200
    rows = re.findall(r'<tr data-kind="(\w+)">(.*?)</tr>', r.text, re.S)
    assert [kind for kind, _ in rows] == ["dispatch", "dispatch", "action"]
    first, second, action = (re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", body)).strip()
                             for _, body in rows)
    assert "dispatch_error" in first and "http_503" in first and "12.0 s" in first
    assert "callback_failed" in second and "function:model_timeout" in second
    assert "2.5 s" in second and "llama3.1:8b" in second and "812 + 164" in second
    assert "retry" in action and "admin" in action
    assert 'action="/ai-queue/rows/' in r.text and "/retry" in r.text
    assert (await client.get(f"/ai-queue/rows/{uuid.uuid4()}")).status_code == 404
    assert (await client.get("/ai-queue/rows/not-a-uuid")).status_code == 404


async def test_row_detail_shows_the_platforms_invocation_id(
    client: httpx.AsyncClient, conn: asyncpg.Connection, db_url: str
):
    (qid,) = await seed(conn, 1, "processing", attempts=2)
    await conn.execute(
        """INSERT INTO ai_marking_attempts (queue_id, dispatch_seq, attempt, started_at, ended_at,
               outcome, error) VALUES
           ($1, 1, 1, now() - interval '60 s', now() - interval '59 s', 'dispatch_error',
            'lambda_http_403'),
           ($1, 2, 2, now() - interval '5 s', NULL, NULL, NULL)""", qid)
    store = Store(await connect_pool(db_url))
    try:
        await store.set_dispatch_ref(qid, 2, "3f2a9c1e-0b7d-4c55-9e61-7a1b2c3d4e5f")
    finally:
        await store.close()
    # Only the dispatch it belongs to carries it.
    assert [r["dispatch_ref"] for r in await conn.fetch(
        "SELECT dispatch_ref FROM ai_marking_attempts WHERE queue_id = $1 ORDER BY id", qid)
    ] == [None, "3f2a9c1e-0b7d-4c55-9e61-7a1b2c3d4e5f"]
    await login(client)
    r = await client.get(f"/ai-queue/rows/{qid}")
    assert "Invocation id" in r.text
    first, second = re.findall(r'<tr data-kind="dispatch">(.*?)</tr>', r.text, re.S)
    assert "3f2a9c1e-0b7d-4c55-9e61-7a1b2c3d4e5f" in second
    assert "lambda_http_403" in first and '<code class="ref"></code>' in first


async def test_the_page_never_shows_submission_content_results_or_feedback(
    client: httpx.AsyncClient, conn: asyncpg.Connection
):
    await block_dispatch(conn)
    ids = []
    for status in ("pending", "completed", "failed"):
        ids += await seed(conn, 2, status, attempts=1, content="ESSAY-MARKER-7731",
                          started=await conn.fetchval("SELECT now() - interval '9 s'"),
                          finished=await conn.fetchval("SELECT now()")
                          if status != "pending" else None)
    await conn.execute(
        """UPDATE submissions SET ai_result = '{"score": 7, "feedback": "FEEDBACK-MARKER-5512"}';
           INSERT INTO ai_marking_payloads (sha256, payload)
           VALUES (sha256('marker'), '{"rubric": "RUBRIC-MARKER-9034"}');
           UPDATE ai_marking_queue SET payload_id = (SELECT id FROM ai_marking_payloads),
               progress = '{"message": "PROGRESS-MARKER-1188"}',
               usage = '{"model": "m", "note": "USAGE-MARKER-2210"}'""")
    await conn.execute(
        """INSERT INTO ai_marking_attempts (queue_id, dispatch_seq, attempt, ended_at, outcome,
               usage)
           SELECT queue_id, 1, 1, now(), 'completed',
                  '{"model": "m", "prompt_tokens": 1, "note": "USAGE-MARKER-2210"}'
           FROM ai_marking_queue""")
    await login(client)
    paths = ["/ai-queue", "/ai-queue/fragment", "/ai-queue?status=completed",
             "/ai-queue?status=failed", "/ai-queue?assignment_id=hw-1",
             *(f"/ai-queue/rows/{q}" for q in ids)]
    for path in paths:
        r = await client.get(path)
        assert r.status_code == 200, path
        assert queue_ids(r.text) or path.startswith("/ai-queue/rows/"), path
        for marker in ("ESSAY-MARKER", "FEEDBACK-MARKER", "RUBRIC-MARKER", "PROGRESS-MARKER",
                       "USAGE-MARKER", "score"):
            assert marker not in r.text, (path, marker)


async def test_fragment_answers_304_while_nothing_changed(
    client: httpx.AsyncClient, conn: asyncpg.Connection
):
    await seed(conn, 2, "failed", attempts=3, created=await conn.fetchval(
        "SELECT now() - interval '2 hours'"))
    await login(client)
    page = (await client.get("/ai-queue")).text
    found = re.search(r'data-etag="([^"]+)"', page)
    assert found
    etag = found.group(1).replace("&#34;", '"')
    r = await client.get("/ai-queue/fragment", headers={"if-none-match": etag})
    assert r.status_code == 304 and r.content == b""
    await seed(conn, 1, "failed", attempts=3)
    r = await client.get("/ai-queue/fragment", headers={"if-none-match": etag})
    assert r.status_code == 200 and r.headers["etag"] != etag
    assert len(queue_ids(r.text)) == 3 and '<section class="stats"' in r.text
    assert "<html" not in r.text  # a fragment, not a page
    # Framed, a fragment could be clicked through like the page: it says no the same way.
    for part in ("", "?part=chart"):
        r = await client.get(f"/ai-queue/fragment{part}")
        assert r.headers["x-frame-options"] == "DENY", part
        assert r.headers["x-content-type-options"] == "nosniff", part


async def test_bad_filters_get_an_error_page(client: httpx.AsyncClient):
    await login(client)
    for query in ("status=exploded", "limit=0", "limit=abc", "limit=100000"):
        r = await client.get(f"/ai-queue?{query}")
        assert r.status_code == 400, query
        assert "text/html" in r.headers["content-type"]
    garbage_cursor = await client.get("/ai-queue?after=nonsense&before=%00")
    assert garbage_cursor.status_code == 200  # a malformed cursor means the first page


async def test_assignment_suggestions_are_distinct_and_sorted(
    db_url: str, conn: asyncpg.Connection
):
    for name in ("hw-3", "hw-1", "hw-2", "hw-1"):
        await seed(conn, 2, "failed", assignment=name, attempts=3)
    store = Store(await connect_pool(db_url, max_size=2))
    try:
        assert await store.monitor_assignments(10) == ["hw-1", "hw-2", "hw-3"]
        assert await store.monitor_assignments(2) == ["hw-1", "hw-2"]
    finally:
        await store.close()


# -- query plans: the page's statements read indexes, not the table ----------------


@pytest.mark.fresh_db
async def test_page_queries_use_indexes_on_a_large_table(db_url: str, conn: asyncpg.Connection):
    await conn.execute(
        """INSERT INTO submissions (id, assignment_id, content)
           SELECT gen_random_uuid(), 'hw-' || (g % 40), 'x' FROM generate_series(1, 60000) g;
           INSERT INTO ai_marking_queue (submission_id, assignment_id, run_id, status, attempts,
               created_at, started_at, finished_at)
           SELECT s.id, s.assignment_id, gen_random_uuid(),
                  CASE WHEN g % 100 = 0 THEN 'failed' WHEN g % 50 = 1 THEN 'pending'
                       ELSE 'completed' END, 1,
                  now() - g * interval '10 s', now() - g * interval '10 s',
                  CASE WHEN g % 50 = 1 THEN NULL ELSE now() - g * interval '10 s' + interval '3 s'
                  END
           FROM (SELECT id, assignment_id, row_number() OVER () AS g FROM submissions) s""")
    await conn.execute("VACUUM ANALYZE ai_marking_queue")
    store = Store(await connect_pool(db_url, max_size=2))
    sql = store.sql
    await store.close()
    cursor = (await conn.fetchval("SELECT now() - interval '3 days'"), uuid.uuid4())
    plans = {
        "monitor_throughput": (sql["monitor_throughput"], 86400.0, 300.0),
        "list_rows(failed, deep)": (sql["list_rows"], "failed", None, *cursor, 51, 0, None,
                                    None),
        "list_rows(all, deep)": (sql["list_rows"], None, None, *cursor, 51, 0, None, None),
        "monitor_rows_newer": (sql["monitor_rows_newer"], "failed", None, *cursor, 51, None,
                               None),
        "monitor_assignments": (sql["monitor_assignments"], 500),
    }
    for name, (statement, *args) in plans.items():
        plan = json.loads(await conn.fetchval(f"EXPLAIN (FORMAT JSON) {statement}", *args))
        scans = queue_scans(plan[0]["Plan"])
        assert scans and all(s.startswith("Index") for s in scans), (name, scans)


def queue_scans(node: dict[str, Any]) -> list[str]:
    """The scan node types that read ai_marking_queue (one of its months with rows)
    anywhere in a plan."""
    record = str(node.get("Relation Name", "")).startswith("ai_marking_queue")
    own = [node["Node Type"]] if record and reads_pages(node) else []
    return own + [s for child in node.get("Plans", []) for s in queue_scans(child)]


async def test_the_page_shows_what_is_kept_counts_a_replay_first_and_exports(
    client: httpx.AsyncClient, conn: asyncpg.Connection
):
    await block_dispatch(conn)
    await seed(conn, 2, "failed", assignment="hw-k", attempts=3, last_error="timeout",
               finished=datetime.now(UTC), content="private answer")
    assert (await client.get("/ai-queue/replay-count")).status_code == 401
    assert (await client.get("/ai-queue/export.csv")).status_code == 303  # to the login
    await login(client)
    page = (await client.get("/ai-queue")).text
    assert 'id="data-kept"' in page and "QUEUE_RETAIN_ENDED_DAYS" in page and "30 days" in page
    before = await snapshot(conn)
    r = await client.get("/ai-queue/replay-count", params={"assignment_id": "hw-k"})
    assert r.json()["would_replay"] == 2 and await snapshot(conn) == before
    r = await client.get("/ai-queue/export.csv")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/csv")
    assert r.text.startswith("record,queue_id,") and "private answer" not in r.text
