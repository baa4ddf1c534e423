"""The doctor tests' function stand-in: a respx handler that acks probes and calls back
through the app, and the report's checks by name."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import httpx


def fake_function(client: httpx.AsyncClient, answer: Callable[[dict[str, Any]], Any],
                  status: int = 202) -> Callable[[httpx.Request], httpx.Response]:
    """A function that acks the probe and calls back `answer(dispatch)` through the app."""
    tasks: set[asyncio.Task[Any]] = set()

    def handle(request: httpx.Request) -> httpx.Response:
        dispatch = json.loads(request.content)
        item = answer(dispatch)
        if item is not None and status < 300:
            task = asyncio.get_running_loop().create_task(
                client.post("/webhooks/ai-mark", json=[item]))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
        return httpx.Response(status, json={"accepted": status < 300})
    return handle


def knows_probes(d: dict[str, Any]) -> dict[str, Any]:
    assert d["probe"] is True and "submission" not in d and "payload" not in d
    return {"queue_id": d["queue_id"], "token": d["callback_token"], "status": "probe"}


def checks(report: dict[str, Any]) -> dict[str, tuple[str, str, str | None]]:
    return {c["name"]: (c["status"], c["detail"], c["fix"]) for c in report["checks"]}
