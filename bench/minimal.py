"""The floor for the whole hop chain: a minimal hand-written loop of the same hops.

Starlette + uvicorn, asyncpg (with its statement cache: a hand-written loop on
a direct connection would have one) and a keep-alive HTTP client; the webhook
marks its row done and claims and dispatches the next one itself.  No tokens,
retries, history, events, breaker or cap bookkeeping: what the product pays
on top of this is the price of its guarantees.  Run as its own process
(`python -m bench.minimal PORT`) against bench.fnserver.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

TABLE = """
CREATE TABLE IF NOT EXISTS minimal_jobs (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    status text NOT NULL DEFAULT 'pending',
    result jsonb
);
CREATE INDEX IF NOT EXISTS minimal_jobs_pending ON minimal_jobs (id) WHERE status = 'pending';
"""
CLAIM = """
UPDATE minimal_jobs SET status = 'processing'
WHERE id = (SELECT id FROM minimal_jobs WHERE status = 'pending'
            AND (SELECT count(*) FROM minimal_jobs WHERE status = 'processing') < $1
            ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED)
RETURNING id
"""


def main() -> None:
    port, dsn, fn_url = int(sys.argv[1]), os.environ["DATABASE_URL"], os.environ["FN_URL"]
    cap = int(os.environ.get("CAP", "1"))
    state: dict[str, Any] = {}

    async def claim_and_dispatch() -> None:
        row = await state["pool"].fetchrow(CLAIM, cap)
        if row is not None:
            await state["http"].post(fn_url, json={
                "queue_id": str(row["id"]), "callback_token": "-",
                "callback_url": f"http://127.0.0.1:{port}/webhook"})

    async def enqueue(request: Request) -> Response:
        n = (await request.json())["n"]
        await state["pool"].execute(
            "INSERT INTO minimal_jobs (status) SELECT 'pending' FROM generate_series(1, $1)", n)
        return JSONResponse({"enqueued": n},
                            background=BackgroundTask(_fill, claim_and_dispatch, cap))

    async def webhook(request: Request) -> Response:
        for item in await request.json():
            await state["pool"].execute(
                "UPDATE minimal_jobs SET status = 'completed', result = $2 "
                "WHERE id = $1 AND status = 'processing'",
                int(item["queue_id"]), json.dumps(item["result"]))
        return JSONResponse({"accepted": 1}, background=BackgroundTask(claim_and_dispatch))

    async def done(request: Request) -> Response:
        n = await state["pool"].fetchval(
            "SELECT count(*) FROM minimal_jobs WHERE status = 'completed'")
        return JSONResponse({"done": n})

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        state["pool"] = await asyncpg.create_pool(dsn, min_size=2, max_size=10)
        await state["pool"].execute(TABLE)
        state["http"] = httpx.AsyncClient(timeout=30)
        yield
        await state["http"].aclose()
        await state["pool"].close()

    app = Starlette(lifespan=lifespan, routes=[
        Route("/enqueue", enqueue, methods=["POST"]),
        Route("/webhook", webhook, methods=["POST"]),
        Route("/done", done),
    ])
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


async def _fill(step: Any, cap: int) -> None:
    for _ in range(cap):
        await step()


if __name__ == "__main__":
    main()
