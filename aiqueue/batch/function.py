"""The marking function's `render` and `parse` modes (docs/overnight.md), called synchronously.

Each call is a POST to the kind's function with the usual auth (bearer, and
the Standard Webhooks signature when a signing secret is set). Bodies are cut
into slices under the function's 1 MB body limit.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import httpx

from aiqueue.dispatch.targets import http_request
from aiqueue.errors import AiQueueError
from aiqueue.settings.targets import KindTarget

# The function refuses bodies over 1 MiB; leave room for the envelope.
SLICE_BYTES = 900 * 1024


class FunctionModeError(AiQueueError):
    """A render or parse call failed; `code` is short and content-free."""

    def __init__(self, code: str) -> None:
        super().__init__(code)
        self.code = code


@dataclass(frozen=True)
class Rendered:
    """The provider requests by queue_id, and the items of jobs that can't be rendered."""

    requests: dict[str, dict[str, Any]]
    items: list[dict[str, Any]]


class FunctionModes:
    """Render jobs into provider requests and parse provider answers into webhook items."""

    def __init__(self, http: httpx.AsyncClient, target: KindTarget) -> None:
        self.http, self.target = http, target

    async def render(self, provider: str, model: str, jobs: Sequence[dict[str, Any]]
                     ) -> Rendered:
        requests: dict[str, dict[str, Any]] = {}
        items: list[dict[str, Any]] = []
        for part in slices(jobs):
            answer = await self._call({"mode": "render", "provider": provider, "model": model,
                                       "jobs": part})
            for entry in _list(answer, "requests"):
                if isinstance(entry, dict) and isinstance(entry.get("body"), dict):
                    requests[str(entry.get("queue_id"))] = entry["body"]
            items += [i for i in _list(answer, "items") if isinstance(i, dict)]
        return Rendered(requests, items)

    async def parse(self, provider: str, responses: Sequence[dict[str, Any]]
                    ) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        for part in slices(responses):
            answer = await self._call({"mode": "parse", "provider": provider,
                                       "responses": part})
            items += [i for i in _list(answer, "items") if isinstance(i, dict)]
        return items

    async def _call(self, body: dict[str, Any]) -> dict[str, Any]:
        data = json.dumps(body).encode()
        out = http_request(self.target, data, datetime.now(UTC),
                           message_id=f"batch.{uuid.uuid4()}")
        try:
            response = await self.http.post(out.url, content=data, headers=out.headers,
                                            timeout=self.target.dispatch_timeout_seconds)
        except httpx.TimeoutException:
            raise FunctionModeError("function_timeout") from None
        except httpx.HTTPError:
            raise FunctionModeError("function_unreachable") from None
        if response.status_code != 200:
            raise FunctionModeError(f"function_http_{response.status_code}")
        try:
            answer = response.json()
        except ValueError:
            answer = None
        if not isinstance(answer, dict):
            raise FunctionModeError("function_bad_answer")
        return answer


def slices(entries: Sequence[dict[str, Any]], limit: int = SLICE_BYTES
           ) -> Iterator[list[dict[str, Any]]]:
    """`entries` in runs whose JSON stays under `limit` bytes (one entry at least)."""
    part: list[dict[str, Any]] = []
    size = 0
    for entry in entries:
        length = len(json.dumps(entry)) + 1
        if part and size + length > limit:
            yield part
            part, size = [], 0
        part.append(entry)
        size += length
    if part:
        yield part


def _list(answer: dict[str, Any], key: str) -> list[Any]:
    value = answer.get(key)
    return value if isinstance(value, list) else []
