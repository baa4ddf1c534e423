"""What both emulators share: the behaviour of a batch, its clock, and the model's answer."""

from __future__ import annotations

import asyncio
import json
import re
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

# How one line of a batch ends: answered; errored (the model call failed: OpenAI
# puts it in the error file with a 500, Anthropic reports `errored`); or expired
# (the batch's window closed before it ran).
LineFate = Literal["ok", "error", "expire"]


def _all_ok(custom_id: str, body: dict[str, Any]) -> LineFate:
    return "ok"


@dataclass
class Behaviour:
    """How one batch goes, from its creation.

    - `delay`: seconds until its last line is done (lines finish evenly across it);
    - `fail`: it is created fine and then fails (OpenAI: status `failed`;
      Anthropic, which has no failed batch: every line `errored`);
    - `stall`: no line ever finishes by itself; the batch waits for a cancel or
      for its window to close (then every line expires);
    - `line`: the fate of each line (errored lines, partial expiry). A batch
      whose every line errors is OpenAI's "completed with only an error file";
    - `cancel_delay`: seconds a cancel takes (OpenAI: "within about 10 min");
      lines that finish meanwhile still have their answer.
    """

    delay: float = 0.0
    fail: bool = False
    stall: bool = False
    cancel_delay: float = 0.0
    line: Callable[[str, dict[str, Any]], LineFate] = _all_ok


@dataclass
class Faults:
    """Trouble a real provider sometimes gives, injected into an emulator.

    - `create_delay` / `upload_delay`: the create's (OpenAI: also the upload's)
      answer comes this many seconds late, after the batch (file) was made, so a
      client that timed out never learns its id;
    - `results_broken`: an ended batch's results can't be read (500);
    - `refuse_create`: a create is refused (400) and makes nothing;
    - `forget()` on the emulator: its records are reset under running batches (404).
    """

    create_delay: float = 0.0
    upload_delay: float = 0.0
    results_broken: bool = False
    refuse_create: bool = False


@dataclass
class Clock:
    """The emulators' time; tests may move it forward instead of sleeping."""

    offset: float = 0.0
    base: Callable[[], float] = field(default=time.time)

    def __call__(self) -> float:
        return self.base() + self.offset

    def advance(self, seconds: float) -> None:
        self.offset += seconds


def new_id(prefix: str, length: int = 24) -> str:
    """An id shaped like the provider's: a prefix and random letters and digits."""
    alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
    return prefix + "".join(secrets.choice(alphabet) for _ in range(length))


_MAX_SCORE = re.compile(r"number from 0 to (\d+(?:\.\d+)?)")


def mark_text(prompt: str) -> str:
    """The emulated model's reply: a JSON mark the reference function's `parse` reads.

    The score is half the maximum the prompt names (0 when it names none).
    """
    match = _MAX_SCORE.search(prompt)
    top = float(match.group(1)) if match else 0.0
    score = int(top // 2)
    return json.dumps({"score": score, "feedback": "Emulated mark: clear and mostly complete."})


def count_tokens(text: str) -> int:
    """A rough token count (4 characters a token), enough for the cost figures."""
    return max(1, len(text) // 4)


def line_times(created: float, behaviour: Behaviour, n: int) -> list[float | None]:
    """When each of `n` lines finishes (None: never, the batch stalls)."""
    if behaviour.stall:
        return [None] * n
    return [created + behaviour.delay * (i + 1) / n for i in range(n)]


Handler = Callable[[Request], Awaitable[Response]]


class EmulatorBase:
    """What both providers' emulators share: the key, each batch's programmed behaviour
    and the clock it runs on, the provider's window and limits, what the "model"
    answered (each line answered is paid), and routes that refuse a wrong key first.

    A provider's emulator lists its `routes()` and says how it checks the key
    (`refuse`); its handlers then only see requests that carry the key.
    """

    def __init__(self, key: str, *, behaviours: Callable[[int], Behaviour] | None,
                 clock: Clock | None, window_seconds: float, max_requests: int,
                 max_bytes: int) -> None:
        self.key = key
        self.behaviours = behaviours or (lambda n: Behaviour())
        self.clock = clock or Clock()
        self.window_seconds = window_seconds
        self.max_requests, self.max_bytes = max_requests, max_bytes
        self.created = 0
        self.faults = Faults()
        # every custom_id the provider was ever sent (uploaded or in a create)
        self.received: list[str] = []
        self.requests_answered = 0  # lines the "model" ran (each one is paid)
        self.answered_ids: list[str] = []
        # How the key came: the names of the credential headers each request carried.
        self.auth_seen: set[tuple[str, ...]] = set()
        # every request, as "METHOD /path?query"
        self.calls: list[str] = []
        self.app = Starlette(routes=[Route(path, self._guarded(handler), methods=methods)
                                     for path, methods, handler in self.routes()])

    def routes(self) -> list[tuple[str, list[str], Handler]]:
        raise NotImplementedError

    def refuse(self, request: Request) -> Response | None:
        """The provider's answer to a request without the right key (None: it has it)."""
        raise NotImplementedError

    def forget(self) -> None:
        """The provider's records of batches are reset (running ones among them)."""
        raise NotImplementedError

    async def late(self, seconds: float) -> None:
        """Answer `seconds` late (a fault), the work already done."""
        if seconds:
            await asyncio.sleep(seconds)

    def broken(self) -> Response | None:
        """The results' answer while `results_broken` (None: they can be read)."""
        if not self.faults.results_broken:
            return None
        return Response(b'{"error": {"message": "Internal error"}}', status_code=500,
                        media_type="application/json")

    def next_behaviour(self) -> Behaviour:
        """The behaviour of the batch being created now."""
        self.created += 1
        return self.behaviours(self.created)

    def answered(self, custom_id: str) -> None:
        """The "model" ran one line (it is paid, whatever the app does with it)."""
        self.requests_answered += 1
        self.answered_ids.append(custom_id)

    def _guarded(self, handler: Handler) -> Handler:
        async def guarded(request: Request) -> Response:
            query = f"?{request.url.query}" if request.url.query else ""
            self.calls.append(f"{request.method} {request.url.path}{query}")
            self.auth_seen.add(tuple(sorted(h for h in ("authorization", "x-api-key")
                                            if h in request.headers)))
            refused = self.refuse(request)
            return refused if refused is not None else await handler(request)
        return guarded
