"""An emulator of Anthropic's Message Batches API (`/v1/messages/batches`).

As documented: one JSON body holds ≤ 100,000 requests (≤ 256 MB), each a
`custom_id` of 1–64 characters of `[a-zA-Z0-9_-]`, unique in the batch, and
Messages `params`. The batch is `in_progress`, `canceling` or `ended`; once
ended, its results stream as JSONL from `results_url`, in no order, each
`succeeded`, `errored`, `canceled` or `expired`. An ended batch can be
deleted; one still processing must be cancelled first.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from tests.batchapi.common import (
    Behaviour,
    Clock,
    EmulatorBase,
    Handler,
    count_tokens,
    line_times,
    mark_text,
    new_id,
)

WINDOW_SECONDS = 24 * 3600
MAX_REQUESTS = 100_000
MAX_BYTES = 256 * 1024 * 1024
CUSTOM_ID = re.compile(r"[a-zA-Z0-9_-]{1,64}")
VERSION = "2023-06-01"


@dataclass
class Batch:
    id: str
    created_at: float
    behaviour: Behaviour
    requests: list[dict[str, Any]]
    times: list[float | None]
    status: str = "in_progress"
    cancel_at: float | None = None
    ended_at: float | None = None
    results: list[dict[str, Any]] = field(default_factory=list)


class AnthropicBatchAPI(EmulatorBase):
    """The emulated API; `behaviours(n)` programs the n-th batch (1-based)."""

    def __init__(self, key: str = "sk-ant-test-batch", *,
                 behaviours: Callable[[int], Behaviour] | None = None,
                 clock: Clock | None = None, window_seconds: float = WINDOW_SECONDS,
                 max_requests: int = MAX_REQUESTS, max_bytes: int = MAX_BYTES) -> None:
        self.batches: dict[str, Batch] = {}
        self.deleted: list[str] = []
        super().__init__(key, behaviours=behaviours, clock=clock,
                         window_seconds=window_seconds, max_requests=max_requests,
                         max_bytes=max_bytes)

    def routes(self) -> list[tuple[str, list[str], Handler]]:
        return [
            ("/v1/messages/batches", ["POST"], self.create),
            ("/v1/messages/batches", ["GET"], self.list_batches),
            ("/v1/messages/batches/{batch_id}", ["GET", "DELETE"], self.batch),
            ("/v1/messages/batches/{batch_id}/cancel", ["POST"], self.cancel),
            ("/v1/messages/batches/{batch_id}/results", ["GET"], self.results),
        ]

    def forget(self) -> None:
        self.batches.clear()

    def held(self) -> dict[str, list[str]]:
        """What the provider still keeps: every batch not deleted."""
        return {"batches": sorted(self.batches)}

    async def create(self, request: Request) -> Response:
        if self.faults.refuse_create:
            return _error(400, "invalid_request_error", "Too many batches in progress.")
        raw = await request.body()
        if len(raw) > self.max_bytes:
            return _error(413, "request_too_large", "Request exceeds the maximum size.")
        try:
            requests = json.loads(raw)["requests"]
        except (ValueError, KeyError, TypeError):
            return _error(400, "invalid_request_error", "requests: Field required")
        if problem := self._invalid(requests):
            return _error(400, "invalid_request_error", problem)
        now = self.clock()
        behaviour = self.next_behaviour()
        batch = Batch(new_id("msgbatch_01"), now, behaviour, requests,
                      line_times(now, behaviour, len(requests)))
        self.batches[batch.id] = batch
        self.received += [entry["custom_id"] for entry in requests]
        await self.late(self.faults.create_delay)
        return JSONResponse(self._json(batch, request))

    async def batch(self, request: Request) -> Response:
        batch = self._find(request)
        if batch is None:
            return _error(404, "not_found_error", "Batch not found.")
        self._advance(batch)
        if request.method == "DELETE":
            if batch.status != "ended":
                return _error(400, "invalid_request_error",
                              "Batch is still processing; cancel it before deleting it.")
            del self.batches[batch.id]
            self.deleted.append(batch.id)
            return JSONResponse({"id": batch.id, "type": "message_batch_deleted"})
        return JSONResponse(self._json(batch, request))

    async def cancel(self, request: Request) -> Response:
        batch = self._find(request)
        if batch is None:
            return _error(404, "not_found_error", "Batch not found.")
        self._advance(batch)
        if batch.status == "in_progress":
            batch.status, batch.cancel_at = "canceling", self.clock()
        return JSONResponse(self._json(batch, request))

    async def results(self, request: Request) -> Response:
        batch = self._find(request)
        if batch is None:
            return _error(404, "not_found_error", "Batch not found.")
        self._advance(batch)
        if batch.status != "ended":
            return _error(400, "invalid_request_error", "Batch has not ended yet.")
        if (broken := self.broken()) is not None:
            return broken
        body = "".join(json.dumps(line) + "\n" for line in batch.results)
        return Response(body.encode(), media_type="application/binary")

    async def list_batches(self, request: Request) -> Response:
        for batch in self.batches.values():
            self._advance(batch)
        data = [self._json(b, request) for b in reversed(self.batches.values())]
        return JSONResponse({"data": data, "has_more": False,
                             "first_id": data[0]["id"] if data else None,
                             "last_id": data[-1]["id"] if data else None})

    # -- the batch's course --------------------------------------------------

    def _invalid(self, requests: object) -> str | None:
        """Why Anthropic would refuse these requests (None: it accepts them)."""
        if not isinstance(requests, list) or not requests:
            return "requests: must be a non-empty list"
        if len(requests) > self.max_requests:
            return f"requests: at most {self.max_requests} requests in a batch"
        seen: set[str] = set()
        for i, entry in enumerate(requests):
            custom_id = entry.get("custom_id") if isinstance(entry, dict) else None
            if not isinstance(custom_id, str) or not CUSTOM_ID.fullmatch(custom_id):
                return f"requests.{i}.custom_id: String should match pattern " \
                       "'^[a-zA-Z0-9_-]{1,64}$'"
            if custom_id in seen:
                return f"requests.{i}.custom_id: custom_id must be unique within a batch"
            seen.add(custom_id)
            params = entry.get("params")
            if not (isinstance(params, dict) and isinstance(params.get("model"), str)
                    and isinstance(params.get("max_tokens"), int)
                    and isinstance(params.get("messages"), list)):
                return f"requests.{i}.params: model, max_tokens and messages are required"
        return None

    def _advance(self, batch: Batch) -> None:
        if batch.status == "ended":
            return
        now = self.clock()
        if batch.behaviour.fail:
            return self._end(batch, now, everything="errored")
        if batch.status == "canceling":
            # Requests already running when the cancel came may still finish.
            if now >= (batch.cancel_at or now) + batch.behaviour.cancel_delay:
                self._end(batch, now, leftover="canceled")
            return None
        if now >= batch.created_at + self.window_seconds:
            return self._end(batch, now, leftover="expired")
        if all(t is not None and t <= now and self._fate(batch, i) != "expire"
               for i, t in enumerate(batch.times)):
            self._end(batch, now, leftover="expired")

    def _fate(self, batch: Batch, index: int) -> str:
        entry = batch.requests[index]
        return batch.behaviour.line(entry["custom_id"], entry["params"])

    def _end(self, batch: Batch, now: float, leftover: str = "expired",
             everything: str | None = None) -> None:
        """End `batch`: lines done by `now` have their answer; the rest are `leftover`."""
        results = []
        for index, entry in enumerate(batch.requests):
            when, fate = batch.times[index], self._fate(batch, index)
            done = when is not None and when <= now and fate != "expire"
            if everything == "errored" or (done and fate == "error"):
                if everything is None:
                    self.requests_answered += 1
                result: dict[str, Any] = {"type": "errored", "error": {
                    "type": "error", "error": {"type": "api_error",
                                               "message": "Internal server error"}}}
            elif done:
                self.answered(entry["custom_id"])
                result = {"type": "succeeded", "message": message_for(entry["params"])}
            else:
                result = {"type": leftover}
            results.append({"custom_id": entry["custom_id"], "result": result})
        random.shuffle(results)  # results come in no order
        batch.results, batch.status, batch.ended_at = results, "ended", self.clock()

    def _json(self, batch: Batch, request: Request) -> dict[str, Any]:
        counts = {"processing": 0, "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0}
        if batch.status == "ended":
            for line in batch.results:
                counts[line["result"]["type"]] += 1
        else:
            counts["processing"] = len(batch.requests)
        base = str(request.base_url).rstrip("/")
        return {
            "id": batch.id, "type": "message_batch", "processing_status": batch.status,
            "request_counts": counts,
            "ended_at": _time(batch.ended_at), "created_at": _time(batch.created_at),
            "expires_at": _time(batch.created_at + self.window_seconds),
            "archived_at": None, "cancel_initiated_at": _time(batch.cancel_at),
            "results_url": f"{base}/v1/messages/batches/{batch.id}/results"
            if batch.status == "ended" else None,
        }

    def _find(self, request: Request) -> Batch | None:
        return self.batches.get(request.path_params["batch_id"])

    def refuse(self, request: Request) -> Response | None:
        # The documented header is `x-api-key`; the SDK (2.x) sends `api_key=` as a bearer.
        keys = {request.headers.get("x-api-key"),
                request.headers.get("authorization", "").removeprefix("Bearer ")}
        if self.key not in keys:
            return _error(401, "authentication_error", "invalid x-api-key")
        if not request.headers.get("anthropic-version"):
            return _error(400, "invalid_request_error",
                          "anthropic-version: header is required")
        return None


def message_for(params: dict[str, Any]) -> dict[str, Any]:
    """The Message the model would have answered to `params`."""
    parts = [str(params.get("system", ""))]
    for message in params["messages"]:
        content = message.get("content")
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):
            parts.extend(str(block.get("text", "")) for block in content)
    prompt = "\n".join(parts)
    text = mark_text(prompt)
    return {"id": new_id("msg_01"), "type": "message", "role": "assistant",
            "model": params["model"], "content": [{"type": "text", "text": text}],
            "stop_reason": "end_turn", "stop_sequence": None,
            "usage": {"input_tokens": count_tokens(prompt),
                      "output_tokens": count_tokens(text),
                      "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}}


def _time(value: float | None) -> str | None:
    if value is None:
        return None
    return datetime.fromtimestamp(value, UTC).isoformat().replace("+00:00", "Z")


def _error(status: int, kind: str, message: str) -> JSONResponse:
    return JSONResponse({"type": "error", "error": {"type": kind, "message": message}},
                        status_code=status)
