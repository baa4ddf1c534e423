"""No student content anywhere it does not belong.

A whole marking flow through `python -m aiqueue serve` and a function whose
feedback quotes the answer, whose failed callbacks' error text *is* the answer,
whose 500 bodies and heartbeat messages quote it too.  Essays carry a
recognisable phrase; short answers are single code-like words (the kind of
text that looks like an error code).  Then that text must be in no log line
(serve's whole stdout/stderr), no /ai-queue page, no /metrics, no
/api/marking/* answer, and no stored last_error, attempt error or live event —
while it is, of course, in the stored result the teacher reads.
"""

from __future__ import annotations

import asyncio
import uuid

import asyncpg
import httpx
import pytest

from tests.conftest import SECRET
from tests.e2e.servers import AppProcess, Faults, FunctionHost, MarkingFunction, drain, free_port

pytestmark = pytest.mark.e2e

ESSAY = "Zephyrine-Quill-tidepool-essay"
SHORT = "quixotic-tidepool-"
NEEDLES = (ESSAY, SHORT)
AUTH = {"authorization": f"Bearer {SECRET}"}
JOBS = 24


def leaks(text: str) -> list[str]:
    return [n for n in NEEDLES if n.lower() in text.lower()]


async def test_student_text_reaches_no_log_page_metric_api_answer_or_stored_error(
    db_url: str, conn: asyncpg.Connection
) -> None:
    ids = [uuid.uuid4() for _ in range(JOBS)]
    contents = [f"In my essay {ESSAY} I argue that tidepools matter ({k})." if k % 2 else
                f"{SHORT}{k:03d}" for k in range(JOBS)]
    await conn.executemany(
        "INSERT INTO submissions (id, assignment_id, content) VALUES ($1, 'hw-nc', $2)",
        list(zip(ids, contents, strict=True)))
    fn = MarkingFunction(Faults(
        quote_content=True, error_template="{content}", failed_callback=0.35, http_500=0.1,
        long_work=0.15, long_work_seconds=0.9, heartbeat_seconds=0.3,
        work_seconds=(0.005, 0.03),
        at_least_once={"failed_callback": 1, "http_500": 2, "long_work": 3}), seed=11)
    host = FunctionHost(fn, free_port())
    host.up()
    app = AppProcess({
        "DATABASE_URL": db_url,
        "MARKING_QUEUE_SECRET": SECRET,
        "AI_MARKING_FUNCTION_URL": host.url,
        "QUEUE_MAX_IN_FLIGHT": "2",
        "QUEUE_RETRY_BASE_SECONDS": "0.1",
        "QUEUE_STUCK_AFTER_SECONDS": "3",
        "QUEUE_TICK_SECONDS": "0.5",
    }, free_port())
    texts: dict[str, str] = {}
    try:
        await asyncio.to_thread(app.start)
        async with httpx.AsyncClient(base_url=app.url, timeout=30) as client:
            r = await client.post("/api/marking/enqueue", headers=AUTH, json={
                "assignment_id": "hw-nc", "submission_ids": [str(i) for i in ids],
                "payload": {"rubric": "Mark the essay.", "max_score": 10}})
            assert r.status_code == 202, r.text
            await drain(conn)
            await asyncio.to_thread(host.wait_idle, 15)
            texts.update(await review_some(client, conn))
            texts.update(await api_answers(client, ids))
            texts.update(await monitor_pages(client, conn))
            texts["/metrics"] = (await client.get("/metrics", headers=AUTH)).text
    finally:
        await asyncio.to_thread(app.stop)
        await asyncio.to_thread(host.close)
    texts["serve's stdout and stderr"] = app.output()
    for column, sql in {
        "ai_marking_queue.last_error": "SELECT last_error FROM ai_marking_queue",
        "ai_marking_attempts.error": "SELECT error FROM ai_marking_attempts",
        "ai_marking_attempts.outcome": "SELECT outcome FROM ai_marking_attempts",
        "ai_marking_events.summary": "SELECT summary::text FROM ai_marking_events",
        "ai_marking_tally": "SELECT concat_ws(' ', outcome, error, model) FROM ai_marking_tally",
        "ai_marking_results.actor": "SELECT actor FROM ai_marking_results",
        "ai_marking_outbox.body": "SELECT body::text FROM ai_marking_outbox",
    }.items():
        texts[column] = "\n".join(str(v) for (v,) in await conn.fetch(sql))

    # The flow really carried the text where it belongs, and through every trap.
    results = "\n".join(r for (r,) in await conn.fetch(
        "SELECT ai_result::text FROM submissions WHERE ai_result IS NOT NULL"))
    assert ESSAY in results and SHORT in results, "the feedback quotes the answers"
    assert fn.record.faults["failed_callback"] and fn.record.faults["http_500"]
    assert fn.record.heartbeats, "heartbeats quoting the answer were sent"
    assert "function_failed" in texts["ai_marking_queue.last_error"] + \
        texts["ai_marking_attempts.error"], "failed callbacks were stored as a code"
    assert texts["serve's stdout and stderr"].count("\n") > JOBS, "serve logged the flow"

    found = {where: leaks(text) for where, text in texts.items() if leaks(text)}
    assert found == {}, f"student text found in: {found}"


async def api_answers(client: httpx.AsyncClient, ids: list[uuid.UUID]) -> dict[str, str]:
    out = {}
    paths = ["/api/marking/stats", "/api/marking/queue?limit=500",
             "/api/marking/queue?status=failed&limit=500",
             "/api/marking/assignments/hw-nc/progress", "/api/marking/usage?by=model",
             "/api/marking/usage?by=assignment", "/api/marking/usage?by=group"]
    paths += [f"/api/marking/submissions/{i}/status" for i in ids]
    for path in paths:
        r = await client.get(path, headers=AUTH)
        if r.status_code != 404 or "/submissions/" not in path:
            assert r.status_code in (200, 404), (path, r.status_code)
        out[path] = r.text
    r = await client.post("/api/marking/process-queue", headers=AUTH)
    out["/api/marking/process-queue"] = r.text
    out["/api/marking/events"] = events = await sse_prefix(client)
    assert not events or "event: marking" in events, "the stream replayed the run"
    return out


async def review_some(client: httpx.AsyncClient, conn: asyncpg.Connection) -> dict[str, str]:
    """Accept one result, adjust one, revert one: their answers and the pages show review
    states (the adjusted result itself is the host's to show, like the AI's)."""
    done = [q for (q,) in await conn.fetch(
        "SELECT queue_id FROM ai_marking_queue WHERE status = 'completed' ORDER BY seq LIMIT 3")]
    assert len(done) == 3
    out = {}
    for q, (action, body) in zip(done, [("accept", None), ("accept", {"result": {"score": 1}}),
                                        ("revert", None)], strict=True):
        r = await client.post(f"/api/marking/queue/{q}/{action}", json=body,
                              headers={**AUTH, "x-actor": "teacher-1"})
        assert r.status_code == 200, r.text
        out[f"{action} {q}"] = r.text
    r = await client.post("/api/marking/assignments/hw-nc/accept", headers=AUTH)
    out["accept run"] = r.text
    return out


async def sse_prefix(client: httpx.AsyncClient) -> str:
    """The live-events stream replayed from the start (cursor 0-0) for a moment, if served."""
    chunks: list[str] = []
    try:
        async with client.stream("GET", "/api/marking/events?assignment_id=hw-nc",
                                 headers={**AUTH, "last-event-id": "0-0"}) as r:
            if r.status_code != 200:
                return ""
            async with asyncio.timeout(1.5):
                async for text in r.aiter_text():
                    chunks.append(text)
    except (TimeoutError, httpx.HTTPError):
        pass
    return "".join(chunks)


async def monitor_pages(client: httpx.AsyncClient, conn: asyncpg.Connection) -> dict[str, str]:
    """Every /ai-queue view an operator can open (if the page exists)."""
    login = await client.post("/ai-queue/login", data={"password": SECRET})
    if login.status_code not in (302, 303):
        return {}
    out = {}
    paths = ["/ai-queue", "/ai-queue?status=failed", "/ai-queue?status=completed",
             "/ai-queue/fragment", "/ai-queue/fragment?part=chart"]
    paths += [f"/ai-queue/rows/{q}" for (q,) in await conn.fetch(
        "SELECT queue_id FROM ai_marking_queue")]
    for path in paths:
        r = await client.get(path)
        if r.status_code == 404 and path == "/ai-queue":
            return {}
        out[path] = r.text
    return out
