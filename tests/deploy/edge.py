"""A tiny stand-in for Vercel's edge: vercel.json's rewrites pick the function, then proxy."""

from __future__ import annotations

from http.cookiejar import CookieJar, DefaultCookiePolicy

import httpx
from starlette.requests import Request
from starlette.types import Receive, Scope, Send

from aiqueue.vercel.vercel_json import Rewrite, route

# Hop-by-hop or recomputed headers, never copied across the proxy.
_DROP = {b"host", b"content-length", b"transfer-encoding", b"connection", b"content-encoding"}


class Edge:
    """Routes public paths to function servers.

    `mode` is what the function is invoked with: `public` (the path the client asked for)
    or `destination` (the rewrite's destination, captures in the query), the two forms
    Vercel's Python runtime may hand the app.
    """

    def __init__(self, rewrites: list[Rewrite], ports: dict[str, int]) -> None:
        self.rewrites, self.ports = rewrites, ports
        self.mode = "destination"
        self.seen: list[tuple[str, str]] = []  # (entry, target) of every proxied request
        self.client: httpx.AsyncClient | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        assert scope["type"] == "http"
        request = Request(scope, receive)
        path, query = scope["path"], scope["query_string"].decode("latin-1")
        routed = route(self.rewrites, path, query)
        if routed is None:
            await _answer(send, 404, [], b"NOT_FOUND")
            return
        dest, dest_query = routed
        entry = dest.lstrip("/") + ".py"
        target = f"{dest}?{dest_query}" if self.mode == "destination" else f"{path}?{query}"
        self.seen.append((entry, target))
        headers = [(k, v) for k, v in request.headers.raw if k.lower() not in _DROP]
        headers += [(b"x-matched-path", dest.encode()), (b"x-forwarded-proto", b"http"),
                    (b"x-forwarded-host", request.headers.get("host", "").encode())]
        if self.client is None:
            # A proxy keeps no cookies: each client's own travel in its headers.
            jar = CookieJar(policy=DefaultCookiePolicy(allowed_domains=[]))
            self.client = httpx.AsyncClient(timeout=120, cookies=jar)
        answer = await self.client.request(
            request.method, f"http://127.0.0.1:{self.ports[entry]}{target.rstrip('?')}",
            headers=headers, content=await request.body())
        out = [(k, v) for k, v in answer.headers.raw if k.lower() not in _DROP]
        await _answer(send, answer.status_code, out, answer.content)


async def _answer(send: Send, status: int, headers: list[tuple[bytes, bytes]],
                  body: bytes) -> None:
    headers = [*headers, (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
