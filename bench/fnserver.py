"""An instant marking function for benchmarks: ack 202, call back at once, time the gaps.

Run as its own process (`python -m bench.fnserver PORT`) so it does not share
the measuring process's GIL.  The dispatch gap is measured here, on one clock:
from just before a callback is sent to the arrival of the next dispatch.
"""

from __future__ import annotations

import asyncio
import sys
import time
from typing import Any

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route


class Recorder:
    def __init__(self) -> None:
        self.last_callback_at: float | None = None
        self.gaps: list[float] = []
        self.dispatches = 0
        self.callbacks = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self.client: httpx.AsyncClient | None = None
        self.tasks: set[asyncio.Task[None]] = set()

    async def mark(self, request: Request) -> Response:
        now = time.perf_counter()
        if self.last_callback_at is not None and self.in_flight == 0:
            self.gaps.append(now - self.last_callback_at)
            self.last_callback_at = None
        job = await request.json()
        self.dispatches += 1
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        task = asyncio.create_task(self.callback(job))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return JSONResponse({"accepted": True}, status_code=202)

    async def callback(self, job: dict[str, Any]) -> None:
        if self.client is None:
            self.client = httpx.AsyncClient(timeout=30)
        item = {"queue_id": job["queue_id"], "token": job["callback_token"],
                "status": "completed", "result": {"score": 1, "max_score": 1, "feedback": "ok"}}
        self.in_flight -= 1
        self.last_callback_at = time.perf_counter()
        await self.client.post(job["callback_url"], json=[item])
        self.callbacks += 1

    async def stats(self, request: Request) -> Response:
        return JSONResponse({"gaps": self.gaps, "dispatches": self.dispatches,
                             "callbacks": self.callbacks, "max_in_flight": self.max_in_flight})

    async def reset(self, request: Request) -> Response:
        self.__init__()  # type: ignore[misc]
        return JSONResponse({})


def main() -> None:
    rec = Recorder()
    app = Starlette(routes=[
        Route("/mark", rec.mark, methods=["POST"]),
        Route("/stats", rec.stats, methods=["GET"]),
        Route("/reset", rec.reset, methods=["POST"]),
    ])
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning",
                access_log=False)


if __name__ == "__main__":
    main()
