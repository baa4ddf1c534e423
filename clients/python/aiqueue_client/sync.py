"""Calling the client from synchronous code (a script, a Django view): one call, one loop."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

from aiqueue_client.client import AsyncMarkingClient

T = TypeVar("T")


def call(base_url: str, secret: str, use: Callable[[AsyncMarkingClient], Awaitable[T]]) -> T:
    """`call(url, secret, lambda queue: queue.progress("hw-7"))`, run to its end.

    Not from inside a running event loop: there, await the client itself.
    """
    async def go() -> T:
        async with AsyncMarkingClient(base_url, secret) as client:
            return await use(client)
    return asyncio.run(go())
