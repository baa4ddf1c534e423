"""How the client talks to the app: one httpx client, the bearer, retries of safe calls, and
the API's JSON errors raised as MarkingError."""

from __future__ import annotations

import asyncio
from types import TracebackType
from typing import Self

import httpx

from aiqueue_client.errors import error_from

RETRIES = 3
MAX_RETRY_WAIT = 10.0


class Transport:
    """The connection every call goes through: the httpx client, auth, retries, errors."""

    def __init__(self, base_url: str = "", secret: str = "", *,
                 http: httpx.AsyncClient | None = None, timeout: float = 30.0) -> None:
        self._own = http is None
        self.http = http or httpx.AsyncClient(
            base_url=base_url, timeout=timeout,
            headers={"authorization": f"Bearer {secret}"} if secret else {})

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._own:
            await self.http.aclose()

    async def _call(self, method: str, path: str, *, json: object = None,
                    params: dict[str, str] | None = None, headers: dict[str, str] | None = None,
                    retry: bool = False) -> httpx.Response:
        """One request; with `retry`, network errors and 503s are tried again (it is safe)."""
        for attempt in range(RETRIES if retry else 1):
            last = attempt == (RETRIES if retry else 1) - 1
            try:
                response = await self.http.request(method, path, json=json, params=params,
                                                   headers=headers)
            except httpx.TransportError:
                if last:
                    raise
                await asyncio.sleep(0.5 * 2 ** attempt)
                continue
            if response.status_code < 400:
                return response
            error = error_from(response)
            if response.status_code != 503 or last:
                raise error
            await asyncio.sleep(min(error.retry_after or 0.5 * 2 ** attempt, MAX_RETRY_WAIT))
        raise AssertionError("unreachable")  # the loop returns or raises


def actor_header(actor: str | None) -> dict[str, str] | None:
    """The X-Actor header recorded with a review action (none: not sent)."""
    return {"X-Actor": actor} if actor else None
