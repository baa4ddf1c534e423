"""The native targets end to end: the app's environment for DigitalOcean and Lambda, and a run
of the real app over them."""

from __future__ import annotations

from typing import Any

import asyncpg
import httpx

from tests.conftest import SECRET, add_submissions
from tests.e2e.emulators import REGION
from tests.e2e.servers import AppProcess, drain

NAMESPACE = "fn-0d1e6ab4-43a2-4a4e-9c1b-1f0ee4c5e8a2"
DO_KEY = "0d1e6ab4-43a2-4a4e-9c1b-1f0ee4c5e8a2:do-secret-key"


def app_env(db_url: str, **target: str) -> dict[str, str]:
    return {"DATABASE_URL": db_url, "MARKING_QUEUE_SECRET": SECRET,
            "QUEUE_MAX_IN_FLIGHT": "3", "QUEUE_MAX_ATTEMPTS": "2",
            "QUEUE_RETRY_BASE_SECONDS": "0", "QUEUE_BREAKER_THRESHOLD": "100",
            "QUEUE_TICK_SECONDS": "1", **target}


async def enqueue_through(app: AppProcess, ids: list[Any], assignment: str) -> None:
    """Enqueue the submissions through the real app's API (the app is running)."""
    async with httpx.AsyncClient(base_url=app.url, timeout=30) as client:
        r = await client.post("/api/marking/enqueue", headers={
            "authorization": f"Bearer {SECRET}"}, json={
            "assignment_id": assignment, "submission_ids": [str(i) for i in ids],
            "payload": {"rubric": "- names the key idea", "max_score": 5}})
        assert r.status_code == 202, r.text


async def run_queue(app: AppProcess, conn: asyncpg.Connection, n: int) -> dict[str, Any]:
    """Enqueue n submissions through the real app and wait until none is live."""
    ids = await add_submissions(conn, n, "hw-native")
    app.start()
    try:
        await enqueue_through(app, ids, "hw-native")
        await drain(conn, timeout=120)
    finally:
        app.stop()
    rows = await conn.fetch("SELECT status, last_error FROM ai_marking_queue")
    history = await conn.fetch("SELECT outcome, error, dispatch_ref FROM ai_marking_attempts "
                               "WHERE kind = 'dispatch'")
    marked = await conn.fetchval("SELECT count(*) FROM submissions WHERE ai_result IS NOT NULL")
    return {"rows": rows, "history": history, "marked": marked}


def do_target(port: int, auth: str) -> dict[str, str]:
    return {"AI_MARKING_DISPATCH": "digitalocean",
            "DO_FUNCTIONS_API_HOST": f"http://127.0.0.1:{port}",
            "DO_FUNCTIONS_NAMESPACE": NAMESPACE, "DO_FUNCTIONS_ACTION": "ai-mark/mark",
            "DO_FUNCTIONS_AUTH": auth}


def lambda_target(endpoint: str, key_id: str, secret: str, function: str) -> dict[str, str]:
    return {"AI_MARKING_DISPATCH": "lambda", "AWS_REGION": REGION,
            "AWS_ACCESS_KEY_ID": key_id, "AWS_SECRET_ACCESS_KEY": secret,
            "AI_MARKING_LAMBDA_FUNCTION": function, "AWS_ENDPOINT_URL_LAMBDA": endpoint}
