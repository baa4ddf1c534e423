"""An instant marking function for benchmarks: ack 202, call back at once, time the gaps.

Run as its own process (`python -m bench.fnserver PORT [BATCH]`) so it does not
share the measuring process's GIL.  The dispatch gap is measured here, on one
clock: from just before a callback is sent to the arrival of the next dispatch.
With BATCH > 1 the results wait until BATCH of them (or every job out) can go
in one webhook, as a function that reports in batches.  With SECONDS (`python -m
bench.fnserver PORT BATCH SECONDS`) each job takes that long, as a model call does.
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
    def __init__(self, batch: int = 1, seconds: float = 0.0) -> None:
        self.batch = batch
        self.seconds = seconds
        self.waiting: list[tuple[str, dict[str, Any]]] = []
        self.last_callback_at: float | None = None
        self.gaps: list[float] = []
        self.dispatches = 0
        self.callbacks = 0
        self.callback_errors = 0
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
        if self.seconds:
            await asyncio.sleep(self.seconds)
        item = {"queue_id": job["queue_id"], "token": job["callback_token"],
                "status": "completed", "result": {"score": 1, "max_score": 1, "feedback": "ok"},
                # What a model reports: the turns' counters and the spend are corrected by it.
                "usage": {"model": "bench-model", "prompt_tokens": 800, "completion_tokens": 200}}
        self.waiting.append((job["callback_url"], item))
        if len(self.waiting) < self.batch:
            if len(self.waiting) == 1:
                # The rest of a batch comes soon, or this goes alone after a pause.
                await asyncio.sleep(0.05)
            else:
                return
        sending, self.waiting = self.waiting, []
        if not sending:
            return
        self.in_flight -= len(sending)
        self.last_callback_at = time.perf_counter()
        for tries_left in (2, 1, 0):
            try:
                await self.client.post(sending[0][0], json=[i for _, i in sending])
                break
            except httpx.TransportError:
                # A kept-alive connection the app closed meanwhile, as a function would
                # see it: sent again, or the job would wait for recovery and stall the run.
                self.callback_errors += 1
                if not tries_left:
                    raise
        self.callbacks += len(sending)

    async def stats(self, request: Request) -> Response:
        return JSONResponse({"gaps": self.gaps, "dispatches": self.dispatches,
                             "callbacks": self.callbacks, "max_in_flight": self.max_in_flight,
                             "callback_errors": self.callback_errors})

    async def reset(self, request: Request) -> Response:
        self.__init__(self.batch, self.seconds)  # type: ignore[misc]
        return JSONResponse({})


def main() -> None:
    rec = Recorder(int(sys.argv[2]) if len(sys.argv) > 2 else 1,
                   float(sys.argv[3]) if len(sys.argv) > 3 else 0.0)
    app = Starlette(routes=[
        Route("/mark", rec.mark, methods=["POST"]),
        Route("/stats", rec.stats, methods=["GET"]),
        Route("/reset", rec.reset, methods=["POST"]),
    ])
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning",
                access_log=False)


if __name__ == "__main__":
    main()
