"""A model emulator (a test double): an OpenAI-compatible chat API with a token budget.

`python -m bench.model PORT [--tokens N] [--window S] ...` serves
`POST /v1/chat/completions` as a paid API behind a shared key would:

- a token budget of `--tokens` per `--window` seconds, kept as a token bucket
  (full at start, refilled continuously, as OpenAI's limits are); a call costs
  `--call-tokens` (4/5 prompt, 1/5 completion).  A call the bucket cannot pay
  for is answered `429` with OpenAI's rate-limit headers
  (`x-ratelimit-limit/remaining/reset-tokens`, `...-requests`; the reset is
  when the bucket is full again).  With `--retry-after-ms` it also sends the
  header Azure's OpenAI adds: when this one call would fit;
- a latency drawn from `--latency LO HI` seconds that grows past
  `--sweet-spot` calls at once (each call beyond it adds a quarter);
- `GET /stats`: calls, refusals, tokens used, the most calls at once, the time of
  the first call and of the last answer, and when each call and refusal came.

It always answers a valid marking.  It is no product feature: the e2e tests
and the bench run the reference function (functions/ai_mark, backend openai)
against it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import random
import time
from dataclasses import dataclass, field

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route


def duration(seconds: float) -> str:
    """OpenAI's reset format: `6m0s`, `1.5s`, `20ms`."""
    if seconds < 1:
        return f"{max(0, math.ceil(seconds * 1000))}ms"
    minutes, rest = divmod(seconds, 60)
    return f"{int(minutes)}m{rest:.3g}s" if minutes else f"{rest:.3g}s"


@dataclass
class Model:
    """The budget, the latency and what happened."""

    tokens: int = 0  # per window; 0 = no limit
    window: float = 60.0
    call_tokens: int = 800
    latency: tuple[float, float] = (0.4, 0.6)
    sweet_spot: int = 4
    retry_after_ms: bool = False
    level: float = 0.0
    stamp: float = field(default_factory=time.monotonic)
    calls: int = 0
    refused: int = 0
    used: int = 0
    busy: int = 0
    most_busy: int = 0
    first_call: float | None = None
    last_answer: float | None = None
    # Seconds from the first call to each call, and to each refusal.
    calls_at: list[float] = field(default_factory=list)
    refused_at: list[float] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.level = float(self.tokens)

    def _refill(self, now: float) -> None:
        rate = self.tokens / self.window
        self.level = min(float(self.tokens), self.level + (now - self.stamp) * rate)
        self.stamp = now

    def _refusal(self, now: float) -> Response:
        rate = self.tokens / self.window
        wait = (self.call_tokens - self.level) / rate
        full = (self.tokens - self.level) / rate
        headers = {
            "x-ratelimit-limit-tokens": str(self.tokens),
            "x-ratelimit-remaining-tokens": str(int(self.level)),
            "x-ratelimit-reset-tokens": duration(full),
            "x-ratelimit-limit-requests": "10000",
            "x-ratelimit-remaining-requests": "9999",
            "x-ratelimit-reset-requests": "6ms",
        }
        if self.retry_after_ms:
            headers["retry-after-ms"] = str(math.ceil(wait * 1000))
        body = {"error": {"message": "Rate limit reached for tokens", "type": "tokens",
                          "param": None, "code": "rate_limit_exceeded"}}
        return JSONResponse(body, status_code=429, headers=headers)

    async def chat(self, request: Request) -> Response:
        body = await request.json()
        now = time.monotonic()
        self.calls += 1
        self.first_call = self.first_call or now
        self.calls_at.append(round(now - self.first_call, 4))
        if self.tokens:
            self._refill(now)
            if self.level < self.call_tokens:
                self.refused += 1
                self.refused_at.append(round(now - self.first_call, 4))
                return self._refusal(now)
            self.level -= self.call_tokens
        self.busy += 1
        self.most_busy = max(self.most_busy, self.busy)
        try:
            slower = 1 + max(0, self.busy - self.sweet_spot) / 4
            await asyncio.sleep(random.uniform(*self.latency) * slower)
        finally:
            self.busy -= 1
        self.used += self.call_tokens
        self.last_answer = time.monotonic()
        prompt = self.call_tokens * 4 // 5
        reply = json.dumps({"score": 1, "feedback": "Clear and correct."})
        return JSONResponse({
            "id": f"chatcmpl-{self.calls}", "object": "chat.completion",
            "created": int(time.time()), "model": body.get("model", "emulated"),
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": reply}}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": self.call_tokens - prompt,
                      "total_tokens": self.call_tokens},
        })

    async def stats(self, request: Request) -> Response:
        return JSONResponse({
            "calls": self.calls, "refused": self.refused, "tokens_used": self.used,
            "most_busy": self.most_busy,
            "calls_at": self.calls_at, "refused_at": self.refused_at,
            "seconds": (self.last_answer - self.first_call)
            if self.first_call and self.last_answer else None,
        })


def create_app(model: Model) -> Starlette:
    return Starlette(routes=[
        Route("/v1/chat/completions", model.chat, methods=["POST"]),
        Route("/stats", model.stats, methods=["GET"]),
    ])


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.model")
    parser.add_argument("port", type=int)
    parser.add_argument("--tokens", type=int, default=0, help="budget per window (0: none)")
    parser.add_argument("--window", type=float, default=60.0)
    parser.add_argument("--call-tokens", type=int, default=800)
    parser.add_argument("--latency", type=float, nargs=2, default=(0.4, 0.6))
    parser.add_argument("--sweet-spot", type=int, default=4)
    parser.add_argument("--retry-after-ms", action="store_true")
    args = parser.parse_args()
    model = Model(tokens=args.tokens, window=args.window, call_tokens=args.call_tokens,
                  latency=tuple(args.latency), sweet_spot=args.sweet_spot,
                  retry_after_ms=args.retry_after_ms)
    uvicorn.run(create_app(model), host="127.0.0.1", port=args.port, log_level="warning",
                access_log=False)


if __name__ == "__main__":
    main()
