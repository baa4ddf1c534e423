"""A host app's notification receiver on loopback: verifies every request, answers as told."""

from __future__ import annotations

import asyncio
import secrets
import threading
import time
from base64 import b64encode
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from standardwebhooks.webhooks import Webhook, WebhookVerificationError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.e2e.servers import free_port, run_asgi


def new_secret() -> str:
    """A fresh Standard Webhooks secret (whsec_ + base64 of 32 random bytes)."""
    return "whsec_" + b64encode(secrets.token_bytes(32)).decode()


@dataclass(frozen=True)
class Received:
    """One request as the receiver saw it: its id, raw body, and what the verifier said."""

    webhook_id: str
    body: bytes
    payload: dict[str, Any] | None  # the verified JSON; None when verification failed
    answered: int


class Receiver:
    """Answers `answers` in order (then 200); holds the next `hold` requests until released."""

    def __init__(self, secret: str, answers: list[int] | None = None, hold: int = 0) -> None:
        self.verifier = Webhook(secret)
        self.answers = list(answers or [])
        self.hold = hold
        self.released = threading.Event()
        self.received: list[Received] = []
        # Webhook ids in order of arrival, answered or not (held requests too).
        self.arrived: list[str] = []
        self.lock = threading.Lock()
        self.app = Starlette(routes=[Route("/hook", self.hook, methods=["POST"])])
        self.port = free_port()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    async def hook(self, request: Request) -> Response:
        body = await request.body()
        headers = dict(request.headers)
        try:
            payload = self.verifier.verify(body, headers)
        except WebhookVerificationError:
            payload = None
        with self.lock:
            self.arrived.append(headers.get("webhook-id", ""))
            held = self.hold > 0
            self.hold -= held
            status = self.answers.pop(0) if self.answers and not held else 200
        if held:
            # The sender is killed meanwhile: nothing it sent counts as delivered.
            while not self.released.is_set():
                await asyncio.sleep(0.02)
            status = 503
        with self.lock:
            self.received.append(Received(headers.get("webhook-id", ""), body, payload, status))
        return Response(status_code=status)

    def wait_for(self, predicate: Any, timeout: float) -> None:
        """Wait until predicate(receiver) holds; fail the test after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if predicate(self):
                    return
            time.sleep(0.05)
        raise AssertionError(f"receiver: condition not met in {timeout}s; got {self.received}")

    def delivered(self) -> dict[str, dict[str, Any]]:
        """Verified payloads answered 2xx, by webhook id."""
        with self.lock:
            return {r.webhook_id: r.payload for r in self.received
                    if r.payload is not None and 200 <= r.answered < 300}


@contextmanager
def serving(receiver: Receiver) -> Iterator[Receiver]:
    with run_asgi(receiver.app, receiver.port):
        try:
            yield receiver
        finally:
            receiver.released.set()
